"""Conflicts between two visible facts of a namespace, and what resolving one did."""

from pydantic import Field

from memories.records.memory_record import MemoryRecord, Provenance
from memoryproject.records import Instant, Record


class ConflictSide(Record):
    """One memory of a conflict, as the revision that states its fact shows it."""

    memory_id: int
    revision_id: int
    key: str
    title: str
    content: str
    subject: str
    predicate: str
    object: str
    valid_from: Instant
    valid_to: Instant | None
    provenance: Provenance = Field(
        description="Who wrote the revision, through which interface, from what source, and when the server learned it."
    )


class ConflictRecord(Record):
    """Two visible facts of a namespace with the same subject and a single-valued predicate, but different objects."""

    id: str = Field(description="The two memory ids, smaller first: stable while both facts stand.")
    namespace: str
    subject: str = Field(description="The subject both facts state, in normal form.")
    predicate: str = Field(description="The single-valued predicate both facts use, in normal form.")
    left: ConflictSide = Field(description="The memory with the smaller id.")
    right: ConflictSide = Field(description="The memory with the larger id.")


class ConflictList(Record):
    as_of: Instant
    valid_at: Instant
    total: int = Field(description="How many conflicts there are at that point; conflicts lists the first ones.")
    conflicts: list[ConflictRecord] = Field(description="By namespace, subject, predicate and memory ids.")


class ResolveResult(Record):
    """What a resolution did: the two memories after it, and the revisions it appended."""

    conflict_id: str
    resolution: str
    memories: list[MemoryRecord] = Field(
        description=("The two memories after the resolution, as now shows them (a forgotten one as its last text).")
    )
    revision_ids: list[int] = Field(
        description="The revisions the resolution appended; history keeps every earlier one."
    )
