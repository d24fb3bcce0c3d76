"""Second folds of R²DP: stable log-domain MGFs against independent evaluations."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from scipy import integrate, stats

from dpopt.noise.second_folds import (
    DiscreteFold,
    GammaFold,
    NoncentralChi2Fold,
    RayleighFold,
    SumFold,
    TruncatedNormalFold,
    UniformFold,
    fold_from_parameters,
    inverse_moment_from_mgf,
)

T14 = SumFold([GammaFold(2, 1.5), UniformFold(0.15, 1.15), TruncatedNormalFold(0.8, 0.56, 0.16)])
"""Digest T14: t = X₁ + 0.5 X₂ + 0.8 X₃ with Gamma(2, 1.5), U(0.3, 2.3), N^T(1, 0.7, lo = 0.2);
the coefficients absorbed in the scales (0.5·U(0.3, 2.3) = U(0.15, 1.15), …)."""

FOLDS = {
    "discrete": DiscreteFold([0.01, 5.0], [0.99, 0.01]),
    "gamma": GammaFold(2.0, 0.5),
    "uniform": UniformFold(0.5, 9.0),
    "uniform_at_zero": UniformFold(0.0, 2.0),
    "truncnorm_lemma_b8": TruncatedNormalFold(0.5223, 1.5454, 0.5223),
    "truncnorm_two_sided": TruncatedNormalFold(1.0, 0.7, 0.2, 3.0),
    "truncnorm_tail": TruncatedNormalFold(-2.0, 0.5, 0.0),
    "ncx2": NoncentralChi2Fold(3.0, 2.0, 0.5),
    "rayleigh": RayleighFold(1.3),
    "sum": T14,
}
ARGS = [0.0, -1e-9, -1e-3, -0.3, -1.0, -5.0, -30.0, -300.0, -1e4, -1e7]


@pytest.mark.parametrize("name", FOLDS)
def test_log_domain_mgf_matches_multiprecision_closed_form(name):
    # two implementations: numpy log-domain (erfcx, expm1, series) vs mpmath closed forms at
    # 100 digits (enough to survive the cancellations at u = −1e7)
    fold = FOLDS[name]
    with mpmath.workdps(100):
        for u in ARGS:
            ref_m = float(mpmath.log(fold.mgf_mp(mpmath.mpf(u))))
            ref_d = float(mpmath.log(fold.mgf_prime_mp(mpmath.mpf(u))))
            assert float(fold.log_mgf(u)) == pytest.approx(ref_m, rel=1e-11, abs=1e-11)
            assert float(fold.log_mgf_prime(u)) == pytest.approx(ref_d, rel=1e-11, abs=1e-11)


@pytest.mark.parametrize("name", FOLDS)
def test_scalar_and_array_evaluations_agree(name):
    # the optimisers' scalar fast paths (plain floats) against the vectorised array code,
    # a separate implementation of the same closed forms (checked against mpmath above);
    # u = 10 takes the truncated normal's lower tail (B = β − σu ≤ 0) and u = 1 its middle
    fold = FOLDS[name]
    args = ARGS + ([1.0, 10.0] if name == "truncnorm_two_sided" else [])
    log_m, dlog = fold.log_mgf(np.array(args)), fold.dlog_mgf(np.array(args))
    for i, u in enumerate(args):
        assert float(fold.log_mgf(u)) == pytest.approx(log_m[i], rel=1e-13, abs=1e-13)
        assert float(fold.dlog_mgf(u)) == pytest.approx(dlog[i], rel=1e-13, abs=1e-300)


CONTINUOUS = {
    "gamma": (GammaFold(2.0, 0.5), stats.gamma(2.0, scale=0.5)),
    "uniform": (UniformFold(0.5, 9.0), stats.uniform(0.5, 8.5)),
    "truncnorm": (TruncatedNormalFold(1.0, 0.7, 0.2, 3.0), stats.truncnorm((0.2 - 1) / 0.7, (3 - 1) / 0.7, 1.0, 0.7)),
    "ncx2": (NoncentralChi2Fold(3.0, 2.0, 0.5), stats.ncx2(3.0, 2.0, scale=0.5)),
    "rayleigh": (RayleighFold(1.3), stats.rayleigh(scale=1.3)),
}


@pytest.mark.parametrize("name", CONTINUOUS)
def test_mgf_and_moments_against_the_density(name):
    # a third source: numerical integration of scipy.stats' density
    fold, dist = CONTINUOUS[name]
    lo, hi = dist.support()
    for u in (-0.1, -1.0, -4.0):
        m = integrate.quad(lambda t: math.exp(u * t) * dist.pdf(t), lo, hi, limit=200)[0]
        mp = integrate.quad(lambda t: t * math.exp(u * t) * dist.pdf(t), lo, hi, limit=200)[0]
        assert float(fold.mgf(u)) == pytest.approx(m, rel=1e-8)
        assert float(fold.mgf_prime(u)) == pytest.approx(mp, rel=1e-8)
    assert fold.mean() == pytest.approx(dist.mean(), rel=1e-10)
    for p in (1.0, 1.25):  # below every family's small-ball exponent (χ'²(3): 1.5)
        ref = integrate.quad(lambda t: t ** (-p) * dist.pdf(t), lo, hi, limit=200)[0]
        assert fold.inverse_moment(p) == pytest.approx(ref, rel=1e-7)
        assert inverse_moment_from_mgf(fold, p) == pytest.approx(ref, rel=1e-7)  # Table 1's MGF integral


def test_infinite_inverse_moments_are_reported():
    # digest T23 / P9: Gamma(k ≤ 1) has E|Z| = ∞, Gamma(k ≤ 2) has E Z² = ∞, U(0, b) has E[1/t] = ∞
    assert GammaFold(1.0, 1.0).inverse_moment(1) == math.inf
    assert math.isfinite(GammaFold(1.5, 1.0).inverse_moment(1))
    assert GammaFold(1.5, 1.0).inverse_moment(2) == math.inf
    assert UniformFold(0.0, 3.0).inverse_moment(1) == math.inf
    assert RayleighFold(1.0).inverse_moment(2) == math.inf
    assert TruncatedNormalFold(1.0, 1.0, 0.0).inverse_moment(1) == math.inf
    assert NoncentralChi2Fold(2.0, 1.0).inverse_moment(1) == math.inf  # density ~ x^{k/2−1} at 0


def test_rayleigh_asymptotics():
    # digest P8: at u = −1e7 (σ = 1.3) the direct formula gives 5.884e-15; the asymptotic
    # 1/(2w²) − 3/(4w⁴), w = −σu/√2, gives 5.917e-15
    fold = RayleighFold(1.3)
    w = 1.3e7 / math.sqrt(2)
    assert float(fold.mgf(-1e7)) == pytest.approx(1 / (2 * w * w) - 3 / (4 * w**4), rel=1e-12)
    assert float(fold.mgf(-1e7)) == pytest.approx(5.917e-15, rel=1e-3)


@pytest.mark.parametrize("name", [n for n in FOLDS if n != "uniform_at_zero"])
def test_sampler_mean(name):
    fold = FOLDS[name]
    t = fold.sample(np.random.default_rng(5), 200_000)
    assert np.all(t >= 0)
    se = t.std(ddof=1) / math.sqrt(t.size)
    assert abs(t.mean() - fold.mean()) < 4 * se + 1e-12  # 4 standard errors


@pytest.mark.parametrize("name", [n for n in CONTINUOUS])
def test_sampler_distribution(name):
    fold, dist = CONTINUOUS[name]
    assert stats.kstest(fold.sample(np.random.default_rng(8), 50_000), dist.cdf).pvalue > 0.01


def test_sum_is_a_product_of_mgfs_and_matches_monte_carlo():
    u = -0.7
    assert float(T14.mgf(u)) == pytest.approx(np.prod([float(c.mgf(u)) for c in T14.components]), rel=1e-14)
    t = T14.sample(np.random.default_rng(2), 400_000)
    e = np.exp(u * t)
    assert abs(e.mean() - float(T14.mgf(u))) < 4 * e.std(ddof=1) / math.sqrt(t.size)
    # digest T14: ℓ1 = E[1/t] = 0.27110 (MC 0.27098), U(γ = 0.3) = 1 − M(−0.3) = 0.70033
    assert T14.inverse_moment(1) == pytest.approx(0.27110, abs=1e-5)
    assert 1 - float(T14.mgf(-0.3)) == pytest.approx(0.70033, abs=1e-5)


@pytest.mark.parametrize("name", FOLDS)
def test_scaling_and_round_trip(name):
    fold = FOLDS[name]
    c = 2.5
    assert float(fold.scaled(c).log_mgf(-0.4)) == pytest.approx(float(fold.log_mgf(-0.4 * c)), rel=1e-12, abs=1e-14)
    again = fold_from_parameters(fold.parameters)
    assert again.parameters == fold.parameters
    assert float(again.log_mgf(-1.0)) == float(fold.log_mgf(-1.0))


def test_bad_parameters_raise():
    for make in (lambda: DiscreteFold([0.0, 1.0]), lambda: GammaFold(-1, 1), lambda: UniformFold(2, 1),
                 lambda: TruncatedNormalFold(0, 1, -1.0), lambda: fold_from_parameters({"kind": "cauchy"})):
        with pytest.raises(ValueError):
            make()
