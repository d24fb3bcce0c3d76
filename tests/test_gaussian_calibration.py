"""The fast certified Gaussian calibration under (ε, δ) (dpopt.privacy.gaussian).

Oracles: the 60-digit mpmath profile (gaussian_delta_mp, which shares no code with the
Arb enclosure or the double-precision solve), and autodp 0.2.3's analytic-Gaussian
calibrator (Balle & Wang 2018's reference algorithm).
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest

from dpopt.privacy.gaussian import gaussian_delta_ball, gaussian_delta_mp, gaussian_mu, gaussian_sigma_approx

GRID = [(float(e), float(d))
        for e in np.logspace(-3, math.log10(50), 6) for d in np.logspace(-15, math.log10(0.5), 6)]


@pytest.mark.parametrize("epsilon,delta", GRID)
@pytest.mark.parametrize("l2_squared", [Fraction(1), Fraction(2), Fraction(75**2 + 2)])
def test_sigma_is_certified_and_within_1e_13_of_the_threshold(epsilon, delta, l2_squared):
    sigma = gaussian_sigma_approx(l2_squared, epsilon, delta)
    with mpmath.workdps(60):
        l2 = mpmath.sqrt(mpmath.mpf(l2_squared.numerator) / l2_squared.denominator)
        assert gaussian_delta_mp(epsilon, l2 / mpmath.mpf(sigma)) <= delta
        # documented: within 3e-14 of the smallest σ, so 1e-13 lower violates δ
        assert gaussian_delta_mp(epsilon, l2 / mpmath.mpf(sigma * (1 - 1e-13))) > delta


@pytest.mark.parametrize("epsilon,delta", GRID)
def test_mu_is_certified(epsilon, delta):
    mu = gaussian_mu(epsilon, delta)
    assert gaussian_delta_mp(epsilon, mu) <= delta
    # documented: 1/σ(Δ = 1) (within 3e-14 of the threshold) rounded down, so 1e-13 higher violates δ
    assert gaussian_delta_mp(epsilon, mu * (1 + 1e-13)) > delta


@pytest.mark.parametrize("epsilon,mu", [(0.0, 0.5), (1e-3, 1e-4), (1.0, 0.2), (10.0, 3.0), (50.0, 12.0)])
def test_the_ball_encloses_the_60_digit_value(epsilon, mu):
    ball = gaussian_delta_ball(epsilon, Fraction(mu) ** 2, 1.0)
    reference = gaussian_delta_mp(epsilon, mu)
    with mpmath.workdps(60):
        centre = mpmath.mpf(ball.mid().str(50, radius=False))
        radius = mpmath.mpf(ball.rad().str(20, radius=False))
        # 60 digits vs a 128-bit ball: the reference lies in the ball (up to its own 1e-58)
        assert abs(centre - reference) <= radius + reference * mpmath.mpf("1e-55")
        assert radius <= reference * mpmath.mpf("1e-30")


@pytest.mark.parametrize("epsilon,delta", [(e, d) for e, d in GRID if d >= 1e-5 and e <= 10])
def test_sigma_agrees_with_autodp(epsilon, delta):
    pytest.importorskip("autodp")
    from autodp import rdp_acct  # noqa: F401  (autodp 0.2.3 needs it imported before privacy_calibrator)
    from autodp.privacy_calibrator import ana_gaussian_mech

    # autodp stops its bisection when |δ(σ) − δ| ≤ 1e-12; with δ ≥ 1e-5 and ε ≤ 10 the
    # slope |dδ/dσ|·σ is at least ~1e-3·δ, so σ agrees to 1e-12/(1e-3·1e-5) ≈ 1e-4 relative
    # (at ε = 50 the profile is so flat in σ that autodp's tolerance no longer pins σ)
    assert gaussian_sigma_approx(Fraction(1), epsilon, delta) == pytest.approx(
        ana_gaussian_mech(epsilon, delta)["sigma"], rel=1e-4
    )
