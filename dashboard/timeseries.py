"""A chart's time axis: counts per UTC day merged into days, weeks or months to fit.

The counting itself is done by the selectors (``memories.selectors``,
``telemetry.selectors``), in SQL, a day at a time; this module only buckets the days.
"""

import datetime as dt
from dataclasses import dataclass

from dashboard.charts import Series

# A chart shows at least this many days, so a new store's first day is not one lone bar.
MIN_DAYS = 14
# Spans up to DAILY_MAX_DAYS are drawn a bar per day, up to WEEKLY_MAX_DAYS a bar per week, then per month.
DAILY_MAX_DAYS = 45
WEEKLY_MAX_DAYS = 366


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
