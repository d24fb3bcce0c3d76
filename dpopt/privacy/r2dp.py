r"""Exact pure-ε privacy of R²DP (two-fold Laplace) noise.

For noise Z = L/t with L ~ Laplace(0, 1) and t = 1/b ≥ 0 drawn from a second fold with MGF
M, the density is f(x) = ½M'(−|x|) (Mohammady et al. 2020, eq. 10). M' is log-convex, so
f(u)/f(u − Δ) is non-decreasing in u ≤ 0 and the supremum of the privacy loss for a shift
of size Δ is attained at the output x = q(d) (Thm 4.1):

.. math:: \varepsilon(\Delta) = \ln\frac{\mathbb E[t]}{M'(-\Delta)}
          = \ln\frac{\mathbb E[t]}{\mathbb E[t\,e^{-\Delta t}]} .

It is tight (the brute-force supremum of the density ratio equals it, digest §1.4) and
increasing in Δ; scaling t by c is the same as scaling Δ by c.

Never use instead:

* the "average leakage" ln E[e^{Δ/b}] = ln M(Δ) of Thm 4.5 — it is only a *necessary
  condition for a usefulness gain over Laplace* (:func:`usefulness_gain_possible`), not a
  privacy bound;
* Thm B.2's Bernoulli formula ln[p e^{Δ/b₀} + (1−p) e^{Δ/b₁}], which is wrong (it drops
  the 1/b factors of the Laplace densities): 1.776 exact vs 0.910 for t ∈ {0.01, 5},
  p = (0.99, 0.01), Δ = 1 (digest P1).

Vector queries, one independent t per coordinate (i.i.d. R²DP noise): the loss of a shift v
is Σ_i ε(|v_i|) (the coordinates are independent and each supremum is attained at
x_i = q_i(d)), so the exact ε is :math:`\max_{v \in S} \sum_i \varepsilon(|v_i|)` over the
sensitivity set S. ε(·) is concave with ε(0) = 0 (log-convexity of M'), hence subadditive:
spreading a shift over coordinates *costs more* than concentrating it, unlike Laplace.
A sufficient condition used for design is k·ε(Δ∞) ≤ ε with k = max_v ‖v‖₀ (equality when
all non-zero |v_i| are equal, e.g. histograms and marginal tables).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from fractions import Fraction

import numpy as np

from dpopt._lazy import lazy_module
from dpopt.noise.second_folds import SecondFold
from dpopt.sensitivity.patterns import ShiftPattern

mpmath = lazy_module("mpmath")
optimize = lazy_module("scipy.optimize")

MP_DIGITS = 60


def r2dp_epsilon(fold: SecondFold, delta: float) -> float:
    """ε = ln E[t] − ln M'(−Δ) in floating point (Thm 4.1), for design and plots."""
    return float(math.log(fold.mean()) - fold.log_mgf_prime(-float(delta)))


def _epsilon_at(fold: SecondFold, delta_mp) -> mpmath.mpf:
    return mpmath.log(fold.mgf_prime_mp(mpmath.mpf(0)) / fold.mgf_prime_mp(-delta_mp))


def _mp_value(x: float | Fraction) -> mpmath.mpf:
    x = Fraction(x)
    return mpmath.mpf(x.numerator) / x.denominator


def r2dp_epsilon_mp(fold: SecondFold, delta: float | Fraction, digits: int = MP_DIGITS) -> mpmath.mpf:
    r"""ε = ln(M'(0)/M'(−Δ)) from each family's closed-form MGF in mpmath.

    This is the certificate's independent evaluation: it shares no code with the numpy
    log-domain evaluation used by the optimisers. It is evaluated at ``digits`` and at
    ``digits + 30`` digits and the precision is raised until the two agree to ``digits − 10``
    digits (closed forms such as the Rayleigh MGF cancel at large arguments).

    Raises
    ------
    ArithmeticError
        If the value does not stabilise by 400 digits.
    """
    dps = digits
    while dps <= 400:
        with mpmath.workdps(dps):
            low = _epsilon_at(fold, _mp_value(delta))
        with mpmath.workdps(dps + 30):
            high = _epsilon_at(fold, _mp_value(delta))
        with mpmath.workdps(dps + 30):
            if abs(high - low) <= mpmath.mpf(10) ** (-(digits - 10)) * max(1, abs(high)):
                return high
        dps *= 2
    raise ArithmeticError("the R²DP privacy loss did not stabilise in multiple-precision arithmetic")


def pattern_epsilon_mp(fold: SecondFold, pattern: ShiftPattern, digits: int = MP_DIGITS) -> mpmath.mpf:
    r"""max over v ∈ S of Σ_i ε(|v_i|) for an independent t per coordinate, in mpmath
    (ε(·) from :func:`r2dp_epsilon_mp`, once per distinct magnitude)."""
    per_magnitude = [r2dp_epsilon_mp(fold, m, digits) for m in pattern.magnitudes]
    with mpmath.workdps(digits + 30):
        return pattern.worst(per_magnitude, add=mpmath.fsum)


def density_ratio_sup(fold: SecondFold, delta: float, half_width: float | None = None,
                      points: int = 200_001) -> float:
    r"""Brute force: max over a grid of x of |ln f(x) − ln f(x + Δ)|, f(x) = ½M'(−|x|).

    The grid is symmetric around 0 and contains x = 0 and x = −Δ, where Thm 4.1 places
    the supremum; used to confirm that the theorem's value is attained, i.e. tight.
    """
    delta = float(delta)
    if half_width is None:
        half_width = max(4 * delta, 20.0 / fold.mean())
    x = np.linspace(-half_width, half_width, points)
    x = np.union1d(x, [0.0, -delta])
    lf = fold.noise_log_density(x)
    lg = fold.noise_log_density(x + delta)
    return float(np.max(np.abs(lf - lg)))


def rate_scale_for_epsilon(fold: SecondFold, epsilon: float, delta: float,
                           guess: float | None = None) -> float:
    """The factor c with ε(c·t; Δ) = ε in floating point (ε(c·t; Δ) = ε(t; cΔ) increases in c).

    ``guess``: a factor near the answer (e.g. a neighbouring fold's, in a search): the
    secant method starts from it (log scale, a few evaluations); should it not converge,
    the bracket starts 1e-3 (in log) around it and widens fourfold per step, instead of 2
    around ε/E[t]. Either way the factor is a floating-point root; certificates re-check ε.

    Raises
    ------
    ValueError
        If no bracket is found (a degenerate fold).
    """
    log_mean = math.log(fold.mean())

    def excess(log_v: float) -> float:
        return log_mean - float(fold.log_mgf_prime(-math.exp(log_v))) - epsilon

    v0 = epsilon / fold.mean() if guess is None else guess * delta  # ε/E[t]: exact for a point mass (Laplace)
    if guess is not None:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error", RuntimeWarning)  # an overflow: fall back to the bracket
                log_v = _secant(excess, math.log(v0), math.log(v0) + 1e-4, tol=1e-14, maxiter=12)
        except (ArithmeticError, ValueError, RuntimeWarning):
            log_v = None
        # ε increases in v: the root is unique
        if log_v is not None and math.isfinite(log_v):
            return math.exp(log_v) / delta
    step, growth = (2.0, 1.0) if guess is None else (1e-3, 4.0)
    lo = hi = math.log(v0)
    down = up = step
    f_lo = f_hi = excess(lo)
    for _ in range(200):
        if f_lo < 0:
            break
        lo -= down
        down *= growth
        f_lo = excess(lo)
    for _ in range(200):
        if f_hi > 0:
            break
        hi += up
        up *= growth
        f_hi = excess(hi)
    if not (f_lo < 0 < f_hi):
        raise ValueError("could not bracket the scale of the second fold for this ε")
    log_v = optimize.brentq(excess, lo, hi, xtol=1e-15, rtol=1e-15)
    return math.exp(log_v) / delta


def _secant(f: Callable[[float], float], x0: float, x1: float, tol: float, maxiter: int) -> float | None:
    """The secant iteration of :func:`scipy.optimize.newton` without a derivative (same
    steps, stopping when a step is at most ``tol``), in plain floats: ``newton``'s per-step
    ``np.isclose`` cost more than the function in the R²DP search. None when it does not
    converge in ``maxiter`` steps or two values coincide (a flat secant)."""
    p0, p1 = x0, x1
    q0, q1 = f(p0), f(p1)
    if abs(q1) < abs(q0):
        p0, p1, q0, q1 = p1, p0, q1, q0
    for _ in range(maxiter):
        if q1 == q0:
            return None
        if abs(q1) > abs(q0):
            p = (-q0 / q1 * p1 + p0) / (1 - q0 / q1)
        else:
            p = (-q1 / q0 * p0 + p1) / (1 - q1 / q0)
        if abs(p - p1) <= tol:
            return p
        p0, q0 = p1, q1
        p1 = p
        q1 = f(p1)
    return None


def usefulness_gain_possible(fold: SecondFold, delta: float) -> bool:
    r"""Thm 4.5's necessary condition for beating Laplace on usefulness at the same ε:
    ε < ln M(Δ) (eq. 8). A *filter only*: ln M(Δ) is not a privacy bound (digest P2).
    M(Δ) must be finite (for Gamma: θΔ < 1)."""
    log_m = float(fold.log_mgf(float(delta)))
    return math.isfinite(log_m) and r2dp_epsilon(fold, delta) < log_m
