r"""The discrete Gaussian noise of ``gaussian_threshold`` counts: N_ℤ(0, σ²) on the integer counts, (ε, δ) on keys
both neighbours hold.

A person moves the vector of counts by an integer vector of l2 norm ≤ Δ₂ (:func:`dpopt.sensitivity.person.table_norms`).
Two routes certify (ε, δ) for i.i.d. N_ℤ(0, σ²) noise under such shifts, σ² a dyadic rational:

- **the certified GDP slope** (σ² ≤ :data:`~dpopt.privacy.discrete_gaussian_gdp.MAX_SIGMA2`): a shift by an integer
  vector v is ‖v‖₂·m-GDP (m the slope of :func:`~dpopt.privacy.discrete_gaussian_gdp.unit_shift_gdp`; trade-off
  functions tensorise), so the noise is (ε, δ(ε; μ))-DP with μ = Δ₂·m and δ the analytic-Gaussian profile (Balle &
  Wang 2018). σ² is the dyadic rational whose effective variance 1/m² is at least the continuous Gaussian's σ² for
  (ε, δ) (:func:`dpopt.mechanisms.lattice.target_lattice_variance`);
- **ρ-zCDP** beyond that range: ρ = Δ₂²/(2σ²) (Canonne, Kamath & Steinke 2020, Theorem 14), (ε, δ) by their
  conversion (Proposition 12, :func:`dpopt.privacy.zcdp.zcdp_epsilon_cks`). σ² = Δ₂²/(2ρ) rounded up to a dyadic
  rational, ρ the largest (to 10⁻⁶ relative) whose conversion meets (ε, δ).
"""

from __future__ import annotations

import math
from fractions import Fraction

from dpopt._lazy import lazy_module
from dpopt.core.decimals import float_below
from dpopt.errors import CalibrationError
from dpopt.mechanisms.lattice import effective_variance, lattice_variance, target_lattice_variance
from dpopt.privacy.gaussian import gaussian_delta_mp, gaussian_sigma_approx
from dpopt.privacy.zcdp import zcdp_epsilon_cks

mpmath = lazy_module("mpmath")

ROUTES = ("gdp_slope", "zcdp")
"""How a ``gaussian_threshold`` noise block is certified (module docstring)."""


def _float_above(x: Fraction) -> float:
    """The least double ≥ x."""
    value = float(x)
    return value if Fraction(value) >= x else math.nextafter(value, math.inf)


def _zcdp_epsilon(l2_squared: Fraction, sigma2: Fraction, delta: float) -> float:
    """ε at δ of ρ = Δ₂²/(2σ²) (ρ rounded up to a double) by the CKS conversion."""
    return zcdp_epsilon_cks(delta, _float_above(Fraction(l2_squared) / (2 * sigma2)))[0]


def counts_noise(name: str, l2_squared: Fraction, epsilon: object, delta: float) -> dict:
    """The noise block: ``family``, ``sigma2`` (a dyadic rational, as text), ``route``, ``design_sigma`` (the
    continuous Gaussian's σ for (ε, δ) on Δ₂).

    Raises
    ------
    CalibrationError
        No σ² within the exact sampler's range (naming the release).
    """
    eps = float_below(epsilon)
    sigma = gaussian_sigma_approx(l2_squared, eps, delta)
    sigma2 = target_lattice_variance(Fraction(sigma) ** 2, 1, "approx")
    route = "gdp_slope"
    if sigma2 is None:
        route = "zcdp"
        low, high = 0.0, float(Fraction(l2_squared)) / (2 * sigma * sigma)  # the continuous ρ: an upper bound
        while high - low > 1e-6 * high:
            mid = (low + high) / 2
            low, high = (mid, high) if zcdp_epsilon_cks(delta, mid)[0] <= eps else (low, mid)
        sigma2 = None if low == 0 else lattice_variance(Fraction(l2_squared) / (2 * Fraction(low)), 1)
        if sigma2 is not None and _zcdp_epsilon(l2_squared, sigma2, delta) > eps:
            sigma2 = None
    if sigma2 is None:
        raise CalibrationError(f"{name}: the discrete Gaussian's variance σ² ≈ {sigma ** 2:.6g} is outside the exact "
                               "sampler's range")
    return {"family": "discrete_gaussian", "sigma2": str(sigma2), "route": route, "design_sigma": sigma}


def counts_noise_check(l2_squared: Fraction, noise: dict, epsilon: object) -> tuple[bool, mpmath.mpf, str]:
    """Whether the recorded noise meets (ε, ``noise["delta"]``) on the recorded route, the δ it spends at ε, and
    how (re-derived from Δ₂² and σ² alone)."""
    sigma2, eps = Fraction(noise["sigma2"]), float_below(epsilon)
    if noise["route"] == "zcdp":
        spent = _zcdp_epsilon(l2_squared, sigma2, noise["delta"])
        rho = Fraction(l2_squared) / (2 * sigma2)
        return (spent <= eps, mpmath.mpf(noise["delta"]),
                f"discrete Gaussian N_ℤ(0, {sigma2}) under integer shifts: ρ = Δ₂²/(2σ²) = {float(rho):.10g} (CKS 2020, "
                f"Thm 14), ε(δ = {noise['delta']!r}) = {spent!r} ≤ {epsilon!r} by the CKS conversion (Prop. 12)")
    variance = effective_variance(sigma2, "approx")
    if variance is None:
        return False, mpmath.mpf(1), f"σ_ℤ² = {sigma2}: the discrete Gaussian's GDP slope is not certified there"
    mu_squared = Fraction(l2_squared) / variance
    with mpmath.workdps(60):
        mu = mpmath.sqrt(mpmath.mpf(mu_squared.numerator) / mu_squared.denominator)
    spent = gaussian_delta_mp(eps, mu)
    return (bool(spent <= noise["delta"]), spent,
            f"discrete Gaussian N_ℤ(0, {sigma2}) under integer shifts: μ = Δ₂·m = {mpmath.nstr(mu, 8)} (m the certified "
            f"GDP slope, effective variance 1/m² = {float(variance):.10g}; Δ₂² exact); analytic Gaussian (Balle & "
            f"Wang 2018) in 60 digits: δ(ε = {epsilon!r}) = {mpmath.nstr(spent, 8)} ≤ {noise['delta']!r}")
