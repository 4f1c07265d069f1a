import json
import sys

from django.contrib import admin
from django.core.exceptions import DisallowedHost
from django.http import HttpResponse
from django.urls import include, path
from django.utils.html import escape
from django.views.defaults import server_error as django_server_error

from api.exceptions import error_body
from api.metrics import metrics
from mcp_api.transport import INVALID_REQUEST, jsonrpc_error
from mcp_api.views import MemoryMCPView
from memoryproject.exceptions import Busy, Unavailable

admin.autodiscover()  # here rather than at start-up (settings.INSTALLED_APPS says why)

urlpatterns = [
    path("admin/", admin.site.urls),
    path("mcp", MemoryMCPView.as_view(), name="mcp"),
    path("metrics", metrics, name="metrics"),
    path("api/", include("api.urls")),
    path("", include("oauth.urls")),
    path("", include("dashboard.urls")),
]

WRONG_HOST = (
    "This server does not answer to the host name in the request's Host header. Use the name it is served "
    "under, or add this one to the server's MEMORY_ALLOWED_HOSTS."
)


def bad_request(request, exception) -> HttpResponse:
    """Django's own 400s, refused before any view (a Host not in MEMORY_ALLOWED_HOSTS): JSON, not an HTML page,
    in the shape of the door asked (a JSON-RPC error at /mcp)."""
    if isinstance(exception, DisallowedHost):
        code, message = "disallowed_host", WRONG_HOST
    else:  # their messages may echo the request
        code, message = "bad_request", "The request is malformed and was refused."
    if request.path == "/mcp":
        body = jsonrpc_error(INVALID_REQUEST, message)
    else:
        body = json.dumps(error_body(code, message)).encode()
    return HttpResponse(body, status=400, content_type="application/json")


handler400 = bad_request


def server_error(request) -> HttpResponse:
    """An error no door answered itself: a database that cannot be reached or stayed busy is a 503 that says so
    (the admin's and dashboard's pages, whose middleware reads the session first), anything else Django's 500."""
    error = sys.exc_info()[1]
    if not isinstance(error, (Unavailable, Busy)):
        return django_server_error(request)
    page = f"<!doctype html><title>Unavailable</title><h1>Unavailable</h1><p>{escape(error.message)}</p>"
    response = HttpResponse(page, status=503, content_type="text/html; charset=utf-8")
    if getattr(error, "retry_after_seconds", None):
        response["Retry-After"] = str(error.retry_after_seconds)
    return response


handler500 = server_error
