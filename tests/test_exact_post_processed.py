"""Measure exactly, post-process freely: families whose release is post-processing of an exact lattice
measurement (:mod:`dpopt.mechanisms.lattice`).

Sources of the expected values:

* James–Stein (Lee, Kim, Kwak & Jung 2022, eq. 10, M_rJS): the release P⊥φ + B·shrink(Bᵀy) of the integer
  measurement y = φ + η, written here with scipy's Helmert matrix (independent of dpopt's basis);
* the lattice's cost: σ_ℤ² ≥ σ²(σm)² with σm ≈ 1 + 1/(24σ²) (the certified GDP slope,
  :mod:`dpopt.privacy.discrete_gaussian_gdp`), about 1 + 4·10⁻⁴ at σ² = 200, so the worst-case cost, linear
  in the noise variance up to τ²'s dependence on it, is within the issue's 0.1% of the continuous design's.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import linalg

import dpopt
from dpopt.mechanisms import registry
from dpopt.mechanisms.base import IDEALIZED_NUMERICS
from dpopt.mechanisms.james_stein import JamesSteinMechanism
from dpopt.mechanisms.lattice import EXACT_MEASUREMENT_NOTE

TABLE = {"dpopt": 1, "name": "t", "data": {"attributes": {"a": [f"c{i}" for i in range(18)]}, "n": 200},
         "query": {"kind": "histogram", "attribute": "a"}, "adjacency": "replace_one",
         "privacy": {"gdp": {"mu": 0.1}}, "mechanism": "james_stein"}
"""The example of specs/table_age_sex_gdp.yaml as one 18-level histogram: rotated James–Stein at μ = 0.1."""


@pytest.fixture(scope="module")
def james_stein():
    problem = dpopt.compile(TABLE)
    return problem, registry()["james_stein"].design(problem)


def test_james_stein_measures_exactly_within_a_thousandth_of_the_continuous_cost(james_stein):
    problem, mechanism = james_stein
    assert mechanism.sampler == "exact" and mechanism.variant == "rotated"
    assert EXACT_MEASUREMENT_NOTE in mechanism.notes()[0] and IDEALIZED_NUMERICS not in mechanism.notes()
    assert all(c.passed for c in mechanism.privacy_checks(problem.space, problem.spec.privacy))
    continuous = JamesSteinMechanism(mechanism.sigma, problem.space, "rotated", 200)
    ratio = mechanism.expected_l2_at(mechanism.worst_case_answer()) / continuous.expected_l2_at(
        continuous.worst_case_answer())
    assert 1.0 <= ratio <= 1.001


def test_james_stein_releases_the_shrinkage_of_the_integer_measurement(james_stein):
    _, mechanism = james_stein
    counts = np.random.default_rng(1).multinomial(200, np.full(18, 1 / 18)).astype(float)
    released = mechanism.release(counts, np.random.default_rng(4))
    eta = mechanism.sample(1, np.random.default_rng(4))[0]  # the same stream: the same integer noise
    assert np.array_equal(eta, np.round(eta))
    b = linalg.helmert(18).T  # 18 × 17, the sum-zero Helmert basis (Sec. 4.1)
    x = b.T @ (counts + eta)
    centred = x - x.mean()
    shrunk = x.mean() + (1 - (17 - 3) * mechanism.variance / (centred @ centred)) * centred  # eq. 9 on Bᵀy
    expected = counts - b @ (b.T @ counts) + b @ shrunk
    np.testing.assert_allclose(released, expected, atol=1e-9)
    assert released.sum() == pytest.approx(200, abs=1e-9)  # the total, public, is kept
    assert math.isclose(mechanism.variance, float(mechanism.lattice_sigma2), rel_tol=1e-12)  # σ_ℤ² ≥ 16
