"""Plain results that services and selectors return, and every interface serialises."""

from dataclasses import dataclass, field

from memoryproject.timeparse import format_instant


@dataclass(frozen=True)
class MemoryRecord:
    """A memory as one revision shows it (the vocabulary of DESIGN.md section 5)."""

    id: int
    key: str
    namespace: str
    kind: str
    state: str
    title: str
    content: str
    tags: list[str]
    revision_id: int
    known_at: object
    valid_from: object
    valid_to: object
    expires_at: object
    source: str
    content_hash: str
    subject: str = ""
    predicate: str = ""
    object: str = ""
    author: str = ""
    created_at: object = None

    @classmethod
    def from_revision(cls, revision, *, tags: list[str] | None = None) -> "MemoryRecord":
        memory = revision.memory
        if tags is None:
            tags = [tag.name for tag in memory.tags.all()]
        return cls(
            id=memory.pk,
            key=memory.key,
            namespace=memory.namespace,
            kind=str(memory.kind),
            state=str(memory.state),
            title=revision.title,
            content=revision.content,
            tags=tags,
            revision_id=revision.pk,
            known_at=revision.known_at,
            valid_from=revision.valid_from,
            valid_to=revision.valid_to,
            expires_at=revision.expires_at,
            source=revision.source,
            content_hash=revision.content_hash,
            subject=revision.subject,
            predicate=revision.predicate,
            object=revision.object,
            author=revision.author,
            created_at=memory.created_at,
        )

    def as_dict(self) -> dict:
        data = {
            "id": self.id,
            "key": self.key,
            "namespace": self.namespace,
            "kind": self.kind,
            "state": self.state,
            "title": self.title,
            "content": self.content,
            "tags": list(self.tags),
            "revision_id": self.revision_id,
            "known_at": format_instant(self.known_at),
            "valid_from": format_instant(self.valid_from),
            "valid_to": format_instant(self.valid_to),
            "expires_at": format_instant(self.expires_at),
            "source": self.source,
            "content_hash": self.content_hash,
            "created_at": format_instant(self.created_at),
        }
        if self.subject:
            data.update(subject=self.subject, predicate=self.predicate, object=self.object)
        return data


@dataclass(frozen=True)
class RevisionRecord:
    id: int
    memory_id: int
    title: str
    content: str
    subject: str
    predicate: str
    object: str
    source: str
    content_hash: str
    known_at: object
    valid_from: object
    valid_to: object
    expires_at: object
    tombstone: bool
    hides: int | None
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

    def as_dict(self) -> dict:
        return {
            "revision_id": self.id,
            "memory_id": self.memory_id,
            "tombstone": self.tombstone,
            "hides": self.hides,
            "title": self.title,
            "content": self.content,
            "subject": self.subject,
            "predicate": self.predicate,
            "object": self.object,
            "source": self.source,
            "content_hash": self.content_hash,
            "known_at": format_instant(self.known_at),
            "valid_from": format_instant(self.valid_from),
            "valid_to": format_instant(self.valid_to),
            "expires_at": format_instant(self.expires_at),
            "reason": self.reason,
            "author": self.author,
            "interface": self.interface,
        }


@dataclass(frozen=True)
class RememberResult:
    memory: MemoryRecord
    created: bool
    deduplicated: bool = False
    revised: bool = False
    # The closest other memory of the namespace when it is a near duplicate (search.duplicates.NearTwin).
    near_twin: object = None

    def as_dict(self) -> dict:
        data = {**self.memory.as_dict(), "created": self.created, "deduplicated": self.deduplicated,
                "revised": self.revised}
        if self.near_twin is not None:
            data["near_twin"] = self.near_twin.as_dict()
        return data


@dataclass(frozen=True)
class ChangeResult:
    """Result of revise, forget, restore and retag: the memory after, and whether anything changed."""

    memory: MemoryRecord
    changed: bool

    def as_dict(self) -> dict:
        return {**self.memory.as_dict(), "changed": self.changed}


@dataclass(frozen=True)
class Page:
    items: list[MemoryRecord]
    next_cursor: str | None

    def as_dict(self) -> dict:
        return {"items": [item.as_dict() for item in self.items], "next_cursor": self.next_cursor}


@dataclass(frozen=True)
class ImportReport:
    created: int = 0
    revised: int = 0
    unchanged: int = 0
    duplicates: int = 0
    forgotten: int = 0
    skipped: int = 0
    errors: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"created": self.created, "revised": self.revised, "unchanged": self.unchanged,
                "duplicates": self.duplicates, "forgotten": self.forgotten, "skipped": self.skipped}


@dataclass(frozen=True)
class Hit:
    memory: MemoryRecord
    score: float
    snippet: str
    matched_terms: list[str]
    age: str
    explain: dict | None = None

    def as_dict(self) -> dict:
        data = {**self.memory.as_dict(), "score": self.score, "snippet": self.snippet,
                "matched_terms": self.matched_terms, "age": self.age}
        if self.explain is not None:
            data["explain"] = self.explain
        return data


@dataclass(frozen=True)
class RecallResult:
    query: str
    terms: list[str]
    match_mode: str
    mode: str
    as_of: object
    valid_at: object
    hits: list[Hit]
    note: str | None = None
    hint: str | None = None

    def as_dict(self) -> dict:
        data = {"query": self.query, "terms": self.terms, "match_mode": self.match_mode, "mode": self.mode,
                "as_of": format_instant(self.as_of), "valid_at": format_instant(self.valid_at),
                "hits": [hit.as_dict() for hit in self.hits]}
        if self.note:
            data["note"] = self.note
        if self.hint:
            data["hint"] = self.hint
        return data
