"""Exact query scaling on counts (issue 39): each noisy count measured as x_i + N_ℤ(0, σ_i²).

Sources of the expected values:

* the lattice variances: the dyadic rational ≥ the design's σ²/ξ_i with 21 significant bits (at most 2⁻²⁰ above it,
  :func:`dpopt.mechanisms.integer_noise.dyadic_ceil`), denominators powers of two;
* the privacy: independent discrete Gaussians under integer shifts v have Rényi divergences at most
  α Σ_i v_i²/(2σ_i²) (Canonne, Kamath & Steinke 2020, Theorem 14), so ρ = max_v Σ_i v_i²/(2σ_i²); the neighbours
  of a histogram under add/remove are enumerated here (one record added to or removed from level j: v = ±e_j);
* the noise law: Var N_ℤ(0, σ²) = Σ k² e^{−k²/(2σ²)} / Σ e^{−k²/(2σ²)}, summed here over |k| ≤ 60.
"""

from __future__ import annotations

import copy
import json
import math
from fractions import Fraction

import numpy as np
import pytest

import dpopt
from dpopt.errors import DataError

LEVELS = ["a", "b", "c", "d"]
SPEC = {"dpopt": 1, "name": "histogram, query scaling", "data": {"attributes": {"x": LEVELS}},
        "query": {"kind": "histogram", "attribute": "x"}, "adjacency": "add_remove",
        "privacy": {"zcdp": {"rho": 0.5}}, "mechanism": "query_scaling",
        "utility": {"metric": "l2", "workload": [[1, 0, 0, 0], [0, 2, 0, 0], [0, 0, 3, 0], [0, 0, 0, 4]]}}


@pytest.fixture(scope="module")
def solution():
    return dpopt.solve(SPEC)


def _discrete_variance(s2: float) -> float:
    k = np.arange(-60, 61, dtype=float)
    w = np.exp(-k * k / (2 * s2))
    return float((k * k * w).sum() / w.sum())


def test_zcdp_design_measures_each_count_on_the_lattice(solution):
    p = solution.mechanism.parameters
    assert p["sampler"] == "exact"
    lattice = [Fraction(v) for v in p["lattice_variances"]]
    for s2, xi in zip(lattice, p["xi"]):
        continuous = Fraction(p["sigma"]) ** 2 / Fraction(xi)
        assert continuous <= s2 <= continuous * (1 + Fraction(1, 2**20))
        assert s2.denominator & (s2.denominator - 1) == 0  # dyadic
    neighbours = [sign * np.eye(len(LEVELS), dtype=int)[j] for j in range(len(LEVELS)) for sign in (1, -1)]
    rho = max(sum(Fraction(int(v_i) ** 2) / (2 * s2) for v_i, s2 in zip(v, lattice)) for v in neighbours)
    assert Fraction(solution.certificate["mechanism"]["privacy"]["rho_exact"]) == rho <= Fraction(1, 2)
    assert "idealized" not in json.dumps(solution.certificate.data)
    assert dpopt.verify(solution.certificate).passed
    # the utility stated is the discrete law's: Σ_i w_i Var N_ℤ(0, σ_i²), w_i = ‖W e_i‖² = i²
    expected = sum((i + 1) ** 2 * _discrete_variance(float(s2)) for i, s2 in enumerate(lattice))
    assert solution.certificate["utility"]["value"] == pytest.approx(expected, rel=1e-12)


def test_a_halved_lattice_variance_fails_verification(solution):
    cert = copy.deepcopy(solution.certificate.data)
    variances = cert["mechanism"]["parameters"]["lattice_variances"]
    variances[0] = str(Fraction(variances[0]) / 2)  # ρ then exceeds 0.5 on a neighbour that moves count 0
    assert "privacy" in {c.claim for c in dpopt.verify(cert).failed}


def test_release_is_integer_noise_of_the_stated_variance(solution):
    mechanism = solution.mechanism
    n = 20_000
    out = mechanism.release(np.tile([3.0, 0.0, 5.0, 2.0], (n, 1)), np.random.default_rng(5))
    errors = out - [3.0, 0.0, 5.0, 2.0]
    assert np.array_equal(errors, np.round(errors))
    for i, s2 in enumerate(mechanism.parameters["lattice_variances"]):
        v = _discrete_variance(float(Fraction(s2)))
        # the sample variance's SE is about v·√(2/n) = 1% of v (near-normal errors): 5 SE
        assert abs(errors[:, i].var() - v) <= 5 * v * math.sqrt(2 / n)
    with pytest.raises(DataError, match="whole-number"):
        mechanism.release(np.array([0.5, 0, 0, 0]))


@pytest.mark.parametrize("change, why", [({"sampler": "floating_point"}, "sampler: floating_point"),
                                         ({"utility": {"metric": "test_power", "alternative": [0.5, 0, 0, 0]}},
                                          "not a whole-number shift")])
def test_floating_point_designs_keep_the_note(change, why):
    mechanism = dpopt.solve({**SPEC, **change}).mechanism
    notes = " ".join(mechanism.notes())
    assert mechanism.sampler == "floating_point" and "idealized" in notes and why in notes
