"""ε of μ-GDP at δ, computed independently of dpopt (scipy's normal CDF and brentq), for the tests."""

from __future__ import annotations

import math

from scipy import optimize, stats


def balle_wang_epsilon(mu: float, delta: float) -> float:
    """ε of μ-GDP at δ: δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2) (Balle & Wang 2018, Thm 8), solved for ε."""
    def gap(e):
        return stats.norm.cdf(-e / mu + mu / 2) - math.exp(e) * stats.norm.cdf(-e / mu - mu / 2) - delta
    return optimize.brentq(gap, 0.0, 100.0, xtol=1e-12)
