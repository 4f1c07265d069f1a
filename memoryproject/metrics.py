"""The server's Prometheus metrics, kept per process in prometheus_client's default registry.

Every app records into the metrics declared here (the embedder declares its own in
``search.embeddings``, since search imports no other app); ``api.metrics`` serves them at
``/metrics`` with the store's counts, which it reads at scrape time. Each process counts
its own requests from its start, so with several server processes Prometheus scrapes
each one and sums (docs/operations.md, Metrics).
"""

import functools
import platform
import time
from collections.abc import Callable

from prometheus_client import Counter, Gauge, Histogram, Info, disable_created_metrics
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

import memoryproject

# No `*_created` series beside each counter and histogram: Prometheus does not use them, and they double the lines.
disable_created_metrics()

# Seconds: from a cached read (a millisecond) to a write that waited for a long import.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
# A write lock taken at once is a few microseconds; a wait up to the busy timeout (MEMORY_DB_BUSY_TIMEOUT).
LOCK_WAIT_BUCKETS = (0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0, 120.0)

HTTP_REQUESTS = Counter(
    "memory_http_requests",
    "HTTP requests answered, by door, route pattern, method and status.",
    ["door", "route", "method", "status"],
)
HTTP_SECONDS = Histogram(
    "memory_http_request_duration_seconds",
    "Time from a request reaching Django to its response (its first "
    "chunk, for a streamed export), by door and route pattern.",
    ["door", "route"],
    buckets=LATENCY_BUCKETS,
)
RECALL_SECONDS = Histogram(
    "memory_recall_duration_seconds",
    "Time of a recall that answered, by the mode it ran in (keyword, semantic, hybrid), through any door.",
    ["mode"],
    buckets=LATENCY_BUCKETS,
)
REMEMBER_SECONDS = Histogram(
    "memory_remember_duration_seconds",
    "Time of a remember that answered, by the interface that called it and "
    "what it did (created, revised, deduplicated).",
    ["interface", "outcome"],
    buckets=LATENCY_BUCKETS,
)
WRITE_LOCK_WAIT_SECONDS = Histogram(
    "memory_write_lock_wait_seconds",
    "Time a transaction waited for the database's write lock before BEGIN.",
    buckets=LOCK_WAIT_BUCKETS,
)
WRITE_LOCK_CONTENDED = Counter(
    "memory_write_lock_contended", "Transactions that found the write lock held and waited in line for it."
)
WRITE_LOCK_TIMEOUTS = Counter(
    "memory_write_lock_timeouts", "Transactions that waited the whole busy timeout and failed with busy."
)
DATABASE_ERRORS = Counter(
    "memory_database_errors",
    "Errors from the database, by kind: busy (a lock or the connection pool stayed taken for the busy timeout), "
    "unavailable, read_only, storage_full, or the class of any other driver error (integrity, operational, "
    "programming, data, internal, not_supported, interface, database).",
    ["kind"],
)
BUILD = Info("memory_build", "The server's version and the Python that runs it; the value is always 1.")
BUILD.info({"version": memoryproject.__version__, "python": platform.python_version()})
VECTOR_PARTITION_LOADS = Counter(
    "memory_vector_partition_loads",
    "Namespaces whose vectors this process read from the database: first use, or use after eviction.",
)
VECTOR_PARTITION_LOAD_SECONDS = Counter(
    "memory_vector_partition_load_seconds", "Time spent reading namespaces' vectors from the database."
)
VECTOR_PARTITION_EVICTIONS = Counter(
    "memory_vector_partition_evictions", "Namespaces' vectors dropped to stay within MEMORY_VECTOR_MEMORY_MB."
)
VECTOR_PARTITION_BYTES = Gauge(
    "memory_vector_partition_bytes", "Bytes of vectors this process holds, all namespaces together."
)
TELEMETRY_EVENTS = Counter(
    "memory_telemetry_events",
    "Telemetry events: hook recalls, injection reports, injected memories an answer used, refused ingests.",
    ["kind"],
)


# Django's classes of driver errors in the order its error wrapper tries them (django.db.utils), each with its label.
_DRIVER_ERROR_KINDS = (
    ("DataError", "data"),
    ("OperationalError", "operational"),
    ("IntegrityError", "integrity"),
    ("InternalError", "internal"),
    ("ProgrammingError", "programming"),
    ("NotSupportedError", "not_supported"),
    ("DatabaseError", "database"),
    ("InterfaceError", "interface"),
)


def count_database_error(driver, error_type: type, refused: Exception | None) -> None:
    """Count a driver error (``driver``: the DB-API module): by the domain error it became, else by its class."""
    kind = getattr(refused, "code", None) or next(
        (label for name, label in _DRIVER_ERROR_KINDS if issubclass(error_type, getattr(driver, name))), "database"
    )
    DATABASE_ERRORS.labels(kind=kind).inc()


class PoolCollector:
    """The PostgreSQL connection pool of this process (psycopg_pool's statistics), read at scrape time."""

    def __init__(self, pool):
        self.pool = pool

    def collect(self):
        stats = self.pool.get_stats()  # counts appear once they are not zero
        connections = GaugeMetricFamily(
            "memory_db_pool_connections",
            "Connections of this process's pool, in use (by a request, a scrape's own among them) or idle.",
            labels=["state"],
        )
        connections.add_metric(["in_use"], stats["pool_size"] - stats["pool_available"])
        connections.add_metric(["idle"], stats["pool_available"])
        yield connections
        yield GaugeMetricFamily(
            "memory_db_pool_max", "The most connections the pool opens (MEMORY_DB_POOL_SIZE).", value=stats["pool_max"]
        )
        yield GaugeMetricFamily(
            "memory_db_pool_waiting",
            "Requests waiting now for a free connection.",
            value=stats.get("requests_waiting", 0),
        )
        yield CounterMetricFamily(
            "memory_db_pool_requests", "Connections asked of the pool.", value=stats.get("requests_num", 0)
        )
        yield CounterMetricFamily(
            "memory_db_pool_wait_seconds",
            "Time requests spent waiting for a free connection, summed.",
            value=stats.get("requests_wait_ms", 0) / 1000,
        )
        errors = CounterMetricFamily(
            "memory_db_pool_errors",
            "Pool errors by kind: timeout (no connection free within the busy timeout), connect (a new connection "
            "failed), lost (a connection found broken), bad_return (one given back in a bad state).",
            labels=["kind"],
        )
        for kind, key in (
            ("timeout", "requests_errors"),
            ("connect", "connections_errors"),
            ("lost", "connections_lost"),
            ("bad_return", "returns_bad"),
        ):
            errors.add_metric([kind], stats.get(key, 0))
        yield errors


def observed(histogram: Histogram, labels_of: Callable[[object, dict], dict]):
    """Decorate a keyword-only service so each call that returns is timed into ``histogram``.

    ``labels_of(result, keyword_arguments)`` gives the labels: read from what the call returned
    and was given once it has checked them, so a refused call adds no label value of its own.
    """

    def decorate(function):
        @functools.wraps(function)
        def timed(*args, **kwargs):
            started = time.perf_counter()
            result = function(*args, **kwargs)
            histogram.labels(**labels_of(result, kwargs)).observe(time.perf_counter() - started)
            return result

        return timed

    return decorate
