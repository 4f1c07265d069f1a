"""The audit in the admin: every check of ``memories.selectors.audit`` with its ids and fix, and a button that
repairs what is safe (``audit_fix``). Reading needs the memories' view permission; repairing is for superusers, as
it rebuilds store-wide indexes."""

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path

from memories.admin.forms import admin_actor
from memories.selectors.audit import run_audit
from memories.services.audit import audit_fix


class AuditPage:
    """``audit/`` under the memories' admin, mixed into ``MemoryAdmin``."""

    def get_urls(self):
        page = path("audit/", self.admin_site.admin_view(self.audit_view), name="memories_memory_audit")
        return [page, *super().get_urls()]

    def audit_view(self, request):
        if not self.has_view_permission(request):
            raise PermissionDenied
        if request.method == "POST":
            if not request.user.is_superuser:
                raise PermissionDenied
            report, done = audit_fix(actor=admin_actor(request), interface="admin")
            repaired = ", ".join(f"{name.replace('_', ' ')}: {count}" for name, count in done.items())
            self.message_user(
                request,
                f"Repaired ({repaired})." if done else "Nothing needed repairing.",
                messages.SUCCESS if report.ok else messages.WARNING,
            )
            return HttpResponseRedirect(request.get_full_path())
        report = run_audit()
        return TemplateResponse(
            request,
            "admin/memories/memory/audit.html",
            {
                **self.admin_site.each_context(request),
                "opts": self.model._meta,
                "title": "Audit",
                "report": report,
                "can_fix": request.user.is_superuser and any(finding.fixable for finding in report.findings),
            },
        )
