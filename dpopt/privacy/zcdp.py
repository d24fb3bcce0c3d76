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

from dpopt.core.decimals import float_below
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


_SPLIT_DEPTH = 12
"""A grid interval that fails :func:`_chord_bound` is bisected at most this many times."""


def _chord_bound(renyi: Callable[[arb], arb], low: arb, high: arb) -> arb:
    r"""An upper bound on D_α/α over α ∈ [low, high] from D at the two ends, by convexity.

    K(λ) = λ D_{1+λ} = log E_P[e^{λL}] is the cumulant generating function of the loss, convex
    with K(0) = 0, so on [λ_i, λ_j] it lies below its chord c₁λ + c₀ (c₀ ≤ 0: the chord passes
    below K(0) = 0), and D_α/α = K(λ)/(λ(1 + λ)) ≤ g(λ) = (c₁λ + c₀)/(λ(1 + λ)). For c₀ < 0, g
    rises from −∞ to its one maximum at λ* = (−c₀ + √(c₀(c₀ − c₁)))/c₁ and falls to 0, so the
    bound is g at the end nearest λ*, or g(λ*). With c₀ not certainly negative, D_j/α_i.
    """
    lam_i, lam_j = low - 1, high - 1
    k_i = lam_i * renyi(low) if lam_i > 0 else lam_i * 0
    d_j = renyi(high)
    k_j = lam_j * d_j
    c1 = (k_j - k_i) / (lam_j - lam_i)
    c0 = k_i - c1 * lam_i
    if not (c0 < 0 and c1 > 0):
        return d_j / low

    def g(lam: arb) -> arb:
        return (c1 * lam + c0) / (lam * (1 + lam))

    peak = (-c0 + (c0 * (c0 - c1)).sqrt()) / c1
    if peak < lam_i and lam_i > 0:
        return g(lam_i)
    if peak > lam_j:
        return g(lam_j)
    return g(peak)


def _split_holds(renyi: Callable[[arb], arb], low: arb, high: arb, r: arb, depth: int) -> tuple[float, int] | str:
    """D_α ≤ ρα on [low, high] by :func:`_chord_bound`, bisecting the interval when it is not enough:
    (worst bound, pieces) when every piece passes, else the reason."""
    bound = _chord_bound(renyi, low, high)
    if bound <= r:
        return float(bound.upper()), 1
    if depth == 0:
        return (f"D_α/α ≤ {float(bound.upper()):.12g} > ρ on α ∈ [{float(low.mid()):.12g}, "
                f"{float(high.mid()):.12g}]")
    middle = (low + high) / 2
    first = _split_holds(renyi, low, middle, r, depth - 1)
    if isinstance(first, str):
        return first
    second = _split_holds(renyi, middle, high, r, depth - 1)
    if isinstance(second, str):
        return second
    return max(first[0], second[0]), first[1] + second[1]


def renyi_peak(renyi: Callable[[float], float], max_loss: float, rho: float) -> float:
    """sup over α > 1 of D_α/α, numerically (for calibration; the certificate is
    :func:`renyi_zcdp_holds`): a grid of 100 orders α − 1 ∈ [10⁻⁹, L/ρ] (geometric), refined by
    golden-section search in log(α − 1) around the best grid point. ``renyi`` is a float function."""
    top = math.log(max(max_loss / rho, 1e-6))
    xs = [math.log(1e-9) + (top - math.log(1e-9)) * i / 99 for i in range(100)]

    def value(x: float) -> float:
        a = 1.0 + math.exp(x)
        return renyi(a) / a

    values = [value(x) for x in xs]
    best = max(range(len(xs)), key=values.__getitem__)
    lo, hi = xs[max(best - 1, 0)], xs[min(best + 1, len(xs) - 1)]
    g = (math.sqrt(5.0) - 1.0) / 2.0
    for _ in range(50):
        c, e = hi - g * (hi - lo), lo + g * (hi - lo)
        if value(c) > value(e):
            hi = e
        else:
            lo = c
    return max(values[best], value((lo + hi) / 2.0))


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
    union of grid intervals. An interval that fails this bound gets the second-order bound of
    :func:`_chord_bound` (convexity of (α − 1)D_α); a single grid interval that fails both is
    bisected (at most :data:`_SPLIT_DEPTH` times) before a failure is declared: a flat supremum
    of D_α/α (small ρ, or a peak at an interior order as for discrete Laplace noise) is
    certified to within about 10⁻⁸ relative instead of the first-order 1% of the grid.

    Returns
    -------
    passed, detail : bool, str
    """
    from flint import arb, ctx, fmpq  # python-flint loads in ~0.1 s: only calibration and checks need it

    with ctx.workprec(RENYI_BITS):
        r = arb(float_below(rho))
        top = arb(fmpq(max_loss.numerator, max_loss.denominator)) / r

        def order(k: int) -> arb:
            return arb(1) if k < 0 else 1 + arb(_ORDER_FIRST * _ORDER_RATIO**k)

        k, stride, low = -1, 1, arb(1)
        worst, count = 0.0, 0
        while not low >= top:
            high = order(k + stride)
            bound = renyi(high) / low
            if not bound <= r:
                bound = _chord_bound(renyi, low, high)
            if bound <= r:
                worst, count = max(worst, float(bound.upper())), count + 1
                k, low, stride = k + stride, high, 2 * stride
            elif stride > 1:
                stride //= 2
            else:
                split = _split_holds(renyi, low, high, r, _SPLIT_DEPTH)
                if isinstance(split, str):
                    return False, split
                worst, count = max(worst, split[0]), count + split[1]
                k, low = k + 1, high
    return True, (f"max over {count} order intervals of an upper bound on D_α/α (D_(α_j)/α_i, or the "
                  f"chord bound of (α − 1)D_α) ≤ {worst:.17g} ≤ ρ = {rho} "
                  f"(beyond α = L/ρ, D_α ≤ L = {float(max_loss):.17g}, the largest loss)")
