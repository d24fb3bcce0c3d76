r"""Exact (ε, δ) profile of i.i.d. discrete Laplace noise (Canonne, Kamath & Steinke 2020).

The discrete Laplace law of scale b on ℤ has pmf (1 − r)/(1 + r)·r^{|y|}, r = e^{−1/b}.
For a move t ∈ ℤ^d the privacy loss of output y is Σ_k (|y_k − t_k| − |y_k|)/b, and
coordinate k contributes (|t_k| − 2j_k)/b with j_k ∈ {0, …, |t_k|} (j_k = 0 when y_k is on
the far side of 0, j_k = |t_k| beyond t_k, j_k = |y_k| in between). Its law is

.. math:: P[j = 0] = \frac{1}{1 + r}, \qquad P[j] = \frac{1 - r}{1 + r} r^{j}\ (0 < j < |t|),
          \qquad P[j = |t|] = \frac{r^{|t|}}{1 + r},

so the total loss is (D − 2J)/b with D = ‖t‖₁ and J = Σ_k j_k an integer whose law is the
convolution of these small pmfs, and the exact profile is a finite sum:

.. math:: \delta(\varepsilon) = \sum_{J} P[J]\,\bigl(1 - e^{\varepsilon - (D - 2J)/b}\bigr)_+ .

It depends on the move only through the multiset {|t_k|}
(:func:`dpopt.privacy.discrete_gaussian.move_pattern`). :func:`discrete_laplace_delta` is
the float64 evaluation used to search for b, :func:`discrete_laplace_delta_mp` the
60-digit one certificates rely on.

**Rényi divergences** (zCDP). Independent coordinates add: D_α(move) = Σ_k D_α(|t_k|), and
for one coordinate, splitting Σ_y p(y)^α p(y − t)^{1−α} at 0 and t (geometric series),

.. math:: e^{(\alpha-1)D_\alpha} = \frac{1-r}{1+r}\left[\frac{r^{(1-\alpha)t} + r^{\alpha t}}{1-r}
          + r^{(1-\alpha)t}\,\frac{q(1 - q^{t-1})}{1-q}\right], \qquad q = r^{2\alpha-1}.

:func:`discrete_laplace_zcdp_holds` certifies D_α ≤ ρα over all orders with
:func:`dpopt.privacy.zcdp.renyi_zcdp_holds` (the largest loss of a move is ‖t‖₁/b).

**μ-GDP** from the same law of J: the trade-off function of a move is the polygon through the vertices of the
tests that reject when J ≥ k (:func:`discrete_laplace_gdp_mu`). A unit move is randomized response with ε = 1/b
(one interior vertex), where this equals the ε-DP conversion; a move of several coordinates is better than the
conversion of its ε = D/b.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np

from dpopt._lazy import lazy_module
from dpopt.privacy.zcdp import RENYI_BITS, renyi_ball, renyi_zcdp_holds

mpmath = lazy_module("mpmath")
optimize = lazy_module("scipy.optimize")

if TYPE_CHECKING:
    from flint import arb

_MP_DIGITS = 60


def discrete_laplace_delta(epsilon: float, scale: float, pattern: Sequence[int]) -> float:
    """δ(ε) of i.i.d. discrete Laplace noise of scale b against a move with |t_k| = ``pattern`` (float64)."""
    pattern = [int(v) for v in pattern if v]
    if not pattern:
        return 0.0
    log_r = -1.0 / scale
    r = math.exp(log_r)
    law = np.array([1.0])
    for t in pattern:
        j = np.arange(t + 1, dtype=float)
        pmf = -math.expm1(log_r) / (1.0 + r) * np.exp(j * log_r)
        pmf[0], pmf[-1] = 1.0 / (1.0 + r), math.exp(t * log_r) / (1.0 + r)
        law = np.convolve(law, pmf)
    loss = (sum(pattern) - 2.0 * np.arange(law.size)) / scale
    gain = -np.expm1(np.minimum(epsilon - loss, 0.0))
    return float(np.sum(law * gain))


def _loss_law_mp(scale: Fraction, pattern: Sequence[int]) -> list:
    """P[J = j], j = 0 … D, of the module docstring in the working mpmath precision, b taken exactly."""
    b = mpmath.mpf(scale.numerator) / scale.denominator
    r = mpmath.exp(-1 / b)
    law = [mpmath.mpf(1)]
    for t in pattern:
        pmf = [(1 - r) / (1 + r) * r**j for j in range(t + 1)]
        pmf[0], pmf[t] = 1 / (1 + r), r**t / (1 + r)
        out = [mpmath.mpf(0)] * (len(law) + t)
        for i, a in enumerate(law):
            for j, c in enumerate(pmf):
                out[i + j] += a * c
        law = out
    return law


def discrete_laplace_delta_mp(epsilon: float, scale: Fraction, pattern: Sequence[int]) -> mpmath.mpf:
    """δ(ε) of the module docstring in 60-digit arithmetic, b taken exactly (the certificate's check)."""
    pattern = [int(v) for v in pattern if v]
    if not pattern:
        return mpmath.mpf(0)
    with mpmath.workdps(_MP_DIGITS):
        b = mpmath.mpf(scale.numerator) / scale.denominator
        law = _loss_law_mp(scale, pattern)
        total, eps = sum(pattern), mpmath.mpf(epsilon)
        return mpmath.fsum(
            p * (1 - mpmath.exp(eps - (total - 2 * big_j) / b))
            for big_j, p in enumerate(law)
            if (total - 2 * big_j) / b > eps
        )


GDP_SMALLEST = 1e-40
"""Vertices of the trade-off curve with α or β below this are not evaluated (60 digits resolve Φ⁻¹ near 0 and 1
only so far): :func:`discrete_laplace_gdp_mu` returns None and the ε-DP route is used instead."""


def discrete_laplace_gdp_mu(scale: Fraction, pattern: Sequence[int]) -> mpmath.mpf | None:
    r"""The smallest μ for which i.i.d. discrete Laplace noise of scale b is μ-GDP against a move with |t_k| =
    ``pattern``, in 60-digit arithmetic; None when a vertex is beyond :data:`GDP_SMALLEST`.

    The privacy loss is (D − 2J)/b (module docstring), decreasing in J, so the most powerful tests of P (no move)
    against Q (the move) reject when J ≥ k: α_k = P[J ≥ k], β_k = Q[J < k] = Σ_{j<k} P[J = j] e^{−(D − 2j)/b}
    (k = 0 … D + 1). The trade-off function T(P, Q) is the polygon through these vertices, and since G_μ is convex
    it lies above G_μ iff every vertex does (Dong, Roth & Su 2022, Def. 2.1, Prop. 2.2): β_k ≥ Φ(Φ⁻¹(1 − α_k) − μ),
    i.e. μ ≥ Φ⁻¹(1 − α_k) − Φ⁻¹(β_k). The reversed pair (Q, P) is the move −t, of the same pattern.
    """
    pattern = [int(v) for v in pattern if v]
    if not pattern:
        return mpmath.mpf(0)
    with mpmath.workdps(_MP_DIGITS):
        b = mpmath.mpf(scale.numerator) / scale.denominator
        law = _loss_law_mp(scale, pattern)
        total = sum(pattern)
        q = [p * mpmath.exp(-(total - 2 * j) / b) for j, p in enumerate(law)]
        root2 = mpmath.sqrt(2)  # Φ⁻¹(p) = √2 erf⁻¹(2p − 1)
        worst = mpmath.mpf(0)
        for k in range(1, total + 1):
            alpha, beta = mpmath.fsum(law[k:]), mpmath.fsum(q[:k])
            if min(alpha, beta, 1 - alpha, 1 - beta) < GDP_SMALLEST:
                return None
            worst = max(worst, root2 * (mpmath.erfinv(1 - 2 * alpha) - mpmath.erfinv(2 * beta - 1)))
        return worst


def discrete_laplace_renyi(alpha: float | arb, scale: Fraction, pattern: Sequence[int]) -> arb:
    """D_α of i.i.d. discrete Laplace noise of scale b against a move with |t_k| = ``pattern``, as an
    Arb ball of :data:`~dpopt.privacy.zcdp.RENYI_BITS` bits that contains it."""
    from flint import ctx

    with ctx.workprec(RENYI_BITS):
        a = renyi_ball(alpha)
        rate = renyi_ball(1 / Fraction(scale))  # 1/b; r^x = e^{−x/b}
        r = (-rate).exp()
        q = (-(2 * a - 1) * rate).exp()
        total = renyi_ball(0.0)
        for t in (int(v) for v in pattern if v):
            near = (-(1 - a) * t * rate).exp()
            between = near * q * (1 - q ** (t - 1)) / (1 - q) if t > 1 else renyi_ball(0.0)
            inner = (near + (-a * t * rate).exp()) / (1 - r) + between
            total += ((1 - r) / (1 + r) * inner).log()
        return total / (a - 1)


def discrete_laplace_kl(scale: float, pattern: Sequence[int]) -> float:
    r"""The Kullback–Leibler divergence (the α → 1 limit of D_α) of i.i.d. discrete Laplace
    noise of scale b against a move with |t_k| = ``pattern`` (float64).

    The log-ratio at y is (|y − t| − |y|)/b per coordinate, and E|Y − t| − E|Y| =
    Σ_{j=1}^{t} (1 − 2P[Y ≥ j]) with P[Y ≥ j] = r^j/(1 + r), so

    .. math:: \mathrm{KL} = \frac1b \sum_k \sum_{j=1}^{|t_k|} \frac{(1 - r^j) + r(1 - r^{j-1})}{1 + r},

    each term written with ``expm1`` (no cancellation for large b). Every term grows with
    1/b, and so does their product with 1/b: KL decreases in b.
    """
    rate = 1.0 / scale
    r = math.exp(-rate)
    total = 0.0
    for t in (int(v) for v in pattern if v):
        j = np.arange(1, t + 1, dtype=float)
        total += float(np.sum(-np.expm1(-j * rate) - r * np.expm1(-(j - 1) * rate))) / (1.0 + r)
    return total * rate


def discrete_laplace_kl_scale(patterns: Sequence[Sequence[int]], rho: float) -> float:
    r"""The b at which the largest :func:`discrete_laplace_kl` over ``patterns`` equals ρ
    (floating-point root in log b): ρ-zCDP (D_α ≤ ρα for α > 1, hence KL ≤ ρ) needs b at
    least this. The bracket's upper end Δ/√(2ρ), Δ the largest ‖t‖₁, has KL ≤ ρ (each move
    is (‖t‖₁/b)-DP, and ε-DP ⇒ ε²/2-zCDP: Bun & Steinke 2016, Prop. 1.4)."""
    def excess(log_b: float) -> float:
        b = math.exp(log_b)
        return max(discrete_laplace_kl(b, t) for t in patterns) - rho

    hi = math.log(max(sum(int(v) for v in t) for t in patterns) / math.sqrt(2.0 * rho))
    lo = hi - math.log(2.0)
    for _ in range(200):
        if excess(lo) > 0:
            break
        lo -= math.log(2.0)
    if excess(hi) >= 0:
        return math.exp(hi)
    return math.exp(optimize.brentq(excess, lo, hi, xtol=1e-15, rtol=1e-15))


def discrete_laplace_zcdp_holds(scale: Fraction, patterns, rho: float) -> tuple[bool, str]:
    """Certify that discrete Laplace noise of scale b is ρ-zCDP for every move pattern in ``patterns``."""
    details = []
    for pattern in patterns:
        largest = sum(int(v) for v in pattern) / Fraction(scale)
        passed, detail = renyi_zcdp_holds(lambda a, t=pattern: discrete_laplace_renyi(a, scale, t), largest, rho)
        if not passed:
            return False, f"move {tuple(pattern)}: {detail}"
        details.append(detail)
    return True, details[0] if len(details) == 1 else f"{len(details)} move patterns; " + details[-1]
