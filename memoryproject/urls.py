from django.contrib import admin
from django.urls import include, path

from api.metrics import metrics
from mcp_api.views import MemoryMCPView

admin.autodiscover()  # here rather than at start-up (settings.INSTALLED_APPS says why)

urlpatterns = [
    path("admin/", admin.site.urls),
    path("mcp", MemoryMCPView.as_view(), name="mcp"),
    path("metrics", metrics, name="metrics"),
    path("api/", include("api.urls")),
    path("", include("oauth.urls")),
    path("", include("dashboard.urls")),
]
