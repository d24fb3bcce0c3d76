"""Exact is the default: a family with a lattice measurement for the spec uses it whatever it costs, and states the
cost under ``exact_cost`` (:mod:`dpopt.mechanisms.exact_cost`); ``sampler: floating_point`` keeps the continuous
design and its idealized-numerics note.

Each configuration below kept the floating-point sampler before (its lattice cost above the former 0.1% cut-off:
the ratios printed by that rule were 1.4316, 1.0357, 1.0673/1.0082 and 1.0938). The stated cost is compared with an
independent computation:

* discrete laws' second moments by direct summation of their pmfs in mpmath (discrete Laplace
  p(k) = tanh(1/(2t)) e^{−|k|/t} summed by ``nsum``; discrete Gaussian ∝ e^{−k²/(2σ²)}; discrete staircase
  ∝ b^{⌊(|k| + m − r)/m⌋}; discrete GG ∝ e^{−(|k|/s)^p}), not the code's closed forms;
* continuous laws' second moments from their definitions: Laplace(b) 2b², N(0, σ²) σ², GG(0, b, 2) = N(0, b²/2),
  the staircase density of Geng & Viswanath (2016) integrated piecewise (its flat parts' ∫x² in closed form,
  summed over the periods in mpmath).
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest

import dpopt
from dpopt.mechanisms.base import IDEALIZED_NUMERICS
from dpopt.mechanisms.exact_cost import EXACT_COST_KEY, exact_cost
from dpopt.mechanisms.real_lattice import RealLattice


def _mp(x: Fraction | str) -> mpmath.mpf:
    x = Fraction(x)
    return mpmath.mpf(x.numerator) / x.denominator


def _second_moment(weight, width: int) -> mpmath.mpf:
    """Σ k² w(k) / Σ w(k) over |k| ≤ width (the tails beyond are below the tolerance used)."""
    total = mpmath.fsum(weight(k) for k in range(-width, width + 1))
    return mpmath.fsum(k * k * weight(k) for k in range(-width, width + 1)) / total


def _exact(solution) -> bool:
    return IDEALIZED_NUMERICS not in solution.certificate["mechanism"]["notes"]


def test_the_ratio_is_oriented_so_that_above_one_is_worse():
    assert exact_cost("l2", 3.0, 2.0) == {"metric": "l2", "exact": 3.0, "continuous": 2.0, "ratio": 1.5}
    assert exact_cost("usefulness", 0.8, 0.9)["ratio"] == pytest.approx(0.9 / 0.8, rel=1e-15)  # higher is better
    assert exact_cost("test_power", 0.9, 0.8)["ratio"] < 1
    assert exact_cost("variance", 0.0, 0.0)["ratio"] == 1.0 and exact_cost("l1", 1.0, 0.0)["ratio"] == math.inf


# ------------------------------------------------------------------ Laplace on a bounded sum under μ-GDP
def _sum_spec(privacy, mechanism, **extra):
    return {"dpopt": 1, "name": "sum", "data": {"attributes": {"x": {"min": 0, "max": 10}}},
            "query": {"kind": "sum", "attribute": "x"}, "adjacency": "add_remove", "privacy": privacy,
            "mechanism": mechanism, "utility": {"metric": "l2"}, **extra}


def test_a_laplace_sum_under_gdp_measures_exactly_and_states_its_cost():
    # μ-GDP is checked through ε-DP on the lattice: the discrete Laplace is wider than the continuous Laplace(b)
    # calibrated on its exact trade-off function; before, the design kept Laplace(b) (ratio 1.4316 > 1.001)
    spec = _sum_spec({"gdp": {"mu": 1}}, "laplace")
    solution = dpopt.solve(spec)
    p = solution.mechanism.parameters
    assert _exact(solution) and p["sampler"] == "exact"
    t, unit = _mp(p["lattice_scale"]), _mp(RealLattice.from_dict(p["sum_lattice"]).unit)
    with mpmath.workdps(40):
        c = mpmath.tanh(1 / (2 * t))
        second = 2 * c * mpmath.nsum(lambda k: k * k * mpmath.exp(-k / t), [1, mpmath.inf])
    cost = p[EXACT_COST_KEY]
    assert cost["metric"] == "variance"
    assert cost["exact"] == pytest.approx(float(second * unit**2), rel=1e-9)
    assert cost["continuous"] == pytest.approx(2 * p["scale"] ** 2, rel=1e-12)
    assert cost["ratio"] == pytest.approx(float(second * unit**2) / (2 * p["scale"] ** 2), rel=1e-9)
    assert cost["ratio"] == pytest.approx(p["lattice_cost_ratio"], rel=1e-12) and cost["ratio"] > 1.001
    assert dpopt.verify(solution.certificate).passed
    floating = dpopt.solve({**spec, "sampler": "floating_point"})
    assert not _exact(floating) and EXACT_COST_KEY not in floating.mechanism.parameters


def test_a_forged_cost_fails_verification():
    solution = dpopt.solve(_sum_spec({"gdp": {"mu": 1}}, "laplace"))
    data = solution.certificate.data
    forged = {**data, "mechanism": {**data["mechanism"], "parameters": {
        **data["mechanism"]["parameters"], EXACT_COST_KEY: {**data["mechanism"]["parameters"][EXACT_COST_KEY],
                                                            "ratio": 1.0}}}}
    assert "mechanism.parameters" in {c.claim for c in dpopt.verify(forged).failed}


# ------------------------------------------------------------------ isotropic Gaussian on counts under pDP
def _counts(privacy, mechanism, metric="l2", cells=3, adjacency="add_remove", **extra):
    return {"dpopt": 1, "name": "counts", "data": {"attributes": {"a": [f"v{i}" for i in range(cells)]}, "n": 100},
            "query": {"kind": "histogram", "attribute": "a"}, "adjacency": adjacency, "privacy": privacy,
            "mechanism": mechanism, "utility": {"metric": metric}, **extra}


def test_a_gaussian_under_pdp_at_small_noise_measures_exactly_and_states_its_cost():
    # ε = 5, δ = 0.1: σ² ≈ 0.27, where the discrete law's level needs 3.6% more variance than Lemma 10's σ
    # (before: the floating-point sampler, ratio 1.0357 > 1.001)
    spec = _counts({"pdp": {"epsilon": 5, "delta": 0.1}}, "gaussian")
    solution = dpopt.solve(spec)
    p = solution.mechanism.parameters
    assert _exact(solution) and p["sampler"] == "exact"
    s2 = _mp(p["lattice_sigma2"])
    with mpmath.workdps(40):
        second = _second_moment(lambda k: mpmath.exp(-k * k / (2 * s2)), 60)  # tail below e^{-6000}
    cost = p[EXACT_COST_KEY]
    assert cost["exact"] == pytest.approx(float(second), rel=1e-12)
    assert cost["continuous"] == pytest.approx(p["sigma"] ** 2, rel=1e-15)
    assert cost["ratio"] == pytest.approx(float(second) / p["sigma"] ** 2, rel=1e-12) and cost["ratio"] > 1.001
    assert cost["ratio"] == pytest.approx(p["lattice_cost_ratio"], rel=1e-12)
    assert dpopt.verify(solution.certificate).passed
    floating = dpopt.solve({**spec, "sampler": "floating_point"})
    assert floating.mechanism.sampler == "floating_point" and not _exact(floating)


# ------------------------------------------------------------------ the staircase on two integer cells
def _continuous_staircase_second_moment(epsilon0: float, step: float, g: float) -> mpmath.mpf:
    """E X² of Geng & Viswanath's density: a·b^j on [jΔ, (j + g)Δ), a·b^{j+1} on [(j + g)Δ, (j + 1)Δ),
    a = (1 − b)/(2Δ(g + (1 − g)b)), b = e^{−ε₀}; ∫_u^v x² dx = (v³ − u³)/3, summed over the periods j."""
    with mpmath.workdps(40):
        b, d, g = mpmath.exp(-mpmath.mpf(epsilon0)), mpmath.mpf(step), mpmath.mpf(g)
        a = (1 - b) / (2 * d * (g + (1 - g) * b))

        def period(j):
            lo, mid, hi = j * d, (j + g) * d, (j + 1) * d
            return a * b**j * ((mid**3 - lo**3) + b * (hi**3 - mid**3)) / 3

        return 2 * mpmath.nsum(period, [0, mpmath.inf])


@pytest.mark.parametrize("privacy, former", [({"gdp": {"mu": 1}}, 1.0673), ({"zcdp": {"rho": 0.5}}, 1.0082)])
def test_the_staircase_on_two_integer_cells_measures_exactly_and_states_its_cost(privacy, former):
    # on ℤ the smallest step is 1 while the continuous design's steps are 1/4 and 1/3: before, the floating-point
    # sampler was kept (the l1 ratio printed by the rule: ``former``)
    spec = _counts(privacy, "staircase", "l1", cells=2, adjacency="replace_one")
    solution = dpopt.solve(spec)
    p = solution.mechanism.parameters
    assert _exact(solution) and p["sampler"] == "exact"
    b, m, r = mpmath.exp(-_mp(p["epsilon0_exact"])), p["step_units"], p["boundary_units"]
    with mpmath.workdps(40):
        exact = _second_moment(lambda k: b ** ((abs(k) + m - r) // m), 400 * m)  # tail below b^400
    continuous = _continuous_staircase_second_moment(**{k: p["continuous"][k] for k in ("epsilon0", "step", "g")})
    cost = p[EXACT_COST_KEY]
    assert cost["metric"] == "variance"
    assert cost["exact"] == pytest.approx(float(exact), rel=1e-9)
    assert cost["continuous"] == pytest.approx(float(continuous), rel=1e-9)
    assert cost["ratio"] == pytest.approx(float(exact / continuous), rel=1e-9) and cost["ratio"] > 1.001
    assert dpopt.verify(solution.certificate).passed
    floating = dpopt.solve({**spec, "sampler": "floating_point"})
    assert not floating.mechanism.exact_noise and not _exact(floating)


# ------------------------------------------------------------------ the generalized Gaussian under μ-GDP
def test_the_generalized_gaussian_under_gdp_chooses_the_best_exact_option_and_states_its_cost():
    # μ = 1 on a 3-cell histogram: the discrete Gaussian's certified GDP slope costs about 1/(12σ²) + 2·10⁻⁴ of
    # variance at σ² ≈ 1 (before: the floating-point p = 2 option was kept, ratio 1.0938 > 1.001)
    spec = _counts({"gdp": {"mu": 1}}, "generalized_gaussian")
    solution = dpopt.solve(spec)
    mech = solution.mechanism
    assert _exact(solution) and (mech.p, mech.calibration, mech.exact_noise) == (2, "lattice_gaussian", True)
    s = _mp(mech.parameters["scale_exact"])
    with mpmath.workdps(40):
        exact = 3 * _second_moment(lambda k: mpmath.exp(-((abs(k) / s) ** 2)), 60)
    continuous = 3 * 2.0 / 2  # GG(0, b, 2) = N(0, b²/2) at μ = √2·Δ₂/b = 1, Δ₂ = 1: b² = 2, three cells
    cost = mech.parameters[EXACT_COST_KEY]
    assert cost["metric"] == "l2"
    assert cost["exact"] == pytest.approx(float(exact), rel=1e-9)
    assert cost["continuous"] == pytest.approx(continuous, rel=1e-12)
    assert cost["ratio"] == pytest.approx(float(exact) / continuous, rel=1e-9) and cost["ratio"] > 1.001
    assert any("exact is the default" in note and "ratio" in note for note in mech.notes())
    assert dpopt.verify(solution.certificate).passed
    data = solution.certificate.data
    for key, value in (("ratio", 1.0), ("continuous", 3.2815), ("exact", 3.0), ("metric", "l1")):
        stated = {**cost, key: value}
        parameters = {**data["mechanism"]["parameters"], EXACT_COST_KEY: stated}
        forged = {**data, "mechanism": {**data["mechanism"], "parameters": parameters}}
        assert "mechanism.exact_cost" in {c.claim for c in dpopt.verify(forged).failed}, key
    floating = dpopt.solve({**spec, "sampler": "floating_point"})
    assert not floating.mechanism.exact_noise and not _exact(floating)
    assert floating.certificate["utility"]["value"] == pytest.approx(continuous, rel=1e-12)


# ------------------------------------------------------------------ R²DP on counts
def test_r2dp_on_a_count_states_its_cost_against_the_staircase_bound():
    # unit shifts at ε = 3: the discrete Laplace (one atom, proven optimal among mixtures) against the staircase
    # bound on every continuous design, Geng & Viswanath's minimal variance
    # (2^{-2/3} b^{2/3}(1 + b)^{2/3} + b)/(1 − b)², b = e^{−ε} (Theorem 7): the exact law is better (ratio < 1)
    spec = {"dpopt": 1, "name": "count", "data": {"attributes": {"a": ["x", "y"]}}, "query": {"kind": "count"},
            "adjacency": "add_remove", "privacy": {"pure": {"epsilon": 3.0}}, "mechanism": "r2dp",
            "utility": {"metric": "l2"}}
    solution = dpopt.solve(spec)
    record = solution.mechanism.parameters["design"]
    (scale,) = solution.mechanism.parameters["mixture"]["scales"]
    t = _mp(scale)
    with mpmath.workdps(40):
        exact = 2 * mpmath.tanh(1 / (2 * t)) * mpmath.nsum(lambda k: k * k * mpmath.exp(-k / t), [1, mpmath.inf])
        b = mpmath.exp(-3)
        bound = (mpmath.mpf(2) ** (-mpmath.mpf(2) / 3) * (b * (1 + b)) ** (mpmath.mpf(2) / 3) + b) / (1 - b) ** 2
    cost = record[EXACT_COST_KEY]
    assert cost["exact"] == pytest.approx(float(exact), rel=1e-9)
    assert cost["continuous"] == pytest.approx(float(bound), rel=1e-9)
    assert cost["ratio"] == pytest.approx(float(exact / bound), rel=1e-9) and cost["ratio"] < 1
    assert _exact(solution) and dpopt.verify(solution.certificate).passed
    data = solution.certificate.data
    design = {**record, EXACT_COST_KEY: {**cost, "ratio": 1.0}}
    forged = {**data, "mechanism": {**data["mechanism"], "parameters": {**data["mechanism"]["parameters"],
                                                                        "design": design}}}
    assert "r2dp.comparison" in {c.claim for c in dpopt.verify(forged).failed}
    floating = dpopt.solve({**spec, "sampler": "floating_point"})
    assert not floating.mechanism.exact_noise and not _exact(floating)


# ------------------------------------------------------------------ gaussian_optimal's integer strategy
def test_the_integer_strategy_states_its_cost_as_the_objective_at_the_released_covariance():
    # μ-GDP 2 on the cumulative workload of 8 ages: the released covariance is Var N_ℤ(0, σ_ℤ²)·(MᵀM)⁻¹ (full span
    # under add/remove), its l2 cost tr(W·Cov·Wᵀ), against tr(W Σ Wᵀ) of the continuous Σ; Var N_ℤ by summation
    workload = np.tril(np.ones((8, 8)))
    spec = {**_counts({"gdp": {"mu": 2}}, "gaussian_optimal", cells=8),
            "utility": {"metric": "l2", "workload": workload.tolist()}}
    solution = dpopt.solve(spec)
    p = solution.mechanism.parameters
    assert _exact(solution) and p["sampler"] == "exact"
    s2 = _mp(p["lattice_sigma2"])
    with mpmath.workdps(30):
        variance = float(_second_moment(lambda k: mpmath.exp(-k * k / (2 * s2)), int(40 * mpmath.sqrt(s2)) + 40))
    m = np.array(p["strategy"], dtype=float)
    released = variance * np.linalg.inv(m.T @ m)
    exact = float(np.trace(workload @ released @ workload.T))
    continuous = float(np.trace(workload @ np.array(p["covariance"]) @ workload.T))
    cost = p["design"][EXACT_COST_KEY]
    assert cost["metric"] == "l2"
    assert cost["exact"] == pytest.approx(exact, rel=1e-7)
    assert cost["continuous"] == pytest.approx(continuous, rel=1e-7)
    assert cost["ratio"] == pytest.approx(exact / continuous, rel=1e-7)
    assert cost["ratio"] == pytest.approx(p["design"]["lattice_cost_ratio"], rel=1e-12)
    floating = dpopt.solve({**spec, "sampler": "floating_point"})
    assert floating.mechanism.sampler == "floating_point" and not _exact(floating)
