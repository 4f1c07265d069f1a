"""A per-process columnar copy of what the visibility rule reads, so recall resolves it in numpy.

The copy follows the database cheaply: revisions and attribute rows are append-only,
so new rows are found by polling for ids above the last one seen, and a deleted row
(erasure, purge) bumps ``search_state.generation`` by trigger, which makes the next
query reload from scratch. Rows an import writes are loaded as they come,
counting from never (``counts_from``); its publication bumps ``search_state.published``,
and the next query reads the publication times of the imports it holds rows of.

This module loads the rows and keeps the copy current. What a view holds and how it
answers live beside it: ``snapshot_columns`` (the arrays), ``visibility`` (``View``:
which rows are visible at a point) and ``memory_attributes`` (each memory's namespace,
kind and lifecycle state as of a time).
"""

import dataclasses
import datetime as dt
import threading

import numpy as np
from django.db import connection

from memoryproject import dialect, heap
from search.memory_attributes import ACTIVE
from search.snapshot_columns import _ATTRIBUTE_COLUMNS, _COLUMNS, _EVENT_COLUMNS, AttributeColumns, Columns, Events
from search.visibility import View

OPEN = np.iinfo(np.int64).max  # valid_to / expires_at that never come
ALWAYS = -OPEN  # counts_from of a revision written outside an import
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_MICRO = dt.timedelta(microseconds=1)
# Rows read per chunk when loading: the rows in hand are Python objects, many times their columns' bytes.
_CHUNK = 65_536


def to_micros(moment: dt.datetime) -> int:
    """A time as the columns hold it: integer microseconds since the epoch."""
    return (moment - _EPOCH) // _MICRO


def _micros(column: str, default: str | None = None) -> str:
    expression = dialect.micros(column)
    if default is None:
        return expression
    return f"coalesce({expression}, {default})"


def _load() -> str:
    # counts_from: the earliest as_of at which the row counts (memories.models.ImportBatch): always
    # outside an import, never while its import is unpublished, else from the batch's time.
    return f"""
    SELECT r.id, r.memory_id, m.namespace, m.kind,
           {_micros("r.known_at")}, {_micros("r.valid_from")},
           {_micros("r.valid_to", str(OPEN))}, {_micros("r.expires_at", str(OPEN))},
           r.tombstone, coalesce(d.ntok, 0), coalesce(d.nbigram, 0),
           CASE WHEN r.batch_id IS NULL THEN {ALWAYS} ELSE {_micros("b.counts_from", str(OPEN))} END,
           coalesce(r.batch_id, 0)
    FROM memories_revision r
    JOIN memories_memory m ON m.id = r.memory_id
    LEFT JOIN search_document d ON d.revision_id = r.id
    LEFT JOIN memories_importbatch b ON b.id = r.batch_id
    WHERE r.id > %s
    ORDER BY r.id
"""


def _load_attributes() -> str:
    # A memory's attribute rows, with the same counts_from rule as revisions.
    return f"""
    SELECT a.id, a.memory_id, a.namespace, a.kind, a.state, {_micros("a.known_at")},
           CASE WHEN a.batch_id IS NULL THEN {ALWAYS} ELSE {_micros("b.counts_from", str(OPEN))} END,
           coalesce(a.batch_id, 0)
    FROM memories_attributes a
    LEFT JOIN memories_importbatch b ON b.id = a.batch_id
    WHERE a.id > %s
    ORDER BY a.id
"""


_EMPTY = View(
    columns=Columns(*(np.zeros(0, dtype=bool if name == "tombstone" else np.int64) for name in _COLUMNS)),
    position=np.full(1, -1, dtype=np.int64),
    namespaces=(),
    kinds=(),
    max_id=0,
    anchor=None,
)


class Snapshot:
    """The process-wide copy for one database; ``refresh`` is serialised, views are shared read-only."""

    def __init__(self):
        self.generation = -1
        self.published = -1
        self.view = _EMPTY
        self.lock = threading.Lock()

    def refresh(self) -> View:
        """Return a view of the database as the current connection sees it.

        Inside a transaction the connection may see its own uncommitted rows; those
        are added to a private view and never cached, since they may roll back.
        """
        with self.lock:
            # Under the lock: the anchor must be read for the view it is compared with. Read
            # before it, another thread's refresh could replace the view meanwhile, and the
            # stale anchor then sent this one to reload every row (a second at 100k rows).
            view = self.view
            with connection.cursor() as cursor:
                # Primary-key lookups only: the one-row state table, the revisions' max rowid,
                # and the row the cached view ends with (gone or different: ids were reused
                # after a rollback, so the cache cannot be extended).
                cursor.execute(
                    "SELECT generation, published, (SELECT max(id) FROM memories_revision), "
                    "(SELECT memory_id || ' ' || known_at FROM memories_revision WHERE id = %s), "
                    "(SELECT max(id) FROM memories_attributes), "
                    "(SELECT memory_id || ' ' || known_at FROM memories_attributes WHERE id = %s) FROM search_state",
                    [view.max_id, view.attributes_max_id],
                )
                generation, published, max_id, anchor, attributes_max_id, attributes_anchor = cursor.fetchone()
            max_id, attributes_max_id = max_id or 0, attributes_max_id or 0
            if generation != self.generation or anchor != view.anchor or attributes_anchor != view.attributes_anchor:
                view = _EMPTY
            elif published != self.published:
                view = _republished(view)
            rows = _rows(view)
            if max_id > view.max_id:
                # Rows this connection has not committed may roll back: never in the shared room.
                view = _extend(view, after=view.max_id, shared=not connection.in_atomic_block)
            if attributes_max_id > view.attributes_max_id:
                view = _extend_attributes(view, after=view.attributes_max_id)
            if _rows(view) > rows + _CHUNK:
                heap.return_freed()  # a read of many rows leaves its chunks' pages, and the sorts' copies, in the heap
            if not connection.in_atomic_block:
                self.view, self.generation, self.published = view, generation, published
            return view


def _attribute_fields(view: View) -> dict:
    """The attribute rows of ``view``, for a view built from it."""
    return dict(
        attributes=view.attributes,
        attributes_max_id=view.attributes_max_id,
        attributes_anchor=view.attributes_anchor,
        attribute_times=view.attribute_times,
        moved=view.moved,
        rekinded=view.rekinded,
        states=view.states,
        lifecycled=view.lifecycled,
    )


def _republished(view: View) -> View:
    """``view`` with the rows of imports unpublished when they were loaded counting from their publication now."""
    c, a = view.columns, view.attributes
    waiting = np.flatnonzero(c.counts_from == OPEN)
    waiting_attributes = np.flatnonzero(a.counts_from == OPEN) if a is not None else np.zeros(0, dtype=np.int64)
    if not len(waiting) and not len(waiting_attributes):
        return view
    batches = np.union1d(c.batch[waiting], a.batch[waiting_attributes] if a is not None else [])
    with connection.cursor() as cursor:
        # Primary-key lookups of the few imports the view holds unpublished rows of.
        cursor.execute(
            f"SELECT id, {_micros('counts_from', str(OPEN))} FROM memories_importbatch "
            f"WHERE id IN ({', '.join(['%s'] * len(batches))})",
            [int(batch) for batch in batches],
        )
        times = dict(cursor.fetchall())
    counts_from = c.counts_from.copy()
    counts_from[waiting] = [times.get(batch, OPEN) for batch in c.batch[waiting].tolist()]
    attribute_fields = _attribute_fields(view)
    if len(waiting_attributes):
        attributes_from = a.counts_from.copy()
        attributes_from[waiting_attributes] = [times.get(batch, OPEN) for batch in a.batch[waiting_attributes].tolist()]
        attribute_fields["attributes"] = dataclasses.replace(a, counts_from=attributes_from)
    times = [counts_from]
    if a is not None:
        times.append(attribute_fields["attributes"].counts_from)
    import_times = np.unique(np.concatenate(times))
    import_times = import_times[import_times != ALWAYS]
    # New arrays for one column: outside the room (see _extend), whose arrays later views would share.
    return View(
        columns=dataclasses.replace(c, counts_from=counts_from),
        position=view.position,
        namespaces=view.namespaces,
        kinds=view.kinds,
        max_id=view.max_id,
        anchor=view.anchor,
        import_times=import_times,
        events=list(view.events),
        **attribute_fields,
    )


def _extend_attributes(view: View, *, after: int) -> View:
    """Return ``view`` plus the attribute rows with ids above ``after``, merged into their sorted place."""
    namespaces, kinds, states = list(view.namespaces), list(view.kinds), list(view.states)
    with connection.cursor() as cursor:
        # The primary key's range: rows written since the view was taken, in chunks (see _CHUNK).
        parts = [
            _attribute_columns(rows, namespaces, kinds, states)
            for rows in dialect.chunks(cursor, _load_attributes(), [after], size=_CHUNK)
        ]
        if not parts:
            return view
        # The same text the refresh check reads, so the two compare equal.
        cursor.execute(
            "SELECT memory_id || ' ' || known_at FROM memories_attributes WHERE id = %s", [int(parts[-1].id[-1])]
        )
        anchor = cursor.fetchone()[0]
    new = AttributeColumns(*(np.concatenate([getattr(part, name) for part in parts]) for name in _ATTRIBUTE_COLUMNS))
    order = np.lexsort((new.id, new.known, new.memory))
    new = AttributeColumns(*(getattr(new, name)[order] for name in _ATTRIBUTE_COLUMNS))
    old = view.attributes
    merged = _merged(old, new, names=_ATTRIBUTE_COLUMNS, ids="id") if old is not None and len(old.id) else new
    times = np.sort(new.known)
    attribute_times = np.insert(view.attribute_times, np.searchsorted(view.attribute_times, times), times)
    same_memory = merged.memory[1:] == merged.memory[:-1]
    moved = bool(np.any(same_memory & (merged.namespace[1:] != merged.namespace[:-1])))
    rekinded = bool(np.any(same_memory & (merged.kind[1:] != merged.kind[:-1])))
    return View(
        columns=view.columns,
        position=view.position,
        namespaces=tuple(namespaces),
        kinds=tuple(kinds),
        max_id=view.max_id,
        anchor=view.anchor,
        import_times=np.union1d(view.import_times, new.counts_from[new.counts_from != ALWAYS]),
        events=list(view.events),
        room=view.room,
        attributes=merged,
        attributes_max_id=int(new.id.max()),
        attributes_anchor=anchor,
        attribute_times=attribute_times,
        moved=moved,
        rekinded=rekinded,
        states=tuple(states),
        lifecycled=view.lifecycled or any(states[code] != ACTIVE for code in np.unique(new.state).tolist()),
    )


def _attribute_columns(
    rows: list[tuple], namespaces: list[str], kinds: list[str], states: list[str]
) -> AttributeColumns:
    """Attribute ``rows`` as ``_load_attributes`` reads them, as columns in their order; new names are added to
    ``namespaces``, ``kinds`` and ``states``."""
    fields = list(zip(*rows))
    return AttributeColumns(
        id=np.asarray(fields[0], dtype=np.int64),
        memory=np.asarray(fields[1], dtype=np.int64),
        namespace=_codes(namespaces, fields[2]),
        kind=_codes(kinds, fields[3]),
        state=_codes(states, fields[4]),
        known=np.asarray(fields[5], dtype=np.int64),
        counts_from=np.asarray(fields[6], dtype=np.int64),
        batch=np.asarray(fields[7], dtype=np.int64),
    )


def _codes(names: list[str], values) -> np.ndarray:
    index = {name: code for code, name in enumerate(names)}
    codes = np.empty(len(values), dtype=np.int32)
    for row, value in enumerate(values):
        if value not in index:
            index[value] = len(names)
            names.append(value)
        codes[row] = index[value]
    return codes


def _extend(view: View, *, after: int, shared: bool = False) -> View:
    """Return ``view`` plus the revisions with ids above ``after``, re-sorted.

    ``shared``: the result may grow into the room after ``view``'s arrays (``_Room``).
    """
    namespaces, kinds = list(view.namespaces), list(view.kinds)
    with connection.cursor() as cursor:
        # In chunks: a first load reads every revision, and only one chunk's rows are Python objects at a time.
        parts = [_columns(rows, namespaces, kinds) for rows in dialect.chunks(cursor, _load(), [after], size=_CHUNK)]
        if not parts:
            return view
        # The same text the refresh check reads, so the two compare equal.
        cursor.execute(
            "SELECT memory_id || ' ' || known_at FROM memories_revision WHERE id = %s", [int(parts[-1].revision[-1])]
        )
        anchor = cursor.fetchone()[0]
    new = _sorted(Columns(*(np.concatenate([getattr(part, name) for part in parts]) for name in _COLUMNS)))
    max_id = int(new.revision.max())  # new ids are above every old one
    # The fields besides the arrays: the same whichever way the new rows join the old.
    other_fields = dict(
        namespaces=tuple(namespaces),
        kinds=tuple(kinds),
        max_id=max_id,
        anchor=anchor,
        import_times=np.union1d(view.import_times, new.counts_from[new.counts_from != ALWAYS]),
        **_attribute_fields(view),
    )
    old = view.columns
    if len(old.revision) and _sorts_after(old, new):
        # Every new row sorts after the last old one (a new memory, the usual write): appended,
        # into the room after the old arrays when it is free, so no column is copied.
        room = view.room if shared else None
        if room is None or not room.takes(view, len(new.revision), max_id):
            room = _Room(view, len(new.revision), max_id) if shared else None
        if room is not None:
            columns, position, events = room.append(view, new, max_id)
            return View(columns=columns, position=position, events=events, room=room, **other_fields)
    columns = _merged(old, new) if len(old.revision) else new
    position = np.full(max_id + 1, -1, dtype=np.int64)
    position[columns.revision] = np.arange(len(columns.revision))
    # A write adds a few rows: merging their times into the sorted ones beats sorting afresh.
    events = [view.events[0].plus(new)] if view.events else []
    return View(columns=columns, position=position, events=events, **other_fields)


def _columns(rows: list[tuple], namespaces: list[str], kinds: list[str]) -> Columns:
    """Revision ``rows`` as ``_load`` reads them, as columns in their order; new namespaces and kinds are added to
    ``namespaces`` and ``kinds``."""
    fields = list(zip(*rows))
    return Columns(
        revision=np.asarray(fields[0], dtype=np.int64),
        memory=np.asarray(fields[1], dtype=np.int64),
        namespace=_codes(namespaces, fields[2]),
        kind=_codes(kinds, fields[3]),
        known=np.asarray(fields[4], dtype=np.int64),
        valid_from=np.asarray(fields[5], dtype=np.int64),
        valid_to=np.asarray(fields[6], dtype=np.int64),
        expires=np.asarray(fields[7], dtype=np.int64),
        tombstone=np.asarray(fields[8], dtype=bool),
        ntok=np.asarray(fields[9], dtype=np.int64),
        nbigram=np.asarray(fields[10], dtype=np.int64),
        counts_from=np.asarray(fields[11], dtype=np.int64),
        batch=np.asarray(fields[12], dtype=np.int64),
    )


def _sorted(columns: Columns) -> Columns:
    """``columns`` sorted by (memory, known_at, id); np.lexsort takes the primary key last."""
    order = np.lexsort((columns.revision, columns.known, columns.memory))
    return Columns(*(getattr(columns, name)[order] for name in _COLUMNS))


def _sorts_after(old: Columns, new: Columns) -> bool:
    """Whether every row of ``new`` sorts after the last of ``old`` (both sorted): its first one does."""
    return new.memory[0] > old.memory[-1] or (new.memory[0] == old.memory[-1] and new.known[0] >= old.known[-1])


class _Room:
    """The columns, sorted times and id positions of successive views, with room to grow at the end.

    Each view holds prefixes of these arrays. Only a view whose arrays end where the
    room's used part ends may grow into it (``takes``), and growing writes past every
    prefix handed out, so no view ever sees its arrays change, and a write costs its own
    rows, not a copy of every column.
    """

    def __init__(self, view: View, added: int, max_id: int):
        rows = len(view.columns.revision)
        capacity = rows + added + max(4096, rows // 8)
        self.columns = {}
        for name in _COLUMNS:
            array = getattr(view.columns, name)
            self.columns[name] = np.empty(capacity, dtype=array.dtype)
            self.columns[name][:rows] = array
        self.events = None
        if view.events:
            self.events = {}
            for name in _EVENT_COLUMNS:
                self.events[name] = np.empty(capacity, dtype=np.int64)
                self.events[name][:rows] = getattr(view.events[0], name)
        ids = len(view.position)
        self.position = np.empty(ids + (max_id + 1 - ids) + max(4096, ids // 8), dtype=np.int64)
        self.position[:ids] = view.position
        self.rows, self.ids = rows, ids

    def takes(self, view: View, added: int, max_id: int) -> bool:
        """Whether ``view`` ends where this room's used part ends, with space for ``added`` rows and ids to
        ``max_id``."""
        rows = len(view.columns.revision)
        return (
            self.rows == rows
            and self.ids == len(view.position)
            and rows + added <= len(self.columns["revision"])
            and max_id + 1 <= len(self.position)
            and view.columns.revision.base is self.columns["revision"]
            and (not view.events or (self.events is not None and view.events[0].known.base is self.events["known"]))
        )

    def append(self, view: View, new: Columns, max_id: int) -> tuple[Columns, np.ndarray, list]:
        """The arrays of ``view`` followed by ``new`` (whose rows and times all sort last); claims the space."""
        start, added = self.rows, len(new.revision)
        end = start + added
        for name in _COLUMNS:
            self.columns[name][start:end] = getattr(new, name)
        columns = Columns(*(self.columns[name][:end] for name in _COLUMNS))
        self.position[self.ids : max_id + 1] = -1
        self.position[new.revision] = np.arange(start, end)
        position = self.position[: max_id + 1]
        events = []
        if not view.events:
            self.events = None  # times are sorted on first use, outside the room
        else:
            merged = {}
            for name in _EVENT_COLUMNS:
                values = np.sort(getattr(new, name))
                held = self.events[name][:start]
                if values[0] >= held[-1]:
                    self.events[name][start:end] = values
                    merged[name] = self.events[name][:end]
                else:  # a time earlier than one held (a validity bound, an expiry): merged by insertion
                    merged[name] = np.insert(held, np.searchsorted(held, values), values)
            events = [Events(*(merged[name] for name in _EVENT_COLUMNS))]
            if any(merged[name].base is not self.events[name] for name in _EVENT_COLUMNS):
                self.events = None  # later views grow their times elsewhere
        self.rows, self.ids = end, max_id + 1
        return columns, position, events


def _merged(old, new, *, names=_COLUMNS, ids="revision"):
    """Return ``old`` and ``new`` (each sorted by memory, known_at, id; columns ``names``, ids in column ``ids``)
    as one sorted copy, of their class.

    The usual write adds revisions that sort last within their memory (a new memory, or
    a revision learned after the memory's others): each goes right after its memory's
    run, and inserting there costs a copy of the columns, not a sort. Anything else (a
    trusted import of older history) re-sorts.
    """
    at = np.searchsorted(old.memory, new.memory, side="right")
    before = np.maximum(at - 1, 0)
    same_memory = (at > 0) & (old.memory[before] == new.memory)
    # New ids are above every old id, so an equal known_at still sorts the new row last.
    kind = type(old)
    if np.any(same_memory & (old.known[before] > new.known)):
        both = kind(*(np.concatenate([getattr(old, name), getattr(new, name)]) for name in names))
        order = np.lexsort((getattr(both, ids), both.known, both.memory))
        return kind(*(getattr(both, name)[order] for name in names))
    return kind(*(np.insert(getattr(old, name), at, getattr(new, name)) for name in names))


_snapshots: dict[str, Snapshot] = {}
_snapshots_lock = threading.Lock()


def _rows(view: View) -> int:
    """The revision and attribute rows ``view`` holds."""
    return len(view.columns.revision) + (len(view.attributes.id) if view.attributes is not None else 0)


def current() -> View:
    """The up-to-date view of the database the current connection points at."""
    key = dialect.database_key()
    with _snapshots_lock:
        snapshot = _snapshots.setdefault(key, Snapshot())
    return snapshot.refresh()
