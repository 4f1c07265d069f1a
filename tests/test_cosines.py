"""Cosines: each revision's is the same to the bit wherever its row sits, and near twins come from the namespace's rows."""

import numpy as np
import pytest

from search import cosines


def unit_rows(rng, count, dim):
    rows = rng.standard_normal((count, dim)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


@pytest.mark.parametrize("count", [100, cosines._SPLIT_MIN_ROWS + 1001])
def test_a_row_s_cosine_is_the_same_to_the_bit_scanned_with_every_row_or_with_a_few(count):
    rng = np.random.default_rng(5)
    matrix, vector = unit_rows(rng, count, 384), unit_rows(rng, 1, 384)[0]
    every = cosines.dots(matrix, vector)
    for picked in (np.array([0]), np.arange(3, count, 7), rng.permutation(count)[: count // 3]):
        np.testing.assert_array_equal(cosines.dots(np.ascontiguousarray(matrix[picked]), vector), every[picked])
    # A store holding only some of the rows (an earlier point in time) scores them alike.
    np.testing.assert_array_equal(cosines.dots(matrix[: count // 2], vector), every[: count // 2])
