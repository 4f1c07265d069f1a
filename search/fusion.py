"""Fusion: the channels' answers made into one ranking.

The default (``MEMORY_FUSION=weighted``) sums each channel's score, weighted by
``MEMORY_FUSION_WEIGHTS``; reciprocal rank fusion (``rrf``) sums weight / (k + rank)
instead. In hybrid mode a memory then gains ``MEMORY_FUSION_CONTEXT`` times the best
score among its ``CONTEXT_REACH`` neighbours on each side (the memories of its namespace
stored just before and after it), so the answer next to a matching question is found.
Ties go to the lower memory id. ``benchmarks/fusion_sweep.py`` measures the choices.
"""

import numpy as np
from django.conf import settings

from search.channels import Found, Scope

# How deep a channel's own ranking goes (explain's ranks, RRF).
CHANNEL_DEPTH = 200
# Neighbours on each side whose score lends context.
CONTEXT_REACH = 2


def fuse(
    channels: dict[str, Found], *, scope: Scope, limit: int, hybrid: bool, boost: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Return the best ``limit`` rows, their scores, and (hybrid) the part of each row's score its context lent.

    One channel outside hybrid mode keeps its own order, scored by its channel score.
    ``boost``: a factor per row its final score is multiplied by (injection-aware ranking); None: none.
    """
    memory = scope.view.columns.memory
    if not channels:
        return np.empty(0, dtype=np.int64), np.empty(0), None
    if settings.MEMORY_FUSION == "weighted" and len(channels) == 1 and not hybrid:
        found = next(iter(channels.values()))
        if boost is not None:
            scores = found.score * boost
            top = best(found.rows, scores[found.rows], memory, limit)
            return found.rows[top], scores[found.rows][top], None
        rows = ranked(found, memory, limit)
        return rows, found.score[rows], None
    weights = settings.MEMORY_FUSION_WEIGHTS
    if settings.MEMORY_FUSION == "rrf":
        scores = np.zeros(len(memory))
        for name, found in channels.items():
            rows = ranked(found, memory, CHANNEL_DEPTH)
            scores[rows] += weights[name] / (settings.MEMORY_RRF_K + competition_ranks(found, rows))
        candidates = scores > 0
    else:
        scores = sum(weights[name] * found.score for name, found in channels.items())
        candidates = np.logical_or.reduce([found.held for found in channels.values()])
    rows = np.flatnonzero(candidates)
    context = None
    if hybrid and settings.MEMORY_FUSION_CONTEXT:
        context = settings.MEMORY_FUSION_CONTEXT * _best_neighbour(scores, scope)
        scores = scores + context
    if boost is not None:
        scores = scores * boost
    top = best(rows, scores[rows], memory, limit)
    return rows[top], scores[rows][top], context


def _best_neighbour(scores: np.ndarray, scope: Scope) -> np.ndarray:
    """Per row, the best of ``scores`` among its eligible neighbours in the same namespace (0 without any)."""
    sequence, starts = _neighbours(scope)
    along = scores[sequence]
    best = np.zeros(len(sequence))
    for distance in range(1, CONTEXT_REACH + 1):
        # A neighbour counts only if it lies in the same namespace run.
        before = np.zeros(len(sequence))
        before[distance:] = np.where(starts[distance:] == starts[:-distance], along[:-distance], 0.0)
        after = np.zeros(len(sequence))
        after[:-distance] = np.where(starts[:-distance] == starts[distance:], along[distance:], 0.0)
        best = np.maximum(best, np.maximum(before, after))
    found = np.zeros(len(scores))
    found[sequence] = best
    return found


def _neighbours(scope: Scope) -> tuple[np.ndarray, np.ndarray]:
    """The eligible rows grouped by namespace in memory order (the order memories were first stored, so a
    conversation stored turn by turn keeps its turns in sequence), and per row where its namespace's run starts.

    Kept with the visible set unless kinds or tags narrow it.
    """

    def make():
        sequence = np.flatnonzero(scope.eligible)  # row order is memory order
        codes = scope.attributes.namespace(sequence)
        order = np.argsort(codes, kind="stable")
        sequence, codes = sequence[order], codes[order]
        changes = np.ones(len(codes), dtype=bool)
        changes[1:] = codes[1:] != codes[:-1]
        return sequence, np.flatnonzero(changes)[np.cumsum(changes) - 1]

    if scope.narrowed:
        return make()
    return scope.view.visible_memo(scope.visible, "neighbours", make)


def ranked(found: Found, memory: np.ndarray, depth: int) -> np.ndarray:
    """The channel's ``depth`` best rows in its own order (ties to the lower memory id)."""
    rows = found.rows
    keys = tuple(-key[rows] for key in reversed(found.order))
    return rows[top_order((memory[rows], *keys), depth)]


def competition_ranks(found: Found, rows: np.ndarray) -> np.ndarray:
    """Ranks 1, 2, 2, 4 ... of ``rows`` (in the channel's order): rows equal on every key share a rank."""
    changes = np.ones(len(rows), dtype=bool)
    for key in found.order:
        changes[1:] |= key[rows][1:] != key[rows][:-1]
    starts = np.flatnonzero(changes)
    return (starts + 1)[np.cumsum(changes) - 1]


def top_order(keys: tuple[np.ndarray, ...], depth: int) -> np.ndarray:
    """``np.lexsort(keys)[:depth]`` (primary key last), sorting only the rows that can be among the first ``depth``.

    A partition on each key in turn keeps those rows (the ones tied at the cut go on to the next key).
    """

    def candidates(keys, depth, rows):
        if len(rows) <= depth or not keys:
            return rows
        values = keys[-1][rows]
        cut = np.partition(values, depth - 1)[depth - 1]
        below = rows[values < cut]
        return np.concatenate([below, candidates(keys[:-1], depth - len(below), rows[values == cut])])

    rows = np.sort(candidates(keys, depth, np.arange(len(keys[0]))))
    return rows[np.lexsort(tuple(key[rows] for key in keys))][:depth]


def best(rows: np.ndarray, scores: np.ndarray, memory: np.ndarray, limit: int) -> np.ndarray:
    """Positions of the best ``limit`` of ``rows`` by score, ties to the lower memory id, best first."""
    return top_order((memory[rows], -scores), limit)
