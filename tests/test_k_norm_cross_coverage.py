"""Proven ci_volume coverage of the lattice cross-polytope by convolution (dpopt.stats.k_norm_cross_coverage).

Expected values and their sources:

* the exact coverage P(G ≤ k), G(c) = Σ_k (D/M_k)|c_k|, of the product law P[c] ∝ ∏_k q_k^{|c_k|},
  q_k = e^{−ε/M_k}: the lattice points of the box |c_k| ≤ k·M_k/D (it holds every point with G ≤ k) enumerated
  in integers, their levels N(j) counted, and Σ_{j ≤ k} N(j)·e^{−εj/D} / Z summed in mpmath at 40 digits with
  the closed-form normaliser Z = ∏_k (1 + q_k)/(1 − q_k) (two geometric series per coordinate): no convolution,
  no truncation;
* the law of |c|: P(|c| = 0) = (1 − q)/(1 + q), P(|c| = j) = 2(1 − q)q^j/(1 + q) (Canonne, Kamath & Steinke
  2020, Definition 28), in mpmath.
"""

from __future__ import annotations

import copy
import json
import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest

import dpopt
from dpopt.noise.k_norm_lattice import LatticeGauge
from dpopt.noise.k_norm_lattice_coverage import coverage_level
from dpopt.stats.k_norm_cross_coverage import cross_coverage_level, magnitude_law

mpmath.mp.dps = 40


def cross_gauge(bounds: tuple[int, ...]) -> LatticeGauge:
    return LatticeGauge(np.zeros((0, len(bounds)), dtype=np.int64), math.lcm(*bounds), bounds)


def exact_coverage(bounds: tuple[int, ...], epsilon: Fraction, level: int) -> mpmath.mpf:
    """P(G ≤ level) by enumeration (module docstring)."""
    d = math.lcm(*bounds)
    weights = [d // m for m in bounds]
    axes = [np.arange(-(level // w), level // w + 1, dtype=np.int64) for w in weights]
    grids = np.meshgrid(*axes, indexing="ij")
    levels = sum(w * np.abs(g.ravel()) for w, g in zip(weights, grids))
    counts = np.bincount(levels[levels <= level], minlength=level + 1)
    eps = mpmath.mpf(epsilon.numerator) / epsilon.denominator
    z = mpmath.fprod((1 + mpmath.exp(-eps / m)) / (1 - mpmath.exp(-eps / m)) for m in bounds)
    return mpmath.fsum(int(n) * mpmath.exp(-eps * j / d) for j, n in enumerate(counts.tolist()) if n) / z


def test_magnitude_law_is_rounded_down():
    """Every value at most its mpmath closed form and within 10⁻¹⁴ of it (relative), placed at multiples of w."""
    epsilon, m, w, top = Fraction(1), 3, 2, 400
    law = magnitude_law(epsilon, m, w, top)
    q = mpmath.exp(-mpmath.mpf(1) / m)
    for i, value in enumerate(law.tolist()):
        if i % w:
            assert value == 0.0
            continue
        j = i // w
        exact = (1 - q) / (1 + q) * (1 if j == 0 else 2 * q**j)
        assert value <= exact and (value == 0.0 or value >= exact * (1 - mpmath.mpf(1e-14)))
    assert law[0] > 0 and law[w] > 0


@pytest.mark.parametrize("bounds, epsilon, alpha", [((2, 2), Fraction(1), 0.05), ((1, 2), Fraction(1, 2), 0.05),
                                                    ((1, 1, 2), Fraction(1), 0.1), ((2, 3, 3), Fraction(3, 2), 0.01)])
def test_proven_coverage_against_enumeration(bounds, epsilon, alpha):
    """The proven bound b at the level k found: b ≤ P(G ≤ k) (exact, enumerated) ≤ b + 10⁻⁹ (the subtracted
    rounding slack is ~10⁻¹³), P(G ≤ k) ≥ 1 − α, and no lattice point lies strictly between the smallest level k*
    whose exact coverage reaches 1 − α and k (so k is k* or the next occupied level: the slack can cross a level
    only when its exact coverage is within 10⁻⁹ of 1 − α); likewise between k and the level of the enumeration
    path (coverage_level, extents h_k = M_k of the cross-polytope's vertices M_k e_k)."""
    gauge = cross_gauge(bounds)
    found = cross_coverage_level(gauge, epsilon, alpha)
    exact = exact_coverage(bounds, epsilon, found.level)
    assert found.coverage <= exact <= found.coverage + 1e-9
    assert exact >= 1 - mpmath.mpf(alpha)
    smallest = found.level
    while smallest > 0 and exact_coverage(bounds, epsilon, smallest - 1) >= 1 - mpmath.mpf(alpha):
        smallest -= 1
    assert adjacent_levels(bounds, epsilon, smallest, found.level)
    volume = math.prod(2 * m for m in bounds) / math.factorial(len(bounds))
    enumerated = coverage_level(gauge, epsilon, bounds, volume, alpha)
    assert adjacent_levels(bounds, epsilon, *sorted((enumerated.level, found.level)))


def adjacent_levels(bounds: tuple[int, ...], epsilon: Fraction, low: int, high: int) -> bool:
    """Whether no lattice point has a level strictly between low and high (equal coverage at low and high − 1)."""
    return high <= low + 1 or exact_coverage(bounds, epsilon, high - 1) == exact_coverage(bounds, epsilon, low)


def histogram_spec(cells: int, adjacency: str, **extra) -> dict:
    spec = {"dpopt": 1, "name": "h", "data": {"attributes": {"a": [f"c{i}" for i in range(cells)]}},
            "query": {"kind": "histogram", "attribute": "a"}, "adjacency": adjacency,
            "privacy": {"pure": {"epsilon": 1.0}}, "mechanism": "k_norm", "utility": {"metric": "ci_volume"}}
    spec.update(extra)
    return spec


@pytest.mark.parametrize("adjacency", ["replace_one", "add_remove"])
def test_30_cell_histogram_ci_volume_is_exact_and_verified(adjacency):
    """The cross-polytope measures ci_volume exactly (no "idealized" note), the certificate verifies, its value is
    r^s·vol K·√det(RRᵀ) with vol K = ∏2M_k/s! in the lattice coordinates c, r the recorded level's k/D and R the
    echelon basis (z = cR): add/remove R = I (factor 1); replace-one the sum-zero span, R = [I₂₉ | −1], RRᵀ = I + 11ᵀ
    of determinant 1 + 29 = 30 (the region's volume in span(S), the floating-point ball's measure); and a forged
    radius (the value for the level one below) fails the utility claim."""
    sol = dpopt.solve(histogram_spec(30, adjacency))
    data = sol.certificate.data
    assert sol.mechanism.lattice is not None and sol.mechanism.exact_noise
    assert data["mechanism"]["parameters"]["norm_ball"] == "lattice_cross_polytope"
    assert "idealized" not in json.dumps(data) and "proven coverage" in data["utility"]["method"]
    lattice = sol.mechanism.lattice
    level = lattice._estimates[("ci_volume", 0.05)]
    bounds = lattice.gauge.l1_bounds
    s = len(bounds)
    log_volume = sum(math.log(2 * m) for m in bounds) - math.lgamma(s + 1)
    radius = level.level / lattice.gauge.denominator
    gram = 30 if adjacency == "replace_one" else 1
    assert data["utility"]["value"] == pytest.approx(math.exp(s * math.log(radius) + log_volume) * math.sqrt(gram),
                                                     rel=1e-9)
    assert dpopt.verify(data).passed
    forged = copy.deepcopy(data)
    forged["utility"]["value"] = ((level.level - 1) / level.level) ** s * data["utility"]["value"]
    assert "utility" in {c.claim for c in dpopt.verify(forged).failed}


def test_fft_path_against_a_40_digit_convolution():
    """Two coordinates with M = 1 at ε = 1/1024 (support above 4,096 levels: the FFT convolution and its proven
    bound). The exact P(|c₁| + |c₂| ≤ k) = Σ_{a ≤ k} P(|c₁| = a)·P(|c₂| ≤ k − a), P(|c| ≤ m) = 1 − 2q^{m+1}/(1 + q)
    (the geometric tail), summed in mpmath at 40 digits: the proven bound lies below it by at most 10⁻⁹, and the
    level below k covers less than 1 − α + 10⁻⁹ (every level is occupied, so k is the smallest up to the slack)."""
    epsilon, alpha = Fraction(1, 1024), 0.05
    found = cross_coverage_level(cross_gauge((1, 1)), epsilon, alpha)
    assert found.level_cap > 4096 and found.error > 0
    q = mpmath.exp(-mpmath.mpf(1) / 1024)

    def exact(k: int) -> mpmath.mpf:
        head = [(1 - q) / (1 + q)] + [2 * (1 - q) * q**a / (1 + q) for a in range(1, k + 1)]
        return mpmath.fsum(p * (1 - 2 * q ** (k - a + 1) / (1 + q)) for a, p in enumerate(head))

    at = exact(found.level)
    assert found.coverage <= at <= found.coverage + 1e-9
    assert at >= 1 - mpmath.mpf(alpha) and exact(found.level - 1) < 1 - mpmath.mpf(alpha) + mpmath.mpf(1e-9)
