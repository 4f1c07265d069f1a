"""Conflicts in the admin: the review queue (open conflicts side by side, one-click resolutions) and the
per-namespace predicate settings.

The queue is a page of the memories' admin (``ConflictQueue``, mixed into ``MemoryAdmin``),
linked from the admin index: viewing needs the memories' view permission, resolving their
change permission. Each resolution is one ``conflict_resolve`` call with the logged-in user
as the actor, which appends the revisions and the audit events.
"""

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path

from knowledge.models import PredicateSetting
from knowledge.names import predicate_name
from memories import services, validation
from memories.admin.forms import TIME_HELP, admin_actor
from memories.models import Memory
from memories.selectors.conflicts import CONFLICTS_LIMIT_MAX, memory_conflicts
from memories.services.resolution import RESOLUTIONS
from memoryproject.exceptions import MemoryServiceError


class ResolveForm(forms.Form):
    """One resolution, as a button of the queue posts it; the service checks what goes with what."""

    conflict = forms.CharField(max_length=40)
    resolution = forms.ChoiceField(choices=[(name, name) for name in RESOLUTIONS])
    keep = forms.IntegerField(required=False, min_value=1)
    boundary = forms.CharField(required=False, max_length=64, help_text=TIME_HELP)
    content = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 4}))
    reason = forms.CharField(required=False, max_length=validation.REASON_MAX)


class ConflictQueue:
    """The review queue of ``MemoryAdmin``: ``conflicts/`` under the memories' admin."""

    def get_urls(self):
        queue = path(
            "conflicts/", self.admin_site.admin_view(self.conflict_queue_view), name="memories_memory_conflicts"
        )
        return [queue, *super().get_urls()]

    def conflict_queue_view(self, request):
        if not self.has_view_permission(request):
            raise PermissionDenied
        if request.method == "POST":
            if not self.has_change_permission(request):
                raise PermissionDenied
            self._resolve(request, ResolveForm(request.POST))
            return HttpResponseRedirect(request.get_full_path())
        namespace = request.GET.get("namespace") or None
        try:
            found = memory_conflicts(namespace=namespace, limit=CONFLICTS_LIMIT_MAX)
        except MemoryServiceError as error:
            self.message_user(request, error.message, messages.ERROR)
            found = None
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "Open conflicts",
            "found": found,
            # Each conflict with its two sides as a list: the template lays them out side by side.
            "rows": [(conflict, [conflict.left, conflict.right]) for conflict in found.conflicts] if found else [],
            "namespace": namespace,
            "namespaces": Memory.objects.order_by("namespace").values_list("namespace", flat=True).distinct(),
            "can_resolve": self.has_change_permission(request),
        }
        return TemplateResponse(request, "admin/memories/memory/conflicts.html", context)

    def _resolve(self, request, form: ResolveForm) -> None:
        if not form.is_valid():
            problems = "; ".join(f"{name}: {' '.join(errors)}" for name, errors in form.errors.items())
            self.message_user(request, f"Nothing was changed: {problems}", messages.ERROR)
            return
        data = form.cleaned_data
        given = {name: data[name] for name in ("keep", "boundary", "content") if data[name] not in (None, "")}
        try:
            result = services.conflict_resolve(
                conflict_id=data["conflict"],
                resolution=data["resolution"],
                reason=data["reason"] or None,
                actor=admin_actor(request),
                interface="admin",
                **given,
            )
        except MemoryServiceError as error:
            self.message_user(request, f"Nothing was changed: {error.message}", messages.ERROR)
            return
        self.message_user(
            request,
            f"Resolved conflict {result.conflict_id} ({result.resolution}): revisions "
            f"{', '.join(str(pk) for pk in result.revision_ids)} appended.",
            messages.SUCCESS,
        )


class PredicateSettingForm(forms.ModelForm):
    class Meta:
        model = PredicateSetting
        fields = ("namespace", "predicate", "single_valued")
        help_texts = {
            "predicate": "As written in triples; compared in normal form (case, spaces, '-' and '_' do not count).",
            "single_valued": "Checked: one value per subject, so two different values conflict. Unchecked: many "
            "values are fine. Overrides the default list either way.",
        }

    def clean_namespace(self):
        try:
            return validation.namespace(self.cleaned_data["namespace"])
        except MemoryServiceError as error:
            raise forms.ValidationError(error.message) from None

    def clean_predicate(self):
        predicate = predicate_name(self.cleaned_data["predicate"])
        if not predicate:
            raise forms.ValidationError("Name a predicate, e.g. 'runs on'.")
        return predicate


@admin.register(PredicateSetting)
class PredicateSettingAdmin(admin.ModelAdmin):
    form = PredicateSettingForm
    list_display = ("namespace", "predicate", "single_valued")
    list_filter = ("namespace", "single_valued")
    search_fields = ("predicate",)
