"""Every family's privacy check compares with the decimal written, not the binary float nearest to it (issue 35).

``tests/test_decimal_targets.py`` covers the shared checks (Gaussian, Laplace, pure conversions). Here each
family that calls them or has its own check is driven to a parameter *between the two readings*:

* A target t whose float is above the decimal (0.1 is 3602879701896397/2⁵⁵ > 1/10; exact values from
  ``float.as_integer_ratio``) is taken from :data:`TARGETS`.
* The family's scalar parameter (a Laplace scale b, a Gaussian σ, a covariance coefficient a_∅) is walked
  one ulp at a time to the first value at which the exact privacy loss exceeds the decimal.
* That loss is then still at most the float, which the test asserts. The float reading would therefore have
  accepted that parameter, and the decimal reading must refuse it.
* The value one ulp back, whose loss is at most the decimal, must be accepted.

The loss is computed by the test in rational arithmetic from the mechanism's exact sensitivity: the l1
sensitivity Δ₁ gives Δ₁/b, the l2 sensitivity Δ₂² gives Δ₂²/σ², and the exact Mahalanobis sensitivity gives
μ_Σ². The verdicts asserted follow from comparing those rationals with the two readings of t, not from the
code under test.

Partition selection and quantiles are checked the same way on their recorded blocks (:func:`release_checks`),
with parameters whose exact loss is the binary 0.1.
"""

from __future__ import annotations

import copy
import math
from fractions import Fraction

import pytest

import dpopt
from dpopt.mechanisms.kronecker_laplace import l1_sensitivity
from dpopt.mechanisms.marginal_laplace import _l1 as marginal_l1
from dpopt.selection.design import certify, release_checks
from dpopt.spec.models import Privacy
from dpopt.spec.selection import load_selection_spec

TARGETS = ("0.1", "0.2", "0.4", "0.8", "0.9", "1.1", "1.3", "1.6", "1.8", "2.1", "2.2", "2.6", "2.7")
"""Decimals whose float is above them (asserted in :func:`_above`), tried in order until one separates."""

BINARY_TENTH = Fraction(3602879701896397, 2**55)
"""The float 0.1, exactly (0.1.as_integer_ratio())."""

KRONECKER = {
    "dpopt": 1, "name": "k", "data": {"attributes": {"age": ["0", "1", "2", "3"], "sex": ["f", "m"]}, "n": 100},
    "query": {"kind": "kronecker", "terms": [{"age": {"ranges": 2}, "sex": "identity"}, {"age": "prefix"}]},
    "adjacency": {"kind": "add_remove"}, "utility": {"metric": "l2"}}
MARGINALS = {
    "dpopt": 1, "name": "m", "data": {"attributes": {"a": ["x", "y", "z"], "b": ["p", "q"], "c": ["r", "s"]}},
    "query": {"kind": "marginals", "all_of_size": 2}, "adjacency": {"kind": "add_remove"},
    "utility": {"metric": "l2"}}
COUNT = {"dpopt": 1, "name": "c", "data": {"attributes": {"a": ["x", "y"]}}, "query": {"kind": "count"},
         "adjacency": {"kind": "add_remove"}, "utility": {"metric": "l2"}}


def _above(text: str) -> tuple[Fraction, Fraction]:
    """(decimal, float) readings of ``text``, the float's strictly above."""
    decimal, binary = Fraction(text), Fraction(float(text))
    assert binary > decimal, text
    return decimal, binary


def _solve(base: dict, family: str, privacy: dict):
    solution = dpopt.solve({**base, "mechanism": family, "privacy": privacy})
    return solution.mechanism, dpopt.derive(dpopt.load_spec({**base, "mechanism": family, "privacy": privacy}))


def _privacy_passes(mechanism, space, privacy: Privacy) -> bool:
    return next(c for c in mechanism.privacy_checks(space, privacy) if c.claim == "privacy").passed


def _separating_scale(loss, decimal: Fraction, start: float, down: bool) -> tuple[float, float] | None:
    """(inside, outside): adjacent floats of the parameter, loss(inside) ≤ decimal < loss(outside), walking from
    ``start`` (the loss grows when the parameter moves ``down``, or up)."""
    toward, back = (0.0, math.inf) if down else (math.inf, 0.0)
    x = start
    while loss(x) > decimal:  # back into the accepted side first
        x = math.nextafter(x, back)
    while loss(x) <= decimal:
        inside, x = x, math.nextafter(x, toward)
    return inside, x


def _find(loss, start_of) -> tuple[str, float, float]:
    """The first target of :data:`TARGETS` with a parameter between its readings: (target, inside, outside)."""
    for text in TARGETS:
        decimal, binary = _above(text)
        inside, outside = _separating_scale(loss, decimal, start_of(decimal), down=True)
        if loss(outside) <= binary:
            return text, inside, outside
    raise AssertionError("no target separates the readings")


# --------------------------------------------------------------------------- Laplace-type: loss Δ₁/b
def _laplace_case(mechanism, space, l1: Fraction, definition: str = "pure"):
    text, inside, outside = _find(lambda b: l1 / Fraction(b), lambda eps: float(l1 / eps))
    privacy = Privacy.model_validate({definition: {"epsilon": float(text)}})
    rebuilt = [type(mechanism).from_parameters({**mechanism.parameters, "scale": b}, space) for b in (inside, outside)]
    return [_privacy_passes(m, space, privacy) for m in rebuilt]


def test_kronecker_laplace_compares_with_the_decimal():
    # the continuous design's check Δ₁/b ≤ ε (the exact lattice's Σ Δ_S/t_S: test_kronecker_laplace_exact.py)
    mechanism, space = _solve({**KRONECKER, "sampler": "floating_point"}, "kronecker_laplace", {"pure": {"epsilon": 1}})
    l1 = l1_sensitivity(mechanism.strategy, mechanism.replace, mechanism.multiplier)
    assert _laplace_case(mechanism, space, l1) == [True, False]


def test_marginal_laplace_compares_with_the_decimal():
    # the continuous design's check Δ₁/b ≤ ε (the exact lattice scales' Σ Δ_S/t_S: test_marginal_laplace_exact.py)
    mechanism, space = _solve({**MARGINALS, "sampler": "floating_point"}, "marginal_laplace", {"pure": {"epsilon": 1}})
    l1 = marginal_l1(mechanism.workload, mechanism.weights, mechanism.replace, mechanism.multiplier)
    assert _laplace_case(mechanism, space, l1) == [True, False]


def test_generalized_gaussian_laplace_shape_compares_with_the_decimal():
    """p = 1, unbounded (Laplace): its own exact check Δ₁/b ≤ ε, pure ε; a count has Δ₁ = 1."""
    # the continuous design (its scale is walked here; the lattice's s is an exact rational, checked as Δ₁/s ≤ ε)
    mechanism, space = _solve({**COUNT, "sampler": "floating_point"}, "generalized_gaussian", {"pure": {"epsilon": 1}})
    assert mechanism.p == 1 and space.l1 == 1
    assert _laplace_case(mechanism, space, Fraction(space.l1)) == [True, False]


# --------------------------------------------------------------------------- Gaussian-type: loss under μ-GDP
def test_kronecker_gaussian_compares_with_the_decimal():
    """μ-GDP: Δ₂²/σ² ≤ μ², the loss read as (Δ₂/σ)² against μ² in both readings."""
    # the continuous design's check (the lattice's block variances are certified by the slope, not walked here)
    mechanism, space = _solve({**KRONECKER, "sampler": "floating_point"}, "kronecker_gaussian", {"gdp": {"mu": 1}})
    squared = mechanism._sensitivity_squared
    for text in TARGETS:
        decimal, binary = _above(text)
        inside, outside = _separating_scale(lambda s: squared / Fraction(s) ** 2, decimal**2,
                                            math.sqrt(squared / decimal**2), down=True)
        if squared / Fraction(outside) ** 2 <= binary**2:
            break
    else:
        raise AssertionError("no target separates the readings")
    privacy = Privacy.model_validate({"gdp": {"mu": float(text)}})
    verdicts = [_privacy_passes(type(mechanism).from_parameters({**mechanism.parameters, "sigma": s}, space),
                                space, privacy) for s in (inside, outside)]
    assert verdicts == [True, False]


def test_marginal_gaussian_compares_with_the_decimal():
    """Its check is μ_Σ² ≤ μ² at σ = 1, μ_Σ² = Σ_T a_T m_T/N under add/remove (linear in each a_T): a_∅ is
    walked (one ulp moves μ_Σ² by about 2⁻⁵²·a_∅/N, finer than the gap between the readings of μ²)."""
    # the continuous design's check (the lattice's effective variances are certified by the slope, not walked here)
    mechanism, space = _solve({**MARGINALS, "sampler": "floating_point"}, "marginal_gaussian", {"gdp": {"mu": 1}})
    text = "1.1"
    decimal, binary = _above(text)
    scaled = {t: a * float(text) ** 2 for t, a in mechanism.coefficients.items()}

    def with_empty(a: float):
        coefficients = [{"component": [mechanism.attributes[k] for k in t], "a": a if t == () else value}
                        for t, value in scaled.items()]
        return type(mechanism).from_parameters({**mechanism.parameters, "coefficients": coefficients}, space)

    def loss(a: float) -> Fraction:
        return with_empty(a)._mahalanobis_squared()

    inside, outside = _separating_scale(loss, decimal**2, scaled[()], down=False)
    assert decimal**2 < loss(outside) <= binary**2  # the walk lands between the readings of μ²
    privacy = Privacy.model_validate({"gdp": {"mu": float(text)}})
    assert [_privacy_passes(with_empty(a), space, privacy) for a in (inside, outside)] == [True, False]


def test_r2dp_compares_with_the_decimal():
    """R²DP's ε is Thm 4.1 in 60 digits, converted exactly (pure_implies). A second fold with one atom t is
    Laplace(1/t): ε(Δ) = ln(E[t]/M'(−Δ)) = ln(t/(t e^{−Δt})) = Δt, Δ = 1 for a count. t = the float 0.1
    spends 1/10 + 5.55·10⁻¹⁸ (the binary 0.1), beyond 60-digit error of 1/10: refused at ε = 0.1; the float
    below it spends 1/10 − 8.3·10⁻¹⁸: accepted. (The loss is an mpmath value, so which side of the binary 0.1
    it lands on is not asserted.)"""
    from dpopt.mechanisms.r2dp import R2DPMechanism

    spec = {**COUNT, "mechanism": "r2dp", "privacy": {"pure": {"epsilon": 0.1}}}
    space = dpopt.derive(dpopt.load_spec(spec))
    privacy = Privacy.model_validate({"pure": {"epsilon": 0.1}})
    verdicts = []
    for t in (math.nextafter(0.1, 0.0), 0.1):
        fold = {"kind": "discrete", "atoms": [t], "weights": [1.0]}
        verdicts.append(_privacy_passes(R2DPMechanism.from_parameters({"second_fold": fold}, space), space, privacy))
    assert Fraction(math.nextafter(0.1, 0.0)) < Fraction(1, 10) < Fraction(0.1)
    assert verdicts == [True, False]


# --------------------------------------------------------------------------- partition selection, quantiles
SELECTION = {
    "dpopt": 1, "name": "s", "adjacency": {"kind": "add_remove"},
    "data": {"attributes": {"clinic": {"keys": "private", "declared": ["north", "south"]}},
             "privacy_unit": {"id": "pid", "max_rows": 2, "max_groups": 1}},
    "releases": [{"kind": "count", "by": "clinic", "epsilon": 0.2, "delta": 1e-6, "selection": "optimal"}],
    "privacy": {"approx": {"epsilon": 0.2, "delta": 1e-6}}}
QUANTILE = {
    "dpopt": 1, "name": "median", "adjacency": "add_remove", "privacy": {"pure": {"epsilon": 0.1}},
    "data": {"attributes": {"duration": {"min": 0, "max": 20}}, "privacy_unit": {"id": "person_id", "max_rows": 1}},
    "releases": [{"kind": "quantile", "attribute": "duration", "q": [0.5], "grid": {"step": 1}, "epsilon": 0.1}],
}


def _verdict(spec, blocks, claim: str) -> bool:
    return next(c for c in release_checks(spec, blocks) if c.claim == claim).passed


def test_partition_selection_composition_compares_with_the_decimal():
    """One key per person (g = 1), ε = 0.2 with the default share 1/2: the selection's budget is 1/10 exactly.
    ε′ = the float 0.1 (> 1/10, the float reading of 0.2 × 1/2) is refused; the design's ε′ ≤ 1/10."""
    spec = load_selection_spec(SELECTION)
    blocks = certify(spec)["releases"]
    designed = blocks[0]["partition_selection"]["epsilon_per_key"]
    assert Fraction(designed) <= Fraction(1, 10)
    assert _verdict(spec, blocks, "releases[0].selection.composition")
    forged = copy.deepcopy(blocks)
    forged[0]["partition_selection"]["epsilon_per_key"] = 0.1
    assert Fraction(0.1) == BINARY_TENTH > Fraction(1, 10)
    assert not _verdict(spec, forged, "releases[0].selection.composition")


def test_quantile_epsilon_compares_with_the_decimal():
    """q = 1/2, R = 1: ε = 2βRΔ = β. β = the float 0.1 spends the binary 0.1 > 1/10: refused; the designed β
    (a float with β ≤ 1/10, below the float 0.1) is accepted."""
    spec = load_selection_spec(QUANTILE)
    blocks = certify(spec)["releases"]
    designed = blocks[0]["per_q"][0]["beta"]
    assert Fraction(designed) <= Fraction(1, 10) and designed < 0.1
    assert _verdict(spec, blocks, "releases[0].epsilon")
    forged = copy.deepcopy(blocks)
    forged[0]["per_q"][0]["beta"] = 0.1
    assert not _verdict(spec, forged, "releases[0].epsilon")


@pytest.mark.parametrize("relative", [1e-13, 1e-15])
def test_no_relative_slack_above_the_target(relative):
    """The checks once accepted 1 + 10⁻¹² times the target; β = 1/10·(1 + r) rounded up is refused."""
    spec = load_selection_spec(QUANTILE)
    forged = certify(spec)["releases"]
    forged[0]["per_q"][0]["beta"] = math.nextafter(0.1 * (1 + relative), math.inf)
    assert not _verdict(spec, forged, "releases[0].epsilon")


# --------------------------------------------------------------------------- generalized Gaussian: 60-digit checks
def _mp_fraction(value: Fraction):
    """``value`` in 100 digits (both readings of a target differ in their 17th digit)."""
    import mpmath

    with mpmath.workdps(100):
        return mpmath.mpf(value.numerator) / value.denominator


def _lemma10_level(b: float):
    """Lemma 10's bound at ε = 1, Δ₂ = 1, in 100 digits: GG(0, b, 2) = N(0, σ²), σ = b/√2; the privacy loss of
    one record is N(m, v²) with m = Δ²/(2σ²), v = Δ/σ, and the bound is 2Φ(−(ε − m)/v)."""
    import mpmath

    with mpmath.workdps(100):
        sigma = _mp_fraction(Fraction(b)) / mpmath.sqrt(2)
        m, v = 1 / (2 * sigma**2), 1 / sigma
        return 2 * mpmath.ncdf(-(1 - m) / v)


def _bisect(g, lo, hi):
    """The root of g, positive at ``lo`` and not at ``hi``, to 2⁻⁴⁰⁰ of the bracket."""
    for _ in range(400):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if g(mid) > 0 else (lo, mid)
    return (lo + hi) / 2


def _gg_delta(b: float, p: int):
    """δ(ε = 1) of GG(0, 1, p) against its shift by s = 1/b (one coordinate, Δ∞ = 1), in 100 digits: the set
    where the density ratio exceeds e^ε is {y < y*}, (s − y*)^p − |y*|^p = ε (y* < s/2), so δ = F(y*) − e F(y* − s),
    F the GG(0, 1, p) cdf (F(y) = Q(1/p, |y|^p)/2 for y < 0)."""
    import mpmath

    with mpmath.workdps(100):
        s = 1 / _mp_fraction(Fraction(b))

        def cdf(y):
            tail = mpmath.gammainc(mpmath.mpf(1) / p, abs(y) ** p, mpmath.inf, regularized=True) / 2
            return tail if y < 0 else 1 - tail

        y = _bisect(lambda y: (s - y) ** p - abs(y) ** p - 1, -4 * s - 8, s / 2)
        return cdf(y) - mpmath.e * cdf(y - s)


def _corollary8_level(b: float, p: int):
    """Corollary 8's bound at ε = 1, Δ = 1 on one coordinate, in 100 digits: the loss exceeds ε only where
    (u + c)^p − u^p > ε, u = |e|/b, c = 1/b, that is u > u*; the bound is P(|e|/b > u*) = Q(1/p, u*^p)."""
    import mpmath

    with mpmath.workdps(100):
        c = 1 / _mp_fraction(Fraction(b))
        u = _bisect(lambda u: -((u + c) ** p - u**p - 1), mpmath.mpf(0), mpmath.mpf(64))
        return mpmath.gammainc(mpmath.mpf(1) / p, u**p, mpmath.inf, regularized=True)


GG_CASES = [
    # (shape, target, calibration, b refused, b accepted): b found by a search over two-digit δ whose float is above
    # the decimal (each float scale's δ, in 100 digits, compared with both readings); the test re-derives the verdicts
    (2, {"pdp": {"epsilon": 1, "delta": 6e-3}}, "lemma10", 4.128186801936286, 4.128186801936287),
    (3, {"pdp": {"epsilon": 1, "delta": 1.8e-4}}, "corollary8", 10.776970552040487, 10.776970552040488),
    (3, {"approx": {"epsilon": 1, "delta": 6.1e-3}}, "exact_profile", 4.594535194593779, 4.59453519459378),
    (4, {"approx": {"epsilon": 1, "delta": 2.5e-3}}, "exact_profile", 7.409905508979718, 7.409905508979719),
]


@pytest.mark.parametrize("p, target, calibration, refused, accepted", GG_CASES, ids=lambda v: str(v)[:12])
def test_generalized_gaussian_60_digit_checks_compare_with_the_decimal(p, target, calibration, refused, accepted):
    """p = 2 under pDP (Lemma 10), p = 3 under pDP (Corollary 8) and p = 3, 4 under (ε, δ) (the exact
    one-coordinate profile) on a count: at the scale refused the level lies strictly between the decimal δ and its
    float, at the next float it is at most the decimal (100-digit evaluations written here,
    :func:`_lemma10_level`, :func:`_corollary8_level`, :func:`_gg_delta`)."""
    from dpopt.mechanisms.generalized_gaussian import GeneralizedGaussianMechanism

    text = repr(next(iter(target.values()))["delta"])
    decimal, binary = (_mp_fraction(x) for x in _above(text))
    level = (_lemma10_level if p == 2 else (lambda b: _corollary8_level(b, p)) if "pdp" in target
             else lambda b: _gg_delta(b, p))
    assert decimal < level(refused) <= binary and level(accepted) <= decimal
    assert math.nextafter(refused, math.inf) == accepted
    space = dpopt.derive(dpopt.load_spec({**COUNT, "privacy": {"gdp": {"mu": 1}}}))
    assert space.linf == 1 and space.l2_squared == 1
    privacy = Privacy.model_validate(target)
    verdicts = [_privacy_passes(GeneralizedGaussianMechanism.from_parameters(
        {"p": p, "scale": b, "variant": "unbounded", "calibration": calibration}, space), space, privacy)
        for b in (accepted, refused)]
    assert verdicts == [True, False]
