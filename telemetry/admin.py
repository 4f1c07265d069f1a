"""Telemetry in the admin: read-only, since rows record what happened and only purge and erase remove them."""

from django.contrib import admin
from django.utils.text import Truncator

from memoryproject.readonly_admin import ReadOnlyAdmin, ReadOnlyMixin
from telemetry import selectors
from telemetry.models import HookRecall, InjectedMemory, Injection, RefusedIngest

QUERY_CHARS = 80


def _short(text: str) -> str:
    return Truncator(" ".join(text.split())).chars(QUERY_CHARS)


@admin.register(HookRecall)
class HookRecallAdmin(ReadOnlyAdmin):
    list_display = ("at", "harness", "hook", "actor", "session", "short_query", "hits", "characters")
    list_filter = ("harness", "hook")
    search_fields = ("query", "session", "actor")
    date_hierarchy = "at"

    @admin.display(description="query")
    def short_query(self, row):
        return _short(row.query)


class InjectedMemoryInline(ReadOnlyMixin, admin.TabularInline):
    model = InjectedMemory
    fields = ("memory_id", "revision_id")
    readonly_fields = fields
    extra = 0
    can_delete = False


@admin.register(Injection)
class InjectionAdmin(ReadOnlyAdmin):
    list_display = ("at", "harness", "hook", "actor", "session", "short_query", "characters", "tokens", "memories")
    list_filter = ("harness", "hook")
    search_fields = ("query", "session", "actor")
    date_hierarchy = "at"
    inlines = (InjectedMemoryInline,)

    def get_queryset(self, request):
        return selectors.injections_with_memory_counts(super().get_queryset(request))

    @admin.display(description="query")
    def short_query(self, row):
        return _short(row.query)

    @admin.display(description="tokens (about)", ordering="characters")
    def tokens(self, row):
        return row.tokens_estimate

    @admin.display(description="memories", ordering="memory_count")
    def memories(self, row):
        return row.memory_count


@admin.register(InjectedMemory)
class InjectedMemoryAdmin(ReadOnlyAdmin):
    list_display = ("injection", "memory_id", "revision_id")
    list_select_related = ("injection",)
    search_fields = ("=memory_id",)


@admin.register(RefusedIngest)
class RefusedIngestAdmin(ReadOnlyAdmin):
    list_display = ("at", "harness", "hook", "actor", "namespace", "pattern", "characters")
    list_filter = ("pattern", "harness", "namespace")
    date_hierarchy = "at"
