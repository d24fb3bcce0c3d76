"""Values remembered by content for speed (issue 36) equal the values computed afresh."""

from __future__ import annotations

import numpy as np

from dpopt.sensitivity import subspace


def test_exact_rank_remembered_or_not_is_the_rank(monkeypatch):
    """Ranks known by construction: a lower-triangular matrix of ones (determinant 1) has full rank; a matrix
    whose third row is the sum of the first two has rank 2; a float that rounds a dependency away (1 + 2⁻⁵²)
    keeps full rank in exact arithmetic. Each through the cache, twice, and with the cache bypassed."""
    prefix = np.tril(np.ones((85, 85)))
    dependent = np.array([[1.0, 2.0, 3.0], [0.5, 0.25, 4.0], [1.5, 2.25, 7.0]])
    nearly = dependent.copy()
    nearly[2, 2] = 7.0 * (1 + 2.0**-52)
    expected = [(prefix, 85), (dependent, 2), (nearly, 3), (np.zeros((2, 0)), 0)]
    for matrix, rank in expected * 2:
        assert subspace.exact_rank(matrix) == rank
    monkeypatch.setattr(subspace, "RANK_CACHE_ENTRIES", 1)
    for matrix, rank in expected:
        assert subspace.exact_rank(matrix) == rank
