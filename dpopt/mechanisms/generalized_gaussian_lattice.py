r"""The generalized Gaussian measured exactly: discrete GG noise on counts, and on the lattice box of a bounded mean.

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

**A bounded mean with public n under pure ε** (the truncated variant, Liu 2019 Def. 5): each record is rounded
to g = 2^e and summed exactly as in :mod:`dpopt.mechanisms.exact_sum` (:mod:`dpopt.mechanisms.real_lattice`, the
rounding charged to Δ_u); when the bounds are multiples of g the sum N lies in the box {nL/g, …, nU/g} and receives
discrete GG noise conditioned on N + K in the box, calibrated on the exact worst-case loss over the box's lattice
points (:mod:`dpopt.privacy.discrete_truncated_gg`). Its predicted utility is the worst case over every lattice
answer (finite sums in double precision). The family's design keeps an exact option when its prediction is within
:data:`~dpopt.mechanisms.exact_sum.COST_MARGIN` (0.1%) of the best.
"""

from __future__ import annotations

from fractions import Fraction

from dpopt.core.checks import Check
from dpopt.core.decimals import float_below, written
from dpopt.errors import CalibrationError
from dpopt.mechanisms.gaussian import CONTINUOUS_METRICS, counting_query
from dpopt.mechanisms.integer_noise import dyadic_ceil, move_patterns
from dpopt.mechanisms.real_lattice import RealLattice, answer_units, exponent_at_most, real_lattice
from dpopt.mechanisms.real_lattice import lattice_refusal as real_lattice_refusal
from dpopt.privacy.discrete_gg_pdp import MAX_MOVING, pdp_scale, worst_pdp_level
from dpopt.privacy.discrete_truncated_gg import MAX_POINTS, truncated_loss_bound, truncated_scale
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
    if spec.utility.metric in CONTINUOUS_METRICS:
        return f"the {spec.utility.metric} prediction is of the continuous law"
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


# ---------------------------------------------------------------- a bounded mean on a dyadic lattice box
BOX_BITS = 10
"""The box lattice's spacing: g = 2^e ≤ 2^-10 of the truncated design's scale in sum units (b·n), coarser only when
the box would exceed :data:`~dpopt.privacy.discrete_truncated_gg.MAX_POINTS` points."""

BOX_NOTE = ("exact measurement on a dyadic lattice box: each record's value is rounded half up to g = {g} in exact "
            "arithmetic and summed exactly, the integer sum N (units of g, in the box {{{lo}, …, {hi}}}) receives "
            "discrete GG noise P[K = k] ∝ exp(−(|k|/s)^p), s = {scale} units, conditioned on N + K in the box "
            "(rejection; the discrete GG by rejection from the discrete Laplace with a lazy exact Bernoulli), and the "
            "published value g(N + K)/{divisor} is formed from the integer N + K alone; the rounding is charged to "
            "the sensitivity (Δ_u = {shift} units). The bounds are multiples of g, so every answer's N lies in the box")


def _two_adic(x: Fraction) -> int | None:
    """The exponent of 2 in x (None for 0)."""
    if x == 0:
        return None
    a, b = abs(x.numerator), x.denominator
    return ((a & -a).bit_length() - 1) - ((b & -b).bit_length() - 1)


def box_lattice_refusal(problem: Problem) -> str | None:
    """Why a bounded mean's truncated design keeps the floating-point sampler (None: it is measured on a lattice
    box)."""
    spec = problem.spec
    if spec.privacy.definition != "pure":
        return "the lattice box is certified for pure ε"
    if spec.utility.metric in CONTINUOUS_METRICS:
        return f"the {spec.utility.metric} prediction is of the continuous law"
    refusal = real_lattice_refusal(problem)
    if refusal is not None:
        return refusal
    if problem.query.kind != "mean" or spec.data.n is None:
        return "the lattice box serves a mean with a public n"
    return None


def box_lattice(problem: Problem, scale: float) -> RealLattice:
    """The lattice of the truncated design of scale b (answer units): g = 2^e ≤ 2^-BOX_BITS·b·n, coarsened until the
    box has at most MAX_POINTS points; the bounds must be multiples of g.

    Raises
    ------
    CalibrationError
        The bounds are not multiples of a g fine enough, or the lattice is beyond the double range.
    """
    query = problem.query
    divisor, _ = answer_units(problem)
    lower, upper = Fraction(query.lower), Fraction(query.upper)
    exponent = exponent_at_most(Fraction(scale) * divisor, BOX_BITS)
    while divisor * (upper - lower) / Fraction(2) ** exponent + 1 > MAX_POINTS:
        exponent += 1
    limits = [v for v in (_two_adic(lower), _two_adic(upper)) if v is not None]
    if limits and exponent > min(limits):
        raise CalibrationError(f"the bounds [{lower}, {upper}] are not multiples of the lattice 2^{exponent}")
    return real_lattice(problem, exponent)


def box_units(lattice: RealLattice) -> tuple[int, int]:
    """The box of N in units of g: [n·L/g, n·U/g] (exact integers: the bounds are multiples of g)."""
    lo = lattice.divisor * lattice.lower / lattice.granularity
    hi = lattice.divisor * lattice.upper / lattice.granularity
    if lo.denominator != 1 or hi.denominator != 1:
        raise CalibrationError("the bounds are not multiples of the lattice")
    return int(lo), int(hi)


def box_lattice_scale(p: int, lattice: RealLattice, scale: float, epsilon: object) -> Fraction:
    """The dyadic s (units of g) of the truncated discrete GG on the lattice box, calibrated to ε from the continuous
    design's b (answer units) by :func:`~dpopt.privacy.discrete_truncated_gg.truncated_scale`."""
    lo, hi = box_units(lattice)
    start = Fraction(scale) / lattice.unit
    return truncated_scale(p, hi - lo + 1, lattice.shift, float_below(epsilon), start, dyadic_ceil)


def box_lattice_checks(p: int, scale: Fraction, lattice: RealLattice, epsilon: object) -> list[Check]:
    """The pure ε check of the truncated discrete GG on the lattice box (:mod:`dpopt.privacy.discrete_truncated_gg`)."""
    lo, hi = box_units(lattice)
    bound = truncated_loss_bound(p, scale, hi - lo + 1, lattice.shift)
    return [Check(
        "privacy",
        "worst-case loss of the truncated discrete GG on the lattice box: max over y ∈ {0, M} and |N − N'| ≤ Δ_u of "
        "F(N') − F(N), F(x) = (x/s)^p + log Z(x), at every lattice point (128-bit arb enclosures read as doubles, "
        f"+ 2·radius + 1e-9); {hi - lo + 1} points, Δ_u = {lattice.shift}",
        bound <= float_below(epsilon),
        f"loss bound {bound:.12g} vs ε = {epsilon}",
    )]
