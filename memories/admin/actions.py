"""The memories' bulk actions: forget, restore, promote, archive, unarchive, tag, move, export and erase what the list
selected.

Each calls one service per memory inside one transaction, so a refused memory leaves
the whole batch unchanged, and reports what changed in one message. Deleting is
erasing: Django's delete hooks call ``memory_erase`` too.
"""

from django.contrib import admin, messages
from django.db import transaction
from django.http import StreamingHttpResponse
from django.template.response import TemplateResponse
from django.utils.html import format_html, format_html_join

from memories import services
from memories.admin.forms import EraseForm, ForgetForm, MoveForm, StateChangeForm, TagsForm, admin_actor, split_names
from memories.admin.history import attach_shown_revisions
from memoryproject import dialect
from memoryproject.exceptions import MemoryServiceError


def selected_ids(queryset) -> list[int]:
    """The ids of the selected rows, in primary-key order: each action writes them in that order."""
    return list(queryset.order_by("pk").values_list("pk", flat=True))


class MemoryActions:
    """The actions ``MemoryAdmin`` lists, and its delete hooks; mixed into a ``ModelAdmin`` of ``Memory``."""

    # Deleting is erasing: the erase action lists what goes and leaves receipts.

    def has_delete_permission(self, request, obj=None):
        return False

    def has_erase_permission(self, request):
        return super().has_delete_permission(request)

    def delete_model(self, request, obj):
        services.memory_erase(memory_id=obj.pk, actor=admin_actor(request), interface="admin")

    def delete_queryset(self, request, queryset):
        with transaction.atomic():
            for memory_id in selected_ids(queryset):
                services.memory_erase(memory_id=memory_id, actor=admin_actor(request), interface="admin")

    # The actions: one service call per selected memory, all in one transaction.

    def _each(self, request, queryset, write) -> list | None:
        """Call ``write(memory_id)`` for every selected memory in one transaction; on a refusal, change nothing."""
        try:
            with transaction.atomic():
                return [write(memory_id) for memory_id in selected_ids(queryset)]
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

    def _form_page(
        self,
        request,
        queryset,
        *,
        action: str,
        form,
        title: str,
        intro: str,
        button: str,
        template: str = "admin/memories/memory/action_form.html",
        rows=None,
    ):
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

    @admin.action(
        description="Forget selected memories (history stays; restore brings them back)", permissions=["change"]
    )
    def forget_memories(self, request, queryset):
        form = ForgetForm(request.POST if "apply" in request.POST else None)
        if form.is_valid():
            reason = form.cleaned_data["reason"] or None
            results = self._each(
                request,
                queryset,
                lambda memory_id: services.memory_forget(
                    memory_id=memory_id, actor=admin_actor(request), interface="admin", reason=reason
                ),
            )
            self._report(request, results, "Forgot", "already forgotten")
            if results is not None:
                return None
        return self._form_page(
            request,
            queryset,
            action="forget_memories",
            form=form,
            title="Forget memories",
            intro="Hide the memories below from now on. Their history stays, and restore brings them back.",
            button="Yes, forget them",
        )

    @admin.action(description="Restore selected forgotten memories", permissions=["change"])
    def restore_memories(self, request, queryset):
        results = self._each(
            request,
            queryset,
            lambda memory_id: services.memory_restore(
                memory_id=memory_id, actor=admin_actor(request), interface="admin"
            ),
        )
        self._report(request, results, "Restored", "were not forgotten")

    def _change_state(self, request, queryset, *, action: str, service, verb: str, unchanged: str, intro: str):
        """A lifecycle transition (memories.states) of every selected memory, with one reason for all."""
        form = StateChangeForm(request.POST if "apply" in request.POST else None)
        if form.is_valid():
            reason = form.cleaned_data["reason"] or None
            results = self._each(
                request,
                queryset,
                lambda memory_id: service(
                    memory_id=memory_id, actor=admin_actor(request), interface="admin", reason=reason
                ),
            )
            self._report(request, results, verb, unchanged)
            if results is not None:
                return None
        return self._form_page(
            request,
            queryset,
            action=action,
            form=form,
            title=f"{verb[:-1]} memories",
            intro=intro,
            button=f"Yes, {verb[:-1].lower()} them",
        )

    @admin.action(description="Promote selected candidates to active", permissions=["change"])
    def promote_memories(self, request, queryset):
        return self._change_state(
            request,
            queryset,
            action="promote_memories",
            service=services.memory_promote,
            verb="Promoted",
            unchanged="were already active",
            intro="Make the candidates below active from now on. Their history records "
            "who promoted them, when and why.",
        )

    @admin.action(description="Archive selected memories (kept, but left out of recall)", permissions=["change"])
    def archive_memories(self, request, queryset):
        return self._change_state(
            request,
            queryset,
            action="archive_memories",
            service=services.memory_archive,
            verb="Archived",
            unchanged="were already archived",
            intro="Archive the memories below from now on: they stay readable, but recall "
            "leaves them out unless asked for archived memories.",
        )

    @admin.action(description="Unarchive selected memories", permissions=["change"])
    def unarchive_memories(self, request, queryset):
        return self._change_state(
            request,
            queryset,
            action="unarchive_memories",
            service=services.memory_unarchive,
            verb="Unarchived",
            unchanged="were not archived",
            intro="Bring the memories below back, from now on, to the state each had before it was archived.",
        )

    def _retag(self, request, queryset, *, action: str, adding: bool):
        form = TagsForm(request.POST if "apply" in request.POST else None)
        if form.is_valid():
            names = split_names(form.cleaned_data["tags"])
            change = {"add": names} if adding else {"remove": names}
            results = self._each(
                request,
                queryset,
                lambda memory_id: services.memory_retag(
                    memory_id=memory_id, actor=admin_actor(request), interface="admin", **change
                ),
            )
            self._report(request, results, "Tagged" if adding else "Untagged", "unchanged")
            if results is not None:
                return None
        verb = "Add" if adding else "Remove"
        return self._form_page(
            request,
            queryset,
            action=action,
            form=form,
            title=f"{verb} tags",
            intro=f"{verb} these tags {'to' if adding else 'from'} the memories below.",
            button=f"{verb} tags",
        )

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
            results = self._each(
                request,
                queryset,
                lambda memory_id: services.memory_move(
                    memory_id=memory_id, namespace=namespace, actor=admin_actor(request), interface="admin"
                ),
            )
            self._report(request, results, f"Moved to {namespace!r}:", "already there")
            if results is not None:
                return None
        return self._form_page(
            request,
            queryset,
            action="move_namespace",
            form=form,
            title="Move to a namespace",
            intro="Move the memories below, with their whole history and tags, to another "
            "namespace. A memory whose key or visible text the target already holds "
            "stops the move, and nothing moves.",
            button="Move",
        )

    @admin.action(description="Export selected memories as JSON (the import format)", permissions=["view"])
    def export_json(self, request, queryset):
        chunks = services.memories_export(memory_ids=selected_ids(queryset))
        response = StreamingHttpResponse(chunks, content_type="application/json; charset=utf-8")
        stamp = dialect.now().strftime("%Y%m%dT%H%M%SZ")
        response["Content-Disposition"] = f'attachment; filename="memories-{stamp}.json"'
        return response

    @admin.action(
        description="Erase selected memories for good (text, history and index entries)", permissions=["erase"]
    )
    def erase_memories(self, request, queryset):
        form = EraseForm(request.POST if request.POST.get("post") == "yes" else None)
        if form.is_valid():
            actor, reason = admin_actor(request), form.cleaned_data["reason"] or None
            try:
                with transaction.atomic():
                    receipts = [
                        services.memory_erase(memory_id=memory_id, actor=actor, interface="admin", reason=reason)
                        for memory_id in selected_ids(queryset)
                    ]
            except MemoryServiceError as error:
                self.message_user(request, f"Nothing was erased: {error.message}", messages.ERROR)
                return None
            listed = format_html_join(
                ", ",
                "receipt {} (memory {} in {})",
                ((receipt.pk, receipt.memory_id, receipt.namespace) for receipt in receipts),
            )
            self.message_user(request, format_html("Erased {} memories: {}.", len(receipts), listed), messages.SUCCESS)
            return None
        rows = list(queryset.order_by("pk"))
        attach_shown_revisions(rows, now=dialect.now())
        return self._form_page(
            request,
            queryset,
            action="erase_memories",
            form=form,
            title="Erase memories for good",
            intro="These memories and every one of their revisions (tombstones included) will be destroyed, with "
            "their search index entries and any tag only they use. Unlike forget, this cannot be undone, "
            "and no earlier point in time will show them. Each leaves an erasure receipt with ids and "
            "content hashes, never text.",
            button="Yes, erase them",
            template="admin/memories/memory/erase_confirmation.html",
            rows=rows,
        )
