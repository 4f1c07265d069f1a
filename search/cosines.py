"""The cosine of a vector with every revision a view holds, from this process's copy of the stored vectors.

Each process keeps the database's vectors as one float32 matrix in revision-id order
(``VectorCopy``), loaded on first use and extended with the rows written since; an
erasure, a backfill or a switch of embedder reloads it. A scan sums each row's products
with ``einsum``, the same way wherever the row sits, so a revision's cosine is the same
to the bit whatever else the store holds: a recall as of an earlier time ranks exactly
as a store holding only what was visible then would.
"""

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import numpy as np
from django.db import connection

from memoryproject import dialect
from search import vectors
from search.embeddings import EmbedderUnavailable, get_embedder
from search.errors import Unavailable

# From this many rows a scan is split between the calling thread and a helper.
_SPLIT_MIN_ROWS = 16_384
_helper = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cosine-scan")


class Stored(NamedTuple):
    """One database's vectors as this process holds them: revision ids (ascending) and unit float32 rows."""

    ids: np.ndarray
    matrix: np.ndarray


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


_EMPTY = Stored(np.zeros(0, dtype=np.int64), np.zeros((0, 0), dtype=np.float32))


class VectorCopy:
    """The stored vectors of one database, kept in this process and brought up to date before each use."""

    def __init__(self):
        self.lock = threading.Lock()
        self.state = None  # (generation, embedder) of the space the rows were read at
        self.stored = _EMPTY
        # ``stored`` holds the first rows of these; new rows are written after them, so a
        # write costs its own rows, not a copy of the matrix. Views taken earlier hold
        # shorter prefixes and never see a row change.
        self.room = self.stored

    def current(self, space: vectors.EmbeddingSpace) -> Stored:
        """The stored vectors as of ``space`` (the recorded space the caller read) or later."""
        with self.lock:
            stored = self.stored
            if self.state is not None and self.state[1] == space.embedder and space.generation <= self.state[0]:
                return stored  # generations only grow: rows added since have ids the caller's view lacks
            after = (
                int(stored.ids[-1])
                if self.state is not None and self.state[1] == space.embedder and len(stored.ids)
                else None
            )
            # Read with the space in one statement, so both are one state of the database.
            state, ids, matrix = vectors.load_vectors(after_id=after or 0)
            if after is not None and state == (self.state[0] + len(ids), self.state[1]):
                if connection.in_atomic_block:  # may roll back: a private copy, never the shared room
                    return Stored(np.concatenate([stored.ids, ids]), np.concatenate([stored.matrix, matrix]))
                stored = self._append(ids, matrix)
            else:  # first use, or something else changed (an erasure, a backfill, a switch): start over
                if after is not None:
                    state, ids, matrix = vectors.load_vectors(after_id=0)
                if connection.in_atomic_block:
                    return Stored(ids, matrix)
                self.stored = self.room = _EMPTY
                stored = self._append(ids, matrix)  # with room to grow, so the next write copies nothing
            self.stored, self.state = stored, state
            return stored

    def _append(self, ids: np.ndarray, matrix: np.ndarray) -> Stored:
        count, added = len(self.stored.ids), len(ids)
        if count + added > len(self.room.ids) or self.room.matrix.shape[1:] != matrix.shape[1:]:
            capacity = count + added + max(4096, count // 8)
            room = Stored(np.empty(capacity, dtype=np.int64), np.empty((capacity, matrix.shape[1]), np.float32))
            if count:
                room.ids[:count], room.matrix[:count] = self.stored.ids, self.stored.matrix
            self.room = room
        self.room.ids[count : count + added], self.room.matrix[count : count + added] = ids, matrix
        return Stored(self.room.ids[: count + added], self.room.matrix[: count + added])


_copies: dict[str, VectorCopy] = {}
_copies_lock = threading.Lock()


def stored_vectors() -> Stored | None:
    """This process's copy of the stored vectors, up to date; None when nothing has been embedded yet.

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
    stored = copy.current(space)
    return stored if len(stored.ids) else None


def embed(text_to_vector) -> np.ndarray:
    """``text_to_vector(embedder)``, raising Unavailable when the model fails."""
    try:
        return np.asarray(text_to_vector(get_embedder()), dtype=np.float32)
    except EmbedderUnavailable as error:
        raise Unavailable(str(error)) from None


class Cosines:
    """The cosine of one vector with each row of a view: NaN where a revision has no vector (yet)."""

    def __init__(self, view, stored: Stored, vector: np.ndarray):
        sources, rows, self.has_vector = _placement(view, stored)
        self.values = np.full(len(view.columns.revision), np.nan)
        self.values[rows] = dots(stored.matrix, vector)[sources]


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
