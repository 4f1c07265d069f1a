"""The knowledge layer in the admin: learn from a pasted text, and ask the graph (an entity's relations, the paths
between two entities, or the entities a text names) now or as of a time. Asking needs the memories' view
permission; learning their add permission, with the logged-in user as the author."""

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.template.response import TemplateResponse
from django.urls import path

from knowledge.extraction import TEXT_MAX_CHARS
from memories import selectors, services, validation
from memories.admin.forms import TIME_HELP, admin_actor
from memoryproject.exceptions import MemoryServiceError


class LearnForm(forms.Form):
    namespace = forms.CharField(max_length=64)
    text = forms.CharField(
        max_length=TEXT_MAX_CHARS,
        widget=forms.Textarea(attrs={"rows": 8, "cols": 80}),
        help_text="Notes, a conversation or a design document: facts ('X runs on Y'), decisions "
        "and skills ('To X: 1. ... 2. ...') become memories, one each.",
    )
    source = forms.CharField(max_length=200, required=False, help_text="Where the text came from.")


class GraphForm(forms.Form):
    namespace = forms.CharField(max_length=64)
    entity = forms.CharField(max_length=validation.TRIPLE_PART_MAX, required=False, help_text="Its relations.")
    source = forms.CharField(
        max_length=validation.TRIPLE_PART_MAX, required=False, help_text="With target: how the two connect."
    )
    target = forms.CharField(max_length=validation.TRIPLE_PART_MAX, required=False)
    query = forms.CharField(
        max_length=validation.QUERY_MAX_CHARS, required=False, help_text="Free text: the entities it names."
    )
    as_of = forms.CharField(max_length=64, required=False, help_text=TIME_HELP)


class KnowledgePage:
    """``learn/`` and ``graph/`` under the memories' admin, mixed into ``MemoryAdmin``."""

    def get_urls(self):
        pages = [
            path("learn/", self.admin_site.admin_view(self.learn_view), name="memories_memory_learn"),
            path("graph/", self.admin_site.admin_view(self.graph_view), name="memories_memory_graph"),
        ]
        return [*pages, *super().get_urls()]

    def _page(self, request, template: str, title: str, **context):
        return TemplateResponse(
            request,
            template,
            {**self.admin_site.each_context(request), "opts": self.model._meta, "title": title, **context},
        )

    def learn_view(self, request):
        if not self.has_add_permission(request):
            raise PermissionDenied
        form, result = LearnForm(request.POST or None), None
        if request.method == "POST" and form.is_valid():
            data = form.cleaned_data
            try:
                result = services.memory_learn(
                    text=data["text"],
                    namespace=data["namespace"],
                    source=data["source"] or None,
                    actor=admin_actor(request),
                    interface="admin",
                )
            except MemoryServiceError as error:
                self.message_user(request, f"Nothing was stored: {error.message}", messages.ERROR)
        return self._page(request, "admin/memories/memory/learn.html", "Learn from text", form=form, result=result)

    def graph_view(self, request):
        if not self.has_view_permission(request):
            raise PermissionDenied
        form, result = GraphForm(request.GET or None), None
        if form.is_bound and form.is_valid():
            asked = {name: value for name, value in form.cleaned_data.items() if value}
            try:
                result = selectors.memory_graph(**asked)
            except MemoryServiceError as error:
                self.message_user(request, error.message, messages.ERROR)
        return self._page(request, "admin/memories/memory/graph.html", "Knowledge graph", form=form, result=result)
