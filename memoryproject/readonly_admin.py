"""The admin base for rows people may look at but never add, change or delete: audit trails and telemetry."""

from django.contrib import admin


class ReadOnlyMixin:
    """For admins and inlines of rows people may look at but never add, change or delete from the admin."""

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class ReadOnlyAdmin(ReadOnlyMixin, admin.ModelAdmin):
    """Rows people may look at but never add, change or delete from the admin."""
