"""A per-process columnar copy of what the visibility rule reads, so recall resolves it in numpy.

Rows are kept sorted by (memory, known_at, id): the rule's winner for a memory is
then the last candidate row of its run. A memory's namespace and kind are read as of
the query's time from its attribute rows (``memories.models.Attributes``), held as a
second set of columns sorted the same way: the newest row known by then that counts.
So is its recorded lifecycle state, from which recall's ``states`` filter reads what
``memories.states`` says (an active memory whose visible text is older than its kind's
age reads ``stale``).
The copy follows the database cheaply: revisions and attribute rows are append-only,
so new rows are found by polling for ids above the last one seen, and a deleted row
(erasure, purge) bumps ``search_state.generation`` by trigger, which makes the next
query reload from scratch. Rows an import writes are loaded as they come,
counting from never (``counts_from``); its publication bumps ``search_state.published``,
and the next query reads the publication times of the imports it holds rows of.

This is the same rule as ``memories.models._visibility_candidates`` (the SQL form);
the property tests check the two agree.
"""

import dataclasses
import datetime as dt
import threading
from dataclasses import dataclass, field

import numpy as np
from django.db import connection

from memoryproject import dialect

OPEN = np.iinfo(np.int64).max  # valid_to / expires_at that never come
ALWAYS = -OPEN  # counts_from of a revision written outside an import
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_MICRO = dt.timedelta(microseconds=1)


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


_COLUMNS = (
    "revision",
    "memory",
    "namespace",
    "kind",
    "known",
    "valid_from",
    "valid_to",
    "expires",
    "tombstone",
    "ntok",
    "nbigram",
    "counts_from",
    "batch",
)


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


_ATTRIBUTE_COLUMNS = ("id", "memory", "namespace", "kind", "state", "known", "counts_from", "batch")
# The recorded state of a memory without attribute rows, and the one that reads stale with age (memories.states).
ACTIVE = "active"
STALE = "stale"
# stale_after of a kind that never goes stale: as_of minus it is below every time, without overflow.
_NEVER = 2**62


@dataclass
class AttributeColumns:
    """The attribute rows, sorted by (memory, known_at, id); namespace and kind coded as in ``Columns``, the state
    into ``View.states``."""

    id: np.ndarray  # int64
    memory: np.ndarray  # int64
    namespace: np.ndarray  # int32
    kind: np.ndarray  # int32
    state: np.ndarray  # int32
    known: np.ndarray  # int64 microseconds
    counts_from: np.ndarray  # int64 microseconds (ALWAYS, OPEN, or an import's publication)
    batch: np.ndarray  # int64


@dataclass(frozen=True)
class AttributesAt:
    """The namespace, kind and state of each memory as of one time (``as_of``); ``key`` names the attribute rows
    counted then.

    While no memory ever changed namespace (``moved``) or kind (``rekinded``), the values the
    revision rows were loaded with are the only ones, and nothing is worked out; otherwise the
    codes of every memory are, once, on first use. Likewise every memory is active while no
    row ever recorded another state (``lifecycled``).
    """

    attributes: "AttributeColumns"
    columns: "Columns"
    as_of: int
    key: tuple
    moved: bool
    rekinded: bool
    states: tuple = ()  # View.states
    lifecycled: bool = False
    kinds: tuple = ()  # View.kinds
    computed: dict = field(default_factory=dict, compare=False, repr=False)

    def namespace(self, rows: np.ndarray) -> np.ndarray:
        """The namespace code of each of revision ``rows``' memories."""
        if not self.moved:
            return self.columns.namespace[rows]
        codes = self._codes()[self.columns.memory[rows]]
        return np.where(codes >= 0, codes >> 32, self.columns.namespace[rows])

    def kind(self, rows: np.ndarray) -> np.ndarray:
        """The kind code of each of revision ``rows``' memories."""
        if not self.rekinded:
            return self.columns.kind[rows]
        codes = self._codes()[self.columns.memory[rows]]
        return np.where(codes >= 0, codes & 0xFFFFFFFF, self.columns.kind[rows])

    def in_states(self, rows: np.ndarray, states: list[str], stale_after: dict[str, int], *, as_of: int) -> np.ndarray:
        """Whether each of revision ``rows`` (visible at ``as_of``, one per memory) shows its memory in one of
        ``states``: its recorded state then, except that an active one whose row was learned more than
        ``stale_after[kind]`` microseconds before ``as_of`` reads ``stale`` (the rule of
        ``memories.states.read_state``). ``as_of`` is the query's own: this object serves every time with the
        same attribute rows counted, and ages differ between them."""
        # Whether active memories split into active and stale ones here: only when one of the two is asked for.
        split = (ACTIVE in states) != (STALE in states)
        active = np.ones(len(rows), dtype=bool)
        keep = np.zeros(len(rows), dtype=bool)
        if not self.lifecycled and not split:  # every memory is active, and its age does not matter
            return active if ACTIVE in states else keep
        if self.lifecycled:
            codes = self._state_codes()[self.columns.memory[rows]]
            active = (codes < 0) | np.isin(codes, [code for code, name in enumerate(self.states) if name == ACTIVE])
            keep = np.isin(codes, [code for code, name in enumerate(self.states) if name in states and name != ACTIVE])
        stale = np.zeros(len(rows), dtype=bool)
        if stale_after and split:
            ages = np.array([stale_after.get(name, _NEVER) for name in self.kinds] or [_NEVER], dtype=np.int64)
            stale = active & (self.columns.known[rows] < as_of - ages[self.kind(rows)])
        if ACTIVE in states:
            keep |= active & ~stale
        elif STALE in states:
            keep |= stale
        return keep

    def _newest(self) -> np.ndarray:
        """The attribute rows counted at as_of that are their memory's newest then."""
        newest = self.computed.get("newest")
        if newest is None:
            a = self.attributes
            newest = np.flatnonzero((a.known <= self.as_of) & (a.counts_from <= self.as_of))
            if len(newest):
                # The newest of each memory's rows: they are sorted by memory, then known_at and id.
                memory = a.memory[newest]
                newest = newest[np.append(memory[1:] != memory[:-1], True)]
            self.computed["newest"] = newest
        return newest

    def _by_memory(self) -> np.ndarray:
        """An array indexed by memory id, every slot -1 (no row then)."""
        a, c = self.attributes, self.columns
        top = max(int(a.memory[-1]) if len(a.id) else 0, int(c.memory[-1]) if len(c.memory) else 0)  # both sorted
        return np.full(top + 1, -1, dtype=np.int64)

    def _codes(self) -> np.ndarray:
        """By memory id: namespace code << 32 | kind code of its newest row counted at as_of, or -1 (none)."""
        codes = self.computed.get("codes")
        if codes is not None:
            return codes
        a, rows = self.attributes, self._newest()
        codes = self._by_memory()
        codes[a.memory[rows]] = a.namespace[rows].astype(np.int64) << 32 | a.kind[rows]
        codes.flags.writeable = False
        self.computed["codes"] = codes
        return codes

    def _state_codes(self) -> np.ndarray:
        """By memory id: the state code of its newest row counted at as_of, or -1 (none: the memory is active)."""
        codes = self.computed.get("states")
        if codes is None:
            a, rows = self.attributes, self._newest()
            codes = self._by_memory()
            codes[a.memory[rows]] = a.state[rows]
            codes.flags.writeable = False
            self.computed["states"] = codes
        return codes


@dataclass
class Columns:
    revision: np.ndarray  # int64
    memory: np.ndarray  # int64
    # The memory's namespace and kind when the row was loaded: only for a memory without attribute rows
    # (written outside the services); every other one reads them as of the query (View.attributes_at).
    namespace: np.ndarray  # int32 code into View.namespaces
    kind: np.ndarray  # int32 code into View.kinds
    known: np.ndarray  # int64 microseconds
    valid_from: np.ndarray
    valid_to: np.ndarray
    expires: np.ndarray
    tombstone: np.ndarray  # bool
    ntok: np.ndarray  # int64
    nbigram: np.ndarray  # int64
    counts_from: np.ndarray  # int64 microseconds (ALWAYS, OPEN, or an import's publication)
    batch: np.ndarray  # int64 id of the import that wrote the row, 0 for none


# Visible sets kept per view: "now" and a few points in the past, per namespace choice.
_VISIBLE_CACHE_SIZE = 16
# visible_memo entries per visible set, at most: its mask, the statistics and BM25 length norms
# of ntok and of nbigram, the engine's neighbours; and per view the vectors' placement and the script shares.
_MEMOS_PER_SET = 8


@dataclass
class Events:
    """Each time column sorted: where the visibility rule can change its answer (see ``View.visible_rows``)."""

    known: np.ndarray
    expires: np.ndarray
    valid_from: np.ndarray
    valid_to: np.ndarray

    @classmethod
    def of(cls, columns: Columns) -> "Events":
        return cls(*(np.sort(getattr(columns, name)) for name in _EVENT_COLUMNS))

    def plus(self, new: Columns) -> "Events":
        """These events and those of ``new`` rows: a merge by insertion, O(rows) rather than a sort."""
        merged = []
        for name in _EVENT_COLUMNS:
            old, values = getattr(self, name), np.sort(getattr(new, name))
            merged.append(np.insert(old, np.searchsorted(old, values), values))
        return Events(*merged)


_EVENT_COLUMNS = ("known", "expires", "valid_from", "valid_to")


@dataclass(frozen=True)
class View:
    """One consistent state of the copy; refreshes build a new View, never change one."""

    columns: Columns
    # Revision id -> row; absent ids map to -1, so a mask with one extra False slot at its
    # end (visible_mask) reads them as not visible without a test.
    position: np.ndarray
    namespaces: tuple[str, ...]
    kinds: tuple[str, ...]
    max_id: int
    anchor: str | None  # "memory_id known_at" of the revision max_id, to notice reused ids
    # The distinct counts_from of its rows other than ALWAYS, sorted: a few (one per import), so they
    # key the visible sets apart without a column of events.
    import_times: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64), compare=False)
    attributes: AttributeColumns = field(default=None, compare=False, repr=False)
    attributes_max_id: int = 0
    attributes_anchor: str | None = None  # as ``anchor``, for the attribute rows
    # The attribute rows' known times, sorted: where the attributes as of a time change.
    attribute_times: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64), compare=False)
    # Whether a memory has attribute rows in more than one namespace (it moved): its revisions' postings
    # then sit under several keys, and only the one of its namespace as of the query counts.
    moved: bool = False
    rekinded: bool = False  # whether a memory has attribute rows of more than one kind
    states: tuple[str, ...] = ()  # the lifecycle states the attribute rows record, by code
    lifecycled: bool = False  # whether any attribute row records a state other than active
    events: list = field(default_factory=list, compare=False, repr=False)  # [Events], filled on first use
    cache: dict = field(default_factory=dict, compare=False, repr=False)
    stats: dict = field(default_factory=dict, compare=False, repr=False)  # see visible_memo
    lock: threading.Lock = field(default_factory=threading.Lock, compare=False, repr=False)
    room: "_Room | None" = field(default=None, compare=False, repr=False)  # see _extend
    attributes_cache: dict = field(default_factory=dict, compare=False, repr=False)

    def attributes_at(self, as_of: int) -> AttributesAt:
        """The namespace and kind of each memory as of ``as_of``: its newest attribute row known by then that
        counts, else (a memory without rows) as loaded with its revisions. Cached per set of rows counted; the
        work is per attribute row, and a query then reads the codes of the rows it needs."""
        a = self.attributes
        key = (
            int(np.searchsorted(self.attribute_times, as_of, side="right")),
            int(np.searchsorted(self.import_times, as_of, side="right")),
        )
        found = self.attributes_cache.get(key)
        if found is not None:
            return found
        found = AttributesAt(
            a if a is not None else _NO_ATTRIBUTES,
            self.columns,
            as_of,
            key,
            moved=self.moved,
            rekinded=self.rekinded,
            states=self.states,
            lifecycled=self.lifecycled,
            kinds=self.kinds,
        )
        with self.lock:
            if len(self.attributes_cache) >= _VISIBLE_CACHE_SIZE:
                del self.attributes_cache[next(iter(self.attributes_cache))]
            self.attributes_cache[key] = found
        return found

    def visible_rows(
        self, *, as_of: int, valid_at: int, namespaces: list[str] | None = None, kinds: list[str] | None = None
    ) -> np.ndarray:
        """Return the rows of the revisions visible at (as_of, valid_at), one per memory, in row order.

        The answer is read-only and cached: the rule compares each time column with
        ``as_of`` or ``valid_at``, so two points at which every column has as many values
        on each side see the same rows (between two writes, "now" stays one point until a
        TTL or a validity bound passes). Counting costs four binary searches.
        """
        c = self.columns
        with self.lock:
            if not self.events:
                self.events.append(Events.of(c))
            events = self.events[0]
        attributes = self.attributes_at(as_of)
        key = (
            tuple(sorted(namespaces)) if namespaces is not None else None,
            tuple(sorted(kinds)) if kinds is not None else None,
            attributes.key,
            # known <= as_of, expires > as_of, valid_from <= valid_at, valid_at < valid_to, counts_from <= as_of
            int(np.searchsorted(events.known, as_of, side="right")),
            int(np.searchsorted(events.expires, as_of, side="right")),
            int(np.searchsorted(events.valid_from, valid_at, side="right")),
            int(np.searchsorted(events.valid_to, valid_at, side="right")),
            int(np.searchsorted(self.import_times, as_of, side="right")),
        )
        winners = self.cache.get(key)
        if winners is None:
            winners = self._visible_rows(
                as_of=as_of, valid_at=valid_at, namespaces=namespaces, kinds=kinds, attributes=attributes
            )
            winners.flags.writeable = False
            with self.lock:
                if len(self.cache) >= _VISIBLE_CACHE_SIZE:
                    del self.cache[next(iter(self.cache))]
                self.cache[key] = winners
        return winners

    def visible_stats(self, winners: np.ndarray, column: str) -> tuple[np.ndarray, np.ndarray, float]:
        """For rows ``winners`` (an answer of visible_rows): a mask of them, ``column`` as float64, its mean over them.

        The mask has one more slot than there are rows, always False, where ``position``
        sends absent ids. BM25 needs these for every term of every query; they depend
        only on the visible set, which repeats between writes, so they are kept with it.
        """

        def make():
            lengths = getattr(self.columns, column).astype(np.float64)
            mean = float(lengths[winners].sum()) / len(winners) if len(winners) else 0.0
            return self.visible_mask(winners), lengths, mean

        return self.visible_memo(winners, ("stats", column), make)

    def visible_mask(self, winners: np.ndarray) -> np.ndarray:
        """A read-only mask of rows ``winners``, one slot longer than the rows (always False; see ``position``)."""

        def make():
            mask = np.zeros(len(self.columns.revision) + 1, dtype=bool)
            mask[winners] = True
            return mask

        return self.visible_memo(winners, "mask", make)

    def visible_memo(self, winners: np.ndarray, name, make):
        """``make()``, computed once per visible set ``winners`` (an answer of visible_rows) and ``name``.

        Any array that is never changed in place can key an entry the same way (the
        engine keys by the stored vectors' ids). Keyed by the array's identity, which the
        entry holds so it cannot be reused.
        Arrays in the answer are made read-only: every recall of that set shares them.
        """
        key = (id(winners), name)
        entry = self.stats.get(key)
        if entry is None or entry[0] is not winners:
            value = make()
            for item in value if isinstance(value, tuple) else (value,):
                if isinstance(item, np.ndarray):
                    item.flags.writeable = False
            entry = (winners, value)
            with self.lock:
                if len(self.stats) >= _MEMOS_PER_SET * _VISIBLE_CACHE_SIZE:
                    del self.stats[next(iter(self.stats))]
                self.stats[key] = entry
        return entry[1]

    def visible_among(self, revision_ids, *, as_of: int, valid_at: int, namespace: str) -> np.ndarray:
        """Return those of ``revision_ids`` visible at (as_of, valid_at) in ``namespace`` (as of ``as_of``), sorted.

        The rule of ``visible_rows``, worked out for these revisions' memories only: the
        work is theirs (binary searches into their runs of rows), whatever else the store
        holds. For callers that ask about a few revisions at a time (the knowledge graph).
        """
        c = self.columns
        ids = np.unique(np.asarray(revision_ids, dtype=np.int64))
        ids = ids[(ids > 0) & (ids < len(self.position))]
        asked = self.position[ids]
        asked = asked[asked >= 0]
        if namespace not in self.namespaces or not len(asked):
            return np.zeros(0, dtype=np.int64)
        rows, _ = _runs(c.memory, np.unique(c.memory[asked]))
        winners = _winners(c, rows[_is_candidate(c, rows, as_of=as_of, valid_at=valid_at)])
        winners = np.intersect1d(winners, asked, assume_unique=True)
        winners = winners[self._namespace_codes(winners, as_of) == self.namespaces.index(namespace)]
        return np.sort(c.revision[winners])

    def _namespace_codes(self, rows: np.ndarray, as_of: int) -> np.ndarray:
        """The namespace code of each of revision ``rows``' memories (one row per memory) as of ``as_of``, from
        their own attribute rows: ``AttributesAt.namespace`` for a few memories."""
        c, a = self.columns, self.attributes
        codes = c.namespace[rows].copy()
        if not self.moved or a is None:
            return codes
        attribute_rows, owner = _runs(a.memory, c.memory[rows])
        counted = (a.known[attribute_rows] <= as_of) & (a.counts_from[attribute_rows] <= as_of)
        attribute_rows, owner = attribute_rows[counted], owner[counted]
        # The newest counted row of each memory: its run is sorted by (known_at, id).
        last = np.append(owner[1:] != owner[:-1], True) if len(owner) else np.zeros(0, dtype=bool)
        codes[owner[last]] = a.namespace[attribute_rows[last]]
        return codes

    def _visible_rows(self, *, as_of, valid_at, namespaces, kinds, attributes: AttributesAt) -> np.ndarray:
        c = self.columns
        rows = np.flatnonzero(_is_candidate(c, slice(None), as_of=as_of, valid_at=valid_at))
        if len(rows) == 0:
            return rows
        winners = _winners(c, rows)
        # Namespace and kind as of as_of are one per memory: choosing winners by them is choosing memories.
        if namespaces is not None:
            winners = winners[
                np.isin(
                    attributes.namespace(winners),
                    [code for code, name in enumerate(self.namespaces) if name in namespaces],
                )
            ]
        if kinds is not None:
            winners = winners[
                np.isin(attributes.kind(winners), [code for code, kind in enumerate(self.kinds) if kind in kinds])
            ]
        return winners


def _is_candidate(c: Columns, rows, *, as_of: int, valid_at: int) -> np.ndarray:
    """Which of ``rows`` (an index array, or slice(None) for all) the visibility rule weighs at (as_of, valid_at)."""
    return (
        (c.known[rows] <= as_of)
        & (c.expires[rows] > as_of)
        & (c.counts_from[rows] <= as_of)
        & (c.tombstone[rows] | ((c.valid_from[rows] <= valid_at) & (valid_at < c.valid_to[rows])))
    )


def _winners(c: Columns, candidates: np.ndarray) -> np.ndarray:
    """Of candidate rows (sorted), each memory's last, unless it is a tombstone: the visible rows."""
    if not len(candidates):
        return candidates
    memory = c.memory[candidates]
    last = np.ones(len(candidates), dtype=bool)
    last[:-1] = memory[1:] != memory[:-1]
    winners = candidates[last]
    return winners[~c.tombstone[winners]]


def _runs(sorted_keys: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The rows of ``sorted_keys`` equal to each of ``keys`` (sorted, distinct), in row order, and for each row
    the index of its key in ``keys``."""
    starts = np.searchsorted(sorted_keys, keys, side="left")
    lengths = np.searchsorted(sorted_keys, keys, side="right") - starts
    owner = np.repeat(np.arange(len(keys)), lengths)
    offsets = np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    return np.repeat(starts, lengths) + offsets, owner


_NO_ATTRIBUTES = AttributeColumns(
    *(
        np.zeros(0, dtype=np.int32 if name in ("namespace", "kind", "state") else np.int64)
        for name in _ATTRIBUTE_COLUMNS
    )
)
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
            if max_id > view.max_id:
                # Rows this connection has not committed may roll back: never in the shared room.
                view = _extend(view, after=view.max_id, shared=not connection.in_atomic_block)
            if attributes_max_id > view.attributes_max_id:
                view = _extend_attributes(view, after=view.attributes_max_id)
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
    with connection.cursor() as cursor:
        # The primary key's range: rows written since the view was taken.
        cursor.execute(_load_attributes(), [after])
        rows = cursor.fetchall()
        if not rows:
            return view
        # The same text the refresh check reads, so the two compare equal.
        cursor.execute("SELECT memory_id || ' ' || known_at FROM memories_attributes WHERE id = %s", [rows[-1][0]])
        anchor = cursor.fetchone()[0]
    fields = list(zip(*rows))
    namespaces, kinds, states = list(view.namespaces), list(view.kinds), list(view.states)
    new = AttributeColumns(
        id=np.asarray(fields[0], dtype=np.int64),
        memory=np.asarray(fields[1], dtype=np.int64),
        namespace=_codes(namespaces, fields[2]),
        kind=_codes(kinds, fields[3]),
        state=_codes(states, fields[4]),
        known=np.asarray(fields[5], dtype=np.int64),
        counts_from=np.asarray(fields[6], dtype=np.int64),
        batch=np.asarray(fields[7], dtype=np.int64),
    )
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
        lifecycled=view.lifecycled or any(state != ACTIVE for state in fields[4]),
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
    with connection.cursor() as cursor:
        cursor.execute(_load(), [after])
        rows = cursor.fetchall()
        if not rows:
            return view
        # The same text the refresh check reads, so the two compare equal.
        cursor.execute("SELECT memory_id || ' ' || known_at FROM memories_revision WHERE id = %s", [rows[-1][0]])
        anchor = cursor.fetchone()[0]
    fields = list(zip(*rows))
    namespaces, kinds = list(view.namespaces), list(view.kinds)
    new = Columns(
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
    # Sort by (memory, known_at, id); np.lexsort takes the primary key last.
    order = np.lexsort((new.revision, new.known, new.memory))
    new = Columns(*(getattr(new, name)[order] for name in _COLUMNS))
    max_id = int(new.revision.max())  # new ids are above every old one
    import_times = np.union1d(view.import_times, new.counts_from[new.counts_from != ALWAYS])
    old = view.columns
    if len(old.revision) and (
        new.memory[0] > old.memory[-1] or (new.memory[0] == old.memory[-1] and new.known[0] >= old.known[-1])
    ):
        # Every new row sorts after the last old one (a new memory, the usual write): appended,
        # into the room after the old arrays when it is free, so no column is copied.
        room = view.room if shared else None
        if room is None or not room.takes(view, len(new.revision), max_id):
            room = _Room(view, len(new.revision), max_id) if shared else None
        if room is not None:
            columns, position, events = room.append(view, new, max_id)
            return View(
                columns=columns,
                position=position,
                namespaces=tuple(namespaces),
                kinds=tuple(kinds),
                max_id=max_id,
                anchor=anchor,
                import_times=import_times,
                events=events,
                room=room,
                **_attribute_fields(view),
            )
    columns = _merged(old, new) if len(old.revision) else new
    position = np.full(max_id + 1, -1, dtype=np.int64)
    position[columns.revision] = np.arange(len(columns.revision))
    # A write adds a few rows: merging their times into the sorted ones beats sorting afresh.
    events = [view.events[0].plus(new)] if view.events else []
    return View(
        columns=columns,
        position=position,
        namespaces=tuple(namespaces),
        kinds=tuple(kinds),
        max_id=max_id,
        anchor=anchor,
        import_times=import_times,
        events=events,
        **_attribute_fields(view),
    )


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


def current() -> View:
    """The up-to-date view of the database the current connection points at."""
    key = dialect.database_key()
    with _snapshots_lock:
        snapshot = _snapshots.setdefault(key, Snapshot())
    return snapshot.refresh()
