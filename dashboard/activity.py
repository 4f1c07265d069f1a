"""The dashboard's aggregate reads over memories: counts over time, per namespace and kind, expiring soon.

Visibility comes from the one rule on the querysets (``Memory.objects.visible``,
``Revision.objects.visible``); this module only groups and counts. Counting is done
by SQLite (``GROUP BY`` one day at a time), so a page costs a few aggregate queries
whatever the size of the store; days are then merged into weeks or months here
(``time_series``, for the telemetry page's days too). Telemetry is read through
``telemetry.selectors``; this module only names the memories its rows point at.
"""

import datetime as dt
from dataclasses import dataclass

from django.db.models import Count

from dashboard.charts import Series
from memories.models import Memory, Revision
from memoryproject.dbfunctions import UtcDay

# A chart shows at least this many days, so a new store's first day is not one lone bar.
MIN_DAYS = 14
# Spans up to DAILY_MAX_DAYS are drawn a bar per day, up to WEEKLY_MAX_DAYS a bar per week, then per month.
DAILY_MAX_DAYS = 45
WEEKLY_MAX_DAYS = 366
EXPIRING_DAYS = 7
EXPIRING_SHOWN = 50


def per_day(queryset, field: str) -> dict[dt.date, int]:
    """Return {day: rows} for the rows of ``queryset``, grouped by the UTC day of ``field``."""
    rows = queryset.annotate(day=UtcDay(field)).values("day").annotate(total=Count("pk")).order_by("day")
    return {row["day"]: row["total"] for row in rows}


@dataclass(frozen=True)
class TimeSeries:
    labels: list[str]
    series: list[Series]
    unit: str  # "day", "week" or "month"


def _bucket_start(day: dt.date, unit: str) -> dt.date:
    if unit == "week":
        return day - dt.timedelta(days=day.weekday())
    if unit == "month":
        return day.replace(day=1)
    return day


def _next_bucket(day: dt.date, unit: str) -> dt.date:
    if unit == "week":
        return day + dt.timedelta(days=7)
    if unit == "month":
        return (day.replace(day=28) + dt.timedelta(days=4)).replace(day=1)
    return day + dt.timedelta(days=1)


def time_series(counts: dict[str, dict[dt.date, int]], *, today: dt.date) -> TimeSeries:
    """Return the named day counts on one axis from the first day with data to ``today``, bucketed to fit."""
    days = [day for by_day in counts.values() for day in by_day]
    first = min(days + [today - dt.timedelta(days=MIN_DAYS - 1)])
    last = max(days + [today])
    span = (last - first).days + 1
    unit = "day" if span <= DAILY_MAX_DAYS else "week" if span <= WEEKLY_MAX_DAYS else "month"
    starts = []
    moment = _bucket_start(first, unit)
    while moment <= last:
        starts.append(moment)
        moment = _next_bucket(moment, unit)
    position = {start: index for index, start in enumerate(starts)}
    series = []
    for name, by_day in counts.items():
        values = [0] * len(starts)
        for day, total in by_day.items():
            values[position[_bucket_start(day, unit)]] += total
        series.append(Series(name=name, values=values))
    fmt = "%Y-%m" if unit == "month" else "%Y-%m-%d"
    return TimeSeries(labels=[start.strftime(fmt) for start in starts], series=series, unit=unit)


def memory_activity(*, today: dt.date) -> TimeSeries:
    """Memories added (their creation) and forgotten (their tombstones), over time."""
    return time_series({
        "added": per_day(Memory.objects.all(), "created_at"),
        "forgotten": per_day(Revision.objects.filter(tombstone=True), "known_at"),
    }, today=today)


def namespace_kind_totals(*, now: dt.datetime) -> list[dict]:
    """Return one row per (namespace, kind): memories in all, and visible now."""
    # memory_namespace_kind covers the grouping; the visible count adds the visibility subquery per memory.
    totals = {
        (row["namespace"], row["kind"]): {"namespace": row["namespace"], "kind": row["kind"], "memories": row["n"],
                                          "visible": 0}
        for row in Memory.objects.values("namespace", "kind").annotate(n=Count("pk")).order_by("namespace", "kind")
    }
    visible = Memory.objects.visible(as_of=now).values("namespace", "kind").annotate(n=Count("pk"))
    for row in visible.order_by("namespace", "kind"):
        totals[(row["namespace"], row["kind"])]["visible"] = row["n"]
    return list(totals.values())


def expiring_soon(*, now: dt.datetime, days: int = EXPIRING_DAYS) -> list[Revision]:
    """Return the revisions shown now whose TTL runs out within ``days``, soonest first."""
    # revision_expires (partial index on expires_at) narrows to the few rows with a TTL in range first.
    return list(
        Revision.objects.filter(expires_at__gt=now, expires_at__lte=now + dt.timedelta(days=days))
        .visible(as_of=now)
        .select_related("memory")
        .order_by("expires_at", "id")[:EXPIRING_SHOWN]
    )


GONE = {"label": "(gone: erased or purged)", "state": "gone"}


def memory_labels(memory_ids: set[int]) -> dict[int, dict]:
    """Return {memory id: {"label", "state"}} for each id: its newest title, else namespace/key; or gone.

    Telemetry rows hold bare ids and its selectors return them so (they serve every door and
    never carry memory text); this staff-only page is where they are given names. Two queries.
    """
    memories = {memory.pk: memory for memory in Memory.objects.filter(pk__in=memory_ids)}
    titles = {}
    for revision in (Revision.objects.filter(memory_id__in=memories, tombstone=False)
                     .order_by("memory_id", "known_at", "id").values("memory_id", "title")):
        titles[revision["memory_id"]] = revision["title"]  # the newest wins
    return {pk: {"label": titles.get(pk) or f"{memories[pk].namespace}/{memories[pk].key}",
                 "state": memories[pk].state} if pk in memories else GONE
            for pk in memory_ids}
