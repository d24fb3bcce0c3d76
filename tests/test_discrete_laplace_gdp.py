"""μ-GDP of discrete Laplace noise by the exact trade-off function of each move pattern (issue 39).

Sources of the expected values:

* a unit move of discrete Laplace noise of scale b is randomized response with ε = 1/b (the likelihood ratio is
  e^{±1/b}), whose trade-off function is above G_μ iff ε ≤ log(Φ(μ/2)/Φ(−μ/2)) (Lee, Kim, Kwak & Jung 2022,
  eq. 12): μ is solved here from that equation with scipy;
* any move: the trade-off polygon built here by brute force over the outputs y ∈ [−W, W]^k (W = 80, 60 for three
  coordinates; the mass outside is below e^{−30} at the scales used), sorting the likelihood ratios and accumulating both laws (Neyman–Pearson), μ the
  largest Φ⁻¹(1 − α) − Φ⁻¹(β) over its vertices (Dong, Roth & Su 2022);
* the ε-DP route's scale Δ₁/ε₀, ε₀ = log(Φ(μ/2)/Φ(−μ/2)), which the exact certificate must not exceed.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import optimize, stats

import dpopt
from dpopt.privacy.discrete_laplace import discrete_laplace_gdp_mu


def _rr_mu(epsilon: float) -> float:
    return optimize.brentq(lambda mu: math.log(stats.norm.cdf(mu / 2) / stats.norm.cdf(-mu / 2)) - epsilon,
                           1e-9, 50.0, xtol=1e-15)


def _brute_force_mu(scale: float, move: tuple[int, ...], window: int = 80) -> float:
    r = math.exp(-1.0 / scale)
    k = np.arange(-window, window + 1)
    one = (1 - r) / (1 + r) * r ** np.abs(k)
    p, q = np.ones(1), np.ones(1)
    for t in move:  # independent coordinates: outer products of the one-coordinate laws
        p = np.outer(p, one).ravel()
        q = np.outer(q, (1 - r) / (1 + r) * r ** np.abs(k - t)).ravel()
    ratio = np.round(np.log(q) - np.log(p), 9)  # reject P where Q/P is largest first
    values = np.unique(ratio)[::-1]
    alpha = np.cumsum([p[ratio == v].sum() for v in values])[:-1]
    beta = 1 - np.cumsum([q[ratio == v].sum() for v in values])[:-1]
    return float(np.max(stats.norm.isf(alpha) - stats.norm.ppf(beta)))


@pytest.mark.parametrize("scale", [Fraction(1, 2), Fraction(5, 4), Fraction(3)])
def test_a_unit_move_is_randomized_response(scale):
    assert float(discrete_laplace_gdp_mu(scale, [1])) == pytest.approx(_rr_mu(1 / float(scale)), rel=1e-10)


@pytest.mark.parametrize("move", [(1, 1), (2,), (1, 2), (1, 1, 1)])
def test_the_vertex_polygon_equals_a_brute_force_over_the_outputs(move):
    window = 80 if len(move) < 3 else 60  # the mass beyond: below e^{-30}
    for scale in (Fraction(3, 4), Fraction(2)):
        assert float(discrete_laplace_gdp_mu(scale, move)) == pytest.approx(
            _brute_force_mu(float(scale), move, window), rel=1e-7)


def test_a_table_under_replace_one_is_certified_below_the_epsilon_dp_route():
    spec = {"dpopt": 1, "name": "table", "data": {"attributes": {"a": ["x", "y", "z"], "b": ["u", "v"]}, "n": 50},
            "query": {"kind": "contingency_table", "attributes": ["a", "b"]}, "adjacency": "replace_one",
            "privacy": {"gdp": {"mu": 1.0}}, "mechanism": "discrete_laplace", "utility": {"metric": "l2"}}
    solution = dpopt.solve(spec)
    scale = Fraction(solution.mechanism.parameters["scale_exact"])
    epsilon_dp_scale = 2 / math.log(stats.norm.cdf(0.5) / stats.norm.cdf(-0.5))  # Δ₁ = 2, ε₀ for μ = 1
    assert float(scale) < 0.7 * epsilon_dp_scale
    # the certified scale is tight: the brute-force μ of the pattern (1, 1) at it is just below 1
    assert 1 - 1e-5 < _brute_force_mu(float(scale), (1, 1)) <= 1
    assert dpopt.verify(solution.certificate).passed
    assert not dpopt.verify({**solution.certificate.data, "mechanism": {
        **solution.certificate.data["mechanism"], "parameters": {"scale": float(scale) * 0.99,
                                                                 "scale_exact": str(scale * Fraction(99, 100))}}}).passed
