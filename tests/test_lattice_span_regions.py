"""ci_volume on a proper sensitivity span for the exact Gaussian measurements (issue 39): the region of the full
release (``gaussian``) and of the projected release (``projected_gaussian``), :mod:`dpopt.stats.lattice_span_regions`.

Sources of the expected values:

* **brute-force enumeration**: the pmf of N_ℤ(0, σ²), exp(−k²/(2σ²))/Σ_j exp(−j²/(2σ²)), computed here in 40-digit
  mpmath over |k| ≤ √(160σ²) (the mass beyond is below e^{−80}), multiplied over every tuple η of the box; a region's
  membership of θ = x is evaluated from its definition with the exact projections of the sum-zero span
  (d·P_Vη = dη − (Ση)1, d·P_⊥η = (Ση)1, integers) against the rational σ²r;
* **simulation**: draws of the exact sampler (:func:`sample_discrete_gaussian`) with a fixed seed, the tolerance
  4 standard errors of the mean (derived in the test);
* **the continuous region** on the span: V_k(σ²t_k)^{k/2}, t_k = χ²_k's 1 − α quantile (scipy), V_2 = π,
  V_3 = 4π/3 — the reference of the stated cost.
"""

from __future__ import annotations

import copy
import json
import math
import re
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from scipy import stats

import dpopt
from dpopt.cli import main
from dpopt.noise.discrete_gaussian import sample_discrete_gaussian
from dpopt.stats.lattice_inference import lattice_region
from dpopt.stats.lattice_span_regions import TRUNCATION, projected_statistic, span_region

ALPHA = 0.05
BALL = {2: math.pi, 3: 4 * math.pi / 3}
"""V_k, the volume of the unit ball of ℝ^k."""


def _pmf(sigma2: Fraction) -> tuple[np.ndarray, np.ndarray]:
    """(k, P(η = k)) over |k| ≤ ⌈√(160σ²)⌉ + 1, the pmf in 40-digit mpmath (rounded to double at the end)."""
    top = math.isqrt(math.ceil(160 * sigma2)) + 1
    with mpmath.workdps(40):
        s2 = mpmath.mpf(sigma2.numerator) / sigma2.denominator
        weights = [mpmath.exp(-mpmath.mpf(k * k) / (2 * s2)) for k in range(-top, top + 1)]
        total = mpmath.fsum(weights)
        return np.arange(-top, top + 1), np.array([float(w / total) for w in weights])


def _box(sigma2: Fraction, d: int) -> tuple[list[np.ndarray], np.ndarray]:
    """Every η of the box (d integer arrays) and its product probability."""
    k, p = _pmf(sigma2)
    grids = np.meshgrid(*([k] * d), indexing="ij")
    weight = np.ones(grids[0].shape)
    for axis in range(d):
        weight = weight * p.reshape([-1 if a == axis else 1 for a in range(d)])
    return [g.astype(np.int64) for g in grids], weight


CASES = [(Fraction(1, 2), 3), pytest.param(Fraction(2), 3, marks=pytest.mark.slow),  # 10–14 s
         (Fraction(1, 2), 4), (Fraction(5, 4), 4)]


@pytest.mark.parametrize(("sigma2", "d"), CASES)
def test_coverage_by_enumeration(sigma2, d):
    """θ = x lies in the full release's region iff ‖η‖² ≤ σ²r (its coverage is the full-d region's, ≥ 1 − α); in
    the projected release's region whenever it lies in the full-d one (coverage ≥ the full-d region's)."""
    full = lattice_region([sigma2] * d, ALPHA)
    bound = full.radius * sigma2  # σ²r, rational
    eta, weight = _box(sigma2, d)
    total = sum(eta)
    on_span_d2 = sum((d * e - total) ** 2 for e in eta)  # d²‖P_Vη‖²
    off_span_d2 = d * total**2  # d²‖P_⊥η‖²
    # the full release: ‖P_V(y − x)‖² ≤ σ²r − ‖P_⊥η‖², in integers times the denominator of σ²r
    in_span_region = on_span_d2 * bound.denominator <= (d * d * bound.numerator - off_span_d2 * bound.denominator)
    in_full_region = sum(e * e for e in eta) * bound.denominator <= bound.numerator
    assert np.array_equal(in_span_region, in_full_region)
    coverage = float(weight[in_span_region].sum())
    assert coverage >= full.coverage >= 1 - ALPHA
    # the projected release's conservative region: ‖P_Vη‖² ≤ σ²r
    in_projected = on_span_d2 * bound.denominator <= d * d * bound.numerator
    assert np.all(in_projected[in_full_region])
    assert float(weight[in_projected].sum()) >= coverage
    # its exact-law region: U = d‖P_Vη‖² ≤ u, proven coverage; u − 1 would not do (up to the bound's 10⁻⁹ slack
    # and the 10⁻¹² cut mass per coordinate)
    u, proven = projected_statistic(sigma2, d, ALPHA)
    statistic = on_span_d2 // d  # d‖P_Vη‖² = d²‖P_Vη‖²/d, a whole number
    assert np.array_equal(statistic * d, on_span_d2)
    assert float(weight[statistic <= u].sum()) >= proven >= 1 - ALPHA
    assert float(weight[statistic <= u - 1].sum()) < 1 - ALPHA + 1e-8


@pytest.mark.parametrize(("sigma2", "d"), CASES)
def test_expected_volume_against_enumeration(sigma2, d):
    """E vol = Σ_η P(η) V_k(σ²r − (Ση)²/d)₊^{k/2} over the box; the module's sum is at most ``error`` below it
    (its cut, dτ times the largest volume) and not above it (the cut only removes mass; 10⁻¹² relative for the
    double-precision sums)."""
    k = d - 1
    region = span_region(lattice_region([sigma2] * d, ALPHA), k, sum_zero=True)
    eta, weight = _box(sigma2, d)
    total = sum(eta).astype(float)
    room = np.maximum(float(region.full.radius * sigma2) - total**2 / d, 0.0)
    brute = float(np.sum(weight * BALL[k] * room ** (k / 2)))
    largest = BALL[k] * float(region.full.radius * sigma2) ** (k / 2)
    assert region.error == pytest.approx(d * TRUNCATION * largest, rel=1e-12)
    assert brute - region.error - 1e-12 * brute <= region.expected_volume <= brute * (1 + 1e-12)


@pytest.mark.parametrize(("sigma2", "d"), [(Fraction(2), 3), (Fraction(1, 2), 4)])
def test_expected_volume_by_simulation(sigma2, d):
    """The mean volume over draws of the exact sampler: n = 200,000 i.i.d. volumes of standard deviation s have a
    mean within 4·s/√n of E vol except with probability 6·10⁻⁵ (normal approximation; the seed is fixed)."""
    k, n = d - 1, 200_000
    region = span_region(lattice_region([sigma2] * d, ALPHA), k, sum_zero=True)
    rng = np.random.default_rng(20261207)
    eta = sample_discrete_gaussian(rng, sigma2.numerator, sigma2.denominator, n * d).reshape(n, d)
    room = np.maximum(float(region.full.radius * sigma2) - eta.sum(axis=1).astype(float) ** 2 / d, 0.0)
    volumes = BALL[k] * room ** (k / 2)
    assert abs(volumes.mean() - region.expected_volume) <= 4 * volumes.std(ddof=1) / math.sqrt(n)


# ---------------------------------------------------------------- the families
HIST3 = {"data": {"attributes": {"a": ["x", "y", "z"]}, "n": 100}, "query": {"kind": "histogram", "attribute": "a"}}
TABLE = {"data": {"attributes": {"a": ["x", "y"], "b": ["u", "v"]}, "n": 100},
         "query": {"kind": "contingency_table", "attributes": ["a", "b"]}}
TARGETS = {"zcdp": {"zcdp": {"rho": 0.5}}, "gdp": {"gdp": {"mu": 1.0}},
           "approx": {"approx": {"epsilon": 1.0, "delta": 1e-6}}, "pdp": {"pdp": {"epsilon": 5.0, "delta": 0.1}}}


def _spec(family: str, query: dict, target: str) -> dict:
    return {"dpopt": 1, "name": "span region", **query, "adjacency": {"kind": "replace_one"},
            "privacy": TARGETS[target], "mechanism": family, "utility": {"metric": "ci_volume", "alpha": ALPHA}}


RUNS = [(family, query, target) for family in ("gaussian", "projected_gaussian") for query in ("hist3", "table")
        for target in ("zcdp", "gdp", "approx")] + [("gaussian", "hist3", "pdp"), ("gaussian", "table", "pdp")]


@pytest.mark.parametrize(("family", "query", "target"), RUNS)
def test_families_measure_exactly_and_verify(family, query, target):
    spec = _spec(family, HIST3 if query == "hist3" else TABLE, target)
    solution = dpopt.solve(spec)
    mechanism, cert = solution.mechanism, solution.certificate
    d = 3 if query == "hist3" else 4
    k = d - 1
    assert mechanism.sampler == "exact" and "idealized" not in json.dumps(cert.data)
    verification = dpopt.verify(cert)
    assert verification.passed, [(c.claim, c.detail) for c in verification.failed]
    claims = {c.claim: c for c in verification.checks}
    assert claims["mechanism.exact_cost"].passed and claims["utility.sampler"].passed
    method, value = cert["utility"]["method"], cert["utility"]["value"]
    assert method.startswith("exact law of the discrete noise") and "proven coverage" in method
    cost = cert["mechanism"]["parameters"]["exact_cost"]
    sigma = cert["mechanism"]["parameters"]["sigma"]
    continuous = BALL[k] * (sigma**2 * stats.chi2.isf(ALPHA, k)) ** (k / 2)
    assert cost["metric"] == "ci_volume" and cost["exact"] == value
    assert cost["continuous"] == pytest.approx(continuous, rel=1e-12)
    assert cost["ratio"] == pytest.approx(value / continuous, rel=1e-12)
    bound = re.search(r"u = (\d+);", method)
    if bound is not None:  # the projected release's exact-law ball d‖P_V(ỹ − θ)‖² ≤ u: V_k(u/d)^{k/2}
        assert value == pytest.approx(BALL[k] * (int(bound.group(1)) / d) ** (k / 2), rel=1e-12)
        return
    radius = Fraction(re.search(r"r = (\d+/\d+|\d+) ", method).group(1))
    largest = BALL[k] * float(radius * mechanism.lattice_sigma2) ** (k / 2)
    if family == "projected_gaussian":  # deterministic: V_k(σ_ℤ²r)^{k/2}
        assert value == pytest.approx(largest, rel=1e-12)
    else:  # the expected volume of a ball of radius² ≤ σ_ℤ²r, positive
        assert 0 < value < largest


@pytest.mark.parametrize("query", ["hist3", "table"])
@pytest.mark.parametrize("rho", [0.5, 0.0005])
def test_the_full_release_region_is_no_larger_than_the_projected_one(query, rho):
    """At the same σ_ℤ² the full release y computes the projected release, so ``gaussian`` may take the projected
    region; its own ball has radius² σ_ℤ²r − ‖P_⊥η‖² ≤ σ_ℤ²r, the conservative projected one's. At ρ = 0.0005
    (σ_ℤ² ≈ 2000, the joint law beyond its grid) the projected region is the conservative one, and the full
    release's own region is strictly smaller."""
    q = HIST3 if query == "hist3" else TABLE
    spec = {**_spec("gaussian", q, "zcdp"), "privacy": {"zcdp": {"rho": rho}}}
    full = dpopt.solve(spec)
    projected = dpopt.solve({**spec, "mechanism": "projected_gaussian"})
    assert full.mechanism.lattice_sigma2 == projected.mechanism.lattice_sigma2
    assert full.certificate["utility"]["value"] <= projected.certificate["utility"]["value"]
    if rho == 0.0005:
        assert "r = " in projected.certificate["utility"]["method"]
        assert full.certificate["utility"]["value"] < projected.certificate["utility"]["value"]


@pytest.mark.parametrize("family", ["gaussian", "projected_gaussian"])
def test_forged_radius_or_cost_fails_verification(family):
    for rho in (0.5, 0.0005):  # the exact-law region (u) and the full-d radius's (r)
        cert = dpopt.solve({**_spec(family, HIST3, "zcdp"), "privacy": {"zcdp": {"rho": rho}}}).certificate.data
        forged = copy.deepcopy(cert)
        method = forged["utility"]["method"]
        bound = re.search(r"u = (\d+);", method)
        if bound is not None:
            forged["utility"]["method"] = method.replace(bound.group(0), f"u = {int(bound.group(1)) - 1};")
        else:
            radius = re.search(r"r = (\d+/\d+) ", method).group(1)
            smaller = Fraction(radius) * Fraction(9, 10)
            forged["utility"]["method"] = method.replace(f"r = {radius}", f"r = {smaller}")
        assert "utility" in {c.claim for c in dpopt.verify(forged).failed}
    forged = copy.deepcopy(cert)
    forged["mechanism"]["parameters"]["exact_cost"]["ratio"] = 1.0
    assert "mechanism.exact_cost" in {c.claim for c in dpopt.verify(forged).failed}
    forged = copy.deepcopy(cert)
    cost = forged["mechanism"]["parameters"]["exact_cost"]
    cost["continuous"], cost["ratio"] = cost["exact"], 1.0  # consistent in itself, not the continuous region
    assert "mechanism.exact_cost" in {c.claim for c in dpopt.verify(forged).failed}
    forged = copy.deepcopy(cert)
    del forged["mechanism"]["parameters"]["exact_cost"]
    assert "mechanism.exact_cost" in {c.claim for c in dpopt.verify(forged).failed}


def test_cli_solve_and_verify(tmp_path, capsys):
    import yaml

    spec = tmp_path / "hist3.yaml"
    spec.write_text(yaml.safe_dump(_spec("gaussian", HIST3, "gdp")))
    assert main(["solve", str(spec), "--out", str(tmp_path / "out")]) == 0
    assert main(["verify", str(tmp_path / "out" / "certificate.json")]) == 0
    assert "idealized" not in (tmp_path / "out" / "certificate.json").read_text()


def test_another_proper_span_estimates_the_volume_from_the_exact_sampler():
    """A linear query whose replace-one span is not the sum-zero one (rank 2 of 4 coordinates): the region is
    the same (proven coverage), its expected volume a Monte Carlo estimate of the exact sampler with a 95% interval,
    positive and below the largest ball V_k(σ_ℤ²r)^{k/2}."""
    spec = {"dpopt": 1, "name": "span region", "data": {"attributes": {"a": ["x", "y", "z"]}, "n": 100},
            "query": {"kind": "linear", "attribute": "a", "matrix": [[1, 1, 1], [1, 0, 0], [0, 1, 0], [0, 0, 1]]},
            "adjacency": {"kind": "replace_one"}, "privacy": TARGETS["zcdp"], "mechanism": "gaussian",
            "utility": {"metric": "ci_volume", "alpha": ALPHA}}
    solution = dpopt.solve(spec)
    cert = solution.certificate
    assert solution.mechanism.sampler == "exact" and "idealized" not in json.dumps(cert.data)
    utility = cert["utility"]
    assert utility["method"].startswith("Monte Carlo") and "proven coverage" in utility["method"]
    low, high = utility["ci95"]
    radius = Fraction(re.search(r"r = (\d+/\d+|\d+) ", utility["method"]).group(1))
    assert 0 < low <= utility["value"] <= high < BALL[2] * float(radius * solution.mechanism.lattice_sigma2)
    assert dpopt.verify(cert).passed


def test_a_sum_beyond_the_convolution_budget_is_estimated_from_the_exact_sampler():
    """ρ = 10⁻⁸ (σ_ℤ² = 10⁸): the law of T = Σ η_i would need 2·3·7.1σ + 1 > MAX_SUPPORT points; the region stays
    exact with its proven coverage, its expected volume a Monte Carlo estimate of the exact sampler. At this σ the
    discrete law is the continuous one to O(σ⁻²): T²/(dσ²) ~ χ²_1, so E vol = πσ²E(r − X)₊, X ~ χ²_1 (numerical
    integration); the estimate lies within 4 of its standard errors (its 95% half-width / 1.96) of that."""
    from scipy import integrate

    spec = {**_spec("gaussian", HIST3, "zcdp"), "privacy": {"zcdp": {"rho": 1e-8}}}
    solution = dpopt.solve(spec)
    cert = solution.certificate
    utility = cert["utility"]
    assert solution.mechanism.sampler == "exact" and utility["method"].startswith("Monte Carlo")
    radius = float(Fraction(re.search(r"r = (\d+/\d+|\d+) ", utility["method"]).group(1)))
    limit = math.pi * float(solution.mechanism.lattice_sigma2) * integrate.quad(
        lambda x: (radius - x) * stats.chi2.pdf(x, 1), 0, radius)[0]
    se = (utility["ci95"][1] - utility["ci95"][0]) / (2 * 1.96)
    assert abs(utility["value"] - limit) <= 4 * se
    assert dpopt.verify(cert).passed
