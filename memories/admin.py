"""The Django admin: curating memories through the service layer, and read-only views of the audit trail.

Every write goes through ``memories.services`` with the logged-in user as the actor
(``user:<username>``, interface ``admin``): forms call their service from ``clean()``
(``memories.admin_forms``), and actions call one service per memory inside one
transaction, so a refused memory leaves the whole batch unchanged.
"""

from django.contrib import admin, messages
from django.contrib.admin.views.main import ORDER_VAR, ChangeList
from django.db import transaction
from django.db.models import Case, IntegerField, Value, When
from django.http import StreamingHttpResponse
from django.template.response import TemplateResponse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.text import Truncator

from memories import selectors, services, validation
from memories.admin_forms import (
    ApiKeyCreateForm,
    EraseForm,
    MemoryAddForm,
    MemoryChangeForm,
    MoveForm,
    TagsForm,
    split_names,
)
from memories.admin_history import attach_shown_revisions, revision_history
from memories.models import ApiKey, AuditEvent, ErasureReceipt, Memory, Revision, State
from memories.services.keys import api_key_revoke
from memoryproject.exceptions import MemoryServiceError
from memoryproject.readonly_admin import ReadOnlyAdmin

PREVIEW_CHARS = 120


def admin_actor(request) -> str:
    return f"user:{request.user.username}"


# Memories ---------------------------------------------------------------------------------------------------------


class VisibleNowFilter(admin.SimpleListFilter):
    title = "visible now"
    parameter_name = "visible"

    def lookups(self, request, model_admin):
        return [("yes", "Visible now"), ("no", "Hidden now (forgotten, TTL passed or outside validity)")]

    def queryset(self, request, queryset):
        now = timezone.now()
        if self.value() == "yes":
            return queryset.filter(pk__in=Memory.objects.visible(as_of=now).values("pk"))
        if self.value() == "no":
            return queryset.filter(pk__in=Memory.objects.hidden(as_of=now).values("pk"))
        return None


class TtlFilter(admin.SimpleListFilter):
    title = "TTL"
    parameter_name = "ttl"

    def lookups(self, request, model_admin):
        return [("yes", "Has a TTL (text visible now expires)"), ("no", "No TTL")]

    def queryset(self, request, queryset):
        expiring = Revision.objects.visible(as_of=timezone.now()).filter(expires_at__isnull=False).values("memory_id")
        if self.value() == "yes":
            return queryset.filter(pk__in=expiring)
        if self.value() == "no":
            return queryset.exclude(pk__in=expiring)
        return None


class MemoryChangeList(ChangeList):
    def get_results(self, request):
        super().get_results(request)
        # The preview column needs each row's current revision: two queries for the page, not one per row.
        self.result_list = list(self.result_list)
        attach_shown_revisions(self.result_list, now=timezone.now())


def _ids(queryset) -> list[int]:
    return list(queryset.order_by("pk").values_list("pk", flat=True))


@admin.register(Memory)
class MemoryAdmin(admin.ModelAdmin):
    list_display = ("id", "preview", "namespace", "kind", "tag_list", "state_value", "last_change",
                    "revision_count")
    list_display_links = ("id", "preview")
    list_filter = ("namespace", "kind", ("tags", admin.RelatedOnlyFieldListFilter), "state", VisibleNowFilter,
                   TtlFilter)
    # The search box runs the recall engine (get_search_results); this only switches the box on.
    search_fields = ("recall",)
    search_help_text = ("Hybrid recall (keywords and meaning), best match first; it finds memories visible now. "
                        f"At most {validation.RECALL_LIMIT_MAX} matches.")
    ordering = ("-id",)
    list_per_page = 50
    actions = ("forget_memories", "restore_memories", "add_tag", "remove_tag", "move_namespace", "export_json",
               "erase_memories")
    change_form_template = "admin/memories/memory/change_form.html"

    # Queries and lists -----------------------------------------------------------------------------------------

    def get_queryset(self, request):
        return selectors.memories_with_revision_totals(super().get_queryset(request))

    def get_changelist(self, request, **kwargs):
        return MemoryChangeList

    def get_search_results(self, request, queryset, search_term):
        """Keep the memories recall finds for ``search_term``, in recall's order unless a column is sorted."""
        if not search_term.strip():
            return queryset, False
        namespace = request.GET.get("namespace__exact") or request.GET.get("namespace")
        try:
            result = selectors.memory_recall(query=search_term, namespace=namespace or None,
                                             limit=validation.RECALL_LIMIT_MAX)
        except MemoryServiceError as error:
            self.message_user(request, f"Search failed: {error.message}", messages.ERROR)
            return queryset.none(), False
        for line in (result.note, result.hint):
            if line:
                self.message_user(request, line, messages.INFO)
        ids = [hit.memory.id for hit in result.hits]
        queryset = queryset.filter(pk__in=ids)
        if ids and ORDER_VAR not in request.GET:
            rank = Case(*(When(pk=memory_id, then=Value(position)) for position, memory_id in enumerate(ids)),
                        output_field=IntegerField())
            queryset = queryset.order_by(rank)
        return queryset, False

    # Columns ---------------------------------------------------------------------------------------------------

    @admin.display(description="current text")
    def preview(self, memory):
        revision = getattr(memory, "shown_revision", None)
        if revision is None:
            return "—"
        text = Truncator(" ".join(revision.content.split())).chars(PREVIEW_CHARS)
        hidden = "" if memory.shown_is_visible or memory.state == State.FORGOTTEN else " (hidden now)"
        if revision.title:
            return format_html("<strong>{}</strong> {}{}", revision.title, text, hidden)
        return f"{text}{hidden}"

    @admin.display(description="state", ordering="state")
    def state_value(self, memory):
        return memory.state  # the word the API uses: active or forgotten

    @admin.display(description="tags")
    def tag_list(self, memory):
        return ", ".join(tag.name for tag in memory.tags.all())

    @admin.display(description="last change", ordering="last_change")
    def last_change(self, memory):
        return memory.last_change

    @admin.display(description="revisions", ordering="revision_count")
    def revision_count(self, memory):
        return memory.revision_count

    # The change and add pages ----------------------------------------------------------------------------------

    def get_fieldsets(self, request, obj=None):
        if obj is None:
            return [
                (None, {"fields": ("namespace", "key", "kind", "title", "content", "tags", "source")}),
                ("Time", {"fields": ("ttl_days", "valid_from", "valid_to")}),
            ]
        identity = (None, {"fields": ("namespace", "key", "state", "visible_now", "created_at")})
        if not self.has_change_permission(request, obj):
            return [identity]  # a viewer reads the text in the revision history below
        return [
            identity,
            ("Current text", {"fields": ("kind", "title", "content", "tags", "source")}),
            ("Time", {"fields": ("ttl_days", "valid_from", "valid_to")}),
        ]

    def get_readonly_fields(self, request, obj=None):
        return () if obj is None else ("namespace", "key", "state", "visible_now", "created_at")

    @admin.display(description="visible now")
    def visible_now(self, memory):
        revision = Revision.objects.filter(memory=memory).visible(as_of=timezone.now()).first()
        if revision is not None:
            return f"yes (revision {revision.pk})"
        if memory.state == State.FORGOTTEN:
            return "no: forgotten (restore it to edit)"
        return "no: its TTL passed or now is outside its validity interval"

    def get_form(self, request, obj=None, change=False, **kwargs):
        kwargs["form"] = MemoryAddForm if obj is None else MemoryChangeForm
        form = super().get_form(request, obj, change=change, **kwargs)
        form.actor = admin_actor(request)  # get_form built this class for this request
        return form

    def save_form(self, request, form, change):
        if change:
            return form.instance
        return Memory.objects.get(pk=form.result.memory.id)

    def save_model(self, request, obj, form, change):
        """The form's service call has written everything; say what it did."""
        if not change and form.result.deduplicated:
            self.message_user(request, f"Nothing new was stored: memory {obj.pk} ({obj}) already holds this text.",
                              messages.WARNING)
        elif not change and form.result.revised:
            self.message_user(request, f"The key already existed: a revision was added to memory {obj.pk}.",
                              messages.INFO)

    def save_related(self, request, form, formsets, change):
        pass  # tags are the form's memory_retag call

    def change_view(self, request, object_id, form_url="", extra_context=None):
        extra_context = dict(extra_context or {})
        memory = self.get_object(request, object_id)
        if memory is not None:
            extra_context["revision_history"] = revision_history(memory, now=timezone.now())
        return super().change_view(request, object_id, form_url, extra_context=extra_context)

    # Deleting is erasing: the erase action lists what goes and leaves receipts.

    def has_delete_permission(self, request, obj=None):
        return False

    def has_erase_permission(self, request):
        return super().has_delete_permission(request)

    def delete_model(self, request, obj):
        services.memory_erase(memory_id=obj.pk, actor=admin_actor(request), interface="admin")

    def delete_queryset(self, request, queryset):
        with transaction.atomic():
            for memory_id in _ids(queryset):
                services.memory_erase(memory_id=memory_id, actor=admin_actor(request), interface="admin")

    # Actions ---------------------------------------------------------------------------------------------------

    def _each(self, request, queryset, write) -> list | None:
        """Call ``write(memory_id)`` for every selected memory in one transaction; on a refusal, change nothing."""
        try:
            with transaction.atomic():
                return [write(memory_id) for memory_id in _ids(queryset)]
        except MemoryServiceError as error:
            self.message_user(request, f"Nothing was changed: {error.message}", messages.ERROR)
            return None

    def _report(self, request, results, verb: str, unchanged: str):
        if results is None:
            return
        changed = sum(result.changed for result in results)
        message = f"{verb} {changed} memor{'y' if changed == 1 else 'ies'}."
        if len(results) > changed:
            message += f" {len(results) - changed} {unchanged}."
        self.message_user(request, message, messages.SUCCESS)

    def _form_page(self, request, queryset, *, action: str, form, title: str, intro: str, button: str,
                   template: str = "admin/memories/memory/action_form.html", rows=None):
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": title,
            "intro": intro,
            "button": button,
            "form": form,
            "action": action,
            "rows": rows if rows is not None else list(queryset.order_by("pk")),
            "action_checkbox_name": admin.helpers.ACTION_CHECKBOX_NAME,
            "media": self.media,
        }
        return TemplateResponse(request, template, context)

    @admin.action(description="Forget selected memories (history stays; restore brings them back)",
                  permissions=["change"])
    def forget_memories(self, request, queryset):
        results = self._each(request, queryset, lambda memory_id: services.memory_forget(
            memory_id=memory_id, actor=admin_actor(request), interface="admin"))
        self._report(request, results, "Forgot", "already forgotten")

    @admin.action(description="Restore selected forgotten memories", permissions=["change"])
    def restore_memories(self, request, queryset):
        results = self._each(request, queryset, lambda memory_id: services.memory_restore(
            memory_id=memory_id, actor=admin_actor(request), interface="admin"))
        self._report(request, results, "Restored", "were not forgotten")

    def _retag(self, request, queryset, *, action: str, adding: bool):
        form = TagsForm(request.POST if "apply" in request.POST else None)
        if form.is_valid():
            names = split_names(form.cleaned_data["tags"])
            change = {"add": names} if adding else {"remove": names}
            results = self._each(request, queryset, lambda memory_id: services.memory_retag(
                memory_id=memory_id, actor=admin_actor(request), interface="admin", **change))
            self._report(request, results, "Tagged" if adding else "Untagged", "unchanged")
            if results is not None:
                return None
        verb = "Add" if adding else "Remove"
        return self._form_page(request, queryset, action=action, form=form, title=f"{verb} tags",
                               intro=f"{verb} these tags {'to' if adding else 'from'} the memories below.",
                               button=f"{verb} tags")

    @admin.action(description="Add a tag to selected memories", permissions=["change"])
    def add_tag(self, request, queryset):
        return self._retag(request, queryset, action="add_tag", adding=True)

    @admin.action(description="Remove a tag from selected memories", permissions=["change"])
    def remove_tag(self, request, queryset):
        return self._retag(request, queryset, action="remove_tag", adding=False)

    @admin.action(description="Move selected memories to another namespace", permissions=["change"])
    def move_namespace(self, request, queryset):
        form = MoveForm(request.POST if "apply" in request.POST else None)
        if form.is_valid():
            namespace = form.cleaned_data["namespace"]
            results = self._each(request, queryset, lambda memory_id: services.memory_move(
                memory_id=memory_id, namespace=namespace, actor=admin_actor(request), interface="admin"))
            self._report(request, results, f"Moved to {namespace!r}:", "already there")
            if results is not None:
                return None
        return self._form_page(request, queryset, action="move_namespace", form=form, title="Move to a namespace",
                               intro="Move the memories below, with their whole history and tags, to another "
                                     "namespace. A memory whose key or visible text the target already holds "
                                     "stops the move, and nothing moves.",
                               button="Move")

    @admin.action(description="Export selected memories as JSON (the import format)", permissions=["view"])
    def export_json(self, request, queryset):
        chunks = services.memories_export(memory_ids=_ids(queryset))
        response = StreamingHttpResponse(chunks, content_type="application/json; charset=utf-8")
        stamp = timezone.now().strftime("%Y%m%dT%H%M%SZ")
        response["Content-Disposition"] = f'attachment; filename="memories-{stamp}.json"'
        return response

    @admin.action(description="Erase selected memories for good (text, history and index entries)",
                  permissions=["erase"])
    def erase_memories(self, request, queryset):
        form = EraseForm(request.POST if request.POST.get("post") == "yes" else None)
        if form.is_valid():
            actor, reason = admin_actor(request), form.cleaned_data["reason"] or None
            try:
                with transaction.atomic():
                    receipts = [services.memory_erase(memory_id=memory_id, actor=actor, interface="admin",
                                                      reason=reason)
                                for memory_id in _ids(queryset)]
            except MemoryServiceError as error:
                self.message_user(request, f"Nothing was erased: {error.message}", messages.ERROR)
                return None
            listed = format_html_join(", ", "receipt {} (memory {} in {})",
                                      ((receipt.pk, receipt.memory_id, receipt.namespace) for receipt in receipts))
            self.message_user(request, format_html("Erased {} memories: {}.", len(receipts), listed),
                              messages.SUCCESS)
            return None
        rows = list(queryset.order_by("pk"))
        attach_shown_revisions(rows, now=timezone.now())
        return self._form_page(
            request, queryset, action="erase_memories", form=form, title="Erase memories for good",
            intro="These memories and every one of their revisions (tombstones included) will be destroyed, with "
                  "their search index entries and any tag only they use. Unlike forget, this cannot be undone, "
                  "and no earlier point in time will show them. Each leaves an erasure receipt with ids and "
                  "content hashes, never text.",
            button="Yes, erase them", template="admin/memories/memory/erase_confirmation.html", rows=rows)


# The audit trail: read-only -----------------------------------------------------------------------------------------


@admin.register(Revision)
class RevisionAdmin(ReadOnlyAdmin):
    list_display = ("id", "memory_link", "known_at", "tombstone", "title", "author", "interface", "valid_from",
                    "valid_to", "expires_at")
    list_filter = ("interface", "tombstone")
    list_select_related = ("memory",)
    ordering = ("-id",)
    search_fields = ("=memory__id", "author")
    search_help_text = "A memory id, or an author."

    @admin.display(description="memory", ordering="memory_id")
    def memory_link(self, revision):
        return str(revision.memory)


@admin.register(ErasureReceipt)
class ErasureReceiptAdmin(ReadOnlyAdmin):
    list_display = ("id", "erased_at", "memory_id", "namespace", "actor", "interface", "reason", "revision_total")
    list_filter = ("interface", "namespace")
    search_fields = ("=memory_id", "actor")

    @admin.display(description="revisions erased")
    def revision_total(self, receipt):
        return len(receipt.revision_ids)


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyAdmin):
    list_display = ("at", "action", "actor", "interface", "memory_id")
    list_filter = ("action", "interface")
    search_fields = ("=memory_id", "actor")
    date_hierarchy = "at"


# API keys -------------------------------------------------------------------------------------------------------------


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    list_display = ("name", "prefix", "scope_list", "namespace_list", "created_at", "created_by", "last_used_at",
                    "revoked_at")
    list_filter = (("revoked_at", admin.EmptyFieldListFilter),)
    search_fields = ("name", "prefix")
    actions = ("revoke_keys",)
    # Never secret_hash: it is not the key, but there is nothing to gain from showing it.
    shown = ("name", "prefix", "scope_list", "namespace_list", "created_at", "created_by", "last_used_at",
             "revoked_at")

    def get_fields(self, request, obj=None):
        return ("name", "scopes", "namespaces") if obj is None else self.shown

    def get_readonly_fields(self, request, obj=None):
        return () if obj is None else self.shown

    def get_form(self, request, obj=None, change=False, **kwargs):
        if obj is None:
            kwargs["form"] = ApiKeyCreateForm
        form = super().get_form(request, obj, change=change, **kwargs)
        form.actor = admin_actor(request)
        return form

    def has_change_permission(self, request, obj=None):
        # Keys are never edited: the list (and its revoke action) needs the permission, a key's page is read-only.
        return obj is None and super().has_change_permission(request)

    def has_delete_permission(self, request, obj=None):
        return False  # a revoked key stays, so the audit trail can name it

    def save_form(self, request, form, change):
        return form.created

    def save_model(self, request, obj, form, change):
        # api_key_create wrote the row from the form's clean(); the plaintext rides on this
        # in-memory instance to the response and is never stored.
        obj.plaintext = form.token

    def save_related(self, request, form, formsets, change):
        pass

    def response_add(self, request, obj, post_url_continue=None):
        """Show the key on this response only: no later page can show it."""
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "API key created",
            "key": obj,
            "token": obj.plaintext,
        }
        return TemplateResponse(request, "admin/memories/apikey/created.html", context)

    @admin.display(description="scopes")
    def scope_list(self, key):
        return ", ".join(key.scopes)

    @admin.display(description="namespaces")
    def namespace_list(self, key):
        return ", ".join(key.namespaces) if key.namespaces is not None else "all"

    @admin.action(description="Revoke selected API keys", permissions=["change"])
    def revoke_keys(self, request, queryset):
        try:
            with transaction.atomic():
                keys = [api_key_revoke(prefix=prefix, actor=admin_actor(request), interface="admin")
                        for prefix in queryset.order_by("pk").values_list("prefix", flat=True)]
        except MemoryServiceError as error:
            self.message_user(request, f"Nothing was revoked: {error.message}", messages.ERROR)
            return
        self.message_user(request, f"Revoked {len(keys)} API key{'' if len(keys) == 1 else 's'}: "
                                   f"{', '.join(key.prefix for key in keys)}. Requests with them now fail.",
                          messages.SUCCESS)
