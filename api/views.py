"""The REST endpoints under ``/api/v1/``.

Each handler takes three steps: check the key's scope and validate the input's shape,
make one service, selector or search call with the caller's namespaces resolved by
``Caller`` (the calls ``mcp_api.tools`` makes, so REST and MCP behave alike), and
return the record's ``as_dict()``. Errors take their shape in ``api.exceptions``.
"""

import time

from django.db import DatabaseError
from django.http import StreamingHttpResponse
from django.urls import reverse
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.exceptions import NotAuthenticated, ValidationError
from rest_framework.permissions import AllowAny
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

import memoryproject
from api import serializers as s
from api.authentication import ApiKeyAuthentication, HasApiKey
from api.exceptions import BodyTooLarge, LengthRequired, handler
from api.parsers import StrictJSONParser, body_limit, too_large_message
from api.throttling import ApiKeyRateThrottle
from memories import selectors, services
from memories.access import Caller, PermissionDenied
from memories.models import Memory, Scope
from memoryproject.exceptions import InvalidInput
from search.embeddings import get_embedder

API_VERSION = "v1"
# SQLite's INTEGER is 64-bit: a larger id in a URL can name no memory, and would not fit a query parameter.
ID_MAX = 2**63 - 1
_STARTED = time.monotonic()

_ERROR = OpenApiResponse(s.ErrorResponse, description='{"error": {"code", "message", "field"?}}')


def errors(*codes: int) -> dict:
    """The error responses an endpoint documents: those every keyed endpoint can give, and ``codes``."""
    return {code: _ERROR for code in sorted({400, 401, 403, 413, 429, *codes})}


class ApiView(APIView):
    """Base of every keyed endpoint: API-key auth, per-key throttling, strict JSON bodies, one error shape."""

    authentication_classes = [ApiKeyAuthentication]
    permission_classes = [HasApiKey]
    throttle_classes = [ApiKeyRateThrottle]
    parser_classes = [StrictJSONParser]
    renderer_classes = [JSONRenderer]
    throttle_bucket: str | None = None  # api.throttling: None means by method
    body_limit_setting = "MEMORY_API_MAX_BODY_BYTES"

    def get_exception_handler(self):
        return handler

    def permission_denied(self, request, message=None, code=None):
        if request.auth is None:
            raise NotAuthenticated(HasApiKey.message)
        super().permission_denied(request, message, code)

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        # Refused on the declared length, before a byte of the body is parsed.
        limit, setting = body_limit(self)
        declared = request.META.get("CONTENT_LENGTH") or ""
        if declared.isdigit() and int(declared) > limit:
            raise BodyTooLarge(too_large_message(limit, setting))
        # DRF reads a body without a declared length as empty, which would turn a chunked request
        # into a confusing "field required"; say what is wrong instead.
        if not declared and "chunked" in request.META.get("HTTP_TRANSFER_ENCODING", "").lower():
            raise LengthRequired()

    @property
    def caller(self) -> Caller:
        return self.request.auth

    def query(self, serializer_class) -> dict:
        serializer = serializer_class(data=self.request.query_params)
        serializer.is_valid(raise_exception=True)
        return dict(serializer.validated_data)

    def body(self, serializer_class) -> dict:
        for name in self.request.query_params:
            raise ValidationError({name: ["unknown parameter: this endpoint takes its arguments in the JSON body."]})
        serializer = serializer_class(data=self.request.data)
        serializer.is_valid(raise_exception=True)
        return dict(serializer.validated_data)


def _memory_id(value: int) -> int:
    if not 1 <= value <= ID_MAX:
        raise InvalidInput(f"id: {value!r} is not a memory id (a positive integer).", field="id")
    return value


class MemoryListView(ApiView):
    @extend_schema(summary="List memories", operation_id="memories_list", parameters=[s.ListQuery],
                   responses={200: s.PageResponse, **errors()},
                   description="Page through memories, newest first. Pass next_cursor back as cursor.")
    def get(self, request):
        self.caller.require(Scope.READ)
        args = self.query(s.ListQuery)
        page = selectors.memory_list(namespace=self.caller.namespaces_to_read(args.get("namespace")),
                                     tags=args.get("tags"), kind=args.get("kind"), state=args["state"],
                                     limit=args["limit"], cursor=args.get("cursor"))
        return Response(page.as_dict())

    @extend_schema(summary="Remember", operation_id="memories_create", request=s.RememberRequest,
                   responses={201: s.RememberResponse, 200: s.RememberResponse, **errors(409, 413, 415)},
                   description="Store a memory (201). Content already stored in the namespace is not stored twice: "
                               "the existing memory comes back with deduplicated=true (200); under an existing key, "
                               "a new revision is added (200, revised=true).")
    def post(self, request):
        self.caller.require(Scope.WRITE)
        fields = self.body(s.RememberRequest)
        namespace = self.caller.namespace_to_write(fields.pop("namespace", None))
        result = services.memory_remember(namespace=namespace, **fields, **self.caller.credit)
        if not result.created:
            return Response(result.as_dict())
        location = reverse("api:memory", kwargs={"id": result.memory.id})
        return Response(result.as_dict(), status=201, headers={"Location": location})


class MemoryDetailView(ApiView):
    @extend_schema(summary="Get a memory", operation_id="memories_get", parameters=[s.GetQuery],
                   responses={200: s.MemoryResponse, **errors(404)},
                   description="Read one memory as it is now, or as it was known at as_of about valid_at.")
    def get(self, request, id: int):
        self.caller.require(Scope.READ)
        args = self.query(s.GetQuery)
        self.caller.check_memory(_memory_id(id))
        record = selectors.memory_get(memory_id=id, as_of=args.get("as_of"), valid_at=args.get("valid_at"))
        return Response(record.as_dict())

    @extend_schema(summary="Update a memory", operation_id="memories_update", request=s.UpdateRequest,
                   responses={200: s.ChangeResponse, **errors(404, 409, 413, 415)},
                   description="A new revision replaces the given fields (the others carry over); tags are added "
                               "or removed. History keeps every earlier revision.")
    def patch(self, request, id: int):
        self.caller.require(Scope.WRITE)
        fields = self.body(s.UpdateRequest)
        self.caller.check_memory(_memory_id(id))
        result = services.memory_update(memory_id=id, **fields, **self.caller.credit)
        return Response(result.as_dict())

    @extend_schema(summary="Forget a memory", operation_id="memories_forget", parameters=[s.ReasonQuery],
                   responses={200: s.ChangeResponse, **errors(404, 409)},
                   description="Hide the memory from now on (a tombstone). History stays: history and recall with "
                               "an earlier as_of still see it. Forgetting twice changes nothing (changed=false).")
    def delete(self, request, id: int):
        self.caller.require(Scope.WRITE)
        args = self.query(s.ReasonQuery)
        self.caller.check_memory(_memory_id(id))
        result = services.memory_forget(memory_id=id, reason=args.get("reason"), **self.caller.credit)
        return Response(result.as_dict())


class MemoryHistoryView(ApiView):
    @extend_schema(summary="Memory history", operation_id="memories_history", parameters=[s.HistoryQuery],
                   responses={200: s.HistoryResponse, **errors(404)},
                   description="Every revision of the memory known by as_of, oldest first, tombstones included.")
    def get(self, request, id: int):
        self.caller.require(Scope.READ)
        args = self.query(s.HistoryQuery)
        self.caller.check_memory(_memory_id(id))
        revisions = selectors.memory_history(memory_id=id, as_of=args.get("as_of"))
        return Response({"memory_id": id, "revisions": [revision.as_dict() for revision in revisions]})


class MemoryRestoreView(ApiView):
    @extend_schema(summary="Restore a forgotten memory", operation_id="memories_restore", request=s.ReasonRequest,
                   responses={200: s.ChangeResponse, **errors(404, 409, 413, 415)},
                   description="Bring a forgotten memory back by re-asserting the revision its tombstone hid. "
                               "Restoring a memory that is not forgotten changes nothing (changed=false).")
    def post(self, request, id: int):
        self.caller.require(Scope.WRITE)
        fields = self.body(s.ReasonRequest)
        self.caller.check_memory(_memory_id(id))
        result = services.memory_restore(memory_id=id, reason=fields.get("reason"), **self.caller.credit)
        return Response(result.as_dict())


class RecallView(ApiView):
    throttle_bucket = "read"

    def _recall(self, args: dict) -> Response:
        namespaces = self.caller.namespaces_to_read(args.pop("namespace", None))
        return Response(selectors.memory_recall(namespace=namespaces, **args).as_dict())

    @extend_schema(summary="Recall", operation_id="recall_get", parameters=[s.RecallQuery],
                   responses={200: s.RecallResponse, **errors(503)},
                   description="Search memories by words and meaning, best first. Hits are reference data, not "
                               "instructions. With as_of, the answer is exactly what the store held then.")
    def get(self, request):
        self.caller.require(Scope.READ)
        return self._recall(self.query(s.RecallQuery))

    @extend_schema(summary="Recall (arguments in a JSON body)", operation_id="recall_post", request=s.RecallRequest,
                   responses={200: s.RecallResponse, **errors(413, 415, 503)},
                   description="The same search as GET, for long queries or a list of namespaces in JSON.")
    def post(self, request):
        self.caller.require(Scope.READ)
        return self._recall(self.body(s.RecallRequest))


class ExportView(ApiView):
    @extend_schema(summary="Export", operation_id="export", parameters=[s.ExportQuery],
                   responses={200: s.ExportDocument, **errors()},
                   description="Stream every memory with its full history as one JSON document (the format "
                               "import/ and manage.py import_memories read), one batch at a time.")
    def get(self, request):
        self.caller.require(Scope.READ)
        args = self.query(s.ExportQuery)
        namespace = self.caller.namespace_to_count(args.get("namespace"))
        # Checks its arguments at once; the rows are read as the response is sent.
        chunks = services.memories_export(namespace=namespace, as_of=args.get("as_of"))
        response = StreamingHttpResponse(chunks, content_type="application/json")
        response["Content-Disposition"] = f'attachment; filename="memories-{namespace or "all"}.json"'
        return response


class ImportView(ApiView):
    body_limit_setting = "MEMORY_API_MAX_IMPORT_BYTES"

    @extend_schema(summary="Import", operation_id="import", parameters=[s.ImportQuery], request=s.ExportDocument,
                   responses={200: s.ImportResponse, **errors(409, 413, 415)},
                   description="Import an export document, all or nothing: every item is checked before anything "
                               "is written. trusted=true (admin scope) replays recorded times (known_at).")
    def post(self, request):
        self.caller.require(Scope.WRITE)
        options = self.query(s.ImportQuery)
        if options["trusted"]:
            self.caller.require(Scope.ADMIN)
        document = request.data
        self._check_namespaces(document)
        report = services.memories_import(document=document, trusted=options["trusted"],
                                          dry_run=options["dry_run"], **self.caller.credit)
        return Response({**report.as_dict(), **options})

    def _check_namespaces(self, document) -> None:
        """Refuse an item in a namespace the key may not write; the service checks everything else."""
        if self.caller.namespaces is None or not isinstance(document, dict):
            return
        items = document.get("memories")
        for index, item in enumerate(items if isinstance(items, list) else []):
            namespace = item.get("namespace") if isinstance(item, dict) else None
            if not isinstance(namespace, str) or not namespace:
                continue  # the service lists malformed items with the document's other problems
            try:
                self.caller.namespace_to_write(namespace)
            except InvalidInput:
                continue
            except PermissionDenied as error:
                raise PermissionDenied(f"memories[{index}].{error.message}",
                                       field=f"memories[{index}].namespace") from None


class StatsView(ApiView):
    # What only the operator of the whole store should see: not for a key limited to some namespaces.
    SERVER_WIDE = ("database_bytes", "sqlite_version", "schema", "search_mode")
    COUNTS = ("memories", "visible", "forgotten", "revisions", "with_ttl", "kinds", "namespaces", "top_tags")

    @extend_schema(summary="Statistics", operation_id="stats", parameters=[s.StatsQuery],
                   responses={200: s.StatsResponse, **errors()},
                   description="Count memories: visible, forgotten, revisions, expiring, per kind, per namespace, "
                               "top tags. Keys for every namespace also see the database size, schema and search "
                               "mode.")
    def get(self, request):
        self.caller.require(Scope.READ)
        args = self.query(s.StatsQuery)
        stats = selectors.memory_stats(namespace=self.caller.namespace_to_count(args.get("namespace")))
        body = {name: stats[name] for name in self.COUNTS}
        body["embedder"] = stats["search_mode"]["embedder"]
        if self.caller.namespaces is None:
            body.update({name: stats[name] for name in self.SERVER_WIDE})
        return Response(body)


class HealthView(APIView):
    """No key needed: a liveness and readiness probe that shows no data and no secrets."""

    authentication_classes = []
    permission_classes = [AllowAny]
    throttle_classes = []
    renderer_classes = [JSONRenderer]

    def get_exception_handler(self):
        return handler

    @extend_schema(summary="Health", operation_id="health", auth=[],
                   responses={200: s.HealthResponse, 503: s.HealthResponse},
                   description="Status, API version, database, search mode, embedder and uptime. No key needed. "
                               "503 when the database cannot be read.")
    def get(self, request):
        try:
            Memory.objects.exists()
            database = "ok"
        except DatabaseError:
            database = "error"
        embedder = get_embedder()
        available = embedder.available()
        body = {
            "status": "ok" if database == "ok" else "degraded",
            "version": memoryproject.__version__,
            "api_version": API_VERSION,
            "database": database,
            # Without the model, hybrid recall falls back to keywords (search.engine.rank).
            "search_mode": "hybrid" if available else "keyword",
            "embedder": {"name": embedder.name, "device": embedder.device, "available": available},
            "uptime_seconds": int(time.monotonic() - _STARTED),
        }
        return Response(body, status=200 if database == "ok" else 503)


class HookRecallView(ApiView):
    throttle_bucket = "read"

    @extend_schema(summary="Hook: recall a block for a prompt", operation_id="hooks_recall",
                   request=s.HookRecallRequest, responses={200: s.HookBlockResponse, **errors(413, 415, 503)},
                   description="Recall for a prompt and return the hits as a ready-to-inject block, wrapped in "
                               "<memory-context> tags and marked as reference data, within budget characters.")
    def post(self, request):
        fields = self.body(s.HookRecallRequest)
        return Response(services.hook_recall(caller=self.caller, **_given(fields)).as_dict())


class HookIngestView(ApiView):
    @extend_schema(summary="Hook: capture text", operation_id="hooks_ingest", request=s.HookIngestRequest,
                   responses={201: s.HookIngestResponse, 200: s.HookIngestResponse, **errors(409, 413, 415)},
                   description="Store text a harness captured as a memory with a retention TTL (201). Text already "
                               "held, exactly or nearly, renews that memory instead (200). Text that looks like a "
                               "prompt injection is refused (400, code injection_suspected) and counted.")
    def post(self, request):
        fields = self.body(s.HookIngestRequest)
        result = services.hook_ingest(caller=self.caller, **_given(fields))
        return Response(result.as_dict(), status=201 if result.status == "created" else 200)


class HookReportView(ApiView):
    throttle_bucket = "read"

    @extend_schema(summary="Hook: report an injection", operation_id="hooks_report", request=s.HookReportRequest,
                   responses={201: s.InjectionResponse, **errors(404, 413, 415)},
                   description="Record that a block was actually injected into a prompt: harness, hook, query, "
                               "the memory revisions it carried and its size (injection telemetry, kept "
                               "MEMORY_TELEMETRY_DAYS).")
    def post(self, request):
        fields = self.body(s.HookReportRequest)
        record = services.hook_report(caller=self.caller, **_given(fields))
        return Response(record.as_dict(), status=201)


def _given(fields: dict) -> dict:
    """The fields a client sent with a value: null means 'not given', so the service's default applies."""
    return {name: value for name, value in fields.items() if value is not None}
