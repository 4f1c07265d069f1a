"""Strict parsing of instants: ``YYYY-MM-DD`` or ISO 8601 with a timezone, to UTC microseconds.

Anything ambiguous is refused rather than guessed: a naive time, a sub-microsecond
fraction, a date that does not exist, a year outside 1..9999 once moved to UTC.
Every app reads and writes instants this way, so it lives below them all.
"""

import datetime as dt
import re

from memoryproject.exceptions import InvalidInput

UTC = dt.timezone.utc

_DATE = re.compile(r"(\d{4})-(\d{2})-(\d{2})")
_DATETIME = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d+))?)?"
    r"(Z|z|[+-]\d{2}(?::?\d{2})?)"
)
_HINT = "Use YYYY-MM-DD or ISO 8601 with a timezone, e.g. 2024-05-01T09:30:00Z."


def parse_instant(value, *, field: str) -> dt.datetime:
    """Return ``value`` as an aware UTC datetime, or raise InvalidInput naming the field and value."""
    if isinstance(value, dt.datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise InvalidInput(f"{field}: {value.isoformat()!s} has no timezone. {_HINT}", field=field)
        return _to_utc(value, field=field, shown=value.isoformat())
    if isinstance(value, dt.date):
        return dt.datetime(value.year, value.month, value.day, tzinfo=UTC)
    if not isinstance(value, str):
        raise InvalidInput(f"{field}: expected a date string, got {type(value).__name__}. {_HINT}", field=field)
    text = value.strip()
    if match := _DATE.fullmatch(text):
        year, month, day = (int(part) for part in match.groups())
        return _build(field, value, year, month, day, 0, 0, 0, 0, UTC)
    if match := _DATETIME.fullmatch(text):
        year, month, day, hour, minute = (int(part) for part in match.groups()[:5])
        second = int(match.group(6) or 0)
        fraction = match.group(7) or ""
        if len(fraction) > 6:
            raise InvalidInput(
                f"{field}: {value!r} has sub-microsecond precision; times are kept to the microsecond.",
                field=field,
            )
        micro = int(fraction.ljust(6, "0")) if fraction else 0
        return _build(field, value, year, month, day, hour, minute, second, micro, _zone(match.group(8), field, value))
    if _DATETIME.fullmatch(text + "Z"):
        raise InvalidInput(f"{field}: {value!r} has no timezone; add Z or an offset such as +02:00.", field=field)
    raise InvalidInput(f"{field}: {value!r} is not a date or a time with a timezone. {_HINT}", field=field)


def parse_optional_instant(value, *, field: str) -> dt.datetime | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    return parse_instant(value, field=field)


def format_instant(value: dt.datetime | None) -> str | None:
    """Return the canonical text form used in every response: UTC, microseconds, ``Z``."""
    if value is None:
        return None
    if value.tzinfo is not UTC:
        value = value.astimezone(UTC)
    # Every record writes several per memory: cutting "+00:00" is cheaper than copying the datetime naive.
    return value.isoformat(timespec="microseconds")[:-6] + "Z"


def stored_instant(value) -> dt.datetime | None:
    """A datetime column as a raw cursor returns it (naive UTC, or its text), made aware; None stays None."""
    if value is None:
        return None
    if isinstance(value, str):
        value = dt.datetime.fromisoformat(value)
    return value.replace(tzinfo=dt.timezone.utc) if value.tzinfo is None else value


def _zone(text: str, field: str, value: str) -> dt.tzinfo:
    if text in ("Z", "z"):
        return UTC
    sign = 1 if text[0] == "+" else -1
    digits = text[1:].replace(":", "")
    hours, minutes = int(digits[:2]), int(digits[2:4] or 0)
    if hours > 23 or minutes > 59:
        raise InvalidInput(f"{field}: {value!r} has an impossible timezone offset.", field=field)
    return dt.timezone(sign * dt.timedelta(hours=hours, minutes=minutes))


def _build(field, value, year, month, day, hour, minute, second, micro, zone) -> dt.datetime:
    try:
        moment = dt.datetime(year, month, day, hour, minute, second, micro, tzinfo=zone)
    except ValueError as exc:
        raise InvalidInput(f"{field}: {value!r} is not a real date or time ({exc}).", field=field) from None
    return _to_utc(moment, field=field, shown=repr(value))


def _to_utc(moment: dt.datetime, *, field: str, shown: str) -> dt.datetime:
    try:
        return moment.astimezone(UTC)
    except OverflowError:
        raise InvalidInput(f"{field}: {shown} falls outside years 1..9999 in UTC.", field=field) from None
