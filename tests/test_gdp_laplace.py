"""Laplace noise under μ-GDP: conversions, Algorithm 1, crossing points, the `laplace` family.

Oracles: the digest of Lee, Kim, Kwak & Jung (2022) (`papers/000_gdp_multivariate.md`,
[computed] tables labelled "digest §x") and the paper's own numbers (6.130, 3.36, 3.67).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import make_spec
from scipy import special

import dpopt
from dpopt.privacy.gdp_check import gdp_margin, mu_of_tradeoff
from dpopt.privacy.laplace_gdp import (
    _piece2_gap,
    contingency_laplace_scale,
    eps_laplace_tight,
    eps_universal,
    gaussian_laplace_crossing,
    laplace_gdp_route,
    laplace_mu,
    laplace_scale_2d,
    laplace_scale_l1,
    laplace_scale_universal,
    mu_laplace_tight,
    mu_universal,
)
from dpopt.privacy.tradeoff import contingency_laplace_tradeoff


def test_conversions_digest_values():
    # digest §1.3, §2.5 and §8.2 item 6
    assert eps_universal(1.0) == pytest.approx(0.8069653463, abs=1e-10)
    assert eps_laplace_tight(1.0) == pytest.approx(0.9655291621, abs=1e-10)
    for eps, mu in [(0.5, 0.623893), (1.0, 1.232035), (2.0, 2.357961)]:
        assert mu_universal(eps) == pytest.approx(mu, abs=1e-6)
    for eps, mu in [(0.5, 0.5617643), (1.0, 1.0300640), (2.0, 1.8009052), (4.0, 2.9867788)]:
        assert mu_laplace_tight(eps) == pytest.approx(mu, abs=1e-7)
    for mu in (0.1, 1.0, 7.0):
        assert mu_universal(eps_universal(mu)) == pytest.approx(mu, rel=1e-12)
        assert mu_laplace_tight(eps_laplace_tight(mu)) == pytest.approx(mu, rel=1e-12)


# digest §2.5 table (Δ1 = 2): b^ε_μ, b^{Δ1}_μ, b̃_μ
SCALES = {
    0.1: (25.063429, 24.573336, 15.4890975075),
    0.25: (10.019384, 9.543901, 6.0540907677),
    0.3: (8.346875, 7.876195, 5.0069556463),
    0.5: (4.999029, 4.547220, 2.916113),
    1.0: (2.478421, 2.071403, 1.3589053610),
    2.0: (1.198848, 0.871175, 0.599000),
    3.0: (0.758495, 0.496821, 0.357427),
    4.0: (0.531891, 0.323621, 0.242513),
    5.0: (0.394056, 0.227868, 0.176908),
}


@pytest.mark.parametrize("mu", SCALES)
def test_scales_match_digest_and_are_ordered(mu):
    universal, l1, tight = SCALES[mu]
    assert laplace_scale_universal(mu, 2) == pytest.approx(universal, abs=1e-6)
    assert laplace_scale_l1(mu, 2) == pytest.approx(l1, abs=1e-6)
    b = contingency_laplace_scale(mu)
    # the digest gives b̃ to 10 digits at μ ∈ {0.1, 0.25, 0.3, 1}, to 6 decimals elsewhere
    assert b == pytest.approx(tight, rel=1e-10) if mu in (0.1, 0.25, 0.3, 1.0) else b == pytest.approx(tight, abs=1e-6)
    assert laplace_scale_universal(mu, 2) > laplace_scale_l1(mu, 2) > b  # V5 [paper]


@pytest.mark.parametrize("mu", [0.1, 1.0, 4.0])
def test_algorithm1_returns_the_feasible_end(mu):
    b = contingency_laplace_scale(mu, rtol=1e-12)
    assert _piece2_gap(b, mu) >= 0.0                  # feasible: T_b ≥ G_μ on piece 2
    assert _piece2_gap(b * (1 - 1e-9), mu) < 0.0      # a slightly smaller scale is not
    # independently: μ(b̃_μ) = μ by the sup formula over all of [0, 1], and the generic
    # two-coordinate bisection (certified branch and bound as the oracle) agrees
    assert mu_of_tradeoff(contingency_laplace_tradeoff(b)) == pytest.approx(mu, rel=1e-9)
    assert laplace_scale_2d(mu, 1.0, 1.0) == pytest.approx(b, rel=1e-8)


def test_touch_point_is_interior_to_piece_2():
    # digest §4.4: at μ = 1 the curves touch at α* ≈ 0.1190, inside piece 2
    b = contingency_laplace_scale(1.0)
    margin = gdp_margin(contingency_laplace_tradeoff(b * (1 + 1e-8)), 1.0)
    assert margin.passed and margin.argmin == pytest.approx(0.1190, abs=2e-3)
    assert 0.25 * math.exp(-2 / b) < margin.argmin < 0.25 * math.exp(-1 / b) * (1 + 1 / b)


def test_crossing_points():
    # Sec. 3.2.3: L2(M_G) < L2(M_Lap(b^{Δ1})) iff μ < 6.130 for tables (Δ1/Δ2 = √2), 3.36 for ratio 1
    assert gaussian_laplace_crossing("l1", math.sqrt(2)) == pytest.approx(6.130081, abs=1e-6)
    assert gaussian_laplace_crossing("l1", 1.0) == pytest.approx(3.360777, abs=1e-6)
    # Fig. 6 caption: b̃_μ = 1/μ at "3.67"; digest §6 V4 computes 3.687 (0.5% off, the paper's grid)
    assert abs(gaussian_laplace_crossing("contingency") - 3.687) < 0.02
    # digest §6, Fig. 6: the universal scale crosses at 14.381 (not stated in the paper)
    assert gaussian_laplace_crossing("universal", math.sqrt(2)) == pytest.approx(14.381, abs=1e-3)


@pytest.mark.parametrize("ratio, mu", [(1.5, 6.68062), (2.0, 9.80111), (3.0, 15.80200), (math.sqrt(10), 16.75945)])
def test_figure4_curve(ratio, mu):
    # digest §6, Figure 4 table
    assert gaussian_laplace_crossing("l1", ratio) == pytest.approx(mu, abs=1e-5)


# ------------------------------------------------------------------- the laplace family
def _space(**overrides):
    return dpopt.derive(dpopt.load_spec(make_spec(**overrides)))


def test_routes_follow_the_sensitivity_geometry():
    table = laplace_gdp_route(_space())
    assert table.kind == "two_sparse" and table.patterns == ((1, 1),)
    count = laplace_gdp_route(_space(query={"kind": "count"}, adjacency="add_remove"))
    assert count.kind == "one_dimensional"
    hist = laplace_gdp_route(_space(query={"kind": "histogram", "attribute": "race"}, adjacency="add_remove"))
    assert hist.kind == "one_dimensional" and hist.patterns == ((1, 0),)
    # three marginal tables move six cells at once: only the universal conversion is proven
    three = laplace_gdp_route(_space(query={"kind": "marginals", "attributes": [["race"], ["sex"], ["race", "sex"]]}))
    assert three.kind == "universal"
    # two replacements: the listed vectors are hull generators only, so sparsity is unknown
    assert laplace_gdp_route(_space(adjacency={"kind": "hamming", "distance": 2})).kind == "universal"


@pytest.mark.parametrize("mu", [0.1, 1.0, 4.0])
def test_table_scale_is_algorithm1_rounded_up(mu):
    sol = dpopt.solve(make_spec(privacy={"gdp": {"mu": mu}}, mechanism="laplace", sampler="floating_point"))
    tight = contingency_laplace_scale(mu)
    assert tight <= sol.mechanism.scale < tight * (1 + 1e-7)
    assert sol.certificate["mechanism"]["privacy"]["mu"] == pytest.approx(mu, rel=1e-8)
    assert "eq. 16" in next(c for c in sol.certificate["checks"] if c["claim"] == "privacy")["method"]
    assert dpopt.verify(sol.certificate).passed


def test_exact_mu_of_a_table_mechanism():
    # digest §4.4: μ_b of Laplace(b) on a table, b = 2 → 0.7075515; a count (Δ = 1): Prop. 9 closed form
    assert laplace_mu(2.0, _space()) == pytest.approx(0.7075515, abs=1e-7)
    assert laplace_mu(2.0, _space(query={"kind": "count"}, adjacency="add_remove")) == pytest.approx(
        mu_laplace_tight(0.5), rel=1e-12)


def test_a_smaller_scale_is_refused():
    from dpopt.mechanisms.laplace import LaplaceMechanism

    space = _space()
    privacy = dpopt.load_spec(make_spec()).privacy
    b = contingency_laplace_scale(1.0)
    assert not LaplaceMechanism(b * (1 - 1e-6), 6).privacy_checks(space, privacy)[0].passed
    assert LaplaceMechanism(b * (1 + 1e-6), 6).privacy_checks(space, privacy)[0].passed


def test_one_dimensional_and_universal_scales():
    # a count under add/remove: Δ = 1, b = 1/ε'_μ (Prop. 9)
    sol = dpopt.solve(make_spec(query={"kind": "count"}, adjacency="add_remove", mechanism="laplace",
                                sampler="floating_point"))
    assert sol.mechanism.scale == pytest.approx(1 / eps_laplace_tight(1.0), rel=1e-14)
    assert sol.certificate["mechanism"]["privacy"]["mu"] == pytest.approx(1.0, rel=1e-12)
    # three marginals (Δ1 = 6): the universal scale 6/ε_μ
    sol = dpopt.solve(make_spec(query={"kind": "marginals", "attributes": [["race"], ["sex"], ["race", "sex"]]},
                                mechanism="laplace", sampler="floating_point"))
    assert sol.mechanism.scale == pytest.approx(6 / eps_universal(1.0), rel=1e-14)
    assert dpopt.verify(sol.certificate).passed


def test_auto_prefers_laplace_to_the_gaussians_when_it_is_cheaper():
    # μ = 5 on a 3x2 table: 2·6·b̃² = 12·0.176908² = 0.37556 < 2·5/25 = 0.4 (projected Gaussian); the
    # staircase, calibrated on its exact trade-off function, may be cheaper still: auto keeps the cheapest
    sol = dpopt.solve(make_spec(privacy={"gdp": {"mu": 5.0}}, sampler="floating_point"))  # continuous Gaussians
    costs = {c.family: c.utility.value for c in sol.candidates if c.feasible}
    assert costs["laplace"] < min(costs[f] for f in ("gaussian", "projected_gaussian", "gaussian_optimal"))
    assert sol.certificate["utility"]["value"] == pytest.approx(min(costs.values()), rel=1e-12)
    assert costs["laplace"] == pytest.approx(12 * 0.176908**2, rel=1e-5)
    assert costs["projected_gaussian"] == pytest.approx(0.4, rel=1e-12)


def test_laplace_release_trade_off_by_monte_carlo():
    # The calibrated table mechanism, audited: Monte Carlo of the most powerful (likelihood
    # ratio) test between neighbouring tables (shift e_1 − e_2) stays above G_μ − 4 SE.
    mu = 1.0
    sol = dpopt.solve(make_spec(mechanism="laplace", sampler="floating_point"))  # Lee et al.'s continuous design
    rng = np.random.default_rng(3)
    n = 400_000
    z0, z1 = sol.mechanism.sample(n, rng), sol.mechanism.sample(n, rng)
    v = np.array([1.0, -1.0, 0, 0, 0, 0])
    b = sol.mechanism.scale

    def llr(y):  # log p(y − v)/p(y) for i.i.d. Laplace(b); it lies in [−2/b, 2/b]
        return (np.abs(y).sum(axis=1) - np.abs(y - v).sum(axis=1)) / b

    l0, l1 = llr(z0), llr(z1 + v)
    for k in (-0.7, 0.0, 0.4, 0.8, 1.2):
        a, beta = np.mean(l0 > k), np.mean(l1 <= k)
        g = dpopt.privacy.gdp_tradeoff(a, mu)
        slope = math.exp(-mu * float(special.ndtri(a)) - mu * mu / 2)  # |G_μ'(α)|
        se = math.sqrt(beta * (1 - beta) / n) + slope * math.sqrt(a * (1 - a) / n)
        assert beta > g - 4 * se
