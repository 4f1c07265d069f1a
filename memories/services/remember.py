"""Remember: store a memory, or revise the one its key names, or return the one that already holds the text; and
many new memories at once (imports, learn).

Every function is keyword-only, runs in one transaction (BEGIN IMMEDIATE, see settings), records the actor and the
interface, and raises domain errors from ``memoryproject.exceptions`` before writing anything.
"""

import datetime as dt
from dataclasses import dataclass

from django.db import transaction

from knowledge.models import Fact
from memories import admission, selectors, staging, states, validation
from memories.inserts import insert_all
from memories.models import Attributes, Kind, Lifecycle, Memory, Revision, State
from memories.records.write_results import NearTwinRecord, RememberResult
from memories.services.revisions import (
    UNFINISHED_IMPORT_ADVICE,
    add_tags,
    append_attributes,
    append_audited_revision,
    append_revision,
    append_revisions,
    audit,
    audit_many,
    check_interface,
    current_revision,
    duplicate_error,
    expiry,
    record_now,
    recorded_state,
    tag_objects,
    validity_interval,
)
from memoryproject import dialect
from memoryproject.exceptions import Conflict, InvalidInput, NotAdmitted
from memoryproject.metrics import REMEMBER_SECONDS, observed
from memoryproject.timeparse import parse_optional_instant
from search import duplicates, indexing


def _remember_labels(result: RememberResult, arguments: dict) -> dict:
    outcome = "created" if result.created else "revised" if result.revised else "deduplicated"
    return {"interface": arguments["interface"], "outcome": outcome}


@dataclass(frozen=True)
class _Remembered:
    """What a remember will write, every field checked (``_checked``)."""

    namespace: str
    key: str | None
    kind: str
    state: str
    tag_names: list[str]
    ttl: int | None
    digest: str
    # The revision's own fields, but for the validity and expiry the clock decides inside the write.
    text: dict
    # Why an untrusted writer's text is held (it reads as an instruction to the agent); None when it is not.
    held: str | None


@observed(REMEMBER_SECONDS, _remember_labels)
def memory_remember(
    *,
    namespace: str,
    content: str,
    actor: str,
    interface: str,
    key: str | None = None,
    title: str | None = None,
    kind: str | None = None,
    tags: list[str] | None = None,
    source: str | None = None,
    ttl_days: int | None = None,
    valid_from=None,
    valid_to=None,
    subject: str | None = None,
    predicate: str | None = None,
    object: str | None = None,
    confidence: float | None = None,
    known_at: dt.datetime | None = None,
    look_for_near_twin: bool = True,
    force: bool = False,
    state: str = Lifecycle.ACTIVE,
) -> RememberResult:
    """Store a memory, or return the one that already holds this exact content.

    With a ``key`` that already exists in the namespace, this appends a revision
    to that memory (and brings it back if it was forgotten). ``known_at`` is for
    trusted historical imports only; everyone else gets the server clock. Text that is
    only a pleasantry or an acknowledgement is refused (``memories.admission``) unless
    ``force``. ``state``: a new memory's lifecycle state, ``candidate`` for an untrusted
    writer (``Caller.new_memory_state``); an existing memory keeps its own. Without a
    ``kind``, a memory with a triple is a fact and any other a note.
    """
    check_interface(interface)
    new = _checked(
        namespace=namespace,
        content=content,
        key=key,
        title=title,
        kind=kind,
        tags=tags,
        source=source,
        ttl_days=ttl_days,
        triple=(subject, predicate, object),
        confidence=confidence,
        force=force,
        state=state,
    )
    # Embedding and the near-twin check run before the write lock is taken, so other writers never wait for them.
    indexing.prepare(new.text["title"], new.text["content"])
    # Hooks' ingest has just looked; imports skip it. Advice only: a twin written meanwhile can be missed.
    near_twin = _near_twin(new) if look_for_near_twin and known_at is None and not indexing.in_batch() else None

    with transaction.atomic():
        # The clock is read once the write lock is held: a writer that waited for
        # the lock must not stamp its revision earlier than the ones it waited for.
        now = known_at or dialect.locked_now()
        start, end = validity_interval(valid_from, valid_to, default_from=now)
        fields = {**new.text, "valid_from": start, "valid_to": end, "expires_at": expiry(new.ttl, now=now, keep=None)}
        return _store(new, fields, near_twin, now=now, actor=actor, interface=interface)


def _store(new: _Remembered, fields: dict, near_twin, *, now, actor, interface) -> RememberResult:
    """Under the write lock: revise the memory the key names, or tag the one that shows the text, or create one."""
    existing = Memory.objects.filter(namespace=new.namespace, key=new.key).first() if new.key else None
    if existing is None and new.key and Memory.all_objects.filter(namespace=new.namespace, key=new.key).exists():
        raise Conflict(
            f"key: {new.key!r} in namespace {new.namespace!r} belongs to an import that has not finished. "
            f"{UNFINISHED_IMPORT_ADVICE}",
            field="key",
        )
    who = {"now": now, "actor": actor, "interface": interface}
    if existing is not None:
        return _revise_keyed(existing, new, fields, near_twin, **who)
    duplicate = selectors.visible_duplicate(namespace=new.namespace, content_hash=new.digest)
    if duplicate is not None:
        return _deduplicate(duplicate, new, **who)
    return _create(new, fields, near_twin, **who)


def default_kind(triple: tuple) -> str:
    """The kind of a memory its writer gave none: a triple states a fact, anything else is a note."""
    return Kind.FACT if triple[0] else Kind.NOTE


def _checked(
    *,
    namespace,
    content,
    key,
    title,
    kind,
    tags,
    source,
    ttl_days,
    triple: tuple,
    confidence,
    force: bool,
    state: str,
) -> _Remembered:
    """Every argument of a remember checked, before anything is embedded or written."""
    namespace = validation.namespace(namespace)
    content = validation.content(content)
    if not force and (rule := admission.refusal(content)) is not None:
        raise NotAdmitted(admission.message(rule, content), field="content")
    key = validation.key(key) if key is not None else None
    title = validation.short_text(title, field="title", limit=validation.TITLE_MAX)
    triple = validation.triple(*triple)
    kind = default_kind(triple) if kind is None else validation.kind(kind)
    if state not in (Lifecycle.CANDIDATE, Lifecycle.ACTIVE):
        raise InvalidInput(f"state: {state!r} is not one of candidate, active.", field="state")
    tag_names = validation.tags(tags)
    source = validation.short_text(source, field="source", limit=validation.SOURCE_MAX)
    ttl = validation.ttl_days(ttl_days)
    confidence = validation.confidence(confidence)
    text = dict(
        content=content,
        title=title,
        subject=triple[0],
        predicate=triple[1],
        object=triple[2],
        confidence=confidence,
        source=source,
    )
    # A held candidate is one hooks never inject.
    held = states.held_reason(f"{title}\n{content}") if state == Lifecycle.CANDIDATE else None
    return _Remembered(
        namespace=namespace,
        key=key,
        kind=kind,
        state=str(state),
        tag_names=tag_names,
        ttl=ttl,
        digest=validation.content_hash(content),
        text=text,
        held=held,
    )


def _near_twin(new: _Remembered):
    """The namespace's memory nearest in meaning, other than the one the key names (``search.duplicates``)."""
    keyed = None
    if new.key:
        keyed = Memory.objects.filter(namespace=new.namespace, key=new.key).values_list("pk", flat=True).first()
    return duplicates.find_near_twin(
        new.text["content"], namespace=new.namespace, title=new.text["title"], exclude_memory_id=keyed
    )


def _revise_keyed(existing: Memory, new: _Remembered, fields: dict, near_twin, *, now, actor, interface):
    """Remember under a key the namespace holds: a new revision of that memory, or nothing when nothing changes."""
    result = _remember_into(
        existing, fields, new.digest, new.kind, new.tag_names, now=now, actor=actor, interface=interface
    )
    if result.revised and near_twin is not None and near_twin.memory_id != existing.pk:
        result = result.model_copy(update={"near_twin": NearTwinRecord.model_validate(near_twin)})
    if result.revised and new.held:
        append_attributes(
            existing, known_at=now, actor=actor, interface=interface, state=Lifecycle.CANDIDATE.value, reason=new.held
        )
        shown = record_now(existing, current_revision(existing, now), state=Lifecycle.CANDIDATE.value)
        result = result.model_copy(update={"held": new.held, "memory": shown})
    return result


def _deduplicate(duplicate: Memory, new: _Remembered, *, now, actor, interface) -> RememberResult:
    """The content is already visible in the namespace: add the new tags to that memory instead of writing."""
    added = add_tags(duplicate, new.tag_names)
    if added:
        append_attributes(duplicate, known_at=now, actor=actor, interface=interface)
    audit(actor=actor, interface=interface, action="deduplicate", memory_id=duplicate.pk, at=now, added_tags=added)
    return RememberResult(
        memory=record_now(duplicate, current_revision(duplicate, now)), created=False, deduplicated=True
    )


def _create(new: _Remembered, fields: dict, near_twin, *, now, actor, interface) -> RememberResult:
    """A new memory with its first revision, tags and attribute row; a fact others stated is corroborated."""
    memory = Memory.objects.create(
        namespace=new.namespace,
        key=new.key or validation.generated_key(),
        kind=new.kind,
        created_at=now,
        batch_id=staging.own_batch_id(),
    )
    tag_rows = tag_objects(namespace=new.namespace, names=new.tag_names) if new.tag_names else []
    if tag_rows:  # a new memory has no tags: set([]) would only query that
        memory.tags.set(tag_rows)
    append_attributes(
        memory, known_at=now, actor=actor, interface=interface, tags=tag_rows, state=new.state, reason=new.held or ""
    )
    revision = append_revision(
        memory=memory, content_hash=new.digest, known_at=now, author=actor, interface=interface, **fields
    )
    audit(
        actor=actor,
        interface=interface,
        action="remember",
        memory_id=memory.pk,
        at=now,
        revision_id=revision.pk,
        **({"state": new.state} if new.state != Lifecycle.ACTIVE else {}),
        **({"near_twin": near_twin.as_dict()} if near_twin else {}),
    )
    state = new.state
    if revision.subject:
        state = _corroborate(memory, revision, state=state, now=now, actor=actor, interface=interface)
    return RememberResult(
        memory=record_now(memory, revision, tags=tag_rows, state=state),
        created=True,
        near_twin=near_twin,
        held=new.held,
    )


@dataclass(frozen=True)
class NewMemory:
    """A memory for ``memories_remember_new`` to create, its fields checked by ``new_memory``."""

    content: str
    content_hash: str
    title: str
    kind: str
    source: str
    subject: str
    predicate: str
    object: str
    confidence: float | None
    valid_from: dt.datetime | None
    valid_to: dt.datetime | None


def new_memory(
    *,
    content: str,
    title: str | None = None,
    kind: str | None = None,
    source: str | None = None,
    subject: str | None = None,
    predicate: str | None = None,
    object: str | None = None,
    confidence: float | None = None,
    valid_from=None,
    valid_to=None,
) -> NewMemory:
    """Check a new memory's fields as memory_remember does, raising the first problem (admission included)."""
    content = validation.content(content)
    if (rule := admission.refusal(content)) is not None:
        raise NotAdmitted(admission.message(rule, content), field="content")
    triple = validation.triple(subject, predicate, object)
    return NewMemory(
        content=content,
        content_hash=validation.content_hash(content),
        title=validation.short_text(title, field="title", limit=validation.TITLE_MAX),
        kind=default_kind(triple) if kind is None else validation.kind(kind),
        source=validation.short_text(source, field="source", limit=validation.SOURCE_MAX),
        subject=triple[0],
        predicate=triple[1],
        object=triple[2],
        confidence=validation.confidence(confidence),
        valid_from=parse_optional_instant(valid_from, field="valid_from"),
        valid_to=parse_optional_instant(valid_to, field="valid_to"),
    )


def memories_remember_new(
    *,
    namespace: str,
    memories: list[NewMemory],
    tags: list[str],
    actor: str,
    interface: str,
    state: str = Lifecycle.ACTIVE,
) -> list[Revision]:
    """Create these memories, each as memory_remember creates one with no key and no near-twin check, in the
    caller's transaction and with multi-row INSERTs: a bulk writer (learn) pays a few statements, not a few per
    memory. Return their first revisions (``memory`` set), in order.

    The caller checks each one (``new_memory``) and leaves out those a visible memory of the
    namespace already shows (``selectors.visible_duplicates``), and passes no two with one
    text. Each gets ``tags`` and starts in ``state``, and its validity interval is checked
    against the time of the write (InvalidInput, and nothing is written, when one is empty).
    """
    check_interface(interface)
    namespace = validation.namespace(namespace)
    tag_names = validation.tags(tags)
    if not memories:
        return []
    now = dialect.locked_now()  # under the write lock, see memory_remember
    intervals = [validity_interval(memory.valid_from, memory.valid_to, default_from=now) for memory in memories]
    rows = _insert_memories(namespace, memories, now=now)
    tag_rows = tag_objects(namespace=namespace, names=tag_names) if tag_names else []
    insert_all([Memory.tags.through(memory_id=row.pk, tag_id=tag.pk) for row in rows for tag in tag_rows])
    _insert_attributes(rows, memories, tag_rows, state=state, now=now, actor=actor, interface=interface)
    revisions = append_revisions(
        [
            _first_revision(row, memory, start, end, now=now, actor=actor, interface=interface)
            for row, memory, (start, end) in zip(rows, memories, intervals, strict=True)
        ]
    )
    extra = {"state": str(state)} if state != Lifecycle.ACTIVE else {}
    audit_many(
        actor=actor,
        interface=interface,
        action="remember",
        at=now,
        events=[(row.pk, {"revision_id": revision.pk, **extra}) for row, revision in zip(rows, revisions)],
    )
    _corroborate_stated(revisions, state=str(state), now=now, actor=actor, interface=interface)
    return revisions


def _insert_memories(namespace: str, memories: list[NewMemory], *, now: dt.datetime) -> list[Memory]:
    """The new memories' rows, each with a generated key."""
    return insert_all(
        [
            Memory(
                namespace=namespace,
                key=validation.generated_key(),
                kind=memory.kind,
                created_at=now,
                batch_id=staging.own_batch_id(),
            )
            for memory in memories
        ]
    )


def _insert_attributes(
    rows: list[Memory], memories: list[NewMemory], tag_rows: list, *, state: str, now, actor, interface
) -> None:
    """Each new memory's first attribute row, with its tags; a held candidate's row says why it is held."""
    untrusted = state == Lifecycle.CANDIDATE
    attributes = insert_all(
        [
            Attributes(
                memory=row,
                known_at=now,
                namespace=row.namespace,
                kind=row.kind,
                state=str(state),
                reason=(states.held_reason(f"{memory.title}\n{memory.content}") or "") if untrusted else "",
                author=actor,
                interface=interface,
                batch_id=staging.own_batch_id(),
            )
            for row, memory in zip(rows, memories, strict=True)
        ]
    )
    insert_all([Attributes.tags.through(attributes_id=row.pk, tag_id=tag.pk) for row in attributes for tag in tag_rows])


def _first_revision(row: Memory, memory: NewMemory, start, end, *, now, actor, interface) -> dict:
    """The fields of a new memory's first revision, for ``append_revisions``."""
    return dict(
        memory=row,
        content=memory.content,
        title=memory.title,
        subject=memory.subject,
        predicate=memory.predicate,
        object=memory.object,
        confidence=memory.confidence,
        source=memory.source,
        valid_from=start,
        valid_to=end,
        expires_at=None,
        content_hash=memory.content_hash,
        known_at=now,
        author=actor,
        interface=interface,
    )


def _corroborate_stated(revisions: list[Revision], *, state: str, now, actor, interface) -> None:
    """Corroborate the new memories that state a fact (``_corroborate``), reading only those another memory states."""
    stated = {revision.pk: revision for revision in revisions if revision.subject}
    if not stated:
        return
    # One query says which of these facts another memory states at all; only those need _corroborate's reads.
    facts = {fact.revision_id: fact for fact in Fact.objects.filter(revision_id__in=list(stated))}
    subjects = {fact.subject for fact in facts.values()}
    elsewhere = set(
        Fact.objects.filter(subject__in=sorted(subjects))
        .exclude(revision_id__in=list(stated))
        .values_list("subject", "predicate", "object")
    )
    for revision_id, fact in facts.items():
        if (fact.subject, fact.predicate, fact.object) in elsewhere:
            revision = stated[revision_id]
            _corroborate(revision.memory, revision, state=state, now=now, actor=actor, interface=interface)


def _corroborate(
    memory: Memory, revision: Revision, *, state: str, now: dt.datetime, actor: str, interface: str
) -> str:
    """Promote the candidates that an active memory of another author now corroborates: the new memory, when
    another author's active memory of its namespace states the same fact (triple in normal form), or the
    others' candidates stating the new, active memory's fact. Return the new memory's state."""
    fact = Fact.objects.filter(revision_id=revision.pk).first()
    if fact is None:
        return state
    # The (subject, predicate) index narrows to the revisions stating this fact; the rule picks the visible ones.
    same = (
        Fact.objects.filter(subject=fact.subject, predicate=fact.predicate, object=fact.object)
        .exclude(memory_id=memory.pk)
        .values_list("revision_id", flat=True)
    )
    others = (
        Revision.objects.filter(pk__in=list(same), memory__namespace=memory.namespace)
        .exclude(author=actor)
        .visible(as_of=now)
        .select_related("memory")
    )
    who = {"now": now, "actor": actor, "interface": interface}
    for other in others:
        other_state = recorded_state(other.memory)
        if state == Lifecycle.CANDIDATE and other_state == Lifecycle.ACTIVE:
            _promote(memory, from_state=state, by=other.memory_id, by_author=other.author, **who)
            state = Lifecycle.ACTIVE.value
        elif state == Lifecycle.ACTIVE and other_state == Lifecycle.CANDIDATE:
            _promote(other.memory, from_state=other_state, by=memory.pk, by_author=actor, **who)
    return state


def _promote(
    memory: Memory, *, from_state: str, by: int, by_author: str, now: dt.datetime, actor: str, interface: str
) -> None:
    """Make a candidate active from now on, as memory ``by`` of ``by_author`` corroborates it."""
    append_attributes(
        memory,
        known_at=now,
        actor=actor,
        interface=interface,
        state=Lifecycle.ACTIVE.value,
        reason=f"corroborated by memory {by} ({by_author})",
    )
    audit(
        actor=actor,
        interface=interface,
        action="promote",
        memory_id=memory.pk,
        at=now,
        from_state=from_state,
        to_state=Lifecycle.ACTIVE.value,
        corroborated_by=by,
    )


def _remember_into(memory, fields, digest, kind, tag_names, *, now, actor, interface) -> RememberResult:
    """Remember under an existing key: a no-op when nothing changes, else a new revision."""
    current = current_revision(memory, now)
    added = add_tags(memory, tag_names)
    kind_changed = memory.kind != kind
    if kind_changed:
        memory.kind = kind
        memory.save(update_fields=["kind"])
    if added or kind_changed:
        append_attributes(memory, known_at=now, actor=actor, interface=interface)
    visible = selectors.visible_revision(memory=memory, as_of=now)
    if (
        memory.state == State.ACTIVE
        and visible is not None
        and all(getattr(visible, name) == value for name, value in fields.items() if name not in ("valid_from",))
    ):
        if added:
            audit(actor=actor, interface=interface, action="retag", memory_id=memory.pk, at=now, added=added)
        return RememberResult(memory=record_now(memory, visible), created=False, deduplicated=True)
    duplicate = selectors.visible_duplicate(
        namespace=memory.namespace, content_hash=digest, exclude_memory_id=memory.pk
    )
    if duplicate is not None:
        raise duplicate_error(duplicate)
    # A remember under the key of a forgotten memory brings it back.
    if memory.state != State.ACTIVE:
        memory.state = State.ACTIVE
        memory.save(update_fields=["state"])
    revision = append_audited_revision(
        memory, fields, digest=digest, previous=current, now=now, actor=actor, interface=interface
    )
    return RememberResult(memory=record_now(memory, revision), created=False, revised=True)
