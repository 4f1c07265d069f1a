"""What a write returns: the memory after remember, revise, forget, restore or retag, and what else it found."""

from typing import Annotated

from pydantic import ConfigDict, Field, PlainSerializer

from memories.records.memory_record import MemoryPlus
from memoryproject.records import Instant, OmittedWhenEmpty, Record


def _four_places(cosine: float) -> float:
    return round(cosine, 4)  # more digits in an answer would be noise


class NearTwinRecord(Record):
    """Another memory of the namespace that says nearly the same."""

    # Read from search.duplicates.NearTwin's attributes.
    model_config = ConfigDict(from_attributes=True)

    memory_id: int = Field(description="The other memory of the namespace that says nearly the same.")
    revision_id: int
    cosine: Annotated[float, PlainSerializer(_four_places)] = Field(
        description="Cosine of the two texts' embeddings (1 = same meaning)."
    )


class RememberResult(MemoryPlus):
    created: bool = Field(description="A new memory was stored.")
    deduplicated: bool = Field(False, description="Nothing new was stored: this memory already held the content.")
    revised: bool = Field(False, description="A new revision was added to the memory under the given key.")
    near_twin: OmittedWhenEmpty[NearTwinRecord] = Field(
        None,
        description="Present when another memory says nearly the same: the write went ahead; consider "
        "memory_update on the twin instead, or forgetting one of them.",
    )
    held: OmittedWhenEmpty[str] = Field(
        None,
        description=(
            "Present when the text, from an untrusted writer, reads as an instruction to the agent: it was stored "
            "as a candidate that hooks never inject until a person promotes it, and this says why."
        ),
    )


class CorrectionRecord(Record):
    """The revision a bounded correction wrote: what it says, and the interval it holds for."""

    revision_id: int
    title: str
    content: str
    valid_from: Instant
    valid_to: Instant | None


class ChangeResult(MemoryPlus):
    """Result of revise, forget, restore and retag: the memory after, and whether anything changed."""

    changed: bool = Field(description="False when the call changed nothing (for example, already forgotten).")
    correction: OmittedWhenEmpty[CorrectionRecord] = Field(
        None,
        description="Present after a bounded correction (valid_from, valid_to): the revision written and the "
        "interval it holds for. The memory's own fields show the value that holds now.",
    )
