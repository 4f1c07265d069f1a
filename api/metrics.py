"""``/metrics``: the process's Prometheus metrics (``memoryproject.metrics``), and read at scrape time the store's
counts and PostgreSQL's connection pool.

Open to loopback clients (Prometheus on the same host, or a proxy that passes the client's
address on: uvicorn takes ``X-Forwarded-For`` from loopback proxies) and to API keys with
the ``admin`` scope; everyone else gets a 403 in the API's error shape. Only an admin key
reads the store's counts by namespace: a loopback client without one gets them summed, so
a key limited to one namespace cannot learn which others exist or their sizes.
"""

import ipaddress

from django.db import connection
from django.http import HttpResponse, JsonResponse
from prometheus_client import REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4

from api.exceptions import BEARER_CHALLENGE, error_body
from memories import selectors
from memories.access import AuthenticationFailed, PermissionDenied
from memories.models import Scope
from memories.services.keys import api_key_authenticate
from memoryproject import dialect
from memoryproject.metrics import PoolCollector
from search.indexing import index_drift

REFUSED = (
    "/metrics answers loopback clients, and others that send an API key with the 'admin' scope as "
    "'Authorization: Bearer <key>'."
)


def _is_loopback(address: str | None) -> bool:
    try:
        return ipaddress.ip_address(address or "").is_loopback
    except ValueError:
        return False


def _refusal(request) -> JsonResponse | bool:
    """The error response that says why the caller may not read the metrics; else whether it may read them by
    namespace (an admin key)."""
    header = request.META.get("HTTP_AUTHORIZATION", "")
    if not header:
        if _is_loopback(request.META.get("REMOTE_ADDR")):
            return False
        return JsonResponse(error_body("forbidden", REFUSED), status=403)
    scheme, _, token = header.partition(" ")
    try:
        if scheme.lower() != "bearer":
            raise AuthenticationFailed("Send the API key as 'Authorization: Bearer <key>'.")
        api_key_authenticate(token.strip(), interface="api").require(Scope.ADMIN)
    except AuthenticationFailed as error:
        response = JsonResponse(error_body(error.code, error.message), status=401)
        response["WWW-Authenticate"] = BEARER_CHALLENGE
        return response
    except PermissionDenied as error:
        return JsonResponse(error_body(error.code, f"{error.message} {REFUSED}"), status=403)
    return True


class StoreCollector:
    """The store's counts, read once per scrape: memories and revisions (per namespace, ``by_namespace``), vectors,
    index drift, the file's size."""

    def __init__(self, *, by_namespace: bool):
        self.by_namespace = by_namespace

    def _counts(self, counts: dict) -> dict[tuple, int]:
        """(namespace, label) -> total; without ``by_namespace``, (label,) -> the total over namespaces."""
        if self.by_namespace:
            return counts
        summed: dict[tuple, int] = {}
        for (_, label), total in counts.items():
            summed[(label,)] = summed.get((label,), 0) + total
        return summed

    def collect(self):
        counts = selectors.store_counts()
        namespace = ["namespace"] if self.by_namespace else []
        memories = GaugeMetricFamily(
            "memory_memories",
            "Memories stored, by state (and namespace, to an admin key).",
            labels=[*namespace, "state"],
        )
        for labels, total in sorted(self._counts(counts["memories"]).items()):
            memories.add_metric(list(labels), total)
        revisions = GaugeMetricFamily(
            "memory_revisions",
            "Revisions stored (by namespace, to an admin key); tombstone=true for those that forget.",
            labels=[*namespace, "tombstone"],
        )
        for labels, total in sorted(self._counts(counts["revisions"]).items()):
            revisions.add_metric([*labels[:-1], "true" if labels[-1] else "false"], total)
        search = selectors.search_mode()
        vectors = GaugeMetricFamily(
            "memory_vectors", "Vectors stored, by the embedder that made them.", labels=["embedder"]
        )
        if search["stored_vectors_from"]:
            vectors.add_metric([search["stored_vectors_from"]], search["vectors"])
        yield from (memories, revisions, vectors)
        yield GaugeMetricFamily(
            "memory_vectors_pending",
            "Revisions with text that have no vector yet (what 'manage.py backfill' would embed).",
            value=search["pending_vectors"],
        )
        yield GaugeMetricFamily(
            "memory_index_drift",
            "Disagreements between the keyword indexes and the revisions "
            "(missing triggers, row counts); 0 when in step. 'manage.py doctor' names them.",
            value=len(index_drift(full=False)),
        )
        yield GaugeMetricFamily(
            "memory_database_bytes", "Size of the database file and its write-ahead log.", value=dialect.size_bytes()
        )


def metrics(request) -> HttpResponse:
    if request.method not in ("GET", "HEAD"):
        return JsonResponse(
            error_body("method_not_allowed", f"Method {request.method!r} not allowed: use GET."),
            status=405,
            headers={"Allow": "GET, HEAD"},
        )
    allowed = _refusal(request)
    if isinstance(allowed, JsonResponse):
        return allowed
    store = CollectorRegistry()
    # PostgreSQL's connection pool, when there is one (MEMORY_DB_POOL_SIZE), read before the store's counts take a
    # connection from it.
    pool = getattr(connection, "pool", None)
    if pool is not None:
        store.register(PoolCollector(pool))
    store.register(StoreCollector(by_namespace=allowed))
    # Two expositions of distinct metric names, one after the other, are one valid exposition. The classic
    # text format: every Prometheus version reads it.
    return HttpResponse(generate_latest(REGISTRY) + generate_latest(store), content_type=CONTENT_TYPE_PLAIN_0_0_4)
