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
    eta = mechanism.latent_sample(1, np.random.default_rng(4))[0]  # the same stream: the same integer noise
    assert np.array_equal(eta, np.round(eta))
    b = linalg.helmert(18).T  # 18 × 17, the sum-zero Helmert basis (Sec. 4.1)
    x = b.T @ (counts + eta)
    centred = x - x.mean()
    shrunk = x.mean() + (1 - (17 - 3) * mechanism.variance / (centred @ centred)) * centred  # eq. 9 on Bᵀy
    expected = counts - b @ (b.T @ counts) + b @ shrunk
    np.testing.assert_allclose(released, expected, atol=1e-9)
    assert released.sum() == pytest.approx(200, abs=1e-9)  # the total, public, is kept
    assert math.isclose(mechanism.variance, float(mechanism.lattice_sigma2), rel_tol=1e-12)  # σ_ℤ² ≥ 16


def _lattice_variance(s2: float) -> float:
    """Var N_ℤ(0, s2) summed directly over |k| ≤ 40·√s2 + 40 (the tail beyond is below e^{−800})."""
    k = np.arange(-int(40 * math.sqrt(s2)) - 40, int(40 * math.sqrt(s2)) + 41, dtype=float)
    w = np.exp(-k**2 / (2 * s2))
    return float(np.sum(k**2 * w) / np.sum(w))


def test_james_stein_states_the_projected_lattice_stage_it_releases(james_stein):
    """The stage the rotated shrinkage acts on is φ + Pη, P = I − J/18 (the sum-zero projector, written here
    directly): the stated law is that projection of i.i.d. N_ℤ(0, σ_ℤ²), the second route's privacy and sampler
    checks hold for it, each cell's SE is √((17/18)·Var N_ℤ), and its 95% margin (the exact quantile of the
    Helmert image) lies within the sub-Gaussian bound of proxy (17/18)·σ_ℤ² (Σ_k P_ik² = P_ii = 17/18, CKS 2020
    Cor. 9: P(|Z| ≥ m) ≤ 2 exp(−m²/(2v)), so m = √(2v·ln 40) holds 95%). The unprojected law (proxy σ_ℤ², the previous statement) is
    refuted by the sampler check: the draws Pη are not integers."""
    from dpopt.certificate.per_cell import per_cell_errors
    from dpopt.certificate.second_route import privacy_claim, sampler_claim
    from dpopt.noise.law import PostProcessedLaw, ProductLaw

    problem, mechanism = james_stein
    law = mechanism.noise_law()
    p = np.eye(18) - 1 / 18
    assert law.inner.projection and np.allclose(law.inner.basis, p, atol=1e-12)
    assert privacy_claim(law, problem.space, problem.spec.privacy).passed
    assert sampler_claim(law, mechanism, draws=4_000).passed
    s2 = float(mechanism.lattice_sigma2)
    cells = per_cell_errors(mechanism, [f"a=c{i}" for i in range(18)])["cells"]
    for cell in cells:
        assert cell["margin_of_error"] <= math.sqrt(2 * 17 / 18 * s2 * math.log(40)) * (1 + 1e-12)
        assert cell["standard_error"] == pytest.approx(math.sqrt(17 / 18 * _lattice_variance(s2)), rel=1e-9)
    unprojected = PostProcessedLaw(ProductLaw.iid(law.inner.marginals[0], 18), law.operation)
    assert not sampler_claim(unprojected, mechanism, draws=4_000).passed


MARGINS = {"dpopt": 1, "name": "m", "data": {"attributes": {"a": ["x", "y", "z"], "b": ["u", "v"]}, "n": 60},
           "query": {"kind": "contingency_table", "attributes": ["a", "b"]}, "adjacency": "replace_one",
           "invariants": [{"kind": "margins", "attributes": ["a"]}, {"kind": "margins", "attributes": ["b"]}],
           "privacy": {"zcdp": {"rho": 0.5}}, "mechanism": "projected_gaussian"}
"""A 3 × 2 table with both one-way margins published: the noise lives on (I − J/3) ⊗ (I − J/2), rank 2."""


def test_projected_gaussian_keeps_the_margins_exactly_and_moves_only_the_measured_noise():
    """The release is (I − P)x + P(x + η): the margins of x exactly (they are invariant) and, between two tables
    with the same margins released from the same stream, a difference of exactly P times the difference of the
    tables (the same integer noise η; P = (I − J/3) ⊗ (I − J/2), Cho & Awan Example 8's form)."""
    problem = dpopt.compile(MARGINS)
    mechanism = registry()["projected_gaussian"].design(problem)
    assert mechanism.sampler == "exact" and mechanism.span.rank == 2
    assert all(c.passed for c in mechanism.privacy_checks(problem.space, problem.spec.privacy))
    x = np.array([[10, 12], [9, 11], [8, 10]])
    moved = x + np.array([[1, -1], [-1, 1], [0, 0]])  # a replace-one move keeps both margins
    a = mechanism.release(x.ravel().astype(float), np.random.default_rng(3)).reshape(3, 2)
    b = mechanism.release(moved.ravel().astype(float), np.random.default_rng(3)).reshape(3, 2)
    np.testing.assert_allclose(a.sum(axis=0), x.sum(axis=0), atol=1e-9)
    np.testing.assert_allclose(a.sum(axis=1), x.sum(axis=1), atol=1e-9)
    p = np.kron(np.eye(3) - 1 / 3, np.eye(2) - 1 / 2)
    np.testing.assert_allclose((b - a).ravel(), p @ (moved - x).ravel(), atol=1e-9)
    # E‖Z‖² = v·rank with v = σ_ℤ² (≥ σ², a dyadic at most 2^-20 above; Var N_ℤ = σ_ℤ² to 1e-300 at σ_ℤ² ≥ 16 and
    # within 1e-8 relative at σ² = 1, CKS Prop. 19's series)
    sigma2 = float(mechanism.lattice_sigma2)
    assert mechanism.sigma**2 <= sigma2 <= mechanism.sigma**2 * (1 + 2.0**-20)
    assert mechanism.expected_utility(problem.spec.utility).value == pytest.approx(2 * sigma2, rel=1e-7)


SUM_ZERO = {"dpopt": 1, "name": "t", "data": {"attributes": {"a": ["p", "q"], "b": ["r", "s"]}, "n": 100},
            "query": {"kind": "contingency_table", "attributes": ["a", "b"]}, "adjacency": "replace_one",
            "privacy": {"zcdp": {"rho": 0.5}}, "mechanism": "projected_gaussian"}
"""A 2 × 2 table under replace-one: the noise lives on the sum-zero span, P_V = I − J/4, rank 3."""


@pytest.mark.parametrize("utility", [{"metric": "l1"}, {"metric": "usefulness", "gamma": 1.0}])
def test_projected_gaussian_predicts_l1_and_usefulness_of_the_lattice_noise(utility):
    """l1 and usefulness on the lattice: the released noise of cell i is (P_V η)_i = S/4, S = 3η_i − η_j − η_k − η_l,
    η i.i.d. N_ℤ(0, σ_ℤ²) — no closed form, so the family states a Monte Carlo estimate of the exact sampler. The
    reference here is S's exact law by convolution of the discrete Gaussian's pmf e^{−k²/(2σ_ℤ²)}/Z (cut at
    |k| ≤ 60, where the neglected mass is below e^{−60²/(2·1.01)} ≈ 0): E‖Z‖₁ = 4·E|S|/4 = E|S| and the usefulness
    P(|S| ≤ 4γ). The estimate's 95% interval from 200,000 draws must hold it (the interval itself is checked to be
    narrow: 4 standard errors of a per-draw l1 whose sd is about 2 is about 0.02)."""
    problem = dpopt.compile({**SUM_ZERO, "utility": utility})
    solution = dpopt.solve({**SUM_ZERO, "utility": utility})
    assert IDEALIZED_NUMERICS not in str(solution.certificate.data)
    mechanism = registry()["projected_gaussian"].design(problem)
    assert mechanism.sampler == "exact"
    s2 = float(mechanism.lattice_sigma2)
    k = np.arange(-60, 61)
    pmf = np.exp(-k**2 / (2 * s2))
    pmf /= pmf.sum()
    three = np.zeros(3 * k.size - 2)
    three[::3] = pmf  # the law of 3η on 3k, k = −60…60 (offset −180)
    others = np.convolve(np.convolve(pmf, pmf), pmf)[::-1]  # −(η_j + η_k + η_l), offset −180
    law = np.convolve(three, others)
    support = np.arange(law.size) - 360
    predicted = mechanism.expected_utility(problem.spec.utility)
    if utility["metric"] == "l1":
        reference = float(np.sum(np.abs(support) * law))
    else:
        reference = float(law[np.abs(support) <= 4 * utility["gamma"]].sum())
    low, high = predicted.ci
    assert low <= reference <= high
    assert high - low < 0.05 * reference
    assert "Monte Carlo" in predicted.method
