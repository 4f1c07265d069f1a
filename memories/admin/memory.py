"""The memories' admin: the list with recall as its search box, and the add and change pages.

The bulk actions, and erasing (which stands in for deleting), are ``MemoryActions``
(``memories.admin.actions``); the forms call their services from ``clean()``
(``memories.admin.forms``).
"""

from django.contrib import admin, messages
from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.admin.views.main import ORDER_VAR, ChangeList
from django.db.models import Case, IntegerField, Value, When
from django.urls import resolve, reverse
from django.utils import dateformat, timezone
from django.utils.html import format_html, format_html_join
from django.utils.text import Truncator

from memories import selectors, states, validation
from memories.admin.actions import MemoryActions
from memories.admin.audit_page import AuditPage
from memories.admin.conflict_queue import ConflictQueue
from memories.admin.forms import MemoryAddForm, MemoryChangeForm, admin_actor
from memories.admin.history import attach_shown_revisions, revision_history
from memories.admin.knowledge_page import KnowledgePage
from memories.models import Memory, Revision, State, Tag
from memoryproject import dialect
from memoryproject.exceptions import MemoryServiceError

PREVIEW_CHARS = 120


def page_for(request, name: str, *args) -> str | None:
    """The URL of dashboard page ``name`` when this user may open it (the permissions its view declares)."""
    url = reverse(name, args=args)
    return url if request.user.has_perms(resolve(url).func.permissions) else None


def conflicts_now(memory: Memory) -> list:
    """The conflicts the memory's fact is in now; none when it is not visible now."""
    try:
        return selectors.memory_get(memory_id=memory.pk).conflicts or []
    except MemoryServiceError:
        return []


class VisibleNowFilter(admin.SimpleListFilter):
    title = "visible now"
    parameter_name = "visible"

    def lookups(self, request, model_admin):
        return [("yes", "Visible now"), ("no", "Hidden now (forgotten, TTL passed or outside validity)")]

    def queryset(self, request, queryset):
        now = dialect.now()
        if self.value() == "yes":
            return queryset.filter(pk__in=Memory.objects.visible(as_of=now).values("pk"))
        if self.value() == "no":
            return queryset.filter(pk__in=Memory.objects.hidden(as_of=now).values("pk"))
        return None


class StateFilter(admin.SimpleListFilter):
    """Every state the state column shows (``memories.states``), stale included, as of now."""

    title = "state now"
    parameter_name = "state"

    def lookups(self, request, model_admin):
        return [(state, state) for state in states.READ_STATES]

    def queryset(self, request, queryset):
        if self.value() is None:
            return None
        if self.value() not in states.READ_STATES:
            raise IncorrectLookupParameters(f"state: {self.value()!r} is not one of {', '.join(states.READ_STATES)}.")
        return queryset.filter(pk__in=selectors.memories_reading(self.value(), as_of=dialect.now()))


class TtlFilter(admin.SimpleListFilter):
    title = "TTL"
    parameter_name = "ttl"

    def lookups(self, request, model_admin):
        return [("yes", "Has a TTL (text visible now expires)"), ("no", "No TTL")]

    def queryset(self, request, queryset):
        expiring = Revision.objects.visible(as_of=dialect.now()).filter(expires_at__isnull=False).values("memory_id")
        if self.value() == "yes":
            return queryset.filter(pk__in=expiring)
        if self.value() == "no":
            return queryset.exclude(pk__in=expiring)
        return None


class TagFilter(admin.RelatedFieldListFilter):
    """The tags memories carry, of the namespace the list is filtered to; else each named with its namespace."""

    def field_choices(self, field, request, model_admin):
        tags = Tag.objects.filter(memories__isnull=False).distinct()
        namespace = request.GET.get("namespace__exact") or request.GET.get("namespace")
        if namespace:
            return [(tag.pk, tag.name) for tag in tags.filter(namespace=namespace)]
        # Tags belong to a namespace: the same word in two namespaces is two tags.
        return [(tag.pk, f"{tag.name} ({tag.namespace})") for tag in tags]


class MemoryChangeList(ChangeList):
    def get_results(self, request):
        super().get_results(request)
        # The preview column needs each row's current revision: two queries for the page, not one per row.
        self.result_list = list(self.result_list)
        now = dialect.now()
        attach_shown_revisions(self.result_list, now=now)
        # The confidence column: worked out for the page's visible rows at once.
        shown = [
            memory.shown_revision.pk
            for memory in self.result_list
            if getattr(memory, "shown_revision", None) is not None and memory.shown_is_visible
        ]
        scored = selectors.records_with_confidence(shown, as_of=now)
        for memory in self.result_list:
            record = scored.get(getattr(getattr(memory, "shown_revision", None), "pk", None))
            memory.confidence_now = record.confidence if record is not None else None


@admin.register(Memory)
class MemoryAdmin(AuditPage, ConflictQueue, KnowledgePage, MemoryActions, admin.ModelAdmin):
    list_display = (
        "id",
        "preview",
        "namespace",
        "kind",
        "tag_list",
        "state_value",
        "confidence_value",
        "last_change",
        "revision_count",
    )
    list_display_links = ("id", "preview")
    list_filter = ("namespace", "kind", ("tags", TagFilter), StateFilter, VisibleNowFilter, TtlFilter)
    # The search box runs the recall engine (get_search_results); this only switches the box on.
    search_fields = ("recall",)
    search_help_text = (
        "Hybrid recall (keywords and meaning), best match first; it finds memories visible now. "
        f"At most {validation.RECALL_LIMIT_MAX} matches."
    )
    ordering = ("-id",)
    list_per_page = 50
    actions = (
        "forget_memories",
        "restore_memories",
        "promote_memories",
        "archive_memories",
        "unarchive_memories",
        "add_tag",
        "remove_tag",
        "move_namespace",
        "export_json",
        "erase_memories",
    )
    change_form_template = "admin/memories/memory/change_form.html"
    change_list_template = "admin/memories/memory/change_list.html"

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
            # A person searching sees every ranked hit (min_score=0): holding back is for what agents are given.
            result = selectors.memory_recall(
                query=search_term, namespace=namespace or None, limit=validation.RECALL_LIMIT_MAX, min_score=0
            )
        except MemoryServiceError as error:
            self.message_user(request, f"Search failed: {error.message}", messages.ERROR)
            return queryset.none(), False
        for line in (result.note, result.hint):
            if line:
                self.message_user(request, line, messages.INFO)
        ids = [hit.memory.id for hit in result.hits]
        queryset = queryset.filter(pk__in=ids)
        if ids and ORDER_VAR not in request.GET:
            rank = Case(
                *(When(pk=memory_id, then=Value(position)) for position, memory_id in enumerate(ids)),
                output_field=IntegerField(),
            )
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
        """The word the API uses now (memories.states): candidate, active, stale, archived or forgotten."""
        if memory.state == State.FORGOTTEN:
            return states.FORGOTTEN
        if hasattr(memory, "shown_revision"):  # the list attached each row's shown revision, as of one now
            now = memory.shown_at
            revision = memory.shown_revision if memory.shown_is_visible else None
        else:  # the change page
            now = dialect.now()
            revision = Revision.objects.filter(memory=memory).visible(as_of=now).first()
        if revision is None:  # hidden now: its age says nothing
            return memory.recorded_state
        return states.read_state(memory.recorded_state, kind=memory.kind, known_at=revision.known_at, as_of=now)

    @admin.display(description="confidence")
    def confidence_value(self, memory):
        """Worked out now (memories.confidence); on the change page with what it came from."""
        if hasattr(memory, "confidence_now"):  # the list worked it out for the page
            return "—" if memory.confidence_now is None else f"{memory.confidence_now:g}"
        try:
            record = selectors.memory_get(memory_id=memory.pk)
        except MemoryServiceError:  # hidden now: nothing to rely on
            return "—"
        inputs = record.confidence_inputs
        stated = "not stated" if inputs["stated"] is None else f"stated {inputs['stated']:g}"
        decay = f"half-life {inputs['half_life_days']} days" if inputs["half_life_days"] else "no decay"
        return (
            f"{record.confidence:g} (source {inputs['source']}, {stated}, {inputs['age_days']:g} days old, "
            f"{decay}, {inputs['corroborating_authors']} other author(s), {inputs['conflicts']} open "
            "conflict(s))"
        )

    @admin.display(description="tags")
    def tag_list(self, memory):
        # One span a tag, so the list breaks between tags and never inside one (change_list.html).
        return format_html_join(", ", '<span class="tag">{}</span>', ((tag.name,) for tag in memory.tags.all()))

    @admin.display(description="last change (UTC)", ordering="last_change")
    def last_change(self, memory):
        return dateformat.format(timezone.localtime(memory.last_change), "Y-m-d H:i")  # short: the text gets the room

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
        identity = (
            None,
            {"fields": ("namespace", "key", "state_value", "confidence_value", "visible_now", "created_at")},
        )
        if not self.has_change_permission(request, obj):
            return [identity]  # a viewer reads the text in the revision history below
        return [
            identity,
            ("Current text", {"fields": ("kind", "title", "content", "tags", "source")}),
            ("Time", {"fields": ("ttl_days", "valid_from", "valid_to")}),
        ]

    def get_readonly_fields(self, request, obj=None):
        return (
            () if obj is None else ("namespace", "key", "state_value", "confidence_value", "visible_now", "created_at")
        )

    @admin.display(description="visible now")
    def visible_now(self, memory):
        revision = Revision.objects.filter(memory=memory).visible(as_of=dialect.now()).first()
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

    def changeform_view(self, request, object_id=None, form_url="", extra_context=None):
        # Without the transaction Django puts around a POST: the form's service call is then its own
        # transaction, and embeds the text before it takes the write lock (docs/reliability.md).
        return self._changeform_view(request, object_id, form_url, extra_context)

    def save_form(self, request, form, change):
        if change:
            return form.instance
        return Memory.objects.get(pk=form.result.memory.id)

    def save_model(self, request, obj, form, change):
        """The form's service call has written everything; say what it did."""
        if not change and form.result.deduplicated:
            self.message_user(
                request, f"Nothing new was stored: memory {obj.pk} ({obj}) already holds this text.", messages.WARNING
            )
        elif not change and form.result.revised:
            self.message_user(
                request, f"The key already existed: a revision was added to memory {obj.pk}.", messages.INFO
            )

    def save_related(self, request, form, formsets, change):
        pass  # tags are the form's memory_retag call

    def change_view(self, request, object_id, form_url="", extra_context=None):
        extra_context = dict(extra_context or {})
        memory = self.get_object(request, object_id)
        if memory is not None:
            extra_context["revision_history"] = revision_history(memory, now=dialect.now())
            # Newest first, like the revisions: each change of namespace, kind and tags.
            extra_context["attribute_history"] = selectors.attribute_history(memory_id=memory.pk)[::-1]
            extra_context["timeline_url"] = page_for(request, "dashboard:timeline", memory.pk)
            extra_context["conflicts"] = conflicts_now(memory)
        return super().change_view(request, object_id, form_url, extra_context=extra_context)
