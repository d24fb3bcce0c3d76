"""The discrete generalized Gaussian on counts under (ε, δ), ρ-zCDP and μ-GDP (dpopt.privacy.discrete_gg_profile,
dpopt.mechanisms.generalized_gaussian_lattice), and its pDP level for moves of three cells.

Expected values, each independent of the arb code under test:
- the (ε, δ) profile by its definition δ = Σ_k (P[k] − e^ε P[k + v])₊, a direct mpmath sum of the pmfs over a box
  whose tail is below 10⁻⁴⁰ (no loss law, no convolution);
- at p = 2, CKS 2020 Theorem 7's closed form of the discrete Gaussian N_ℤ(0, s²/2)
  (dpopt.privacy.discrete_gaussian, a different derivation);
- the pDP level by its definition P[|L| > ε], an mpmath sum over the three-coordinate box;
- ρ = Δ₂²/(2σ²) for the discrete Gaussian (CKS 2020, Thm 14), with σ² = s²/2;
- utilities: E K² of the discrete law by an mpmath sum.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest

import dpopt
from dpopt.errors import CalibrationError
from dpopt.mechanisms.generalized_gaussian import GeneralizedGaussianMechanism
from dpopt.mechanisms.integer_noise import dyadic_ceil
from dpopt.noise.discrete_generalized_gaussian import DiscreteGeneralizedGaussian
from dpopt.privacy.discrete_gaussian import discrete_gaussian_delta_mp, discrete_gaussian_move_delta_mp
from dpopt.privacy.discrete_gg_pdp import pdp_level
from dpopt.privacy.discrete_gg_profile import profile_delta, profile_scale


def _pmf(p: int, s: Fraction, box: int) -> dict[int, mpmath.mpf]:
    sm = mpmath.mpf(s.numerator) / s.denominator
    w = {k: mpmath.exp(-((abs(k) / sm) ** p)) for k in range(-box, box + 1)}
    z = mpmath.fsum(w.values())
    return {k: v / z for k, v in w.items()}


def _mp_profile(p: int, s: Fraction, pattern: tuple[int, ...], eps: float, box: int) -> float:
    """Σ_k (P[k] − e^ε P[k + v])₊ over the box |k_i| ≤ box (40 digits); P[k + v] = 0 outside the box only drops
    terms whose P[k] is below 10⁻⁴⁰ (the boxes below are chosen so)."""
    mpmath.mp.dps = 40
    pmf = _pmf(p, s, box + max(pattern))
    e = mpmath.exp(eps)
    total = mpmath.mpf(0)
    for ks in itertools.product(range(-box, box + 1), repeat=len(pattern)):
        here = mpmath.fprod(pmf[k] for k in ks)
        there = mpmath.fprod(pmf[k + v] for k, v in zip(ks, pattern))
        if here > e * there:
            total += here - e * there
    return float(total)


@pytest.mark.parametrize("p, s, pattern, box", [
    (2, Fraction(8, 3), (1,), 40), (3, Fraction(4), (2,), 40), (4, Fraction(5), (1,), 40),
    (3, Fraction(9, 2), (1, 1), 30), (4, Fraction(3), (1, 2), 20), (2, Fraction(2), (1, 1, 1), 20),
])
def test_profile_is_a_tight_upper_bound_on_the_definition(p, s, pattern, box):
    expected = _mp_profile(p, s, pattern, 1.0, box)
    got = float(profile_delta(p, s, pattern, Fraction(1)))
    assert expected <= got * (1 + 1e-15) and got <= expected * (1 + 1e-12) + 1e-22


@pytest.mark.parametrize("s, pattern", [(Fraction(3), (1,)), (Fraction(7, 2), (2,)), (Fraction(5, 2), (1, 1))])
def test_p2_profile_is_the_discrete_gaussian_closed_form(s, pattern):
    # GG(s, 2) on ℤ is N_ℤ(0, σ²) with σ² = s²/2; CKS 2020 Thm 7 (one coordinate), its move form (two)
    sigma2 = s * s / 2
    cks = (discrete_gaussian_delta_mp(0.5, sigma2, pattern[0]) if len(pattern) == 1
           else discrete_gaussian_move_delta_mp(0.5, sigma2, pattern))
    assert float(profile_delta(2, s, pattern, Fraction(1, 2))) == pytest.approx(float(cks), rel=1e-12)


def test_pdp_level_of_a_three_cell_move_matches_the_definition():
    p, s, pattern = 2, Fraction(5, 2), (1, 1, 1)
    mpmath.mp.dps = 40
    pmf = _pmf(p, s, 20)
    threshold = s**p  # ε = 1: |Σ A_i| > ε s^p
    expected = float(mpmath.fsum(
        mpmath.fprod(pmf[k] for k in ks) for ks in itertools.product(range(-20, 21), repeat=3)
        if abs(sum(abs(k + v) ** p - abs(k) ** p for k, v in zip(ks, pattern))) > threshold))
    got = float(pdp_level(p, s, pattern, Fraction(1)))
    assert expected <= got <= expected * (1 + 1e-12) + 1e-22


def test_a_convolution_beyond_the_limit_is_refused_in_one_line():
    with pytest.raises(CalibrationError, match="products in one convolution step"):
        profile_delta(3, Fraction(40), (1,) * 4, Fraction(1))


def test_sampled_loss_matches_the_profile():
    # p = 3, s = 4, a one-cell move v = 1, ε = 0.5: δ = E[(1 − e^{ε − L(K)})₊], L(K) = (|K + 1|³ − |K|³)/s³ (the
    # cubes are exact in doubles here). 200000 draws of the exact sampler; the summand lies in [0, 1], its standard
    # error is estimated by the sample SD/√n; tolerance 4 SE (a false alarm below 10⁻⁴)
    s, eps = Fraction(4), 0.5
    k = DiscreteGeneralizedGaussian(3, s).sample(np.random.default_rng(7), 200_000).astype(float)
    loss = (np.abs(k + 1) ** 3 - np.abs(k) ** 3) / 64.0
    terms = np.maximum(0.0, 1.0 - np.exp(eps - loss))
    expected = float(profile_delta(3, s, (1,), Fraction(1, 2)))
    assert expected > 0.01
    assert abs(terms.mean() - expected) < 4 * terms.std() / math.sqrt(terms.size)


def _spec(privacy, adjacency="add_remove", **extra):
    return {"dpopt": 1, "name": "discrete gg targets", "data": {"attributes": {"x": ["a", "b", "c"]}},
            "query": {"kind": "histogram", "attribute": "x"}, "adjacency": {"kind": adjacency},
            "privacy": privacy, "mechanism": "generalized_gaussian", "utility": {"metric": "l2"}, **extra}


def _second_moment(p: int, s: Fraction) -> float:
    mpmath.mp.dps = 30
    pmf = _pmf(p, s, int(12 * s) + 20)
    return float(mpmath.fsum(k * k * v for k, v in pmf.items()))


def _forged(certificate, **changes):
    data = certificate.data
    params = data["mechanism"]["parameters"]
    return {**data, "mechanism": {**data["mechanism"], "parameters": {**params, **changes}}}


def test_zcdp_histogram_is_the_discrete_gaussian_at_the_smallest_dyadic_scale():
    sol = dpopt.solve(_spec({"zcdp": {"rho": 0.5}}))
    mech = sol.mechanism
    s = mech.lattice_scale
    assert (mech.p, mech.calibration, mech.exact_noise) == (2, "lattice_gaussian", True)
    # ρ = Δ₂²/(2σ²) = 1/s² (Δ₂ = 1, σ² = s²/2): s² ≥ 2, and one step of 2^-20 lower would not be
    assert 1 / (s * s) <= Fraction(1, 2) < 1 / (s * s * (1 - Fraction(1, 2**19)))
    assert sol.certificate["utility"]["value"] == pytest.approx(3 * _second_moment(2, s), rel=1e-12)
    assert not any("idealized" in note for note in sol.certificate["mechanism"]["notes"])
    assert dpopt.verify(sol.certificate).passed
    smaller = s * (1 - Fraction(1, 2**10))
    forged = dpopt.verify(_forged(sol.certificate, scale_exact=str(smaller), scale=float(smaller)))
    assert "privacy" in {c.claim for c in forged.failed}


def test_approx_table_measures_p2_on_its_exact_two_cell_profile():
    # (ε, δ) = (0.5, 0.05) on a replace-one histogram (moves (1, 1)): p = 2 wins, the lattice's below the continuous
    sol = dpopt.solve(_spec({"approx": {"epsilon": 0.5, "delta": 0.05}}, adjacency="replace_one"))
    mech = sol.mechanism
    s = mech.lattice_scale
    assert (mech.p, mech.calibration) == (2, "lattice_profile")
    assert _mp_profile(2, s, (1, 1), 0.5, 30) <= 0.05
    assert sol.certificate["utility"]["value"] == pytest.approx(3 * _second_moment(2, s), rel=1e-12)
    assert dpopt.verify(sol.certificate).passed
    smaller = s * Fraction(9, 10)
    assert _mp_profile(2, smaller, (1, 1), 0.5, 30) > 0.05
    forged = dpopt.verify(_forged(sol.certificate, scale_exact=str(smaller), scale=float(smaller)))
    assert "privacy" in {c.claim for c in forged.failed}


def test_p3_calibration_meets_the_definition_and_p3_has_no_renyi_guarantee():
    spec = dpopt.load_spec(_spec({"approx": {"epsilon": 1.0, "delta": 1e-3}}))
    space = dpopt.derive(spec)
    s = profile_scale(3, [(1,)], Fraction(1), Fraction(1, 1000), 5.0, dyadic_ceil)
    lower = s * Fraction(19, 20)
    assert _mp_profile(3, s, (1,), 1.0, 40) <= 1e-3 < _mp_profile(3, lower, (1,), 1.0, 40)
    for scale, holds in ((s, True), (lower, False)):
        mech = GeneralizedGaussianMechanism(3, float(scale), 3, "unbounded", "lattice_profile", lattice_scale=scale)
        (check,) = mech.privacy_checks(space, spec.privacy)
        assert check.passed == holds
    zcdp = dpopt.load_spec(_spec({"zcdp": {"rho": 0.5}}))
    (refused,) = mech.privacy_checks(dpopt.derive(zcdp), zcdp.privacy)
    assert not refused.passed and "p = 3" in refused.detail


def test_gdp_at_small_noise_is_exact_and_states_its_cost():
    # μ = 1: the discrete Gaussian's certified GDP slope costs ≈ 1/(12σ²) + 2·10⁻⁴ of variance (σ² ≈ 1); exact is
    # the default, the cost is stated (its value against a summed pmf: tests/test_exact_cost.py)
    sol = dpopt.solve(_spec({"gdp": {"mu": 1.0}}))
    assert sol.mechanism.exact_noise and sol.mechanism.parameters["exact_cost"]["ratio"] > 1
    assert any("exact is the default" in note for note in sol.mechanism.notes())
    assert dpopt.verify(sol.certificate).passed


def test_gdp_lattice_option_verifies_and_a_smaller_scale_fails():
    spec = dpopt.load_spec(_spec({"gdp": {"mu": 0.05}}))
    sol = dpopt.solve(spec)
    mech = sol.mechanism
    # σ² ≈ 400: the lattice's variance cost is below 0.1%, the exact option is kept
    assert (mech.p, mech.calibration, mech.exact_noise) == (2, "lattice_gaussian", True)
    assert dpopt.verify(sol.certificate).passed
    smaller = mech.lattice_scale * (1 - Fraction(1, 2**8))
    forged = dpopt.verify(_forged(sol.certificate, scale_exact=str(smaller), scale=float(smaller)))
    assert "privacy" in {c.claim for c in forged.failed}
