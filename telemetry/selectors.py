"""Reads over injection telemetry for the dashboard, stats and admin: counts per day, per hook, and per memory.

Every function aggregates in SQL (``GROUP BY``), so its cost is a few queries whatever
the number of rows. ``days`` limits a read to the last N days (UTC, today included);
None reads everything telemetry still holds (``MEMORY_TELEMETRY_DAYS``).
"""

import datetime as dt

from django.db.models import Count, QuerySet, Sum

from memoryproject import dialect
from memoryproject.dbfunctions import UtcDay
from memoryproject.exceptions import InvalidInput
from telemetry.models import HookRecall, InjectedMemory, Injection, RefusedIngest, estimate_tokens
from telemetry.records import (
    DayActivity,
    HookActivity,
    InjectionSummary,
    MemoryInjections,
    TelemetryTotals,
)

DAYS_MAX = 36500
LIMIT_MAX = 500


def _since(days: int | None, *, today: dt.date | None = None) -> dt.datetime | None:
    """The start of the last ``days`` days up to ``today`` (default: the clock's), or None for all that is held."""
    if days is None:
        return None
    if isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= DAYS_MAX:
        raise InvalidInput(f"days: {days!r} is out of range 1..{DAYS_MAX}.", field="days")
    start = (today or _today()) - dt.timedelta(days=days - 1)
    return dt.datetime.combine(start, dt.time.min, tzinfo=dt.timezone.utc)


def _limit(limit: int) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= LIMIT_MAX:
        raise InvalidInput(f"limit: {limit!r} is out of range 1..{LIMIT_MAX}.", field="limit")
    return limit


def _recent(model, since: dt.datetime | None):
    # Each telemetry model's index on ``at`` serves the range.
    rows = model.objects.all()
    return rows if since is None else rows.filter(at__gte=since)


def _carried(since: dt.datetime | None):
    """The memories injections carried, of the injections reported since ``since``."""
    carried = InjectedMemory.objects.all()
    return carried if since is None else carried.filter(injection__at__gte=since)


def _today() -> dt.date:
    return dialect.now().astimezone(dt.timezone.utc).date()


def activity_per_day(*, days: int | None = 30, today: dt.date | None = None) -> list[DayActivity]:
    """Return one row per UTC day of the last ``days`` (oldest first, days without traffic as zeros).

    ``days=None`` reads all that telemetry holds: from its first day with traffic to today,
    or to a later day should a harness have reported with its clock ahead of ours.
    """
    today = today or _today()
    since = _since(days, today=today)

    def by_day(model, **sums):
        rows = (
            _recent(model, since)
            .annotate(day=UtcDay("at"))
            .values("day")
            .annotate(n=Count("pk"), **{name: Sum(field) for name, field in sums.items()})
            .order_by("day")
        )
        return {row["day"]: row for row in rows}

    recalls = by_day(HookRecall)
    injections = by_day(Injection, characters="characters")
    refused = by_day(RefusedIngest)
    if since is None:
        seen = [*recalls, *injections, *refused, today]
        first, last = min(seen), max(seen)
    else:
        first, last = since.date(), today
    result = []
    for offset in range((last - first).days + 1):
        day = first + dt.timedelta(days=offset)
        characters = (injections.get(day) or {}).get("characters") or 0
        result.append(
            DayActivity(
                day=day,
                recalls=(recalls.get(day) or {}).get("n", 0),
                injections=(injections.get(day) or {}).get("n", 0),
                characters=characters,
                tokens_estimate=estimate_tokens(characters),
                refused_ingests=(refused.get(day) or {}).get("n", 0),
            )
        )
    return result


def activity_per_hook(*, days: int | None = None) -> list[HookActivity]:
    """Return one row per (harness, hook) seen, ordered by harness then hook."""
    since = _since(days)
    rows: dict[tuple[str, str], dict] = {}

    def add(model, **sums):
        grouped = (
            _recent(model, since)
            .values("harness", "hook")
            .annotate(n=Count("pk"), **{name: Sum(field) for name, field in sums.items()})
            .order_by()
        )
        for entry in grouped:
            yield rows.setdefault((entry["harness"], entry["hook"]), {}), entry

    for found, entry in add(HookRecall, chars="characters"):
        found.update(recalls=entry["n"], recall_characters=entry["chars"] or 0)
    for found, entry in add(Injection, chars="characters"):
        found.update(injections=entry["n"], characters=entry["chars"] or 0)
    for found, entry in add(RefusedIngest):
        found.update(refused_ingests=entry["n"])
    return [
        HookActivity(
            harness=harness,
            hook=hook,
            recalls=found.get("recalls", 0),
            recall_characters=found.get("recall_characters", 0),
            injections=found.get("injections", 0),
            characters=found.get("characters", 0),
            tokens_estimate=estimate_tokens(found.get("characters", 0)),
            refused_ingests=found.get("refused_ingests", 0),
        )
        for (harness, hook), found in sorted(rows.items())
    ]


def telemetry_totals(*, days: int | None = None) -> TelemetryTotals:
    """Return the totals over the last ``days`` (None: all held)."""
    since = _since(days)
    injected = _recent(Injection, since).aggregate(n=Count("pk"), characters=Sum("characters"))
    characters = injected["characters"] or 0
    carried = _carried(since).aggregate(n=Count("pk"), used=Count("used_at"))
    return TelemetryTotals(
        recalls=_recent(HookRecall, since).count(),
        injections=injected["n"],
        characters=characters,
        tokens_estimate=estimate_tokens(characters),
        memories_injected=carried["n"],
        memories_used=carried["used"],
        refused_ingests=_recent(RefusedIngest, since).count(),
    )


def most_injected_memories(*, days: int | None = None, limit: int = 10) -> list[MemoryInjections]:
    """Return the memories carried by the most injections, most first (ties: lower id first)."""
    since = _since(days)
    # InjectedMemory.memory_id is indexed; the grouping reads it alone.
    top = _carried(since).values("memory_id").annotate(n=Count("pk")).order_by("-n", "memory_id")[: _limit(limit)]
    return [MemoryInjections(memory_id=row["memory_id"], injections=row["n"]) for row in top]


def latest_injections(*, limit: int = 20) -> list[InjectionSummary]:
    """Return the newest injection reports with the memory and revision ids each carried (two queries)."""
    injections = list(Injection.objects.prefetch_related("items").order_by("-at", "-id")[: _limit(limit)])
    return [
        InjectionSummary(
            id=injection.pk,
            at=injection.at,
            actor=injection.actor,
            harness=injection.harness,
            hook=injection.hook,
            session=injection.session,
            query=injection.query,
            characters=injection.characters,
            tokens_estimate=injection.tokens_estimate,
            memory_ids=[item.memory_id for item in injection.items.all()],
            revision_ids=[item.revision_id for item in injection.items.all()],
        )
        for injection in injections
    ]


def injections_with_memory_counts(injections: QuerySet) -> QuerySet:
    """Return ``injections`` with ``memory_count``, the memory revisions each carried (one grouped query)."""
    return injections.annotate(memory_count=Count("items"))


def injection_counts(*, as_of: dt.datetime) -> dict[int, int]:
    """{memory id: the injections that carried it and were used by their answer, as known by ``as_of``}.

    An injection counts from the time its answer was found to use the memory (``used_at``), so a
    recall at a past time gives the same answer before and after later reports.
    """
    rows = (
        InjectedMemory.objects.filter(used_at__lte=as_of)
        .values("memory_id")
        .annotate(n=Count("injection_id", distinct=True))
        .order_by()
    )
    return {row["memory_id"]: row["n"] for row in rows}


def latest_injection(*, actor: str, session: str) -> int | None:
    """The id of the newest injection this actor reported for ``session``; None when there is none."""
    return (
        Injection.objects.filter(actor=actor, session=session)
        .order_by("-at", "-id")
        .values_list("pk", flat=True)
        .first()
    )


def injection_items(*, injection_id: int, actor: str) -> tuple[str, list[tuple[int, int | None]]] | None:
    """The query and ``(memory_id, revision_id)`` pairs of this actor's injection; None when it has none."""
    query = Injection.objects.filter(pk=injection_id, actor=actor).values_list("query", flat=True).first()
    if query is None:
        return None
    return query, list(
        InjectedMemory.objects.filter(injection_id=injection_id).order_by("id").values_list("memory_id", "revision_id")
    )


def tables_with_queries() -> list[str]:
    """The tables holding query text, which erasing a memory blanks (``memory_traces_erase``)."""
    return [HookRecall._meta.db_table, Injection._meta.db_table]
