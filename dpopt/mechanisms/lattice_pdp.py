r"""The isotropic Gaussian on counts under (ε, δ)-pDP, measured exactly: y = x + η, η i.i.d. N_ℤ(0, σ_ℤ²).

The continuous design's σ is Liu (2019)'s Lemma 10, a bound on P[|L| > ε]; the lattice measurement is calibrated on
the exact level of the discrete law instead (:mod:`dpopt.privacy.discrete_gaussian_pdp`: the loss is a function of
the integer ⟨η, v⟩, whose law is a convolution of scaled discrete Gaussians, summed in arb per move pattern and
maximised over the listed moves). σ_ℤ² is the dyadic σ² (21 bits, the sampler's grid) found by bisection from
the continuous σ² (:func:`~dpopt.privacy.discrete_gaussian_pdp.pattern_pdp_sigma2`: comparisons on double-precision
levels, exact ones where those are too close to δ, every pattern's exact level at its end), and ``dpopt verify``
re-evaluates the level at the recorded σ_ℤ². The lattice measurement is used whatever its variance against the
continuous design's; the mechanism states that ratio (``lattice_cost_ratio`` and ``exact_cost``).

**Moves not derived.** A person's moves on a large marginal workload may be too many to find their patterns
(:mod:`dpopt.sensitivity.person_patterns` counts them first against its budgets), but the space still knows its exact
l2 sensitivity n = max ‖v‖² (an integer: the moves are integer vectors of a counting query). The sub-Gaussian bound
of :func:`~dpopt.privacy.discrete_gaussian_pdp.norm_pdp_level` (Canonne, Kamath & Steinke 2020, Cor. 9, and
Chernoff) is increasing in ‖v‖² on ‖v‖² ≤ 2εσ², so its value at n bounds δ(v) for every move: σ_ℤ² is calibrated
on it (:func:`pdp_norm_variance`, the same dyadic grid and search) and ``dpopt verify`` re-evaluates it whenever the
re-derived space states no patterns. It is an upper bound of the exact level, so it usually costs variance against
Lemma 10's σ² (17% more variance at ε = 1, δ = 10⁻⁶, max ‖v‖² = 216: the Chernoff bound lacks the Gaussian
tail's 1/x factor); the cost is stated as above.

The level is of y itself: pDP is not closed under post-processing (the loss of a function of y is not the loss of
y in general), so the families measured this way release x + η as it is (``gaussian``, ``discrete_gaussian``) or
its projection on the span V of the sensitivity space (``projected_gaussian``), whose loss is that of y:

**Projection keeps the loss.** Let w = P_V η (the released noise) and Δ = x' − x ∈ ℤ^d ∩ V a move. The fibre of w is
{w + u : u ∈ V^⊥, w + u ∈ ℤ^d}, and ‖w + u‖² = ‖w‖² + ‖u‖², so

.. math:: P(P_V\eta = w) \propto e^{-\|w\|^2/2\sigma^2}\,\Theta(w), \qquad
          \Theta(w) = \sum_{u \in V^\perp \cap (\mathbb Z^d - w)} e^{-\|u\|^2/2\sigma^2},

and Θ(w − Δ) = Θ(w) since ℤ^d − w + Δ = ℤ^d − w. The loss at the release x + w is therefore
L = (‖w − Δ‖² − ‖w‖²)/(2σ²) = (‖Δ‖² − 2⟨η, Δ⟩)/(2σ²) (⟨w, Δ⟩ = ⟨η, Δ⟩ as Δ ∈ V): the loss of y, a function of
the same integer ⟨η, Δ⟩, with the same law. The release computes P_V y in floating point: distinct points of the
lattice P_V ℤ^d differ by at least 1/D in some coordinate (D the denominator of P_V's entries; 1/2 for the sum-zero
span, whose points differ by non-constant integer vectors less their mean), so the computed release is an injective
function of P_V y, with its loss, while the projection's rounding error stays below half that separation (counts
far below 2⁵³/(d·D)); beyond, the computed value is not covered. ``james_stein`` (a non-injective shrinkage of P_V y) keeps the continuous design under pDP.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from dpopt.core.checks import Check
from dpopt.core.decimals import written
from dpopt.errors import CalibrationError
from dpopt.mechanisms.integer_noise import dyadic_ceil, move_patterns, vector_patterns
from dpopt.mechanisms.lattice import MAX_LATTICE_SIGMA2, MIN_LATTICE_SIGMA2
from dpopt.privacy.discrete_gaussian_pdp import norm_pdp_level, pattern_pdp_sigma2, pdp_sigma2, shift_range_level, \
    worst_pdp_level
from dpopt.sensitivity.space import SensitivitySpace
from dpopt.spec.models import Privacy


def _patterns(space: SensitivitySpace | np.ndarray) -> list[tuple[int, ...]]:
    """The move patterns of a space's listed moves, or of integer shift vectors (the rows of an array: a decimal
    lattice's D·WΔ)."""
    patterns = vector_patterns(space) if isinstance(space, np.ndarray) else move_patterns(space)
    if patterns is None:
        raise CalibrationError("the neighbouring differences are not listed integer vectors, nor their move patterns "
                               "derived (the lattice pDP level is summed per move pattern; the sensitivity method "
                               "says how the space was derived)")
    return patterns


def norm_bound(space: SensitivitySpace | np.ndarray) -> Fraction | None:
    """n = max ‖v‖² when the pDP level is bounded on it alone (module docstring: moves not derived): a space whose
    patterns are not derived and whose moves are not listed (too many), of integer l2 sensitivity squared (the moves
    of a counting query, the callers' scope); None when the patterns are read (derived, or from the listed moves, or
    the integer shift vectors of an array) or the l2 sensitivity is not an integer (listed moves that are not integer
    vectors keep :func:`_patterns`'s refusal)."""
    if isinstance(space, np.ndarray) or space.stated_patterns() is not None:
        return None
    if space.complete and space.listed() is not None:
        return None
    norm2 = Fraction(space.l2_squared)
    return norm2 if norm2 > 0 and norm2.denominator == 1 else None


def _in_range(sigma2: Fraction) -> Fraction:
    if not MIN_LATTICE_SIGMA2 <= sigma2 <= MAX_LATTICE_SIGMA2:
        raise CalibrationError(f"the lattice variance {float(sigma2):.6g} is outside the exact sampler's range "
                               "(2^-9 to 2^60)")
    return sigma2


def pdp_lattice_variance(space: SensitivitySpace | np.ndarray, privacy: Privacy, sigma: float) -> Fraction:
    """The dyadic σ_ℤ² whose exact pDP level on the listed moves of ``space`` (or on the integer shift vectors of an
    array's rows) is at most δ, searched from the continuous design's σ² (module docstring).

    Raises
    ------
    CalibrationError
        The moves are not listed integer vectors, no σ² meets the target, or σ_ℤ² is outside the sampler's range.
    """
    target = privacy.parameters
    return _in_range(pattern_pdp_sigma2(_patterns(space), written(target["epsilon"]), written(target["delta"]),
                                        Fraction(sigma) ** 2, dyadic_ceil))


def pdp_norm_variance(l2_squared: Fraction, privacy: Privacy, sigma: float) -> Fraction:
    """The dyadic σ_ℤ² whose sub-Gaussian pDP bound at n = ``l2_squared`` = max ‖v‖²
    (:func:`~dpopt.privacy.discrete_gaussian_pdp.norm_pdp_level`, a bound on δ(v) for every move with ‖v‖² ≤ n) is
    at most δ, searched from the continuous design's σ² (the bound is nonincreasing in σ², so the search's grid point
    is the smallest that passes, to its bisection's resolution).

    Raises
    ------
    CalibrationError
        No σ² meets the target, or σ_ℤ² is outside the sampler's range.
    """
    target = privacy.parameters
    epsilon = written(target["epsilon"])
    return _in_range(pdp_sigma2(lambda s2: norm_pdp_level(s2, l2_squared, epsilon), written(target["delta"]),
                                Fraction(sigma) ** 2, dyadic_ceil))


def pdp_lattice_sigma2(space: SensitivitySpace | np.ndarray, privacy: Privacy, sigma: float) -> Fraction:
    """The pDP lattice variance of ``space``: :func:`pdp_norm_variance` at its l2 sensitivity when its moves are
    neither listed nor their patterns derived (:func:`norm_bound`), else the exact level per move pattern
    (:func:`pdp_lattice_variance`).

    Raises
    ------
    CalibrationError
        As :func:`pdp_lattice_variance` or :func:`pdp_norm_variance`.
    """
    bound = norm_bound(space)
    if bound is not None:
        return pdp_norm_variance(bound, privacy, sigma)
    return pdp_lattice_variance(space, privacy, sigma)


def sum_pdp_variance(shift: int, privacy: Privacy, sigma: float) -> Fraction:
    """The dyadic σ_ℤ² of a lattice sum whose neighbours move N by any integer up to Δ_u = ``shift``: its pDP level
    over all those moves (:func:`~dpopt.privacy.discrete_gaussian_pdp.shift_range_level`: δ(Δ_u), the worst,
    when Δ_u² ≤ 2εσ_ℤ²) is at most δ, searched from the continuous design's σ² in units (``sigma``).

    Raises
    ------
    CalibrationError
        No σ² meets the target, the box law is too large, or σ_ℤ² is outside the sampler's range.
    """
    target = privacy.parameters
    epsilon = written(target["epsilon"])
    return _in_range(pdp_sigma2(lambda s2: shift_range_level(s2, shift, epsilon), written(target["delta"]),
                                Fraction(sigma) ** 2, dyadic_ceil))


def lattice_sum_pdp_check(units: SensitivitySpace, sigma2: Fraction, privacy: Privacy) -> Check:
    """The pDP check of N + η, η ~ N_ℤ(0, σ²), on a lattice sum whose one-dimensional integer space ``units`` moves
    N by any integer up to Δ_u = its l∞ norm (:func:`~dpopt.privacy.discrete_gaussian_pdp.shift_range_level`)."""
    what = ("pDP level of the discrete Gaussian on a lattice sum: every integer move |v| ≤ Δ_u, the worst v = Δ_u "
            "when Δ_u² ≤ 2εσ² (the intervals {η : |L| ≤ ε} = [−εσ²/v − v/2, εσ²/v − v/2] are nested for "
            "v ≤ √(2εσ²)); δ(Δ_u) = P[η > εσ²/Δ_u − Δ_u/2] + P[η > εσ²/Δ_u + Δ_u/2] summed on the box in 128-bit "
            "arb arithmetic plus a proven tail bound, the thresholds in exact rationals")
    if privacy.definition != "pdp" or units.dimension != 1:
        return Check("privacy", what, False, f"calibrated for one pDP lattice sum, not {privacy.definition} on "
                     f"{units.dimension} coordinates")
    target = privacy.parameters
    shift = int(units.linf)
    try:
        level = shift_range_level(Fraction(sigma2), shift, written(target["epsilon"]))
    except CalibrationError as exc:
        return Check("privacy", what, False, str(exc))
    return Check("privacy", what, level <= written(target["delta"]),
                 f"σ_ℤ² = {sigma2}, Δ_u = {shift}: δ ≤ {float(level):.12g} vs δ = {target['delta']}"
                 + ("" if shift * shift <= 2 * written(target["epsilon"]) * Fraction(sigma2) else
                    " (Δ_u² > 2εσ²: the level is bounded by 1)"))


def pdp_lattice_design(space: SensitivitySpace | np.ndarray, privacy: Privacy,
                       sigma: float) -> tuple[Fraction | None, str | None]:
    """The lattice variance of the isotropic design N(0, σ²I) (:func:`pdp_lattice_sigma2`: the exact level per move
    pattern, or the sub-Gaussian bound at max ‖v‖² when the moves are not derived) and None, or None and why there
    is none: listed moves that are not integer vectors, or the sampler's range. Its cost, Var N_ℤ(0, σ_ℤ²)/σ²
    (usually below 1 on the patterns: Lemma 10 bounds the level from above; above 1 on the bound), is stated by the
    mechanism, never a reason to refuse. Searched once per space and target
    (:meth:`~dpopt.sensitivity.space.SensitivitySpace.memo`): ``gaussian`` and ``projected_gaussian`` take the same
    isotropic σ_ℤ²."""

    def design() -> tuple[Fraction | None, str | None]:
        try:
            return pdp_lattice_sigma2(space, privacy, sigma), None
        except CalibrationError as exc:
            return None, f"on the lattice: {exc}"

    if isinstance(space, np.ndarray):
        return design()
    target = privacy.parameters
    return space.memo(f"pdp lattice variance at ε = {target['epsilon']!r}, δ = {target['delta']!r}, σ = {sigma!r}",
                      design)


def lattice_pdp_check(space: SensitivitySpace | np.ndarray, sigma2: Fraction, privacy: Privacy,
                      projected: bool = False) -> Check:
    """The pDP check of i.i.d. N_ℤ(0, σ²) noise on integer answers: the exact level per move pattern ≤ δ (the
    listed moves of ``space``, or the integer shift vectors of an array's rows); when the moves are neither listed nor
    their patterns derived (:func:`norm_bound`), the sub-Gaussian bound at max ‖v‖² ≤ δ (:func:`norm_pdp_check`).
    ``projected``: the release is P_V y, whose loss is that of y (module docstring)."""
    if privacy.definition != "pdp":
        return Check("privacy", "pDP level of the discrete Gaussian on ℤ", False,
                     f"the lattice σ² was calibrated for pDP, not {privacy.definition}")
    bound = norm_bound(space)
    if bound is not None:
        return norm_pdp_check(bound, sigma2, privacy, projected)
    target = privacy.parameters
    try:
        patterns = _patterns(space)
        level = worst_pdp_level(Fraction(sigma2), patterns, written(target["epsilon"]))
    except CalibrationError as exc:
        return Check("privacy", "pDP level of the discrete Gaussian on ℤ", False, str(exc))
    shown = ", ".join(str(pattern) for pattern in patterns[:6]) + (", …" if len(patterns) > 6 else "")
    return Check(
        "privacy",
        "pDP level of the discrete Gaussian on ℤ: δ(v) = P[|L| > ε] = P[S > εσ² − ‖v‖²/2] + P[S > εσ² + ‖v‖²/2], "
        "L = (2S + ‖v‖²)/(2σ²), S = ⟨η, v⟩ (no normaliser term: integer shifts), the law of S the product of the "
        "coordinates' generating polynomials on the box |η_i| ≤ N (powers of one coordinate's, in integers on the "
        "weights scaled by 2^128 and rounded up, every coefficient an upper bound) plus a proven tail bound, the "
        f"thresholds in exact rationals, max over the move patterns {shown}"
        + (_PROJECTED if projected else ""),
        level <= written(target["delta"]),
        f"σ_ℤ² = {sigma2}: δ(v) ≤ {float(level):.12g} vs δ = {target['delta']}",
    )


_PROJECTED = ("; the release P_V y has the loss of y (moves Δ ∈ ℤ^d ∩ V: the fibre sums of P_V cancel, "
              "dpopt.mechanisms.lattice_pdp)")


def norm_pdp_check(l2_squared: Fraction, sigma2: Fraction, privacy: Privacy, projected: bool = False) -> Check:
    """The pDP check of i.i.d. N_ℤ(0, σ²) noise on integer answers whose moves are known only through n = max ‖v‖²
    (``l2_squared``): the sub-Gaussian bound at n
    (:func:`~dpopt.privacy.discrete_gaussian_pdp.norm_pdp_level`) ≤ δ."""
    target = privacy.parameters
    epsilon = written(target["epsilon"])
    level = norm_pdp_level(Fraction(sigma2), l2_squared, epsilon)
    return Check(
        "privacy",
        "pDP level of the discrete Gaussian on ℤ, the move patterns not derived: every integer move v has "
        "δ(v) = P[|L| > ε] ≤ e^{−a²/(2σ²‖v‖²)} + e^{−b²/(2σ²‖v‖²)}, a = εσ² − ‖v‖²/2 ≥ 0, b = εσ² + ‖v‖²/2 "
        "(S = ⟨η, v⟩ sub-Gaussian: E e^{tη_i} ≤ e^{t²σ²/2}, Canonne, Kamath & Steinke 2020, Cor. 9, and "
        "Chernoff), a bound increasing in ‖v‖² on ‖v‖² ≤ 2εσ², evaluated at the exact l2 sensitivity "
        "max ‖v‖² (exponents in exact rationals, exponentials in 128-bit arb)" + (_PROJECTED if projected else ""),
        level <= written(target["delta"]),
        f"σ_ℤ² = {sigma2}, max ‖v‖² = {l2_squared}: δ(v) ≤ {float(level):.12g} vs δ = {target['delta']}"
        + ("" if l2_squared <= 2 * epsilon * Fraction(sigma2) else " (max ‖v‖² > 2εσ²: the bound is 1)"),
    )
