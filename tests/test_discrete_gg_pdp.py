"""pDP of the discrete generalized Gaussian on counts (dpopt.privacy.discrete_gg_pdp) and the generalized_gaussian
family's exact measurement (dpopt.mechanisms.generalized_gaussian_lattice): levels, calibration, certificates,
tampering, release.

Expected values: mpmath brute-force sums of the lattice law (independent of the arb code), the location of the
level's jump derived by hand (below), the discrete Laplace closed forms (CKS 2020).
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from conftest import ROOT, make_spec

import dpopt
from dpopt.mechanisms.generalized_gaussian import GeneralizedGaussianMechanism
from dpopt.mechanisms.integer_noise import dyadic_ceil
from dpopt.noise.discrete_generalized_gaussian import DiscreteGeneralizedGaussian
from dpopt.privacy.discrete_gg_pdp import pdp_level, pdp_scale

HISTOGRAM = {"kind": "histogram", "attribute": "race"}


def _mp_level(p: int, s: Fraction, pattern: tuple[int, ...], eps: Fraction) -> float:
    """P[|Σ_i (|K_i + v_i|^p − |K_i|^p)| > ε s^p] by a direct mpmath sum over |K_i| ≤ 120 (40 digits)."""
    mpmath.mp.dps = 40
    sm = mpmath.mpf(s.numerator) / s.denominator
    ks = range(-120, 121)
    w = {k: mpmath.exp(-((abs(k) / sm) ** p)) for k in ks}
    z = mpmath.fsum(w.values())
    threshold = eps * s**p
    if len(pattern) == 1:
        (v,) = pattern
        return float(mpmath.fsum(w[k] for k in ks if abs(abs(k + v) ** p - abs(k) ** p) > threshold) / z)
    a, b = pattern
    total = mpmath.fsum(w[i] * w[j] for i in ks for j in ks
                        if abs(abs(i + a) ** p - abs(i) ** p + abs(j + b) ** p - abs(j) ** p) > threshold)
    return float(total / z**2)


@pytest.mark.parametrize("p, s, pattern", [(2, Fraction(8, 3), (1,)), (3, Fraction(4), (2,)), (4, Fraction(5), (1,)),
                                           (2, Fraction(7, 2), (1, 1)), (3, Fraction(9, 2), (1, 1))])
def test_level_is_a_tight_upper_bound_on_the_brute_force_sum(p, s, pattern):
    expected = _mp_level(p, s, pattern, Fraction(1))
    got = pdp_level(p, s, pattern, Fraction(1))
    assert expected <= float(got) <= expected * (1 + 1e-12) + 1e-22


def test_lattice_calibration_sits_at_the_jump_of_the_level():
    # p = 2, a move (1, 1), ε = 1: L = (2(K₁ + K₂) + 2)/s², so |L| > 1 ⟺ |2S + 2| > s² (S = K₁ + K₂, even values
    # 2S + 2). For s² ∈ (10, 12] the event includes |2S + 2| = 12, for s² ∈ (12, 14] it does not: the level jumps
    # down at s² = 12. Brute force: just below √12 it exceeds δ = 0.1, just above it does not; so the smallest
    # passing scale on the 21-bit grid lies in (√12, √12 (1 + 2^-19)].
    below = _mp_level(2, Fraction(3464, 1000), (1, 1), Fraction(1))
    above = _mp_level(2, Fraction(3465, 1000), (1, 1), Fraction(1))
    assert below > 0.1 > above
    s = pdp_scale(2, [(1, 1)], Fraction(1), Fraction(1, 10), 3.8, dyadic_ceil)
    assert 12 < s * s <= 12 * (1 + 2.0**-18)


def _solve(**overrides):
    spec = make_spec(mechanism="generalized_gaussian", **overrides)
    return dpopt.solve(spec)


def test_pdp_table_under_replace_is_measured_exactly():
    sol = _solve(privacy={"pdp": {"epsilon": 1.0, "delta": 0.1}})
    mech = sol.mechanism
    assert (mech.p, mech.calibration, mech.exact_noise) == (2, "lattice_pdp", True)
    assert 12 < mech.lattice_scale**2 <= 12 * (1 + 2.0**-18)
    # E‖K‖² = 6 E K² of the discrete law (mpmath sum)
    mpmath.mp.dps = 30
    s = mpmath.mpf(mech.lattice_scale.numerator) / mech.lattice_scale.denominator
    w = [mpmath.exp(-((k / s) ** 2)) for k in range(-80, 81)]
    second = mpmath.fsum(k * k * wk for k, wk in zip(range(-80, 81), w)) / mpmath.fsum(w)
    assert sol.certificate["utility"]["value"] == pytest.approx(6 * float(second), rel=1e-12)
    assert not any("idealized" in note for note in sol.certificate["mechanism"]["notes"])
    assert dpopt.verify(sol.certificate).passed


def test_pdp_histogram_under_add_remove_keeps_the_discrete_laplace():
    # δ = 0.05: the discrete Laplace at s = Δ₁/ε = 1 has E|K| = 2r/(1 − r²), r = e^{-1} (CKS), the best l1 here
    sol = _solve(query=HISTOGRAM, adjacency="add_remove", privacy={"pdp": {"epsilon": 1.0, "delta": 0.05}},
                 utility={"metric": "l1"})
    mech = sol.mechanism
    assert (mech.p, mech.lattice_scale, mech.calibration) == (1, Fraction(1), "laplace")
    r = math.exp(-1.0)
    assert sol.certificate["utility"]["value"] == pytest.approx(3 * 2 * r / (1 - r * r), rel=1e-12)


def test_floating_point_sampler_keeps_the_continuous_design():
    sol = _solve(privacy={"pdp": {"epsilon": 1.0, "delta": 0.1}}, sampler="floating_point")
    assert sol.mechanism.lattice_scale is None and not sol.mechanism.exact_noise
    assert any("idealized" in note for note in sol.certificate["mechanism"]["notes"])


def test_forged_lattice_parameters_are_refused():
    data = _solve(privacy={"pdp": {"epsilon": 1.0, "delta": 0.1}}).certificate.data
    params = data["mechanism"]["parameters"]

    def forged(**changes):
        return {**data, "mechanism": {**data["mechanism"], "parameters": {**params, **changes}}}

    # s² = 10 < 12: the level is above δ (previous test's brute force)
    smaller = forged(scale_exact="3.1622", scale=3.1622)
    assert "privacy" in {c.claim for c in dpopt.verify(smaller).failed}
    # a float scale that is not the exact one: the mechanism cannot be rebuilt
    assert not dpopt.verify(forged(scale=3.5)).passed


def test_pure_counts_measure_the_discrete_laplace_and_a_small_lattice_scale_fails():
    sol = _solve(query=HISTOGRAM, adjacency="add_remove", privacy={"pure": {"epsilon": 0.5}})
    assert (sol.mechanism.p, sol.mechanism.lattice_scale) == (1, Fraction(2))
    assert dpopt.verify(sol.certificate).passed
    # s = 2 on the 3×2 table under replace-one (move (1, 1)): s² = 4 < 12, the level is above δ (test above)
    space = dpopt.derive(dpopt.load_spec(make_spec(privacy={"pdp": {"epsilon": 1.0, "delta": 0.1}})))
    privacy = dpopt.load_spec(make_spec(privacy={"pdp": {"epsilon": 1.0, "delta": 0.1}})).privacy
    check = GeneralizedGaussianMechanism(2, 2.0, 6, "unbounded", "lattice_pdp", lattice_scale=Fraction(2))
    assert not check.privacy_checks(space, privacy)[0].passed


def test_release_is_integer_counts_plus_integer_noise(tmp_path):
    sol = _solve(privacy={"pdp": {"epsilon": 1.0, "delta": 0.1}})
    counts = np.array([[5.0, 0.0, 12.0, 3.0, 7.0, 1.0]])
    out = sol.mechanism.release(counts, np.random.default_rng(4))
    assert np.all(out == np.round(out))
    with pytest.raises(dpopt.errors.DataError, match="whole-number"):
        sol.mechanism.release(counts + 0.5, np.random.default_rng(4))


def test_example_specs_are_exact():
    for name in ("survey_table_pdp_gg", "table_pdp_replace_gg"):
        sol = dpopt.solve(ROOT / "specs" / f"{name}.yaml")
        assert sol.mechanism.exact_noise, name


def test_sampled_privacy_loss_stays_within_the_certified_level():
    # the exact sampler at the certified s of a (1, 1) move, ε = 1: the fraction of draws with |L| > 1, L computed
    # exactly in integers (|2(K₁ + K₂) + 2| > s²), must match the certified level 0.0705 (≤ δ = 0.1). 100000 pairs:
    # SE = sqrt(0.07·0.93/1e5) = 8.1e-4, tolerance 4 SE; a sampler drawing the continuous-scale law would be off by
    # more than 0.01 (12 SE)
    s = Fraction(1816187, 524288)
    level = float(pdp_level(2, s, (1, 1), Fraction(1)))
    k = DiscreteGeneralizedGaussian(2, s).sample(np.random.default_rng(99), 200_000).reshape(2, -1)
    loss_times_s2 = np.abs(2 * (k[0] + k[1]) + 2).astype(object)
    exceed = np.mean([Fraction(int(v)) > s * s for v in loss_times_s2])
    assert level < 0.1
    assert abs(exceed - level) < 4 * math.sqrt(level * (1 - level) / k.shape[1])
