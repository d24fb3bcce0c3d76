"""``dpopt verify`` without the slow imports (issue 18): the routes that replaced them.

* The sampler check's Kolmogorov–Smirnov p-value is the DKW–Massart bound 2·exp(−2nD²)
  (:func:`dpopt.certificate.second_route._ks_sf`): checked against scipy's exact law of the
  two-sided statistic (``scipy.stats.kstwo``), never below it, and rejecting at a D within
  0.2% of the exact test's at the levels the check uses.
* Absolute moments of marginals with an analytic tail by Gauss–Legendre panels
  (:meth:`dpopt.noise.marginal.Marginal.abs_moment`): against the closed forms
  E|W|^p = σ^p 2^{p/2} Γ((p+1)/2)/√π for N(0, σ²) (Winkelbauer 2012, eq. 18) and
  E|W|^p = b^p Γ(p+1) for Laplace(b).
* ``gaussian_epsilon`` (bisection, no scipy.optimize): against autodp's analytic-Gaussian
  profile and the defining equation δ(ε; μ) = δ; its uncertified root and ``gaussian_mu``'s
  (the second route's window end and μ bracket) against the same equation in 60 digits.
* A Gaussian certificate still fails verification when σ is lowered by 1e-12 or a claim is
  edited (the checks did not get weaker).
"""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
from scipy import optimize, stats

import dpopt
from dpopt.certificate.second_route import SAMPLER_LEVEL, _ks_continuous, _ks_sf
from dpopt.privacy.gaussian import gaussian_delta_mp, gaussian_epsilon, gaussian_mu
from dpopt.noise.gaussian import GaussianMarginal
from dpopt.noise.laplace import LaplaceMarginal

GAUSSIAN_COUNT = {"dpopt": 1, "name": "count, μ-GDP", "data": {"attributes": {"a": ["x"]}},
                  "query": {"kind": "count"}, "adjacency": "add_remove", "privacy": {"gdp": {"mu": 1.0}},
                  "mechanism": "gaussian"}


@pytest.mark.parametrize("n", [2_000, 10_000, 20_000])
@pytest.mark.parametrize("d", [0.002, 0.01, 0.02, 0.03, 0.05])
def test_ks_p_value_bound_is_never_below_the_exact_p_value(n, d):
    exact = float(stats.kstwo.sf(d, n))
    assert _ks_sf(d, n) >= exact * (1 - 1e-12)


@pytest.mark.parametrize("n", [2_000, 20_000])
@pytest.mark.parametrize("tests", [1, 5, 64])
def test_ks_bound_rejects_where_the_exact_test_does(n, tests):
    # the D at which each test rejects at the check's Bonferroni level: within 0.2%
    level = SAMPLER_LEVEL / tests
    exact = optimize.brentq(lambda d: stats.kstwo.sf(d, n) - level, 1e-4, 0.5, xtol=1e-14)
    bound = math.sqrt(math.log(2.0 / level) / (2.0 * n))  # 2·exp(−2nD²) = level
    assert _ks_sf(bound, n) == pytest.approx(level, rel=1e-12)
    assert exact <= bound <= exact * 1.002


def test_ks_statistic_equals_scipys():
    x = np.random.default_rng(3).normal(size=5_000)
    d = stats.kstest(x, stats.norm.cdf).statistic
    assert _ks_continuous(x, stats.norm.cdf) == pytest.approx(_ks_sf(d, x.size), rel=1e-12)


@pytest.mark.parametrize("sd", [1e-3, 0.7, 1.0, math.sqrt(2.0), 40.0, 1e5])
@pytest.mark.parametrize("p", [1.0, 2.0])
def test_gaussian_absolute_moments_by_gauss_legendre(sd, p):
    closed = sd**p * 2 ** (p / 2) * math.gamma((p + 1) / 2) / math.sqrt(math.pi)  # Winkelbauer 2012, (18)
    assert GaussianMarginal(sd).abs_moment(p) == pytest.approx(closed, rel=1e-13)


@pytest.mark.parametrize("b", [1e-3, 0.5, 2.0, 300.0])
@pytest.mark.parametrize("p", [1.0, 2.0])
def test_laplace_absolute_moments_by_gauss_legendre(b, p):
    assert LaplaceMarginal(b).abs_moment(p) == pytest.approx(b**p * math.gamma(p + 1), rel=1e-13)


@pytest.mark.parametrize("mu", [0.1, 0.5, 1.0, 3.0, 10.0])
@pytest.mark.parametrize("delta", [1e-12, 1e-6, 1e-3])
def test_gaussian_epsilon_is_the_smallest_certified_epsilon(mu, delta):
    from autodp.mechanism_zoo import GaussianMechanism

    eps = gaussian_epsilon(delta, mu)
    assert gaussian_delta_mp(eps, mu) <= delta  # certified at the value returned
    assert gaussian_delta_mp(eps * (1 - 1e-12), mu) > delta  # and the smallest such, to 1e-12
    # autodp's analytic Gaussian (sigma = 1/mu, sensitivity 1) agrees to its own tolerance
    autodp = GaussianMechanism(sigma=1.0 / mu, RDP_off=True).get_approxDP(delta)
    assert eps == pytest.approx(autodp, rel=1e-6)


@pytest.mark.parametrize("mu", [0.1, 1.0, 10.0, 1e6])
@pytest.mark.parametrize("delta", [1e-12, 1e-6, 1e-2])
def test_uncertified_gaussian_epsilon_and_mu_are_the_roots(mu, delta):
    # the second route's window end and μ bracket: the double-precision roots of δ(ε; μ) = δ,
    # checked in 60 digits (a relative 1e-13 of ε or μ moves δ by far less than the bracket's
    # resolution); no mpmath or python-flint is needed to compute them
    eps = gaussian_epsilon(delta, mu, certify=False)
    assert eps == pytest.approx(gaussian_epsilon(delta, mu), rel=1e-13)
    assert gaussian_delta_mp(eps * (1 + 1e-13), mu) <= delta < gaussian_delta_mp(eps * (1 - 1e-13), mu)
    if mu < 1e3:  # gaussian_mu's certified route needs a normal-range σ
        root = gaussian_mu(eps, delta, certify=False)
        assert root == pytest.approx(gaussian_mu(eps, delta), rel=3e-14)
        assert gaussian_delta_mp(eps, root * (1 - 1e-13)) <= delta < gaussian_delta_mp(eps, root * (1 + 1e-13))


@pytest.fixture(scope="module")
def gaussian_certificate() -> dict:
    return dpopt.solve(GAUSSIAN_COUNT).certificate.data


def test_gaussian_certificate_verifies(gaussian_certificate):
    assert dpopt.verify(gaussian_certificate).passed


@pytest.mark.parametrize("edit, claim", [
    # the exact (lattice) measurement derives σ_ℤ² from σ rounded up: at σ = 1 its effective variance 1/m² exceeds
    # σ² by 0.8% (μ = 0.9959, the GDP slope varies fast at small σ), so a smaller edit of σ may stay private
    (lambda c: c["mechanism"]["parameters"].update(sigma=c["mechanism"]["parameters"]["sigma"] * (1 - 1e-2)),
     "privacy"),
    (lambda c: c["utility"].update(value=c["utility"]["value"] * (1 + 1e-6)), "utility"),
    (lambda c: c["checks"][-1].update(passed=False), "recorded:utility.integration"),
])
def test_tampered_gaussian_certificate_fails(gaussian_certificate, edit, claim):
    tampered = copy.deepcopy(gaussian_certificate)
    edit(tampered)
    assert claim in [c.claim for c in dpopt.verify(tampered).failed]
