"""The REST API under /api/: versioned endpoints, the OpenAPI schema and the docs page."""

from django.urls import path, re_path
from drf_spectacular.views import SpectacularAPIView

from api import hook_views, knowledge_views, memory_views, probe_views, store_views
from api.docs import docs
from api.exceptions import not_found

app_name = "api"

urlpatterns = [
    path("v1/memories/", memory_views.MemoryListView.as_view(), name="memories"),
    path("v1/memories/<int:id>/", memory_views.MemoryDetailView.as_view(), name="memory"),
    path("v1/memories/<int:id>/history/", memory_views.MemoryHistoryView.as_view(), name="memory-history"),
    path("v1/memories/<int:id>/restore/", memory_views.MemoryRestoreView.as_view(), name="memory-restore"),
    path("v1/memories/<int:id>/promote/", memory_views.MemoryPromoteView.as_view(), name="memory-promote"),
    path("v1/memories/<int:id>/archive/", memory_views.MemoryArchiveView.as_view(), name="memory-archive"),
    path("v1/memories/<int:id>/unarchive/", memory_views.MemoryUnarchiveView.as_view(), name="memory-unarchive"),
    path("v1/recall/", memory_views.RecallView.as_view(), name="recall"),
    path("v1/learn/", memory_views.LearnView.as_view(), name="learn"),
    path("v1/conflicts/", knowledge_views.ConflictListView.as_view(), name="conflicts"),
    path("v1/conflicts/<str:id>/resolve/", knowledge_views.ConflictResolveView.as_view(), name="conflict-resolve"),
    path("v1/graph/", knowledge_views.GraphView.as_view(), name="graph"),
    path("v1/route/", memory_views.RouteView.as_view(), name="route"),
    path("v1/export/", store_views.ExportView.as_view(), name="export"),
    path("v1/import/", store_views.ImportView.as_view(), name="import"),
    path("v1/stats/", store_views.StatsView.as_view(), name="stats"),
    path("v1/audit/", store_views.AuditView.as_view(), name="audit"),
    path("v1/health/", store_views.HealthView.as_view(), name="health"),
    path("v1/health/live/", probe_views.LiveView.as_view(), name="health-live"),
    path("v1/health/ready/", probe_views.ReadyView.as_view(), name="health-ready"),
    path("v1/hooks/recall/", hook_views.HookRecallView.as_view(), name="hooks-recall"),
    path("v1/hooks/ingest/", hook_views.HookIngestView.as_view(), name="hooks-ingest"),
    path("v1/hooks/report/", hook_views.HookReportView.as_view(), name="hooks-report"),
    path("v1/hooks/used/", hook_views.HookUsedView.as_view(), name="hooks-used"),
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    path("docs/", docs, name="docs"),
    # Last: any other path under /api/ is a 404 in the API's error shape, not Django's HTML page.
    re_path(r"^", not_found),
]
