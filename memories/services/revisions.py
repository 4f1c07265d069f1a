"""The write core every service builds on: revisions and attribute rows appended, audit events, tags, the record a
write answers with.

Revisions and attribute rows are only ever appended (``memories.models``); a write reads the memory it changes with
``get_memory``, appends with ``append_revisions`` / ``append_attributes`` (a revise of its text:
``append_audited_revision``), records an ``audit`` event, and answers with ``record_now``.
"""

import datetime as dt

from knowledge import facts
from memories import selectors, staging, states, validation
from memories.inserts import insert_all
from memories.models import Attributes, AuditEvent, Interface, Lifecycle, Memory, Revision, State, Tag
from memories.records.memory_record import MemoryRecord
from memoryproject import dialect
from memoryproject.exceptions import DuplicateContent, InvalidInput, MemoryNotFound
from memoryproject.timeparse import parse_optional_instant
from search import indexing


def check_interface(interface: str) -> str:
    if interface not in Interface.values:
        raise InvalidInput(f"interface: {interface!r} is not one of {', '.join(Interface.values)}.")
    return interface


def audit(*, actor: str, interface: str, action: str, memory_id: int | None, at: dt.datetime, **detail) -> None:
    audit_many(actor=actor, interface=interface, action=action, at=at, events=[(memory_id, detail)])


def audit_many(
    *, actor: str, interface: str, action: str, at: dt.datetime, events: list[tuple[int | None, dict]]
) -> None:
    """Record one audit event per (memory id, detail) pair, in one multi-row INSERT (bulk imports)."""
    insert_all(
        [
            AuditEvent(at=at, actor=actor, interface=interface, action=action, memory_id=memory_id, detail=detail)
            for memory_id, detail in events
        ]
    )


def tag_objects(*, namespace: str, names: list[str]) -> list[Tag]:
    """Return the Tag rows of ``namespace`` for ``names``, creating the missing ones (its first spelling wins)."""
    tags = []
    for name in names:
        tag, _ = Tag.objects.get_or_create(namespace=namespace, slug=name.casefold(), defaults={"name": name})
        tags.append(tag)
    return tags


def validity_interval(valid_from, valid_to, *, default_from: dt.datetime) -> tuple[dt.datetime, dt.datetime | None]:
    start = parse_optional_instant(valid_from, field="valid_from") or default_from
    end = parse_optional_instant(valid_to, field="valid_to")
    if end is not None and end <= start:
        raise InvalidInput(
            "valid_to must be later than valid_from (the interval is half-open: [valid_from, valid_to)).",
            field="valid_to",
        )
    return start, end


def append_revisions(revisions: list[dict]) -> list[Revision]:
    """Write revisions, make them searchable and record their facts, in the caller's transaction (the one way
    revisions are added).

    Each dict holds one revision's fields, ``memory`` among them (the Memory object, whose
    namespace keys the postings). The rows go in with multi-row INSERTs, and the objects
    come back with their ids (SQLite's RETURNING), in the order given. A tombstone's
    ``hides`` must be a revision written before this call: ids are given by the insert.
    Inside an import the revisions carry its batch (``memories.staging``).
    """
    batch_id = staging.own_batch_id()
    written = insert_all([Revision(**fields, batch_id=batch_id) for fields in revisions])
    indexing.index_revisions(
        [
            (revision.pk, fields["memory"].namespace, revision.title, revision.content)
            for revision, fields in zip(written, revisions)
            if not revision.tombstone
        ]
    )
    facts.record_facts(
        [
            (revision.pk, revision.memory_id, revision.subject, revision.predicate, revision.object)
            for revision in written
            if not revision.tombstone
        ]
    )
    return written


def append_revision(**fields) -> Revision:
    """Write one revision and make it searchable (see append_revisions)."""
    return append_revisions([fields])[0]


def append_audited_revision(
    memory: Memory,
    fields: dict,
    *,
    digest: str,
    previous: Revision | None,
    now: dt.datetime,
    actor: str,
    interface: str,
    **detail,
) -> Revision:
    """Append a revision of ``memory`` holding ``fields`` and audit it as a revise of ``previous`` (``detail``: more
    to record), in the caller's transaction. The caller has applied the duplicate rule and the memory's state."""
    revision = append_revision(
        memory=memory, content_hash=digest, known_at=now, author=actor, interface=interface, **fields
    )
    audit(
        actor=actor,
        interface=interface,
        action="revise",
        memory_id=memory.pk,
        at=now,
        revision_id=revision.pk,
        previous_revision_id=previous.pk if previous else None,
        **detail,
    )
    return revision


def append_attributes(
    memory: Memory,
    *,
    known_at: dt.datetime,
    actor: str,
    interface: str,
    tags: list[Tag] | None = None,
    state: str | None = None,
    reason: str = "",
) -> Attributes:
    """Record ``memory``'s namespace, kind, tags (``tags``: its tag rows, when the caller has them) and lifecycle state
    from ``known_at`` on, in the caller's transaction: every write that creates a memory or changes one of these
    calls it. ``state`` None carries the memory's current state over; ``reason`` says why a state changed."""
    if state is None:
        state = recorded_state(memory)
    row = Attributes.objects.create(
        memory=memory,
        known_at=known_at,
        namespace=memory.namespace,
        kind=memory.kind,
        state=state,
        reason=reason,
        author=actor,
        interface=interface,
        batch_id=staging.own_batch_id(),
    )
    tags = list(memory.tags.all()) if tags is None else tags
    if tags:
        insert_all([Attributes.tags.through(attributes_id=row.pk, tag_id=tag.pk) for tag in tags])
    return row


def recorded_state(memory: Memory) -> str:
    """The lifecycle state ``memory``'s newest attribute row records (active for a memory without rows)."""
    # The attributes_memory_known index: the memory's newest row.
    newest = Attributes.objects.filter(memory=memory).order_by("-known_at", "-id").values_list("state", flat=True)
    return newest.first() or Lifecycle.ACTIVE.value


def record_now(
    memory: Memory, revision: Revision, *, tags: list[Tag] | None = None, state: str | None = None
) -> MemoryRecord:
    """The record of a memory showing ``revision`` after a write; ``tags``: its tags when the caller has just set
    them all; ``state``: its recorded state when the caller has just set it."""
    revision.memory = memory
    tags = sorted(tags, key=lambda tag: tag.slug) if tags is not None else memory.tags.order_by("slug")
    if memory.state == State.FORGOTTEN:
        shown = states.FORGOTTEN
    else:
        shown = states.read_state(
            state or recorded_state(memory), kind=memory.kind, known_at=revision.known_at, as_of=dialect.now()
        )
    return MemoryRecord.from_revision(revision, tags=[tag.name for tag in tags], state=shown)


def get_memory(memory_id) -> Memory:
    """Return the memory with this id, or raise InvalidInput / MemoryNotFound naming it (every write starts here)."""
    if isinstance(memory_id, bool) or not isinstance(memory_id, int) or memory_id < 1:
        raise InvalidInput(f"id: {memory_id!r} is not a memory id (a positive integer).", field="id")
    try:
        return Memory.objects.get(pk=memory_id)
    except Memory.DoesNotExist:
        raise MemoryNotFound(memory_id, maybe_hidden=False) from None


def add_tags(memory: Memory, names: list[str]) -> list[str]:
    have = set(memory.tags.values_list("slug", flat=True))
    new = [name for name in names if name.casefold() not in have]
    if len(have) + len(new) > validation.settings.MEMORY_MAX_TAGS:
        raise InvalidInput(
            f"tags: memory {memory.pk} would have more than {validation.settings.MEMORY_MAX_TAGS} tags.", field="tags"
        )
    if new:
        memory.tags.add(*tag_objects(namespace=memory.namespace, names=new))
    return new


# What a writer refused a key that an unpublished import holds can do (memories.services.batches).
UNFINISHED_IMPORT_ADVICE = "Try again once it is done (or, if it died, after 'manage.py purge')."


def duplicate_error(duplicate: Memory) -> DuplicateContent:
    return DuplicateContent(
        f"Memory {duplicate.pk} ({duplicate.namespace}/{duplicate.key}) already holds exactly this content. "
        f"Update or tag memory {duplicate.pk} instead of duplicating it.",
        memory_id=duplicate.pk,
    )


def expiry(ttl_days: int, *, now: dt.datetime, keep: dt.datetime | None) -> dt.datetime | None:
    if ttl_days == -1:
        # A TTL that has already run out is not carried into a new revision.
        return keep if keep is not None and keep > now else None
    if ttl_days == 0:
        return None
    return now + dt.timedelta(days=ttl_days)


def current_revision(memory: Memory, now: dt.datetime) -> Revision | None:
    """The revision a change builds on: the one visible now, else the newest with text."""
    return selectors.visible_revision(memory=memory, as_of=now) or selectors.latest_content_revision(memory)
