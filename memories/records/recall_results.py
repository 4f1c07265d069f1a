"""Recall's answer: the hits for a query, each a memory with its score, snippet and relevance."""

from typing import Any

from pydantic import Field

from memories.records.memory_record import MemoryPlus
from memoryproject.records import Instant, OmittedWhenEmpty, Record


class Hit(MemoryPlus):
    score: float = Field(description="Fused relevance score; higher is better.")
    snippet: str
    matched_terms: list[str]
    relevant: bool = Field(
        description=(
            "Whether this hit answers the query on its own: it matched enough of the query's words or came close "
            "enough in meaning (the bars recall uses to decide that anything answers). Hooks inject only such hits."
        )
    )
    age: str = Field(description="How long before as_of the revision became known, in words.")
    explain: OmittedWhenEmpty[dict[str, Any]] = Field(
        None, description=("With explain: component ranks and raw scores.")
    )


class RecallResult(Record):
    query: str
    terms: list[str] = Field(description="The search terms the query was reduced to.")
    match_mode: str = Field(description="The match mode actually used (auto falls back from all to any).")
    mode: str
    as_of: Instant
    valid_at: Instant
    hits: list[Hit]
    note: OmittedWhenEmpty[str] = None
    hint: OmittedWhenEmpty[str] = Field(None, description="What to try next when nothing matched.")
