"""Exact R²DP privacy (Thm 4.1): the paper's lemma values, brute force, and the wrong formulas."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import optimize

from dpopt.noise.second_folds import (
    DiscreteFold,
    GammaFold,
    NoncentralChi2Fold,
    RayleighFold,
    SumFold,
    TruncatedNormalFold,
    UniformFold,
)
from dpopt.privacy.r2dp import (
    density_ratio_sup,
    pattern_epsilon_mp,
    r2dp_epsilon,
    r2dp_epsilon_mp,
    rate_scale_for_epsilon,
    usefulness_gain_possible,
)
from dpopt.sensitivity.patterns import ShiftPattern

FOLDS = [
    GammaFold(2.0, 0.5),
    UniformFold(0.5, 9.0),
    TruncatedNormalFold(0.5223, 1.5454, 0.5223),
    TruncatedNormalFold(1.0, 0.7, 0.2, 3.0),
    NoncentralChi2Fold(3.0, 2.0, 0.5),
    RayleighFold(1.3),
    DiscreteFold([0.01, 5.0], [0.99, 0.01]),
    SumFold([GammaFold(2, 1.5), UniformFold(0.15, 1.15), TruncatedNormalFold(0.8, 0.56, 0.16)]),
]


@pytest.mark.parametrize("fold", FOLDS, ids=lambda f: f.kind)
@pytest.mark.parametrize("delta", [0.6, 1.2])
def test_theorem_4_1_is_the_brute_force_supremum(fold, delta):
    # sup_x |ln f(x) − ln f(x + Δ)| on a 200,001-point grid: attained at x = 0 (tight)
    exact = float(r2dp_epsilon_mp(fold, delta))
    assert density_ratio_sup(fold, delta) == pytest.approx(exact, rel=1e-10)
    assert r2dp_epsilon(fold, delta) == pytest.approx(exact, rel=1e-12)


def test_closed_forms_of_appendix_b():
    # Thm B.3: Gamma ε = (k + 1) ln(1 + Δθ); digest T2/T3
    for k, theta, delta, digest in ((2, 0.5, 1.0, 3 * math.log(1.5)), (1, 3, 1.0, 2.7725887), (5, 0.2, 0.6, 0.6799717)):
        closed = (k + 1) * math.log(1 + delta * theta)
        assert float(r2dp_epsilon_mp(GammaFold(k, theta), delta)) == pytest.approx(closed, rel=1e-14)
        assert closed == pytest.approx(digest, abs=1e-6)  # the digest rounds 0.67997211 to 0.6799717
    # Thm B.5: Uniform ε = ln[(α² − β²) / (2((1 + β)e^{−β} − (1 + α)e^{−α}))], α = aΔ, β = bΔ
    for a, b, delta, digest in ((0.5, 9.0, 1.2, 4.193124), (0.1, 2.0, 1.0, 1.219438)):
        al, be = a * delta, b * delta
        closed = math.log((al**2 - be**2) / (2 * ((1 + be) * math.exp(-be) - (1 + al) * math.exp(-al))))
        assert float(r2dp_epsilon_mp(UniformFold(a, b), delta)) == pytest.approx(closed, rel=1e-12)
        assert closed == pytest.approx(digest, abs=1e-6)


def test_lemma_b4_threshold():
    # θ = 1/(2Δ): eq. 8 ⇔ k ln 2 > (k + 1) ln 1.5 ⇔ k > ln 1.5 / ln(4/3) = 1.4094208 (digest D1/T6)
    k_star = math.log(1.5) / math.log(4 / 3)
    assert k_star == pytest.approx(1.4094208, abs=1e-7)
    root = optimize.brentq(lambda k: r2dp_epsilon(GammaFold(k, 0.5), 1.0) - float(GammaFold(k, 0.5).log_mgf(1.0)), 1.0, 2.0)
    assert root == pytest.approx(k_star, rel=1e-10)
    assert not usefulness_gain_possible(GammaFold(1.0, 0.5), 1.0)  # e^ε = 2.25 ≥ M = 2
    assert math.exp(r2dp_epsilon(GammaFold(1.0, 0.5), 1.0)) == pytest.approx(2.25)
    assert usefulness_gain_possible(GammaFold(2.0, 0.5), 1.0)  # 3.375 < 4
    assert math.exp(r2dp_epsilon(GammaFold(2.0, 0.5), 1.0)) == pytest.approx(3.375)


def test_lemmas_b6_and_b8():
    # B.6 (digest D2/T4): U(0.5, 9), Δ = 1.2 satisfies eq. 8: ε = 4.193124 < ln M(1.2) = 8.477575
    fold = UniformFold(0.5, 9.0)
    assert float(fold.log_mgf(1.2)) == pytest.approx(8.477575, abs=1e-6)
    assert usefulness_gain_possible(fold, 1.2)
    # T5: U(0.1, 2), Δ = 1: ε = 1.219438 > ln M(1) = 1.196135, eq. 8 fails
    assert float(UniformFold(0.1, 2.0).log_mgf(1.0)) == pytest.approx(1.196135, abs=1e-6)
    assert not usefulness_gain_possible(UniformFold(0.1, 2.0), 1.0)
    # B.8 (digest D3/T7): ln M(0.6) = 1.241735 reproduces the paper's 1.2417, but the exact ε
    # is 1.180112, not the paper's 1.1703
    tn = TruncatedNormalFold(0.5223, 1.5454, 0.5223)
    assert float(tn.log_mgf(0.6)) == pytest.approx(1.241735, abs=1e-6)
    assert float(r2dp_epsilon_mp(tn, 0.6)) == pytest.approx(1.180112, abs=1e-6)
    assert abs(float(r2dp_epsilon_mp(tn, 0.6)) - 1.1703) > 5e-3


def theorem_b2(t, p, delta):
    """The paper's Thm B.2 (digest P1): ln[p e^{Δ t₀} + (1 − p) e^{Δ t₁}] — wrong, kept here
    only to show that dpopt never returns it."""
    return math.log(p * math.exp(delta * t[0]) + (1 - p) * math.exp(delta * t[1]))


@pytest.mark.parametrize("atoms, weights, exact, b2", [
    ([0.01, 5.0], [0.99, 0.01], 1.776347, 0.909903),  # T8: B.2 understates ε
    ([0.1, 10.0], [0.5, 0.5], 4.710116, 9.306903),  # T9: B.2 overstates ε
])
def test_theorem_b2_is_wrong_and_not_used(atoms, weights, exact, b2):
    fold = DiscreteFold(atoms, weights)
    assert float(r2dp_epsilon_mp(fold, 1.0)) == pytest.approx(exact, abs=1e-6)
    assert density_ratio_sup(fold, 1.0) == pytest.approx(exact, abs=1e-6)
    assert theorem_b2(atoms, weights[0], 1.0) == pytest.approx(b2, abs=1e-6)


def test_average_leakage_is_not_a_privacy_bound():
    # digest P2: ln M(Δ) = ln E[e^{Δ/b}] ("average leakage", Thm 4.5) is below the exact ε
    fold = DiscreteFold([0.01, 5.0], [0.99, 0.01])
    assert float(fold.log_mgf(1.0)) < float(r2dp_epsilon_mp(fold, 1.0)) - 0.8


def test_epsilon_increases_with_shift_and_scale():
    fold = GammaFold(1.7, 0.8)
    values = [r2dp_epsilon(fold, d) for d in (0.1, 0.5, 1.0, 2.0, 5.0)]
    assert values == sorted(values)
    # scaling t by c equals scaling Δ by c
    assert r2dp_epsilon(fold.scaled(3.0), 0.5) == pytest.approx(r2dp_epsilon(fold, 1.5), rel=1e-13)


@pytest.mark.parametrize("fold", FOLDS, ids=lambda f: f.kind)
def test_rate_scale_solves_the_constraint(fold):
    for eps, delta in ((0.5, 1.0), (5.0, 0.1)):
        c = rate_scale_for_epsilon(fold, eps, delta)
        assert r2dp_epsilon(fold.scaled(c), delta) == pytest.approx(eps, rel=1e-11)


def test_vector_epsilon_is_a_sum_over_moved_coordinates():
    fold = GammaFold(3.0, 0.7)
    one = float(r2dp_epsilon_mp(fold, 1.0))
    half = float(r2dp_epsilon_mp(fold, 0.5))
    # histogram under replace-one: two coordinates move by 1
    assert float(pattern_epsilon_mp(fold, ShiftPattern((1,), np.array([[2]])))) == pytest.approx(2 * one, rel=1e-14)
    # columns (1, 0), (0.5, 1), (0, 2) of a linear query
    from fractions import Fraction

    pattern = ShiftPattern((Fraction(1, 2), Fraction(1), Fraction(2)), np.array([[0, 1, 0], [1, 1, 0], [0, 0, 1]]))
    two = float(r2dp_epsilon_mp(fold, 2.0))
    assert float(pattern_epsilon_mp(fold, pattern)) == pytest.approx(max(one, half + one, two), rel=1e-14)
    # ε(·) is concave with ε(0) = 0, hence subadditive: spreading a shift costs more than
    # concentrating it — the l1 budgeting of Laplace does not carry over
    assert half + one > float(r2dp_epsilon_mp(fold, 1.5))


def test_multiprecision_survives_cancellation():
    # the Rayleigh closed form cancels at large arguments; the evaluation raises its precision
    fold = RayleighFold(1.3)
    assert float(r2dp_epsilon_mp(fold, 1e7)) == pytest.approx(r2dp_epsilon(fold, 1e7), rel=1e-12)
