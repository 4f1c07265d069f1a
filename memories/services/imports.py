"""The JSON import: an export document read back, checked whole, then written all or nothing.

Imports check the whole batch before writing anything. They then write it a chunk per
transaction, so other writers get the write lock between chunks, into an import batch
whose rows count nowhere until one short final transaction publishes them
(``memories.services.batches``); a failure takes out what was written, and a process
that dies leaves rows only ``manage.py purge`` sees. A bad item anywhere means nothing
is imported. A trusted import replays the revisions with their recorded times; an
untrusted one remembers each memory's current text through ``memory_remember``, on the
server clock. The new memories of a trusted import (a restore, a migration) are
written in bulk, with the outcome of writing them one by one. The document is the one
``memories.services.export`` writes.
"""

import dataclasses
import datetime as dt
import math
from collections import Counter
from collections.abc import Callable, Iterator

from memories import selectors, staging, validation
from memories.inserts import insert_all
from memories.models import Attributes, Lifecycle, Memory, Revision, State, Tag
from memories.records.import_export import ImportReport
from memories.services import batches
from memories.services.import_reading import (
    COMPARED_FIELDS,
    Located,
    MemoryIn,
    RevisionIn,
    error_at,
    parse_document,
    read_memory,
)
from memories.services.lifecycle import memory_archive
from memories.services.remember import memory_remember
from memories.services.revisions import (
    UNFINISHED_IMPORT_ADVICE,
    add_tags,
    append_attributes,
    append_revision,
    append_revisions,
    audit,
    audit_many,
    check_interface,
    recorded_state,
    tag_objects,
)
from memoryproject import dialect
from memoryproject.exceptions import Conflict, DuplicateContent, InvalidInput, MemoryServiceError
from memoryproject.storage import WRITE_REFUSALS

# Enough to fix a file in one go without burying the first problem.
PROBLEMS_SHOWN = 20


# Reading an import (each item: memories.services.import_reading) ------------------------------------------------


def _read_batch(document, *, trusted: bool, actor: str, interface: str, now: dt.datetime) -> list[MemoryIn]:
    """Check every item; return them all, or raise one error that lists the problems found."""
    document = parse_document(document)
    items, problems, seen = [], [], {}
    for index, raw in enumerate(document["memories"]):
        path = f"memories[{index}]"
        try:
            item = read_memory(path, raw, trusted=trusted, actor=actor, interface=interface, now=now)
            identity = (item.namespace, item.key)
            if identity in seen:
                raise Located(
                    f"{path}.key: {item.key!r} is already used by {seen[identity]} in namespace "
                    f"{item.namespace!r}; a key names one memory.",
                    field=f"{path}.key",
                )
            seen[identity] = path
            items.append(item)
        except Located as error:
            problems.append(error)
    if problems:
        shown = "\n".join(error.message for error in problems[:PROBLEMS_SHOWN])
        more = f"\n...and {len(problems) - PROBLEMS_SHOWN} more." if len(problems) > PROBLEMS_SHOWN else ""
        raise InvalidInput(
            f"Nothing was imported: {len(problems)} problem(s) in the document.\n{shown}{more}", field=problems[0].field
        )
    return items


# Writing an import ----------------------------------------------------------------------------------------------


def memories_import(
    *,
    document,
    actor: str,
    interface: str,
    trusted: bool,
    dry_run: bool = False,
    progress: Callable[[int, int], None] | None = None,
    new_memory_state: str = Lifecycle.ACTIVE,
) -> ImportReport:
    """Import an export document (parsed, or its JSON text), all or nothing; return what changed.

    Every item is checked before anything is written; the items are then written a chunk
    per transaction, unseen, and published together at the end. ``trusted`` replays each
    revision with its recorded times, tombstones included (a restore from a trusted
    export: admin only). Otherwise the server clock applies and only each memory's
    current text is remembered, as any writer would; forgotten or expired memories
    are skipped. Memories already present with the same history (trusted) or text
    (untrusted), and text that another visible memory of the namespace holds, are
    counted and left alone. ``dry_run`` does all of it and then takes it out unpublished.
    ``new_memory_state`` candidate (an untrusted key's import) makes the items that would be
    active candidates.
    """
    check_interface(interface)
    if not isinstance(trusted, bool):
        raise InvalidInput(f"trusted: expected true or false, got {trusted!r}.", field="trusted")
    now = dialect.now()
    items = _read_batch(document, trusted=trusted, actor=actor, interface=interface, now=now)
    if new_memory_state == Lifecycle.CANDIDATE:
        items = [
            dataclasses.replace(item, lifecycle=Lifecycle.CANDIDATE.value)
            if item.lifecycle == Lifecycle.ACTIVE
            else item
            for item in items
        ]
    with batches.import_batch(actor=actor, interface=interface, trusted=trusted, dry_run=dry_run) as batch:
        return _write_batch(
            items,
            batch=batch,
            actor=actor,
            interface=interface,
            trusted=trusted,
            dry_run=dry_run,
            progress=progress,
            now=now,
        )


def _write_batch(items, *, batch, actor, interface, trusted, dry_run, progress, now) -> ImportReport:
    """Write ``items`` a chunk per transaction into ``batch``, then publish it (or, on a dry run, not)."""
    counts = Counter()
    done = 0
    # Untrusted: items whose key names a stored memory. Trusted: changes to a stored memory's tags,
    # kind and state. Neither can wait unseen in the batch; both are made in the step that publishes it.
    later, settle = [], []

    def count(item, outcome):
        nonlocal done
        counts[outcome] += 1
        if outcome in ("created", "revised") and item.state == State.FORGOTTEN and trusted:
            counts["forgotten"] += 1
        done += 1
        if progress:
            progress(done, len(items))

    def write(chunk):
        existing = _existing_keys(chunk)
        if trusted:
            outcomes = _replayed(chunk, existing=existing, settle=settle, actor=actor, interface=interface, now=now)
        else:
            later.extend(item for item in chunk if (item.namespace, item.key) in existing)
            outcomes = _remembered(
                [item for item in chunk if (item.namespace, item.key) not in existing],
                actor=actor,
                interface=interface,
                now=now,
            )
        for item, outcome in outcomes:
            count(item, outcome)

    batches.write_chunks(batch, items, texts=lambda chunk: _texts(chunk, trusted=trusted), write=write)
    with batches.publishing(batch, dry_run=dry_run):
        for item, outcome in _remembered(later, actor=actor, interface=interface, now=now):
            count(item, outcome)
        for item, memory_id, revised in settle:
            _guarded(_settle, item, memory_id=memory_id, revised=revised, actor=actor, interface=interface, now=now)
        report = ImportReport(**counts)
        audit(
            actor=actor,
            interface=interface,
            action="import",
            memory_id=None,
            at=now,
            trusted=trusted,
            batch_id=batch.pk,
            **report.as_dict(),
        )
    return report


def _texts(items: list[MemoryIn], *, trusted: bool) -> list[tuple[str, str]]:
    """(title, content) of the revisions writing ``items`` adds: embedded before the lock is taken."""
    revisions = [revision for item in items for revision in (item.revisions if trusted else item.revisions[-1:])]
    return [(revision.fields["title"], revision.fields["content"]) for revision in revisions if not revision.tombstone]


def _relocated(error: MemoryServiceError, path: str) -> MemoryServiceError:
    """The same error, of the same class, saying which item it is about and that nothing was written."""
    message, field = error_at(path, error)
    message = f"Nothing was imported: {message}"
    if isinstance(error, DuplicateContent):
        return DuplicateContent(message, memory_id=error.memory_id, field=field)
    return type(error)(message, field=field)


def _guarded(write, item: MemoryIn, **context) -> str:
    """``write(item)``'s outcome; a domain error about the item comes out naming it."""
    try:
        return write(item, **context)
    except WRITE_REFUSALS:
        raise  # about the database, not this item
    except MemoryServiceError as error:
        raise _relocated(error, item.path) from None


def _remembered(items: list[MemoryIn], **context) -> Iterator[tuple[MemoryIn, str]]:
    """Remember each item's current text in order, yielding it with its outcome (an untrusted import)."""
    for item in items:
        yield item, _guarded(_remember_current, item, **context)


# New memories written per bulk write: one duplicate query per namespace and a few
# multi-row INSERTs per table for the lot, instead of a dozen statements per memory.
IMPORT_CHUNK = 500


def _replayed(
    items: list[MemoryIn], *, existing: set[tuple[str, str]], settle: list, actor, interface, now
) -> Iterator[tuple[MemoryIn, str]]:
    """Replay ``items`` in order, yielding each with its outcome.

    A memory that already exists (its key is in ``existing``) goes through ``_replay``,
    one at a time; what it leaves to settle goes to ``settle``. New ones (a restore, a
    migration: most of a trusted import) are written in bulk by ``_NewMemories``, which
    gives the same rows and outcomes as ``_replay`` would.
    """
    new = _NewMemories(actor=actor, interface=interface, now=now)
    for item in items:
        if (item.namespace, item.key) in existing:
            yield from new.flush()  # the items before it are written first, as in document order
            yield item, _guarded(_replay, item, settle=settle, actor=actor, interface=interface, now=now)
            continue
        if new.could_duplicate(item):
            # An earlier new memory of the batch may show this text: write them, so the check sees them.
            yield from new.flush()
        new.add(item)
        if len(new) >= IMPORT_CHUNK:
            yield from new.flush()
    yield from new.flush()


def _existing_keys(items: list[MemoryIn]) -> set[tuple[str, str]]:
    """The (namespace, key) pairs of ``items`` that already name a memory.

    Read under the write lock, in the transaction that writes the items, so no other
    writer can take a key meanwhile. A key another unfinished import holds is refused.
    """
    keys: dict[str, list[str]] = {}
    for item in items:
        keys.setdefault(item.namespace, []).append(item.key)
    found = set()
    for namespace, names in keys.items():
        for start in range(0, len(names), IMPORT_CHUNK):
            # The (namespace, key) unique index serves the IN.
            chunk = Memory.all_objects.filter(namespace=namespace, key__in=names[start : start + IMPORT_CHUNK])
            taken = dict(chunk.values_list("key", "batch_id"))
            counted = set(Memory.objects.filter(pk__in=chunk.values("pk")).values_list("key", flat=True))
            for key in taken.keys() - counted:
                path = next(item.path for item in items if (item.namespace, item.key) == (namespace, key))
                raise Conflict(
                    f"Nothing was imported: {path}.key: {key!r} in namespace {namespace!r} belongs to "
                    f"another import that has not finished (batch {taken[key]}). "
                    f"{UNFINISHED_IMPORT_ADVICE}",
                    field=f"{path}.key",
                )
            found.update((namespace, key) for key in counted)
    return found


def _current_hash(item: MemoryIn, now: dt.datetime) -> str | None:
    """The hash of the text ``item`` would show now, when its last revision is current; else None."""
    last = item.revisions[-1]
    current = not last.tombstone and (last.fields["expires_at"] is None or last.fields["expires_at"] > now)
    return last.fields["content_hash"] if current else None


class _NewMemories:
    """New memories of a trusted import, written together: what ``_replay`` does for one, in bulk.

    Outcomes are those of writing the items one by one in order. The duplicate rule needs
    care: an item whose text an earlier pending item carries (in any revision) could be a
    duplicate of it, so the pending items are written before such an item is added
    (``could_duplicate``); every other item's duplicates can only be rows already stored.
    """

    def __init__(self, *, actor, interface, now):
        self.actor, self.interface, self.now = actor, interface, now
        self.items: list[MemoryIn] = []
        self.hashes: set[tuple[str, str]] = set()  # (namespace, hash) of every text revision pending
        self.tags: dict[tuple[str, str], Tag] = {}  # by (namespace, slug), across the whole import

    def __len__(self):
        return len(self.items)

    def could_duplicate(self, item: MemoryIn) -> bool:
        digest = _current_hash(item, self.now)
        return digest is not None and (item.namespace, digest) in self.hashes

    def add(self, item: MemoryIn) -> None:
        self.items.append(item)
        self.hashes.update(
            (item.namespace, revision.fields["content_hash"]) for revision in item.revisions if not revision.tombstone
        )

    def flush(self) -> Iterator[tuple[MemoryIn, str]]:
        items, self.items, self.hashes = self.items, [], set()
        if not items:
            return
        duplicate = self._duplicates(items)
        self._write([item for item in items if item.path not in duplicate])
        for item in items:
            yield item, "duplicates" if item.path in duplicate else "created"

    def _duplicates(self, items: list[MemoryIn]) -> set[str]:
        """Paths of the items whose current text a visible memory of their namespace shows now."""
        wanted: dict[str, dict[str, list[str]]] = {}
        for item in items:
            digest = _current_hash(item, self.now)
            if digest is not None:
                wanted.setdefault(item.namespace, {}).setdefault(digest, []).append(item.path)
        paths = set()
        for namespace, by_hash in wanted.items():
            for digest in selectors.visible_duplicates(namespace=namespace, content_hashes=by_hash):
                paths.update(by_hash[digest])
        return paths

    def _write(self, items: list[MemoryIn]) -> None:
        if not items:
            return
        memories = insert_all(
            [
                Memory(
                    namespace=item.namespace,
                    key=item.key,
                    kind=item.kind,
                    state=item.state,
                    created_at=item.created_at,
                    batch_id=staging.own_batch_id(),
                )
                for item in items
            ]
        )
        tags = self._tag(items, memories)
        _insert_attributes(items, memories, tags)
        _append_histories(items, memories)
        # One "import" event per memory, with the detail _replay's audit() call gives a revised one.
        audit_many(
            actor=self.actor,
            interface=self.interface,
            action="import",
            at=self.now,
            events=[
                (memory.pk, {"trusted": True, "revisions": len(item.revisions)})
                for item, memory in zip(items, memories, strict=True)
            ],
        )

    def _tag(self, items: list[MemoryIn], memories: list[Memory]) -> list[list[Tag]]:
        """Give each memory its item's tags; return each one's tag rows."""
        # Each namespace's new slugs with their first spelling in document order, which wins as it does one item
        # at a time.
        spelled: dict[str, dict[str, str]] = {}
        for item in items:
            for name in item.tags:
                spelled.setdefault(item.namespace, {}).setdefault(name.casefold(), name)
        for namespace, names in spelled.items():
            missing = [name for slug, name in names.items() if (namespace, slug) not in self.tags]
            for tag in tag_objects(namespace=namespace, names=missing) if missing else []:
                self.tags[namespace, tag.slug] = tag
        tags = [[self.tags[item.namespace, name.casefold()] for name in item.tags] for item in items]
        through = Memory.tags.through
        insert_all(
            [
                through(memory_id=memory.pk, tag_id=tag.pk)
                for memory, memory_tags in zip(memories, tags, strict=True)
                for tag in memory_tags
            ]
        )
        return tags


def _insert_attributes(items: list[MemoryIn], memories: list[Memory], tags: list[list[Tag]]) -> None:
    """Each new memory's namespace, kind and tags (``tags``: its tag rows) from its first revision on: the export
    holds only the last ones."""
    rows = insert_all(
        [
            Attributes(
                memory_id=memory.pk,
                known_at=min(item.created_at, item.revisions[0].fields["known_at"]),
                namespace=item.namespace,
                kind=item.kind,
                state=item.lifecycle,
                author=item.revisions[0].fields["author"],
                interface=item.revisions[0].fields["interface"],
                batch_id=staging.own_batch_id(),
            )
            for item, memory in zip(items, memories, strict=True)
        ]
    )
    insert_all(
        [
            Attributes.tags.through(attributes_id=row.pk, tag_id=tag.pk)
            for row, memory_tags in zip(rows, tags, strict=True)
            for tag in memory_tags
        ]
    )


def _append_histories(items: list[MemoryIn], memories: list[Memory]) -> None:
    """Append every new memory's revisions, oldest first."""
    # Position by position, so a tombstone's hidden revision (an earlier one) already has its id.
    written: list[list[Revision]] = [[] for _ in items]
    for position in range(max(len(item.revisions) for item in items)):
        owners = [number for number, item in enumerate(items) if position < len(item.revisions)]
        fields = []
        for number in owners:
            revision = items[number].revisions[position]
            hidden = written[number][revision.hides] if revision.tombstone else None
            fields.append(dict(memory=memories[number], hides=hidden, **revision.fields))
        for number, stored in zip(owners, append_revisions(fields), strict=True):
            written[number].append(stored)


def _replay(item: MemoryIn, *, settle: list, actor, interface, now) -> str:
    """Write ``item``'s revisions as they were recorded; extend a memory whose history they continue.

    New memories are written by ``_NewMemories``: only a memory that exists comes here.
    The revisions wait unseen in the import's batch; the memory's own fields (tags, kind,
    state) cannot, so ``(item, memory id, revised)`` goes to ``settle``, for ``_settle``
    in the step that publishes the batch.
    """
    memory = Memory.objects.get(namespace=item.namespace, key=item.key)
    existing = list(memory.revisions.order_by("known_at", "id"))
    if len(existing) > len(item.revisions) or any(
        stored != incoming.fingerprint() for stored, incoming in zip(_fingerprints(existing), item.revisions)
    ):
        raise Conflict(
            f"key: memory {memory.pk} ({memory.namespace}/{memory.key}) already exists with a different "
            "history. A trusted import only adds revisions after the ones a memory already has.",
            field="key",
        )
    if len(existing) == len(item.revisions):
        settle.append((item, memory.pk, 0))
        return "unchanged"
    written = _write_revisions(memory, item.revisions[len(existing) :], written=existing)
    settle.append((item, memory.pk, len(written) - len(existing)))
    return "revised"


def _settle(item: MemoryIn, *, memory_id: int, revised: int, actor, interface, now) -> None:
    """Give a memory ``_replay`` extended (``revised``: by that many revisions) the item's tags, kind and state."""
    memory = Memory.objects.filter(pk=memory_id).first()
    if memory is None:  # erased by another writer since, with the revisions the import added
        raise Conflict(
            f"memory {memory_id} was erased while the import was adding revisions to it. Run the import "
            "again: it then writes the memory anew."
        )
    added = add_tags(memory, item.tags)
    kind_changed = bool(revised) and memory.kind != item.kind
    lifecycle = item.lifecycle if revised and recorded_state(memory) != item.lifecycle else None
    if revised:
        memory.kind, memory.state = item.kind, item.state
        memory.save(update_fields=["kind", "state"])
    if added or kind_changed or lifecycle:
        append_attributes(memory, known_at=now, actor=actor, interface=interface, state=lifecycle)
    if not revised:
        return
    audit(
        actor=actor, interface=interface, action="import", memory_id=memory.pk, at=now, trusted=True, revisions=revised
    )


def _fingerprints(history: list[Revision]) -> list[tuple]:
    """The comparable form of stored revisions, matching ``RevisionIn.fingerprint``."""
    position = {revision.pk: index for index, revision in enumerate(history)}
    return [
        (*(getattr(revision, name) for name in COMPARED_FIELDS), position.get(revision.hides_id))
        for revision in history
    ]


def _write_revisions(memory: Memory, revisions: list[RevisionIn], *, written: list[Revision]) -> list[Revision]:
    written = list(written)
    for revision in revisions:
        hidden = written[revision.hides] if revision.tombstone else None
        written.append(append_revision(memory=memory, hides=hidden, **revision.fields))
    return written


def _remember_current(item: MemoryIn, *, actor, interface, now) -> str:
    """Remember the text ``item`` holds now, as a new assertion on the server clock."""
    latest = item.revisions[-1]
    expires_at = latest.fields["expires_at"]
    if latest.tombstone or (expires_at is not None and expires_at <= now):
        return "skipped"
    # memory_remember takes a TTL in days; rounding up never hides the text before the source would.
    ttl_days = (
        None
        if expires_at is None
        else min(math.ceil((expires_at - now) / dt.timedelta(days=1)), validation.TTL_DAYS_MAX)
    )
    fields = latest.fields
    try:
        result = memory_remember(
            namespace=item.namespace,
            key=item.key,
            content=fields["content"],
            title=fields["title"],
            kind=item.kind,
            tags=item.tags,
            source=fields["source"],
            ttl_days=ttl_days,
            valid_from=latest.given_valid_from,
            valid_to=fields["valid_to"],
            subject=fields["subject"],
            predicate=fields["predicate"],
            object=fields["object"],
            confidence=fields["confidence"],
            actor=actor,
            interface=interface,
            force=True,  # an import stores what its file holds
            state=Lifecycle.CANDIDATE if item.lifecycle == Lifecycle.CANDIDATE else Lifecycle.ACTIVE,
        )
    except DuplicateContent:
        return "duplicates"
    if result.created:
        if item.lifecycle == Lifecycle.ARCHIVED:
            memory_archive(memory_id=result.memory.id, actor=actor, interface=interface)
        return "created"
    if result.revised:
        return "revised"
    return "unchanged" if result.memory.key == item.key else "duplicates"
