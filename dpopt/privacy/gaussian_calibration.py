"""The Gaussian noise scale σ for a privacy target, and its exact check.

:func:`gaussian_sigma` calibrates, :func:`gaussian_privacy_check` certifies (exact rationals
for gdp and zcdp, 60-digit arithmetic for approx and pdp); every family that adds Gaussian
noise (and the convex programs that design a covariance) reads them here.
"""

from __future__ import annotations

import math
from fractions import Fraction

from dpopt.core.decimals import float_below, written
from dpopt.core.checks import Check
from dpopt.core.rounding import nudge_until
from dpopt.errors import CalibrationError
from dpopt.privacy.gaussian import gaussian_delta_mp, gaussian_sigma_approx
from dpopt.privacy.pdp import gaussian_pdp_bound_mp, gaussian_pdp_sigma
from dpopt.spec.models import Privacy


def gaussian_sigma(l2_squared: Fraction, privacy: Privacy) -> float:
    """The smallest σ (in floating point) that :func:`gaussian_privacy_check` accepts; under
    (ε, δ), within 3e-14 of it and certified by a rigorous enclosure instead (one
    high-precision evaluation in the usual case).

    gdp μ: σ = Δ₂/μ. zcdp ρ: σ = Δ₂/√(2ρ). approx (ε, δ): σ = Δ₂/μ*(ε, δ) with μ* the
    analytic-Gaussian threshold, confirmed by a rigorous enclosure
    (:func:`dpopt.privacy.gaussian.gaussian_sigma_approx`). pdp (ε, δ):
    Lemma 10 / Eq. 18 of Liu (2019) (:func:`dpopt.privacy.pdp.gaussian_pdp_sigma`).

    Raises
    ------
    CalibrationError
        For targets Gaussian noise cannot meet (pure ε) or out of numeric range.
    """
    definition, p = privacy.definition, privacy.parameters
    if definition == "gdp":
        mu = p["mu"]
    elif definition == "zcdp":
        mu = math.sqrt(2.0 * p["rho"])
    elif definition == "approx":
        return gaussian_sigma_approx(l2_squared, float_below(p["epsilon"]), float_below(p["delta"]))
    elif definition == "pdp":
        l2 = math.sqrt(float(l2_squared))
        mu = l2 / gaussian_pdp_sigma(float_below(p["epsilon"]), float_below(p["delta"]), l2)
    else:
        raise CalibrationError(f"Gaussian noise cannot meet a {definition} target")
    sigma = math.sqrt(float(l2_squared)) / mu
    if not (math.isfinite(sigma) and sigma > 0):
        raise CalibrationError(f"the Gaussian noise scale for this target is out of range (σ = {sigma})")
    return nudge_until(sigma, lambda s: gaussian_privacy_check(l2_squared, s, privacy).passed, up=True)


def gaussian_privacy_check(l2_squared: Fraction, sigma: float, privacy: Privacy) -> Check:
    """Check that Gaussian noise of scale σ meets the target for sensitivity Δ₂² exactly.

    gdp: Δ₂² ≤ μ²σ² and zcdp: Δ₂² ≤ 2ρσ², in exact rational arithmetic; approx:
    δ(ε; Δ₂/σ) ≤ δ with the analytic-Gaussian profile evaluated in 60 digits; pdp: Lemma 10's
    bound 2Φ(−(2εσ² − Δ₂²)/(2Δ₂σ)) ≤ δ in 60 digits.
    """
    definition, p = privacy.definition, privacy.parameters
    s = Fraction(sigma)
    if definition == "gdp":
        bound = written(p["mu"]) ** 2 * s * s
        return Check(
            "privacy",
            "exact rational check Δ₂² ≤ μ²σ² (Gaussian mechanism is exactly Δ₂/σ-GDP; Dong, Roth & Su 2022, Thm 2.7)",
            l2_squared <= bound,
            f"Δ₂/σ = {math.sqrt(float(l2_squared)) / sigma:.17g} vs μ = {p['mu']}",
        )
    if definition == "zcdp":
        bound = 2 * written(p["rho"]) * s * s
        return Check(
            "privacy",
            "exact rational check Δ₂²/(2σ²) ≤ ρ (Bun & Steinke 2016, Prop. 1.6)",
            l2_squared <= bound,
            f"Δ₂²/(2σ²) = {float(l2_squared) / (2 * sigma * sigma):.17g} vs ρ = {p['rho']}",
        )
    if definition == "approx":
        import mpmath  # imported where used (start-up of `dpopt verify`)

        with mpmath.workdps(60):
            mu = mpmath.sqrt(mpmath.mpf(l2_squared.numerator) / l2_squared.denominator) / mpmath.mpf(sigma)
            delta = gaussian_delta_mp(float_below(p["epsilon"]), mu)
        return Check(
            "privacy",
            "analytic-Gaussian profile δ(ε; Δ₂/σ) in 60-digit arithmetic (Balle & Wang 2018, Thm 8)",
            bool(delta <= float_below(p["delta"])),
            f"δ(ε={p['epsilon']}) = {mpmath.nstr(delta, 17)} vs δ = {p['delta']}",
        )
    if definition == "pdp":
        import mpmath  # imported where used (start-up of `dpopt verify`)

        level = gaussian_pdp_bound_mp(sigma, float_below(p["epsilon"]), l2_squared)
        return Check(
            "privacy",
            "Lemma 10 (Liu 2019): Pr(|L| > ε) ≤ 2Φ(−(2εσ² − Δ₂²)/(2Δ₂σ)) ≤ δ, 60-digit arithmetic, exact Δ₂²",
            bool(level <= float_below(p["delta"])),
            f"pDP level bound {mpmath.nstr(level, 17)} vs δ = {p['delta']}",
        )
    return Check("privacy", "Gaussian noise", False, f"Gaussian noise cannot meet a {definition} target")
