"""What learning from text found: the items stored or already held, the facts a change ended, what it skipped."""

from typing import Literal

from pydantic import Field

from knowledge import vocabulary
from memoryproject.records import Instant, OmittedWhenEmpty, Record


class LearnedItem(Record):
    """One fact, decision or skill found in the text, and the memory that holds it."""

    memory_id: int = Field(description="The memory that holds it: the one stored now, or the one that already did.")
    revision_id: int = Field(description="That memory's revision holding it.")
    kind: str = Field(description="fact, decision or skill.")
    content: str = Field(description="The clean sentence (or, for a skill, the steps) the rules made of the text.")
    subject: OmittedWhenEmpty[str] = Field(None, description="A fact's triple: subject.")
    predicate: OmittedWhenEmpty[str] = Field(
        None,
        description=(
            f"A fact's triple: predicate, one of {', '.join(dict.fromkeys(p.name for p in vocabulary.PREDICATES))}, "
            "a role or attribute as said ('default region'), or a verb no rule knows, as said."
        ),
    )
    object: OmittedWhenEmpty[str] = Field(None, description="A fact's triple: object.")
    valid_from: OmittedWhenEmpty[Instant] = Field(
        None,
        description=(
            "When the text says the fact holds from ('since March', 'last month'), resolved against the time of the "
            "call."
        ),
    )
    valid_to: OmittedWhenEmpty[Instant] = Field(None, description="When the text says the fact holds until.")
    alternatives: OmittedWhenEmpty[list[str]] = Field(
        None,
        description=(
            "A decision's alternatives, when the text names them ('over Z', 'instead of Z', 'rather than Z')."
        ),
    )
    start: int = Field(description="Where it is in the text: the offset of its first character (from 0).")
    end: int = Field(description="The offset just past its last character.")
    matched_by: OmittedWhenEmpty[Literal["triple", "content"]] = Field(
        None,
        description=(
            "Deduplicated items only: the memory already held the same triple (names compared in normal form) or "
            "the same content."
        ),
    )


class EndedFact(Record):
    """A fact that a stated change ended: as of now it holds only before ``valid_to``; as of earlier, as it did."""

    memory_id: int
    revision_id: int = Field(description="The revision that now shows the fact with its end (the last one written).")
    subject: str
    predicate: str
    object: str
    valid_to: Instant = Field(description="When it stopped holding: the time the text states, or the time of the call.")
    change: str = Field(
        description="The change rule that ended it: moved from, as, took over, with, by, left, "
        "dropped, no longer, instead of, now (docs/learning.md)."
    )
    start: int = Field(description="Where the sentence stating the change is in the text.")
    end: int


class SkippedSentence(Record):
    """A sentence that taught nothing, and why."""

    text: str
    start: int
    end: int
    reason: str = Field(
        description=(
            "Why: it starts with question, hypothetical, negation, past, pleasantry or vague; or it says why the store "
            "refused the item."
        )
    )


class UnmatchedChange(Record):
    """A stated change that ended nothing, because no current fact of the namespace matched it."""

    text: str
    start: int
    end: int
    reason: str = Field(description="Which facts it would have ended, and that none holds now.")


class LearnResult(Record):
    """What learn found in the text: what it stored, what the namespace already held, what it ended, what it skipped."""

    namespace: str
    stored: list[LearnedItem] = Field(description="Items stored as new memories, in the text's order.")
    deduplicated: list[LearnedItem] = Field(
        description=("Items the namespace already held (visible now): nothing was stored for them.")
    )
    ended: list[EndedFact] = Field(
        description=(
            "Current facts that a stated change ('moved from A to B', 'replaced X as lead of Y', 'no longer') ended: "
            "superseded, not forgotten."
        )
    )
    unmatched_changes: list[UnmatchedChange] = Field(
        description=("Stated changes that ended nothing, with the reason: no current fact matched.")
    )
    skipped: list[SkippedSentence] = Field(description="Sentences that gave no item, each with its reason.")
