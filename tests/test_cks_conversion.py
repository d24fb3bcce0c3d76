"""The CKS zCDP → (ε, δ) conversion: its infimum over α > 1 without a fixed search interval.

Reference: the stationary point of ε(α) (Canonne, Kamath & Steinke 2020, Prop. 12) found by
mpmath's root finder on the derivative in 40 digits, and δ(α) minimised the same way.
"""

from __future__ import annotations

import mpmath
import pytest

from dpopt.privacy.zcdp import (
    zcdp_delta_cks,
    zcdp_delta_cks_mp,
    zcdp_epsilon_bun_steinke,
    zcdp_epsilon_cks,
    zcdp_epsilon_exact_gaussian,
)


def _mp_epsilon(rho: float, delta: float) -> mpmath.mpf:
    with mpmath.workdps(40):
        def eps(x):
            a = 1 + mpmath.exp(x)
            return a * rho + (a * mpmath.log(1 - 1 / a) - mpmath.log(a - 1) - mpmath.log(delta)) / (a - 1)

        x = mpmath.findroot(lambda y: mpmath.diff(eps, y), mpmath.log(mpmath.sqrt(mpmath.log(1 / delta) / rho)))
        return eps(x)


def _mp_log_delta(rho: float, epsilon: float) -> mpmath.mpf:
    with mpmath.workdps(40):
        def log_delta(x):
            a = 1 + mpmath.exp(x)
            return (a - 1) * (a * rho - epsilon) - mpmath.log(a - 1) + a * mpmath.log(1 - 1 / a)

        x = mpmath.findroot(lambda y: mpmath.diff(log_delta, y), mpmath.log((epsilon + rho) / (2 * rho)))
        return log_delta(x)


@pytest.mark.parametrize("rho, delta", [(1e-10, 1e-12), (1e-8, 1e-6), (1e-4, 1e-10), (0.5, 1e-5), (100.0, 1e-12),
                                        (1e4, 0.1), (1e6, 1e-300)])
def test_cks_epsilon_reaches_the_infimum_at_every_scale(rho, delta):
    eps, alpha = zcdp_epsilon_cks(delta, rho)
    assert eps == pytest.approx(float(_mp_epsilon(rho, delta)), rel=1e-9)
    assert zcdp_delta_cks_mp(eps, rho, alpha) <= delta * (1 + 1e-9)  # certified at the returned order
    # ordered as they must be: exact Gaussian (a ρ-zCDP mechanism) ≤ CKS ≤ Bun–Steinke
    assert zcdp_epsilon_exact_gaussian(delta, rho) <= eps * (1 + 1e-12)
    assert eps <= zcdp_epsilon_bun_steinke(delta, rho)


def test_tiny_rho_is_not_inflated():
    # ρ = 1e-10, δ = 1e-12: the infimum sits at α ≈ 3.8e5, far beyond the former log(α − 1) ∈ [−12, 12]
    # (which returned 1.06e-4, above even Bun–Steinke's 1.05e-4).
    eps, alpha = zcdp_epsilon_cks(1e-12, 1e-10)
    assert alpha > 1e5
    assert eps == pytest.approx(float(_mp_epsilon(1e-10, 1e-12)), rel=1e-9)
    assert eps < 0.75e-4


# ε = 0 is pinned by OpenDP's constant in test_privacy.py
@pytest.mark.parametrize("rho, epsilon", [(1e-10, 1e-4), (1e-6, 0.01), (0.5, 1.0), (50.0, 200.0)])
def test_cks_delta_reaches_the_infimum(rho, epsilon):
    expected = float(mpmath.exp(_mp_log_delta(rho, epsilon)))
    assert zcdp_delta_cks(epsilon, rho) == pytest.approx(min(1.0, expected), rel=1e-9)


def test_orders_near_one_are_evaluated_without_cancellation():
    # ρ large against ε: the infimum of the CKS δ is approached as α → 1, where it tends to 1
    # (log δ(α) → 0); the search walks there without evaluating log(1 − 1/α) at α = 1.0
    assert zcdp_delta_cks(1.0, 50.0) == pytest.approx(1.0, abs=1e-12)
    eps, _ = zcdp_epsilon_cks(0.9, 100.0)  # optimum at α − 1 ≈ √(log(1/δ)/ρ) ≈ 0.03
    assert zcdp_epsilon_exact_gaussian(0.9, 100.0) <= eps <= zcdp_epsilon_bun_steinke(0.9, 100.0)
