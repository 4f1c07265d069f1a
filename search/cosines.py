"""The cosine of a vector with the revisions a view holds, from this process's copy of the stored vectors,
kept per namespace.

Each process keeps the vectors of the namespaces it has recently served, one ``Partition``
each: the vectors of every revision of every memory that was ever in the namespace, so a
recall as of a time before a move finds a memory's revisions where it was then. A partition
is loaded on first use, kept current by a poll of the rows written since the last look
(each routed to the partitions of its memory), and dropped least recently used first once
the partitions hold more than MEMORY_VECTOR_MEMORY_MB; an erasure, a backfill or a switch
of embedder drops them all. A scan sums each row's products with ``einsum``, the same way
wherever the row sits, so a revision's cosine is the same to the bit whatever else the
store or the partition holds: a recall as of an earlier time ranks exactly as a store
holding only what was visible then would.

A partition of at least MEMORY_COMPACT_MIN_ROWS rows also keeps its whole blocks as int8
(``compact``): a hybrid recall scans those, which bounds each row's cosine, and works out the
float32 cosine of the rows that can matter (``Cosines.exact``), the same bits as a full scan.
"""

import threading
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import numpy as np
from django.conf import settings
from django.db import connection

from memoryproject import dialect, heap, metrics
from search import compact, vectors
from search.embeddings import EmbedderUnavailable, get_embedder
from search.errors import Unavailable

# From this many rows a scan is split between the calling thread and a helper.
_SPLIT_MIN_ROWS = 16_384
# Past this share of a packed part's rows, ``Cosines.exact`` scans them all: copying rows out costs more.
WHOLE_SCAN_SHARE = 1 / 8
_helper = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cosine-scan")


class Stored(NamedTuple):
    """Vectors as this process holds them: revision ids and unit float32 rows, the first of them also packed."""

    ids: np.ndarray
    matrix: np.ndarray
    blocks: tuple[compact.Block, ...] = ()

    @property
    def packed(self) -> int:
        """How many of the first rows ``blocks`` hold."""
        return sum(block.rows for block in self.blocks)


def dots(matrix: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """``matrix @ vector`` in float32, each row summed the same way wherever it sits (BLAS blocks by position)."""
    if len(matrix) < _SPLIT_MIN_ROWS:
        return np.einsum("ij,j->i", matrix, vector)
    half = len(matrix) // 2
    out = np.empty(len(matrix), dtype=np.float32)
    other = _helper.submit(np.einsum, "ij,j->i", matrix[half:], vector, out=out[half:])
    np.einsum("ij,j->i", matrix[:half], vector, out=out[:half])
    other.result()
    return out


def held_bytes(rows: int, dim: int) -> int:
    """At most what a partition of ``rows`` vectors holds: an id, a float32 row and its int8 copy each."""
    return rows * (8 + 5 * dim)


class Load(NamedTuple):
    """A namespace's vectors read from the database for one call: first use, or use after eviction."""

    namespace: str
    rows: int
    seconds: float


class Vectors(NamedTuple):
    """The vectors a call scans, one Stored per namespace, and the namespaces it had to read first."""

    parts: list[Stored]
    loads: list[Load]


class Partition:
    """The vectors of one namespace's memories (every memory ever in it), kept in this process.

    ``stored`` holds the first rows of ``room``; rows written later go after them, so a write
    costs its own rows, not a copy of the matrix (the first write after a read makes the room),
    and what was handed out never changes.
    """

    def __init__(self, rows: vectors.VectorRows, *, packing: bool = True):
        # The rows as read, not a copy: a namespace's vectors are held once; the first write makes room to grow.
        self.packing = packing  # packing pays over many recalls, not for one read kept by nobody
        self.blocks = tuple(compact.pack(rows.matrix)) if packing and compact.packs(len(rows.ids)) else ()
        self.stored = self.room = Stored(rows.ids, rows.matrix, self.blocks)
        self.members: set[int] = set(rows.memories.tolist())  # memory ids whose vectors are here
        self.attributes_seen = 0  # the attribute rows the membership reflects: ids up to this

    @property
    def nbytes(self) -> int:
        return self.room.ids.nbytes + self.room.matrix.nbytes + sum(block.nbytes for block in self.blocks)

    def append(self, rows: vectors.VectorRows) -> None:
        count, added = len(self.stored.ids), len(rows.ids)
        if count + added > len(self.room.ids) or self.room.matrix.shape[1:] != rows.matrix.shape[1:]:
            capacity = count + added + max(256, count // 8)
            room = Stored(np.empty(capacity, dtype=np.int64), np.empty((capacity, rows.matrix.shape[1]), np.float32))
            if count:
                room.ids[:count], room.matrix[:count] = self.stored.ids, self.stored.matrix
            self.room = room
        self.room.ids[count : count + added], self.room.matrix[count : count + added] = rows.ids, rows.matrix
        packed = self.stored.packed
        if self.packing and compact.packs(count + added) and count + added - packed >= compact.BLOCK_ROWS:
            self.blocks += tuple(compact.pack(self.room.matrix[packed : count + added]))
        self.stored = Stored(self.room.ids[: count + added], self.room.matrix[: count + added], self.blocks)
        self.members.update(rows.memories.tolist())


class VectorCopy:
    """One database's stored vectors, per namespace, brought up to date before each use."""

    def __init__(self):
        self.lock = threading.Lock()
        self.state = None  # (generation, embedder) of the space the partitions are complete for
        self.through = 0  # the partitions hold every vector of a revision up to this id
        self.partitions: OrderedDict[str, Partition] = OrderedDict()  # least recently used first

    def current(self, space: vectors.EmbeddingSpace, view, namespaces) -> Vectors:
        """The vectors of ``namespaces`` as of ``space`` (the recorded space the caller read, after taking
        ``view``) or later, each partition holding every memory ``view`` shows in it at any time."""
        if connection.in_atomic_block:  # may roll back: nothing read here is kept
            return Vectors([self._private(name, view) for name in namespaces], [])
        with self.lock:
            self._poll(space)
            if any(name not in self.partitions for name in namespaces):
                # Room first: the process holds the budget, not the budget and what it is about to read (at most
                # the revisions of the view, which holds the memories of the namespaces asked for).
                self._evict(keep=set(namespaces), reading=held_bytes(len(view.columns.revision), space.dim))
            found, loads = [], []
            for name in namespaces:
                partition = self.partitions.get(name)
                if partition is None:
                    partition, load = self._load(name, view)
                    loads.append(load)
                _follow_moves(partition, name, view, through=self.through)
                self.partitions.move_to_end(name)
                found.append(partition.stored)
            metrics.VECTOR_PARTITION_BYTES.set(self._evict(keep=set(namespaces)))
            if loads:  # a read leaves its chunks' pages in the heap, and what it evicted
                heap.return_freed()
            return Vectors(found, loads)

    def _poll(self, space: vectors.EmbeddingSpace) -> None:
        """Bring the partitions up to ``space`` or later: append what was written since, or start over."""
        if self.state is not None and self.state[1] == space.embedder and space.generation <= self.state[0]:
            return  # generations only grow: rows added since have ids the caller's view lacks
        if self.state is not None and self.state[1] == space.embedder:
            state, rows, namespaces = vectors.poll_vectors(after_id=self.through)
            if state == (self.state[0] + len(rows.ids), self.state[1]):
                for name, partition in self.partitions.items():
                    mine = np.array(
                        [
                            where == name or memory in partition.members
                            for where, memory in zip(namespaces, rows.memories)
                        ],
                        dtype=bool,
                    )
                    if mine.any():
                        partition.append(vectors.VectorRows(rows.ids[mine], rows.memories[mine], rows.matrix[mine]))
                self.state, self.through = state, max(self.through, int(rows.ids[-1]) if len(rows.ids) else 0)
                return
        # First use, or something else changed (an erasure, a backfill, a switch): start over.
        self.partitions.clear()
        self.state, self.through = vectors.vector_state()

    def _load(self, name: str, view) -> tuple[Partition, Load]:
        started = time.perf_counter()
        partition = Partition(vectors.namespace_vectors(name, up_to_id=self.through))
        _follow_moves(partition, name, view, through=self.through)
        self.partitions[name] = partition
        seconds = time.perf_counter() - started
        metrics.VECTOR_PARTITION_LOADS.inc()
        metrics.VECTOR_PARTITION_LOAD_SECONDS.inc(seconds)
        return partition, Load(name, len(partition.stored.ids), seconds)

    def _evict(self, *, keep: set[str], reading: int = 0) -> int:
        """Drop partitions, least recently used first, while they hold more than the budget less the bytes about to
        be read (never those in use); return the bytes the rest hold."""
        budget = settings.MEMORY_VECTOR_MEMORY_MB * 1024 * 1024 - reading
        held = sum(partition.nbytes for partition in self.partitions.values())
        for name in list(self.partitions):
            if held <= budget:
                break
            if name not in keep:
                held -= self.partitions.pop(name).nbytes
                metrics.VECTOR_PARTITION_EVICTIONS.inc()
        return held

    def _private(self, name: str, view) -> Stored:
        """The vectors of ``name`` read now, for a caller inside a transaction; kept by nobody."""
        _, through = vectors.vector_state()
        partition = Partition(vectors.namespace_vectors(name, up_to_id=through), packing=False)
        _follow_moves(partition, name, view, through=through)
        return partition.stored


def _follow_moves(partition: Partition, name: str, view, *, through: int) -> None:
    """Add to ``name``'s partition the memories ``view`` shows in it at some time that it lacks (they moved away)."""
    if view.attributes is None or view.attributes_max_id <= partition.attributes_seen:
        return
    if name in view.namespaces:
        attributes = view.attributes
        newer = (attributes.id > partition.attributes_seen) & (attributes.namespace == view.namespaces.index(name))
        missing = set(attributes.memory[newer].tolist()) - partition.members
        if missing:
            rows = vectors.memory_vectors(missing, up_to_id=through)
            fresh = ~np.isin(rows.ids, partition.stored.ids)
            partition.append(vectors.VectorRows(rows.ids[fresh], rows.memories[fresh], rows.matrix[fresh]))
            partition.members.update(missing)
    partition.attributes_seen = view.attributes_max_id


_copies: dict[str, VectorCopy] = {}
_copies_lock = threading.Lock()


def namespace_vectors(view, namespaces) -> Vectors | None:
    """This process's vectors of ``namespaces`` (None: every namespace ``view`` knows), up to date; None when
    nothing has been embedded yet.

    Raises Unavailable when the model cannot load or the stored vectors come from another model.
    """
    embedder = get_embedder()
    if not embedder.available():
        raise Unavailable(f"the embedding model cannot load: {embedder.load_error}")
    space = vectors.current_space()
    if space is None:
        return None
    if not space.holds(embedder):
        raise Unavailable(
            f"the stored vectors come from {space.embedder}, not the configured {embedder.name}; "
            "run 'manage.py backfill --reembed'"
        )
    with _copies_lock:
        copy = _copies.setdefault(dialect.database_key(), VectorCopy())
    names = list(view.namespaces) if namespaces is None else sorted(set(namespaces))
    return copy.current(space, view, names)


def embed(text_to_vector) -> np.ndarray:
    """``text_to_vector(embedder)``, raising Unavailable when the model fails."""
    try:
        return np.asarray(text_to_vector(get_embedder()), dtype=np.float32)
    except EmbedderUnavailable as error:
        raise Unavailable(str(error)) from None


class Cosines:
    """The cosine of one vector with each row of a view: NaN where a revision has no vector (yet) or sits
    outside the namespaces scanned.

    With ``compact_scan``, the packed rows of each partition are scanned as int8 first: ``upper``
    (float32 per row, NaN where no vector) then holds the most each row's cosine can be, the
    cosine itself where it is known, and ``values`` holds a packed row's cosine only once
    ``exact`` has worked it out.
    """

    def __init__(self, view, scanned: Vectors, vector: np.ndarray, *, compact_scan: bool = False):
        size = len(view.columns.revision)
        self.view, self.vector, self.loads = view, vector, scanned.loads
        self.values = np.full(size, np.nan)
        masks = [_placement(view, stored)[2] for stored in scanned.parts]
        self.has_vector = masks[0] if len(masks) == 1 else np.logical_or.reduce([np.zeros(size, dtype=bool), *masks])
        self.packed = [stored for stored in scanned.parts if compact_scan and stored.blocks]
        self.upper = None
        for stored in self.packed:
            bounds = np.empty(stored.packed + 1, dtype=np.float32)
            bounds[-1] = np.nan  # the bound of a view row with no vector here (-1)
            compact.upper(stored.blocks, vector, out=bounds[:-1])
            found = bounds[_packed_sources(view, stored)]
            self.upper = found if self.upper is None else np.fmax(self.upper, found)
        for stored in scanned.parts:
            start = stored.packed if compact_scan else 0
            sources, rows = _unpacked(view, stored, start)
            self.values[rows] = found = dots(stored.matrix[start:], vector)[sources - start]
            if self.upper is not None:
                self.upper[rows] = found

    def exact(self, rows: np.ndarray) -> np.ndarray:
        """The float32 cosine of each of ``rows`` (NaN where none), worked out where only the compact scan had it."""
        missing = rows[np.isnan(self.values[rows])]
        for stored in self.packed:
            packed = stored.packed
            sources = _packed_sources(self.view, stored)[missing]
            inside = sources >= 0
            if np.count_nonzero(inside) > packed * WHOLE_SCAN_SHARE:
                every, at, _ = _placement(self.view, stored)
                kept = every < packed
                self.values[at[kept]] = dots(stored.matrix[:packed], self.vector)[every[kept]]
            elif inside.any():
                self.values[missing[inside]] = dots(stored.matrix[sources[inside]], self.vector)
        return self.values[rows]


def _placement(view, stored: Stored) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Which stored vectors the view holds (their positions), the view rows they land in, and a mask of those rows.

    Kept per view and stored ids, which stay the same objects between writes.
    """

    def placement():
        sources = np.flatnonzero(stored.ids <= view.max_id)
        rows = view.position[stored.ids[sources]]
        held = rows >= 0  # the position of an id the view lacks is -1
        has_vector = np.zeros(len(view.columns.revision), dtype=bool)
        has_vector[rows[held]] = True
        return sources[held], rows[held], has_vector

    return view.visible_memo(stored.ids, "vector placement", placement)


def _unpacked(view, stored: Stored, start: int) -> tuple[np.ndarray, np.ndarray]:
    """Which of ``stored``'s vectors from ``start`` on the view holds (their positions), and the rows they land in."""
    sources, rows, _ = _placement(view, stored)
    if not start:
        return sources, rows

    def unpacked():
        tail = sources >= start
        return sources[tail], rows[tail]

    return view.visible_memo(stored.ids, ("unpacked", start), unpacked)


def _packed_sources(view, stored: Stored) -> np.ndarray:
    """Per view row, the position of its vector among ``stored``'s packed rows (-1: none there)."""

    def sources():
        sources, rows, _ = _placement(view, stored)
        found = np.full(len(view.columns.revision), -1, dtype=np.int64)
        packed = sources < stored.packed
        found[rows[packed]] = sources[packed]
        return found

    return view.visible_memo(stored.ids, ("packed sources", stored.packed), sources)
