"""Array helpers the search code shares."""

import numpy as np


def select(mask: np.ndarray, *arrays: np.ndarray) -> tuple[np.ndarray, ...]:
    """``array[mask]`` for each of ``arrays``: the same elements, in the same order.

    numpy's boolean indexing branches on every element, and on an unpredictable mask that
    costs: two 40,000-element arrays under a mask of 77% took 321 us indexed by the mask,
    75 us through the positions of its True elements (``flatnonzero``, then ``take``).
    """
    positions = np.flatnonzero(mask)
    return tuple(array.take(positions, axis=0) for array in arrays)
