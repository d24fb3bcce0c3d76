"""Privacy conversions: published constants, independent routes, round trips, extremes."""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from scipy import integrate, optimize, stats

from dpopt.privacy import (
    gaussian_delta,
    gaussian_delta_mp,
    gaussian_epsilon,
    gaussian_mu,
    gdp_tradeoff,
    laplace_delta_1d,
    laplace_epsilon,
    laplace_scale_for,
    zcdp_delta_cks,
    zcdp_epsilon_bun_steinke,
    zcdp_epsilon_cks,
    zcdp_epsilon_exact_gaussian,
)

CENSUS_RHO = 293764 / 114921  # 2020 Census DAS persons budget (STYLE.md, DAS certificate)


def test_census_published_conversions():
    # The DAS printed epsilon(rho, 1e-10) = 17.1436 from the CKS conversion; the exact Gaussian
    # profile gives 16.465 and Bun–Steinke 17.90 (STYLE.md §3).
    eps_cks, _ = zcdp_epsilon_cks(1e-10, CENSUS_RHO)
    assert eps_cks == pytest.approx(17.1435507, abs=5e-8)
    assert zcdp_epsilon_exact_gaussian(1e-10, CENSUS_RHO) == pytest.approx(16.465, abs=5e-4)
    assert zcdp_epsilon_bun_steinke(1e-10, CENSUS_RHO) == pytest.approx(17.90, abs=5e-3)


def test_opendp_rho_1_32_constants():
    # OpenDP test_meas.py::test_gaussian_curve pins these for rho = 1/32 (zCDP -> approx-DP, CKS).
    eps, _ = zcdp_epsilon_cks(1e-3, 1 / 32)
    assert eps == pytest.approx(0.6880024554878085, rel=1e-12)
    assert zcdp_delta_cks(0.0, 1 / 32) == pytest.approx(0.1508457845622862, rel=1e-12)


def test_dp_accounting_laplace_delta():
    # dp_accounting pins delta(0) = 0.39346934 for a Laplace mechanism with epsilon_0 = 1.
    assert laplace_delta_1d(0.0, 1.0) == pytest.approx(0.39346934, abs=1e-8)
    assert laplace_delta_1d(1.0, 1.0) == 0.0


@pytest.mark.parametrize("eps, mu", [(0.0, 1.0), (0.5, 0.3), (1.0, 1.0), (3.0, 2.0), (6.0, 4.0)])
def test_gaussian_profile_equals_numerical_integration(eps, mu):
    # delta(eps) = int max(0, p(x) - e^eps q(x)) dx for P = N(mu, 1), Q = N(0, 1)
    # (hockey-stick divergence), integrated numerically from the densities alone.
    x0 = eps / mu + mu / 2  # where p = e^eps q
    value, _ = integrate.quad(lambda x: stats.norm.pdf(x, mu) - math.exp(eps) * stats.norm.pdf(x), x0, np.inf,
                              epsabs=1e-14, epsrel=1e-12)
    assert gaussian_delta(eps, mu) == pytest.approx(value, rel=1e-9, abs=1e-15)


@pytest.mark.parametrize("eps, mu", [(0.2, 0.5), (1.0, 1.0), (2.0, 3.0)])
def test_profile_is_the_conjugate_of_the_tradeoff(eps, mu):
    # Dong, Roth & Su (2022) Prop. 2.12: delta(eps) = sup_alpha 1 - e^eps alpha - G_mu(alpha).
    res = optimize.minimize_scalar(lambda a: -(1 - math.exp(eps) * a - gdp_tradeoff(a, mu)),
                                   bounds=(1e-12, 1 - 1e-12), method="bounded", options={"xatol": 1e-14})
    assert -res.fun == pytest.approx(gaussian_delta(eps, mu), rel=1e-6)


def test_gdp_tradeoff_is_symmetric():
    # A Gaussian trade-off function is symmetric: G_mu(G_mu(alpha)) = alpha.
    for alpha in (1e-6, 0.01, 0.3, 0.9):
        assert gdp_tradeoff(gdp_tradeoff(alpha, 1.3), 1.3) == pytest.approx(alpha, rel=1e-9)


EPSILONS = [1e-3, 0.1, 1.0, 10.0, 50.0]
DELTAS = [1e-15, 1e-10, 1e-5, 0.1, 0.5]


@pytest.mark.parametrize("eps", EPSILONS)
@pytest.mark.parametrize("delta", DELTAS)
def test_gaussian_mu_is_certified_and_tight(eps, delta):
    mu = gaussian_mu(eps, delta)
    assert gaussian_delta_mp(eps, mu) <= delta  # never overshoots, in 60-digit arithmetic
    assert gaussian_delta_mp(eps, mu * (1 + 1e-9)) > delta  # and loses less than 1e-9
    assert gaussian_epsilon(delta, mu) == pytest.approx(eps, rel=1e-9)


@pytest.mark.parametrize("mu", [1e-3, 0.1, 1.0, 5.0, 20.0])
@pytest.mark.parametrize("delta", DELTAS)
def test_gaussian_epsilon_round_trip(mu, delta):
    eps = gaussian_epsilon(delta, mu)
    assert gaussian_delta_mp(eps, mu) <= delta
    if eps > 0:
        assert float(gaussian_delta_mp(eps * (1 - 1e-9), mu)) > delta
        assert gaussian_mu(eps, delta) == pytest.approx(mu, rel=1e-8)


def test_analytic_gaussian_beats_classical_bound():
    # Dwork & Roth Thm A.1: sigma = sqrt(2 ln(1.25/delta)) Delta / eps suffices for eps < 1,
    # so the exact (analytic) calibration can only need less noise.
    for eps in (0.1, 0.5, 0.9):
        for delta in (1e-5, 1e-10):
            classical_mu = eps / math.sqrt(2 * math.log(1.25 / delta))
            assert gaussian_mu(eps, delta) >= classical_mu


def test_zcdp_conversions_are_ordered():
    # exact Gaussian <= CKS <= Bun–Steinke (each is a valid bound for the Gaussian mechanism).
    for rho in (0.01, 0.5, 2.0):
        for delta in (1e-6, 1e-10):
            exact = zcdp_epsilon_exact_gaussian(delta, rho)
            cks, alpha = zcdp_epsilon_cks(delta, rho)
            assert exact <= cks <= zcdp_epsilon_bun_steinke(delta, rho)


def test_cks_epsilon_is_certified_at_its_order():
    from dpopt.privacy import zcdp_delta_cks_mp

    eps, alpha = zcdp_epsilon_cks(1e-10, CENSUS_RHO)
    assert zcdp_delta_cks_mp(eps, CENSUS_RHO, alpha) <= mpmath.mpf("1e-10") * (1 + 1e-12)


def test_laplace_scale_is_exact():
    for eps in (1e-3, 0.3, 1.0, 7.0, 50.0):
        for l1 in (Fraction(1), Fraction(2), Fraction(1, 3)):
            b = laplace_scale_for(eps, l1)
            assert laplace_epsilon(l1, b) <= Fraction(eps)
            assert b <= float(l1 / Fraction(eps)) * (1 + 1e-12)  # tight: at most 1e-12 more noise
