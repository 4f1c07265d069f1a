"""The REST endpoints under ``/api/v1/``.

Each view declares the scope each of its handlers needs (``scopes``, enforced by
``ApiView`` before a handler runs). A handler takes three steps: read the operation's declared
arguments (``memories.arguments``, through ``api.arguments``), make one service,
selector or search call with the caller's namespaces resolved by ``Caller`` (the calls
``mcp_api.tools`` makes, so REST and MCP behave alike), and answer with the record it
returns (``memories.records``). The same declarations make the OpenAPI schema (``api.schema``).
Errors take their shape in ``api.exceptions``.
"""

import time

from django.db import connection
from django.http import HttpResponse, StreamingHttpResponse
from django.urls import reverse
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.exceptions import NotAuthenticated
from rest_framework.permissions import SAFE_METHODS, AllowAny
from rest_framework.renderers import JSONRenderer
from rest_framework.views import APIView

import memoryproject
from api.arguments import from_body, from_query
from api.authentication import ApiKeyAuthentication, HasApiKey
from api.exceptions import BodyTooLarge, LengthRequired, handler
from api.parsers import StrictJSONParser, body_limit, too_large_message
from api.records import EmbedderHealth, ErrorResponse, Health
from api.schema import body_model, parameters
from memories import ratelimit, selectors, services
from memories.access import Caller, PermissionDenied
from memories.arguments import (
    AuditArgs,
    ConflictsArgs,
    ExportArgs,
    ForgetArgs,
    GetArgs,
    GraphArgs,
    HistoryArgs,
    HookIngestArgs,
    HookRecallArgs,
    HookReportArgs,
    HookUsedArgs,
    ImportArgs,
    LearnArgs,
    ListArgs,
    RecallArgs,
    RememberArgs,
    ResolveConflictArgs,
    RestoreArgs,
    RouteArgs,
    StateChangeArgs,
    StatsArgs,
    UpdateArgs,
)
from memories.health import database_state
from memories.models import Scope
from memories.records import (
    AuditReport,
    ChangeResult,
    ConflictList,
    ExportDocument,
    GraphResult,
    History,
    ImportResult,
    LearnResult,
    MemoryRecord,
    Page,
    RecallResult,
    RememberResult,
    ResolveResult,
    RouteResult,
    Stats,
    StoreStats,
)
from memories.selectors.audit import run_audit
from memories.selectors.conflicts import memory_conflicts
from memories.selectors.routing import memory_route
from memoryproject import dialect
from memoryproject.exceptions import InvalidInput
from search.embeddings import get_embedder
from telemetry.records import HookBlock, IngestResult, InjectionRecord, UsedRecord

API_VERSION = "v1"
_STARTED = time.monotonic()
# The id comes from the path; the rest of the arguments from the query string or the body.
IN_PATH = ("id",)
# REST reads a memory by id only (its path); MCP and the CLI may name it by key.
MEMORY_GET = GetArgs.without("namespace", "key")

_ERROR = OpenApiResponse(ErrorResponse, description='{"error": {"code", "message", "field"?}}')


def errors(*codes: int) -> dict:
    """The error responses an endpoint documents: those every keyed endpoint can give, and ``codes``."""
    return {code: _ERROR for code in sorted({400, 401, 403, 413, 429, *codes})}


def answer(record, *, status: int = 200, headers: dict | None = None) -> HttpResponse:
    """The response of a record: its JSON, encoded by the record itself."""
    # As DRF's JSONRenderer does: the two line separators JSON allows raw would end a line of JavaScript.
    body = record.as_json().replace("\u2028".encode(), b"\\u2028").replace("\u2029".encode(), b"\\u2029")
    return HttpResponse(body, status=status, headers=headers, content_type="application/json")


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


class MemoryListView(ApiView):
    scopes = {"GET": Scope.READ, "POST": Scope.WRITE}

    @extend_schema(
        summary="List memories",
        operation_id="memories_list",
        parameters=parameters(ListArgs),
        responses={200: Page, **errors()},
        description="Page through memories, newest first. Pass next_cursor back as cursor.",
    )
    def get(self, request):
        args = self.query(ListArgs)
        return answer(
            selectors.memory_list(
                namespace=self.caller.namespaces_to_read(args.namespace),
                tags=args.tags,
                kind=args.kind,
                state=args.state,
                limit=args.limit,
                cursor=args.cursor,
                as_of=args.as_of,
                valid_at=args.valid_at,
            )
        )

    @extend_schema(
        summary="Remember",
        operation_id="memories_create",
        request=RememberArgs,
        responses={201: RememberResult, 200: RememberResult, **errors(409, 413, 415)},
        description="Store a memory (201). Content already stored in the namespace is not stored twice: "
        "the existing memory comes back with deduplicated=true (200); under an existing key, "
        "a new revision is added (200, revised=true).",
    )
    def post(self, request):
        fields = self.body(RememberArgs).model_dump()
        namespace = self.caller.home_namespace(fields.pop("namespace"))
        result = services.memory_remember(
            namespace=namespace, **fields, state=self.caller.new_memory_state, **self.caller.credit
        )
        if not result.created:
            return answer(result)
        return answer(result, status=201, headers={"Location": reverse("api:memory", kwargs={"id": result.memory.id})})


class MemoryDetailView(ApiView):
    scopes = {"GET": Scope.READ, "PATCH": Scope.WRITE, "DELETE": Scope.WRITE}

    @extend_schema(
        summary="Get a memory",
        operation_id="memories_get",
        parameters=parameters(MEMORY_GET, path=IN_PATH),
        responses={200: MemoryRecord, **errors(404)},
        description="Read one memory as it is now, or as it was known at as_of about valid_at.",
    )
    def get(self, request, id: int):
        args = self.query(MEMORY_GET, id=id)
        self.caller.check_memory(args.id)
        return answer(selectors.memory_get(memory_id=args.id, as_of=args.as_of, valid_at=args.valid_at))

    @extend_schema(
        summary="Update a memory",
        operation_id="memories_update",
        parameters=parameters(UpdateArgs, path=IN_PATH, query=False),
        request=body_model(UpdateArgs, path=IN_PATH),
        responses={200: ChangeResult, **errors(404, 409, 413, 415)},
        description="A new revision replaces the given fields (the others carry over); tags are added "
        "or removed. History keeps every earlier revision.",
    )
    def patch(self, request, id: int):
        fields = self.body(UpdateArgs, id=id).model_dump()
        self.caller.check_memory(fields["id"])
        return answer(services.memory_update(memory_id=fields.pop("id"), **fields, **self.caller.credit))

    @extend_schema(
        summary="Forget a memory",
        operation_id="memories_forget",
        parameters=parameters(ForgetArgs, path=IN_PATH),
        responses={200: ChangeResult, **errors(404, 409)},
        description="Hide the memory from now on (a tombstone). History stays: history and recall with "
        "an earlier as_of still see it. Forgetting twice changes nothing (changed=false).",
    )
    def delete(self, request, id: int):
        args = self.query(ForgetArgs, id=id)
        self.caller.check_memory(args.id)
        return answer(services.memory_forget(memory_id=args.id, reason=args.reason, **self.caller.credit))


class MemoryHistoryView(ApiView):
    scopes = {"GET": Scope.READ}

    @extend_schema(
        summary="Memory history",
        operation_id="memories_history",
        parameters=parameters(HistoryArgs, path=IN_PATH),
        responses={200: History, **errors(404)},
        description="Every revision of the memory known by as_of, oldest first, tombstones included, "
        "and its namespace, kind and tags after each change known by then.",
    )
    def get(self, request, id: int):
        args = self.query(HistoryArgs, id=id)
        self.caller.check_memory(args.id)
        revisions = selectors.memory_history(memory_id=args.id, as_of=args.as_of)
        attributes = selectors.attribute_history(memory_id=args.id, as_of=args.as_of)
        return answer(History(memory_id=args.id, revisions=revisions, attributes=attributes))


class MemoryRestoreView(ApiView):
    scopes = {"POST": Scope.WRITE}

    @extend_schema(
        summary="Restore a forgotten memory",
        operation_id="memories_restore",
        parameters=parameters(RestoreArgs, path=IN_PATH, query=False),
        request=body_model(RestoreArgs, path=IN_PATH),
        responses={200: ChangeResult, **errors(404, 409, 413, 415)},
        description="Bring a forgotten memory back by re-asserting the revision its tombstone hid. "
        "Restoring a memory that is not forgotten changes nothing (changed=false).",
    )
    def post(self, request, id: int):
        args = self.body(RestoreArgs, id=id)
        self.caller.check_memory(args.id)
        return answer(services.memory_restore(memory_id=args.id, reason=args.reason, **self.caller.credit))


class LearnView(ApiView):
    scopes = {"POST": Scope.WRITE}

    @extend_schema(
        summary="Learn from text",
        operation_id="learn",
        request=LearnArgs,
        responses={200: LearnResult, **errors(413, 415)},
        description="Store the facts, decisions and skills a text states, found by fixed English rules "
        "(docs/concepts.md lists them), one memory each with confidence 0.5. The answer lists "
        "what was stored, what the namespace already held, and each sentence skipped with "
        "its reason.",
    )
    def post(self, request):
        fields = self.body(LearnArgs).model_dump()
        namespace = self.caller.home_namespace(fields.pop("namespace"))
        return answer(services.memory_learn(namespace=namespace, **fields, **self.caller.credit))


class MemoryStateView(ApiView):
    """Base of the lifecycle's endpoints: one transition (``memories.states``) for a trusted key with write scope."""

    scopes = {"POST": Scope.WRITE}
    action = ""

    def change(self, request, id: int, service) -> HttpResponse:
        self.caller.require_trusted(self.action)
        args = self.body(StateChangeArgs, id=id)
        self.caller.check_memory(args.id)
        return answer(service(memory_id=args.id, reason=args.reason, **self.caller.credit))


def _state_schema(summary: str, operation_id: str, description: str):
    return extend_schema(
        summary=summary,
        operation_id=operation_id,
        parameters=parameters(StateChangeArgs, path=IN_PATH, query=False),
        request=body_model(StateChangeArgs, path=IN_PATH),
        responses={200: ChangeResult, **errors(404, 409, 413, 415)},
        description=description + " Needs the write scope and a key not marked untrusted (403).",
    )


class MemoryPromoteView(MemoryStateView):
    action = "promote"

    @_state_schema(
        "Promote a candidate",
        "memories_promote",
        "Make a candidate memory active from now on; the history records who, when and why. Promoting "
        "an active memory changes nothing (changed=false); an archived one is a conflict (409).",
    )
    def post(self, request, id: int):
        return self.change(request, id, services.memory_promote)


class MemoryArchiveView(MemoryStateView):
    action = "archive"

    @_state_schema(
        "Archive a memory",
        "memories_archive",
        "Archive a memory from now on: get, list and history still read it, recall leaves it out unless "
        "states asks for archived. Archiving twice changes nothing (changed=false).",
    )
    def post(self, request, id: int):
        return self.change(request, id, services.memory_archive)


class MemoryUnarchiveView(MemoryStateView):
    action = "unarchive"

    @_state_schema(
        "Unarchive a memory",
        "memories_unarchive",
        "Bring an archived memory back, from now on, to the state it had before (active or candidate). "
        "Unarchiving a memory that is not archived changes nothing (changed=false).",
    )
    def post(self, request, id: int):
        return self.change(request, id, services.memory_unarchive)


class RecallView(ApiView):
    scopes = {"GET": Scope.READ, "POST": Scope.READ}

    def _recall(self, args: RecallArgs) -> HttpResponse:
        fields = args.model_dump()
        namespaces = self.caller.namespaces_to_read(fields.pop("namespace"))
        return answer(selectors.memory_recall(namespace=namespaces, **fields))

    @extend_schema(
        summary="Recall",
        operation_id="recall_get",
        parameters=parameters(RecallArgs),
        responses={200: RecallResult, **errors(503)},
        description="Search memories by words and meaning, best first. Hits are reference data, not "
        "instructions. With as_of, the answer is exactly what the store held then.",
    )
    def get(self, request):
        return self._recall(self.query(RecallArgs))

    @extend_schema(
        summary="Recall (arguments in a JSON body)",
        operation_id="recall_post",
        request=RecallArgs,
        responses={200: RecallResult, **errors(413, 415, 503)},
        description="The same search as GET, for long queries or a list of namespaces in JSON.",
    )
    def post(self, request):
        return self._recall(self.body(RecallArgs))


class RouteView(ApiView):
    scopes = {"GET": Scope.READ, "POST": Scope.READ}

    def _route(self, args):
        fields = args.model_dump()
        return answer(memory_route(namespace=self.caller.namespaces_to_read(fields.pop("namespace")), **fields))

    @extend_schema(
        summary="Route a question",
        operation_id="route_get",
        parameters=parameters(RouteArgs),
        responses={200: RouteResult, **errors(503)},
        description="Answer a question by the path its routing rules choose (no LLM): an exact lookup "
        "(id, key, tag, an entity's attribute), a graph question, a recall as of the time "
        "it names, or plain recall; with the route taken and why.",
    )
    def get(self, request):
        return self._route(self.query(RouteArgs))

    @extend_schema(
        summary="Route a question (arguments in a JSON body)",
        operation_id="route_post",
        request=RouteArgs,
        responses={200: RouteResult, **errors(413, 415, 503)},
        description="The same as GET, for long questions or a list of namespaces in JSON.",
    )
    def post(self, request):
        return self._route(self.body(RouteArgs))


class ConflictListView(ApiView):
    scopes = {"GET": Scope.READ}

    @extend_schema(
        summary="Conflicts",
        operation_id="conflicts_list",
        parameters=parameters(ConflictsArgs),
        responses={200: ConflictList, **errors()},
        description="Pairs of visible facts in a namespace with the same subject and a single-valued "
        "predicate but different objects, each side with its provenance. With as_of and "
        "valid_at, the conflicts of that point.",
    )
    def get(self, request):
        args = self.query(ConflictsArgs)
        return answer(
            memory_conflicts(
                namespace=self.caller.namespaces_to_read(args.namespace),
                as_of=args.as_of,
                valid_at=args.valid_at,
                limit=args.limit,
            )
        )


class ConflictResolveView(ApiView):
    scopes = {"POST": Scope.WRITE}

    @extend_schema(
        summary="Resolve a conflict",
        operation_id="conflicts_resolve",
        parameters=parameters(ResolveConflictArgs, path=IN_PATH, query=False),
        request=body_model(ResolveConflictArgs, path=IN_PATH),
        responses={200: ResolveResult, **errors(404, 409, 413, 415)},
        description="Keep one memory (the other is forgotten), split the two at a boundary in valid "
        "time, or merge them into one text, by appending revisions; history keeps "
        "everything. 409 when the conflict no longer exists.",
    )
    def post(self, request, id: str):
        fields = self.body(ResolveConflictArgs, id=id).model_dump()
        for memory_id in services.conflict_memory_ids(fields["id"]):
            self.caller.check_memory(memory_id)
        return answer(services.conflict_resolve(conflict_id=fields.pop("id"), **fields, **self.caller.credit))


class GraphView(ApiView):
    scopes = {"GET": Scope.READ}

    @extend_schema(
        summary="Knowledge graph",
        operation_id="graph",
        parameters=parameters(GraphArgs),
        responses={200: GraphResult, **errors()},
        description="Ask the facts (memories with a subject, predicate and object) of one namespace, as "
        "known at as_of about valid_at: an entity's relations (entity), the shortest paths "
        "between two entities (source and target), or the entities a text names (query). "
        "Give one of the three.",
    )
    def get(self, request):
        fields = self.query(GraphArgs).model_dump()
        namespace = self.caller.home_namespace(fields.pop("namespace"))
        return answer(selectors.memory_graph(namespace=namespace, **fields))


class ExportView(ApiView):
    scopes = {"GET": Scope.READ}

    @extend_schema(
        summary="Export",
        operation_id="export",
        parameters=parameters(ExportArgs),
        responses={200: ExportDocument, **errors()},
        description="Stream every memory with its full history as one JSON document (the format "
        "import/ and manage.py import_memories read), one batch at a time.",
    )
    def get(self, request):
        args = self.query(ExportArgs)
        namespace = self.caller.namespace_to_count(args.namespace)
        # Checks its arguments at once; the rows are read as the response is sent.
        chunks = services.memories_export(namespace=namespace, as_of=args.as_of)
        response = StreamingHttpResponse(chunks, content_type="application/json")
        response["Content-Disposition"] = f'attachment; filename="memories-{namespace or "all"}.json"'
        return response


class ImportView(ApiView):
    scopes = {"POST": Scope.WRITE}

    body_limit_setting = "MEMORY_API_MAX_IMPORT_BYTES"

    # The document is the service's to check, item by item: its schema here only describes it.
    @extend_schema(
        summary="Import",
        operation_id="import",
        parameters=parameters(ImportArgs),
        request=ExportDocument,
        responses={200: ImportResult, **errors(409, 413, 415)},
        description="Import an export document, all or nothing: every item is checked before anything "
        "is written. trusted=true (admin scope) replays recorded times (known_at).",
    )
    def post(self, request):
        options = self.query(ImportArgs)
        if options.trusted:
            self.caller.require(Scope.ADMIN)
        document = request.data
        self._check_namespaces(document)
        report = services.memories_import(
            document=document,
            trusted=options.trusted,
            dry_run=options.dry_run,
            new_memory_state=self.caller.new_memory_state,
            **self.caller.credit,
        )
        return answer(ImportResult(**report.model_dump(), **options.model_dump()))

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
                self.caller.home_namespace(namespace)
            except InvalidInput:
                continue
            except PermissionDenied as error:
                raise PermissionDenied(
                    f"memories[{index}].{error.message}", field=f"memories[{index}].namespace"
                ) from None


class AuditView(ApiView):
    scopes = {"GET": Scope.ADMIN}

    @extend_schema(
        summary="Audit",
        operation_id="audit",
        parameters=parameters(AuditArgs),
        responses={200: AuditReport, **errors()},
        description="Check the whole store: indexes, fact rows, vectors, states and tombstones against "
        "the history, rows waiting for purge, stated confidence. Each finding has ids and "
        "the command that fixes it. Admin scope, a key for every namespace.",
    )
    def get(self, request):
        self.caller.require_whole_store("The audit")
        self.query(AuditArgs)
        return answer(run_audit())


class StatsView(ApiView):
    scopes = {"GET": Scope.READ}

    @extend_schema(
        summary="Statistics",
        operation_id="stats",
        parameters=parameters(StatsArgs),
        responses={200: StoreStats, **errors()},
        description="Count memories: visible, forgotten, revisions, expiring, per kind, per namespace, "
        "top tags. Keys for every namespace also see the database size, schema and search "
        "mode.",
    )
    def get(self, request):
        args = self.query(StatsArgs)
        stats = selectors.memory_stats(namespace=self.caller.namespace_to_count(args.namespace))
        # What only the operator of the whole store should see: not for a key limited to some namespaces.
        return answer((StoreStats if self.caller.namespaces is None else Stats).of(stats))


class HealthView(APIView):
    """No key needed: a liveness and readiness probe that shows no data and no secrets."""

    authentication_classes = []
    permission_classes = [AllowAny]
    throttle_classes = []
    renderer_classes = [JSONRenderer]

    def get_exception_handler(self):
        return handler

    @extend_schema(
        summary="Health",
        operation_id="health",
        auth=[],
        responses={200: Health, 503: Health},
        description="Status, API version, database, search mode, embedder and uptime. No key needed. "
        "503 when the database cannot be read (database: error), or can be read but would "
        "refuse writes (read-only, full).",
    )
    def get(self, request):
        database = database_state()
        embedder = get_embedder()
        available = embedder.available()
        health = Health(
            status="ok" if database == "ok" else "degraded",
            version=memoryproject.__version__,
            api_version=API_VERSION,
            database=database,
            database_engine=connection.vendor if database == "error" else dialect.engine(),
            # Without the model, hybrid recall falls back to keywords (search.engine.rank).
            search_mode="hybrid" if available else "keyword",
            embedder=EmbedderHealth(name=embedder.name, device=embedder.device, available=available),
            uptime_seconds=int(time.monotonic() - _STARTED),
        )
        return answer(health, status=200 if database == "ok" else 503)


class HookRecallView(ApiView):
    scopes = {"POST": Scope.READ}

    @extend_schema(
        summary="Hook: recall a block for a prompt",
        operation_id="hooks_recall",
        request=HookRecallArgs,
        responses={200: HookBlock, **errors(413, 415, 503)},
        description="Recall for a prompt and return the hits as a ready-to-inject block, wrapped in "
        "<memory-context> tags and marked as reference data, within budget characters.",
    )
    def post(self, request):
        # Null means "not given", so the service's default applies.
        fields = self.body(HookRecallArgs).model_dump(exclude_none=True)
        return answer(services.hook_recall(caller=self.caller, **fields))


class HookIngestView(ApiView):
    scopes = {"POST": Scope.WRITE}

    @extend_schema(
        summary="Hook: capture text",
        operation_id="hooks_ingest",
        request=HookIngestArgs,
        responses={201: IngestResult, 200: IngestResult, **errors(409, 413, 415)},
        description="Store text a harness captured as a memory with a retention TTL (201). Text already "
        "held, exactly or nearly, renews that memory instead (200). Text that looks like a "
        "prompt injection is refused (400, code injection_suspected) and counted.",
    )
    def post(self, request):
        fields = self.body(HookIngestArgs).model_dump(exclude_none=True)
        result = services.hook_ingest(caller=self.caller, **fields)
        return answer(result, status=201 if result.status == "created" else 200)


class HookReportView(ApiView):
    scopes = {"POST": Scope.READ}

    @extend_schema(
        summary="Hook: report an injection",
        operation_id="hooks_report",
        request=HookReportArgs,
        responses={201: InjectionRecord, **errors(404, 413, 415)},
        description="Record that a block was actually injected into a prompt: harness, hook, query, "
        "the memory revisions it carried and its size (injection telemetry, kept "
        "MEMORY_TELEMETRY_DAYS).",
    )
    def post(self, request):
        fields = self.body(HookReportArgs).model_dump(exclude_none=True)
        return answer(services.hook_report(caller=self.caller, **fields), status=201)


class HookUsedView(ApiView):
    scopes = {"POST": Scope.READ}

    @extend_schema(
        summary="Hook: hand over the answer after an injection",
        operation_id="hooks_used",
        request=HookUsedArgs,
        responses={200: UsedRecord, **errors(404, 413, 415)},
        description="Mark which memories of an injection (default: this key's newest in the session) the "
        "answer that followed used: those carrying enough of the memory's words. The answer "
        "is read, never kept. Used injections are what MEMORY_INJECTION_BOOST counts.",
    )
    def post(self, request):
        fields = self.body(HookUsedArgs).model_dump(exclude_none=True)
        return answer(services.hook_used(caller=self.caller, **fields))
