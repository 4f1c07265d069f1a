"""Changes to one memory: revise, forget, restore, end, retag, update, and the lifecycle: promote, archive, unarchive.

Remembering is ``memories.services.remember``; the primitives both build on are ``memories.services.revisions``.

Every function is keyword-only, runs in one transaction (BEGIN IMMEDIATE, see
settings), records the actor and the interface, and raises domain errors from
``memoryproject.exceptions`` before writing anything.
"""

import datetime as dt

from django.db import transaction

from memories import selectors, validation
from memories.models import Attributes, Lifecycle, Memory, Revision, State
from memories.records.write_results import ChangeResult, CorrectionRecord
from memories.services.revisions import (
    add_tags,
    append_attributes,
    append_audited_revision,
    append_revision,
    append_revisions,
    audit,
    check_interface,
    current_revision,
    duplicate_error,
    expiry,
    get_memory,
    record_now,
    recorded_state,
    validity_interval,
)
from memoryproject import dialect
from memoryproject.exceptions import Conflict, InvalidInput
from memoryproject.timeparse import format_instant
from search import indexing

# The fields a revision carries forward from the one it revises.
_CARRIED = (
    "content",
    "title",
    "subject",
    "predicate",
    "object",
    "confidence",
    "source",
    "valid_from",
    "valid_to",
    "expires_at",
)


def memory_revise(
    *,
    memory_id: int,
    actor: str,
    interface: str,
    content: str | None = None,
    title: str | None = None,
    kind: str | None = None,
    source: str | None = None,
    ttl_days: int | None = -1,
    valid_from=None,
    valid_to=None,
    subject: str | None = None,
    predicate: str | None = None,
    object: str | None = None,
    at: dt.datetime | None = None,
) -> ChangeResult:
    """Append a revision that changes the given fields; the others carry over from the current one.

    With ``valid_from``/``valid_to`` the revision is a bounded correction: it
    overrides earlier values only inside that interval. ``ttl_days``: -1 keeps the
    current expiry, 0 removes it, N expires N days from now. ``at``: the instant of an
    enclosing write (``memory_update``), so that one change is one instant.
    """
    check_interface(interface)
    changes = _checked_changes(content, title, source, subject, predicate, object)
    kind = validation.kind(kind) if kind is not None else None
    ttl = validation.ttl_days(ttl_days, allow_keep=True)
    prepare_revision(memory_id, changes)

    with transaction.atomic():
        now = at or dialect.locked_now()  # under the write lock, see memory_remember
        start, end = validity_interval(valid_from, valid_to, default_from=now)
        memory = _revisable(memory_id)
        base = current_revision(memory, now)
        bounded = valid_from is not None or valid_to is not None
        fields = _revised_fields(base, changes, ttl=ttl, now=now, interval=(start, end) if bounded else None)
        kind_changed = kind is not None and kind != memory.kind
        if kind_changed:
            memory.kind = kind
            memory.save(update_fields=["kind"])
            append_attributes(memory, known_at=now, actor=actor, interface=interface)
        unchanged = not bounded and all(
            fields[name] == getattr(base, name) for name in _CARRIED if name not in ("valid_from", "valid_to")
        )
        visible = selectors.visible_revision(memory=memory, as_of=now)
        if unchanged and visible is not None:
            if kind_changed:
                audit(actor=actor, interface=interface, action="rekind", memory_id=memory.pk, at=now, kind=kind)
            return ChangeResult(memory=record_now(memory, visible), changed=kind_changed)
        digest = validation.content_hash(fields["content"])
        _refuse_duplicate(memory, digest, previous=base)
        revision = append_audited_revision(
            memory, fields, digest=digest, previous=base, now=now, actor=actor, interface=interface, bounded=bounded
        )
        shown = selectors.visible_revision(memory=memory, as_of=now) or revision
        correction = _correction(revision) if bounded else None
        return ChangeResult(memory=record_now(memory, shown), changed=True, correction=correction)


def _checked_changes(content, title, source, subject, predicate, object_) -> dict:
    """The checked fields a revise changes (the ones given); a triple is changed as a whole."""
    changes = _text_changes(content, title)
    if source is not None:
        changes["source"] = validation.short_text(source, field="source", limit=validation.SOURCE_MAX)
    if subject is not None or predicate is not None or object_ is not None:
        changes.update(zip(("subject", "predicate", "object"), validation.triple(subject, predicate, object_)))
    return changes


def _revisable(memory_id) -> Memory:
    """The memory a revise changes; a forgotten one is refused."""
    memory = get_memory(memory_id)
    if memory.state == State.FORGOTTEN:
        raise Conflict(f"Memory {memory.pk} is forgotten. Restore it first, or remember the content anew.", field="id")
    return memory


def _refuse_duplicate(memory: Memory, digest: str, *, previous: Revision) -> None:
    """Refuse text another visible memory of the namespace shows, unless ``previous`` already held it (a revise
    that keeps its text is no new copy)."""
    duplicate = selectors.visible_duplicate(
        namespace=memory.namespace, content_hash=digest, exclude_memory_id=memory.pk
    )
    if duplicate is not None and digest != previous.content_hash:
        raise duplicate_error(duplicate)


def _revised_fields(base: Revision, changes: dict, *, ttl: int | None, now: dt.datetime, interval) -> dict:
    """The fields of the revision a revise appends: ``changes`` over ``base``'s, with the expiry ``ttl`` asks for.

    ``interval``: a bounded correction's (valid_from, valid_to); None holds from now on, until ``base``'s end
    when that is still ahead.
    """
    fields = {name: getattr(base, name) for name in _CARRIED}
    fields.update(changes)
    fields["expires_at"] = expiry(ttl, now=now, keep=base.expires_at)
    fields["valid_from"], fields["valid_to"] = interval or (
        now,
        base.valid_to if base.valid_to and base.valid_to > now else None,
    )
    return fields


def _correction(revision: Revision) -> CorrectionRecord:
    """What a bounded correction answers with: the revision and the interval it overrides."""
    return CorrectionRecord(
        revision_id=revision.pk,
        title=revision.title,
        content=revision.content,
        valid_from=revision.valid_from,
        valid_to=revision.valid_to,
    )


def _text_changes(content: str | None, title: str | None) -> dict:
    """The checked content and title a revision changes (the ones given)."""
    changes = {}
    if content is not None:
        changes["content"] = validation.content(content)
    if title is not None:
        changes["title"] = validation.short_text(title, field="title", limit=validation.TITLE_MAX)
    return changes


def prepare_revision(memory_id, changes: dict) -> None:
    """Embed the revision a revise will write, from an unlocked read (a stale guess only costs a miss).

    Does nothing when neither content nor title changes: the vector is the current one's.
    """
    if "content" not in changes and "title" not in changes:
        return
    memory = Memory.objects.filter(pk=memory_id).first() if isinstance(memory_id, int) else None
    base = current_revision(memory, dialect.now()) if memory is not None else None
    if base is not None:
        indexing.prepare(changes.get("title", base.title), changes.get("content", base.content))


def memory_forget(*, memory_id: int, actor: str, interface: str, reason: str | None = None) -> ChangeResult:
    """Hide a memory from now on by appending a tombstone; history before it stays answerable.

    Forgetting a forgotten memory changes nothing. A memory that is hidden for
    another reason (its TTL passed, or it is outside its validity) cannot be
    forgotten: there is nothing visible to hide.
    """
    check_interface(interface)
    reason = validation.short_text(reason, field="reason", limit=validation.REASON_MAX)
    with transaction.atomic():
        now = dialect.locked_now()  # under the write lock, see memory_remember
        memory = get_memory(memory_id)
        last_text = selectors.latest_content_revision(memory)
        if memory.state == State.FORGOTTEN:
            return ChangeResult(memory=record_now(memory, last_text), changed=False)
        visible = selectors.visible_revision(memory=memory, as_of=now)
        if visible is None:
            raise Conflict(
                f"Memory {memory.pk} is not visible now (its TTL passed or it is outside its validity "
                "interval), so there is nothing to forget. Its history shows its revisions.",
                field="id",
            )
        append_revision(
            memory=memory,
            tombstone=True,
            hides=visible,
            reason=reason,
            content="",
            content_hash=validation.content_hash(""),
            known_at=now,
            valid_from=now,
            author=actor,
            interface=interface,
        )
        memory.state = State.FORGOTTEN
        memory.save(update_fields=["state"])
        audit(
            actor=actor,
            interface=interface,
            action="forget",
            memory_id=memory.pk,
            at=now,
            hidden_revision_id=visible.pk,
        )
        return ChangeResult(memory=record_now(memory, visible), changed=True)


def hold_only(
    memory: Memory,
    shown: Revision,
    start: dt.datetime,
    end: dt.datetime | None,
    *,
    now: dt.datetime,
    actor: str,
    interface: str,
    reason: str,
    source: str | None = None,
) -> list[Revision]:
    """From ``now`` on, ``memory`` holds ``shown``'s fields for [start, end) only, in the caller's transaction.

    A revision can only add an interval, so a tombstone hides the memory at every valid
    time and a revision written after it in the same instant (a higher id wins the tie)
    re-asserts ``shown`` for the interval. An empty interval leaves the tombstone alone.
    ``source``: the re-assertion's, when the change has a provenance of its own.
    """
    fields = {name: getattr(shown, name) for name in _CARRIED}
    fields.update(valid_from=start, valid_to=end, **({"source": source} if source else {}))
    revisions = [
        dict(
            memory=memory,
            tombstone=True,
            hides=shown,
            reason=reason,
            content="",
            content_hash=validation.content_hash(""),
            known_at=now,
            valid_from=now,
            author=actor,
            interface=interface,
        )
    ]
    if end is None or end > start:
        revisions.append(
            dict(
                memory=memory,
                content_hash=shown.content_hash,
                known_at=now,
                author=actor,
                interface=interface,
                reason=reason,
                **fields,
            )
        )
    return append_revisions(revisions)


def memory_end(
    *,
    memory_id: int,
    valid_to: dt.datetime,
    actor: str,
    interface: str,
    reason: str | None = None,
    source: str | None = None,
) -> ChangeResult:
    """End the fact a memory shows now at ``valid_to``: as of now it holds only before then; as of earlier, as before.

    A supersession, not a forget: the memory is not forgotten, and at a valid time before
    ``valid_to`` it still shows what it showed. When ``valid_to`` is not after the time the
    fact was recorded to hold from, it held at none of those times, and it shows nowhere.
    """
    check_interface(interface)
    reason = validation.short_text(reason, field="reason", limit=validation.REASON_MAX)
    source = validation.short_text(source, field="source", limit=validation.SOURCE_MAX)
    with transaction.atomic():
        now = dialect.locked_now()  # under the write lock, see memory_remember
        memory = get_memory(memory_id)
        shown = selectors.visible_revision(memory=memory, as_of=now)
        if shown is None:
            raise Conflict(f"Memory {memory.pk} is not visible now, so there is no fact to end.", field="id")
        end = min(valid_to, shown.valid_to) if shown.valid_to is not None else valid_to
        written = hold_only(
            memory,
            shown,
            shown.valid_from,
            end,
            now=now,
            actor=actor,
            interface=interface,
            reason=reason or "",
            source=source,
        )
        audit(
            actor=actor,
            interface=interface,
            action="end",
            memory_id=memory.pk,
            at=now,
            valid_to=format_instant(end),
            ended_revision_id=shown.pk,
            revision_ids=[revision.pk for revision in written],
        )
        return ChangeResult(memory=record_now(memory, written[-1] if len(written) > 1 else shown), changed=True)


def memory_restore(*, memory_id: int, actor: str, interface: str, reason: str | None = None) -> ChangeResult:
    """Bring a forgotten memory back by re-asserting the revision its tombstone hid."""
    check_interface(interface)
    reason = validation.short_text(reason, field="reason", limit=validation.REASON_MAX)
    with transaction.atomic():
        now = dialect.locked_now()  # under the write lock, see memory_remember
        memory = get_memory(memory_id)
        if memory.state != State.FORGOTTEN:
            return ChangeResult(memory=record_now(memory, current_revision(memory, now)), changed=False)
        tombstone = memory.revisions.filter(tombstone=True).latest_known().first()
        hidden = tombstone.hides
        duplicate = selectors.visible_duplicate(
            namespace=memory.namespace, content_hash=hidden.content_hash, exclude_memory_id=memory.pk
        )
        if duplicate is not None:
            raise duplicate_error(duplicate)
        fields = {name: getattr(hidden, name) for name in _CARRIED}
        fields["valid_from"] = min(fields["valid_from"], now)
        revision = append_revision(
            memory=memory,
            content_hash=hidden.content_hash,
            known_at=now,
            author=actor,
            interface=interface,
            reason=reason,
            **fields,
        )
        memory.state = State.ACTIVE
        memory.save(update_fields=["state"])
        audit(actor=actor, interface=interface, action="restore", memory_id=memory.pk, at=now, revision_id=revision.pk)
        shown = selectors.visible_revision(memory=memory, as_of=now) or revision
        return ChangeResult(memory=record_now(memory, shown), changed=True)


def memory_retag(
    *,
    memory_id: int,
    actor: str,
    interface: str,
    add: list[str] | None = None,
    remove: list[str] | None = None,
    at: dt.datetime | None = None,
) -> ChangeResult:
    """Add and remove tags (case-insensitive) on a memory; tags belong to its identity, not a revision.

    ``at``: the instant of an enclosing write (``memory_update``), as for memory_revise.
    """
    check_interface(interface)
    add_names = validation.tags(add)
    remove_slugs = {name.casefold() for name in validation.tags(remove)}
    with transaction.atomic():
        now = at or dialect.locked_now()  # under the write lock, see memory_remember
        memory = get_memory(memory_id)
        added = add_tags(memory, [name for name in add_names if name.casefold() not in remove_slugs])
        removed = list(memory.tags.filter(slug__in=remove_slugs).values_list("name", flat=True))
        if removed:
            memory.tags.remove(*memory.tags.filter(slug__in=remove_slugs))
        if added or removed:
            append_attributes(memory, known_at=now, actor=actor, interface=interface)
            audit(
                actor=actor,
                interface=interface,
                action="retag",
                memory_id=memory.pk,
                at=now,
                added=added,
                removed=removed,
            )
        return ChangeResult(memory=record_now(memory, current_revision(memory, now)), changed=bool(added or removed))


def memory_update(
    *,
    memory_id: int,
    actor: str,
    interface: str,
    content: str | None = None,
    title: str | None = None,
    source: str | None = None,
    kind: str | None = None,
    ttl_days: int | None = -1,
    valid_from=None,
    valid_to=None,
    add_tags: list[str] | None = None,
    remove_tags: list[str] | None = None,
) -> ChangeResult:
    """Revise the given fields and add or remove tags, in one transaction: the update agents, scripts and the
    admin's change page make.

    Fields left None carry over; ``ttl_days`` -1 keeps the expiry (see memory_revise).
    Asking for no change at all is refused, so a caller learns its request was empty.
    A refused retag leaves no revision behind.
    """
    revise = dict(content=content, title=title, source=source, kind=kind, valid_from=valid_from, valid_to=valid_to)
    revise = {name: value for name, value in revise.items() if value is not None}
    retag = bool(add_tags or remove_tags)
    if not revise and not retag and ttl_days == -1:
        raise InvalidInput(
            "Nothing to update: give content, title, source, kind, tags to add or remove, ttl_days, "
            "or a validity interval.",
            field="id",
        )
    # Embedded before the transaction takes the write lock; memory_revise then finds the vector ready.
    prepare_revision(memory_id, _text_changes(content, title))
    with transaction.atomic():
        # One instant for both halves: no time shows the new text or kind with the old tags.
        now = dialect.locked_now()  # under the write lock, see memory_remember
        changed, correction = False, None
        if revise or ttl_days != -1:
            result = memory_revise(
                memory_id=memory_id, ttl_days=ttl_days, actor=actor, interface=interface, at=now, **revise
            )
            changed, correction = result.changed, result.correction
        if retag:
            result = memory_retag(
                memory_id=memory_id, add=add_tags, remove=remove_tags, actor=actor, interface=interface, at=now
            )
            changed = changed or result.changed
    return ChangeResult(memory=result.memory, changed=changed, correction=correction)


# The lifecycle: each transition appends an attribute row with the new state and why (memories.states).


def _transition(
    memory_id, *, to: str, allowed_from: tuple[str, ...], action: str, actor: str, interface: str, reason: str | None
) -> ChangeResult:
    """Move a memory from one of ``allowed_from`` to state ``to`` (already there: nothing changes), in one
    transaction: an attribute row from now on, and an audit event naming both states."""
    check_interface(interface)
    reason = validation.short_text(reason, field="reason", limit=validation.REASON_MAX)
    with transaction.atomic():
        now = dialect.locked_now()  # under the write lock, see memory_remember
        memory = get_memory(memory_id)
        if memory.state == State.FORGOTTEN:
            raise Conflict(f"Memory {memory.pk} is forgotten. Restore it first.", field="id")
        current, shown = recorded_state(memory), current_revision(memory, now)
        if current == to:
            return ChangeResult(memory=record_now(memory, shown, state=current), changed=False)
        if current not in allowed_from:
            advice = {Lifecycle.ARCHIVED: " Unarchive it instead.", Lifecycle.CANDIDATE: " Promote it instead."}
            raise Conflict(
                f"Memory {memory.pk} is {current}: {action} applies to a memory that is "
                f"{' or '.join(allowed_from)}.{advice.get(current, '')}",
                field="id",
            )
        append_attributes(memory, known_at=now, actor=actor, interface=interface, state=to, reason=reason)
        audit(
            actor=actor,
            interface=interface,
            action=action,
            memory_id=memory.pk,
            at=now,
            from_state=current,
            to_state=to,
        )
        return ChangeResult(memory=record_now(memory, shown, state=to), changed=True)


def memory_promote(*, memory_id: int, actor: str, interface: str, reason: str | None = None) -> ChangeResult:
    """Make a candidate active from now on (a person, or a trusted caller, vouches for it)."""
    return _transition(
        memory_id,
        to=Lifecycle.ACTIVE.value,
        allowed_from=(Lifecycle.CANDIDATE.value,),
        action="promote",
        actor=actor,
        interface=interface,
        reason=reason,
    )


def memory_archive(*, memory_id: int, actor: str, interface: str, reason: str | None = None) -> ChangeResult:
    """Archive a memory from now on: kept, and read by get, list and history, but left out of recall unless asked."""
    return _transition(
        memory_id,
        to=Lifecycle.ARCHIVED.value,
        allowed_from=(Lifecycle.CANDIDATE.value, Lifecycle.ACTIVE.value),
        action="archive",
        actor=actor,
        interface=interface,
        reason=reason,
    )


def memory_unarchive(*, memory_id: int, actor: str, interface: str, reason: str | None = None) -> ChangeResult:
    """Bring an archived memory back, from now on, to the state it had before it was archived."""
    with transaction.atomic():  # the state before is read under the write lock the transition takes
        memory = get_memory(memory_id)
        # Its newest row that is not archived says what it was (a memory archived from its first row was active).
        before = (
            Attributes.objects.filter(memory=memory)
            .exclude(state=Lifecycle.ARCHIVED)
            .order_by("-known_at", "-id")
            .values_list("state", flat=True)
            .first()
            or Lifecycle.ACTIVE.value
        )
        return _transition(
            memory_id,
            to=before,
            allowed_from=(Lifecycle.ARCHIVED.value,),
            action="unarchive",
            actor=actor,
            interface=interface,
            reason=reason,
        )
