"""The audit trail in the admin, read-only: revisions, erasure receipts and audit events."""

from django.contrib import admin

from memories.models import AuditEvent, ErasureReceipt, Revision
from memoryproject.readonly_admin import ReadOnlyAdmin


@admin.register(Revision)
class RevisionAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "memory_link",
        "known_at",
        "tombstone",
        "title",
        "confidence",
        "author",
        "interface",
        "valid_from",
        "valid_to",
        "expires_at",
    )
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
    list_display = (
        "id",
        "erased_at",
        "memory_id",
        "namespace",
        "actor",
        "interface",
        "reason",
        "revision_total",
        "telemetry_queries_removed",
    )
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
