"""What a read says a memory is, as of its time: ``candidate``, ``active``, ``stale``, ``archived`` or ``forgotten``.

Candidate, active and archived are recorded: each transition (promote, archive,
unarchive, and a new memory's first row) appends an attribute row with the state and
why (``memories.models.Attributes``), so the state as of T is the row's as of T.
Forgotten is a tombstone winning the visibility rule. Stale is derived, never stored:
an active memory whose visible revision was learned longer before the read's ``as_of``
than ``MEMORY_STALE_AFTER_DAYS`` gives its kind (as of then). Recall applies the same
rule in the search snapshot (``search.memory_attributes.AttributesAt.in_states``).
"""

import datetime as dt

from django.conf import settings

from memories.models import Lifecycle
from telemetry import screening

STALE = "stale"
FORGOTTEN = "forgotten"
READ_STATES = (Lifecycle.CANDIDATE.value, Lifecycle.ACTIVE.value, STALE, Lifecycle.ARCHIVED.value, FORGOTTEN)
# The reason a candidate's attribute row records when an untrusted writer's text reads as an instruction to the
# agent (``telemetry.screening``): hooks never inject it while it stays a candidate (a person promotes it).
HELD = "held: it {description} (pattern {name}); hooks inject it only once a person promotes it"
HELD_PREFIX = HELD.split(" it ")[0]
# Recall finds visible memories, never forgotten ones; by default it leaves the archived out.
RECALL_STATES = READ_STATES[:-1]
RECALL_STATES_DEFAULT = (Lifecycle.CANDIDATE.value, Lifecycle.ACTIVE.value, STALE)


def held_reason(text: str) -> str | None:
    """The reason to hold an untrusted writer's text as a candidate, or None when it does not read as an
    instruction to the agent."""
    pattern = screening.suspected_injection(text)
    return HELD.format(description=pattern.description, name=pattern.name) if pattern is not None else None


def stale_after(kind: str) -> dt.timedelta | None:
    """How long after its visible revision was learned an active memory of ``kind`` reads as stale; None: never."""
    days = settings.MEMORY_STALE_AFTER_DAYS.get(kind)
    return dt.timedelta(days=days) if days is not None else None


def stale_after_micros() -> dict[str, int]:
    """``stale_after`` of every kind that goes stale, in microseconds: what the search snapshot compares."""
    return {kind: days * 86_400_000_000 for kind, days in settings.MEMORY_STALE_AFTER_DAYS.items()}


def read_state(recorded: str, *, kind: str, known_at: dt.datetime, as_of: dt.datetime) -> str:
    """The state a read at ``as_of`` shows for a visible memory in state ``recorded`` of ``kind`` whose visible
    revision was learned at ``known_at``."""
    if recorded == Lifecycle.ACTIVE:
        age = stale_after(kind)
        if age is not None and known_at < as_of - age:
            return STALE
    return str(recorded)
