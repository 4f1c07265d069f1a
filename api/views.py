"""The base of the REST endpoints under ``/api/v1/``: keys, scopes, limits, and how a record answers.

Each view declares the scope each of its handlers needs (``scopes``, enforced by
``ApiView`` before a handler runs). A handler takes three steps: read the operation's declared
arguments (``memories.arguments``, through ``api.arguments``), make one service,
selector or search call with the caller's namespaces resolved by ``Caller`` (the calls
``mcp_api.tools`` makes, so REST and MCP behave alike), and answer with the record it
returns (``memories.records``). The same declarations make the OpenAPI schema (``api.schema``).
Errors take their shape in ``api.exceptions``.

The endpoints live by what they serve: memories and recall (``api.memory_views``),
conflicts and the knowledge graph (``api.knowledge_views``), the harness hooks
(``api.hook_views``) and the whole store (``api.store_views``).
"""

from django.http import HttpResponse
from drf_spectacular.utils import OpenApiResponse
from rest_framework.exceptions import NotAuthenticated
from rest_framework.permissions import SAFE_METHODS, AllowAny
from rest_framework.renderers import JSONRenderer
from rest_framework.views import APIView

from api.arguments import from_body, from_query
from api.authentication import ApiKeyAuthentication, HasApiKey
from api.exceptions import BodyTooLarge, LengthRequired, handler
from api.parsers import StrictJSONParser, body_limit, too_large_message
from api.records import ErrorResponse
from memories import ratelimit
from memories.access import Caller
from memories.models import Scope

# The id comes from the path; the rest of the arguments from the query string or the body.
IN_PATH = ("id",)

_ERROR = OpenApiResponse(ErrorResponse, description='{"error": {"code", "message", "field"?}}')


def errors(*codes: int) -> dict:
    """The error responses an endpoint documents: those every keyed endpoint can give, and ``codes``."""
    return {code: _ERROR for code in sorted({400, 401, 403, 413, 429, *codes})}


def answer(record, *, status: int = 200, headers: dict | None = None) -> HttpResponse:
    """The response of a record: its JSON, encoded by the record itself."""
    # As DRF's JSONRenderer does: the two line separators JSON allows raw would end a line of JavaScript.
    body = record.as_json().replace("\u2028".encode(), b"\\u2028").replace("\u2029".encode(), b"\\u2029")
    return HttpResponse(body, status=status, headers=headers, content_type="application/json")


class KeylessView(APIView):
    """Base of the endpoints that need no key (health and the probes): no auth, no throttling, one error shape."""

    authentication_classes = []
    permission_classes = [AllowAny]
    throttle_classes = []
    renderer_classes = [JSONRenderer]

    def get_exception_handler(self):
        return handler


class ApiView(APIView):
    """Base of every keyed endpoint: API-key auth, per-key throttling, strict JSON bodies, one error shape."""

    authentication_classes = [ApiKeyAuthentication]
    permission_classes = [HasApiKey]
    parser_classes = [StrictJSONParser]
    renderer_classes = [JSONRenderer]
    # The scope each handler needs, by HTTP method: every handler a view defines declares one (checked at import),
    # and ``initial`` enforces it once the key is known, before the handler reads a byte of its arguments. It also
    # names the rate limit a request spends (memories.ratelimit): writes, or reads for the rest.
    scopes: dict[str, Scope] = {}
    body_limit_setting = "MEMORY_API_MAX_BODY_BYTES"

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        undeclared = [
            method
            for method in ("get", "post", "put", "patch", "delete")
            if hasattr(cls, method) and method.upper() not in cls.scopes
        ]
        if undeclared:
            raise TypeError(f"{cls.__name__} declares no scope for {', '.join(undeclared)}: add it to scopes.")

    def get_exception_handler(self):
        return handler

    def permission_denied(self, request, message=None, code=None):
        if request.auth is None:
            raise NotAuthenticated(HasApiKey.message)
        super().permission_denied(request, message, code)

    def check_throttles(self, request):
        # DRF calls this once the key is known; the budget is the key's, shared with MCP.
        scope = self._scope(request)
        write = scope == Scope.WRITE if scope is not None else request.method not in SAFE_METHODS
        ratelimit.charge(request.auth, "write" if write else "read")

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        # Refused on the declared length, before a byte of the body is parsed.
        limit, setting = body_limit(self)
        declared = request.META.get("CONTENT_LENGTH") or ""
        if declared.isdigit() and int(declared) > limit:
            raise BodyTooLarge(too_large_message(limit, setting))
        # DRF reads a body without a declared length as empty, which would turn a chunked request
        # into a confusing "field required"; say what is wrong instead. (Under `make run` the bridge
        # gives every body its length: memoryproject.wsgibridge.)
        if not declared and "chunked" in request.META.get("HTTP_TRANSFER_ENCODING", "").lower():
            raise LengthRequired()
        scope = self._scope(request)
        if scope is not None:
            self.caller.require(scope)

    def _scope(self, request) -> Scope | None:
        """The declared scope of the request's handler; None for a method without one (DRF answers 405)."""
        return self.scopes.get("GET" if request.method == "HEAD" else request.method)  # HEAD runs the GET handler

    @property
    def caller(self) -> Caller:
        return self.request.auth

    def query(self, model, **path):
        return from_query(model, self.request.query_params, **path)

    def body(self, model, **path):
        return from_body(model, self.request.data, self.request.query_params, **path)
