r"""The Gaussian mechanism's exact privacy: μ-GDP, its (ε, δ) profile, its trade-off curve.

A Gaussian mechanism with l2 sensitivity Δ and noise N(0, σ² I) (or N(0, σ² P) on the
span of the sensitivity space) is exactly μ-GDP with μ = Δ/σ (Dong, Roth & Su 2022,
Thm 2.7), and its exact (ε, δ) profile is the analytic-Gaussian curve of Balle & Wang
(2018, Thm 8):

.. math::

    \delta(\varepsilon; \mu) = \Phi\!\left(-\frac{\varepsilon}{\mu} + \frac{\mu}{2}\right)
        - e^{\varepsilon}\,\Phi\!\left(-\frac{\varepsilon}{\mu} - \frac{\mu}{2}\right).

Floating-point evaluation is done in log-space (``log_ndtr`` and ``expm1``) so that the
profile stays accurate down to δ = 1e-300 and up to ε of several hundred. An
independent evaluation in 60-digit arithmetic (:func:`gaussian_delta_mp`) is what
certificates rely on.

Calibration (:func:`gaussian_mu`, :func:`gaussian_sigma_approx`) solves δ(ε; μ) = δ in
double precision from a closed-form bracket, then confirms the rounded value once with a
rigorous enclosure of δ in Arb ball arithmetic (:func:`gaussian_delta_ball`, python-flint):
a value is accepted only when the whole ball lies below the target.

References
----------
.. [1] B. Balle and Y.-X. Wang, "Improving the Gaussian mechanism for differential
   privacy: analytical calibration and optimal denoising", ICML 2018.
.. [2] J. Dong, A. Roth and W. Su, "Gaussian differential privacy", JRSS-B 2022.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np

from dpopt.core import normal
from dpopt.core.roots import bisect_feasible
from dpopt.core.rounding import nudge_until
from dpopt.errors import CalibrationError

if TYPE_CHECKING:
    import mpmath

_MP_DIGITS = 60

_CERTIFY = ContextVar("dpopt_certify_gaussian_epsilon", default=True)


@contextmanager
def uncertified_epsilon() -> Iterator[None]:
    """Within this context :func:`gaussian_epsilon` returns its double-precision root (``certify=False``)
    unless told otherwise: for ``dpopt verify``, which compares the ε a certificate displays at each δ
    with its recomputation to 10⁻⁹ relative (far above the root's 1e-15), and must not import mpmath."""
    token = _CERTIFY.set(False)
    try:
        yield
    finally:
        _CERTIFY.reset(token)
_BALL_BITS = 128
"""Working precision of the Arb enclosure: its radius is ~1e-38 of δ, far below any
double-precision step of the calibrated value."""


def gaussian_log_delta(epsilon: float, mu: float) -> float:
    r"""log δ(ε; μ) of a μ-GDP mechanism, computed in log-space.

    .. math:: \log\delta = \log\Phi(a) + \log\!\left(1 - e^{\varepsilon + \log\Phi(a-\mu) - \log\Phi(a)}\right),
              \quad a = -\varepsilon/\mu + \mu/2.
    """
    if mu <= 0:
        return -math.inf
    a = -epsilon / mu + mu / 2.0
    log_phi_a = float(normal.log_ndtr(a))
    log_ratio = epsilon + float(normal.log_ndtr(a - mu)) - log_phi_a
    if log_ratio >= 0.0:  # only at ε < 0 or rounding at ε ≈ 0, μ → 0
        return -math.inf
    return log_phi_a + math.log(-math.expm1(log_ratio))


def gaussian_delta(epsilon: float, mu: float) -> float:
    """δ(ε; μ) of a μ-GDP mechanism (the analytic-Gaussian profile), see module docstring.

    Examples
    --------
    >>> round(gaussian_delta(0.0, 1.0), 10)  # 2Φ(1/2) − 1
    0.3829249225
    """
    return math.exp(gaussian_log_delta(epsilon, mu))


def gaussian_delta_mp(epsilon: float, mu: float | mpmath.mpf) -> mpmath.mpf:
    """δ(ε; μ) evaluated in 60-digit arithmetic: the independent check certificates use.

    Shares no code with :func:`gaussian_log_delta` (no :mod:`dpopt.core.normal`, no log-space
    tricks): it evaluates the closed form directly with mpmath's normal CDF.
    """
    import mpmath  # imported where used (start-up of `dpopt verify`)

    with mpmath.workdps(_MP_DIGITS):
        eps = mpmath.mpf(epsilon)
        m = mpmath.mpf(mu)
        if m <= 0:
            return mpmath.mpf(0)
        return mpmath.ncdf(-eps / m + m / 2) - mpmath.exp(eps) * mpmath.ncdf(-eps / m - m / 2)


def gaussian_epsilon(delta: float, mu: float, *, certify: bool | None = None) -> float:
    r"""The smallest ε with δ(ε; μ) ≤ δ for a μ-GDP mechanism, rounded up.

    Bracketed by ε = 0 and :math:`\mu^2/2 + \mu\sqrt{2\log(1/\delta)}`, where
    :math:`\delta(\varepsilon) \le \Pr[L > \varepsilon] \le e^{-(\varepsilon-\mu^2/2)^2/(2\mu^2)} = \delta`.
    The bracket is halved (:func:`~dpopt.core.roots.bisect_feasible`, δ(ε) decreasing) to a
    relative width of 10⁻¹⁵, then moved up until the 60-digit evaluation confirms δ(ε) ≤ δ.
    ``certify=False`` skips that confirmation: the bisection's end, feasible in double
    precision and within about 1e-15 of the exact ε, for a value that no claim rests on (a
    window end of the second route, whose resolution is coarser by far). The default is to
    certify, except within :func:`uncertified_epsilon`.
    """
    _check_delta(delta)
    target = math.log(delta)
    if gaussian_log_delta(0.0, mu) <= target:
        return 0.0
    hi = mu * mu / 2.0 + mu * math.sqrt(2.0 * math.log(1.0 / delta))
    eps = bisect_feasible(lambda e: gaussian_log_delta(e, mu) <= target, 0.0, hi, rtol=1e-15)
    if not (_CERTIFY.get() if certify is None else certify):
        return eps
    return nudge_until(eps, lambda e: gaussian_delta_mp(e, mu) <= delta, up=True)


def gaussian_delta_ball(epsilon: float, l2_squared: Fraction, sigma: float):
    r"""A rigorous enclosure of δ(ε; μ) at μ = √(Δ²)/σ: an Arb ball (python-flint) that
    contains the exact value.

    Evaluated as :math:`\tfrac12\operatorname{erfc}\big((\varepsilon/\mu - \mu/2)/\sqrt2\big)
    - \tfrac12 e^{\varepsilon}\operatorname{erfc}\big((\varepsilon/\mu + \mu/2)/\sqrt2\big)`
    at 128 bits from the exact rational Δ² and the float σ; every Arb operation bounds its
    own rounding error, so the ball is a proof. Shares no code with
    :func:`gaussian_log_delta` or :func:`gaussian_delta_mp`.
    """
    from flint import arb, ctx, fmpq  # imported here: python-flint loads in ~0.1 s, only calibration needs it

    old, ctx.prec = ctx.prec, _BALL_BITS
    try:
        l2 = Fraction(l2_squared)
        e = arb(epsilon)
        m = arb(fmpq(l2.numerator, l2.denominator)).sqrt() / arb(sigma)
        half = arb(0.5)
        root_half = half.sqrt()
        upper = ((e / m - m * half) * root_half).erfc()
        lower = ((e / m + m * half) * root_half).erfc()
        return half * upper - half * e.exp() * lower
    finally:
        ctx.prec = old


_NEWTON_STEPS = 4
_BIAS = 4e-15
"""Relative step up after a Newton step: above the double rounding of σ + step (a few
ulps), so that the next enclosure usually lies below δ."""
_CLOSE = 3e-14
"""Accept a certified σ once the Newton step left is below this fraction of σ (the
double-precision root of δ(ε; μ) = δ is that close except for ε ≲ 0.05, where the
profile's two terms nearly cancel)."""


def _ball_at_most(ball, delta: float) -> bool:
    """True when every point of ``ball`` is ≤ δ (an undecided ball is not accepted)."""
    from flint import arb

    return bool(ball <= arb(delta))


def _mu_root(epsilon: float, delta: float) -> float:
    r"""The root of δ(ε; μ) = δ in double precision (not certified: see :func:`gaussian_mu`).

    g(μ) = log δ(ε; μ) − log δ increases in μ, with the exact slope
    :math:`g'(\mu) = \varphi(a)/\delta(\varepsilon;\mu)`, a = −ε/μ + μ/2
    (:math:`\partial\delta/\partial\mu = \varphi(a)`, since
    :math:`e^{\varepsilon}\varphi(a-\mu) = \varphi(a)`). Newton's method starts at the
    closed-form lower end: the tail bound
    :math:`\delta(\varepsilon;\mu) \le \Pr[L > \varepsilon] \le e^{-(\varepsilon-\mu^2/2)^2/(2\mu^2)}`
    (L ~ N(μ²/2, μ²) the privacy loss) equals δ at
    :math:`\mu_0 = \sqrt2\,(\sqrt{\log(1/\delta)+\varepsilon} - \sqrt{\log(1/\delta)})`, so the root
    lies above μ₀ (at ε = 0 it starts at the exact root 2Φ⁻¹((1 + δ)/2)). Steps are kept
    inside the bracket known so far (at most ×4 while no upper end is known), bisecting
    otherwise; it stops when a step is below 1e-15 of μ, or below 1e-12 of μ without
    halving the previous one (the rounding floor of log δ near ε = 0).

    Raises
    ------
    CalibrationError
        Out of floating-point range.
    """
    _check_delta(delta)
    if not (epsilon >= 0 and math.isfinite(epsilon)):
        raise CalibrationError(f"epsilon must be finite and non-negative (got {epsilon})")
    target = math.log(delta)
    log_1_over_delta = -target
    lo = math.sqrt(2.0) * epsilon / (math.sqrt(log_1_over_delta + epsilon) + math.sqrt(log_1_over_delta))
    hi = math.inf
    mu = lo if lo > 0 else -2.0 * float(normal.ndtri(0.5 * (1.0 - delta)))  # ε = 0: δ = 2Φ(μ/2) − 1
    previous_step = math.inf
    for _ in range(400):
        log_delta = gaussian_log_delta(epsilon, mu)
        g = log_delta - target
        if g == 0.0:
            return mu
        if g < 0:
            lo = mu
        else:
            hi = mu
        a = -epsilon / mu + mu / 2.0
        log_slope = -0.5 * a * a - 0.5 * math.log(2.0 * math.pi) - log_delta
        candidate = mu - g * math.exp(-log_slope) if log_slope > -700 else math.nan
        if math.isinf(hi):
            candidate = min(candidate, 4.0 * mu) if candidate > lo else 4.0 * mu
        elif not lo < candidate < hi:
            candidate = 0.5 * (lo + hi)
        step = abs(candidate - mu)
        floor = step < 1e-12 * mu and step > 0.5 * previous_step  # Newton no longer contracts: rounding floor
        if step <= 1e-15 * mu or (hi - lo <= 1e-15 * hi < math.inf) or floor:
            return candidate
        previous_step = step
        if not (1e-250 < candidate < 1e8):
            raise CalibrationError(
                f"epsilon={epsilon}, delta={delta}: the Gaussian noise level is out of floating-point range")
        mu = candidate
    raise CalibrationError(f"no Gaussian noise level found for epsilon={epsilon}, delta={delta}")


def gaussian_mu(epsilon: float, delta: float, *, certify: bool = True) -> float:
    r"""The largest μ such that a μ-GDP mechanism is (ε, δ)-DP, rounded down.

    δ(ε; μ) increases in μ, so μ is the root of δ(ε; μ) = δ: 1/σ for the σ of
    :func:`gaussian_sigma_approx` at Δ = 1 (within 3e-14 of the threshold), moved down until
    the rigorous enclosure of δ(ε; μ) (:func:`gaussian_delta_ball`) lies below δ. The
    Gaussian mechanism with l2 sensitivity Δ is (ε, δ)-DP iff σ ≥ Δ / gaussian_mu(ε, δ)
    (Balle & Wang 2018, Thm 8). ``certify=False`` returns the double-precision root
    (:func:`_mu_root`, within about 1e-14 of the exact μ, not rounded in either direction) and
    loads no python-flint: for a value that no claim rests on.

    Raises
    ------
    CalibrationError
        If ε or δ are outside the range where the answer is a normal float.
    """
    if not certify:
        return _mu_root(epsilon, delta)
    mu = 1.0 / gaussian_sigma_approx(Fraction(1), epsilon, delta)
    return nudge_until(
        mu, lambda m: _ball_at_most(gaussian_delta_ball(epsilon, Fraction(m) ** 2, 1.0), delta), up=False)


def gaussian_sigma_approx(l2_squared: Fraction, epsilon: float, delta: float) -> float:
    r"""A σ within 3e-14 (relative) above the smallest σ for which Gaussian noise N(0, σ²) on
    l2 sensitivity Δ = √(Δ²) is (ε, δ)-DP, certified by a rigorous enclosure.

    σ starts at Δ/μ·(1 + 4e-15) with μ the double-precision root (:func:`_mu_root`). Each step encloses
    δ(ε; Δ/σ) in a ball (:func:`gaussian_delta_ball`, Δ exact as √ of the rational Δ²) and
    takes a Newton step from its centre with the exact slope
    :math:`\partial\delta/\partial\mu = \varphi(-\varepsilon/\mu + \mu/2)` (the two terms'
    densities coincide: :math:`e^{\varepsilon}\varphi(a-\mu) = \varphi(a)`), biased up by
    4e-15; σ is returned once its ball lies below δ and the step left is below 3e-14 of σ
    (one evaluation in the usual case, where the double-precision root is already that
    close). Should Newton stall (a slope that underflows), :func:`nudge_until` walks up.

    Raises
    ------
    CalibrationError
        Out of numeric range.
    """
    l2 = math.sqrt(float(l2_squared))
    sigma = l2 / _mu_root(epsilon, delta) * (1.0 + _BIAS)
    if not (math.isfinite(sigma) and sigma > 0):
        raise CalibrationError(f"the Gaussian noise scale for this target is out of range (σ = {sigma})")
    certified = None
    for _ in range(_NEWTON_STEPS):
        ball = gaussian_delta_ball(epsilon, l2_squared, sigma)
        holds = _ball_at_most(ball, delta)
        mu = l2 / sigma
        # −dδ/dσ = φ(a)·μ/σ
        slope = math.exp(-0.5 * (mu / 2.0 - epsilon / mu) ** 2) / math.sqrt(2.0 * math.pi) * mu / sigma
        if not (slope > 0 and math.isfinite(slope)):
            break
        step = (float(ball.mid()) - delta) / slope  # σ_Newton = σ + step
        if holds:
            certified = sigma
            if -step <= _CLOSE * sigma:
                return sigma
        sigma = (sigma + step) * (1.0 + _BIAS)
    if certified is not None:
        return certified
    return nudge_until(
        sigma, lambda s: _ball_at_most(gaussian_delta_ball(epsilon, l2_squared, s), delta), up=True)


def gdp_tradeoff(alpha, mu: float):
    r"""The Gaussian trade-off function :math:`G_\mu(\alpha) = \Phi(\Phi^{-1}(1-\alpha) - \mu)`.

    ``alpha`` is the type-I error; the value is the smallest achievable type-II error
    (Dong, Roth & Su 2022, eq. 2.4). ``alpha`` may be a float (a float is returned) or
    an array (an array of its shape). :math:`\Phi^{-1}(1-\alpha)` is evaluated as
    :math:`-\Phi^{-1}(\alpha)`, which keeps full accuracy for α near 0.
    """
    value = normal.ndtr(-normal.ndtri(alpha) - mu)
    return float(value) if np.ndim(value) == 0 else value


def _check_delta(delta: float) -> None:
    if not (0.0 < delta < 1.0):
        raise CalibrationError(f"delta must lie in (0, 1) (got {delta})")
