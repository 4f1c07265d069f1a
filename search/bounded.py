"""The vector channel of a hybrid recall whose cosines the compact scan has only bounded (``cosines.Cosines`` with
``upper``): the answer ``channels.vector`` gives, to the bit, from the exact cosines of the rows that can matter.

Worked out at once: the rows that may hold the best judged cosine (every score is measured
from it), those that may reach MEMORY_COSINE_FLOOR (so which rows the channel holds is exact),
and the held rows that may hold the best judged cosine among them (relevance's evidence).
Every other row keeps a bound, the most its score can be (``Bounds.most``): fusion works out
the rows that can still reach the answer (``fusion._contenders``), and a ranking of the
channel's own the rows that can reach its depth (``Bounds.ranking``).

A row's weight (``channels.vector``) lies between 0 and 1, so where its judged cosine is
positive it is at most the cosine, and so at most the most the cosine can be.
"""

import numpy as np
from django.conf import settings

from search.channels import Found, Scope, script_shares, vector_score

# Subtracted from the bound of a row the channel may not score: no cosine reaches -1 less this.
_OUT = np.float32(4.0)


class Bounds:
    """The rows of a vector channel worked out so far (``settled``), written into its ``held``, ``raw`` and ``score``,
    and the most the others' scores can be (``most``, float32 per row).

    It holds the channel's arrays, not the channel: no cycle keeps them alive past the recall.
    """

    def __init__(self, found: Found, cosines, usable: np.ndarray, weight):
        self.held, self.raw, self.score = found.held, found.raw, found.score
        self.cosines, self.usable, self.weight = cosines, usable, weight
        # The most each row's cosine can be, far below -1 where the row is not usable.
        self.reach = np.fmax(cosines.upper, np.float32(-1.0)) - _OUT * ~usable
        self.settled = np.zeros(len(usable), dtype=bool)
        self.best = -1.0  # the best judged cosine of the usable rows, once known
        self.most = None

    def settle(self, rows: np.ndarray) -> None:
        """Work out the cosine, judged cosine and score of each usable one of ``rows`` (without repeats)."""
        rows = rows[self.usable[rows] & ~self.settled[rows]]
        self.raw[rows] = self.cosines.exact(rows) * self.weight(rows)
        self.settled[rows] = True
        self._score(rows)

    def _score(self, rows: np.ndarray) -> None:
        weight = self.weight(rows)
        self.score[rows] = vector_score(self.cosines.values[rows], self.raw[rows], self.best, weight)

    def settle_best(self, among: np.ndarray | None, count: int) -> float:
        """Work out each row of ``among`` (a mask; None: every usable row) whose judged cosine can be among their
        ``count`` best; return the count-th best (-1.0 where there are fewer rows)."""
        reach = self.reach if among is None else self.reach - _OUT * ~among
        first = (
            np.argpartition(-reach, min(count, len(reach)) - 1)[:count]
            if count > 1
            else np.argmax(reach, keepdims=True)
        )
        first = first[reach[first] >= -1.0]  # no further than -1: usable, and among
        self.settle(first)
        if len(first) < count:
            return -1.0
        mark = float(np.partition(self.raw[first], len(first) - count)[len(first) - count])
        # Only a row whose cosine can reach a positive mark can reach it judged; below 0, any row can.
        rows = np.flatnonzero(reach >= (mark if mark > 0 else -1.0))
        self.settle(rows)
        return float(np.partition(self.raw[rows], len(rows) - count)[len(rows) - count])

    def ranking(self, depth: int) -> np.ndarray:
        """The held rows that can be among the channel's first ``depth``, worked out (ascending)."""
        self.settle_best(self.held, depth)
        return np.flatnonzero(self.held & self.settled)


def vector(scope: Scope, cosines, *, found_by_words: np.ndarray, query_share: float | None) -> Found | None:
    """``channels.vector`` in hybrid mode for bounded ``cosines``."""
    size = len(scope.eligible)
    usable = scope.eligible & cosines.has_vector & ~np.isnan(cosines.upper)
    shares = None if query_share is None else script_shares(scope.view)

    def weight(rows):
        return 1.0 if shares is None else query_share * shares[rows]

    found = Found(usable & found_by_words, np.full(size, np.nan), np.zeros(size), ())
    found.order = (found.raw,)  # at the held rows, their judged cosines, as the channel's own ranking reads them
    bounds = found.bounds = Bounds(found, cosines, usable, weight)
    bounds.best = bounds.settle_best(None, 1)
    floor = settings.MEMORY_COSINE_FLOOR
    reaching = np.flatnonzero(bounds.reach >= (floor if floor > 0 else -1.0))  # the rows that may reach the floor
    bounds.settle(reaching)
    found.held[reaching[found.raw[reaching] >= floor]] = True
    if not found.held.any():
        return None
    if bounds.best < floor:  # else the best row is held: relevance's evidence, the best held, is known
        bounds.settle_best(found.held, 1)
    bounds._score(np.flatnonzero(bounds.settled))  # now that the best judged cosine is known
    bounds.most = _most(bounds.reach, bounds.best)
    return found


def _most(reach: np.ndarray, best: float) -> np.ndarray:
    """The most each row's score can be: the score at its weight's most (1), at the most its judged cosine can be.

    In float32, as ``reach`` is (fusion allows for the roundings).
    """
    cosine = np.maximum(reach, np.float32(0.0))
    return vector_score(cosine, cosine, best, 1.0)
