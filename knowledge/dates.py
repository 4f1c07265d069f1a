"""Stated times: "since January", "in March 2025", "last month", "on 2 May 2025", "as of today".

``stated_time(clause, now)`` finds the first phrase of ``PHRASE`` in a clause and reads it
with dateparser, resolved against ``now`` (the time of the learn call) and towards the
past. The instant is the start of the period the phrase names ("March 2025" is
2025-03-01 00:00 UTC, "last month" the first of last month), or ``now`` when that period
holds ``now`` ("today", "this month"). The regular expression only finds where a time is
said; dateparser does the reading.
"""

import datetime as dt
import re
from dataclasses import dataclass

_MONTH = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
    r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
)
_DAY = r"\d{1,2}(?:st|nd|rd|th)?"
_YEAR = r"(?:19|20)\d{2}"
_WEEKDAY = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
# Times that need a lead word to be times: "in May", "since 2024" ("May" alone is a name or a verb).
_BARE = rf"{_MONTH}(?:,?\s+{_YEAR})?|{_YEAR}|{_WEEKDAY}"
# Times that are times wherever they stand.
_DATED = (
    rf"{_DAY}\s+{_MONTH}(?:,?\s+{_YEAR})?|{_MONTH}\s+{_DAY}(?:,?\s+{_YEAR})?|"
    rf"(?:the\s+)?{_DAY}\s+of\s+{_MONTH}(?:,?\s+{_YEAR})?|{_YEAR}-\d{{2}}-\d{{2}}|"
    rf"(?:last|this|past)\s+(?:week|month|year|quarter|{_WEEKDAY})|yesterday|today|this\s+morning|"
    rf"earlier\s+today|tonight|(?:\d+|a|an|one|two|three|four|five|six)\s+(?:days?|weeks?|months?|years?)\s+ago|"
    rf"the\s+(?:start|beginning)\s+of\s+(?:the\s+|this\s+|last\s+)?(?:week|month|year|quarter)"
)
# What the lead word says the time is: when the fact starts, or when it ends.
STARTS = (
    "since",
    "from",
    "as of",
    "starting",
    "starting on",
    "starting from",
    "beginning",
    "effective",
    "effective from",
    "effective on",
    "on",
    "in",
    "during",
)
ENDS = ("until", "till", "through")
_LEADS = "|".join(re.escape(lead) for lead in sorted(STARTS + ENDS, key=len, reverse=True))
# Phrases that say the fact holds from the time of the call on.
NOW = re.compile(
    r"(?<![\w-])(?:(?:from|as\s+of|starting)\s+(?:right\s+)?now(?:\s+on)?|going\s+forward|"
    r"effective\s+immediately|from\s+here\s+on(?:\s+out)?)(?![\w-])",
    re.I,
)
PHRASE = re.compile(
    rf"(?<![\w-])(?:(?P<lead>{_LEADS})\s+(?P<led>{_DATED}|{_BARE})|(?P<alone>{_DATED}))"
    rf"(?:\s+on(?:wards)?)?(?![\w-])",
    re.I,
)


@dataclass(frozen=True)
class StatedTime:
    at: dt.datetime  # UTC
    ends: bool  # "until X": the fact ends then; otherwise it starts (or changed) then
    start: int  # the phrase's span in the clause
    end: int


def _start_of(value: dt.datetime, period: str) -> dt.datetime:
    value = value.replace(hour=0, minute=0, second=0, microsecond=0)
    if period == "week":
        return value - dt.timedelta(days=value.weekday())
    if period == "month":
        return value.replace(day=1)
    if period == "year":
        return value.replace(month=1, day=1)
    return value


def _end_of(start: dt.datetime, period: str) -> dt.datetime:
    """The end of the period that begins at ``start``."""
    if period == "week":
        return start + dt.timedelta(weeks=1)
    if period == "month":
        return (start + dt.timedelta(days=32)).replace(day=1)
    if period == "year":
        return start.replace(year=start.year + 1)
    return start + dt.timedelta(days=1)


def _parser(now: dt.datetime, prefer: str):
    # Imported here: dateparser's import costs a fifth of a second, which a call with no stated time never pays.
    from dateparser.date import DateDataParser

    return DateDataParser(
        languages=["en"],
        settings={
            "PREFER_DATES_FROM": prefer,
            "RELATIVE_BASE": now.astimezone(dt.UTC).replace(tzinfo=None),
            "PREFER_DAY_OF_MONTH": "first",
            "RETURN_AS_TIMEZONE_AWARE": False,
        },
    )


def stated_time(clause: str, now: dt.datetime) -> StatedTime | None:
    """The first time ``clause`` states, resolved against ``now``; None when it states none dateparser reads."""
    said_now = NOW.search(clause)
    if said_now:
        return StatedTime(at=now, ends=False, start=said_now.start(), end=said_now.end())
    for match in PHRASE.finditer(clause):
        said = match["led"] or match["alone"]
        lead = (match["lead"] or "").casefold()
        # "until March" looks ahead; "in March", "since March" look back.
        data = _parser(now, "future" if lead in ENDS else "past").get_date_data(re.sub(r"\s+", " ", said))
        if data.date_obj is None:
            continue
        # "3 weeks ago" names a day, though dateparser reports the unit it counted in.
        period = "day" if said.casefold().endswith("ago") else data.period or "day"
        start = _start_of(data.date_obj, period).replace(tzinfo=dt.UTC)
        if start <= now < _end_of(start, period):
            start = now
        return StatedTime(at=start, ends=lead in ENDS, start=match.start(), end=match.end())
    return None
