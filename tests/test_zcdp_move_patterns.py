"""Laplace and discrete Laplace under ρ-zCDP, calibrated on the exact Rényi divergences of each move
pattern (issue 26): no one-axis Δ₁ shortcut, no ε²/2 fallback at small ρ.

References, independent of dpopt's Arb evaluations: dp_accounting's Laplace RDP
(``_laplace_rdp``, Mironov 2017, Prop. 6), summed over the moved coordinates (independent
coordinates add); for discrete Laplace, D_α summed over the integers in closed form (the loss
of the move by 1 is +1/b on y ≤ 0, of probability 1/(1 + r), and −1/b beyond, r = e^{−1/b}).
The exact calibration is the b at which sup_α D_α/α = ρ, found here by brentq on a dense grid
of orders refined by a bounded search.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import optimize

import dpopt
from dpopt.certificate.verify import verify

rdp = pytest.importorskip("dp_accounting.rdp.rdp_privacy_accountant")

HISTOGRAM = {"dpopt": 1, "name": "h", "data": {"attributes": {"race": ["a", "b", "c", "d"]}},
             "query": {"kind": "histogram", "attribute": "race"}, "adjacency": {"kind": "replace_one"},
             "utility": {"metric": "l2"}}
RHOS = [0.005, 0.0176, 0.05, 0.5, 5.0]


def _sup_over_orders(d) -> float:
    """sup_{α>1} d(α)/α: a grid of 300 orders α − 1 ∈ [1e-8, 1e4], then a bounded search around the best."""
    xs = np.linspace(math.log(1e-8), math.log(1e4), 300)
    values = [d(1 + math.exp(x)) / (1 + math.exp(x)) for x in xs]
    i = int(np.argmax(values))
    lo, hi = xs[max(i - 1, 0)], xs[min(i + 1, xs.size - 1)]
    res = optimize.minimize_scalar(lambda x: -d(1 + math.exp(x)) / (1 + math.exp(x)), bounds=(lo, hi),
                                   method="bounded", options={"xatol": 1e-10})
    return max(values[i], -res.fun)


def _laplace_pair(b: float, a: float) -> float:
    # the replace-one move (1, −1): two coordinates shifted by 1/b; a → 1 is dp_accounting's KL branch
    return 2 * rdp._laplace_rdp(1 / b, a)


def _discrete_laplace_pair(b: float, a: float) -> float:
    # D_α = log E_P[e^{(α−1)L}]/(α − 1), L(y) = (|y − 1| − |y|)/b = ±1/b, written log1p(Σ p·expm1((α−1)L))
    # so that orders near 1 keep their digits (a plain logsumexp loses ~1e-16/(α − 1) relative).
    # L = +1/b exactly for y ≤ 0 (P = 1/(1 + r), r = e^{−1/b}) and −1/b for y ≥ 1 (P = r/(1 + r)).
    r = math.exp(-1 / b)
    lam = (a - 1) / b
    if lam > 30:
        return 2 * (lam + math.log1p(r * math.exp(-2 * lam)) - math.log1p(r)) / (a - 1)
    return 2 * math.log1p((math.expm1(lam) + r * math.expm1(-lam)) / (1 + r)) / (a - 1)


def _exact_scale(pair, rho: float, lo: float, hi: float) -> float:
    return optimize.brentq(lambda b: _sup_over_orders(lambda a: pair(b, a)) - rho, lo, hi, xtol=1e-14, rtol=1e-13)


@pytest.mark.parametrize("rho", RHOS)
def test_laplace_histogram_within_1e6_of_the_exact_calibration(rho):
    sol = dpopt.solve({**HISTOGRAM, "privacy": {"zcdp": {"rho": rho}}, "mechanism": "laplace",
                       "sampler": "floating_point"})  # the continuous law's calibration
    b = sol.mechanism.scale
    exact = _exact_scale(_laplace_pair, rho, 0.5 / math.sqrt(2 * rho), 2 / math.sqrt(2 * rho))
    assert exact * (1 - 1e-9) <= b <= exact * (1 + 1e-6)
    # dp_accounting's RDP at its own orders, summed over the two coordinates: never above ρα
    for a in [1 + 10.0**k for k in range(-6, 4)] + [1.5, 2.0, 3.0, 8.0, 32.0]:
        assert _laplace_pair(b, a) <= rho * a * (1 + 1e-12)
    assert verify(sol.certificate).passed


@pytest.mark.parametrize("rho", RHOS)
def test_discrete_laplace_histogram_within_1e6_of_the_exact_calibration(rho):
    # the ρ ∈ {0.005, 0.0176, 0.05} used to fall back to ε²/2 (2× the variance)
    sol = dpopt.solve({**HISTOGRAM, "privacy": {"zcdp": {"rho": rho}}, "mechanism": "discrete_laplace"})
    b = float(sol.mechanism.scale)
    exact = _exact_scale(_discrete_laplace_pair, rho, 0.5 / math.sqrt(2 * rho), 2 / math.sqrt(2 * rho))
    # the scale is a dyadic rational rounded up to 21 significant bits (< 1e-6 relative)
    assert exact * (1 - 1e-9) <= b <= exact * (1 + 2e-6)
    assert b < 2 / math.sqrt(2 * rho) * 0.99  # well below the ε-DP ⇒ ε²/2 fallback (Δ₁ = 2)
    assert verify(sol.certificate).passed


@pytest.mark.parametrize("low, high", [(1 + 1e-9, 1 + 1e-6), (1.0001, 1.0002), (1.5, 3.0), (1.01, 40.0)])
def test_chord_bound_covers_every_order_of_the_interval(low, high):
    # the bound on D_α/α over [low, high] must not be below its value at any order of a dense grid
    # (dp_accounting's Laplace RDP for two coordinates shifted by 0.3, the histogram move at b = 1/0.3)
    from flint import arb

    from dpopt.privacy.laplace import laplace_renyi
    from dpopt.privacy.zcdp import _chord_bound

    bound = _chord_bound(lambda a: 2 * laplace_renyi(a, 0.3), arb(low), arb(high))
    orders = np.linspace(low, high, 2001)
    assert float(bound.upper()) >= max(_laplace_pair(1 / 0.3, a) / a for a in orders) * (1 - 1e-12)
