"""Fusion: the channels' answers made into one ranking.

The default (``MEMORY_FUSION=weighted``) sums each channel's score, weighted by
``MEMORY_FUSION_WEIGHTS``; reciprocal rank fusion (``rrf``) sums weight / (k + rank)
instead. In hybrid mode a memory then gains ``MEMORY_FUSION_CONTEXT`` times the best
score among its ``context.REACH`` neighbours on each side (the memories of its namespace
stored just before and after it), so the answer next to a matching question is found.
Ties go to the lower memory id. ``benchmarks/fusion_sweep.py`` measures the choices.
"""

import numpy as np
from django.conf import settings

from search import context
from search.channels import Found, Scope

# How deep a channel's own ranking goes (explain's ranks, RRF).
CHANNEL_DEPTH = 200
# Where a channel's scores are bounded (``Found.bounds``), this many candidates per hit asked for are worked out
# first, the best by their bounds: their final scores set the mark every other candidate must be able to reach.
HEAD = 4


def fuse(
    channels: dict[str, Found], *, scope: Scope, limit: int, hybrid: bool, boost: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Return the best ``limit`` rows, their scores, and (hybrid) the part of each one's score its context lent.

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
    scores = None
    if settings.MEMORY_FUSION == "rrf":
        scores = np.zeros(len(memory) + 1)  # the last stays 0: what a missing neighbour (-1) lends
        for name, found in channels.items():
            rows = ranked(found, memory, CHANNEL_DEPTH)
            scores[rows] += weights[name] / (settings.MEMORY_RRF_K + competition_ranks(found, rows))
        rows = np.flatnonzero(scores[:-1] > 0)
    else:
        rows = np.flatnonzero(np.logical_or.reduce([found.held for found in channels.values()]))
    lending = hybrid and settings.MEMORY_FUSION_CONTEXT > 0
    if scores is None and any(found.bounds is not None for found in channels.values()):
        rows = _contenders(channels, scope, rows, limit=limit, boost=boost, lending=lending)
    near = context.around(scope, rows) if lending else None
    final, lent = _final(channels, scores, rows, near, size=len(memory))
    if boost is not None:
        final = final * boost[rows]
    top = best(rows, final, memory, limit)
    _settle(channels, rows[top])  # RRF ranked them by ranks alone: what each hit says of itself is worked out too
    return rows[top], final[top], None if lent is None else lent[top]


def _final(
    channels: dict[str, Found], scores: np.ndarray | None, rows: np.ndarray, near: np.ndarray | None, *, size: int
) -> tuple[np.ndarray, np.ndarray | None]:
    """The final score of each of ``rows`` before any boost (its sum, and the best of its ``near`` neighbours' sums
    times MEMORY_FUSION_CONTEXT), and what context lent each one (None without context).

    ``scores``: the sums per view row and one more (0), known already (RRF); None: the weighted sum of the
    channels' scores, summed only where it counts.
    """
    if scores is None:
        needed = rows if near is None else _union(size, rows, near)
        scores = np.empty(size + 1)  # read only where set: at the rows needed, and the last (a missing neighbour)
        scores[-1] = 0.0
        weights = settings.MEMORY_FUSION_WEIGHTS
        scores[needed] = sum(weights[name] * found.score[needed] for name, found in channels.items())
    if near is None:
        return scores[rows], None
    lent = settings.MEMORY_FUSION_CONTEXT * np.max(scores[near], axis=1, initial=0.0)
    return scores[rows] + lent, lent


def _contenders(
    channels: dict[str, Found], scope: Scope, rows: np.ndarray, *, limit: int, boost: np.ndarray | None, lending: bool
) -> np.ndarray:
    """The candidate ``rows`` that can be among the best ``limit``, their scores and their neighbours' worked out,
    where a channel knows most of its scores only within bounds (``Found.bounds``).

    A row's sum is at most what the channels' highest scores give it (``highest``). The
    ``limit``-th best final score of the HEAD * ``limit`` candidates best by that is a mark the
    answer reaches; a candidate whose highest final score (its highest sum, and what its
    neighbours' can lend) stays below it cannot be in the answer. One can reach it only if its
    own highest sum or a neighbour's reaches mark / (1 + MEMORY_FUSION_CONTEXT): the others are
    ruled out first, without looking at their neighbours.
    """
    size, share = len(scope.eligible), settings.MEMORY_FUSION_CONTEXT if lending else 0.0
    if len(rows) > limit:
        weights = settings.MEMORY_FUSION_WEIGHTS
        highest = np.zeros(size + 1, dtype=np.float32)  # the last stays 0: what a missing neighbour (-1) lends
        for name, found in channels.items():
            score = found.score if found.bounds is None else found.bounds.most
            highest[:-1] += np.multiply(score, weights[name], dtype=np.float32)
        # A margin far above float32's roundings of the sums: they cannot turn a contender away.
        highest *= np.float32(1.0 + 1e-5) * (np.float32(1.0) if boost is None else np.float32(boost.max()))
        highest[:-1] += np.float32(1e-7)
        own = highest[rows]
        head = rows[np.argpartition(-own, min(HEAD * limit, len(rows) - 1))[: HEAD * limit]]
        mark = np.partition(_finals(channels, scope, head, boost, lending), len(head) - limit)[len(head) - limit]
        able = np.zeros(size + 1, dtype=bool)
        able[rows[own >= mark / (1.0 + share)]] = True
        if share:  # the neighbours of a row that can lend enough
            able[context.around(scope, np.flatnonzero(highest[:-1] >= mark / (1.0 + share))).ravel()] = True
        kept = able[rows]
        rows, most = rows[kept], own[kept]
        if share:
            most = most + np.float32(share) * np.max(highest[context.around(scope, rows)], axis=1, initial=0.0)
        rows = rows[most >= mark]
    _settle(channels, rows if not share else _union(size, rows, context.around(scope, rows)))
    return rows


def _finals(
    channels: dict[str, Found], scope: Scope, rows: np.ndarray, boost: np.ndarray | None, lending: bool
) -> np.ndarray:
    """The final scores of ``rows``, their bounded scores and their neighbours' worked out first."""
    near = context.around(scope, rows) if lending else None
    _settle(channels, rows if near is None else _union(len(scope.eligible), rows, near))
    final = _final(channels, None, rows, near, size=len(scope.eligible))[0]
    return final if boost is None else final * boost[rows]


def _settle(channels: dict[str, Found], rows: np.ndarray) -> None:
    """Work out the bounded scores of ``rows``."""
    for found in channels.values():
        if found.bounds is not None:
            found.bounds.settle(rows)


def _union(size: int, rows: np.ndarray, near: np.ndarray) -> np.ndarray:
    """``rows`` and their neighbours ``near`` (-1: none), ascending, without repeats."""
    marked = np.zeros(size + 1, dtype=bool)
    marked[rows] = True
    marked[near] = True  # -1 marks the last, which is dropped
    return np.flatnonzero(marked[:-1])


def ranked(found: Found, memory: np.ndarray, depth: int) -> np.ndarray:
    """The channel's ``depth`` best rows in its own order (ties to the lower memory id)."""
    rows = found.rows if found.bounds is None else found.bounds.ranking(depth)
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
