"""The neighbours that lend a row context in hybrid fusion: the eligible memories of its namespace stored just
before and after it (``fusion``), so the answer next to a matching question is found."""

import numpy as np

# Neighbours on each side whose score lends context.
REACH = 2


def around(scope, rows: np.ndarray) -> np.ndarray:
    """Per row of ``rows``, its neighbours within REACH on each side in its namespace: an array of shape
    (len(rows), 2 * REACH), -1 where there is none (or the row is not eligible)."""
    return _table(scope)[rows]


def _table(scope) -> np.ndarray:
    """Per row of the view, its neighbours (``around``): the eligible rows grouped by namespace in memory order
    (the order memories were first stored, so a conversation stored turn by turn keeps its turns in sequence).

    Kept with the visible set unless kinds or tags narrow it.
    """

    def make():
        sequence = np.flatnonzero(scope.eligible)  # row order is memory order
        codes = scope.attributes.namespace(sequence)
        order = np.argsort(codes, kind="stable")
        sequence, codes = sequence[order], codes[order]
        table = np.full((len(scope.eligible), 2 * REACH), -1, dtype=np.int32)  # rows stay below 2**31
        steps = [-distance for distance in range(1, REACH + 1)] + list(range(1, REACH + 1))
        for column, step in enumerate(steps):
            at = np.arange(max(0, -step), len(sequence) - max(0, step))  # places with a place ``step`` away
            same = codes[at] == codes[at + step]  # a neighbour in the same namespace run
            table[sequence[at[same]], column] = sequence[at[same] + step]
        return table

    if scope.narrowed:
        return make()
    return scope.view.visible_memo(scope.visible, "neighbours", make)
