"""Counts and aggregates: the store's totals, per namespace and kind, per day, and what expires soon."""

import datetime as dt

from django.conf import settings
from django.db import connection
from django.db.migrations.recorder import MigrationRecorder
from django.db.models import Count, IntegerField, Max, OuterRef, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce

from memories import validation
from memories.models import Attributes, Kind, Lifecycle, Memory, Revision, State, Tag
from memories.selectors.memory_records import tag_prefetch
from memoryproject import dialect
from memoryproject.dbfunctions import UtcDay

EXPIRING_DAYS = 7
EXPIRING_SHOWN = 50


def schema_version() -> dict:
    applied = MigrationRecorder.Migration.objects.filter(app__in=("memories", "search")).order_by("-applied", "-id")
    return {row.app: row.name for row in reversed(list(applied))}


def search_mode() -> dict:
    """How recall works here: the embedder configured, the one the stored vectors come from, and how many wait."""
    from search import vectors

    space = vectors.current_space()
    stored = vectors.vector_count()
    # Every revision with text has one document row (search_document), so the difference
    # is what a backfill would embed, without the scan pending_count() makes.
    documents = Revision.objects.filter(tombstone=False).count()
    return {
        "mode": "hybrid",
        "embedder": settings.MEMORY_EMBEDDER,
        "stored_vectors_from": space.embedder if space else None,
        "vectors": stored,
        "pending_vectors": max(documents - stored, 0),
    }


def memory_stats(*, namespace: str | None = None) -> dict:
    """Return totals, per-namespace counts, top tags, TTL count, database size, schema and search mode."""
    now = dialect.now()
    memories = Memory.objects.all()
    if namespace:
        memories = memories.filter(namespace=validation.namespace(namespace))
    visible = memories.visible(as_of=now)
    per_namespace = {
        row["namespace"]: {"memories": row["total"], "visible": 0}
        for row in memories.values("namespace").annotate(total=Count("pk")).order_by("namespace")
    }
    # One grouped count (covered by the memory_namespace_kind index) gives both per namespace and per kind.
    kinds: dict[str, int] = {}
    for row in visible.values("namespace", "kind").annotate(total=Count("pk")).order_by("namespace", "kind"):
        per_namespace[row["namespace"]]["visible"] += row["total"]
        kinds[row["kind"]] = kinds.get(row["kind"], 0) + row["total"]
    visible_revisions = Revision.objects.filter(memory__in=memories.values("pk")).visible(as_of=now)
    # Tags are rows of one namespace each: the visible memories asked for reach only their own namespaces' rows.
    top_tags = (
        Tag.objects.filter(memories__in=visible.values("pk"))
        .annotate(uses=Count("memories"))
        .order_by("-uses", "slug", "namespace")[:10]
    )
    return {
        "memories": sum(entry["memories"] for entry in per_namespace.values()),
        "visible": sum(entry["visible"] for entry in per_namespace.values()),
        "forgotten": memories.filter(state=State.FORGOTTEN).count(),
        "revisions": Revision.objects.filter(memory__in=memories.values("pk")).count(),
        "with_ttl": visible_revisions.filter(expires_at__isnull=False).count(),
        "kinds": {kind: kinds.get(kind, 0) for kind in Kind.values},
        "namespaces": per_namespace,
        "top_tags": [{"tag": tag.name, "namespace": tag.namespace, "count": tag.uses} for tag in top_tags],
        "database_bytes": dialect.size_bytes(),
        "database_path": dialect.location(),
        "database_engine": dialect.engine(),
        "sqlite_version": None if dialect.is_postgresql() else connection.Database.sqlite_version,
        "schema": schema_version(),
        "search_mode": search_mode(),
    }


def namespace_names() -> list[str]:
    """Return every namespace that holds a memory, in name order (the OAuth consent page offers them)."""
    return list(Memory.objects.order_by("namespace").values_list("namespace", flat=True).distinct())


def store_counts() -> dict:
    """Return the stored memories per (namespace, state) and revisions per (namespace, tombstone), for /metrics.

    Two grouped scans of the rows as stored, whatever the time: no visibility rule, so the
    cost grows with the rows, not with the rule's subqueries.
    """
    memories = {
        (row["namespace"], row["state"]): row["total"]
        for row in Memory.objects.values("namespace", "state").annotate(total=Count("pk")).order_by()
    }
    revisions = {
        (row["memory__namespace"], row["tombstone"]): row["total"]
        for row in Revision.objects.values("memory__namespace", "tombstone").annotate(total=Count("pk")).order_by()
    }
    return {"memories": memories, "revisions": revisions}


def memories_with_revision_totals(memories: QuerySet) -> QuerySet:
    """Return ``memories`` with ``revision_count``, ``last_change`` (newest known_at) and ``recorded_state`` (its
    lifecycle state now) per row, tags prefetched."""
    revisions = Revision.objects.filter(memory=OuterRef("pk")).order_by().values("memory")
    newest_row = Attributes.objects.filter(memory=OuterRef("pk")).order_by("-known_at", "-id").values("state")[:1]
    return memories.annotate(
        # The attributes_memory_known index: the newest row of each memory.
        recorded_state=Coalesce(Subquery(newest_row), Value(Lifecycle.ACTIVE.value)),
        # Both read the (memory, known_at, id) index; subqueries, so the tag filter's join cannot multiply them.
        revision_count=Subquery(revisions.annotate(n=Count("pk")).values("n"), output_field=IntegerField()),
        last_change=Subquery(revisions.annotate(at=Max("known_at")).values("at")),
    ).prefetch_related(tag_prefetch())


def _per_day(queryset, field: str) -> dict[dt.date, int]:
    """Return {day: rows} for the rows of ``queryset``, grouped by the UTC day of ``field``."""
    rows = queryset.annotate(day=UtcDay(field)).values("day").annotate(total=Count("pk")).order_by("day")
    return {row["day"]: row["total"] for row in rows}


def memory_activity_per_day() -> dict[str, dict[dt.date, int]]:
    """Return the memories added (their creation) and forgotten (their tombstones) per UTC day: two queries."""
    return {
        "added": _per_day(Memory.objects.all(), "created_at"),
        "forgotten": _per_day(Revision.objects.filter(tombstone=True), "known_at"),
    }


def namespace_kind_totals(*, now: dt.datetime) -> list[dict]:
    """Return one row per (namespace, kind): memories in all, and visible now."""
    # memory_namespace_kind covers the grouping; the visible count adds the visibility subquery per memory.
    totals = {
        (row["namespace"], row["kind"]): {
            "namespace": row["namespace"],
            "kind": row["kind"],
            "memories": row["n"],
            "visible": 0,
        }
        for row in Memory.objects.values("namespace", "kind").annotate(n=Count("pk")).order_by("namespace", "kind")
    }
    visible = Memory.objects.visible(as_of=now).values("namespace", "kind").annotate(n=Count("pk"))
    for row in visible.order_by("namespace", "kind"):
        totals[(row["namespace"], row["kind"])]["visible"] = row["n"]
    return list(totals.values())


def revisions_expiring_soon(*, now: dt.datetime, days: int = EXPIRING_DAYS) -> list[Revision]:
    """Return the revisions shown now whose TTL runs out within ``days``, soonest first."""
    # revision_expires (partial index on expires_at) narrows to the few rows with a TTL in range first.
    return list(
        Revision.objects.filter(expires_at__gt=now, expires_at__lte=now + dt.timedelta(days=days))
        .visible(as_of=now)
        .select_related("memory")
        .order_by("expires_at", "id")[:EXPIRING_SHOWN]
    )
