from django.contrib import admin
from django.urls import path

from mcp_api.views import MemoryMCPView

urlpatterns = [
    path("admin/", admin.site.urls),
    path("mcp", MemoryMCPView.as_view(), name="mcp"),
]
