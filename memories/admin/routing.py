"""Query routing's rules in the admin: data edited here, each pattern checked on save (RouteRule.clean)."""

from django.contrib import admin

from memories.models import RouteRule


@admin.register(RouteRule)
class RouteRuleAdmin(admin.ModelAdmin):
    list_display = ("order", "name", "route", "enabled", "pattern")
    list_display_links = ("name",)
    list_editable = ("order", "enabled")
    list_filter = ("route", "enabled")
    search_fields = ("name", "pattern")
    ordering = ("order", "id")
