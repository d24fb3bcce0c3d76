"""Semi-DP guarantees: Proposition 15 conversions, Proposition 21 composition, the Census.

Sources: Cho & Awan §6 (Census: ρ 2.56 → 10.24, ε 17.91528 → 40.95057 at δ = 1e-10);
digest §0 (f_1^∘2 ≥ f_2 with maximal gap 0.129467; G_1^∘2 = G_2); Dong, Roth & Su (2022)
Thm 2.14 (group privacy) and the (ε, δ) group bound δ(e^{kε} − 1)/(e^ε − 1); Bun & Steinke
(2016) Prop. 1.3 (Lemma 40 of the paper).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpopt.privacy.census2020 import census_semi_dp
from dpopt.privacy.semi_dp import (
    ApproxDPTradeOff,
    base_tradeoff,
    compose_semi_dp,
    semi_dp_from_dp,
    semi_dp_scope,
    semi_dp_tradeoff,
)
from dpopt.privacy.tradeoff import GaussianTradeOff, PureDPTradeOff

ALPHA = np.linspace(0.0, 1.0, 100_001)


def test_census_figures_of_section_6():
    r = census_semi_dp()
    assert r.rho_effective == pytest.approx(10.24, rel=1e-15)
    assert round(r.epsilon_advertised, 5) == 17.91528  # paper: 17.91528
    assert round(r.epsilon_effective, 5) == 40.95057  # paper: 40.95057
    # Lemma 40 by hand: ρ + 2√(ρ ln 1e10)
    assert r.epsilon_effective == pytest.approx(10.24 + 2 * math.sqrt(10.24 * math.log(1e10)), rel=1e-15)
    assert r.epsilon_advertised_cks < r.epsilon_advertised  # CKS is the tighter conversion


def test_gdp_power_is_gdp_with_a_times_mu():
    # digest §9 case 22: G_1^∘2 = G_2
    assert np.allclose(semi_dp_tradeoff(GaussianTradeOff(1.0), 2)(ALPHA), GaussianTradeOff(2.0)(ALPHA), atol=1e-12)
    assert semi_dp_from_dp("gdp", {"mu": 0.5}, 3).parameters == {"mu": 1.5}


def test_pure_power_is_above_a_epsilon_but_not_equal():
    # digest §0: f_{1,0}^∘2 ≥ f_{2,0}, maximal gap 0.129467 (three linear pieces)
    power = semi_dp_tradeoff(PureDPTradeOff(1.0), 2)(ALPHA)
    gap = power - PureDPTradeOff(2.0)(ALPHA)
    assert gap.min() >= -1e-15
    assert gap.max() == pytest.approx(0.129467, abs=5e-6)
    g = semi_dp_from_dp("pure", {"epsilon": 1.0}, 2)
    assert g.parameters == {"epsilon": 2.0} and not g.exact


@pytest.mark.parametrize("epsilon,delta,a", [(0.5, 1e-3, 3), (1.0, 1e-5, 2), (0.1, 0.01, 4)])
def test_approx_group_bound_lies_below_the_exact_power(epsilon, delta, a):
    g = semi_dp_from_dp("approx", {"epsilon": epsilon, "delta": delta}, a)
    assert g.parameters["delta"] == pytest.approx(delta * sum(math.exp(j * epsilon) for j in range(a)))
    exact = semi_dp_tradeoff(ApproxDPTradeOff(epsilon, delta), a)(ALPHA)
    bound = ApproxDPTradeOff(g.parameters["epsilon"], g.parameters["delta"])(ALPHA)
    assert (exact - bound).min() >= -1e-12


def test_zcdp_group_privacy_is_quadratic():
    assert semi_dp_from_dp("zcdp", {"rho": 0.5}, 3).parameters == {"rho": 4.5}
    with pytest.raises(ValueError):
        base_tradeoff("zcdp", {"rho": 0.5})


def test_composition_orders_agree_for_gdp_and_zcdp():
    # Prop. 21; for GDP both orders give G_{a√Σμ²}, for zCDP a²Σρ
    gdp = [("gdp", {"mu": 0.3}), ("gdp", {"mu": 0.4})]
    first, second = compose_semi_dp(gdp, 2, "semi_first"), compose_semi_dp(gdp, 2, "composition_first")
    assert first.parameters["mu"] == pytest.approx(second.parameters["mu"]) == pytest.approx(1.0)
    z = [("zcdp", {"rho": 0.1}), ("zcdp", {"rho": 0.2})]
    assert compose_semi_dp(z, 3, "semi_first").parameters["rho"] == pytest.approx(2.7)
    assert compose_semi_dp(z, 3, "composition_first").parameters["rho"] == pytest.approx(2.7)


def test_composition_rejects_mixed_definitions_and_unknown_orders():
    with pytest.raises(ValueError):
        compose_semi_dp([("gdp", {"mu": 1}), ("zcdp", {"rho": 1})], 2)
    with pytest.raises(ValueError):
        compose_semi_dp([("gdp", {"mu": 1})], 2, order="sideways")


def test_scope_states_what_is_protected():
    scope = semi_dp_scope("zcdp", {"rho": 2.56}, 2, "worst_case", "closed form: ...", True, True)
    assert "differ in at most 2 records" in scope["statement"]
    assert "not protected" in scope["not_protected"]
    # headline: CKS (17.15831 at ρ = 2.56, δ = 1e-10: the stationary point of the CKS bound in 40-digit
    # mpmath, tests/test_cks_conversion.py); the paper's Lemma 40 figures are kept as labelled looser bounds
    assert round(scope["epsilon_at_delta"]["1e-10"], 5) == 17.15831
    assert "CKS" in scope["epsilon_conversion"]
    assert round(scope["epsilon_looser_bounds"]["bun_steinke"]["epsilon_at_delta"]["1e-10"], 5) == 17.91528
    comparison = scope["ordinary_dp_read_under_invariants"]
    assert comparison["rho"] == pytest.approx(10.24) and round(comparison["epsilon_at_delta"]["1e-10"], 5) == 39.82257
    assert round(comparison["epsilon_looser_bounds"]["bun_steinke"]["epsilon_at_delta"]["1e-10"], 5) == 40.95057
    for reading in (scope, comparison):  # the headline is the tightest of the readings listed
        for key, eps in reading["epsilon_at_delta"].items():
            assert eps <= reading["epsilon_looser_bounds"]["bun_steinke"]["epsilon_at_delta"][key]
    disconnected = semi_dp_scope("gdp", {"mu": 1.0}, 3, "literal", "x", False, False)
    assert "NOT a function of the invariants" in disconnected["not_protected"]
