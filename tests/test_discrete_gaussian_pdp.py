"""pDP of i.i.d. discrete Gaussian noise on counts (dpopt.privacy.discrete_gaussian_pdp) and the exact measurement
of the gaussian and discrete_gaussian families under pDP (dpopt.mechanisms.lattice_pdp): levels, calibration,
certificates, tampering, release.

Expected values: mpmath brute-force sums over the product of the coordinates' laws (independent of the arb
polynomial product), the discrete GG module's box sum at p = 2 (an independent implementation: N_ℤ(0, σ²) is the
discrete GG of scale s with s² = 2σ²), the continuous Gaussian's exact level at large σ² (within a derived lattice
tolerance), the location of the level's jumps derived by hand (below), and the discrete
Gaussian's variance summed in mpmath.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from conftest import make_spec

import dpopt
from dpopt.mechanisms.discrete_gaussian import DiscreteGaussianMechanism
from dpopt.mechanisms.gaussian import GaussianMechanism
from dpopt.noise.discrete_gaussian import sample_discrete_gaussian
from dpopt.privacy import discrete_gg_pdp
from dpopt.privacy.discrete_gaussian_pdp import pdp_level
from dpopt.privacy.pdp import gaussian_pdp_level

HISTOGRAM = {"kind": "histogram", "attribute": "race"}
TARGET = {"pdp": {"epsilon": 1.0, "delta": 0.05}}


def _mp_level(sigma2: Fraction, pattern: tuple[int, ...], eps: Fraction) -> float:
    """P[|‖η + v‖² − ‖η‖²| > 2εσ²] by a direct 40-digit sum over |η_i| ≤ 12σ + 8 (the rest below e^{-72})."""
    mpmath.mp.dps = 40
    s2 = mpmath.mpf(sigma2.numerator) / sigma2.denominator
    top = int(12 * math.sqrt(sigma2)) + 8
    ks = range(-top, top + 1)
    w = {k: mpmath.exp(-mpmath.mpf(k * k) / (2 * s2)) for k in ks}
    z = mpmath.fsum(w.values())
    total = mpmath.mpf(0)
    for eta in itertools.product(ks, repeat=len(pattern)):
        change = sum((e + v) ** 2 - e * e for e, v in zip(eta, pattern))
        if abs(Fraction(change)) > 2 * eps * sigma2:
            total += math.prod((w[e] for e in eta), start=mpmath.mpf(1))
    return float(total / z ** len(pattern))


@pytest.mark.parametrize("sigma2, pattern, eps", [
    (Fraction(7, 2), (1,), Fraction(1)),       # the threshold εσ² − ½ = 3 is an integer: S > 3 strictly
    (Fraction(5), (1,), Fraction(1, 2)),
    (Fraction(9, 4), (2,), Fraction(1)),
    (Fraction(8), (1, 1), Fraction(1)),
    (Fraction(3), (1, 2), Fraction(7, 10)),
    (Fraction(3, 2), (1, 1, 1), Fraction(1)),
])
def test_level_is_a_tight_upper_bound_on_the_brute_force_sum(sigma2, pattern, eps):
    expected = _mp_level(sigma2, pattern, eps)
    got = float(pdp_level(sigma2, pattern, eps))
    assert expected <= got <= expected * (1 + 1e-12) + 1e-25


@pytest.mark.parametrize("sigma2, scale, pattern", [(Fraction(9, 2), Fraction(3), (1,)),
                                                    (Fraction(8), Fraction(4), (1, 1)),
                                                    (Fraction(2), Fraction(2), (2, 1))])
def test_level_agrees_with_the_discrete_gg_box_sum_at_p_2(sigma2, scale, pattern):
    # exp(−k²/(2σ²)) = exp(−(k/s)²) with s² = 2σ²: the same law, two implementations, each an upper bound within
    # its tail bound (< 2^-79)
    ours = pdp_level(sigma2, pattern, Fraction(1))
    theirs = discrete_gg_pdp.pdp_level(2, scale, pattern, Fraction(1))
    assert abs(float(ours - theirs)) < 1e-20


@pytest.mark.parametrize("sigma2, pattern, eps", [(Fraction(10**6), (1000,), Fraction(1)),
                                                  (Fraction(10**4), (10, 10), Fraction(1, 10))])
def test_level_approaches_the_continuous_gaussian_level(sigma2, pattern, eps):
    # S/g (g = gcd of the pattern) is a sum of discrete Gaussians, log-concave, so each of the two tails
    # P[S > x] differs from the integral of N(0, σ²‖v‖²) by at most the largest point mass of S/g, about
    # 1/(sd(S/g)·√(2π)) (Poisson summation: the sum's pmf is the sampled Gaussian density up to e^{-2π²σ²}). The
    # continuous level is exact (dpopt.privacy.pdp.gaussian_pdp_level, L ~ N(μ²/2, μ²)); tolerance 3 point masses.
    norm = math.sqrt(sum(t * t for t in pattern))
    sd = math.sqrt(sigma2) * norm / math.gcd(*pattern)
    continuous = gaussian_pdp_level(math.sqrt(sigma2), float(eps), norm)
    assert 0.1 < continuous < 0.9
    assert abs(float(pdp_level(sigma2, pattern, eps)) - continuous) <= 3 / (sd * math.sqrt(2 * math.pi))


def _solve(**overrides):
    return dpopt.solve(make_spec(**{"query": HISTOGRAM, "adjacency": "add_remove", "privacy": TARGET,
                                    "mechanism": "gaussian", "utility": {"metric": "l2"}, **overrides}))


def _variance(sigma2: Fraction) -> float:
    mpmath.mp.dps = 30
    s2 = mpmath.mpf(sigma2.numerator) / sigma2.denominator
    w = {k: mpmath.exp(-mpmath.mpf(k * k) / (2 * s2)) for k in range(-200, 201)}
    return float(mpmath.fsum(k * k * wk for k, wk in w.items()) / mpmath.fsum(w.values()))


def test_histogram_under_add_remove_is_measured_at_the_smallest_passing_variance():
    # Move (1,), ε = 1: |L| > 1 ⟺ η > σ² − ½ or η < −σ² − ½. For σ² ∈ [j + ½, j + 3/2) the event is {η ≥ j + 1} ∪
    # {η ≤ −(j + 2)}, fixed, and P[η ≥ a] (a ≥ 1) grows with σ² (the law of η² is stochastically increasing in σ²: an
    # exponential family in −η²/2), so on each piece the level is smallest at its left end; below ½ the event holds
    # at η = 0 (level ≥ ½). Brute force: the left ends ½, 3/2, 5/2 fail δ = 0.05 and 7/2 passes, so σ_ℤ² = 7/2 exactly.
    for left in (Fraction(1, 2), Fraction(3, 2), Fraction(5, 2)):
        assert _mp_level(left, (1,), Fraction(1)) > 0.05
    assert _mp_level(Fraction(7, 2), (1,), Fraction(1)) <= 0.05
    sol = _solve()
    mech = sol.mechanism
    assert (mech.sampler, mech.target, mech.lattice_sigma2) == ("exact", "pdp", Fraction(7, 2))
    assert sol.certificate["utility"]["value"] == pytest.approx(3 * _variance(Fraction(7, 2)), rel=1e-9)
    # the continuous design (Lemma 10, digest §4.4: σ = 2.188437) has a larger variance
    assert mech.sigma == pytest.approx(2.188437, abs=1e-6)
    assert mech.cost_ratio == pytest.approx(_variance(Fraction(7, 2)) / 2.188437**2, rel=1e-6)
    assert not any("idealized" in note for note in sol.certificate["mechanism"]["notes"])
    assert dpopt.verify(sol.certificate).passed


def test_histogram_under_replace_one_sits_at_a_jump_of_the_level():
    # Move (1, 1): |L| > 1 ⟺ S > σ² − 1 or S < −σ² − 1 with S = η₁ + η₂; at σ² = 8 the thresholds are the integers
    # 7 and 9, and just below 8 the events gain S = 7 and S = 9: the level jumps there (brute force both sides)
    assert _mp_level(Fraction(8), (1, 1), Fraction(1)) <= 0.05 < _mp_level(8 - Fraction(1, 2**20), (1, 1), Fraction(1))
    sol = _solve(adjacency="replace_one")
    assert sol.mechanism.lattice_sigma2 == 8
    assert dpopt.verify(sol.certificate).passed
    dg = dpopt.solve(make_spec(query=HISTOGRAM, adjacency="replace_one", privacy=TARGET, mechanism="discrete_gaussian"))
    assert dg.mechanism.sigma2 == 8
    assert dpopt.verify(dg.certificate).passed


def test_forged_lattice_variances_are_refused():
    # σ² = 3 lies on the piece [5/2, 7/2), whose level is at least the left end's, above δ (previous tests)
    data = _solve().certificate.data
    forged = {**data, "mechanism": {**data["mechanism"],
                                    "parameters": {**data["mechanism"]["parameters"], "lattice_sigma2": "3"}}}
    assert "privacy" in {c.claim for c in dpopt.verify(forged).failed}
    data = dpopt.solve(make_spec(query=HISTOGRAM, adjacency="add_remove", privacy=TARGET,
                                 mechanism="discrete_gaussian")).certificate.data
    params = {**data["mechanism"]["parameters"], "sigma_squared_exact": "3", "sigma": math.sqrt(3)}
    forged = {**data, "mechanism": {**data["mechanism"], "parameters": params}}
    assert "privacy" in {c.claim for c in dpopt.verify(forged).failed}


def test_the_check_reads_the_moves_of_the_space():
    # the add/remove variance 7/2 is not enough for the replace-one move (1, 1) (its calibration needs 8)
    spec = dpopt.load_spec(make_spec(query=HISTOGRAM, adjacency="replace_one", privacy=TARGET))
    mech = GaussianMechanism(2.19, 3, sampler="exact", target="pdp", lattice_sigma2=Fraction(7, 2))
    assert not mech.privacy_checks(dpopt.derive(spec), spec.privacy)[0].passed
    assert not DiscreteGaussianMechanism(Fraction(7, 2), 3).privacy_checks(dpopt.derive(spec), spec.privacy)[0].passed


def test_floating_point_sampler_keeps_the_continuous_design():
    sol = _solve(sampler="floating_point")
    assert sol.mechanism.sampler == "floating_point"
    assert any("idealized" in note for note in sol.certificate["mechanism"]["notes"])


def _projected_loss_gap(sigma2: float, kernel: np.ndarray, move: np.ndarray, top: int) -> tuple[float, float]:
    """Brute force over η ∈ [−top, top]^d: the law of the released noise w = P_V η, V = {v : Kv = 0} (K =
    ``kernel``), keyed exactly by the integer vector det(KKᵀ)·w, and the loss log P(w)/P(w − Δ) at every w of mass
    > 1e-12 against the loss of y itself, (‖Δ‖² − 2⟨η, Δ⟩)/(2σ²). Returns the largest gap and the mass summed (the
    box's truncation)."""
    d = kernel.shape[1]
    grid = np.stack(np.meshgrid(*[np.arange(-top, top + 1)] * d, indexing="ij"), axis=-1).reshape(-1, d)
    weight = np.exp(-np.sum(grid**2, axis=1) / (2 * sigma2))
    weight /= np.sum(np.exp(-np.arange(-top, top + 1) ** 2 / (2 * sigma2))) ** d
    # w = P_V η = η − Kᵀ(KKᵀ)⁻¹Kη; scaled by the integer det(KKᵀ) it is an integer vector: an exact key
    gram = kernel @ kernel.T
    det = int(round(np.linalg.det(gram)))
    adj = np.rint(np.linalg.inv(gram) * det).astype(np.int64)
    keys = det * grid - (grid @ kernel.T @ adj.T) @ kernel
    law: dict[tuple, float] = {}
    for key, mass in zip(map(tuple, keys), weight):
        law[key] = law.get(key, 0.0) + mass
    shift = tuple(det * move)  # Δ ∈ V: P_V Δ = Δ
    gap = 0.0
    for key, mass in law.items():
        before = law.get(tuple(np.subtract(key, shift)), 0.0)
        if mass < 1e-12 or before < 1e-12:
            continue
        inner = int(np.dot(key, move)) // det  # ⟨w, Δ⟩ = ⟨η, Δ⟩, an integer
        expected = (move @ move - 2 * inner) / (2 * sigma2)
        gap = max(gap, abs(math.log(mass / before) - expected))
    return gap, float(weight.sum())


@pytest.mark.parametrize("sigma2, kernel, move, top", [
    (8.0, np.array([[1, 1, 1]]), np.array([1, -1, 0]), 40),                             # sum-zero span, d = 3
    (1.5, np.array([[1, 1, 0, 0], [0, 0, 1, 1], [1, 0, 1, 0]]), np.array([1, -1, -1, 1]), 14),  # 2×2 margin kernel
])
def test_projection_on_the_span_keeps_the_privacy_loss_of_the_measurement(sigma2, kernel, move, top):
    # The theorem of dpopt.mechanisms.lattice_pdp, by brute force: the loss of the projected release P_V(x + η) at
    # every point equals the loss of x + η, so its pDP level is the measurement's. The box holds all but
    # (2d)·e^{−top²/(2σ²)} < 1e-30 of the mass; the losses are compared where both masses exceed 1e-12 (relative
    # rounding of the summed masses below 1e-9).
    gap, mass = _projected_loss_gap(sigma2, kernel, move, top)
    assert mass == pytest.approx(1.0, abs=1e-12)
    assert gap < 1e-6


def test_projected_gaussian_under_pdp_measures_at_the_isotropic_variance():
    # The replace-one histogram: the moves are the pattern (1, 1), whose calibrated lattice variance is 8 (the
    # jump of the level shown above); the projection keeps the loss, so projected_gaussian takes the same σ_ℤ²
    sol = dpopt.solve(make_spec(query=HISTOGRAM, adjacency="replace_one", privacy=TARGET,
                                mechanism="projected_gaussian", utility={"metric": "l2"}))
    mech = sol.mechanism
    assert (mech.sampler, mech.target, mech.lattice_sigma2) == ("exact", "pdp", 8)
    assert not any("idealized" in note for note in sol.certificate["mechanism"]["notes"])
    # E‖P_V η‖² = rank · Var N_ℤ(0, 8) (rank 2: the sum-zero plane)
    assert sol.certificate["utility"]["value"] == pytest.approx(2 * _variance(Fraction(8)), rel=1e-9)
    assert dpopt.verify(sol.certificate).passed
    # σ² = 7 is the left end of the piece [7, 8), where the level is lowest on the piece: 0.0521 > δ by brute force
    assert _mp_level(Fraction(7), (1, 1), Fraction(1)) > 0.05
    data = sol.certificate.data
    forged = {**data, "mechanism": {**data["mechanism"],
                                    "parameters": {**data["mechanism"]["parameters"], "lattice_sigma2": "7"}}}
    assert "privacy" in {c.claim for c in dpopt.verify(forged).failed}
    out = mech.release(np.array([[5.0, 0.0, 12.0]]), np.random.default_rng(4))
    assert out.sum() == pytest.approx(17.0, abs=1e-9)  # the total, no neighbour moves it, is kept exactly


def test_release_is_integer_counts_plus_integer_noise():
    mech = _solve().mechanism
    out = mech.release(np.array([[5.0, 0.0, 12.0]]), np.random.default_rng(4))
    assert np.all(out == np.round(out))
    with pytest.raises(dpopt.errors.DataError, match="whole-number"):
        mech.release(np.array([[5.5, 0.0, 12.0]]), np.random.default_rng(4))


def test_sampled_privacy_loss_stays_within_the_certified_level():
    # The exact sampler at σ² = 7/2, move (1,), ε = 1: the fraction of draws with |L| > 1, decided in integers
    # (|2η + 1| > 7), must match the certified level 0.0366 (≤ δ = 0.05). 200000 draws: SE = sqrt(0.037·0.963/2e5)
    # = 4.2e-4, tolerance 4 SE; the previous piece's event (|2η + 1| > 5) has probability 0.117 here, 190 SE away.
    level = float(pdp_level(Fraction(7, 2), (1,), Fraction(1)))
    eta = sample_discrete_gaussian(np.random.default_rng(2026), 7, 2, 200_000)
    exceed = float(np.mean(np.abs(2 * eta + 1) > 7))
    assert level < 0.05
    assert abs(exceed - level) < 4 * math.sqrt(level * (1 - level) / eta.size)
