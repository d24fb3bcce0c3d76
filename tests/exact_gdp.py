"""ε of μ-GDP at δ, computed independently of dpopt (scipy's normal CDF and brentq), for the tests."""

from __future__ import annotations

import math

from scipy import optimize, stats


def balle_wang_epsilon(mu: float, delta: float) -> float:
    """ε of μ-GDP at δ: δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2) (Balle & Wang 2018, Thm 8), solved for ε."""
    def gap(e):
        return stats.norm.cdf(-e / mu + mu / 2) - math.exp(e) * stats.norm.cdf(-e / mu - mu / 2) - delta
    return optimize.brentq(gap, 0.0, 100.0, xtol=1e-12)


def cks_epsilon(rho: float, delta: float) -> float:
    """ε of ρ-zCDP at δ by Canonne, Kamath & Steinke 2020, Prop. 12: the infimum over α > 1 of
    αρ + (log(1/δ) + (α − 1) log(1 − 1/α) − log α)/(α − 1), minimised by scipy over log(α − 1)."""
    def eps(x):
        a = 1.0 + math.exp(x)
        return a * rho + (math.log(1.0 / delta) + (a - 1.0) * math.log1p(-1.0 / a) - math.log(a)) / (a - 1.0)
    return optimize.minimize_scalar(eps, bounds=(-20.0, 20.0), method="bounded", options={"xatol": 1e-12}).fun
