"""A memory's history: every revision, and its namespace, kind, tags and state after each change."""

from pydantic import ConfigDict, Field

from memories.records.memory_record import CONFIDENCE_HELP
from memoryproject.records import Instant, Record


class RevisionRecord(Record):
    """One revision of a memory, as its history lists it."""

    # The attribute is id, the key revision_id.
    model_config = ConfigDict(validate_by_name=True)

    id: int = Field(alias="revision_id")
    memory_id: int
    tombstone: bool = Field(description="True for a forget: the memory is hidden from known_at on.")
    hides: int | None = Field(description="For a tombstone, the revision it hid.")
    title: str
    content: str
    subject: str
    predicate: str
    object: str
    source: str
    confidence: float | None = Field(description=CONFIDENCE_HELP)
    content_hash: str
    known_at: Instant
    valid_from: Instant
    valid_to: Instant | None
    expires_at: Instant | None
    reason: str
    author: str
    interface: str

    @classmethod
    def from_model(cls, revision) -> "RevisionRecord":
        return cls(
            id=revision.pk,
            memory_id=revision.memory_id,
            title=revision.title,
            content=revision.content,
            subject=revision.subject,
            predicate=revision.predicate,
            object=revision.object,
            source=revision.source,
            confidence=revision.confidence,
            content_hash=revision.content_hash,
            known_at=revision.known_at,
            valid_from=revision.valid_from,
            valid_to=revision.valid_to,
            expires_at=revision.expires_at,
            tombstone=revision.tombstone,
            hides=revision.hides_id,
            reason=revision.reason,
            author=revision.author,
            interface=revision.interface,
        )


class AttributesRecord(Record):
    """A memory's namespace, kind, tags and lifecycle state from known_at on, as a change (create, retag, re-kind,
    move, promote, archive, unarchive) left them."""

    known_at: Instant = Field(description="When the server learned these values.")
    namespace: str
    kind: str
    tags: list[str]
    state: str = Field(description="The recorded lifecycle state: candidate, active or archived.")
    reason: str = Field(description="Why the state changed; empty when the change was another.")
    author: str
    interface: str


class History(Record):
    memory_id: int
    revisions: list[RevisionRecord] = Field(description="Every revision known by as_of, oldest first.")
    attributes: list[AttributesRecord] = Field(
        description="The memory's namespace, kind, tags and lifecycle state after each change known by as_of, oldest "
        "first."
    )
