"""Scale floors of generalized Gaussian noise under (ε, δ): every scale below a floor fails the target.

Oracles, independent of the code: the hockey-stick divergence δ_s(ε) = Σ_y (P_s[y − t] − e^ε P_s[y])₊ of the
discrete GG law on ℤ summed directly in mpmath at 30 digits (|y| ≤ t + s·95^{1/p} + 2: the weights left out are below
e^{−95}); the discrete Laplace's pure-ε scale t/ε (its loss ratio is e^{t/s} at every point past 0); Laplace's
(ε, δ) scale t/(ε − 2 log(1 − δ)) (δ(ε) = 1 − e^{(ε − t/b)/2}); the analytic Gaussian δ(ε) = Φ(t/(2σ) − εσ/t) −
e^ε Φ(−t/(2σ) − εσ/t) (Balle & Wang 2018, Thm 8), σ = b/√2.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from scipy.stats import norm

from dpopt.privacy.gg_scale_floor import continuous_scale_floor, discrete_scale_floor

CASES = [(1, 1, 1.0, 1e-3), (1, 3, 0.5, 1e-6), (2, 1, 1.0, 1e-3), (2, 7, 1.0, 1e-3), (3, 2, 1.0, 0.05),
         (4, 7, 1.0, 1e-3), (2, 3, 2.0, 1e-9)]


def hockey_stick(p: int, s: float, t: int, epsilon: float) -> mpmath.mpf:
    """δ_s(ε) of the discrete GG law of scale s against its shift by t, by direct summation (module docstring)."""
    with mpmath.workdps(30):
        scale = mpmath.mpf(s)
        reach = t + math.ceil(s * 95 ** (1.0 / p)) + 2
        w = {k: mpmath.exp(-(abs(k) / scale) ** p) for k in range(-reach - t, reach + t + 1)}
        total = mpmath.fsum(w[k] for k in range(-reach, reach + 1))
        factor = mpmath.exp(epsilon)
        return mpmath.fsum(max(mpmath.mpf(0), w[y - t] - factor * w[y]) for y in range(-reach + t, reach + 1)) / total


@pytest.mark.parametrize("p, t, epsilon, delta", CASES)
def test_every_scale_below_the_discrete_floor_fails(p, t, epsilon, delta):
    floor = discrete_scale_floor(p, t, epsilon, delta)
    assert floor > 0
    for s in np.geomspace(floor / 30, floor * (1 - 1e-4), 12):
        assert hockey_stick(p, s, t, epsilon) > delta, s


@pytest.mark.parametrize("p, t, epsilon, delta", CASES)
def test_the_discrete_floor_is_within_five_percent_of_the_first_passing_scale(p, t, epsilon, delta):
    # the first scale on a 0.5% grid above the floor whose summed δ_s(ε) meets δ: the floor is a useful bound
    floor = discrete_scale_floor(p, t, epsilon, delta)
    s = floor
    while hockey_stick(p, s, t, epsilon) > delta:
        s *= 1.005
    assert floor >= 0.95 * s


@pytest.mark.parametrize("t, epsilon", [(1, 1.0), (3, 0.5), (7, 2.0)])
def test_the_discrete_laplace_floor_under_pure_epsilon_is_t_over_epsilon(t, epsilon):
    floor = discrete_scale_floor(1, t, epsilon, 0.0)
    assert t / epsilon * (1 - 2.0**-7) <= floor <= t / epsilon


@pytest.mark.parametrize("t, epsilon, delta", [(1.0, 1.0, 0.05), (7.0, 1.0, 1e-3), (2.5, 0.3, 1e-6)])
def test_the_laplace_floor_is_the_closed_form(t, epsilon, delta):
    exact = t / (epsilon - 2 * math.log1p(-delta))
    floor = continuous_scale_floor(epsilon, delta, t, 1)
    assert exact * (1 - 1e-8) <= floor <= exact


@pytest.mark.parametrize("t, epsilon, delta", [(1.0, 1.0, 1e-3), (math.sqrt(53), 1.0, 1e-3), (2.0, 0.5, 1e-6)])
def test_the_gaussian_floor_meets_the_analytic_gaussian_profile(t, epsilon, delta):
    def analytic(b):
        sigma = b / math.sqrt(2)
        return (norm.cdf(t / (2 * sigma) - epsilon * sigma / t)
                - math.exp(epsilon) * norm.cdf(-t / (2 * sigma) - epsilon * sigma / t))

    floor = continuous_scale_floor(epsilon, delta, t, 2)
    assert analytic(floor * (1 - 1e-6)) > delta >= analytic(floor * (1 + 1e-6))


def test_no_floor_for_a_target_every_law_meets():
    assert discrete_scale_floor(2, 1, 1.0, 0.5) == 0.0  # δ ≥ 1/2: the interval argument proves nothing
