"""One memory, its history, pages of memories, and the visible duplicates a write checks for."""

import base64
import datetime as dt

from django.conf import settings
from django.db.models import Exists, OuterRef, Prefetch, Q

from knowledge.models import Fact
from knowledge.names import entity_name, predicate_name
from memories import confidence as confidence_rules
from memories import states as state_rules
from memories import validation
from memories.models import Attributes, Lifecycle, Memory, Revision, State, Tag
from memories.records.memory_record import MemoryRecord, Page
from memories.records.revision_history import AttributesRecord, RevisionRecord
from memories.selectors.memory_records import records_for_revisions, tag_prefetch
from memoryproject import dialect
from memoryproject.exceptions import InvalidInput, MemoryNotFound

LIST_LIMIT_DEFAULT = 20
LIST_LIMIT_MAX = 200
# active: visible (whatever its lifecycle state); candidate, stale, archived: visible and in that state.
LIST_STATES = ("active", "candidate", "stale", "archived", "hidden", "forgotten", "all")
_LIFECYCLE_STATES = ("candidate", "stale", "archived")


def visible_revision(*, memory: Memory, as_of: dt.datetime, valid_at: dt.datetime | None = None) -> Revision | None:
    """Return the revision ``memory`` shows at (as_of, valid_at), or None when it is hidden there."""
    return Revision.objects.filter(memory=memory).visible(as_of=as_of, valid_at=valid_at).first()


def latest_content_revision(memory: Memory) -> Revision | None:
    """The newest revision that carries text (tombstones carry none), visible or not."""
    return memory.revisions.filter(tombstone=False).latest_known().first()


def memory_get(*, memory_id=None, namespace=None, key=None, as_of=None, valid_at=None) -> MemoryRecord:
    """Return the memory as it was known at ``as_of`` for valid time ``valid_at`` (both default to now)."""
    as_of_time, valid_time = validation.resolve_times(as_of, valid_at)
    memories = Memory.objects.all()
    if memory_id is not None:
        if isinstance(memory_id, bool) or not isinstance(memory_id, int) or memory_id < 1:
            raise InvalidInput(f"id: {memory_id!r} is not a memory id (a positive integer).", field="id")
        memories = memories.filter(pk=memory_id)
        wanted = memory_id
    elif namespace is not None and key is not None:
        namespace, key = validation.namespace(namespace), validation.key(key)
        if as_of is None:  # now: where the memory is, by the unique (namespace, key) index
            memories = memories.filter(namespace=namespace, key=key)
        else:
            # The memory with this key (memory_key index) that was in the namespace then: one at most, since a
            # key names one memory of a namespace at a time. Memories without attribute rows by their own.
            there = Exists(Attributes.objects.as_of(as_of_time).filter(memory=OuterRef("pk"), namespace=namespace))
            rowless = ~Exists(Attributes.all_objects.filter(memory=OuterRef("pk")))
            memories = memories.filter(Q(there) | (Q(namespace=namespace) & Q(rowless)), key=key)
        wanted = f"{namespace}/{key}"
    else:
        raise InvalidInput("Give an id, or a namespace and a key.", field="id")
    revision_id = (
        Revision.objects.filter(memory__in=memories)
        .visible(as_of=as_of_time, valid_at=valid_time)
        .values_list("pk", flat=True)
        .first()
    )
    if revision_id is None:
        raise MemoryNotFound(wanted)
    record = records_for_revisions([revision_id], as_of=as_of_time)[revision_id]
    return confidence_rules.with_confidence([record], as_of=as_of_time, valid_at=valid_time)[0]


def memory_history(*, memory_id: int, as_of=None) -> list[RevisionRecord]:
    """Return every revision known by ``as_of`` (default now), tombstones included, oldest first."""
    as_of_time, _ = validation.resolve_times(as_of)
    if not Memory.objects.filter(pk=memory_id).exists():
        raise MemoryNotFound(memory_id, maybe_hidden=False)
    revisions = Revision.objects.filter(memory_id=memory_id).known_by(as_of_time).order_by("known_at", "id")
    return [RevisionRecord.from_model(revision) for revision in revisions]


def attribute_history(*, memory_id: int, as_of=None) -> list[AttributesRecord]:
    """Return the memory's namespace, kind, tags and lifecycle state after each change known by ``as_of`` (default now),
    oldest first."""
    as_of_time, _ = validation.resolve_times(as_of)
    rows = (
        Attributes.objects.filter(memory_id=memory_id)
        .known_by(as_of_time)
        .order_by("known_at", "id")
        .prefetch_related(Prefetch("tags", queryset=Tag.objects.order_by("slug")))
    )
    return [
        AttributesRecord(
            known_at=row.known_at,
            namespace=row.namespace,
            kind=row.kind,
            tags=[tag.name for tag in row.tags.all()],
            state=row.state,
            reason=row.reason,
            author=row.author,
            interface=row.interface,
        )
        for row in rows
    ]


def _encode_cursor(memory_id: int) -> str:
    return base64.urlsafe_b64encode(f"m:{memory_id}".encode()).decode().rstrip("=")


def _decode_cursor(cursor: str) -> int:
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        prefix, value = text.split(":", 1)
        if prefix != "m":
            raise ValueError
        return int(value)
    except (ValueError, UnicodeDecodeError):
        raise InvalidInput("cursor: not a cursor this server gave out. Start again without one.", field="cursor")


def memory_list(
    *,
    namespace: str | list[str] | None = None,
    tags: list[str] | None = None,
    kind: str | None = None,
    state: str = "active",
    limit: int = LIST_LIMIT_DEFAULT,
    cursor: str | None = None,
    as_of=None,
    valid_at=None,
) -> Page:
    """Return memories newest first, one page at a time.

    ``state``: ``active`` (visible now, whatever its lifecycle state), ``candidate``,
    ``stale`` or ``archived`` (visible now and in that state, ``memories.states``),
    ``hidden`` (not forgotten, but not visible now: TTL passed or outside its validity),
    ``forgotten``, or ``all``. Each item shows its visible revision, or its newest
    revision with text when hidden. With ``as_of`` or ``valid_at``, all of it is read
    at that point instead of now.
    """
    if state not in LIST_STATES:
        raise InvalidInput(f"state: {state!r} is not one of {', '.join(LIST_STATES)}.", field="state")
    if as_of is not None or valid_at is not None or state in _LIFECYCLE_STATES:
        # The lifecycle states are read from the attribute rows, as of now when no time is given.
        return _list_at(
            *validation.resolve_times(as_of, valid_at),
            namespace=namespace,
            tags=tags,
            kind=kind,
            state=state,
            limit=limit,
            cursor=cursor,
        )
    return _list_now(namespace=namespace, tags=tags, kind=kind, state=state, limit=limit, cursor=cursor)


def _list_now(*, namespace, tags, kind, state: str, limit: int, cursor) -> Page:
    """memory_list now: filters match each memory's current namespace, kind and tags, and ``state`` is active,
    hidden, forgotten or all (the lifecycle states are read by ``_list_at``)."""
    now = dialect.now()
    memories = Memory.objects.all()
    if namespace:
        names = [namespace] if isinstance(namespace, str) else list(namespace)
        memories = memories.filter(namespace__in=[validation.namespace(name) for name in names])
    if kind:
        memories = memories.filter(kind=validation.kind(kind))
    for tag in validation.tags(tags):
        memories = memories.filter(tags__slug=tag.casefold())
    if state == "active":
        memories = memories.visible(as_of=now)
    elif state == "hidden":
        memories = memories.filter(state=State.ACTIVE).hidden(as_of=now)
    elif state == "forgotten":
        memories = memories.filter(state=State.FORGOTTEN)
    if cursor:
        memories = memories.filter(pk__lt=_decode_cursor(cursor))
    page = list(memories.order_by("-pk").prefetch_related(tag_prefetch())[: limit + 1])
    more = len(page) > limit
    page = page[:limit]
    shown = {revision.memory_id: revision for revision in Revision.objects.filter(memory__in=page).visible(as_of=now)}
    recorded = dict(Attributes.objects.as_of(now).filter(memory__in=page).values_list("memory_id", "state"))
    items = []
    for memory in page:
        revision = shown.get(memory.pk) or latest_content_revision(memory)
        revision.memory = memory
        read = (
            state_rules.FORGOTTEN
            if memory.state == State.FORGOTTEN
            else state_rules.read_state(
                recorded.get(memory.pk, Lifecycle.ACTIVE.value), kind=memory.kind, known_at=revision.known_at, as_of=now
            )
        )
        items.append(MemoryRecord.from_revision(revision, state=read))
    items = _scored_where_visible(items, {revision.pk for revision in shown.values()}, as_of=now, valid_at=now)
    return Page(items=items, next_cursor=_encode_cursor(page[-1].pk) if more and page else None)


def _scored_where_visible(
    items: list[MemoryRecord], visible: set[int], *, as_of: dt.datetime, valid_at: dt.datetime
) -> list[MemoryRecord]:
    """``items``, those whose revision is in ``visible`` with their conflicts and confidence (memories.confidence);
    a hidden or forgotten memory shows no confidence."""
    scored = {
        record.revision_id: record
        for record in confidence_rules.with_confidence(
            [item for item in items if item.revision_id in visible], as_of=as_of, valid_at=valid_at
        )
    }
    return [scored.get(item.revision_id, item) for item in items]


def _list_at(
    as_of: dt.datetime, valid_at: dt.datetime, *, namespace, tags, kind, state: str, limit: int, cursor
) -> Page:
    """memory_list at a past or chosen point: filters match the namespace, kind, tags and lifecycle state each memory
    carried at ``as_of``, and states follow the visibility rule there (a tombstone winner is forgotten, no winner is
    hidden)."""
    carried = Attributes.objects.as_of(as_of)
    rowless = Memory.objects.exclude(Exists(Attributes.all_objects.filter(memory=OuterRef("pk"))))
    if namespace:
        names = [validation.namespace(name) for name in ([namespace] if isinstance(namespace, str) else namespace)]
        carried, rowless = carried.filter(namespace__in=names), rowless.filter(namespace__in=names)
    if kind:
        carried, rowless = carried.filter(kind=validation.kind(kind)), rowless.filter(kind=validation.kind(kind))
    for tag in validation.tags(tags):
        carried, rowless = carried.filter(tags__slug=tag.casefold()), rowless.filter(tags__slug=tag.casefold())
    if state in (Lifecycle.CANDIDATE, Lifecycle.ARCHIVED):
        carried, rowless = carried.filter(state=state), rowless.none()  # a memory without rows is active
    elif state == state_rules.STALE:
        carried, rowless = _reading_stale(
            carried.filter(state=Lifecycle.ACTIVE), rowless, as_of=as_of, valid_at=valid_at
        )
    # Memories written outside the services have no attribute rows: their current values stand in.
    memories = (
        Memory.objects.filter(Q(pk__in=carried.values("memory_id")) | Q(pk__in=rowless.values("pk")))
        .filter(Exists(Revision.objects.filter(memory=OuterRef("pk")).known_by(as_of)))
        ._with_winner(as_of=as_of, valid_at=valid_at)
    )
    if state == "active" or state in _LIFECYCLE_STATES:
        memories = memories.filter(winning_revision_id__isnull=False, winner_is_tombstone=False)
    elif state == "hidden":
        memories = memories.filter(winning_revision_id__isnull=True)
    elif state == "forgotten":
        memories = memories.filter(winner_is_tombstone=True)
    if cursor:
        memories = memories.filter(pk__lt=_decode_cursor(cursor))
    page = list(memories.order_by("-pk").values_list("pk", "winning_revision_id", "winner_is_tombstone")[: limit + 1])
    more = len(page) > limit
    page = page[:limit]
    shown = {}
    for memory_id, revision_id, tombstone in page:
        if revision_id is None or tombstone:  # hidden or forgotten then: its newest text known by then
            revision_id = (
                Revision.objects.filter(memory_id=memory_id, tombstone=False)
                .known_by(as_of)
                .latest_known()
                .values_list("pk", flat=True)
                .first()
            )
        shown[memory_id] = revision_id
    records = records_for_revisions(
        [revision_id for revision_id in shown.values() if revision_id is not None], as_of=as_of
    )
    items = []
    for memory_id, _, tombstone in page:
        record = records.get(shown[memory_id])
        if record is not None:
            items.append(record.model_copy(update={"state": State.FORGOTTEN.value}) if tombstone else record)
    visible = {revision_id for _, revision_id, tombstone in page if revision_id is not None and not tombstone}
    items = _scored_where_visible(items, visible, as_of=as_of, valid_at=valid_at)
    return Page(items=items, next_cursor=_encode_cursor(page[-1][0]) if more and page else None)


def _reading_stale(carried, rowless, *, as_of: dt.datetime, valid_at: dt.datetime):
    """The attribute rows ``carried`` and rowless memories ``rowless`` whose memory's revision visible at (as_of,
    valid_at) is older than its kind's stale age (``memories.states``): the active ones among them read stale."""
    rows, memories = Q(pk__in=[]), Q(pk__in=[])
    for kind in settings.MEMORY_STALE_AFTER_DAYS:

        def old(memory_ref, cutoff=as_of - state_rules.stale_after(kind)):
            shown = Revision.objects.filter(memory=OuterRef(memory_ref)).visible(as_of=as_of, valid_at=valid_at)
            return Exists(shown.filter(known_at__lt=cutoff))

        rows |= Q(kind=kind) & Q(old("memory_id"))
        memories |= Q(kind=kind) & Q(old("pk"))
    return carried.filter(rows), rowless.filter(memories)


def memories_reading(state: str, *, as_of: dt.datetime):
    """Return the ids (a ``values("pk")`` queryset) of the memories a read at ``as_of`` shows in ``state``.

    The words of ``memories.states``, as the admin's state column reads them: forgotten by the
    memory's state; candidate and archived as recorded; stale an active memory whose visible
    revision is older than its kind's stale age; active the other active ones, hidden ones
    included (their age says nothing).
    """
    if state not in state_rules.READ_STATES:
        raise InvalidInput(f"state: {state!r} is not one of {', '.join(state_rules.READ_STATES)}.", field="state")
    if state == state_rules.FORGOTTEN:
        return Memory.objects.filter(state=State.FORGOTTEN).values("pk")
    kept = Memory.objects.filter(state=State.ACTIVE)
    recorded = Attributes.objects.as_of(as_of)
    if state in (Lifecycle.CANDIDATE, Lifecycle.ARCHIVED):
        return kept.filter(pk__in=recorded.filter(state=state).values("memory_id")).values("pk")
    active_rows = recorded.filter(state=Lifecycle.ACTIVE)
    # A memory without attribute rows is active.
    rowless = kept.exclude(Exists(Attributes.all_objects.filter(memory=OuterRef("pk"))))
    stale_rows, stale_rowless = _reading_stale(active_rows, rowless, as_of=as_of, valid_at=as_of)
    stale = Q(pk__in=stale_rows.values("memory_id")) | Q(pk__in=stale_rowless.values("pk"))
    if state == state_rules.STALE:
        return kept.filter(stale).values("pk")
    active = Q(pk__in=active_rows.values("memory_id")) | Q(pk__in=rowless.values("pk"))
    return kept.filter(active).exclude(stale).values("pk")


def visible_duplicate(*, namespace: str, content_hash: str, exclude_memory_id: int | None = None) -> Memory | None:
    """Return a memory in ``namespace`` whose visible-now revision has this hash, if any.

    Only the revision a memory shows now counts: text it held in the past is not a duplicate.
    """
    # revision_content_hash narrows to the few rows with this hash before visibility is checked.
    revisions = Revision.objects.filter(memory__namespace=namespace, content_hash=content_hash)
    if exclude_memory_id is not None:
        revisions = revisions.exclude(memory_id=exclude_memory_id)
    # Most writes carry new text: no row has the hash, a far cheaper query than the visibility one.
    if not revisions.exists():
        return None
    shown = revisions.visible(as_of=dialect.now()).values("memory_id")
    return Memory.objects.filter(pk__in=shown).order_by("pk").first()


def visible_same_triple(*, namespace: str, subject: str, predicate: str, object: str) -> Revision | None:
    """Return the visible-now revision in ``namespace`` whose triple is this one in normal form (knowledge.names).

    "The Billing API runs_on K8s" and "billing API runs on k8s" are the same triple. The
    lowest memory id wins when several memories hold it.
    """
    wanted = (entity_name(subject), predicate_name(predicate), entity_name(object))
    # LIKE (ASCII case-insensitive) narrows to the few rows naming both before visibility and the exact comparison.
    candidates = (
        Revision.objects.filter(
            memory__namespace=namespace,
            subject__icontains=wanted[0].split()[-1],
            object__icontains=wanted[2].split()[-1],
        )
        .visible(as_of=dialect.now())
        .order_by("memory_id", "id")
    )
    for revision in candidates:
        if (entity_name(revision.subject), predicate_name(revision.predicate), entity_name(revision.object)) == wanted:
            return revision
    return None


# Hashes (and names) per query in visible_duplicates and visible_same_triples: well under SQLite's 999 parameters.
_HASHES_PER_QUERY = 500


def visible_same_triples(*, namespace: str, triples) -> dict[tuple[str, str, str], Revision]:
    """visible_same_triple for many triples at once: {triple in normal form: the visible-now revision stating it}.

    Triples no visible-now revision of ``namespace`` states are left out; the lowest memory
    id wins. Reads the fact rows (normal forms, by subject), then the visibility rule for
    the few revisions stating one of these triples.
    """
    wanted = {
        (entity_name(subject), predicate_name(predicate), entity_name(object_))
        for subject, predicate, object_ in triples
    }
    subjects = sorted({triple[0] for triple in wanted})
    revision_ids = []
    for start in range(0, len(subjects), _HASHES_PER_QUERY):
        # The fact_subject_predicate index: the rows naming these subjects, of every namespace and time.
        rows = Fact.objects.filter(subject__in=subjects[start : start + _HASHES_PER_QUERY]).values_list(
            "revision_id", "subject", "predicate", "object"
        )
        revision_ids += [row[0] for row in rows if row[1:] in wanted]
    found: dict[tuple[str, str, str], Revision] = {}
    for start in range(0, len(revision_ids), _HASHES_PER_QUERY):
        shown = (
            Revision.objects.filter(pk__in=revision_ids[start : start + _HASHES_PER_QUERY], memory__namespace=namespace)
            .visible(as_of=dialect.now())
            .order_by("memory_id", "id")
        )
        for revision in shown:
            triple = (entity_name(revision.subject), predicate_name(revision.predicate), entity_name(revision.object))
            if triple not in found or revision.memory_id < found[triple].memory_id:
                found[triple] = revision
    return found


def visible_duplicates(*, namespace: str, content_hashes) -> dict[str, int]:
    """visible_duplicate for many hashes at once: {hash: id of the first memory showing it now}.

    Hashes no visible-now revision of ``namespace`` carries are left out. Two queries per
    500 hashes at most: which memories of the namespace have a revision with one of them,
    then the visibility rule for those few memories.
    """
    hashes, found = sorted(set(content_hashes)), {}
    now = dialect.now()
    for start in range(0, len(hashes), _HASHES_PER_QUERY):
        # By hash alone: with the namespace in the WHERE clause SQLite walks the namespace, not the hash index.
        stored = Revision.objects.filter(content_hash__in=hashes[start : start + _HASHES_PER_QUERY])
        memory_ids = {
            memory_id
            for memory_id, memory_namespace in stored.values_list("memory_id", "memory__namespace")
            if memory_namespace == namespace
        }
        if not memory_ids:
            continue
        shown = stored.filter(memory_id__in=sorted(memory_ids)).visible(as_of=now)
        for content_hash, memory_id in shown.values_list("content_hash", "memory_id"):
            found[content_hash] = min(memory_id, found.get(content_hash, memory_id))
    return found
