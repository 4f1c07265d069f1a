"""ASGI entry point: ``uvicorn memoryproject.asgi:application``."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryproject.settings")

from django.conf import settings  # noqa: E402

from memoryproject.sqlite_backend.backup import hold_while_serving  # noqa: E402
from memoryproject.wsgibridge import WsgiBridge  # noqa: E402

# For as long as this process serves, `manage.py restore` refuses to replace its database.
hold_while_serving(settings.DATABASES["default"]["NAME"])

# Every view is synchronous: one thread hop per request instead of Django's ASGI handler's
# hop per middleware hook (memoryproject/wsgibridge.py).
django_application = WsgiBridge(get_wsgi_application(), threads=settings.MEMORY_SERVER_THREADS)

from api.parsers import too_large_refusal  # noqa: E402
from mcp_api.transport import too_large_refusal as mcp_too_large_refusal  # noqa: E402
from memoryproject.bodylimit import BodyLimit, Limit  # noqa: E402

# Oversized requests are refused here, before Django spools their bodies (README: MCP, REST API).
application = BodyLimit(django_application, [
    Limit("/mcp", settings.MEMORY_MCP_MAX_BODY_BYTES, mcp_too_large_refusal),
    Limit("/api", settings.MEMORY_API_MAX_BODY_BYTES,
          lambda limit: too_large_refusal(limit, "MEMORY_API_MAX_BODY_BYTES")),
    Limit("/api/v1/import", settings.MEMORY_API_MAX_IMPORT_BYTES,
          lambda limit: too_large_refusal(limit, "MEMORY_API_MAX_IMPORT_BYTES")),
])
