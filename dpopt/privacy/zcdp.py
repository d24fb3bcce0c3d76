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

import mpmath
import numpy as np
from scipy import optimize

from dpopt.privacy.gaussian import gaussian_epsilon


def _cks_epsilon_at(alpha: float, rho: float, delta: float) -> float:
    """ε(α) = αρ + (α log(1 − 1/α) − log(α − 1) − log δ)/(α − 1): a valid bound at every α > 1."""
    return alpha * rho + (alpha * math.log1p(-1.0 / alpha) - math.log(alpha - 1.0) - math.log(delta)) / (alpha - 1.0)


def zcdp_epsilon_cks(delta: float, rho: float) -> tuple[float, float]:
    """ε of a ρ-zCDP mechanism at δ by the CKS conversion, and the order α attaining it.

    Every α > 1 gives a valid ε (the infimum only tightens it), so the returned ε is
    a guarantee whatever the optimiser did; :func:`zcdp_delta_cks_mp` re-checks it.

    Returns
    -------
    epsilon, alpha : float
    """
    x = np.linspace(-12.0, 12.0, 481)  # log(α − 1)
    values = [_cks_epsilon_at(1.0 + math.exp(v), rho, delta) for v in x]
    i = int(np.argmin(values))
    res = optimize.minimize_scalar(
        lambda v: _cks_epsilon_at(1.0 + math.exp(v), rho, delta),
        bounds=(x[max(i - 1, 0)], x[min(i + 1, len(x) - 1)]),
        method="bounded",
        options={"xatol": 1e-12},
    )
    alpha = 1.0 + math.exp(res.x if res.fun <= values[i] else x[i])
    return max(_cks_epsilon_at(alpha, rho, delta), 0.0), alpha


def zcdp_delta_cks_mp(epsilon: float, rho: float, alpha: float) -> mpmath.mpf:
    """The CKS δ at (ε, ρ) for one order α, in 60-digit arithmetic (an upper bound on δ)."""
    with mpmath.workdps(60):
        a, r, e = mpmath.mpf(alpha), mpmath.mpf(rho), mpmath.mpf(epsilon)
        return mpmath.exp((a - 1) * (a * r - e)) / (a - 1) * (1 - 1 / a) ** a


def zcdp_delta_cks(epsilon: float, rho: float) -> float:
    """δ of a ρ-zCDP mechanism at ε by the CKS conversion (infimum over α > 1)."""

    def log_delta(v: float) -> float:
        a = 1.0 + math.exp(v)
        return (a - 1.0) * (a * rho - epsilon) - math.log(a - 1.0) + a * math.log1p(-1.0 / a)

    x = np.linspace(-12.0, 12.0, 481)
    values = [log_delta(v) for v in x]
    i = int(np.argmin(values))
    res = optimize.minimize_scalar(
        log_delta, bounds=(x[max(i - 1, 0)], x[min(i + 1, len(x) - 1)]), method="bounded",
        options={"xatol": 1e-12},
    )
    return min(1.0, math.exp(min(res.fun, values[i])))


def zcdp_epsilon_bun_steinke(delta: float, rho: float) -> float:
    """ε = ρ + 2√(ρ log(1/δ)) (Bun & Steinke 2016, Prop. 1.3)."""
    return rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))


def zcdp_epsilon_exact_gaussian(delta: float, rho: float) -> float:
    """ε of the ρ-zCDP *Gaussian* mechanism at δ: its exact profile, μ = √(2ρ)."""
    return gaussian_epsilon(delta, math.sqrt(2.0 * rho))
