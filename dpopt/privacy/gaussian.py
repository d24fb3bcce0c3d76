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

References
----------
.. [1] B. Balle and Y.-X. Wang, "Improving the Gaussian mechanism for differential
   privacy: analytical calibration and optimal denoising", ICML 2018.
.. [2] J. Dong, A. Roth and W. Su, "Gaussian differential privacy", JRSS-B 2022.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
from scipy import optimize, special

from dpopt.errors import CalibrationError
from dpopt.privacy.rounding import nudge_until

_MP_DIGITS = 60


def gaussian_log_delta(epsilon: float, mu: float) -> float:
    r"""log δ(ε; μ) of a μ-GDP mechanism, computed in log-space.

    .. math:: \log\delta = \log\Phi(a) + \log\!\left(1 - e^{\varepsilon + \log\Phi(a-\mu) - \log\Phi(a)}\right),
              \quad a = -\varepsilon/\mu + \mu/2.
    """
    if mu <= 0:
        return -math.inf
    a = -epsilon / mu + mu / 2.0
    log_phi_a = float(special.log_ndtr(a))
    log_ratio = epsilon + float(special.log_ndtr(a - mu)) - log_phi_a
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

    Shares no code with :func:`gaussian_log_delta` (no scipy, no log-space tricks): it
    evaluates the closed form directly with mpmath's normal CDF.
    """
    with mpmath.workdps(_MP_DIGITS):
        eps = mpmath.mpf(epsilon)
        m = mpmath.mpf(mu)
        if m <= 0:
            return mpmath.mpf(0)
        return mpmath.ncdf(-eps / m + m / 2) - mpmath.exp(eps) * mpmath.ncdf(-eps / m - m / 2)


def gaussian_epsilon(delta: float, mu: float) -> float:
    r"""The smallest ε with δ(ε; μ) ≤ δ for a μ-GDP mechanism, rounded up.

    Bracketed by ε = 0 and :math:`\mu^2/2 + \mu\sqrt{2\log(1/\delta)}`, where
    :math:`\delta(\varepsilon) \le \Pr[L > \varepsilon] \le e^{-(\varepsilon-\mu^2/2)^2/(2\mu^2)} = \delta`.
    The root is then moved up until the 60-digit evaluation confirms δ(ε) ≤ δ.
    """
    _check_delta(delta)
    if gaussian_log_delta(0.0, mu) <= math.log(delta):
        return 0.0
    hi = mu * mu / 2.0 + mu * math.sqrt(2.0 * math.log(1.0 / delta))
    target = math.log(delta)
    eps = optimize.brentq(lambda e: gaussian_log_delta(e, mu) - target, 0.0, hi, xtol=1e-14, rtol=1e-15)
    return nudge_until(eps, lambda e: gaussian_delta_mp(e, mu) <= delta, up=True)


def gaussian_mu(epsilon: float, delta: float) -> float:
    r"""The largest μ such that a μ-GDP mechanism is (ε, δ)-DP, rounded down.

    δ(ε; μ) increases in μ, so μ is the root of δ(ε; μ) = δ; the returned value is then
    moved down until the 60-digit evaluation confirms δ(ε; μ) ≤ δ. The Gaussian
    mechanism with l2 sensitivity Δ is (ε, δ)-DP iff σ ≥ Δ / gaussian_mu(ε, δ)
    (Balle & Wang 2018, Thm 8).

    Raises
    ------
    CalibrationError
        If ε or δ are outside the range where the answer is a normal float.
    """
    _check_delta(delta)
    if not (epsilon >= 0 and math.isfinite(epsilon)):
        raise CalibrationError(f"epsilon must be finite and non-negative (got {epsilon})")
    target = math.log(delta)
    hi = 1.0
    while gaussian_log_delta(epsilon, hi) < target:
        hi *= 2.0
        if hi > 1e8:
            raise CalibrationError(f"no Gaussian noise level found for epsilon={epsilon}, delta={delta}")
    lo = hi / 2.0
    while gaussian_log_delta(epsilon, lo) > target:
        lo /= 2.0
        if lo < 1e-250:
            raise CalibrationError(
                f"epsilon={epsilon}, delta={delta} needs Gaussian noise beyond floating-point range"
            )
    mu = optimize.brentq(lambda m: gaussian_log_delta(epsilon, m) - target, lo, hi, xtol=1e-300, rtol=1e-15)
    return nudge_until(mu, lambda m: gaussian_delta_mp(epsilon, m) <= delta, up=False)


def gdp_tradeoff(alpha, mu: float):
    r"""The Gaussian trade-off function :math:`G_\mu(\alpha) = \Phi(\Phi^{-1}(1-\alpha) - \mu)`.

    ``alpha`` is the type-I error; the value is the smallest achievable type-II error
    (Dong, Roth & Su 2022, eq. 2.4). ``alpha`` may be a float (a float is returned) or
    an array (an array of its shape). :math:`\Phi^{-1}(1-\alpha)` is evaluated as
    :math:`-\Phi^{-1}(\alpha)`, which keeps full accuracy for α near 0.
    """
    value = special.ndtr(-special.ndtri(alpha) - mu)
    return float(value) if np.ndim(value) == 0 else value


def _check_delta(delta: float) -> None:
    if not (0.0 < delta < 1.0):
        raise CalibrationError(f"delta must lie in (0, 1) (got {delta})")
