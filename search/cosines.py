"""The cosine of a query vector with every stored vector a view can see: exact wherever it is used.

Each process keeps the database's vectors as a float32 matrix (``_VectorCopy``,
refreshed like the snapshot) and beside it an int8 copy: every row divided by its own
scale (its largest component over 127) and rounded. On a large store
(``QUANTIZED_MIN_ROWS``) a ``Cosines`` scans the int8 copy, a quarter of the bytes,
and has for every row an approximate cosine with a proven bound on its error; the
float32 cosine is then computed only for the rows whose bounds leave an answer open:
the best rows of a semantic recall, the rows near a near-duplicate threshold, the
rows whose fused score may reach a hybrid recall's top (``engine._fuse_bounded``).
Those answers are the ones a full float32 scan gives, to the last bit: every cosine
is summed the same way wherever its row sits (``float32_dots``). A full scan
(``dense``) still serves explain's vector ranks and RRF, and a recall that asks for
the cosines of many rows.

The bound. A stored row v has codes w and scale s, the query q has codes u and scale
t, and u.w is an exact integer (int8 products summed in int32). Since
q.v - t s (u.w) = q.(v - s w) + (q - t u).(s w), Cauchy-Schwarz gives

    |q.v - t s (u.w)| <= |q| |v - s w| + |q - t u| |s w|

and the float32 dot product the exact path computes is within d 2^-24 |q| |v| of q.v
(the classic rounding bound for a sum of d products), which is added twice over as
a margin (it also covers, by many orders, the float64 rounding of the bound itself).

The head. Each row's codes are kept in two parts: the first third of the components
(``head``) and the rest (``tail``); the full scan sums both products, exactly. A
near-duplicate check wants only the rows whose cosine may reach a high threshold
(0.90 by default), and for that the head suffices: u.w <= u_h.w_h + |u_t| |w_t|
(Cauchy-Schwarz on the tails), so ``head_open`` bounds every row from a third of the
bytes, and the float32 cosine is computed only for the few rows it leaves open. Where
it leaves many (1M hash-embedder rows: ~8%), their tail products are added first,
which gives exactly the full bound for those rows at a sixth of the bytes of their
float32 rows.

The sketch. On a large store the head gives way to a tighter bound from fewer bytes.
Sentence embeddings keep most of their length in a few directions: the first 48
principal directions of 129k MiniLM rows hold 70% of their squared length (the
benchmark corpus's hash-embedder rows: 80%). With P those directions as orthonormal
rows (``sketch_basis``, from a sample of the stored rows), z = P v and the residual
v - P^T z, the query's y = P q and q - P^T y,

    q.v = y.z + (q - P^T y).(v - P^T z) <= y.z + |q - P^T y| |v - P^T z|

and y.z is bounded from z's int8 codes as the full product is above (with |y| <= |q|).
Each row keeps its sketch codes, their scale and slack (the codes' error plus the
float32 margin, and 2^-30 per component for P's rows being orthonormal only to the
last bits) and its residual's length. At 0.90, on those MiniLM rows, it left open 0 rows
at p50 and 10 at p95 (the head: 2 and 78, before the int8 slack) from 48 codes a row
instead of 128; on 100k hash-embedder rows, 90 at p50 (the head: 3,134). The rows it
leaves open, when many, get the full int8 bound.
"""

import os
import threading
from concurrent import futures
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import numpy as np
from django.conf import settings
from django.db import connection

from search import vectors
from search.embeddings import EmbedderUnavailable, configured_torch, get_embedder
from search.errors import Unavailable

# Below this many stored vectors the float32 scan is as quick as the int8 scan plus its
# bookkeeping (benchmarks/int8_scan.py: at 16k rows 0.51 ms against 0.67 for the int8
# top 200, at 32k 1.8 against 1.5).
QUANTIZED_MIN_ROWS = 32_768
# Above this many rows and this many codes, the int8 scan is split between the calling
# thread and one helper (with one torch thread, MEMORY_TORCH_THREADS; with more, torch's
# own threads split it). A sketch's product (48 columns) stays whole at 129k rows: it took
# 0.5 ms on one thread, and split beside a write's inserts 1.5-1.65 ms, the helper's half
# starting ~0.3-1 ms late.
_SPLIT_MIN_ROWS = 65_536
_SPLIT_MIN_CODES = 65_536 * 128
# Once a recall has asked for the cosines of more rows than one in this many, one full
# scan computes the rest (a gathered row cost ~4 times a scanned one with BLAS: 0.29 us
# against 0.074; not re-measured with einsum, which float32_dots now uses for both).
_GATHER_SHARE = 8
# When the head codes leave more rows than this open, their full int8 bounds are computed
# before any float32 row is gathered (see ``head_open``). At 100k hash-embedder rows,
# 256, 1024 and 4096 gave the same mean check (4.1-4.2 ms, against 5.4 never refining).
_REFINE_MIN_ROWS = 4096
# From this many rows, ``float32_dots`` splits its rows between two threads (at 13k rows
# two threads took 0.84 ms against 0.81 for one; at 30k, 1.3 against 3.1).
_DOTS_SPLIT_MIN_ROWS = 16_384
# Rows quantized per step, to bound the float64 temporaries when a large store loads.
_QUANTIZE_CHUNK = 16_384
# The sketch (see the module): its directions come from an even sample of this many rows
# (a 384 x 384 Gram matrix and its eigenvectors: 48-101 ms at 129k MiniLM rows), and only
# from this many rows on; they are worked out again each time the rows have doubled.
_SKETCH_SAMPLE = 8192
_SKETCH_SAMPLE_MIN = 1024
# Below this share of the rows' squared length along its directions, no sketch is kept.
# 48 directions held 0.70 of it for 129k MiniLM rows of the benchmark corpus, 0.80 for
# its hash-embedder rows.
SKETCH_MIN_ENERGY = 0.5
# Relative pads of the sketch's bound (see the module): far above the float64 roundings
# they cover, far below anything that would open a row.
_PAD = 2.0 ** -40
_MARGIN = 2.0 ** -23 + 2.0 ** -30  # per component: the float32 dot product's rounding, twice over, and more


class Stored(NamedTuple):
    """One database's vectors as this process holds them, in revision-id order.

    Every field but ``basis`` has one entry per row (``rows()``). The sketch columns hold
    zeros, and ``basis`` is None, until a basis has been worked out (``sketch_basis``).
    """

    ids: np.ndarray  # int64 revision ids
    matrix: np.ndarray  # float32 (n, dim): unit rows, the model's output
    head: np.ndarray  # int8 (n, head_width(dim)): the first components of each row over its scale, rounded
    tail: np.ndarray  # int8 (n, dim - head_width(dim)): the rest of them
    scale: np.ndarray  # float64: the row's largest |component| / 127 (1 for an all-zero row)
    error: np.ndarray  # float64: |row - scale * codes| plus the float32 rounding margin
    size: np.ndarray  # float64: |scale * codes|
    tail_size: np.ndarray  # float64: |tail codes| (integers, unscaled)
    sketch: np.ndarray  # int8 (n, k): the row's coordinates z = basis @ row over their scale, rounded (k = 0: none)
    sketch_scale: np.ndarray  # float64: the largest |z| / 127 (1 when z is zero)
    sketch_slack: np.ndarray  # float64: |z - sketch_scale * codes| plus the rounding margins (see the module)
    sketch_size: np.ndarray  # float64: |sketch_scale * codes|
    residual: np.ndarray  # float64: |row - basis.T @ z|, the part of the row the sketch leaves out (padded)
    basis: np.ndarray | None  # float64 (k, dim), orthonormal rows, one for every row; None: no sketch

    def rows(self) -> tuple[np.ndarray, ...]:
        """The fields with one entry per row (all but ``basis``)."""
        return self[:-1]


def head_width(dim: int) -> int:
    """How many leading components of a row the head holds: a third (with fewer than 24, all of them).

    A third of MiniLM's 384 leaves open 0.2% of the rows at a 0.90 threshold (LoCoMo turns,
    before the int8 slack; 1.1% with 96 components) and 1.3% of the benchmark corpus's
    hash-embedder rows; its product takes 0.60 ms against 3.3 for all 384 (128k rows).
    """
    return dim // 3 if dim >= 24 else dim


def sketch_width(dim: int) -> int:
    """How many principal directions a row's sketch keeps: an eighth of its components (none under 256).

    Measured at 384 (MiniLM's width). With 64 components, 8 directions ruled out fewer rows
    than the head's 21 (tests/test_cosines.py's low-rank rows), so narrow rows keep the head.
    """
    return dim // 8 if dim >= 256 else 0


def sketch_basis(matrix: np.ndarray) -> np.ndarray | None:
    """The ``sketch_width`` directions that hold most of the rows' squared length, as orthonormal rows.

    From an even sample of up to _SKETCH_SAMPLE rows (the eigenvectors of their Gram
    matrix, not centred: the bound is on dot products, not on spread). None when the
    rows are too few or the directions hold less than SKETCH_MIN_ENERGY of it (the
    sketch would then rule out too few rows to pay for itself).
    """
    width = sketch_width(matrix.shape[1])
    if not width or len(matrix) < _SKETCH_SAMPLE_MIN:
        return None
    sample = matrix[::max(1, len(matrix) // _SKETCH_SAMPLE)][:_SKETCH_SAMPLE].astype(np.float64)
    values, vectors = np.linalg.eigh(sample.T @ sample)
    total = float(np.sum(values))
    if total <= 0 or float(np.sum(values[-width:])) < SKETCH_MIN_ENERGY * total:
        return None
    return np.ascontiguousarray(vectors[:, ::-1][:, :width].T)


def _empty(dim: int) -> Stored:
    head = head_width(dim)
    return Stored(np.zeros(0, dtype=np.int64), np.zeros((0, dim), dtype=np.float32),
                  np.zeros((0, head), dtype=np.int8), np.zeros((0, dim - head), dtype=np.int8),
                  np.zeros(0), np.zeros(0), np.zeros(0), np.zeros(0),
                  np.zeros((0, 0), dtype=np.int8), np.zeros(0), np.zeros(0), np.zeros(0), np.zeros(0), None)


def _sketch_rows(exact: np.ndarray, basis: np.ndarray | None) -> tuple[np.ndarray, ...]:
    """Return (sketch, sketch_scale, sketch_slack, sketch_size, residual) of float64 rows (see ``Stored``)."""
    count = len(exact)
    if basis is None:
        return np.zeros((count, 0), dtype=np.int8), *(np.zeros(count) for _ in range(4))
    sketch = exact @ basis.T
    scale = np.max(np.abs(sketch), axis=1, initial=0.0) / 127.0
    scale[scale == 0] = 1.0
    codes = np.rint(sketch / scale[:, None])
    rounded = codes * scale[:, None]
    squared = np.einsum("ij,ij->i", exact, exact)
    # |row - basis.T z|^2 = |row|^2 - |z|^2 for orthonormal rows; the pad covers their last bits.
    residual = np.sqrt(np.maximum(squared - np.einsum("ij,ij->i", sketch, sketch), 0.0) + _PAD * squared)
    slack = np.linalg.norm(sketch - rounded, axis=1) + _MARGIN * exact.shape[1] * np.sqrt(squared)
    return np.ascontiguousarray(codes, dtype=np.int8), scale, slack, np.linalg.norm(rounded, axis=1), residual


def _quantize_rows(rows: np.ndarray, basis: np.ndarray | None) -> tuple[np.ndarray, ...]:
    """Return the per-row fields of ``Stored`` after ids and matrix, for float rows."""
    exact = rows.astype(np.float64)
    scale = np.max(np.abs(exact), axis=1, initial=0.0) / 127.0
    scale[scale == 0] = 1.0  # an all-zero row: zero codes, no error
    codes = np.rint(exact / scale[:, None])
    rounded = codes * scale[:, None]
    margin = 2.0 * rows.shape[1] * 2.0 ** -24 * np.linalg.norm(exact, axis=1)
    error = np.linalg.norm(exact - rounded, axis=1) + margin
    head = head_width(rows.shape[1])
    return (np.ascontiguousarray(codes[:, :head], dtype=np.int8), np.ascontiguousarray(codes[:, head:], dtype=np.int8),
            scale, error, np.linalg.norm(rounded, axis=1), np.linalg.norm(codes[:, head:], axis=1),
            *_sketch_rows(exact, basis))


def quantize(ids: np.ndarray, matrix: np.ndarray, basis: np.ndarray | None = None) -> Stored:
    """Return ``Stored`` for these ids and float32 rows, quantizing a chunk at a time, sketched along ``basis``."""
    if len(ids) == 0:
        return _empty(matrix.shape[1])._replace(basis=basis)
    parts = [_quantize_rows(matrix[start:start + _QUANTIZE_CHUNK], basis)
             for start in range(0, len(ids), _QUANTIZE_CHUNK)]
    return Stored(ids, matrix, *(np.concatenate(column) for column in zip(*parts)), basis)


_SKETCH_FIELDS = ("sketch", "sketch_scale", "sketch_slack", "sketch_size", "residual")


def sketched(stored: Stored, basis: np.ndarray | None) -> Stored:
    """``stored`` with every row sketched along ``basis`` (new sketch arrays; the others shared)."""
    parts = [_sketch_rows(stored.matrix[start:start + _QUANTIZE_CHUNK].astype(np.float64), basis)
             for start in range(0, len(stored.ids), _QUANTIZE_CHUNK)] or [_sketch_rows(np.zeros((0, 1)), None)]
    return stored._replace(basis=basis, **{name: np.concatenate(column) for name, column in zip(_SKETCH_FIELDS,
                                                                                               zip(*parts))})


class _VectorCopy:
    """The stored vectors of one database, in this process, refreshed like the snapshot."""

    def __init__(self):
        self.lock = threading.Lock()
        self.generation = None
        self.embedder = None
        self.stored = _empty(0)
        # ``stored`` holds the first rows of these arrays; the rest is room to append into.
        self.room = self.stored
        self.sketched_rows = 0  # the row count when the sketch's basis was last worked out

    def current(self, space) -> Stored:
        """The stored vectors as of ``space`` (the recorded space the caller read) or later."""
        with self.lock:
            stored = self.stored
            if space.embedder == self.embedder and self.generation is not None:
                if space.generation <= self.generation:
                    # Generations only grow. A caller that read the space before another
                    # thread brought this copy further (a recall that was embedding meanwhile)
                    # is served by it: the newer rows have ids its view lacks (``_placement``).
                    return stored
                after = int(stored.ids[-1]) if len(stored.ids) else 0
            else:
                after = None
            # The space as the rows' own statement read it: compared with the caller's, a write
            # landing in between looked like an erasure and reloaded every row (~1 s at 130k).
            state, ids, matrix = vectors.load_vectors(after_id=after or 0)
            if after is not None and state == (self.generation + len(ids), self.embedder):
                new = quantize(ids, matrix, stored.basis)
                if not connection.in_atomic_block:
                    stored = self._append(new)
                    if len(stored.ids) >= max(QUANTIZED_MIN_ROWS, 2 * self.sketched_rows):
                        stored = self._sketch_again(stored)
                else:  # may roll back: a private copy, never the shared room
                    stored = Stored(*(np.concatenate([old, added]) for old, added in zip(stored.rows(), new.rows())),
                                    stored.basis)
            else:  # first use, or something else changed (an erasure, a backfill, a switch): start over
                if after:
                    state, ids, matrix = vectors.load_vectors(after_id=0)
                basis = sketch_basis(matrix) if len(ids) >= QUANTIZED_MIN_ROWS else None
                stored = quantize(ids, matrix, basis)
                if not connection.in_atomic_block:
                    self.sketched_rows = len(ids) if len(ids) >= QUANTIZED_MIN_ROWS else 0
            if not connection.in_atomic_block:
                if stored.ids.base is not self.room.ids:  # loaded afresh: it is its own room
                    self.room = stored
                self.stored = stored
                self.generation, self.embedder = state or (None, None)
            return stored

    def _append(self, new: Stored) -> Stored:
        """Return the rows plus new ones, written into the room past them (growing it by an eighth when full).

        Concatenating copied the whole matrix on every write (190 MB at 131k rows, 56 ms;
        storage_micro.py). Views handed out earlier cover only rows before the room, so
        writing there changes none.
        """
        count, added = len(self.stored.ids), len(new.ids)
        if (count + added > len(self.room.ids) or self.room.matrix.shape[1:] != new.matrix.shape[1:]
                or self.room.sketch.shape[1:] != new.sketch.shape[1:]):
            capacity = count + added + max(4096, count // 8)
            self.room = Stored(*(np.empty((capacity,) + column.shape[1:], dtype=column.dtype)
                                 for column in new.rows()), new.basis)
            for room, old in zip(self.room.rows(), self.stored.rows()):
                room[:count] = old
        for room, column in zip(self.room.rows(), new.rows()):
            room[count:count + added] = column
        return Stored(*(room[:count + added] for room in self.room.rows()), self.room.basis)

    def _sketch_again(self, stored: Stored) -> Stored:
        """The rows sketched along a basis worked out from them all, now that they have doubled (or first reach
        QUANTIZED_MIN_ROWS): the directions of the first rows may not be those of the later ones.

        The new sketch columns are new arrays (with the room's capacity): views handed out
        earlier keep theirs, with the basis they were made with. At 129k MiniLM rows the
        basis took 48-101 ms and projecting every row ~0.1 s more (parts timed apart, not
        the whole), once per doubling.
        """
        self.sketched_rows = len(stored.ids)
        basis = sketch_basis(stored.matrix)
        if basis is None and stored.basis is None:
            return stored
        fresh = sketched(stored, basis)
        capacity, count = len(self.room.ids), len(stored.ids)
        columns = {}
        for name in _SKETCH_FIELDS:
            column = getattr(fresh, name)
            columns[name] = np.empty((capacity,) + column.shape[1:], dtype=column.dtype)
            columns[name][:count] = column
        self.room = self.room._replace(basis=basis, **columns)
        return Stored(*(room[:count] for room in self.room.rows()), basis)


_vector_copies: dict[str, _VectorCopy] = {}
_vector_copies_lock = threading.Lock()
_int8_scan_failed: str | None = None
# Embeddings run on the pending-vector helpers while the recall or write that asked goes
# on (``PendingVector``); one per concurrent request, up to this many (more wait for one).
_VECTOR_HELPERS = 8


def _start_helpers() -> None:
    """The helper threads' pools: at import, and again in a forked child, whose copies of them have no threads."""
    global _scan_helper, _vector_helpers
    _scan_helper = ThreadPoolExecutor(max_workers=1, thread_name_prefix="int8-scan")
    _vector_helpers = ThreadPoolExecutor(max_workers=_VECTOR_HELPERS, thread_name_prefix="pending-vector")


_start_helpers()
# A pool copied by fork counts its parent's threads as its own, so work given to it would never run.
os.register_at_fork(after_in_child=_start_helpers)


def _integer_dots(parts: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray | None:
    """Return the sum of codes @ query_codes over ``parts`` (each the same rows' components), exact in int32.

    torch's int8 matrix product; None if it cannot run here. A sum stays below
    dim * 127^2, far from int32's limit.
    """
    global _int8_scan_failed
    if _int8_scan_failed is not None:
        return None
    rows = len(parts[0][0])
    parts = [(codes, query_codes) for codes, query_codes in parts if codes.shape[1]]
    if not parts:
        return np.zeros(rows, dtype=np.int32)
    if any(codes.shape[1] < 2 for codes, _ in parts):
        return None  # torch's CPU product of one column returns memory it never wrote (torch 2.13)
    try:
        def dots(start, stop):
            torch = configured_torch()  # in the thread that runs the product (see configured_torch)
            total = None
            for codes, query_codes in parts:
                # Rows times a column: 1.35-2.8x quicker than the query row times the codes
                # transposed (129k rows, one thread: 384 columns 4.9 against 7.7 ms, 128 columns
                # 1.9 against 2.7, 48 columns 0.54 against 1.1).
                part = torch._int_mm(torch.from_numpy(codes[start:stop]),
                                     torch.from_numpy(query_codes.reshape(-1, 1)))[:, 0]
                total = part if total is None else total.add_(part)
            return total.numpy()

        codes_count = rows * sum(codes.shape[1] for codes, _ in parts)
        # With more torch threads, torch splits it.
        if rows < _SPLIT_MIN_ROWS or codes_count < _SPLIT_MIN_CODES or settings.MEMORY_TORCH_THREADS > 1:
            return dots(0, rows)
        half = rows // 2
        other = _scan_helper.submit(dots, half, rows)
        return np.concatenate([dots(0, half), other.result()])
    except Exception as error:  # an older or stripped torch: the float32 scan still answers exactly
        _int8_scan_failed = f"{type(error).__name__}: {error}"
        return None


def float32_dots(rows: np.ndarray, query: np.ndarray) -> np.ndarray:
    """``rows @ query`` in float32, each row's products summed the same way wherever the row sits.

    BLAS blocks rows by their position, so a row's last bit could differ between a full
    scan and a scan of a few rows (1 in ~200 did, tested on 50k rows): cosines that tie
    would tie or not by accident. einsum sums every row alike; split in two threads it
    takes ~1.1-1.4x BLAS's time on a full scan (10.7-10.9 ms against 7.7-9.9 at 135k rows;
    at 13k rows 0.81 ms against 0.35).
    """
    if len(rows) < _DOTS_SPLIT_MIN_ROWS:
        return np.einsum("ij,j->i", rows, query)
    half = len(rows) // 2
    dots = np.empty(len(rows), dtype=np.result_type(rows, query))
    other = _scan_helper.submit(np.einsum, "ij,j->i", rows[half:], query, out=dots[half:])
    np.einsum("ij,j->i", rows[:half], query, out=dots[:half])
    other.result()
    return dots


class _Query(NamedTuple):
    """A query vector quantized as the stored rows are (see the module)."""

    head: np.ndarray  # int8 codes of the head components
    tail: np.ndarray  # int8 codes of the rest
    tail_size: float  # |tail codes|
    scale: float
    norm: float  # |q|
    error: float  # |q - scale * codes|


def _quantized_query(stored: Stored, query: np.ndarray) -> _Query:
    exact = query.astype(np.float64)
    scale = float(np.max(np.abs(exact), initial=0.0)) / 127.0 or 1.0
    codes = np.rint(exact / scale)
    head = stored.head.shape[1]
    return _Query(codes[:head].astype(np.int8), codes[head:].astype(np.int8), float(np.linalg.norm(codes[head:])),
                  scale, float(np.linalg.norm(exact)), float(np.linalg.norm(exact - codes * scale)))


def bounds(stored: Stored, query: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Per stored row, a lower and an upper bound on its float32 cosine with ``query``, from the int8 scan.

    None when the int8 product cannot run in this process. See the module for the bound.
    """
    coded = _quantized_query(stored, query)
    dots = _integer_dots([(stored.head, coded.head), (stored.tail, coded.tail)])
    if dots is None:
        return None
    # dots * (scale * t) and norm * error + error_q * size (see the module), computed in place:
    # the same operations on the same numbers as head_open's, three fewer passes over every row.
    approximate = stored.scale * coded.scale
    approximate *= dots
    slack = stored.error * coded.norm
    slack += stored.size * coded.error
    upper = approximate + slack
    approximate -= slack
    return approximate, upper


def head_open(stored: Stored, query: np.ndarray, least: float, *,
              refine_over: int | None = None) -> np.ndarray | None:
    """The stored rows (positions, ascending) whose float32 cosine with ``query`` may be ``least`` or more.

    From the head codes first: far looser than ``bounds`` (the tails are bounded by their
    sizes, not multiplied), but at a near-duplicate threshold it rules out almost every
    row in a third of the scan. When it leaves more than ``refine_over`` rows open
    (default ``_REFINE_MIN_ROWS``), their tail products complete the full int8 bound,
    the same upper bound ``bounds`` gives, to the bit. None when the int8 product cannot
    run here.

    Where the rows have a sketch (``Stored.basis``), it is the first bound instead of the
    head: tighter from fewer bytes (see the module). The rows it leaves open, when more
    than ``refine_over``, are kept only where the full int8 bound also reaches ``least``.
    """
    refine_over = _REFINE_MIN_ROWS if refine_over is None else refine_over
    if stored.basis is not None:
        sources = _sketch_open(stored, query, least)
        if sources is not None:
            if len(sources) <= refine_over:
                return sources
            coded = _quantized_query(stored, query)
            if len(sources) > len(stored.ids) // _GATHER_SHARE:
                dots = _integer_dots([(stored.head, coded.head), (stored.tail, coded.tail)])
                dots = None if dots is None else dots[sources]
            else:
                dots = _integer_dots([(stored.head[sources], coded.head), (stored.tail[sources], coded.tail)])
            if dots is None:
                return sources
            # As ``bounds`` computes it: the same operations on the same numbers.
            upper = dots * (stored.scale[sources] * coded.scale) + (
                coded.norm * stored.error[sources] + coded.error * stored.size[sources])
            return sources[upper >= least]
    coded = _quantized_query(stored, query)
    dots = _integer_dots([(stored.head, coded.head)])
    if dots is None:
        return None
    # |u_t| |w_t| is a product of two square roots of exact integer sums, each rounded
    # once; a relative margin far above three roundings keeps the bound a bound. The
    # arithmetic is done in place: over every row it cost more than the product itself.
    upper = stored.tail_size * (coded.tail_size * (1.0 + 2.0 ** -40))
    upper += dots
    upper *= stored.scale
    upper *= coded.scale
    # First with the largest slack of any row, then each survivor with its own: the largest
    # alone left 2.7% of 100k hash-embedder rows open at 0.90, each row's own 1.1%.
    loosest = coded.norm * np.max(stored.error, initial=0.0) + coded.error * np.max(stored.size, initial=0.0)
    sources = np.flatnonzero(upper >= least - loosest)
    slack = coded.norm * stored.error[sources] + coded.error * stored.size[sources]
    keep = upper[sources] + slack >= least
    sources, slack = sources[keep], slack[keep]
    if len(sources) <= refine_over:
        return sources
    # Many left open (1M hash-embedder rows at 0.90: ~8%): multiply their tails too, gathered
    # (a sixth of the bytes of gathering their float32 rows), or every row's when so many are
    # open that a scan costs less than gathering them.
    if len(sources) > len(dots) // _GATHER_SHARE:
        tail_dots = _integer_dots([(stored.tail, coded.tail)])
        tail_dots = None if tail_dots is None else tail_dots[sources]
    else:
        tail_dots = _integer_dots([(stored.tail[sources], coded.tail)])
    if tail_dots is None:
        return sources
    # As ``bounds`` computes it: the same operations on the same numbers.
    upper = (dots[sources] + tail_dots) * (stored.scale[sources] * coded.scale) + slack
    return sources[upper >= least]


def _sketch_open(stored: Stored, query: np.ndarray, least: float) -> np.ndarray | None:
    """The rows (positions, ascending) whose cosine with ``query`` the sketch's bound leaves at ``least`` or more.

    None when the int8 product cannot run here. See the module for the bound.
    """
    exact = query.astype(np.float64)
    coordinates = stored.basis @ exact
    scale = float(np.max(np.abs(coordinates), initial=0.0)) / 127.0 or 1.0
    codes = np.rint(coordinates / scale)
    dots = _integer_dots([(stored.sketch, codes.astype(np.int8))])
    if dots is None:
        return None
    squared = float(exact @ exact)
    norm = np.sqrt(squared) * (1.0 + 2.0 ** -20)  # at least |q|, and |basis @ q| to the last bits
    rest = np.sqrt(max(squared - float(coordinates @ coordinates), 0.0) + _PAD * squared)
    error = float(np.linalg.norm(coordinates - codes * scale))
    upper = dots * stored.sketch_scale
    upper *= scale
    upper += stored.residual * rest
    # First with the largest slack of any row, then each survivor with its own (as in head_open).
    loosest = norm * np.max(stored.sketch_slack, initial=0.0) + error * np.max(stored.sketch_size, initial=0.0)
    sources = np.flatnonzero(upper >= least - loosest)
    keep = upper[sources] + (norm * stored.sketch_slack[sources] + error * stored.sketch_size[sources]) >= least
    return sources[keep]


def _placement(view, stored: Stored) -> tuple[np.ndarray, ...]:
    """Where each stored vector's cosine lands in the view's rows (see Cosines.__init__).

    It depends only on the view and the stored ids, which stay the same objects between
    writes: worked out once per view (2.0 ms at 100k, line profile of the near-duplicate
    check after writes).
    """
    def placement():
        at = np.flatnonzero(stored.ids <= view.max_id)
        rows = view.position[stored.ids[at]]
        keep = rows >= 0  # the position of an id the view lacks is -1
        sources, rows = at[keep], rows[keep]
        source_of_row = np.full(len(view.columns.revision), -1, dtype=np.int64)
        source_of_row[rows] = sources
        row_of_source = np.full(len(stored.ids), -1, dtype=np.int64)
        row_of_source[sources] = rows
        return sources, rows, source_of_row, row_of_source, source_of_row >= 0

    return view.visible_memo(stored.ids, "vector rows", placement)


class Cosines:
    """The cosine of one query vector with each row of a view (NaN where a revision has no vector yet).

    Exact values are computed once per row and kept, so every part of one recall sees
    the same number for a row.
    """

    def __init__(self, view, stored: Stored, query: np.ndarray):
        self.view = view
        self._stored = stored
        self._query = query
        size = len(view.columns.revision)

        self._sources, self._rows, self._source_of_row, self._row_of_source, self.has_vector = _placement(
            view, stored)
        self._size = size
        self._kept_values = self._kept_known = None  # made on first use: a near-duplicate check needs neither
        self._gathered = 0  # rows computed one by one so far
        self._dense = False
        self._quantized = 0 < len(stored.ids) and len(stored.ids) >= QUANTIZED_MIN_ROWS
        self._upper = None
        self._best = None  # (eligible, its best cosine), from the last ``top``

    @property
    def _values(self) -> np.ndarray:
        """Each row's cosine where computed, else NaN."""
        if self._kept_values is None:
            self._kept_values = np.full(self._size, np.nan)
        return self._kept_values

    @_values.setter
    def _values(self, values: np.ndarray) -> None:
        self._kept_values = values

    @property
    def _known(self) -> np.ndarray:
        """Whether a row's cosine has been computed."""
        if self._kept_known is None:
            self._kept_known = np.zeros(self._size, dtype=bool)
        return self._kept_known

    def bounded(self) -> bool:
        """Whether answers may come from the int8 bounds (scanned on first use), not one full float32 scan."""
        if self._dense or not self._quantized:
            return False
        if self._upper is None:
            found = bounds(self._stored, self._query)
            if found is None:
                self._quantized = False
                return False
            self._lower, self._upper = found
        return True

    def dense(self) -> np.ndarray:
        """Every row's cosine, from one float32 scan of all stored vectors (read-only)."""
        if not self._dense:
            scores = float32_dots(self._stored.matrix, self._query)
            values = np.full(self._size, np.nan)
            values[self._rows] = scores[self._sources]  # float32 to float64, exactly
            if self._kept_known is not None:
                values[self._known] = self._values[self._known]  # rows already answered keep their value
            values.flags.writeable = False
            self._values, self._dense = values, True
        return self._values

    def at(self, rows: np.ndarray) -> np.ndarray:
        """The cosines of these rows."""
        if not self._dense:
            missing = rows[~self._known[rows] & self.has_vector[rows]]
            if len(missing) > 1 and not np.all(missing[1:] > missing[:-1]):
                missing = np.unique(missing)  # a row asked for twice in one call is computed once
            self._gathered += len(missing)
            if self._gathered > len(self._stored.ids) // _GATHER_SHARE:
                return self.dense()[rows]  # one scan of every row costs less than gathering so many
            if len(missing):
                self._values[missing] = float32_dots(self._stored.matrix[self._source_of_row[missing]], self._query)
                self._known[missing] = True
        return self._values[rows]

    def bounds_at(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """A lower and an upper bound on these rows' cosines (the cosine itself where computed; NaN without a vector).

        Only once ``bounded()`` has returned True (the bounds stay valid after a full scan).
        """
        sources = self._source_of_row[rows]
        lower, upper = self._lower[sources], self._upper[sources]
        known = self._known[rows]
        lower[known] = upper[known] = self._values[rows[known]]
        absent = ~self.has_vector[rows]
        lower[absent] = upper[absent] = np.nan
        return lower, upper

    def reaching(self, least: float, eligible: np.ndarray) -> np.ndarray:
        """The eligible rows with a vector whose cosine may be ``least`` or more (once ``bounded()`` was True)."""
        rows = self._row_of_source[np.flatnonzero(self._upper >= least)]
        rows = rows[rows >= 0]
        return rows[eligible[rows]]

    def _open(self, rows: np.ndarray, least: float) -> np.ndarray:
        """Those of ``rows`` (all with a vector) whose cosine may be ``least`` or more."""
        return rows[self._upper[self._source_of_row[rows]] >= least]

    def top(self, count: int, eligible: np.ndarray) -> np.ndarray:
        """The eligible rows with a vector and the ``count`` highest cosines, best first (ties: lower memory id)."""
        rows = np.flatnonzero(eligible & self.has_vector)
        if len(rows) > count and self.bounded():
            lower = self._lower[self._source_of_row[rows]]
            # ``count`` rows reach at least this, so no row whose upper bound is below it is among the best.
            least = np.partition(lower, len(lower) - count)[len(lower) - count]
            rows = self._open(rows, least)
        scores = self.at(rows)
        if len(rows) > count:
            # Every row tied with the count-th best stays, so the memory-id tie-break decides among them.
            cut = np.partition(scores, len(scores) - count)[len(scores) - count]
            keep = scores >= cut
            rows, scores = rows[keep], scores[keep]
        order = np.lexsort((self.view.columns.memory[rows], -scores))[:count]
        self._best = (eligible, float(scores[order[0]]) if len(order) else -1.0)
        return rows[order]

    def best(self, eligible: np.ndarray) -> float:
        """The highest cosine among the eligible rows with a vector (-1 when there is none)."""
        if self._best is not None and self._best[0] is eligible:
            return self._best[1]
        if self._dense:
            values = self._values
            return float(np.max(np.where(eligible, values, -np.inf), initial=-1.0, where=self.has_vector))
        if not self.bounded():
            self.top(1, eligible)
            return self._best[1]
        # ``top(1)`` without its partition and second gather (1.3 -> ~0.5 ms at 100k): the
        # best row's cosine is at least the highest lower bound, so only rows whose upper
        # bound reaches that can hold it.
        rows = np.flatnonzero(eligible & self.has_vector)
        if not len(rows):
            return -1.0
        sources = self._source_of_row[rows]
        least = np.max(self._lower[sources])
        best = float(np.max(self.at(rows[self._upper[sources] >= least])))
        self._best = (eligible, best)
        return best

    def at_least(self, least: float, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Those of ``rows`` whose cosine is ``least`` or more, and their cosines.

        Before any full scan, ``head_open`` rules rows out (the sketch or the head codes,
        then the full codes of the rows they leave open): at a near-duplicate threshold
        few stay open. Full int8 bounds already there are used instead. ``rows``: row
        positions, or a mask over the view's rows (``Ready.asked_mask``, made before the vector
        is ready, so that the scan does as little over every row as it can: on a helper
        beside a write's inserts, each such step also waits for the GIL).
        """
        asked = rows if rows.dtype == bool else None
        if asked is None:
            rows = rows[self.has_vector[rows]]
        if self._quantized and self._upper is None and not self._dense:
            sources = head_open(self._stored, self._query, least)
            if sources is not None:
                opened = self._row_of_source[sources]
                if asked is None:
                    asked = asked_mask(self.has_vector, rows)
                rows = opened[(opened >= 0) & asked[np.maximum(opened, 0)]]
                rows.sort()
                if self._kept_values is None and len(rows) <= len(self._stored.ids) // _GATHER_SHARE:
                    # Nothing kept yet: computed as ``at`` computes them (the same numbers), keeping none.
                    scores = float32_dots(self._stored.matrix[self._source_of_row[rows]], self._query).astype(
                        np.float64)
                    keep = scores >= least
                    return rows[keep], scores[keep]
                asked = None
        if asked is not None:
            rows = np.flatnonzero(asked)
        if self._upper is not None:
            rows = self._open(rows, least)
        scores = self.at(rows)
        keep = scores >= least
        return rows[keep], scores[keep]


def asked_mask(has_vector: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """A mask over a view's rows: these rows, where they have a vector (for ``Cosines.at_least``)."""
    asked = np.zeros(len(has_vector), dtype=bool)
    asked[rows] = True
    asked &= has_vector
    return asked


class Ready(NamedTuple):
    """What ``cosines_with`` reads from the database for a view, before the vector is needed (see ``ready``)."""

    view: object
    embedder: object
    stored: Stored

    def asked_mask(self, rows: np.ndarray) -> np.ndarray:
        """``asked_mask`` for this view's rows, before the vector is known (reads no database)."""
        return asked_mask(_placement(self.view, self.stored)[4], rows)

    def with_vector(self, vector_of) -> Cosines:
        """The cosines of ``vector_of(embedder)`` with the view's rows; reads nothing from the database.

        ``vector_of`` is not called when there are no stored vectors. Raises Unavailable
        when it fails.
        """
        if len(self.stored.ids) == 0:
            return Cosines(self.view, self.stored, np.zeros(self.stored.matrix.shape[1], dtype=np.float32))
        try:
            query_vector = vector_of(self.embedder)
        except EmbedderUnavailable as error:
            raise Unavailable(str(error)) from None
        return Cosines(self.view, self.stored, np.asarray(query_vector, dtype=np.float32))


def ready(view, *, space: vectors.EmbeddingSpace | None = None) -> Ready | None:
    """The first half of ``cosines_with``: this process's copy of the stored vectors, placed in the view's rows.

    It reads the database (the recorded space, new vectors), so it runs on the thread
    that owns the connection; ``Ready.with_vector`` then needs none. None when nothing
    has been embedded yet. Raises Unavailable when the model cannot load or the stored
    vectors come from another model. ``space``: the recorded embedding space, when the
    caller has just read it.
    """
    embedder = get_embedder()
    if not embedder.available():
        raise Unavailable(f"the embedding model cannot load: {embedder.load_error}")
    if space is None:
        space = vectors.current_space()
    if space is None or view.columns is None:
        return None
    if not space.holds(embedder):
        raise Unavailable(f"the stored vectors come from {space.embedder}, not the configured {embedder.name}; "
                          "run 'manage.py backfill --reembed'")
    key = str(connection.settings_dict["NAME"])
    with _vector_copies_lock:
        copy = _vector_copies.setdefault(key, _VectorCopy())
    stored = copy.current(space)
    if len(stored.ids):
        _placement(view, stored)  # needs no vector: done while a PendingVector's helper embeds
    return Ready(view, embedder, stored)


def cosines_with(view, vector_of, *, space: vectors.EmbeddingSpace | None = None) -> Cosines | None:
    """The cosines of one vector with the view's rows.

    ``vector_of(embedder)`` gives the vector, unit length, in the configured embedder's
    space; it is called only when there are stored vectors to compare with. None when
    nothing has been embedded yet. Raises Unavailable when the model cannot load or the
    stored vectors come from another model (``ready`` then ``Ready.with_vector``).
    """
    found = ready(view, space=space)
    return None if found is None else found.with_vector(vector_of)


def beside(function, *args) -> futures.Future:
    """Run ``function(*args)`` on a pending-vector helper thread and return its future.

    For work that reads no database and waits for no other helper (a scan of the
    vectors, which may split itself with the int8-scan helper, never with these).
    """
    return _vector_helpers.submit(function, *args)


class PendingVector:
    """A vector worked out on a helper thread while the caller goes on; ``cosines`` then waits for it.

    Embedding is most of a hybrid recall's time (MiniLM: a 10-token query ~5 ms of ~18
    at 100k rows) and of a remember's (~11 ms for a 40-token text, of ~25), and the
    compiled pass runs it outside the GIL (embeddings._OneText), so the recall's keyword
    channels, or the write's near-duplicate check, work on another core meanwhile.
    Started only for an embedder that ``embeds_beside`` and when ``cosines_with`` would
    call ``vector_of`` (a loaded model and stored vectors of its space); otherwise
    ``cosines`` answers (or raises) as ``cosines_with`` does, on the caller's thread. A
    failure in ``vector_of`` is raised by ``cosines``, as ``cosines_with`` would raise it.
    """

    def __init__(self, vector_of):
        self._vector_of = vector_of
        self._vector = self._space = None
        embedder = get_embedder()
        if embedder.available() and embedder.embeds_beside:
            space = vectors.current_space()
            if space is not None and space.holds(embedder):
                self._vector = _vector_helpers.submit(vector_of, embedder)
                self._space = space  # read once: cosines_with need not ask again

    def then(self, function) -> futures.Future | None:
        """Run ``function()`` on the helper as soon as the vector is ready; its future, or None without a helper.

        The helper goes straight on from the embedding, so ``function`` (a scan of the
        stored vectors with this vector) starts at once rather than when the caller next
        looks: handed to the pool by the caller, a write's scan started ~1.4 ms after the
        vector was ready, the caller running the ORM meanwhile. When the vector is
        already there, ``function`` goes to another helper (``beside``).
        """
        if self._vector is None:
            return None
        owner = threading.get_ident()
        chained = futures.Future()

        def run(_done) -> None:
            if threading.get_ident() == owner:  # ready before the callback was added: not on the caller's thread
                beside(run, None)
                return
            if not chained.set_running_or_notify_cancel():
                return
            try:
                chained.set_result(function())
            except BaseException as error:  # the caller's result() raises it, as a helper's future would
                chained.set_exception(error)

        self._vector.add_done_callback(run)
        return chained

    def wait(self) -> None:
        """Wait until the helper is done, if one was started (a failure is left for whoever uses the vector)."""
        if self._vector is not None:
            futures.wait([self._vector])

    def ready(self, view) -> Ready | None:
        """``ready(view)``, with the space read when the helper was started."""
        return ready(view, space=self._space)

    def vector_of(self, embedder):
        """The vector: the helper's when it was started (waiting for it), else worked out on this thread."""
        return self._vector_of(embedder) if self._vector is None else self._vector.result()

    def cosines(self, view) -> Cosines | None:
        """``cosines_with(view, vector_of)``, with the vector from the helper when it was started."""
        found = self.ready(view)
        return None if found is None else found.with_vector(self.vector_of)
