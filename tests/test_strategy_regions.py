"""``gaussian_optimal`` under ``ci_volume`` measured exactly: the integer strategy's confidence region
(:mod:`dpopt.mechanisms.strategy_regions`).

Sources of the expected values:

* coverage: the product pmf of the discrete Gaussian, p(k) ∝ e^{−k²/(2σ²)} normalised by direct summation in
  mpmath, summed over every η of a box (the mass outside it is below 10⁻²⁰), with the release x̂ computed from
  y = Mx + η in exact fractions and x ∈ CR(x̂) tested from the region's definition;
* determinants: numpy's floating-point ``det`` (rounded) against the exact integer one;
* volume: a hit count of the ellipsoid {t : ‖MBt‖² ≤ σ_ℤ² r} among uniform points of a box that contains it (B an
  orthonormal basis of the span from numpy's QR), 4 standard errors;
* the stated cost: the continuous ellipsoid V_k t^{k/2} √pdet Σ (t the χ²_k quantile from scipy, pdet from numpy's
  eigenvalues of the recorded Σ) and the region's V_k (σ_ℤ² r)^{k/2}/√det(BᵀMᵀMB) recomputed here in floating point;
* the release: x_⊥ + A(MA)⁻¹(y − Mx_⊥) in exact fractions from the same η the mechanism draws (same seed).
"""

from __future__ import annotations

import copy
import itertools
import json
import math
from fractions import Fraction
from pathlib import Path

import mpmath
import numpy as np
import pytest
import yaml
from scipy import stats

import dpopt
from dpopt.cli import main
from dpopt.mechanisms.base import IDEALIZED_NUMERICS
from dpopt.mechanisms.exact_cost import EXACT_COST_CLAIM, EXACT_COST_KEY
from dpopt.mechanisms.lattice import _inference
from dpopt.core.integer_matrices import integer_determinant
from dpopt.mechanisms.strategy_regions import integer_span_basis, strategy_region
from dpopt.noise.discrete_gaussian import sample_discrete_gaussian
from dpopt.stats import lattice_inference
from dpopt.stats.lattice_inference import EXACT_LAW, lattice_region

SIGMA2 = Fraction(3, 2)
"""A small lattice variance: the law is far from Gaussian (P(η = 0) ≈ 0.33), so the coverage is a real test."""

BOX = 12
"""|η_i| ≤ 12 enumerated: P(|η| > 12) ≤ 2e^{−144/3}/(1 − e^{−1}) < 10⁻²⁰ at σ² = 3/2."""

FULL = (np.array([[3, 1], [1, 2]]), np.eye(2, dtype=np.int64), (4, 7))
"""A full span of ℝ²: M, the integer basis A = I, the counts x."""

PROPER = (np.array([[2, -1, 0], [1, 1, -3]]), np.array([[1, 0], [-1, 1], [0, -1]]), (5, 2, 3))
"""The sum-zero span of ℝ³ (k = 2): a 2 × 3 strategy M, an integer basis A of the span, the counts x."""


def _pmf():
    """The discrete Gaussian's pmf at σ² = 3/2 on −BOX..BOX, normalised over |k| ≤ 60 (30 digits)."""
    with mpmath.workdps(30):
        s2 = mpmath.mpf(SIGMA2.numerator) / SIGMA2.denominator
        weight = {k: mpmath.exp(-k * k / (2 * s2)) for k in range(-60, 61)}
        total = mpmath.fsum(weight.values())
        return {k: weight[k] / total for k in range(-BOX, BOX + 1)}


def _solve(matrix: list[list[Fraction]], rhs: list[Fraction]) -> list[Fraction]:
    """The solution of a square system in exact fractions (Gauss–Jordan)."""
    n = len(rhs)
    rows = [list(row) + [b] for row, b in zip(matrix, rhs)]
    for c in range(n):
        p = next(i for i in range(c, n) if rows[i][c] != 0)
        rows[c], rows[p] = rows[p], rows[c]
        rows[c] = [v / rows[c][c] for v in rows[c]]
        for i in range(n):
            if i != c and rows[i][c] != 0:
                rows[i] = [a - rows[i][c] * b for a, b in zip(rows[i], rows[c])]
    return [row[-1] for row in rows]


def _release(m, a, x, eta) -> list[Fraction]:
    """x̂ = x_⊥ + A(MA)⁻¹(y − Mx_⊥), y = Mx + η, x_⊥ the component of x off the span (exact fractions)."""
    d = len(x)
    x = [Fraction(int(v)) for v in x]
    if a.shape[1] == d:
        perp = [Fraction(0)] * d
    else:  # the span is sum-zero: x_⊥ = (Σx/d)·1
        perp = [sum(x) / d] * d
    mi = [[int(v) for v in row] for row in m]
    y = [sum(r[j] * x[j] for j in range(d)) + int(e) for r, e in zip(mi, eta)]
    rhs = [yi - sum(r[j] * perp[j] for j in range(d)) for yi, r in zip(y, mi)]
    ma = [[Fraction(v) for v in row] for row in (m @ a).tolist()]
    t = _solve(ma, rhs)
    return [perp[i] + sum(int(a[i, j]) * t[j] for j in range(len(t))) for i in range(d)]


@pytest.mark.parametrize("case", [FULL, PROPER], ids=["full span", "sum-zero span"])
def test_the_region_covers_with_the_proven_probability_by_enumeration(case):
    m, a, x = case
    alpha = 0.1
    region = strategy_region(m, SIGMA2, lambda: a, alpha)
    r, k = region.region.radius, m.shape[0]
    pmf = _pmf()
    covered, disagreements = mpmath.mpf(0), 0
    for eta in itertools.product(range(-BOX, BOX + 1), repeat=k):
        released = _release(m, a, x, eta)
        gap = [xi - ri for xi, ri in zip(x, released)]
        shift = [sum(int(mij) * g for mij, g in zip(row, gap)) for row in m.tolist()]
        inside = sum(s * s for s in shift) <= SIGMA2 * r  # x ∈ CR(x̂), from the region's definition
        disagreements += inside != (sum(e * e for e in eta) <= SIGMA2 * r)  # the event ‖η‖² ≤ σ_ℤ² r
        if inside:
            covered += mpmath.fprod(pmf[e] for e in eta)
    assert disagreements == 0  # the region's coverage is the full-coordinate coverage, η by η
    assert covered >= 1 - alpha
    assert covered >= region.region.coverage  # the stated coverage is a proven lower bound
    assert region.region.coverage >= 1 - alpha


def test_the_exact_determinant_agrees_with_numpy():
    rng = np.random.default_rng(3)
    for n in range(1, 6):
        for _ in range(20):
            m = rng.integers(-9, 10, size=(n, n))
            assert integer_determinant(m) == round(float(np.linalg.det(m)))
    assert integer_determinant([[2, 4], [1, 2]]) == 0
    assert integer_determinant([[0, 1], [1, 0]]) == -1  # a row swap changes the sign
    with pytest.raises(ValueError):
        integer_determinant([[0.5, 1], [1, 0]])


def test_the_integer_span_basis_keeps_independent_generators():
    generators = np.array([[1, -1, 0], [-1, 1, 0], [0, 1, -1], [1, 0, -1]])  # replace-one moves of 3 cells
    basis = integer_span_basis(generators, 2)
    assert basis.T.tolist() == [[1, -1, 0], [0, 1, -1]]
    with pytest.raises(ValueError):
        integer_span_basis(generators, 3)


@pytest.mark.parametrize("case", [FULL, PROPER], ids=["full span", "sum-zero span"])
def test_the_volume_agrees_with_a_hit_count_of_the_ellipsoid(case):
    m, a, _ = case
    region = strategy_region(m, SIGMA2, lambda: a, 0.1)
    s = float(SIGMA2 * region.region.radius)
    basis = np.linalg.qr(a.astype(float))[0]  # orthonormal basis of the span
    mb = m.astype(float) @ basis
    half = math.sqrt(s) * np.linalg.norm(np.linalg.inv(mb), axis=1)  # t = (MB)⁻¹u, ‖u‖² ≤ s: |t_i| ≤ √s‖row_i‖
    draws = 400_000
    t = np.random.default_rng(11).uniform(-half, half, size=(draws, len(half)))
    hits = float(np.mean(np.sum((t @ mb.T) ** 2, axis=1) <= s))
    box = float(np.prod(2 * half))
    se = box * math.sqrt(hits * (1 - hits) / draws)  # binomial standard error of the hit fraction
    assert abs(box * hits - region.volume) <= 4 * se


# ------------------------------------------------------------------ end to end
def _spec(target: str, adjacency: str, table: bool) -> dict:
    attributes = {"a": ["x", "y"], "b": ["u", "v"]} if table else {"a": ["x", "y", "z"]}
    query = {"kind": "contingency_table", "attributes": ["a", "b"]} if table else {"kind": "histogram",
                                                                                    "attribute": "a"}
    privacy = {"zcdp": {"rho": 0.5}, "gdp": {"mu": 1.0}, "approx": {"epsilon": 1.0, "delta": 1e-6}}[target]
    return {"dpopt": 1, "name": "region", "data": {"attributes": attributes, "n": 100}, "query": query,
            "adjacency": {"kind": adjacency}, "privacy": {target: privacy}, "mechanism": "gaussian_optimal",
            "utility": {"metric": "ci_volume"}}


CONFIGS = [(t, adj, table) for table in (False, True) for adj in ("add_remove", "replace_one")
           for t in ("zcdp", "gdp", "approx")]


@pytest.mark.parametrize("target,adjacency,table", CONFIGS,
                         ids=[f"{'2x2' if tb else 'hist3'}-{adj}-{t}" for t, adj, tb in CONFIGS])
def test_ci_volume_measures_exactly_and_states_its_cost(target, adjacency, table):
    spec = _spec(target, adjacency, table)
    solution = dpopt.solve(spec)
    mech, cert = solution.mechanism, solution.certificate.data
    d = mech.dimension
    k = d if adjacency == "add_remove" else d - 1  # replace-one keeps the total: the sum-zero span
    assert mech.sampler == "exact"
    assert "idealized" not in json.dumps(cert) and IDEALIZED_NUMERICS not in cert["mechanism"]["notes"]
    assert mech.strategy.shape == (k, d)
    assert cert["utility"]["method"].startswith(EXACT_LAW)
    verification = dpopt.verify(cert)
    assert verification.passed, [c.claim for c in verification.failed]
    assert {"utility.sampler", EXACT_COST_CLAIM} <= {c.claim for c in verification.checks}

    alpha = spec["utility"].get("alpha", 0.05)
    sigma = np.array(cert["mechanism"]["parameters"]["covariance"])
    log_ball = 0.5 * k * math.log(math.pi) - math.lgamma(0.5 * k + 1)
    pdet = np.sort(np.linalg.eigvalsh(sigma))[-k:]
    continuous = math.exp(log_ball + 0.5 * k * math.log(stats.chi2.ppf(1 - alpha, k)) + 0.5 * np.sum(np.log(pdet)))
    basis = np.linalg.svd(np.eye(d) - (0 if k == d else 1 / d))[0][:, :k]  # orthonormal basis of the span
    mb = mech.strategy.astype(float) @ basis
    s2 = mech.lattice_sigma2
    r = lattice_region((s2,) * k, alpha).radius
    exact = math.exp(log_ball + 0.5 * k * math.log(float(s2 * r)) - 0.5 * math.log(np.linalg.det(mb.T @ mb)))
    cost = mech.design_info[EXACT_COST_KEY]
    assert cost["metric"] == "ci_volume"
    assert cost["continuous"] == pytest.approx(continuous, rel=1e-9)
    assert cost["exact"] == pytest.approx(exact, rel=1e-9) and cert["utility"]["value"] == pytest.approx(exact,
                                                                                                      rel=1e-9)
    assert 1 <= cost["ratio"] <= 1.001  # the 0.1%: measured 1.0002–1.0008 over these configurations


def test_the_release_on_a_proper_span_is_the_bijection_of_the_k_measurements():
    mech = dpopt.solve(_spec("zcdp", "replace_one", False)).mechanism
    x = np.array([50, 30, 20])
    released = mech.release(x.astype(float), np.random.default_rng(7))
    s2 = mech.lattice_sigma2
    eta = sample_discrete_gaussian(np.random.default_rng(7), s2.numerator, s2.denominator, 2)
    expected = _release(mech.strategy, np.array([[1, 0], [-1, 1], [0, -1]]), x, eta)
    np.testing.assert_allclose(released, [float(v) for v in expected], atol=1e-6)
    assert released.sum() == pytest.approx(100, abs=1e-9)  # the public total is kept


def test_forged_volume_and_cost_fail_verification():
    cert = dpopt.solve(_spec("zcdp", "add_remove", True)).certificate.data
    forged = copy.deepcopy(cert)
    forged["utility"]["value"] *= 0.99
    assert "utility" in {c.claim for c in dpopt.verify(forged).failed}
    design = cert["mechanism"]["parameters"]["design"]
    for key, value in (("ratio", 1.0), ("continuous", design[EXACT_COST_KEY]["continuous"] * 1.01)):
        forged = copy.deepcopy(cert)
        cost = forged["mechanism"]["parameters"]["design"][EXACT_COST_KEY]
        cost[key] = value
        if key == "continuous":  # a consistent ratio: only the re-derived continuous value exposes it
            cost["ratio"] = cost["exact"] / value
            forged["mechanism"]["parameters"]["design"]["lattice_cost_ratio"] = cost["ratio"]
        assert EXACT_COST_CLAIM in {c.claim for c in dpopt.verify(forged).failed}
    forged = copy.deepcopy(cert)
    forged["mechanism"]["parameters"]["design"]["lattice_cost_ratio"] = 1.0
    assert EXACT_COST_CLAIM in {c.claim for c in dpopt.verify(forged).failed}


def test_a_forged_l2_cost_fails_verification():
    spec = {**_spec("zcdp", "add_remove", False), "utility": {"metric": "l2", "workload": [[1, 1, 0], [0, 1, 1]]}}
    cert = dpopt.solve(spec).certificate.data
    assert dpopt.verify(cert).passed
    forged = copy.deepcopy(cert)
    cost = forged["mechanism"]["parameters"]["design"][EXACT_COST_KEY]
    cost["continuous"] *= 1.01
    cost["ratio"] = cost["exact"] / cost["continuous"]
    forged["mechanism"]["parameters"]["design"]["lattice_cost_ratio"] = cost["ratio"]
    assert EXACT_COST_CLAIM in {c.claim for c in dpopt.verify(forged).failed}


def test_six_noisy_coordinates_measure_exactly_and_verify():
    """Six i.i.d. coordinates: the region is a convolution power (dpopt.stats.convolution_power), within budget."""
    spec = _spec("zcdp", "add_remove", False)
    spec["data"]["attributes"]["a"] = [f"v{i}" for i in range(6)]
    solution = dpopt.solve(spec)
    assert solution.mechanism.sampler == "exact"
    assert dpopt.verify(solution.certificate.data).passed


def test_beyond_the_budget_keep_the_floating_point_sampler_and_say_why(monkeypatch):
    """80 coordinates at ρ = 5·10⁻⁷ with MAX_POWER_SUPPORT lowered to 2¹⁶ (a test hook): σ_ℤ² ≈ 10⁶, the region's
    law needs 1.02·d·⌈(d + 1)/(2·VOLUME_EXCESS)⌉ + d ≈ 3.0·10⁶ points, and the grid coarsened to 2¹⁶ points has
    (d + 1)h > t/1000 (MAX_RADIUS_EXCESS, dpopt.stats.lattice_inference). At the real budget the coarsened grid
    serves (test_lattice_grouped_regions)."""
    monkeypatch.setattr(lattice_inference, "MAX_POWER_SUPPORT", 2**16)
    _inference.cache_clear()
    spec = _spec("zcdp", "add_remove", False)
    spec["data"]["attributes"]["a"] = [f"v{i}" for i in range(80)]
    spec["privacy"] = {"zcdp": {"rho": 5e-7}}
    try:
        solution = dpopt.solve(spec)
        assert solution.mechanism.sampler == "floating_point"
        assert any("convolution budget" in n for n in solution.certificate.data["mechanism"]["notes"])
        assert dpopt.verify(solution.certificate.data).passed
    finally:
        _inference.cache_clear()


def test_cli_solve_and_verify(tmp_path, capsys):
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(_spec("gdp", "replace_one", True)))
    assert main(["solve", str(path), "--out", str(tmp_path / "out")]) == 0
    cert = json.loads((tmp_path / "out" / "certificate.json").read_text())
    assert cert["mechanism"]["parameters"]["sampler"] == "exact" and "idealized" not in json.dumps(cert)
    assert main(["verify", str(tmp_path / "out" / "certificate.json")]) == 0


def test_a_semi_dp_span_of_rank_one_measures_exactly():
    # the 2 × 2 table with both margins published: the span is that of (1, −1, −1, 1) (its listed moves give the
    # integer basis A), one strategy row
    spec = yaml.safe_load((Path(__file__).resolve().parents[1] / "specs" / "table_2x2_margins_gdp.yaml").read_text())
    solution = dpopt.solve({**spec, "mechanism": "gaussian_optimal", "utility": {"metric": "ci_volume"}})
    mech = solution.mechanism
    assert mech.sampler == "exact" and mech.strategy.shape == (1, 4)
    assert "idealized" not in json.dumps(solution.certificate.data)
    assert dpopt.verify(solution.certificate.data).passed
