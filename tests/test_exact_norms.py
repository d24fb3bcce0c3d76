"""``dpopt.sensitivity.space.exact_norms`` against the norms computed entry by entry in Fractions (each float is
a binary rational, so the brute force is exact)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from dpopt.sensitivity.space import exact_norms


def _brute(vectors: np.ndarray) -> tuple[Fraction, Fraction, Fraction]:
    rows = [[Fraction(float(x)) for x in row] for row in vectors]
    return (max(sum(abs(x) for x in r) for r in rows), max(sum(x * x for x in r) for r in rows),
            max(max(abs(x) for x in r) for r in rows))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_exact_norms_equal_the_fraction_brute_force(seed):
    rng = np.random.default_rng(seed)
    vectors = rng.normal(0.0, 3.0, (40, 7)) * rng.integers(0, 2, (40, 7))  # zeros and signs, as moves have
    vectors[5] = -vectors[3][::-1]  # a tie in every norm, the same |values| in another order
    assert exact_norms(vectors) == _brute(vectors)


def test_ties_at_the_maximum_of_a_0_1_table():
    """Columns of a prefix workload: every column's l∞ is 1, l1 and l2² the count of its ones."""
    vectors = np.tril(np.ones((6, 6)))
    assert exact_norms(vectors) == (Fraction(6), Fraction(6), Fraction(1))
