"""ci_volume on more than 4 noisy coordinates measures exactly (issue 39): histograms of 5, 10 and 30 cells at
ρ = 0.5, under add-remove and replace-one, for gaussian, projected_gaussian, gaussian_optimal and auto.

Sources of the expected values:

* **the exact law of S = Σ η_i²** for i.i.d. N_ℤ(0, σ²), σ² = 1 (add-remove counts at ρ = 1/2: σ² = Δ₂²/(2ρ) = 1):
  the pmf exp(−k²/2)/Σ_j exp(−j²/2) in 40-digit mpmath, the law of η² convolved d times; the radius is q/σ², q its
  exact 1 − α quantile (h = 1/σ²: no grid excess, dpopt.stats.lattice_inference);
* **the continuous region's closed form** V_k t^{k/2} σ^k, t = χ²_k quantile, on the sum-zero span (k = d − 1,
  σ² = Δ₂²/(2ρ) = 2 under replace-one), the reference of the stated cost of exactness;
* **the χ² law at large σ²** for gaussian_optimal's strategy region (σ_ℤ² ≈ 2²⁶): the law of Q within
  k(0.4/σ + 0.2/σ²) of χ²_k in Kolmogorov distance (derived in test_lattice_inference), the radius less than
  (k + 1)h above its exact quantile.
"""

from __future__ import annotations

import copy
import itertools
import json
import math
import re
from fractions import Fraction

import mpmath
import pytest
from scipy import stats

import dpopt
from dpopt.stats.inference import log_unit_ball_volume

ALPHA = 0.05
CELLS = (5, 10, 30)


def _spec(cells: int, adjacency: str, mechanism: str) -> dict:
    return {"dpopt": 1, "name": "big region", "data": {"attributes": {"a": [f"v{i}" for i in range(cells)]},
                                                      "n": 100},
            "query": {"kind": "histogram", "attribute": "a"}, "adjacency": {"kind": adjacency},
            "privacy": {"zcdp": {"rho": 0.5}}, "mechanism": mechanism, "utility": {"metric": "ci_volume"}}


def _exact(solution) -> dict:
    cert = solution.certificate.data
    assert cert["mechanism"]["parameters"]["sampler"] == "exact"
    assert "idealized" not in json.dumps(cert)
    assert dpopt.verify(cert).passed
    return cert


def _s_quantile(d: int) -> int:
    """The exact 1 − α quantile of S = Σ_{i≤d} η_i², η_i i.i.d. N_ℤ(0, 1) (40-digit mpmath)."""
    with mpmath.workdps(40):
        top = 3 * d + 60  # far above the quantile (E S < d, sd < 2√d)
        weights = {k: mpmath.exp(-mpmath.mpf(k * k) / 2) for k in range(-40, 41)}
        total = mpmath.fsum(weights.values())
        square = [mpmath.mpf(0)] * (top + 1)
        for k, w in weights.items():
            if k * k <= top:
                square[k * k] += w / total
        law = square
        for _ in range(d - 1):
            law = [mpmath.fsum(law[i] * square[s - i] for i in range(s + 1)) for s in range(top + 1)]
        cumulative = list(itertools.accumulate(law))
        q = next(s for s, c in enumerate(cumulative) if c >= 1 - ALPHA)
        assert cumulative[q] >= 1 - ALPHA + 1e-6  # the proven bound (less ≤ 10⁻⁸ of slack) reaches 1 − α at q too
        return q


@pytest.mark.parametrize("cells", CELLS)
@pytest.mark.parametrize("mechanism", ["gaussian", "auto"])
def test_add_remove_gaussian_region_is_the_exact_quantile(cells, mechanism):
    solution = dpopt.solve(_spec(cells, "add_remove", mechanism))
    cert = _exact(solution)
    if solution.mechanism.family != "gaussian":
        return  # auto picked gaussian_optimal (its region: the test below)
    assert cert["mechanism"]["parameters"]["sigma"] == 1.0  # σ² = Δ₂²/(2ρ) = 1: the lattice variance
    radius = Fraction(re.search(r", r = (\S+) ≈", cert["utility"]["method"]).group(1))
    assert radius == _s_quantile(cells)
    volume = math.exp(log_unit_ball_volume(cells)) * float(radius) ** (cells / 2)  # V_d r^{d/2} σ^d, σ = 1
    assert cert["utility"]["value"] == pytest.approx(volume, rel=1e-12)


@pytest.mark.parametrize("cells", CELLS)
@pytest.mark.parametrize("mechanism", ["gaussian", "projected_gaussian", "auto"])
def test_replace_one_states_its_cost_against_the_continuous_region(cells, mechanism):
    solution = dpopt.solve(_spec(cells, "replace_one", mechanism))
    cert = _exact(solution)
    k = cells - 1
    t = stats.chi2.isf(ALPHA, k)
    continuous = math.exp(log_unit_ball_volume(k)) * t ** (k / 2) * math.sqrt(2.0) ** k
    parameters = cert["mechanism"]["parameters"]
    cost = parameters.get("exact_cost") or parameters["design"]["exact_cost"]
    assert cost["metric"] == "ci_volume" and cost["exact"] == cert["utility"]["value"]
    assert cost["continuous"] == pytest.approx(continuous, rel=1e-9)
    assert cost["ratio"] == pytest.approx(cost["exact"] / cost["continuous"], rel=1e-12)


@pytest.mark.parametrize("cells", CELLS)
@pytest.mark.parametrize("adjacency", ["add_remove", "replace_one"])
def test_gaussian_optimal_strategy_region_is_within_the_grid_excess(cells, adjacency):
    cert = _exact(dpopt.solve(_spec(cells, adjacency, "gaussian_optimal")))
    method = cert["utility"]["method"]
    sigma2 = Fraction(re.search(r"σ_ℤ² = (\d+)", method).group(1))
    radius = float(Fraction(re.search(r", r = (\S+) ≈", method).group(1)))
    k = int(re.search(r"ℤ\^(\d+)", method).group(1))
    assert k == (cells if adjacency == "add_remove" else cells - 1)
    sigma = math.sqrt(sigma2)
    eps = k * (0.4 / sigma + 0.2 / sigma**2)
    t = stats.chi2.isf(ALPHA, k)
    # the grid: h = t/(k·G_k), G_k = max(4096, ⌈(k + 1)/(2·0.0011)⌉) (VOLUME_EXCESS), t rounded up to 6 decimals
    h = math.ceil(t * 10**6) / 10**6 / (k * max(4096, math.ceil((k + 1) / 0.0022)))
    assert stats.chi2.isf(ALPHA + eps, k) <= radius < stats.chi2.isf(ALPHA - eps - 1e-7, k) + (k + 1) * h


def test_a_forged_radius_of_a_big_region_fails_verification():
    cert = _exact(dpopt.solve(_spec(10, "add_remove", "gaussian")))
    forged = copy.deepcopy(cert)
    method = forged["utility"]["method"]
    radius = re.search(r", r = (\S+) ≈", method).group(1)
    forged["utility"]["method"] = method.replace(f"r = {radius}", f"r = {Fraction(radius) - 1}")
    forged["utility"]["value"] *= (1 - 1 / float(Fraction(radius))) ** 5  # the volume of the smaller radius
    assert "utility" in {c.claim for c in dpopt.verify(forged).failed}
