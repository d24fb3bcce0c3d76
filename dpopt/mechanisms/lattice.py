r"""Exact measurement on a lattice: measure exactly, post-process freely.

A Gaussian design whose noise is a sum of independent isotropic parts, Z = Σ_T B_T g_T with
g_T ~ N(0, s_T² I), is implemented without floating-point noise when every part can be
*measured* exactly: an integer matrix A_T that is L_T times the part's projection (L_T an integer)
gives y_T = A_T x + η_T from the integer counts x, η_T i.i.d. N_ℤ(0, σ_T²) with σ_T² ≥ L_T² s_T²
(a dyadic rational rounded up,
:func:`lattice_variance`), sampled exactly in integer arithmetic (CKS 2020, Algorithm 3). The
released numbers are computed from the integers y_T alone (and from public facts), in floating
point: post-processing, which no finite-precision attack on the noise can exploit, since no
floating-point number that depends on both the data and the noise is ever formed.

**Privacy (ρ-zCDP).** Neighbouring datasets shift every y_T by an integer vector Δ_T = A_T δ.
For independent discrete Gaussians with integer shifts the Rényi divergence of order α is at
most α Σ_T ‖Δ_T‖²/(2σ_T²) (Canonne, Kamath & Steinke 2020, Theorem 14). As Δ_T is L_T times
the continuous part's shift, this is the continuous design's ρ at the variances σ_T²/L_T² ≥ s_T²:
the continuous design's exact ρ-check, evaluated at those variances, certifies the implementation. Under (ε, δ) and
μ-GDP targets the continuous designs are calibrated on the Gaussian's exact profile, which the
discrete Gaussian does not inherit exactly; those targets keep the floating-point sampler and its
note (:data:`FLOATING_POINT_REASONS`).

References
----------
.. [1] C. Canonne, G. Kamath and T. Steinke, "The discrete Gaussian for differential privacy",
   NeurIPS 2020 (arXiv:2004.00010), Algorithm 3 and Theorem 14.
.. [2] I. Mironov, "On significance of the least significant bits for differential privacy",
   CCS 2012.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from dpopt.core.decimals import written
from dpopt.core.checks import Check
from dpopt.errors import DataError
from dpopt.mechanisms.integer_noise import dyadic_ceil
from dpopt.noise.discrete_gaussian import discrete_gaussian_moments
from dpopt.spec.models import Privacy

MAX_LATTICE_SIGMA2 = Fraction(2**30)
"""Largest lattice variance the exact sampler serves in int64 (:func:`~dpopt.noise.discrete_gaussian.sample_discrete_gaussian`)."""

MIN_LATTICE_SIGMA2 = Fraction(1, 2**9)
"""Smallest lattice variance served: below it the sampler's dyadic grid (denominators up to 2^30) rounds a variance
up by more than 2^-20 relative, and the discrete Gaussian is almost surely 0 (P(η ≠ 0) < 2e^{-256})."""

CHECK_VARIATES = 400_000
"""Discrete Gaussian variates the ``utility.sampler`` claim draws for a lattice measurement (at least
:data:`MIN_CHECK_DRAWS` draws; :func:`check_draws`)."""

MIN_CHECK_DRAWS = 200
"""Fewest draws of that claim (as for the Kronecker Laplace family): with 200 draws the 5-SE tolerance is estimated
to about 1/√(2·200) = 5% of itself."""

EXACT_TARGETS = ("zcdp",)
"""Targets whose continuous certificate carries over to the lattice measurement (CKS Theorem 14)."""

LARGE_SIGMA2 = 16
"""Above this lattice variance the discrete Gaussian's variance equals σ² in double precision: by
Poisson summation Var = σ²(1 − 4π²σ² Σ_k k² e^{−2π²σ²k²}/(1 + 2Σ_k e^{−2π²σ²k²})), and the
correction is below e^{−300} for σ² ≥ 16."""

EXACT_MEASUREMENT_NOTE = (
    "exact measurement on a lattice: each part of the noise is discrete Gaussian noise on integer "
    "measurements of the counts, sampled in integer arithmetic (Canonne, Kamath & Steinke 2020, Algorithm 3; "
    "ρ-zCDP by their Theorem 14); the released numbers are computed from those integers alone (post-processing), "
    "so the guarantee covers the numbers as computed. Randomness: the numpy Generator passed to release "
    "(dpopt release: AES-CTR CSPRNG keyed from OS entropy unless --insecure-seed). Not covered: timing (the "
    "sampler's running time depends on the noise drawn, not on the data)"
)


def lattice_variance(continuous: Fraction, scale: int) -> Fraction | None:
    """σ² on the lattice: the dyadic rational ≥ scale²·``continuous`` (:func:`~dpopt.mechanisms.integer_noise.dyadic_ceil`),
    or None when it is outside the exact sampler's range [:data:`MIN_LATTICE_SIGMA2`, :data:`MAX_LATTICE_SIGMA2`]."""
    target = Fraction(continuous) * scale * scale
    if target < MIN_LATTICE_SIGMA2:
        return None
    sigma2 = dyadic_ceil(target)
    return sigma2 if sigma2 <= MAX_LATTICE_SIGMA2 else None


def discrete_variance(sigma2: Fraction) -> float:
    """Var N_ℤ(0, σ²) (≤ σ², CKS Prop. 19): the series below :data:`LARGE_SIGMA2`, σ² above."""
    if sigma2 >= LARGE_SIGMA2:
        return float(sigma2)
    return discrete_gaussian_moments(float(sigma2))["second_moment"]


def exact_refusal(definition: str, integer_valued: bool) -> str | None:
    """Why the lattice measurement cannot implement a design (None when it can)."""
    if definition not in EXACT_TARGETS:
        return (f"a {definition} target is certified on the continuous Gaussian's exact profile, which the discrete "
                "Gaussian does not inherit exactly (only ρ-zCDP carries over, CKS Theorem 14)")
    if not integer_valued:
        return "the query's answers are not integer counts"
    return None


def check_draws(default: int, variates_per_draw: int) -> int:
    """Draws for the ``utility.sampler`` claim of a lattice measurement: at most :data:`CHECK_VARIATES` variates,
    at least :data:`MIN_CHECK_DRAWS` draws, never more than ``default``.

    The claim compares E‖Z‖² with the mean of ‖Z‖² within 5 standard errors estimated from the draws. ‖Z‖² of a
    draw sums ``variates_per_draw`` independent squared parts, so its relative standard deviation is about
    √(2/variates_per_draw) and the mean's about √(2/CHECK_VARIATES) = 0.22%: a sampler whose variance is off by
    1.2% fails. Above 2,000 variates a draw the floor of 200 draws holds more (all two-way marginals of ten
    attributes: 4,114 variates a draw, 0.82 M variates, the mean's relative standard deviation 0.16%). The exact
    sampler costs about 0.5–1 µs a variate, fifty times a floating-point normal, hence the cap.
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


def lattice_zcdp_check(l2_squared: Fraction, sigma2: Fraction, privacy: Privacy) -> Check:
    """i.i.d. N_ℤ(0, σ²) noise on integer answers whose neighbours differ by at most Δ₂ in l2: ρ = Δ₂²/(2σ²)
    (CKS 2020, Theorem 14), compared with the target in exact rational arithmetic."""
    reason = exact_refusal(privacy.definition, True)
    if reason is not None:
        return Check("privacy", "exact lattice measurement", False, reason)
    rho = Fraction(l2_squared) / (2 * sigma2)
    return Check("privacy", "exact rational check Δ₂²/(2σ_ℤ²) ≤ ρ (independent discrete Gaussians under integer "
                 "shifts; Canonne, Kamath & Steinke 2020, Theorem 14)", rho <= written(privacy.parameters["rho"]),
                 f"Δ₂²/(2σ_ℤ²) = {rho} ≈ {float(rho):.17g} vs ρ = {privacy.parameters['rho']} (σ_ℤ² = {sigma2})")
