"""Cosines: each revision's is the same to the bit whether its row is scanned with every other row or with a few."""

import numpy as np

from search import cosines


def test_a_row_s_cosine_is_the_same_to_the_bit_scanned_with_every_row_or_with_a_few():
    rng = np.random.default_rng(5)
    matrix = rng.standard_normal((20_011, 384)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    vector = matrix[7] * 0.5 + matrix[8] * 0.5
    every = cosines.dots(matrix, vector)
    for picked in (np.array([0]), np.arange(3, len(matrix), 7), rng.permutation(len(matrix))[:6000]):
        np.testing.assert_array_equal(cosines.dots(np.ascontiguousarray(matrix[picked]), vector), every[picked])
    # A store holding only some of the rows (an earlier point in time) scores them alike.
    np.testing.assert_array_equal(cosines.dots(matrix[:9000], vector), every[:9000])
