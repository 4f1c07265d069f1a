"""ASGI entry point: ``uvicorn memoryproject.asgi:application``."""

import json
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

from django.db import close_old_connections  # noqa: E402

from api.exceptions import error_body  # noqa: E402
from api.parsers import too_large_refusal  # noqa: E402
from mcp_api import transport  # noqa: E402
from mcp_api.transport import too_large_refusal as mcp_too_large_refusal  # noqa: E402
from memories.access import AuthenticationFailed  # noqa: E402
from memoryproject.bodygate import BodyGate, Door  # noqa: E402
from memoryproject.bodylimit import BodyLimit, Limit  # noqa: E402
from oauth.resource import gate_challenge  # noqa: E402
from oauth.tokens import bearer_authenticate  # noqa: E402

# The body gate's answers at /mcp.
_JSONRPC_CODES = {401: transport.UNAUTHORIZED, 408: transport.INVALID_REQUEST, 503: transport.UNAVAILABLE}


def rest_error(status: int, code: str, message: str) -> bytes:
    return json.dumps(error_body(code, message)).encode()


def mcp_error(status: int, code: str, message: str) -> bytes:
    return transport.jsonrpc_error(_JSONRPC_CODES[status], message)


def key_refusal(token: str, interface: str) -> str | None:
    """Why ``token`` is refused, or None for a valid key or token; on a server thread, with its connection.

    A token's resource is the view's to check: the gate has no request to compare it with.
    """
    close_old_connections()
    try:
        bearer_authenticate(token, interface=interface, request=None)
    except AuthenticationFailed as error:
        return error.message
    finally:
        close_old_connections()
    return None


# Bodies are read only for a request with a key (at the doors that need one), within a time, and within one
# budget for all connections (memoryproject/bodygate.py). The REST endpoints that need no key: health.
gated = BodyGate(
    django_application,
    [
        Door("/", rest_error),
        Door("/mcp", mcp_error, interface="mcp"),
        Door("/api/v1", rest_error, interface="api"),
        Door("/api/v1/health", rest_error),
    ],
    check_key=key_refusal,
    challenge=gate_challenge,
    run_in_thread=django_application.pool.submit,
    buffer_bytes=settings.MEMORY_BODY_BUFFER_BYTES,
    timeout=settings.MEMORY_BODY_TIMEOUT,
)

# Oversized requests are refused here, before Django spools their bodies (README: MCP, REST API).
application = BodyLimit(
    gated,
    [
        Limit("/mcp", settings.MEMORY_MCP_MAX_BODY_BYTES, mcp_too_large_refusal),
        Limit(
            "/api",
            settings.MEMORY_API_MAX_BODY_BYTES,
            lambda limit: too_large_refusal(limit, "MEMORY_API_MAX_BODY_BYTES"),
        ),
        Limit(
            "/api/v1/import",
            settings.MEMORY_API_MAX_IMPORT_BYTES,
            lambda limit: too_large_refusal(limit, "MEMORY_API_MAX_IMPORT_BYTES"),
        ),
    ],
)
