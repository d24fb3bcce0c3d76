"""Generalized Gaussian noise under (ε, δ), ρ-zCDP and μ-GDP targets (issue 26).

References, each independent of :mod:`dpopt.privacy.gg_profile`:
- p = 1 is Laplace: δ(ε) = 1 − e^{(ε − s)/2} (closed form; dp_accounting's tests pin δ(0) = 1 − e^{−1/2} at s = 1);
- p = 2 is N(0, b²/2): the analytic Gaussian profile at μ = √2·s (Balle & Wang 2018, Thm 8; scipy's Φ);
- p = 1, 2: dp_accounting's PLD brackets of the Laplace and Gaussian mechanisms;
- p = 3, 4: δ(ε) = ∫(p(x) − e^ε q(x))₊ dx by mpmath quadrature of the densities, split at the sign change;
- p = 3 has no zCDP guarantee: D_α/α by mpmath quadrature grows with α (gg_profile's proof).
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import pytest
from scipy import stats

import dpopt
from dpopt.privacy.gg_profile import gg_delta_mp, gg_scale_for_approx


def _gg_density(x, loc, p):
    return p / (2 * mpmath.gamma(mpmath.mpf(1) / p)) * mpmath.exp(-abs(x - loc) ** p)


def _quadrature_delta(epsilon: float, shift: float, p: int) -> mpmath.mpf:
    """∫(p − e^ε q)₊ over (−∞, y*), y* where the densities' log-ratio equals ε (found by findroot)."""
    with mpmath.workdps(30):
        s, e = mpmath.mpf(shift), mpmath.mpf(epsilon)
        root = mpmath.findroot(lambda y: abs(y - s) ** p - abs(y) ** p - e, (-50, s / 2), solver="bisect")
        return mpmath.quad(lambda x: _gg_density(x, 0, p) - mpmath.exp(e) * _gg_density(x, s, p),
                           [-mpmath.inf, min(root, 0), root])


@pytest.mark.parametrize("epsilon, shift", [(0.0, 1.0), (0.5, 1.0), (1.0, 3.0), (2.5, 2.6)])
def test_p1_is_the_laplace_profile(epsilon, shift):
    assert float(gg_delta_mp(epsilon, Fraction(shift), 1)) == pytest.approx(-math.expm1((epsilon - shift) / 2),
                                                                            rel=1e-13, abs=1e-300)


@pytest.mark.parametrize("epsilon, shift", [(0.0, 0.5), (0.5, 0.3), (1.0, 1.0), (3.0, 0.9)])
def test_p2_is_the_analytic_gaussian_profile(epsilon, shift):
    mu = math.sqrt(2.0) * shift  # GG(0, 1, 2) = N(0, 1/2): a shift s is μ = s/(1/√2)
    expected = stats.norm.cdf(-epsilon / mu + mu / 2) - math.exp(epsilon) * stats.norm.cdf(-epsilon / mu - mu / 2)
    assert float(gg_delta_mp(epsilon, Fraction(shift), 2)) == pytest.approx(expected, rel=1e-10)


@pytest.mark.parametrize("p, epsilon, shift", [(1, 0.5, 1.0), (1, 2.0, 3.0), (2, 0.5, 0.6), (2, 1.0, 1.5)])
def test_p1_p2_against_dp_accounting_pld(p, epsilon, shift):
    """dp_accounting's PLD brackets (pessimistic / optimistic, grid 1e-4) of Laplace(0, 1) and N(0, 1/2)
    against a shift s: GG(0, 1, 1) and GG(0, 1, 2) (Liu 2019, §2: b = 1 is σ = 1/√2)."""
    pld = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")
    bracket = []
    for pessimistic in (False, True):
        if p == 1:
            law = pld.from_laplace_mechanism(1.0, sensitivity=shift, pessimistic_estimate=pessimistic,
                                             value_discretization_interval=1e-4)
        else:
            law = pld.from_gaussian_mechanism(1 / math.sqrt(2.0), sensitivity=shift, pessimistic_estimate=pessimistic,
                                              value_discretization_interval=1e-4)
        bracket.append(law.get_delta_for_epsilon(epsilon))
    value = float(gg_delta_mp(epsilon, Fraction(shift), p))
    assert bracket[0] * (1 - 1e-9) <= value <= bracket[1] * (1 + 1e-9)


@pytest.mark.parametrize("p, epsilon, shift", [(3, 0.5, 0.4), (3, 1.0, 0.2), (4, 1.0, 0.3), (4, 0.2, 1.5)])
def test_p3_p4_profile_against_quadrature(p, epsilon, shift):
    assert float(gg_delta_mp(epsilon, Fraction(shift), p)) == pytest.approx(float(_quadrature_delta(epsilon, shift, p)),
                                                                            rel=1e-9)


def test_profile_is_an_upper_bound_and_calibration_is_tight():
    # the calibrated b meets δ; one ulp-scale step below (1e-9 relative) it fails: the root is tight
    b = gg_scale_for_approx(1.0, 1e-6, 2.0, 3)
    assert gg_delta_mp(1.0, Fraction(2.0) / Fraction(b), 3) <= 1e-6
    assert gg_delta_mp(1.0, Fraction(2.0) / Fraction(b * (1 - 1e-9)), 3) > 1e-6
    # the scale is linear in the shift (δ depends on Δ/b only)
    assert gg_scale_for_approx(1.0, 1e-6, 1.0, 3) == pytest.approx(b / 2, rel=1e-12)


def test_p3_renyi_over_alpha_grows_without_bound():
    """D_α/α of GG(0,1,3) vs GG(0.5,1,3) by quadrature: increasing over α = 2, 8, 32 (no zCDP)."""
    def renyi_over_alpha(alpha):
        with mpmath.workdps(30):
            s = mpmath.mpf("0.5")
            integral = mpmath.quad(lambda x: _gg_density(x, 0, 3) ** alpha * _gg_density(x, s, 3) ** (1 - alpha),
                                   [-mpmath.inf, -20, -5, 0, s, mpmath.inf])
            return float(mpmath.log(integral) / (alpha - 1) / alpha)

    values = [renyi_over_alpha(a) for a in (2, 8, 32)]
    assert values[0] < values[1] < values[2]
    assert values[2] > 10 * values[0]


def _spec(privacy: dict, mechanism="generalized_gaussian", query=None, adjacency="add_remove") -> dict:
    return {
        "dpopt": 1,
        "name": "gg targets",
        "data": {"attributes": {"x": ["a", "b", "c"]}},
        "query": query or {"kind": "histogram", "attribute": "x"},
        "adjacency": {"kind": adjacency},
        "privacy": privacy,
        "mechanism": mechanism,
        "utility": {"metric": "l2"},
    }


@pytest.mark.parametrize("privacy, family", [
    ({"approx": {"epsilon": 1.0, "delta": 0.05}}, "laplace"),
    ({"approx": {"epsilon": 1.0, "delta": 1e-6}}, "laplace"),
    ({"zcdp": {"rho": 0.5}}, "gaussian"),
    ({"gdp": {"mu": 1.0}}, "gaussian"),
])
def test_gg_designs_and_verifies_under_each_target(privacy, family):
    """GG's best shape costs exactly what the family it contains costs, and its certificate verifies."""
    # GG contains the continuous Gaussian and Laplace (the floating-point samplers); its exact lattice options are
    # other laws (tests/test_discrete_gg_targets.py)
    gg = dpopt.solve({**_spec(privacy), "sampler": "floating_point"})
    reference = dpopt.solve({**_spec(privacy, mechanism=family), "sampler": "floating_point"})
    assert gg.mechanism.parameters["p"] in (1, 2)
    assert gg.certificate["utility"]["value"] == pytest.approx(reference.certificate["utility"]["value"], rel=1e-12)
    assert dpopt.verify(gg.certificate).passed


def test_auto_keeps_the_family_listed_first_on_a_tie():
    """GG at p = 1 equals Laplace up to rounding: auto never picks it over the family listed before it."""
    solution = dpopt.solve(_spec({"approx": {"epsilon": 1.0, "delta": 0.05}},
                                 mechanism=["laplace", "generalized_gaussian"]))
    assert solution.mechanism.family == "laplace"


def test_p3_certificate_and_multi_coordinate_refusal():
    """A p = 3 design on one-coordinate moves verifies (second route: the PLD of the noise law); a
    replace-one histogram (two coordinates move) is refused for p ≥ 3 in one line."""
    spec = _spec({"approx": {"epsilon": 1.0, "delta": 1e-3}})
    problem = dpopt.compile(spec)
    cls = type(dpopt.solve(spec).mechanism)
    b = gg_scale_for_approx(1.0, 1e-3, 1.0, 3)
    mechanism = cls(3, b, 3, "unbounded", "exact_profile")
    (check,) = mechanism._privacy_checks(problem.space, problem.spec.privacy)
    assert check.passed and "exact GG profile" in check.method
    (fails,) = cls(3, b * (1 - 1e-6), 3, "unbounded", "exact_profile")._privacy_checks(problem.space,
                                                                                      problem.spec.privacy)
    assert not fails.passed
    replace = dpopt.solve(_spec({"approx": {"epsilon": 1.0, "delta": 1e-3}}, adjacency="replace_one"))
    assert any("one-coordinate moves" in note for note in replace.mechanism.notes())
