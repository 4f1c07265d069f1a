"""Plain results of the hook services (``memories.services.hooks``) and the telemetry selectors."""

import datetime as dt
from dataclasses import dataclass

from memoryproject.timeparse import format_instant


@dataclass(frozen=True)
class HookHit:
    """A memory a recalled block shows: enough to report it and to look it up, never its text."""

    memory_id: int
    revision_id: int
    namespace: str
    key: str
    title: str
    score: float
    age: str

    def as_dict(self) -> dict:
        return {"memory_id": self.memory_id, "revision_id": self.revision_id, "namespace": self.namespace,
                "key": self.key, "title": self.title, "score": self.score, "age": self.age}


@dataclass(frozen=True)
class HookBlock:
    """A ready-to-inject block for a prompt, and what it holds.

    ``hits`` are the memories the block shows, in recall's order (the first of recall's
    hits); ``omitted`` counts the hits that did not fit in ``budget``. ``block`` is empty
    when nothing matched. ``recall_id`` names the telemetry row this answer wrote.
    """

    query: str
    block: str
    characters: int
    budget: int
    truncated: bool
    hits: list[HookHit]
    omitted: int
    terms: list[str]
    match_mode: str
    mode: str
    note: str | None
    hint: str | None
    recall_id: int

    def as_dict(self) -> dict:
        return {"query": self.query, "block": self.block, "characters": self.characters, "budget": self.budget,
                "truncated": self.truncated, "hits": [hit.as_dict() for hit in self.hits], "omitted": self.omitted,
                "terms": self.terms, "match_mode": self.match_mode, "mode": self.mode, "note": self.note,
                "hint": self.hint, "recall_id": self.recall_id}


@dataclass(frozen=True)
class IngestResult:
    """What ``hook_ingest`` did with captured text.

    ``status``: ``created`` (a new memory), ``duplicate`` (a memory already held exactly
    this text) or ``refreshed`` (one held nearly this text: ``cosine`` says how near).
    For the last two the existing memory's expiry was extended, never shortened.
    """

    status: str
    memory_id: int
    revision_id: int
    namespace: str
    cosine: float | None
    expires_at: dt.datetime | None

    def as_dict(self) -> dict:
        return {"status": self.status, "memory_id": self.memory_id, "revision_id": self.revision_id,
                "namespace": self.namespace, "cosine": self.cosine, "expires_at": format_instant(self.expires_at)}


@dataclass(frozen=True)
class InjectionRecord:
    """A recorded injection report."""

    id: int
    at: dt.datetime
    harness: str
    hook: str
    session: str
    characters: int
    tokens_estimate: int
    memories: int

    def as_dict(self) -> dict:
        return {"id": self.id, "at": format_instant(self.at), "harness": self.harness, "hook": self.hook,
                "session": self.session, "characters": self.characters, "tokens_estimate": self.tokens_estimate,
                "memories": self.memories}


@dataclass(frozen=True)
class DayActivity:
    """One UTC day of hook traffic."""

    day: dt.date
    recalls: int
    injections: int
    characters: int  # injected, as reported
    tokens_estimate: int
    refused_ingests: int


@dataclass(frozen=True)
class HookActivity:
    """The traffic of one (harness, hook) pair."""

    harness: str
    hook: str
    recalls: int
    recall_characters: int  # offered by hooks/recall/
    injections: int
    characters: int  # injected, as reported
    tokens_estimate: int
    refused_ingests: int


@dataclass(frozen=True)
class TelemetryTotals:
    recalls: int
    injections: int
    characters: int
    tokens_estimate: int
    memories_injected: int  # memory revisions carried, counting repeats
    refused_ingests: int


@dataclass(frozen=True)
class MemoryInjections:
    memory_id: int
    injections: int


@dataclass(frozen=True)
class InjectionSummary:
    id: int
    at: dt.datetime
    actor: str
    harness: str
    hook: str
    session: str
    query: str
    characters: int
    tokens_estimate: int
    memory_ids: list[int]
    revision_ids: list[int | None]
