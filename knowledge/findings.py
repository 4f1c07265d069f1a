"""What learning finds in a text: items to store, endings of facts a stated change names, and sentences skipped.

``knowledge.extraction`` makes them; ``memories.services.learn`` stores the items and applies the
endings. Plain data: nothing here reads text or touches the database.
"""

import datetime as dt
from dataclasses import dataclass

FACT = "fact"
DECISION = "decision"
SKILL = "skill"


@dataclass(frozen=True)
class Item:
    """One thing learned: its kind, a clean sentence to store, and where in the input it came from."""

    kind: str
    content: str
    start: int  # character offsets in the input, end exclusive
    end: int
    subject: str = ""
    predicate: str = ""
    object: str = ""
    title: str = ""
    choice: str = ""  # decisions: what was chosen
    alternatives: tuple[str, ...] = ()  # decisions: what it was chosen over, when named
    reason: str = ""  # decisions: the "because" part
    steps: tuple[str, ...] = ()  # skills
    valid_from: dt.datetime | None = None  # a stated time the fact holds from
    valid_to: dt.datetime | None = None  # a stated time it holds until


@dataclass(frozen=True)
class Ending:
    """A stated change: which current facts it ends, and what takes their place.

    A current fact matches when its subject, predicate and object match the ones given
    (None or empty: any), names compared in normal form; with ``either_way`` the two names
    may stand either way round. Each fact it ends is restated with ``becomes`` in place of
    its ``replaced`` name ("subject" or "object"), when ``becomes`` is given. When no
    current fact matches, the facts of ``otherwise`` are stored instead.
    """

    rule: str  # which change rule found it (docs/learning.md)
    content: str
    start: int
    end: int
    subject: str | None
    predicates: tuple[str, ...]
    object: str | None
    either_way: bool = False
    becomes: str = ""
    replaced: str = ""
    at: dt.datetime | None = None  # when it changed; None: at the time of the call
    otherwise: tuple[Item, ...] = ()

    def describe(self) -> str:
        """The facts it ends, in words: "ledger uses Oracle", "Pieter (any relation) billing service"."""
        first, *others = self.predicates or ("(any relation)",)
        predicate = f"{first} (or {', '.join(others)})" if others else first
        return f"{self.subject or '(anyone)'} {predicate} {self.object or '(anything)'}"


@dataclass(frozen=True)
class Skipped:
    """A sentence that taught nothing, and why."""

    text: str
    start: int
    end: int
    reason: str


@dataclass(frozen=True)
class Extraction:
    items: tuple[Item, ...]
    skipped: tuple[Skipped, ...]
    endings: tuple[Ending, ...] = ()
