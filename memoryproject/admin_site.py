"""The admin site: Django's, with its "View site" link only for users who may open the dashboard."""

from django.contrib.admin import AdminSite
from django.contrib.admin.apps import SimpleAdminConfig

# The dashboard's overview page needs this permission (dashboard.views.MEMORIES).
DASHBOARD_PERMISSION = "memories.view_memory"


class MemoryAdminSite(AdminSite):
    def each_context(self, request):
        context = super().each_context(request)
        if not request.user.has_perm(DASHBOARD_PERMISSION):
            context["site_url"] = None  # the link would lead to a 403
        return context


class MemoryAdminConfig(SimpleAdminConfig):
    # The admin modules are found by memoryproject/urls.py, not at start-up, which commands would pay.
    default_site = "memoryproject.admin_site.MemoryAdminSite"
