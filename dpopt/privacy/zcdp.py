r"""Conversions from ρ-zCDP to (ε, δ)-DP, each labelled with its source.

Three answers exist and they differ; a certificate must say which one it used
(the 2020 Census DAS printed the CKS value):

* ``exact_gaussian`` — for a *Gaussian* mechanism only: ρ-zCDP Gaussian noise is exactly
  μ-GDP with μ = √(2ρ), whose profile is the analytic-Gaussian curve (:mod:`dpopt.privacy.gaussian`).
* ``cks`` — for any ρ-zCDP mechanism (Canonne, Kamath & Steinke 2020, Prop. 12):

  .. math:: \delta = \inf_{\alpha>1} \frac{e^{(\alpha-1)(\alpha\rho-\varepsilon)}}{\alpha-1}
            \left(1-\frac{1}{\alpha}\right)^{\alpha}.

* ``bun_steinke`` — the classical bound ε = ρ + 2√(ρ log(1/δ)) (Bun & Steinke 2016, Prop. 1.3).

References
----------
.. [1] C. Canonne, G. Kamath and T. Steinke, "The discrete Gaussian for differential
   privacy", NeurIPS 2020.
.. [2] M. Bun and T. Steinke, "Concentrated differential privacy: simplifications,
   extensions, and lower bounds", TCC 2016.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import TYPE_CHECKING

from dpopt.core.rounding import nudge_until
from dpopt.privacy.gaussian import gaussian_epsilon

if TYPE_CHECKING:
    import mpmath
    from flint import arb


def _a_log_one_minus_inverse(x: float) -> float:
    """α log(1 − 1/α) at α = 1 + eˣ, as (1 + eˣ)·log(eˣ/(1 + eˣ)) with the logarithm written
    x − log1p(eˣ) for x ≤ 0 and −log1p(e⁻ˣ) for x > 0: no cancellation as α → 1 or α → ∞."""
    log_ratio = x - math.log1p(math.exp(x)) if x <= 0 else -math.log1p(math.exp(-x))
    return (1.0 + math.exp(x)) * log_ratio


def _cks_epsilon_at(x: float, rho: float, delta: float) -> float:
    """ε(α) = αρ + (α log(1 − 1/α) − log(α − 1) − log δ)/(α − 1) at α = 1 + eˣ: valid at every α > 1."""
    a = 1.0 + math.exp(x)
    return a * rho + (_a_log_one_minus_inverse(x) - x - math.log(delta)) * math.exp(-x)


def _cks_log_delta_at(x: float, rho: float, epsilon: float) -> float:
    """log δ(α) = (α − 1)(αρ − ε) − log(α − 1) + α log(1 − 1/α) at α = 1 + eˣ: valid at every α > 1."""
    a = 1.0 + math.exp(x)
    return math.exp(x) * (a * rho - epsilon) - x + _a_log_one_minus_inverse(x)


_LOG_ORDER_LIMIT = 700.0
"""|log(α − 1)| is kept below this (α − 1 within float range)."""


def _minimise_log_order(f: Callable[[float], float], x0: float) -> float:
    """The minimiser over x = log(α − 1) ∈ ℝ of a function that grows at both ends.

    No fixed search interval: starting at ``x0`` (a closed-form guess of the optimum), the
    step doubles downhill until the value rises, which brackets a minimum (a < b < c with
    f(b) below both ends); Brent's method then refines it. Both CKS objectives tend to +∞
    as α → 1 (the −log(α − 1) and 1/(α − 1) terms) and as α → ∞ (the αρ and α²ρ terms),
    so the walk stops; it is capped at |x| = 700 for ρ so small that α overflows.
    """
    x0 = min(max(x0, -_LOG_ORDER_LIMIT + 1.0), _LOG_ORDER_LIMIT - 1.0)
    f0, step = f(x0), 1.0
    direction = 1.0 if f(x0 + 1e-3) < f0 else -1.0
    a, b, fb = x0 - direction * 1e-3, x0, f0
    while True:
        c = b + direction * step
        if abs(c) >= _LOG_ORDER_LIMIT:
            return b
        fc = f(c)
        if fc > fb:
            break
        a, b, fb = b, c, fc
        step *= 2.0
    from scipy import optimize  # imported where used (start-up of `dpopt verify`)

    lo, hi = sorted((a, c))
    res = optimize.minimize_scalar(f, bracket=(lo, b, hi), method="brent", tol=1e-12)
    return float(res.x) if res.fun <= fb and lo <= res.x <= hi else b


def zcdp_epsilon_cks(delta: float, rho: float) -> tuple[float, float]:
    """ε of a ρ-zCDP mechanism at δ by the CKS conversion, and the order α attaining it.

    The infimum over α > 1 is found without a fixed interval (:func:`_minimise_log_order`,
    started at the Bun–Steinke optimum α = 1 + √(log(1/δ)/ρ)). Every α > 1 gives a valid ε
    (the infimum only tightens it), so the returned ε is a guarantee whatever the optimiser
    did; it is moved up (by ulps) until :func:`zcdp_delta_cks_mp` confirms δ(ε) ≤ δ at that α.

    Returns
    -------
    epsilon, alpha : float
    """
    x = _minimise_log_order(
        lambda v: _cks_epsilon_at(v, rho, delta), 0.5 * math.log(math.log(1.0 / delta) / rho)
    )
    alpha = 1.0 + math.exp(x)
    epsilon = max(_cks_epsilon_at(x, rho, delta), 0.0)
    if epsilon > 0.0:  # the float evaluation is within a few ulps: move up until δ(ε) ≤ δ in 60 digits
        epsilon = nudge_until(epsilon, lambda e: zcdp_delta_cks_mp(e, rho, alpha) <= delta, up=True)
    return epsilon, alpha


def zcdp_delta_cks_mp(epsilon: float, rho: float, alpha: float) -> mpmath.mpf:
    """The CKS δ at (ε, ρ) for one order α, in 60-digit arithmetic (an upper bound on δ)."""
    import mpmath  # imported where used (start-up of `dpopt verify`)

    with mpmath.workdps(60):
        a, r, e = mpmath.mpf(alpha), mpmath.mpf(rho), mpmath.mpf(epsilon)
        return mpmath.exp((a - 1) * (a * r - e)) / (a - 1) * (1 - 1 / a) ** a


def zcdp_delta_cks(epsilon: float, rho: float) -> float:
    """δ of a ρ-zCDP mechanism at ε by the CKS conversion (infimum over α > 1, no fixed interval;
    started at α = (ε + ρ)/(2ρ), the minimiser of the leading term (α − 1)(αρ − ε))."""
    x0 = math.log(max((epsilon + rho) / (2.0 * rho) - 1.0, 1e-3))
    x = _minimise_log_order(lambda v: _cks_log_delta_at(v, rho, epsilon), x0)
    return min(1.0, math.exp(_cks_log_delta_at(x, rho, epsilon)))


def zcdp_epsilon_bun_steinke(delta: float, rho: float) -> float:
    """ε = ρ + 2√(ρ log(1/δ)) (Bun & Steinke 2016, Prop. 1.3)."""
    return rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))


def zcdp_epsilon_exact_gaussian(delta: float, rho: float) -> float:
    """ε of the ρ-zCDP *Gaussian* mechanism at δ: its exact profile, μ = √(2ρ)."""
    return gaussian_epsilon(delta, math.sqrt(2.0 * rho))


_ORDER_FIRST = 1e-10
"""The grid of orders of :func:`renyi_zcdp_holds` starts at α = 1 + 1e-10."""

_ORDER_RATIO = 1.01
"""Consecutive orders of that grid: α_{i+1} − 1 = 1.01 (α_i − 1)."""


RENYI_BITS = 200
"""Working precision (bits) of the Arb balls in which Rényi divergences are certified."""


def renyi_ball(x: float | Fraction | arb) -> arb:
    """``x`` as an exact Arb ball (a float or a Fraction), or ``x`` itself if already a ball."""
    from flint import arb, fmpq

    if isinstance(x, Fraction):
        return arb(fmpq(x.numerator, x.denominator))
    return x if isinstance(x, arb) else arb(x)


def renyi_zcdp_holds(renyi: Callable[[arb], arb], max_loss: Fraction, rho: float) -> tuple[bool, str]:
    r"""Certify D_α ≤ ρα for every order α > 1 from a Rényi divergence evaluated at finitely many orders.

    D_α is non-decreasing in α (van Erven & Harremoës 2014, Thm 3), so on [α_i, α_j]
    D_α/α ≤ D_{α_j}/α_i and on [1, α_j] D_α ≤ D_{α_j}; beyond α_max = L/ρ, with L the largest
    privacy loss, D_α ≤ L ≤ ρα. The orders are the grid α_k = 1 + 10⁻¹⁰·1.01^k (exact binary
    values) up to α_max; ``renyi(α)`` returns an Arb ball (python-flint) that contains D_α, and
    a bound passes only when the whole ball lies at or below ρ, so every comparison is a proof.

    The grid is walked with a doubling stride: an interval [α_i, α_{i+s}] that passes is kept
    and the stride doubled, one that fails is halved, down to s = 1. Every kept interval is a
    union of grid intervals whose bounds are no larger (by the monotonicity above), and a
    failure is declared only on a single grid interval, so the verdict is that of checking
    every grid interval, with far fewer evaluations where D_α/α is well below ρ.

    Returns
    -------
    passed, detail : bool, str
    """
    from flint import arb, ctx, fmpq  # python-flint loads in ~0.1 s: only calibration and checks need it

    with ctx.workprec(RENYI_BITS):
        r = arb(rho)
        top = arb(fmpq(max_loss.numerator, max_loss.denominator)) / r

        def order(k: int) -> arb:
            return arb(1) if k < 0 else 1 + arb(_ORDER_FIRST * _ORDER_RATIO**k)

        k, stride, low = -1, 1, arb(1)
        worst, count = 0.0, 0
        while not low >= top:
            high = order(k + stride)
            bound = renyi(high) / low
            if bound <= r:
                worst, count = max(worst, float(bound.upper())), count + 1
                k, low, stride = k + stride, high, 2 * stride
            elif stride > 1:
                stride //= 2
            else:
                return False, (f"D_α/α ≤ {float(bound.upper()):.12g} > ρ on α ∈ [{float(low.mid()):.8g}, "
                               f"{float(high.mid()):.8g}]")
    return True, (f"max over {count} order intervals of D_(α_j)/α_i ≤ {worst:.17g} ≤ ρ = {rho} "
                  f"(beyond α = L/ρ, D_α ≤ L = {float(max_loss):.17g}, the largest loss)")
