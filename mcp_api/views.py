"""``/mcp``: stateless Streamable HTTP, authenticated with an API key or an OAuth token on every request.

``/mcp?tools=all`` lists the opt-in tools too (``mcp_api.server``).
"""

from urllib.parse import unquote_plus

from django.conf import settings
from django.http import HttpResponse
from django.http.request import HttpHeaders
from django.utils.decorators import method_decorator
from django.views.decorators.csrf import csrf_exempt
from mcp_server.views import MCPServerStreamableHttpView
from rest_framework.negotiation import BaseContentNegotiation

from mcp_api import transport
from mcp_api.server import DEFAULT_TOOLS, TOOL_SETS, current_tool_set
from mcp_api.tools import current_caller, server  # importing the tools registers them
from memories.access import AuthenticationFailed
from memoryproject.exceptions import Unavailable
from oauth.resource import MCP_PATH, challenge, public_base
from oauth.tokens import bearer_authenticate


class _AnyAccept(BaseContentNegotiation):
    """Leave Accept to the MCP transport: DRF's own negotiation answers 406 to ``text/event-stream``."""

    def select_parser(self, request, parsers):
        return parsers[0] if parsers else None

    def select_renderer(self, request, renderers, format_suffix=None):
        return renderers[0], renderers[0].media_type


def _refusal(status: int, code: int, message: str, **headers) -> HttpResponse:
    response = HttpResponse(transport.jsonrpc_error(code, message), status=status, content_type="application/json")
    for name, value in headers.items():
        response[name.replace("_", "-")] = value
    return response


def _query_values(request, name: str) -> list[str]:
    """The values of ``name`` in the query string, which may hold others: they are ignored, never all parsed.

    ``request.GET`` would refuse a query string over DATA_UPLOAD_MAX_NUMBER_FIELDS with an HTML page.
    """
    values = []
    for pair in request.META.get("QUERY_STRING", "").split("&"):
        key, _, value = pair.partition("=")
        if unquote_plus(key) == name:
            values.append(unquote_plus(value))
    return values


# How closely each media range that admits application/json names it: the closest one decides.
_JSON_RANGES = {"application/json": 2, "application/*": 1, "*/*": 0}


def _weight(parameters: list[str]) -> float:
    """The q of a media range: 1 without one, or with one that cannot be read."""
    for parameter in parameters:
        name, _, value = parameter.partition("=")
        if name.strip() == "q":
            try:
                return float(value)
            except ValueError:
                return 1.0
    return 1.0


def _accepts_json(accept: str) -> bool:
    """Whether an Accept header admits application/json, the one type this server answers in; no header admits any."""
    if not accept.strip():
        return True
    closest, weight = -1, 0.0
    for media_range in accept.split(","):
        media_type, *parameters = (part.strip().lower() for part in media_range.split(";"))
        if _JSON_RANGES.get(media_type, -1) > closest:
            closest, weight = _JSON_RANGES[media_type], _weight(parameters)
    return weight > 0


def _bearer_token(request) -> str | None:
    scheme, _, token = request.META.get("HTTP_AUTHORIZATION", "").partition(" ")
    return (token.strip() or None) if scheme.lower() == "bearer" else None


@method_decorator(csrf_exempt, name="dispatch")
class MemoryMCPView(MCPServerStreamableHttpView):
    """POST only: the server is stateless, so there is no GET event stream and no session to DELETE."""

    mcp_server = server
    http_method_names = ["post"]
    authentication_classes = []
    permission_classes = []
    content_negotiation_class = _AnyAccept

    def http_method_not_allowed(self, request, *args, **kwargs):
        return _refusal(
            405,
            transport.INVALID_REQUEST,
            f"{request.method} is not supported here: this MCP server is stateless, send JSON-RPC messages with POST.",
            Allow="POST",
        )

    def post(self, request, *args, **kwargs):
        token = _bearer_token(request)
        if token is None:
            return _refusal(
                401,
                transport.UNAUTHORIZED,
                "Missing API key: send 'Authorization: Bearer <key>'.",
                WWW_Authenticate=challenge(public_base(request), MCP_PATH),
            )
        try:
            caller = bearer_authenticate(token, interface="mcp", request=request)
        except AuthenticationFailed as error:
            return _refusal(
                401,
                transport.UNAUTHORIZED,
                error.message,
                WWW_Authenticate=challenge(public_base(request), MCP_PATH, "invalid_token"),
            )
        except Unavailable as error:
            # The key is read from the database first: one that cannot be reached (or is busy) stops the request here.
            retry = {"Retry_After": str(error.retry_after_seconds)} if error.retry_after_seconds else {}
            return _refusal(503, transport.UNAVAILABLE, error.message, **retry)

        # BodyLimit refuses these under ASGI before Django reads them; this covers WSGI and tests.
        limit = settings.MEMORY_MCP_MAX_BODY_BYTES
        declared = request.META.get("CONTENT_LENGTH") or "0"
        if (declared.isdigit() and int(declared) > limit) or len(request.body) > limit:
            return _refusal(413, transport.INVALID_REQUEST, transport.too_large_message(limit))
        if request.content_type != "application/json":
            return _refusal(415, transport.INVALID_REQUEST, "Content-Type must be application/json.")
        if not _accepts_json(request.META.get("HTTP_ACCEPT", "")):
            return _refusal(
                406,
                transport.INVALID_REQUEST,
                "Not acceptable: this server answers in application/json; accept it (or */*).",
            )
        try:
            transport.read_message(request.body)
        except transport.Refused as refused:
            return HttpResponse(refused.answer, status=refused.status, content_type="application/json")
        tool_sets = _query_values(request, "tools") or [DEFAULT_TOOLS]
        if len(tool_sets) > 1:
            return _refusal(400, transport.INVALID_REQUEST, "tools: given more than once; give it once.")
        tool_set = tool_sets[0]
        if tool_set not in TOOL_SETS:
            return _refusal(
                400,
                transport.INVALID_REQUEST,
                f"tools must be {' or '.join(map(repr, TOOL_SETS))} (got {tool_set[:40]!r}): "
                "'all' lists the opt-in tools too.",
            )

        # The SDK matches Accept by prefix, refusing */* and application/*: it is told the one type it answers in.
        request.headers = HttpHeaders({**request.META, "HTTP_ACCEPT": "application/json"})
        caller_token, tool_set_token = current_caller.set(caller), current_tool_set.set(tool_set)
        try:
            return self.mcp_server.handle_django_request(request)
        finally:
            current_tool_set.reset(tool_set_token)
            current_caller.reset(caller_token)
