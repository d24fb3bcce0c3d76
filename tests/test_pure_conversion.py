"""ε₀-DP ⇒ every other target through randomized response (dpopt.privacy.pure_conversion).

Independent references: dp_accounting's PLD of an (ε₀, 0)-DP pair (``from_privacy_parameters``)
and its k-ary randomized-response RDP (k = 2); a grid of the trade-off functions with scipy's
normal law; the closed forms ε₀ = log((e^ε + δ)/(1 − δ)) and ε₀ tanh(ε₀/2) derived in the
module docstring.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
import yaml
from conftest import ROOT
from scipy import stats

import dpopt
from dpopt.certificate.verify import verify
from dpopt.privacy.pure_conversion import pure_epsilon_for, pure_implies, rr_delta_mp, rr_kl, rr_renyi
from dpopt.spec.models import Privacy

dp_accounting = pytest.importorskip("dp_accounting")
from dp_accounting.pld import common, privacy_loss_distribution  # noqa: E402
from dp_accounting.rdp import rdp_privacy_accountant  # noqa: E402


@pytest.mark.parametrize("eps0, eps", [(1.0, 0.0), (2.0, 1.5), (0.3, 0.1), (5.0, 4.0)])
def test_rr_profile_matches_dp_accounting(eps0, eps):
    # dp_accounting's PLD of an (ε₀, 0)-DP pair is randomized response; its δ is computed on a
    # loss grid of 1e-4 (pessimistic), so it agrees to about 1e-4 · δ'(ε) ≤ 1e-4.
    pld = privacy_loss_distribution.from_privacy_parameters(common.DifferentialPrivacyParameters(eps0, 0.0))
    assert float(rr_delta_mp(Fraction(eps0), eps)) == pytest.approx(pld.get_delta_for_epsilon(eps), abs=1e-4)


def test_approx_epsilon_is_the_closed_form():
    # δ(ε₀) = δ ⇔ ε₀ = log((e^ε + δ)/(1 − δ)) (module docstring); the float is rounded down by ≤ a few ulps.
    for eps, delta in [(1.0, 0.01), (2.0, 1e-9), (0.1, 1e-6)]:
        e0 = pure_epsilon_for(Privacy(approx={"epsilon": eps, "delta": delta}))
        assert e0 == pytest.approx(math.log((math.exp(eps) + delta) / (1 - delta)), rel=1e-14)
        assert e0 > eps
        assert pure_implies(Fraction(e0), Privacy(approx={"epsilon": eps, "delta": delta})).passed
        assert not pure_implies(Fraction(e0 * (1 + 1e-9)), Privacy(approx={"epsilon": eps, "delta": delta})).passed


@pytest.mark.parametrize("rho", [0.05, 0.5, 2.0])
def test_zcdp_epsilon_against_dp_accounting_rdp(rho):
    # dp_accounting's 2-ary randomized response (p = 2/(1 + e^{ε₀}): log ratio ε₀) gives D_α; the
    # certified ε₀ must have D_α ≤ ρα on a grid of orders, and its KL ε₀ tanh(ε₀/2) must be within
    # 1e-7 of ρ (the calibration aims at ρ(1 − 1e-8)).
    privacy = Privacy(zcdp={"rho": rho})
    e0 = pure_epsilon_for(privacy)
    p = 2.0 / (1.0 + math.exp(e0))
    for alpha in np.concatenate([1 + np.logspace(-6, 3, 200)]):
        d = rdp_privacy_accountant._randomized_response_rdp_replace_one(p, 2, alpha)
        assert d <= rho * alpha * (1 + 1e-9)
    assert rr_kl(e0) == pytest.approx(rho, rel=1e-7)
    assert e0 > math.sqrt(2 * rho)  # tighter than ε²/2 (Bun & Steinke)


def test_rr_renyi_ball_matches_dp_accounting():
    p = 2.0 / (1.0 + math.exp(1.3))
    for alpha in (1.5, 2.0, 10.0, 100.0):
        ball = rr_renyi(alpha, 1.3)
        assert float(ball.mid()) == pytest.approx(
            rdp_privacy_accountant._randomized_response_rdp_replace_one(p, 2, alpha), rel=1e-12)


def test_halved_tanh_bound_is_refuted_by_randomized_response():
    # ρ = ε tanh(ε/2)/2 is sometimes quoted; RR's own KL is ε tanh(ε/2) > it, and zCDP needs KL ≤ ρ.
    privacy = Privacy(zcdp={"rho": 1.0 * math.tanh(0.5) / 2})
    assert not pure_implies(Fraction(1), privacy).passed


def test_gdp_epsilon_is_tight_on_a_grid():
    # f_{ε₀,0}(α) = max(0, 1 − e^{ε₀}α, e^{−ε₀}(1 − α)) ≥ G_μ(α) = Φ(Φ⁻¹(1 − α) − μ) on a grid, with
    # equality at the kink α = 1/(1 + e^{ε₀}) (Lee et al. 2022, eq. 12).
    mu = 1.0
    e0 = pure_epsilon_for(Privacy(gdp={"mu": mu}))
    assert e0 == pytest.approx(0.8069653463, abs=1e-10)  # Lee et al. 2022, eq. 12 at μ = 1 (digest §2)
    a = np.linspace(0, 1, 100_001)
    f = np.maximum.reduce([np.zeros_like(a), 1 - math.exp(e0) * a, math.exp(-e0) * (1 - a)])
    g = stats.norm.cdf(stats.norm.ppf(1 - a) - mu)
    assert np.min(f - g) >= -1e-12
    kink = 1 / (1 + math.exp(e0))
    assert float(stats.norm.cdf(stats.norm.ppf(1 - kink) - mu)) == pytest.approx(kink, rel=1e-9)


def test_knorm_table_under_approx_beats_gaussian():
    # Issue 26 done-means: the 3×4 table with both margins fixed under (2, 1e-9) takes the optimal
    # K-norm (l2 = 30.67 at ε = 2 in the pure-ε example, against 291.3 for the projected Gaussian).
    spec = dpopt.load_spec(ROOT / "specs" / "table_3x4_margins_pure.yaml").model_dump(mode="json", exclude_none=True)
    spec["privacy"] = {"approx": {"epsilon": 2, "delta": 1e-9}}
    cert = dpopt.solve(dpopt.load_spec(spec)).certificate
    assert cert["mechanism"]["family"] == "k_norm"
    assert cert["utility"]["value"] <= 30.7
    assert cert["mechanism"]["parameters"]["epsilon"] > 2
    assert cert.passed and verify(cert).passed


@pytest.mark.parametrize("privacy", [
    {"approx": {"epsilon": 1.0, "delta": 1e-6}}, {"zcdp": {"rho": 0.5}}, {"gdp": {"mu": 1.0}},
])
def test_pure_families_serve_every_target_and_verify(privacy):
    # Each ε₀-DP family is designed at the ε₀ the conversion allows (pure_epsilon_for, checked above
    # against dp_accounting and the closed forms) and its certificate re-verifies.
    spec = {"dpopt": 1, "name": "histogram", "data": {"attributes": {"race": ["a", "b", "c"]}},
            "query": {"kind": "histogram", "attribute": "race"}, "adjacency": {"kind": "add_remove"},
            "privacy": privacy, "mechanism": ["staircase", "r2dp", "k_norm"], "utility": {"metric": "l2"}}
    eps0 = pure_epsilon_for(Privacy(**privacy))
    for family in ("staircase", "r2dp", "k_norm"):
        cert = dpopt.solve({**spec, "mechanism": family}).certificate
        assert cert.passed and verify(cert).passed
        if family == "k_norm":
            assert cert["mechanism"]["parameters"]["epsilon"] == eps0  # the l1 ball: ‖v‖_K ≤ 1 for v = e_i


TABLE_3X2 = {"dpopt": 1, "name": "t", "data": {"attributes": {"r": ["a", "b", "c"], "s": ["f", "m"]}},
             "query": {"kind": "contingency_table", "attributes": ["r", "s"]}, "adjacency": {"kind": "replace_one"},
             "utility": {"metric": "l2"}, "mechanism": "k_norm"}


@pytest.mark.parametrize("privacy", [
    {"pure": {"epsilon": 1.0}}, {"approx": {"epsilon": 1.0, "delta": 1e-6}}, {"zcdp": {"rho": 0.5}},
    {"gdp": {"mu": 0.5}},
])
def test_knorm_utility_bound_never_beats_its_design(privacy):
    # the oracle is the family's own design (the optimal K of the root polytope): the selector may skip
    # K-norm only when a candidate beats a bound that no K-norm design can beat
    from dpopt.mechanisms.k_norm import KNormMechanism

    problem = dpopt.compile({**TABLE_3X2, "privacy": privacy})
    bound = KNormMechanism.utility_bound(problem)
    value = KNormMechanism.design(problem).expected_utility(problem.spec.utility).value
    assert bound is not None and 0 < bound <= value


def test_knorm_is_pruned_under_strong_gdp():
    # specs/table_age_sex_gdp.yaml: James–Stein 3205 beats the K-norm balls' bound (≈ 5570 at μ = 0.1) in floating
    # point, so no ball is built; measured exactly (the default), rank 17 ≤ CROSS_MAX_RANK, the bound is the lattice
    # cross-polytope's s/(2 sinh²(ε₀/2)) or the balls', whichever the design would take, and it prunes too
    spec = yaml.safe_load((ROOT / "specs" / "table_age_sex_gdp.yaml").read_text())
    for variant in ({**spec, "sampler": "floating_point"}, spec):
        solution = dpopt.solve(variant)
        rows = {c.family: c for c in solution.candidates}
        assert rows["k_norm"].reason.startswith("not designed: its utility bound")
        assert solution.mechanism.family == "james_stein"


def test_discrete_laplace_serves_gdp_through_the_pure_conversion():
    # ε₀ = Δ₁/b ≤ log(Φ(μ/2)/Φ(−μ/2)) = 0.8069653463 at μ = 1 (Lee et al. 2022, eq. 12), b dyadic rounded up
    spec = {"dpopt": 1, "name": "histogram", "data": {"attributes": {"race": ["a", "b", "c"]}},
            "query": {"kind": "histogram", "attribute": "race"}, "adjacency": {"kind": "add_remove"},
            "privacy": {"gdp": {"mu": 1.0}}, "mechanism": "discrete_laplace", "utility": {"metric": "l2"}}
    solution = dpopt.solve(spec)
    assert 1 / float(solution.mechanism.scale) == pytest.approx(0.8069653463, rel=2e-6)
    assert 1 / float(solution.mechanism.scale) <= 0.8069653463050  # the bound rounded up in its 13th digit
    assert verify(solution.certificate).passed
