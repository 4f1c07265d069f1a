"""The visibility rule on one view of the search snapshot, resolved in numpy: which revision rows recall sees.

Rows are kept sorted by (memory, known_at, id): the rule's winner for a memory is
then the last candidate row of its run. A memory's namespace and kind are read as of
the query's time from its attribute rows (``memories.models.Attributes``), held as a
second set of columns sorted the same way (``memory_attributes``).

This is the same rule as ``memories.models._visibility_candidates`` (the SQL form);
the property tests check the two agree.
"""

import threading
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

from search.memory_attributes import AttributesAt
from search.snapshot_columns import _ATTRIBUTE_COLUMNS, _COLUMNS, AttributeColumns, Columns, Events

# Visible sets kept per view: "now" and a few points in the past, per namespace choice.
_VISIBLE_CACHE_SIZE = 16
# visible_memo entries per visible set, at most: its mask, the statistics and BM25 length norms
# of ntok and of nbigram, the engine's neighbours; and per view the vectors' placement (of their packed rows and
# of the others apart) and the script shares.
_MEMOS_PER_SET = 10
# Views cut to the memories of a few namespaces (View.narrowed), kept per view, most recently used last.
_NARROWED_VIEWS = 8


@dataclass(frozen=True)
class View:
    """One consistent state of the copy; refreshes build a new View, never change one.

    Its fields come in three parts: the revision rows and the names their codes stand for
    (``columns`` to ``import_times``), the attribute rows (``attributes`` to ``lifecycled``),
    and what is kept beside them (``events`` to ``attributes_cache``): times sorted and answers
    cached on first use, the lock that guards them, and the room the next view may grow into.
    """

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
    room: object = field(default=None, compare=False, repr=False)  # snapshot._Room: see snapshot._extend
    attributes_cache: dict = field(default_factory=dict, compare=False, repr=False)
    narrowed_views: OrderedDict = field(default_factory=OrderedDict, compare=False, repr=False)

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

    def narrowed(self, namespaces: list[str]) -> "View":
        """This view cut to the memories ever in ``namespaces`` (by a revision row or an attribute row), each with
        all its rows; itself when they hold half its rows or more. Every memory keeps its whole history, so the
        visibility rule, the statistics and every score come out the same as on the whole view, while the work of
        a recall follows those memories rather than the store. Kept with the view (a write makes a new one)."""
        key = tuple(sorted(set(namespaces)))
        if set(self.namespaces) <= set(key):  # every namespace there is: nothing to cut
            return self
        with self.lock:
            found = self.narrowed_views.get(key)
            if found is not None:
                self.narrowed_views.move_to_end(key)
                return found
        found = self._cut([code for code, name in enumerate(self.namespaces) if name in key])
        with self.lock:
            if len(self.narrowed_views) >= _NARROWED_VIEWS:
                self.narrowed_views.popitem(last=False)
            self.narrowed_views[key] = found
        return found

    def _cut(self, codes: list[int]) -> "View":
        """``narrowed`` for the namespaces of ``codes``."""
        c, a = self.columns, self.attributes
        top = max(int(c.memory[-1]) if len(c.memory) else 0, int(a.memory[-1]) if a is not None and len(a.id) else 0)
        # By memory id: whether a revision row or an attribute row puts it in one of the namespaces.
        ever = np.zeros(top + 1, dtype=bool)
        ever[c.memory[np.isin(c.namespace, codes)]] = True
        if a is not None:
            ever[a.memory[np.isin(a.namespace, codes)]] = True
        rows = np.flatnonzero(ever[c.memory])
        if 2 * len(rows) >= len(c.revision):
            return self
        # Half the bytes of the whole view's positions: a few of these are kept beside it.
        position = np.full(len(self.position), -1, dtype=np.int32)
        position[c.revision[rows]] = np.arange(len(rows), dtype=np.int32)
        if a is not None:
            kept = np.flatnonzero(ever[a.memory])
            a = AttributeColumns(*(getattr(a, name)[kept] for name in _ATTRIBUTE_COLUMNS))
        # The times of the whole view key the caches: finer than these rows need, never wrong.
        return View(
            columns=Columns(*(getattr(c, name)[rows] for name in _COLUMNS)),
            position=position,
            namespaces=self.namespaces,
            kinds=self.kinds,
            max_id=self.max_id,
            anchor=self.anchor,
            import_times=self.import_times,
            attributes=a,
            attributes_max_id=self.attributes_max_id,
            attributes_anchor=self.attributes_anchor,
            attribute_times=self.attribute_times,
            moved=self.moved,
            rekinded=self.rekinded,
            states=self.states,
            lifecycled=self.lifecycled,
        )

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
        if namespaces is not None and set(self.namespaces) <= set(namespaces):
            namespaces = None  # every namespace there is: the rows of no namespace filter, kept once for both
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
