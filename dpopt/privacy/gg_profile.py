r"""Exact (ε, δ) profile of generalized Gaussian noise for a one-coordinate move; why p > 2 has no
zCDP or GDP guarantee.

Let X ~ GG(0, b, p) (density ∝ e^{−(|x|/b)^p}, p ≥ 1; :mod:`dpopt.noise.generalized_gaussian`) and
P, Q the laws of X and X + m, m > 0. In units of b (y = x/b, s = m/b) the privacy loss is

.. math:: L(y) = \log\frac{p(y)}{q(y)} = |y - s|^p - |y|^p ,

which is non-increasing in y (|·|^p is convex for p ≥ 1, so its increments over a fixed step
s grow), from +∞ (p > 1; s for p = 1) to −∞. The set {L > ε} is therefore a half-line
(−∞, y*) with L(y*) = ε, and the hockey-stick divergence is

.. math:: \delta(\varepsilon) = \sup_S P(S) - e^{\varepsilon}Q(S)
          = \max_y\; g(y),\qquad g(y) = F(y) - e^{\varepsilon}F(y - s),

F the GG(0, 1, p) distribution function, F(t) = ½Q(1/p, |t|^p) for t ≤ 0 and
1 − ½Q(1/p, t^p) for t > 0 (Q the regularized upper incomplete gamma function: |X/b|^p ~
Gamma(1/p, 1), Liu 2019 §2). g' = p − e^ε q changes sign once, at y*, so for any bracket
a ≤ y* ≤ c of the root, :math:`\delta(\varepsilon) \le F(c) - e^{\varepsilon}F(a - s)` (F is
non-decreasing): :func:`gg_delta_mp` evaluates that upper bound in 60-digit arithmetic with a
bracket of relative width 2⁻¹⁸⁰, so it exceeds δ(ε) by at most p(y*)(c − a) ≈ 10⁻⁵⁰.
p = 1 gives Laplace's 1 − e^{(ε − s)/2}, p = 2 the analytic Gaussian profile at μ = √2 s
(Balle & Wang 2018, Thm 8): the tests' references.

**Worst move.** A log-concave location family has a monotone likelihood ratio, so by Neyman–Pearson
the optimal tests are thresholds and its trade-off function against a shift m is
T_m(α) = F(F⁻¹(1 − α) − m/b) (as Dong, Roth & Su 2022 state for log-concave noise), which falls as |m| grows: among moves on one coordinate the largest, Δ∞, is the worst case.
Moves over several coordinates are not covered here (their profile is a composition that has
no closed form for p ≥ 3).

**zCDP and GDP for p > 2: none.** E_P e^{(α−1)L} = C∫e^{−α|y|^p + (α−1)|y−s|^p}dy with
C = p/(2Γ(1/p)). At y = −u, u ≥ 0, (u + s)^p ≥ u^p + psu^{p−1} bounds the exponent below by
h(u) = −u^p + (α − 1)psu^{p−1}, which increases on [0, U], U = (α − 1)(p − 1)s, so the integral
is at least (U/2)·e^{h(U/2)} with h(U/2) = κ_p((α − 1)s)^p, κ_p = ((p − 1)/2)^{p−1}(p + 1)/2 > 0.
Hence D_α ≥ [κ_p((α − 1)s)^p + log(CU/2)]/(α − 1) and D_α/α grows like α^{p−2}s^p → ∞:
GG noise with p > 2 is ρ-zCDP for no ρ, hence μ-GDP for no μ (μ-GDP implies μ²/2-zCDP: f ≥ G_μ makes
the pair a post-processing of N(0, 1), N(μ, 1) by Blackwell's theorem, Dong, Roth & Su 2022,
Thm 2.10, and D_α of that pair is αμ²/2). The shapes p = 1 and p = 2 are Laplace and
Gaussian noise, whose exact calibrations apply; the tests check the growth of D_α/α for p = 3 by quadrature.
"""

from __future__ import annotations

import math
from fractions import Fraction

from dpopt._lazy import lazy_module
from dpopt.core.rounding import nudge_until
from dpopt.errors import CalibrationError

mpmath = lazy_module("mpmath")
optimize = lazy_module("scipy.optimize")

_MP_DIGITS = 60
_BISECTIONS = 600
"""Bisection steps on the root y* (each halves a bracket of width ≤ 2^{k}): ≥ 2⁻¹⁸⁰ relative."""


def _mp(x: float | Fraction) -> mpmath.mpf:
    if isinstance(x, Fraction):
        return mpmath.mpf(x.numerator) / x.denominator
    return mpmath.mpf(x)


def gg_cdf_mp(t: mpmath.mpf, p: int) -> mpmath.mpf:
    """F(t) of GG(0, 1, p): ½Q(1/p, |t|^p) for t ≤ 0, 1 − ½Q(1/p, t^p) above (current mpmath precision)."""
    tail = mpmath.gammainc(mpmath.mpf(1) / p, abs(t) ** p, mpmath.inf, regularized=True) / 2
    return tail if t <= 0 else 1 - tail


def _loss(y: mpmath.mpf, s: mpmath.mpf, p: int) -> mpmath.mpf:
    return abs(y - s) ** p - abs(y) ** p


def gg_delta_mp(epsilon: float, shift: Fraction, p: int) -> mpmath.mpf:
    """An upper bound, within about 1e-50 absolute, on δ(ε) of GG(0, 1, p) against GG(s, 1, p),
    s = ``shift`` (= Δ/b, exact): F(c) − e^ε F(a − s) for a bracket [a, c] of the root of L = ε
    (module docstring), in 60-digit arithmetic. 0 when ε ≥ the largest loss (p = 1: s).

    Examples
    --------
    >>> from fractions import Fraction
    >>> round(float(gg_delta_mp(0.5, Fraction(1), 1)), 12)  # Laplace: 1 − e^{(0.5 − 1)/2}
    0.221199216929
    """
    if shift <= 0:
        return mpmath.mpf(0)
    with mpmath.workdps(_MP_DIGITS):
        s, eps = _mp(shift), mpmath.mpf(epsilon)
        hi = s / 2  # L(s/2) = 0 ≤ ε
        if p == 1 and eps >= s:
            return mpmath.mpf(0)
        lo = -s
        while _loss(lo, s, p) <= eps:
            lo *= 2
        for _ in range(_BISECTIONS):
            mid = (lo + hi) / 2
            if _loss(mid, s, p) > eps:
                lo = mid
            else:
                hi = mid
            if hi - lo <= abs(lo) * mpmath.mpf(2) ** -180:
                break
        bound = gg_cdf_mp(hi, p) - mpmath.exp(eps) * gg_cdf_mp(lo - s, p)
        return max(mpmath.mpf(0), bound)


def gg_scale_for_approx(epsilon: float, delta: float, shift: float | Fraction, p: int) -> float:
    """The smallest float b (to a few ulps) with :func:`gg_delta_mp` (ε, Δ/b, p) ≤ δ for a shift Δ
    on one coordinate: a root in log b (δ(ε) decreases in b), moved up until the 60-digit bound holds.

    Examples
    --------
    >>> round(gg_scale_for_approx(1.0, 0.05, 1, 1), 6)  # Laplace: b = 1/(ε − 2 log(1 − δ))
    0.906958

    Raises
    ------
    CalibrationError
        When δ ≥ 1 or the root is out of floating-point range.
    """
    if not 0 < delta < 1:
        raise CalibrationError(f"the generalized Gaussian (ε, δ) calibration needs 0 < δ < 1 (got {delta})")
    m = Fraction(shift)

    def excess(log_b: float) -> float:
        value = gg_delta_mp(epsilon, m / Fraction(math.exp(log_b)), p)
        return float(mpmath.log(value) - math.log(delta)) if value > 0 else -math.inf

    hi = math.log(float(m) / epsilon) + 1.0
    while excess(hi) > 0:
        hi += 1.0
    lo = hi - 1.0
    while excess(lo) <= 0:
        lo -= 1.0
        if lo < hi - 200:
            raise CalibrationError("the generalized Gaussian scale for this target is out of range")
    root = math.exp(optimize.brentq(excess, lo, hi, xtol=1e-14, rtol=1e-14))
    return nudge_until(root, lambda b: gg_delta_mp(epsilon, m / Fraction(b), p) <= delta, up=True)
