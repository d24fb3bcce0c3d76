"""James–Stein post-processing of the Gaussian mechanism (Lee, Kim, Kwak & Jung 2022, Sec. 2.3).

Oracles: the digest's closed-form costs (§2.6, [computed]), E[1/χ²] by three independent
evaluations (confluent hypergeometric, the Poisson series, the integral form in mpmath),
Monte Carlo of the release with tolerances of 4 standard errors, and the paper's
Helmert matrix (Sec. 4.1).
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest

import dpopt
from dpopt.mechanisms.gaussian import GaussianMechanism, ProjectedGaussianMechanism
from dpopt.mechanisms.james_stein import (
    JamesSteinMechanism,
    canonical_basis,
    helmert_basis,
    inverse_chi2_mean,
    truncate_at_zero,
)


def _space(p: int, mu: float = 1.0, n: int | None = None, adjacency="replace_one", kind="histogram"):
    data = {"attributes": {"a": [f"c{i}" for i in range(p)]}}
    if n is not None:
        data["n"] = n
    spec = {"dpopt": 1, "name": "t", "data": data, "query": {"kind": kind, "attribute": "a"},
            "adjacency": adjacency, "privacy": {"gdp": {"mu": mu}}}
    return dpopt.derive(dpopt.load_spec(spec)), spec


def _series(k: int, t: float) -> float:
    """ρ_k(t) = ½e^{−t/2} Σ (t/2)^β / (β!(k/2 + β − 1)) in 40 digits (digest §2.6)."""
    with mpmath.workdps(40):
        h = mpmath.mpf(t) / 2
        last = int(h + 40 * math.sqrt(h + 1) + 60)  # Poisson(t/2) weights beyond are < 1e-300
        weights = (mpmath.exp(b * mpmath.log(h) - mpmath.loggamma(b + 1) - h) if h > 0 else mpmath.mpf(b == 0)
                   for b in range(last))
        return float(sum(w / (mpmath.mpf(k) / 2 + b - 1) for b, w in enumerate(weights)) / 2)


def _integral(k: int, t: float) -> float:
    """ρ_k(t) = ½ ∫₀¹ (1 − y)^{k/2 − 2} e^{−ty/2} dy (eq. 21)."""
    with mpmath.workdps(30):
        return float(mpmath.quad(lambda y: (1 - y) ** (mpmath.mpf(k) / 2 - 2) * mpmath.exp(-t * y / 2), [0, 1]) / 2)


@pytest.mark.parametrize("k, t, expected, digits", [(4, 0.6, 0.4319696322, 10), (9, 10.0, 0.0632644237, 10),
                                                    (14, 80.0, 0.0110826025, 10), (9, 4000.0, 2.4968773e-4, 11)])
def test_inverse_chi2_three_ways(k, t, expected, digits):
    # digest §2.6: checked points (to the decimals printed); the series and the integral
    # are evaluated independently, to 1e-12
    assert inverse_chi2_mean(k, t) == pytest.approx(expected, abs=0.6 * 10.0**-digits)
    assert inverse_chi2_mean(k, t) == pytest.approx(_series(k, t), rel=1e-12)
    assert inverse_chi2_mean(k, t) == pytest.approx(_integral(k, t), rel=1e-10)
    assert inverse_chi2_mean(k, 0.0) == pytest.approx(1 / (k - 2), rel=1e-15)


def test_helmert_basis_is_the_papers():
    # Sec. 4.1, p = 4
    r2, r6, r12 = math.sqrt(2), math.sqrt(6), math.sqrt(12)
    expected = [[1 / r2, 1 / r6, 1 / r12], [-1 / r2, 1 / r6, 1 / r12], [0, -2 / r6, 1 / r12], [0, 0, -3 / r12]]
    np.testing.assert_allclose(helmert_basis(4), expected, atol=1e-15)
    u = helmert_basis(7)
    np.testing.assert_allclose(u.T @ u, np.eye(6), atol=1e-14)
    np.testing.assert_allclose(u @ u.T, np.eye(7) - 1 / 7, atol=1e-14)


THETA = np.array([3, 7, 1, 0, 12, 5, 9, 2, 4, 6], dtype=float)
# digest §2.6 [computed], p = 10, μ = 0.25, Δ2 = √2 (σ² = 32), Helmert basis
COSTS = {"zero": 207.5644688162, "mean": 166.8424008356, "rotated": 160.7042814867}


@pytest.mark.parametrize("variant", COSTS)
def test_closed_form_costs_digest_and_monte_carlo(variant):
    space, _ = _space(10, mu=0.25)
    mech = JamesSteinMechanism(math.sqrt(2) / 0.25, space, variant)
    assert mech.expected_l2_at(THETA) == pytest.approx(COSTS[variant], rel=1e-9)
    # Monte Carlo of the release; k ≥ 8 so ‖M − θ‖² has a finite variance: 4 SE
    errors = np.sum((mech.release(np.tile(THETA, (200_000, 1)), np.random.default_rng(1)) - THETA) ** 2, axis=1)
    se = errors.std(ddof=1) / math.sqrt(errors.size)
    assert abs(errors.mean() - COSTS[variant]) < 4 * se


def test_costs_at_zero_and_at_a_large_table():
    # digest §2.6: at θ = 0, JS0 = 2σ², JS = rJS = 3σ²; θ = 20·(1..15), μ = 0.1 (σ² = 200)
    space, _ = _space(10, mu=0.25)
    s2 = 32.0
    for variant, value in [("zero", 2 * s2), ("mean", 3 * s2), ("rotated", 3 * s2)]:
        assert JamesSteinMechanism(math.sqrt(s2), space, variant).expected_l2_at(np.zeros(10)) == pytest.approx(value)
    space, _ = _space(15, mu=0.1)
    theta = 20.0 * np.arange(1, 16)
    for variant, value in [("zero", 2986.4312003), ("mean", 2949.4768160), ("rotated", 2604.5940312)]:
        assert JamesSteinMechanism(math.sqrt(200), space, variant).expected_l2_at(theta) == pytest.approx(value, rel=1e-9)
    # a flat table has nothing to shrink but the noise: JS = rJS = 3σ² exactly (τ = 0)
    space, _ = _space(5, mu=0.1)
    flat = np.full(5, 100.0)
    assert JamesSteinMechanism(math.sqrt(200), space, "mean").expected_l2_at(flat) == pytest.approx(600.0)
    assert JamesSteinMechanism(math.sqrt(200), space, "rotated").expected_l2_at(flat) == pytest.approx(600.0)


def test_dominance_ordering():
    # Thms 2, 4–6: r < G; JS0 < G (p ≥ 3); JS < G (p ≥ 4); rJS < r (q ≥ 4), at every table
    space, _ = _space(8, mu=0.5)
    sigma = math.sqrt(2) / 0.5
    tables = np.random.default_rng(4).multinomial(60, np.arange(1, 9) / 36, size=200).astype(float)
    g = GaussianMechanism(sigma, 8)._expected_l2(None)
    r = ProjectedGaussianMechanism(sigma, space)._expected_l2(None)
    assert r == pytest.approx(7 * sigma**2) and g == pytest.approx(8 * sigma**2)
    for variant, bound in [("zero", g), ("mean", g), ("rotated", r)]:
        assert np.all(JamesSteinMechanism(sigma, space, variant).expected_l2_at(tables) < bound)


def test_rank_deficient_gaussian_is_the_projected_family():
    # Thm 2 / Example 1 via the existing projected_gaussian family: p = 10, μ = 0.25 gives
    # L2(M_G) = 2p/μ² = 320 and L2(M_r) = 2(p−1)/μ² = 288 (digest §8.2 item 14); M_r keeps the total.
    # the paper's costs are those of continuous noise: the floating-point sampler (the lattice's cost is tested in
    # tests/test_exact_measurement.py)
    _, spec = _space(10, mu=0.25)
    sol = dpopt.solve({**spec, "mechanism": ["gaussian", "projected_gaussian"], "sampler": "floating_point"})
    costs = {c.family: c.utility.value for c in sol.candidates}
    assert costs == pytest.approx({"gaussian": 320.0, "projected_gaussian": 288.0}, rel=1e-12)
    released = sol.mechanism.release(THETA, rng=np.random.default_rng(3))
    assert released.sum() == pytest.approx(THETA.sum(), abs=1e-9 * THETA.sum())


def test_total_is_kept_and_truncation_only_helps():
    # Sec. 4.1: 1ᵀM_r = 1ᵀM_rJS = N almost surely; Prop. 8: max(0, ·) never increases an error
    space, _ = _space(10, mu=0.25)
    mech = JamesSteinMechanism(math.sqrt(32), space, "rotated")
    released = mech.release(np.tile(THETA, (1000, 1)), np.random.default_rng(2))
    assert np.abs(released.sum(axis=1) - THETA.sum()).max() < 1e-9 * THETA.sum()
    clipped = truncate_at_zero(released)
    assert clipped.min() >= 0
    assert np.all(np.abs(clipped - THETA) <= np.abs(released - THETA))
    one = mech.release(THETA, rng=np.random.default_rng(2))
    np.testing.assert_allclose(one, released[0], atol=1e-12)


def test_worst_case_prediction_is_a_bound():
    # the certificate's prediction is the worst case over tables with total n: no table does worse
    space, _ = _space(12, mu=0.1, n=150)
    mech = JamesSteinMechanism(math.sqrt(200), space, "rotated", public_total=150)
    predicted = mech._expected_l2(None)
    tables = np.random.default_rng(5).multinomial(150, np.random.default_rng(6).dirichlet(np.ones(12) * 0.2),
                                                  size=500).astype(float)
    assert np.all(mech.expected_l2_at(tables) <= predicted + 1e-9)
    assert predicted == pytest.approx(mech.expected_l2_at(mech.worst_case_answer()))
    assert predicted < mech.stage_cost
    assert JamesSteinMechanism(math.sqrt(200), space, "rotated")._expected_l2(None) == mech.stage_cost


def test_auto_chooses_james_stein_for_a_small_noisy_table():
    # 18 cells, n = 200, μ = 0.1: the worst-case rJS cost is several % below the projected Gaussian (continuous
    # noise, whose costs 2p/μ² and 2(p − 1)/μ² the paper gives; the lattice: tests/test_exact_measurement.py)
    _, spec = _space(18, mu=0.1, n=200)
    sol = dpopt.solve({**spec, "sampler": "floating_point"})
    costs = {c.family: c.utility.value for c in sol.candidates if c.feasible}
    assert sol.mechanism.family == "james_stein" and sol.mechanism.variant == "rotated"
    assert costs["gaussian"] == pytest.approx(3600) and costs["projected_gaussian"] == pytest.approx(3400)
    assert costs["james_stein"] < 0.99 * costs["projected_gaussian"]
    assert min(costs.values()) == costs["james_stein"]
    assert {row["family"] for row in sol.certificate["candidates"]} >= {"gaussian", "projected_gaussian",
                                                                        "james_stein", "laplace"}
    assert dpopt.verify(sol.certificate).passed


def test_negligible_gain_is_not_proposed_but_can_be_requested():
    _, spec = _space(6, mu=1.0, n=1000)
    sol = dpopt.solve(spec)
    js = next(c for c in sol.candidates if c.family == "james_stein")
    assert sol.mechanism.family != "james_stein" and "guaranteed L2 gain" in js.reason
    sol = dpopt.solve({**spec, "mechanism": "james_stein"})
    assert sol.mechanism.family == "james_stein"
    # below the Gaussian stage's cost k·v for every dataset (Thms 4–6): k = 5 (rotated), v = the noise variance
    # (σ² = 2 for continuous noise; on the lattice Var N_ℤ(0, σ_ℤ²), CKS 2020 Prop. 19)
    assert sol.certificate["utility"]["value"] < 5 * sol.mechanism.variance
    assert dpopt.verify(sol.certificate).passed


def test_unsupported_metrics_are_refused():
    _, spec = _space(6, mu=1.0, n=1000)
    with pytest.raises(dpopt.CalibrationError, match="metric l2"):
        dpopt.solve({**spec, "mechanism": "james_stein", "utility": {"metric": "l1"}})


def test_noise_span_check_catches_a_wrong_basis():
    space, spec = _space(6)
    privacy = dpopt.load_spec(spec).privacy
    mech = JamesSteinMechanism(math.sqrt(2), space, "rotated")
    assert all(c.passed for c in mech.privacy_checks(space, privacy))
    mech.basis = np.eye(6)[:, :5]  # a basis that misses e_6 − e_1: Lemma A.3(b), no privacy
    assert not mech.privacy_checks(space, privacy)[1].passed


def test_canonical_basis_of_a_general_span():
    # marginals of a 3x2 table under replace-one: rank-deficient, not the sum-zero space
    spec = {"dpopt": 1, "name": "m", "data": {"attributes": {"r": ["a", "b", "c"], "s": ["f", "m"]}},
            "query": {"kind": "marginals", "attributes": [["r"], ["s"]]}, "adjacency": "replace_one",
            "privacy": {"gdp": {"mu": 1.0}}}
    space = dpopt.derive(dpopt.load_spec(spec))
    b = canonical_basis(space)
    assert b.shape == (5, space.rank)
    np.testing.assert_allclose(b.T @ b, np.eye(space.rank), atol=1e-12)
    np.testing.assert_allclose(space.span.project(b.T), b.T, atol=1e-12)
    np.testing.assert_allclose(canonical_basis(space), b, atol=0)  # deterministic
