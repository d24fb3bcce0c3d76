r"""The generalized Gaussian on counts, measured exactly: integer answers plus discrete GG noise on ℤ.

On a counting query (integer answers, integer neighbouring shifts) under pure ε or (ε, δ)-pDP, each unbounded
GG(0, b, p) design is replaced by integer noise with P[K = k] ∝ exp(−(|k|/s)^p)
(:mod:`dpopt.noise.discrete_generalized_gaussian`, exact sampler), at a dyadic s of about 21 bits
(:func:`~dpopt.mechanisms.integer_noise.dyadic_ceil`, so that the proposal's discrete Laplace works in int64):

* **p = 1**, the discrete Laplace of scale s: w(k)/w(k + v) = e^{(|k+v| − |k|)/s} ≤ e^{‖v‖₁/s}, so ε = Δ₁/s
  exactly (pure ε-DP, hence (ε, δ)-pDP for every δ); s = the continuous b rounded up.
* **p = 2, 3, 4 under pDP**: the exact lattice level δ(v) = P[|L| > ε] per move pattern
  (:mod:`dpopt.privacy.discrete_gg_pdp`), for neighbours moving one or two coordinates; s is the end of a
  bisection on the dyadic grid started at the continuous calibration (the level jumps with s: the loss takes
  lattice values).

The utilities are the discrete law's: E|K|, E K², P(|K| ≤ γ) summed exactly in arb with a proven tail bound below
2^{−80} (not a Monte Carlo estimate, and not the continuous law's closed forms). Refusals (the continuous design
is kept, with the idealized-numerics note): ``sampler: floating_point``, a non-counting query, another target, a
neighbour moving more than two coordinates (p ≥ 2), a scale beyond the sampler's 2^40.
"""

from __future__ import annotations

from fractions import Fraction

from dpopt.core.checks import Check
from dpopt.core.decimals import written
from dpopt.errors import CalibrationError
from dpopt.mechanisms.gaussian import counting_query
from dpopt.mechanisms.integer_noise import dyadic_ceil, move_patterns
from dpopt.privacy.discrete_gg_pdp import MAX_MOVING, pdp_scale, worst_pdp_level
from dpopt.problem import Problem
from dpopt.sensitivity.space import SensitivitySpace
from dpopt.spec.models import Privacy

LATTICE_TARGETS = ("pure", "pdp")
"""The targets whose lattice privacy is derived here."""

MAX_LATTICE_SCALE = Fraction(2**40)
"""The largest s served (the discrete Laplace proposal's range, as ``discrete_laplace``)."""

LATTICE_NOTE = ("exact measurement on counts: integer answers plus i.i.d. discrete generalized Gaussian noise "
                "P[K = k] ∝ exp(−(|k|/s)^p), s = {scale} (dyadic), sampled by rejection from the discrete Laplace "
                "(CKS 2020, Algorithm 2) with a lazy exact Bernoulli of each acceptance probability (arb enclosures, "
                "integer comparisons); no floating-point number touches the noise")


def lattice_refusal(problem: Problem) -> str | None:
    """Why the GG design keeps the floating-point sampler on this spec (None: it measures on the lattice)."""
    spec = problem.spec
    if spec.sampler == "floating_point":
        return "the spec asks for sampler: floating_point"
    if spec.privacy.definition not in LATTICE_TARGETS:
        return f"the discrete GG's privacy is derived for pure ε and pDP (not {spec.privacy.definition})"
    if not counting_query(problem):
        return "the query's answers are not integer counts"
    return None


def lattice_scale(p: int, continuous: float, problem: Problem) -> Fraction:
    """The dyadic s of the lattice measurement of the continuous design GG(0, b, p) (module docstring).

    Raises
    ------
    CalibrationError
        p ≥ 2 and the neighbours' moves are not listed integer patterns of at most two coordinates, or no scale
        meets the target, or s is beyond :data:`MAX_LATTICE_SCALE`.
    """
    space, privacy = problem.space, problem.spec.privacy
    if p == 1:
        s = dyadic_ceil(Fraction(continuous))
    else:
        patterns = _patterns(space)
        target = privacy.parameters
        s = pdp_scale(p, patterns, written(target["epsilon"]), written(target["delta"]), continuous, dyadic_ceil)
    if s > MAX_LATTICE_SCALE:
        raise CalibrationError(f"the discrete GG scale {float(s):.6g} exceeds the exact sampler's 2^40")
    return s


def _patterns(space: SensitivitySpace) -> list[tuple[int, ...]]:
    patterns = move_patterns(space)
    if patterns is None:
        raise CalibrationError("the neighbouring differences are not listed integer vectors")
    if max(len(pattern) for pattern in patterns) > MAX_MOVING:
        raise CalibrationError(f"a neighbour moves more than {MAX_MOVING} coordinates (the lattice pDP level is "
                               "summed for one or two)")
    return patterns


def lattice_privacy_check(p: int, scale: Fraction, space: SensitivitySpace, privacy: Privacy) -> Check:
    """The privacy check of i.i.d. discrete GG noise of shape p and scale s on integer answers (module docstring)."""
    if privacy.definition not in LATTICE_TARGETS:
        return Check("privacy", "discrete generalized Gaussian", False,
                     f"no {privacy.definition} guarantee is derived for the discrete GG")
    target = privacy.parameters
    eps = written(target["epsilon"])
    if p == 1:
        ratio = Fraction(space.l1) / scale
        pdp = "; pure ε-DP implies (ε, δ)-pDP" if privacy.definition == "pdp" else ""
        return Check("privacy", "exact rational check Δ₁/s ≤ ε (discrete Laplace on ℤ: w(k)/w(k + v) ≤ "
                     f"e^{{‖v‖₁/s}}{pdp})", ratio <= eps, f"Δ₁/s = {float(ratio):.17g} vs ε = {target['epsilon']}")
    if privacy.definition != "pdp":
        return Check("privacy", "discrete generalized Gaussian, p > 1", False,
                     f"discrete GG noise with p = {p} > 1 is not ε-DP for any scale (the loss grows like |k|^(p−1))")
    try:
        patterns = _patterns(space)
    except CalibrationError as exc:
        return Check("privacy", "pDP level of the discrete GG on ℤ", False, str(exc))
    level = worst_pdp_level(p, scale, patterns, eps)
    return Check(
        "privacy",
        "pDP level of the discrete GG on ℤ: δ(v) = P[|L| > ε], L = s^{−p} Σ_i (|K_i + v_i|^p − |K_i|^p) (no "
        "normalizer term: integer shifts), the event decided in exact rationals, the probability summed over the "
        "box |K_i| ≤ R in 128-bit arb arithmetic plus a proven tail bound, per move pattern "
        f"{', '.join(str(pattern) for pattern in patterns)}",
        level <= written(target["delta"]),
        f"s = {scale}, p = {p}: δ(v) ≤ {float(level):.12g} vs δ = {target['delta']}",
    )
