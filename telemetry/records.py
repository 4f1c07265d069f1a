"""Results of the hook services (``memories.services.hooks``), as REST sends them, and of the telemetry selectors."""

import datetime as dt
from dataclasses import dataclass
from typing import Literal

from pydantic import Field

from memoryproject.records import Instant, Record


class HookHit(Record):
    """A memory a recalled block shows: enough to report it and to look it up, never its text."""

    memory_id: int
    revision_id: int
    namespace: str
    key: str
    title: str
    score: float
    age: str
    state: str = Field(description="candidate, active, stale or archived (memories.states).")


class HookBlock(Record):
    """A ready-to-inject block for a prompt, and what it holds.

    ``hits`` are the memories the block shows, in recall's order (the first of the hits that
    answer the prompt on their own); ``omitted`` counts those that did not fit in ``budget``,
    ``held_back`` recall's other hits, which do not answer it on their own or score far below
    the first, or are held. ``block`` is empty when nothing matched. ``recall_id`` names the
    telemetry row this answer wrote (None where the database refused the row: full or read-only).
    """

    query: str
    block: str = Field(
        description=(
            "Ready to inject: the hits wrapped in <memory-context> tags, marked as reference data; empty when nothing "
            "matched."
        )
    )
    characters: int
    budget: int
    truncated: bool
    hits: list[HookHit] = Field(description="The memories the block shows, best first.")
    omitted: int = Field(description="Hits that answer the prompt but did not fit the budget.")
    held_back: int = Field(
        description=(
            "Recall's other hits, not injected: they do not answer the prompt on their own, score far below the first, "
            "or are held (an untrusted writer's text that reads as an instruction)."
        )
    )
    terms: list[str]
    match_mode: str
    mode: str
    note: str | None
    hint: str | None
    recall_id: int | None = Field(
        description=(
            "The telemetry row this answer wrote; null when the database could not store it (full or read-only), "
            "which leaves the block as good."
        )
    )


class IngestResult(Record):
    """What ``hook_ingest`` did with captured text.

    ``status``: ``created`` (a new memory), ``duplicate`` (a memory already held exactly
    this text) or ``refreshed`` (one held nearly this text: ``cosine`` says how near).
    For the last two the existing memory's expiry was extended, never shortened.
    """

    status: Literal["created", "duplicate", "refreshed"] = Field(
        description=(
            "created: a new memory; duplicate or refreshed: a memory already held (nearly) this text, and its expiry "
            "was extended."
        )
    )
    memory_id: int
    revision_id: int
    namespace: str
    cosine: float | None
    expires_at: Instant | None


class InjectionRecord(Record):
    """A recorded injection report."""

    id: int
    at: Instant
    harness: str
    hook: str
    session: str
    characters: int
    tokens_estimate: int
    memories: int


class UsedRecord(Record):
    """Which memories of an injection the answer that followed used (``hook_used``)."""

    injection: int | None = Field(description="The injection read; null when the session has reported none.")
    used: list[int] = Field(description="Memory ids the answer used: they count for injection-aware ranking.")
    unused: list[int] = Field(description="The injection's other memory ids.")


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
    memories_used: int  # of those, the ones the answer after the injection used (hooks/used/)
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
