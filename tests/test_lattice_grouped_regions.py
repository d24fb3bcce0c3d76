"""Regions of unequal variances (grouped by equal σ_i²) and of many i.i.d. coordinates (a coarsened grid): the
convolution-power path of dpopt.stats.lattice_inference beyond the direct convolutions' budget (issue 39).

Sources of the expected values:

* **brute-force enumeration**: the law of Q = Σ_i η_i²/σ_i² for independent N_ℤ(0, σ_i²), the pmf
  exp(−k²/(2σ²))/Σ_j exp(−j²/(2σ²)) in 40-digit mpmath over |k| ≤ √(160σ²) (the mass beyond is below e^{−80}),
  the values of Q exact rationals; its exact 1 − α quantile q and its distribution function at the radius;
* **the direct convolutions** of the module's first path (``_Coverage``: d − 1 np.convolve of the same grid laws,
  non-negative sums), against which the grouped powers and their FFT products must agree within the subtracted
  slack;
* **the χ² law at large σ²**: each η²/σ² within ε₁ = 0.4/σ + 0.2/σ² of Z² in Kolmogorov distance (derived in
  tests/test_lattice_inference.py), so the exact quantile lies in [χ²_d.isf(α + dε₁), χ²_d.isf(α − dε₁)];
* the module's guarantees: coverage ≥ 1 − α proven (a lower bound on the exact coverage), r < q + (d + 1)h, and on
  a coarsened grid (d + 1)h ≤ MAX_RADIUS_EXCESS·t by construction.
"""

from __future__ import annotations

import json
import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
import yaml
from scipy import stats

import dpopt
from dpopt.cli import main
from dpopt.mechanisms import lattice as lattice_module
from dpopt.noise.discrete_gaussian import sample_discrete_gaussian
from dpopt.stats import lattice_inference as li

ALPHA = 0.05


def _folded(sigma2: Fraction) -> dict[int, mpmath.mpf]:
    """P(|η| = k), k ≥ 0, for η ~ N_ℤ(0, σ²), over |k| ≤ √(160σ²) (40 digits)."""
    top = math.isqrt(math.ceil(160 * sigma2)) + 1
    s2 = mpmath.mpf(sigma2.numerator) / sigma2.denominator
    weights = {k: mpmath.exp(-mpmath.mpf(k * k) / (2 * s2)) for k in range(-top, top + 1)}
    total = mpmath.fsum(weights.values())
    out: dict[int, mpmath.mpf] = {}
    for k, w in weights.items():
        out[abs(k)] = out.get(abs(k), 0) + w / total
    return out


def _q_law(sigma2s, cap: Fraction) -> list[tuple[Fraction, mpmath.mpf]]:
    """The exact law of Q = Σ η_i²/σ_i² on [0, cap], sorted (values above cap cannot come back below: every term is
    non-negative)."""
    with mpmath.workdps(40):
        law = {Fraction(0): mpmath.mpf(1)}
        for s2 in sigma2s:
            step: dict[Fraction, mpmath.mpf] = {}
            for k, pk in sorted(_folded(s2).items()):
                term = Fraction(k * k) / s2
                if term > cap:
                    break
                for q, p in law.items():
                    if q + term <= cap:
                        step[q + term] = step.get(q + term, 0) + p * pk
            law = step
        return sorted(law.items())


def _quantile(law) -> tuple[Fraction, float]:
    """The exact 1 − α quantile q of the law and its distribution function there."""
    cumulative = mpmath.mpf(0)
    for q, p in law:
        cumulative += p
        if cumulative >= 1 - ALPHA:
            return q, float(cumulative)
    raise AssertionError("the cap is below the quantile")


def _coverage_at(law, radius: Fraction) -> float:
    return float(mpmath.fsum(p for q, p in law if q <= radius))


# ------------------------------------------------------------ unequal variances: groups of equal σ_i²
MIXED = (Fraction(1, 2), Fraction(1, 2), Fraction(9, 4), Fraction(9, 4), Fraction(4))


def test_grouped_region_on_the_whole_grid_is_the_exact_quantile():
    """Five coordinates in three groups (1/2, 1/2, 9/4, 9/4, 4): beyond the direct budget, and the whole grid
    h = gcd(2, 4/9, 1/4) = 1/36 is affordable (1/(σ_i²h) = 72, 16, 9 whole: k_i = η_i²/(σ_i²h) exactly), so the
    radius is the exact quantile q of Q (its distribution function there checked away from the slack)."""
    region = li.lattice_region(MIXED, ALPHA)
    assert region.grid == Fraction(1, 36)
    law = _q_law(MIXED, Fraction(20))  # χ²_5's 0.95 quantile is 11.07
    q, at_q = _quantile(law)
    assert at_q >= 1 - ALPHA + 1e-6  # far from the slack (5·FLOAT_SLACK + the FFT's bound)
    assert region.radius == q
    assert at_q >= region.coverage >= 1 - ALPHA
    assert region.coverage == pytest.approx(at_q, abs=5 * li.FLOAT_SLACK + 1e-8)
    assert "no grid excess" in region.describe()


UNEVEN = (Fraction(11, 5), Fraction(9, 4), Fraction(17, 3))


def test_grouped_region_on_the_excess_grid_against_enumeration_and_the_direct_path(monkeypatch):
    """Three unequal variances on the grid of VOLUME_EXCESS (the whole grid 1/(11·9·17) forbidden by setting
    INTEGER_GRID_SUPPORT to 0; its support ⌈1.1·t·1683⌉ + 3 exceeds the grid's ⌈1.02·3·4096⌉ + 3): the proven
    coverage is below the exact coverage at r and ≥ 1 − α, q ≤ r < q + (d + 1)h, and each bound equals the direct
    path's (d − 1 np.convolve of the same laws) within the subtracted slack."""
    monkeypatch.setattr(li, "INTEGER_GRID_SUPPORT", 0)
    region = li._power_region(UNEVEN, ALPHA)
    d, h = 3, region.grid
    t = Fraction(math.ceil(stats.chi2.isf(ALPHA, d) * 10**6), 10**6)
    assert h == t / (d * li.GRID_STEPS)
    law = _q_law(UNEVEN, Fraction(20))
    q, at_q = _quantile(law)
    assert _coverage_at(law, region.radius) >= region.coverage >= 1 - ALPHA
    assert q <= region.radius < q + (d + 1) * h
    j = int(region.radius / h)
    direct = li._Coverage(UNEVEN, h, j)
    # the direct bound is P(Σ k_i ≤ j) − FLOAT_SLACK; the grouped one subtracts d·FLOAT_SLACK and the FFT's bound
    assert direct(j) + li.FLOAT_SLACK - region.coverage == pytest.approx(
        d * li.FLOAT_SLACK + region.fft_error, abs=1e-12)
    assert direct(j - 1) + li.FLOAT_SLACK - (d * li.FLOAT_SLACK + region.fft_error) < 1 - ALPHA  # r is the first
    assert "times the region at q" in region.describe()


def test_up_to_four_coordinates_the_direct_path_still_serves():
    """Regions issued before keep their radius: three unequal variances take the d − 1 direct convolutions on
    h = t/(4096d) (grid None), whatever the whole grid would give."""
    region = li.lattice_region(UNEVEN, ALPHA)
    assert region.grid is None and region.fft_error == 0.0


def test_unequal_variances_beyond_the_group_budget_are_refused_at_once():
    """200 distinct variances at d = 200: the support limit 2²⁴/200 = 83,886 allows ⌊(83,886 − 202)/(1.02·200)⌋ =
    410 steps, so (d + 1)h = 201t/(200·410) > t/1000 (MAX_RADIUS_EXCESS): None, without convolving."""
    sigma2s = [Fraction(10**4 + 37 * i) for i in range(200)]
    assert li.lattice_region(sigma2s, ALPHA) is None


# ------------------------------------------------------------ many i.i.d. coordinates: the coarsened grid
@pytest.mark.slow
def test_coarsened_grid_at_large_variance_is_within_its_stated_excess():
    """80 coordinates at σ² = 10¹⁰: the grid of VOLUME_EXCESS needs ⌈1.02·80·36,819⌉ + 80 ≈ 3.0·10⁶ points > 2²¹, so
    the steps are coarsened to ⌊(2²¹ − 82)/(1.02·80)⌋; the radius lies in [χ²_80.isf(α + dε₁), χ²_80.isf(α − dε₁)
    + (d + 1)h], and the stated factor is the module's bound."""
    d, sigma = 80, 10**5
    region = li.lattice_region([Fraction(sigma**2)] * d, ALPHA)
    t = Fraction(math.ceil(stats.chi2.isf(ALPHA, d) * 10**6), 10**6)
    steps = math.floor((li.MAX_POWER_SUPPORT - 2 - d) / (1.02 * d))
    assert region.grid == t / (d * steps) and (d + 1) * region.grid <= t / 1000
    eps = d * (0.4 / sigma + 0.2 / sigma**2)
    low, high = stats.chi2.isf(ALPHA + eps, d), stats.chi2.isf(ALPHA - eps - 1e-6, d)
    assert low <= float(region.radius) < high + float((d + 1) * region.grid)
    assert region.coverage >= 1 - ALPHA
    stated = float(region.describe().split("so ≤ ")[1].split(" ")[0])
    # the statement: (r/(r − (d + 1)h))^{d/2}, a bound on (r/q)^{d/2} as q > r − (d + 1)h; the χ² bounds on q only
    # confirm that it is at least the excess over the largest q they allow
    r, excess = float(region.radius), float((d + 1) * region.grid)
    assert stated == pytest.approx((r / (r - excess)) ** (d / 2), rel=1e-5)
    assert (r / high) ** (d / 2) <= stated


def test_iid_beyond_the_coarsened_budget_is_refused_at_once():
    """σ² = 10⁶ at d = 2,100: the coarsened grid has ⌊(2²¹ − 2,102)/(1.02·2,100)⌋ = 978 steps, (d + 1)/(d·978) >
    10⁻³: None, without convolving (d = 66 keeps its grid and radius: test_lattice_inference)."""
    assert li.lattice_region([Fraction(10**6)] * 2100, ALPHA) is None


# ------------------------------------------------------------ the families end to end
def _weighted_counts(cells: int, rho: float) -> dict:
    """A diagonal linear query of whole weights 1..7 on ``cells`` counts: query scaling's ξ_i differ, so the lattice
    variances take 7 distinct values."""
    matrix = np.diag([1 + i % 7 for i in range(cells)]).astype(int).tolist()
    return {"dpopt": 1, "name": "weighted counts", "data": {"attributes": {"g": [f"v{i}" for i in range(cells)]}},
            "query": {"kind": "linear", "attribute": "g", "matrix": matrix}, "adjacency": {"kind": "add_remove"},
            "privacy": {"zcdp": {"rho": rho}}, "mechanism": "query_scaling",
            "utility": {"metric": "ci_volume", "alpha": ALPHA}}


def test_query_scaling_with_seven_distinct_variances_measures_exactly_and_verifies():
    """10 weighted counts at ρ = 0.5: before, the 9 direct convolutions exceeded MAX_WORK and the family kept the
    floating-point sampler; now the grouped path states its grid and excess, and verify recomputes the region."""
    solution = dpopt.solve(_weighted_counts(10, 0.5))
    cert = solution.certificate.data
    variances = cert["mechanism"]["parameters"]["lattice_variances"]
    assert len(set(variances)) == 7
    assert cert["mechanism"]["parameters"]["sampler"] == "exact" and "idealized" not in json.dumps(cert)
    method = cert["utility"]["method"]
    assert method.startswith(li.EXACT_LAW) and "times the region at q" in method
    assert dpopt.verify(cert).passed
    # the region's law by simulation of the exact sampler (CKS 2020, Algorithm 3): P(Q ≤ r) at least the proven
    # coverage, and P(Q ≤ r − (d + 1)h) below 1 − α (r < q + (d + 1)h: q, the exact quantile, lies above
    # r − (d + 1)h); n = 100,000 draws, SE of a proportion near 0.95 √(0.95·0.05/n) ≈ 6.9·10⁻⁴, 4 SE each
    sigma2s = [Fraction(v) for v in variances]
    radius = Fraction(method.split("r = ")[1].split(" ")[0])
    h = Fraction(method.split("h = ")[1].split(" ")[0])
    rng = np.random.default_rng(39)
    n = 100_000
    eta = np.column_stack([sample_discrete_gaussian(rng, v.numerator, v.denominator, n) for v in sigma2s])
    q = (eta.astype(float) ** 2) @ np.array([1 / float(v) for v in sigma2s])
    se = math.sqrt(0.95 * 0.05 / n)
    coverage = float(method.split("proven coverage ≥ ")[1].split(" ")[0])
    assert float(np.mean(q <= float(radius))) >= coverage - 4 * se
    assert float(np.mean(q <= float(radius - 11 * h))) < 1 - ALPHA + 4 * se


def test_a_forged_radius_of_a_grouped_region_fails_verification():
    solution = dpopt.solve(_weighted_counts(10, 0.5))
    forged = json.loads(json.dumps(solution.certificate.data))
    method = forged["utility"]["method"]
    radius = method.split("r = ")[1].split(" ")[0]
    forged["utility"]["method"] = method.replace(f"r = {radius}", f"r = {Fraction(radius) * Fraction(99, 100)}")
    assert "utility" in {c.claim for c in dpopt.verify(forged).failed}


def test_beyond_the_group_budget_the_family_keeps_the_floating_point_sampler(monkeypatch):
    """MAX_GROUP_WORK lowered to 2¹⁶ (a test hook): 7 groups leave 9,362 points, 916 steps for d = 10, (d + 1)h =
    11t/9,160 > t/1000: the family keeps the floating-point sampler and says why."""
    monkeypatch.setattr(li, "MAX_GROUP_WORK", 2**16)
    lattice_module._inference.cache_clear()
    try:
        mechanism = dpopt.solve(_weighted_counts(10, 0.5)).mechanism
    finally:
        lattice_module._inference.cache_clear()
    notes = " ".join(mechanism.notes())
    assert mechanism.sampler == "floating_point" and "convolution budget" in notes


def test_cli_solve_and_verify_of_a_grouped_region(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(_weighted_counts(10, 0.5)))
    assert main(["solve", str(path), "--out", str(tmp_path / "out")]) == 0
    cert = json.loads((tmp_path / "out" / "certificate.json").read_text())
    assert cert["mechanism"]["parameters"]["sampler"] == "exact" and "idealized" not in json.dumps(cert)
    assert main(["verify", str(tmp_path / "out" / "certificate.json")]) == 0


@pytest.mark.slow
def test_eighty_cells_at_a_large_variance_measure_exactly():
    """80 cells at ρ = 5·10⁻⁷ (σ_ℤ² = 10⁶): before, beyond MAX_POWER_SUPPORT (floating point); now the coarsened
    grid, stated in the method, and verify recomputes it."""
    spec = {"dpopt": 1, "name": "p", "data": {"attributes": {"x": [f"v{i}" for i in range(80)]}},
            "query": {"kind": "histogram", "attribute": "x"}, "adjacency": {"kind": "add_remove"},
            "privacy": {"zcdp": {"rho": 5e-7}}, "mechanism": "gaussian",
            "utility": {"metric": "ci_volume", "alpha": ALPHA}}
    solution = dpopt.solve(spec)
    cert = solution.certificate.data
    assert cert["mechanism"]["parameters"]["sampler"] == "exact" and "idealized" not in json.dumps(cert)
    assert "times the region at q" in cert["utility"]["method"]
    assert dpopt.verify(cert).passed
