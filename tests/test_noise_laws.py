"""The closed forms the families read from dpopt.noise, against independent evaluations.

Each expected value comes from another route: the discrete Laplace moments from a direct sum
of the pmf (1 − r)/(1 + r)·r^{|k|} (Canonne, Kamath & Steinke 2020, Def. of the discrete
Laplace), the Gaussian ones from scipy.stats (norm, halfnorm).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dpopt.noise.discrete_laplace import DiscreteLaplaceMarginal, discrete_laplace_moments
from dpopt.noise.gaussian import expected_l1, mean_usefulness


@pytest.mark.parametrize("scale", [0.3, 1.0, 1.7, 12.5])
def test_discrete_laplace_moments_match_the_pmf_summed(scale):
    r = math.exp(-1.0 / scale)
    k = np.arange(-4000, 4001, dtype=float)  # r^4000 < e^{-320} for every scale here
    pmf = (1 - r) / (1 + r) * r ** np.abs(k)
    assert pmf.sum() == pytest.approx(1.0, rel=1e-13)
    got = discrete_laplace_moments(scale, gamma=2.5)
    # float64 sums of ~8000 positive terms: relative rounding well below 1e-12
    assert got["mean_abs"] == pytest.approx(np.sum(np.abs(k) * pmf), rel=1e-12)
    assert got["second_moment"] == pytest.approx(np.sum(k**2 * pmf), rel=1e-12)
    assert got["fourth_moment"] == pytest.approx(np.sum(k**4 * pmf), rel=1e-12)
    assert got["within"] == pytest.approx(np.sum(pmf[np.abs(k) <= 2.5]), rel=1e-12)
    assert got["within"] == pytest.approx(DiscreteLaplaceMarginal(scale).within(2.5), rel=1e-12)


def test_gaussian_expected_l1_and_usefulness_match_scipy():
    sd = np.array([0.5, 1.0, 3.0, 0.0])  # the last coordinate is released exactly
    gamma = 0.8
    within = [stats.norm.cdf(gamma / s) - stats.norm.cdf(-gamma / s) if s > 0 else 1.0 for s in sd]
    assert mean_usefulness(sd, gamma) == pytest.approx(np.mean(within), rel=1e-13)
    assert expected_l1(sd) == pytest.approx(sum(stats.halfnorm(scale=s).mean() for s in sd[:3]), rel=1e-13)
