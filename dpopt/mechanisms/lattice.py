r"""Exact measurement on a lattice: measure exactly, post-process freely.

A Gaussian design whose noise is a sum of independent isotropic parts, Z = Σ_T B_T g_T with
g_T ~ N(0, s_T² I), is implemented without floating-point noise when every part can be
*measured* exactly: an integer matrix A_T that is L_T times the part's projection (L_T an integer)
gives y_T = A_T x + η_T from the integer counts x, η_T i.i.d. N_ℤ(0, σ_T²) with σ_T² ≥ L_T² s_T²
(a dyadic rational rounded up,
:func:`lattice_variance`), sampled exactly in integer arithmetic (:mod:`dpopt.noise.discrete_gaussian`). The
released numbers are computed from the integers y_T alone (and from public facts), in floating
point: post-processing, which no finite-precision attack on the noise can exploit, since no
floating-point number that depends on both the data and the noise is ever formed.

**Privacy (ρ-zCDP).** Neighbouring datasets shift every y_T by an integer vector Δ_T = A_T δ.
For independent discrete Gaussians with integer shifts the Rényi divergence of order α is at
most α Σ_T ‖Δ_T‖²/(2σ_T²) (Canonne, Kamath & Steinke 2020, Theorem 14). As Δ_T is L_T times
the continuous part's shift, this is the continuous design's ρ at the variances σ_T²/L_T² ≥ s_T²:
the continuous design's exact ρ-check, evaluated at those variances, certifies the implementation.

**Privacy (μ-GDP and (ε, δ)).** A shift of N_ℤ(0, σ²) by an integer Δ is (|Δ|·m)-GDP with the certified slope
m ≈ (1 + 1/(24σ²))/σ of :func:`~dpopt.privacy.discrete_gaussian_gdp.unit_shift_gdp`, and independent
coordinates tensorise: the measurement is μ-GDP with μ² the continuous design's Mahalanobis sensitivity at the
**effective variances** 1/m_T² (:func:`effective_variance`) instead of σ_T², hence (ε, δ_μ(ε))-DP by the
analytic-Gaussian profile. Under pDP the isotropic measurement is calibrated on the discrete law's exact level
(:mod:`dpopt.mechanisms.lattice_pdp`); the designs that release a function of y keep the floating-point sampler and
its note (pDP is not closed under post-processing).

References
----------
.. [1] C. Canonne, G. Kamath and T. Steinke, "The discrete Gaussian for differential privacy",
   NeurIPS 2020 (arXiv:2004.00010), Algorithm 1 and Theorem 14.
.. [2] I. Mironov, "On significance of the least significant bits for differential privacy",
   CCS 2012.
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache

import numpy as np

from dpopt.core.decimals import float_below, written
from dpopt.core.checks import Check
from dpopt.errors import DataError
from dpopt.mechanisms.integer_noise import dyadic_ceil, dyadic_ceil_fine
from dpopt.noise.discrete_gaussian import MAX_WIDE_SIGMA2, discrete_gaussian_moments
from dpopt.privacy.discrete_gaussian_gdp import MARGIN, MAX_SIGMA2, unit_shift_gdp
from dpopt.privacy.gaussian import gaussian_delta_mp, gaussian_epsilon
from dpopt.privacy.zcdp import zcdp_epsilon_cks
from dpopt.spec.models import Privacy
from dpopt.stats.lattice_inference import LatticeRegion, LatticeTest, lattice_region, lattice_test
from dpopt.stats.log_volume import VolumeTerms

MAX_WIDE_LATTICE_SIGMA2 = Fraction(MAX_WIDE_SIGMA2)
"""Largest lattice variance the exact sampler serves
(:func:`~dpopt.noise.discrete_gaussian.sample_discrete_gaussian`)."""

MAX_LATTICE_SIGMA2 = MAX_WIDE_LATTICE_SIGMA2
"""Largest lattice variance of the per-cell designs: the sampler's range. Their margins read the law of
:class:`~dpopt.noise.discrete_gaussian.DiscreteGaussianMarginal`, tabulated up to 2^30 and in closed form with
proven error bounds above (:mod:`dpopt.noise.discrete_gaussian_tail`), so nothing of size σ is formed."""

MIN_LATTICE_SIGMA2 = Fraction(1, 2**9)
"""Smallest lattice variance served: below it the sampler's dyadic grid (denominators up to 2^30) rounds a variance
up by more than 2^-20 relative, and the discrete Gaussian is almost surely 0 (P(η ≠ 0) < 2e^{-256})."""

CHECK_VARIATES = 400_000
"""Discrete Gaussian variates the ``utility.sampler`` claim draws for a lattice measurement (at least 20 draws;
:func:`check_draws`)."""

EXACT_TARGETS = ("zcdp", "gdp", "approx")
"""Targets the lattice measurement is certified for: ρ-zCDP (CKS Theorem 14), μ-GDP and (ε, δ) (the certified
slope, :mod:`dpopt.privacy.discrete_gaussian_gdp`)."""

GDP_TARGETS = ("gdp", "approx")
"""Targets certified at the effective variances 1/m² (:func:`effective_variance`)."""

LARGE_SIGMA2 = 16
"""Above this lattice variance the discrete Gaussian's variance equals σ² in double precision: by
Poisson summation Var = σ²(1 − 4π²σ² Σ_k k² e^{−2π²σ²k²}/(1 + 2Σ_k e^{−2π²σ²k²})), and the
correction is below e^{−300} for σ² ≥ 16."""

EXACT_MEASUREMENT_NOTE = (
    "exact measurement on a lattice: each part of the noise is discrete Gaussian noise on integer "
    "measurements of the counts, sampled in integer arithmetic (a step envelope inverted from uniform words, "
    "acceptance by Canonne, Kamath & Steinke 2020's Algorithm 1; "
    "ρ-zCDP by their Theorem 14; μ-GDP and (ε, δ) by the slope of the discrete Gaussian's trade-off function "
    "under integer shifts, certified per lattice variance); the released numbers are computed from those integers alone (post-processing), "
    "so the guarantee covers the numbers as computed. Randomness: the numpy Generator passed to release "
    "(dpopt release: AES-CTR CSPRNG keyed from OS entropy unless --insecure-seed). Not covered: timing (the "
    "sampler's running time depends on the noise drawn, not on the data)"
)


def lattice_variance(continuous: Fraction, scale: int, cap: Fraction = MAX_LATTICE_SIGMA2) -> Fraction | None:
    """σ² on the lattice: the dyadic rational ≥ scale²·``continuous`` (:func:`~dpopt.mechanisms.integer_noise.dyadic_ceil`),
    or None when it is outside [:data:`MIN_LATTICE_SIGMA2`, ``cap``] (:data:`MAX_LATTICE_SIGMA2` by default; at most
    :data:`MAX_WIDE_LATTICE_SIGMA2`, the sampler's range)."""
    target = Fraction(continuous) * scale * scale
    if target < MIN_LATTICE_SIGMA2:
        return None
    sigma2 = dyadic_ceil(target)
    return sigma2 if sigma2 <= min(cap, MAX_WIDE_LATTICE_SIGMA2) else None


GDP_START_MIN = 4
"""Smallest wanted variance from which :func:`target_lattice_variance` starts at the predicted ratio
:func:`predicted_gdp_ratio` (σ ≥ 2: its series' terms shrink by 1/(4σ²) ≤ 1/16 and the normaliser's correction
θ ≤ 3e^{−2π²σ²} < e^{−78}); below, it starts at the wanted variance itself."""


def predicted_gdp_ratio(wanted: Fraction) -> Fraction:
    r"""A start for :func:`target_lattice_variance`: σ²/(1/m²) = (σm)² predicted for the certified slope
    m = (1 + η)·d_0 of N_ℤ(0, σ²) (η = :data:`~dpopt.privacy.discrete_gaussian_gdp.MARGIN`; the largest increment
    is d_0 = 2z_1) at the σ² ≈ ``wanted``·(σm)² whose effective variance is ``wanted``.

    d_0 = 2Φ⁻¹(½ + 1/(2Z)) with Z = σ√(2π)(1 + θ), θ negligible (Poisson summation, CKS 2020 §2.2), and the
    probit's Taylor series at ½, Φ⁻¹(½ + p) = √(2π)(p + πp³/3 + 7π²p⁵/30 + …) with positive coefficients, at
    √(2π)p = a = 1/(2σ): z_1 = a + a³/6 + 7a⁵/120 + …, so σd_0 = 1 + 1/(24σ²) + 7/(1920σ⁴) + O(σ⁻⁶), the terms
    left out positive. With R(v) = (1 + η)²(1 + 1/(24v) + 7/(1920v²))², s = ``wanted``·R(``wanted``) is at or
    above the σ² sought (R decreases), so R(s) is at or below its ratio up to the dyadic rounding of that σ²
    (2⁻²¹ relative, which moves R by less than 2⁻²⁴/s); lowered by that and by 10⁻¹⁰ (above the float64 error of
    the certified d_0, :func:`~dpopt.privacy.discrete_gaussian_gdp.unit_shift_gdp`), the start is at or just
    below the smallest dyadic σ² the certification accepts, and usually that σ² itself (one certification per
    variance instead of two)."""

    def ratio(v: Fraction) -> Fraction:
        sigma_d0 = 1 + 1 / (24 * v) + Fraction(7, 1920) / (v * v)
        return (1 + Fraction(MARGIN)) ** 2 * sigma_d0 * sigma_d0

    s = Fraction(wanted) * ratio(Fraction(wanted))
    return ratio(s) * (1 - Fraction(1, 10**10) - 1 / (2**24 * s))


def target_lattice_variance(continuous: Fraction, scale: int, target: str,
                            cap: Fraction = MAX_LATTICE_SIGMA2) -> Fraction | None:
    """σ² on the lattice for a target: :func:`lattice_variance` under ρ-zCDP; under μ-GDP and (ε, δ) a dyadic
    σ² whose effective variance (:func:`effective_variance`) is at least scale²·``continuous``: from
    :data:`GDP_START_MIN` on it starts at the wanted variance times :func:`predicted_gdp_ratio` (about
    1 + 2·10⁻⁴ + 1/(12σ²)), below at the wanted variance, and is rounded up by the certified ratio until it holds,
    on the grid of :func:`~dpopt.mechanisms.integer_noise.dyadic_ceil_fine`. None outside [2⁻⁹, ``cap``]."""
    sigma2 = lattice_variance(continuous, scale, cap)
    if sigma2 is None or target not in GDP_TARGETS:
        return sigma2
    wanted = Fraction(continuous) * scale * scale
    if wanted >= GDP_START_MIN:
        sigma2 = dyadic_ceil_fine(wanted * predicted_gdp_ratio(wanted))
    for _ in range(8):
        variance = effective_variance(sigma2, target)
        if variance is None:
            return None
        if variance >= wanted:
            return sigma2
        sigma2 = dyadic_ceil_fine(sigma2 * wanted / variance)
    return None


def discrete_variance(sigma2: Fraction) -> float:
    """Var N_ℤ(0, σ²) (≤ σ², CKS Prop. 19): the series below :data:`LARGE_SIGMA2`, σ² above."""
    if sigma2 >= LARGE_SIGMA2:
        return float(sigma2)
    return discrete_gaussian_moments(float(sigma2))["second_moment"]


def exact_refusal(definition: str, integer_valued: bool) -> str | None:
    """Why the lattice measurement cannot implement a design (None when it can)."""
    if definition == "pdp":
        return ("pDP is certified on the lattice only for x + η released as it is or projected on the sensitivity "
                "span (the gaussian, projected_gaussian and discrete_gaussian families): pDP is not closed under "
                "post-processing, and this design releases another function of the measurement")
    if definition not in EXACT_TARGETS:
        return (f"a {definition} target is certified on the continuous Gaussian's exact profile, which the discrete "
                "Gaussian does not inherit (ρ-zCDP, μ-GDP and (ε, δ) carry over)")
    if not integer_valued:
        return "the query's answers are not integer counts"
    return None


def effective_variance(sigma2: Fraction, definition: str) -> Fraction | None:
    """The continuous variance at which the design's exact privacy check certifies N_ℤ(0, σ²) noise under integer
    shifts: σ² for ρ-zCDP (CKS Theorem 14), 1/m² for μ-GDP and (ε, δ) (m the certified slope,
    :func:`~dpopt.privacy.discrete_gaussian_gdp.unit_shift_gdp`); None when the slope is not certified
    (σ² above :data:`~dpopt.privacy.discrete_gaussian_gdp.MAX_SIGMA2`)."""
    if definition not in GDP_TARGETS:
        return Fraction(sigma2)
    gdp = unit_shift_gdp(Fraction(sigma2))
    return None if gdp is None else gdp.effective_variance


GDP_RANGE_REFUSAL = (f"a lattice variance is above {MAX_SIGMA2} (units of the lattice), where the discrete "
                     "Gaussian's GDP slope is not certified")


def lattice_privacy_check(mu_squared: Fraction, privacy: Privacy, how: str) -> Check:
    """The target checked from μ² = the continuous design's Mahalanobis sensitivity at :func:`effective_variance`
    (``how`` says how it was computed): ρ = μ²/2 (zCDP, CKS Theorem 14), μ² ≤ μ_target² (GDP), or the
    analytic-Gaussian δ(ε; μ) in 60 digits ((ε, δ)), all exact or rigorous."""
    reason = exact_refusal(privacy.definition, True)
    if reason is not None:
        return Check("privacy", "exact lattice measurement", False, reason)
    p = privacy.parameters
    if privacy.definition == "zcdp":
        rho = Fraction(mu_squared) / 2
        return Check("privacy", f"exact rational check μ²/2 ≤ ρ, μ² = {how} at the lattice variances σ_ℤ² "
                     "(independent discrete Gaussians under integer shifts; Canonne, Kamath & Steinke 2020, "
                     "Theorem 14)", rho <= written(p["rho"]),
                     f"μ²/2 = {rho} ≈ {float(rho):.17g} vs ρ = {p['rho']}")
    method = (f"μ² = {how} at the effective variances 1/m² of the lattice variances (m the certified GDP slope of "
              "N_ℤ(0, σ_ℤ²) under integer shifts; trade-off functions tensorise, Dong, Roth & Su 2022, Prop. 2.8)")
    if privacy.definition == "gdp":
        return Check("privacy", "exact rational check μ² ≤ μ_target², " + method,
                     Fraction(mu_squared) <= written(p["mu"]) ** 2,
                     f"μ = {math.sqrt(float(mu_squared)):.17g} vs μ = {p['mu']}")
    import mpmath  # imported where used (start-up of `dpopt verify`)

    with mpmath.workdps(60):
        mu = mpmath.sqrt(mpmath.mpf(Fraction(mu_squared).numerator) / Fraction(mu_squared).denominator)
        delta = gaussian_delta_mp(float_below(p["epsilon"]), mu)
    return Check("privacy", "analytic-Gaussian profile δ(ε; μ) in 60-digit arithmetic (Balle & Wang 2018, Thm 8), "
                 + method, bool(delta <= float_below(p["delta"])),
                 f"μ = {mpmath.nstr(mu, 17)}, δ(ε={p['epsilon']}) = {mpmath.nstr(delta, 17)} vs δ = {p['delta']}")


MIN_CHECK_DRAWS = 20
"""Fewest draws of the ``utility.sampler`` claim of a lattice measurement (:func:`check_draws`)."""


def check_draws(default: int, variates_per_draw: int) -> int:
    """Draws for the ``utility.sampler`` claim of a lattice measurement: :data:`CHECK_VARIATES` variates, at
    least :data:`MIN_CHECK_DRAWS` draws, never more than ``default``.

    The claim compares E‖Z‖² with the mean of ‖Z‖² within 5 standard errors estimated from the draws. ‖Z‖² of a
    draw sums ``variates_per_draw`` independent squared parts, so its relative standard deviation is about
    √(2/variates_per_draw) and the mean's about √(2/(draws·variates_per_draw)) ≤ √(2/CHECK_VARIATES) = 0.22%:
    a sampler whose variance is off by 1.2% fails. With n ≥ 20 draws the standard error is estimated from at
    least 19 degrees of freedom: a correct sampler fails with probability P(|t₁₉| > 5) < 10⁻⁴ (the seed is
    fixed, so the outcome is reproducible). Memory does not grow with the cells (the draws are batched,
    :data:`~dpopt.mechanisms.base.MONTE_CARLO_BATCH`); time is about 20 variates a cell at most.
    """
    return min(default, max(MIN_CHECK_DRAWS, CHECK_VARIATES // max(1, variates_per_draw)))


def integer_answers(values: np.ndarray) -> np.ndarray:
    """The true answers as int64 (a lattice measurement starts from exact integer counts).

    Raises
    ------
    DataError
        An answer that is not a whole number or is beyond 2^52 in magnitude.
    """
    values = np.asarray(values, dtype=float)
    if not np.all(np.isfinite(values)) or np.any(values != np.round(values)) or np.any(np.abs(values) > 2.0**52):
        raise DataError("the exact (lattice) release needs whole-number answers below 2^52; "
                        "got a fraction or a larger value (set `sampler: floating_point` to use the floating-point noise)")
    return values.astype(np.int64)


def lattice_privacy_summary(l2_squared: Fraction, sigma2: Fraction, target: str) -> dict:
    """The privacy summary of i.i.d. N_ℤ(0, σ²) noise on integer answers of l2 sensitivity Δ₂: μ = Δ₂·m under
    μ-GDP and (ε, δ) (m the certified slope, :func:`effective_variance`), ρ = Δ₂²/(2σ²) under ρ-zCDP."""
    if target in GDP_TARGETS:
        mu = math.sqrt(float(Fraction(l2_squared) / effective_variance(sigma2, "gdp")))
        return {"mu": mu, "rho": mu * mu / 2.0,
                "epsilon_at_delta": {f"{delta:g}": gaussian_epsilon(delta, mu) for delta in (1e-5, 1e-6, 1e-10)},
                "conversion": "exact: μ = Δ₂·m on the lattice (m the certified GDP slope of N_ℤ(0, σ_ℤ²) under "
                              "integer shifts), analytic-Gaussian (ε, δ) profile"}
    rho = Fraction(l2_squared) / (2 * sigma2)
    return {"rho": float(rho), "rho_exact": str(rho),
            "epsilon_at_delta": {f"{delta:g}": zcdp_epsilon_cks(delta, float(rho))[0] for delta in (1e-5, 1e-6, 1e-10)},
            "conversion": "exact: ρ = Δ₂²/(2σ_ℤ²) on the lattice (CKS 2020, Thm 14); (ε, δ) by the CKS "
                          "conversion (Prop. 12)"}


def lattice_isotropic_check(l2_squared: Fraction, sigma2: Fraction, privacy: Privacy) -> Check:
    """i.i.d. N_ℤ(0, σ²) noise on integer answers whose neighbours differ by at most Δ₂ in l2: μ² = Δ₂²/v with
    v = :func:`effective_variance` (σ² for zCDP), checked by :func:`lattice_privacy_check`."""
    variance = effective_variance(sigma2, privacy.definition)
    if variance is None:
        return Check("privacy", "exact lattice measurement", False, GDP_RANGE_REFUSAL)
    return lattice_privacy_check(Fraction(l2_squared) / variance, privacy, f"Δ₂²/v (σ_ℤ² = {sigma2}, v = {variance})")


INFERENCE_METRICS = ("ci_volume", "test_power")
"""Metrics of inference on the release, derived on a lattice from the discrete law itself
(:mod:`dpopt.stats.lattice_inference`)."""


@lru_cache(maxsize=32)
def _inference(metric: str, sigma2s: tuple[Fraction, ...], alpha: float,
               shift: tuple[float, ...] | None) -> LatticeRegion | LatticeTest | str:
    """:func:`lattice_inference` on hashable arguments (the cache's key)."""
    if metric == "ci_volume":
        found = lattice_region(sigma2s, alpha)
        if found is not None and found.radius == 0:
            return "the noise is 0 with probability at least 1 − α: the region is a point, of volume 0"
    elif any(a != round(a) for a in shift):
        return ("the alternative is not a whole-number shift of the counts (the discrete law's test is of integer "
                "shifts)")
    else:
        found = lattice_test(sigma2s, shift, alpha)
    return found if found is not None else f"the exact law of the {metric} statistic exceeds its convolution budget"


def lattice_inference(metric: str, sigma2s, alpha: float, shift=None) -> LatticeRegion | LatticeTest | str:
    """The confidence region (``ci_volume``) or the test of ``shift`` (``test_power``) at level α for independent
    N_ℤ(0, σ_i²) noise on the noisy coordinates, from the exact law (:mod:`dpopt.stats.lattice_inference`), or why
    it cannot be derived (a string). Cached: a design, its certificate and ``dpopt verify`` ask for the same."""
    key = None if shift is None else tuple(float(a) for a in shift)
    return _inference(metric, tuple(Fraction(s) for s in sigma2s), float(alpha), key)


def inference_terms(found: LatticeRegion | LatticeTest, z: np.ndarray, shift=None) -> np.ndarray | VolumeTerms:
    """Per-draw Monte Carlo terms of the noise draws ``z`` (noisy coordinates, whole numbers) whose mean is the
    predicted metric: the test's rejection probability at shift + z, or 1{Q ≤ r}/coverage in units of the region's
    volume (:class:`~dpopt.stats.log_volume.VolumeTerms`: finite beyond the double range; mean: the volume times
    P(Q ≤ r)/coverage, ≥ the volume; the draws check the coverage)."""
    eta = np.rint(np.asarray(z, dtype=float)).astype(np.int64)
    if isinstance(found, LatticeTest):
        whole_shift = np.rint(np.asarray(shift, dtype=float)).astype(np.int64)
        t = (eta + whole_shift) @ np.array(found.weights, dtype=np.int64)
        return (t > found.critical) + found.randomization * (t == found.critical)
    q = eta.astype(float) ** 2 @ (1.0 / np.array([float(s) for s in found.sigma2s]))
    return VolumeTerms(found.log_volume, (q <= float(found.radius)) / found.coverage)
