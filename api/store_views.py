"""The REST endpoints of the whole store: export, import, statistics, the audit, and the health probe."""

import time

from django.db import DatabaseError, connection
from django.http import StreamingHttpResponse
from drf_spectacular.utils import extend_schema

import memoryproject
from api.records import EmbedderHealth, Health
from api.schema import parameters
from api.views import ApiView, KeylessView, answer, errors
from memories import selectors, services
from memories.access import PermissionDenied
from memories.arguments import AuditArgs, ExportArgs, ImportArgs, StatsArgs
from memories.health import database_state
from memories.models import Scope
from memories.records import AuditReport, ExportDocument, ImportResult, Stats, StoreStats
from memories.selectors.audit import run_audit
from memories.services.keys import api_key_authenticate
from memoryproject import dialect
from memoryproject.exceptions import InvalidInput, MemoryServiceError
from search.embeddings import get_embedder

API_VERSION = "v1"
_STARTED = time.monotonic()


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


def _from_an_admin(request) -> bool:
    """Whether the request carries a valid API key with the admin scope (health answers without one, saying less)."""
    scheme, _, token = request.META.get("HTTP_AUTHORIZATION", "").partition(" ")
    if scheme.lower() != "bearer":
        return False
    try:
        return api_key_authenticate(token.strip(), interface="api").has(Scope.ADMIN)
    except (MemoryServiceError, DatabaseError):  # a wrong key, or no answer from the database: the short form
        return False


class HealthView(KeylessView):
    """No key needed: a liveness and readiness probe that shows no data and no secrets."""

    @extend_schema(
        summary="Health",
        operation_id="health",
        auth=[],
        responses={200: Health, 503: Health},
        description="Status, API version, database, search mode, embedder and uptime. No key needed; the "
        "database engine's version only to an API key with the admin scope. 503 when the database cannot be "
        "read (database: error), or can be read but would refuse writes (read-only, full).",
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
            # The engine's version only to an admin key: to anyone else it says which exploits to try.
            database_engine=dialect.engine() if database != "error" and _from_an_admin(request) else connection.vendor,
            # Without the model, hybrid recall falls back to keywords (search.engine.rank).
            search_mode="hybrid" if available else "keyword",
            embedder=EmbedderHealth(name=embedder.name, device=embedder.device, available=available),
            uptime_seconds=int(time.monotonic() - _STARTED),
        )
        return answer(health, status=200 if database == "ok" else 503)
