"""Input rules for memory fields, shared by every write path (services and importers), and the arguments of reads."""

import datetime as dt
import hashlib
import math
import re
import unicodedata
import uuid

from django.conf import settings

from memories.models import Kind
from memoryproject import dialect
from memoryproject.exceptions import InvalidInput, TooLarge
from memoryproject.timeparse import parse_optional_instant

NAMESPACE_RE = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
KEY_MAX = 255
TITLE_MAX = 300
SOURCE_MAX = 500
TRIPLE_PART_MAX = 300
TAG_MAX = 64
TAG_RE = re.compile(r"[\w][\w.:/+-]*")
REASON_MAX = 500
TTL_DAYS_MAX = 36500
QUERY_MAX_CHARS = 2000
RECALL_LIMIT_MAX = 100
MIN_SCORE_MAX = 10.0  # above any score recall gives


def namespace(value) -> str:
    if not isinstance(value, str) or not NAMESPACE_RE.fullmatch(value):
        raise InvalidInput(
            f"namespace: {value!r} is not a valid namespace. Use 1-64 lowercase letters, digits, '-' or '_', "
            "starting with a letter or digit.",
            field="namespace",
        )
    return value


def key(value) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput("key: must be a non-empty string.", field="key")
    value = value.strip()
    if len(value) > KEY_MAX:
        raise TooLarge(f"key: {len(value)} characters is over the limit of {KEY_MAX}.", field="key")
    if any(unicodedata.category(ch) == "Cc" for ch in value):
        raise InvalidInput("key: control characters are not allowed.", field="key")
    return value


# The key a memory remembered without one gets: 16 hex digits, unique in practice, and meaningless to read.
GENERATED_KEY_RE = re.compile(r"[0-9a-f]{16}")


def generated_key() -> str:
    return uuid.uuid4().hex[:16]


_KINDS = frozenset(Kind.values)


def kind(value) -> str:
    if not isinstance(value, str) or value not in _KINDS:
        raise InvalidInput(f"kind: {value!r} is not a kind. Use one of: {', '.join(Kind.values)}.", field="kind")
    return value


def content(value, *, field: str = "content") -> str:
    """Return content with line endings unified and outer whitespace removed."""
    if not isinstance(value, str):
        raise InvalidInput(f"{field}: expected text, got {type(value).__name__}.", field=field)
    value = value.replace("\r\n", "\n").replace("\r", "\n").strip()
    if not value:
        raise InvalidInput(f"{field}: must not be empty.", field=field)
    if "\x00" in value:
        raise InvalidInput(f"{field}: NUL characters are not allowed.", field=field)
    limit = settings.MEMORY_MAX_CONTENT_BYTES
    size = len(value.encode("utf-8", "surrogatepass"))
    if size > limit:
        raise TooLarge(
            f"{field}: {size} bytes is over the limit of {limit} bytes. Split it into smaller memories.",
            field=field,
        )
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(f"{field}: contains characters that are not valid Unicode (lone surrogates).", field=field)
    return value


def text_to_learn(value, *, limit: int) -> str:
    """Return text to learn from as given (learn reports offsets into it), checked: text, not blank, bounded."""
    if not isinstance(value, str):
        raise InvalidInput(f"text: expected text, got {type(value).__name__}.", field="text")
    if not value.strip():
        raise InvalidInput("text: must not be empty.", field="text")
    if len(value) > limit:
        raise TooLarge(
            f"text: {len(value)} characters is over the limit of {limit}. Split it and learn each part "
            "in its own call.",
            field="text",
        )
    if "\x00" in value:
        raise InvalidInput("text: NUL characters are not allowed.", field="text")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput("text: contains characters that are not valid Unicode (lone surrogates).", field="text")
    return value


def short_text(value, *, field: str, limit: int) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InvalidInput(f"{field}: expected text, got {type(value).__name__}.", field=field)
    value = " ".join(value.split())
    if len(value) > limit:
        raise TooLarge(f"{field}: {len(value)} characters is over the limit of {limit}.", field=field)
    _no_nul(value, field=field)
    return value


def query_text(value, *, field: str = "query", required: bool = True) -> str:
    """Return a query as given: text, within QUERY_MAX_CHARS, non-blank when ``required`` (None reads as "")."""
    if value is None and not required:
        value = ""
    if not isinstance(value, str):
        raise InvalidInput(f"{field}: expected text, got {type(value).__name__}.", field=field)
    if required and not value.strip():
        raise InvalidInput(f"{field}: must be non-empty text.", field=field)
    if len(value) > QUERY_MAX_CHARS:
        raise TooLarge(f"{field}: {len(value)} characters is over the limit of {QUERY_MAX_CHARS}.", field=field)
    _no_nul(value, field=field)
    return value


def _no_nul(value: str, *, field: str) -> None:
    # PostgreSQL cannot store NUL in text; refused on every engine alike.
    if "\x00" in value:
        raise InvalidInput(f"{field}: NUL characters are not allowed.", field=field)


def tags(values) -> list[str]:
    """Return tag names in the order given, without case-insensitive repeats."""
    if values is None:
        return []
    if isinstance(values, str) or not isinstance(values, (list, tuple, set, frozenset)):
        raise InvalidInput("tags: expected a list of tag names.", field="tags")
    result, seen = [], set()
    for value in values:
        if not isinstance(value, str) or not TAG_RE.fullmatch(value.strip()) or len(value.strip()) > TAG_MAX:
            raise InvalidInput(
                f"tags: {value!r} is not a valid tag. Use up to {TAG_MAX} letters, digits or . : / + - _ "
                "without spaces.",
                field="tags",
            )
        name = value.strip()
        if name.casefold() not in seen:
            seen.add(name.casefold())
            result.append(name)
    if len(result) > settings.MEMORY_MAX_TAGS:
        raise TooLarge(f"tags: {len(result)} tags is over the limit of {settings.MEMORY_MAX_TAGS}.", field="tags")
    return result


def ttl_days(value, *, allow_keep: bool = False) -> int | None:
    """Return a TTL in days; 0 means none, and -1 (only where allowed) keeps the current one."""
    if value is None:
        return -1 if allow_keep else 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(f"ttl_days: expected an integer, got {value!r}.", field="ttl_days")
    low = -1 if allow_keep else 0
    if not low <= value <= TTL_DAYS_MAX:
        raise InvalidInput(f"ttl_days: {value} is out of range {low}..{TTL_DAYS_MAX}.", field="ttl_days")
    return value


CONFIDENCE_MIN = 0.0
CONFIDENCE_MAX = 1.0


def confidence(value) -> float | None:
    """Return a stated confidence as a float in [0, 1], or None when it is not stated."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InvalidInput(
            f"confidence: expected a number from {CONFIDENCE_MIN:g} to {CONFIDENCE_MAX:g}, got {value!r}.",
            field="confidence",
        )
    if not CONFIDENCE_MIN <= value <= CONFIDENCE_MAX:
        raise InvalidInput(
            f"confidence: {value!r} is out of range {CONFIDENCE_MIN:g}..{CONFIDENCE_MAX:g}.", field="confidence"
        )
    return float(value)


def min_score(value) -> float | None:
    """Return recall's min_score: None (the relevance decision) or a number from 0 to MIN_SCORE_MAX."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= MIN_SCORE_MAX:
        raise InvalidInput(
            f"min_score: {value!r} is out of range 0..{MIN_SCORE_MAX:g} (a recall score).", field="min_score"
        )
    return float(value)


def min_confidence(value) -> float | None:
    """Return recall's min_confidence: None (no filter) or a number from 0 to 1."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise InvalidInput(
            f"min_confidence: {value!r} is out of range 0..1 (a computed confidence).", field="min_confidence"
        )
    return float(value)


def triple(subject, predicate, object_) -> tuple[str, str, str]:
    parts = tuple(
        short_text(value, field=name, limit=TRIPLE_PART_MAX)
        for name, value in (("subject", subject), ("predicate", predicate), ("object", object_))
    )
    if any(parts) and not all(parts):
        raise InvalidInput(
            "subject, predicate and object go together: give all three or none.",
            field=("subject", "predicate", "object")[parts.index("")],
        )
    return parts


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def resolve_times(as_of=None, valid_at=None) -> tuple[dt.datetime, dt.datetime]:
    """Parse a (as_of, valid_at) pair; as_of defaults to now and valid_at to as_of."""
    as_of_time = parse_optional_instant(as_of, field="as_of") or dialect.now()
    valid_time = parse_optional_instant(valid_at, field="valid_at") or as_of_time
    return as_of_time, valid_time


def names(value, *, field: str, check) -> list[str] | None:
    """A read's one name or list of names, each checked by ``check``; None when it names none."""
    if value is None or value == [] or value == "":
        return None
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, (list, tuple)) or not all(isinstance(item, str) for item in values):
        raise InvalidInput(f"{field}: expected a name or a list of names.", field=field)
    return [check(item) for item in values]


def namespace_names(value) -> list[str] | None:
    """The namespaces a read names (one name or a list), checked; None when it names none."""
    return names(value, field="namespace", check=namespace)


def choice(value, *, field: str, choices: tuple[str, ...]) -> str:
    """``value`` if it is one of ``choices``; otherwise the error listing them."""
    if value not in choices:
        raise InvalidInput(f"{field}: {value!r} is not one of {', '.join(choices)}.", field=field)
    return value
