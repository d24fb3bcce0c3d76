r"""The generalized Gaussian measured exactly: discrete GG noise on counts, and on the lattice box of a bounded mean.

On a counting query (integer answers, integer neighbouring shifts) under pure ε or (ε, δ)-pDP, each unbounded
GG(0, b, p) design is replaced by integer noise with P[K = k] ∝ exp(−(|k|/s)^p)
(:mod:`dpopt.noise.discrete_generalized_gaussian`, exact sampler), at a dyadic s of about 21 bits
(:func:`~dpopt.mechanisms.integer_noise.dyadic_ceil`, so that the proposal's discrete Laplace works in int64):

* **p = 1**, the discrete Laplace of scale s: w(k)/w(k + v) = e^{(|k+v| − |k|)/s} ≤ e^{‖v‖₁/s}, so ε = Δ₁/s
  exactly (pure ε-DP, hence (ε, δ)-pDP for every δ); s = the continuous b rounded up.
* **p = 2, 3, 4 under pDP**: the exact lattice level δ(v) = P[|L| > ε] per move pattern
  (:mod:`dpopt.privacy.discrete_gg_pdp`), for neighbours moving any number of coordinates within the work limit
  :data:`~dpopt.privacy.discrete_gg_profile.MAX_PRODUCTS`; s is the end of a
  bisection on the dyadic grid started at the continuous calibration (the level jumps with s: the loss takes
  lattice values).
* **(ε, δ)**: p = 1 is the discrete Laplace, calibrated and checked by
  :func:`~dpopt.mechanisms.discrete_laplace.discrete_laplace_privacy_check` (its exact profile per move pattern);
  p = 2, 3, 4 on the exact profile δ_v(ε) = Σ_a P[A = a](1 − e^{ε − a/s^p})₊ of each move pattern
  (:mod:`dpopt.privacy.discrete_gg_profile`: a convolution of the coordinates' integer loss laws, any number of
  moving coordinates within its box limit), s by the same bisection.
* **ρ-zCDP and μ-GDP**: p = 1 as the discrete Laplace (exact Rényi divergences, exact trade-off functions); p = 2
  is the discrete Gaussian N_ℤ(0, s²/2): ρ = Δ₂²/s² exactly (CKS 2020, Thm 14) and μ² = Δ₂²/v at the effective
  variance v of the certified GDP slope (:func:`~dpopt.mechanisms.lattice.lattice_isotropic_check`); s is the
  smallest dyadic passing that check. p ≥ 3: none (as for the continuous law, the loss grows like |k|^{p−1}
  and no zCDP or GDP bound is derived).

The utilities are the discrete law's: E|K|, E K², P(|K| ≤ γ) summed exactly in arb with a proven tail bound below
2^{−80} (not a Monte Carlo estimate, and not the continuous law's closed forms). Refusals (the continuous design
is kept, with the idealized-numerics note): ``sampler: floating_point``, a non-counting query, neighbours
whose moves are not listed integer vectors or whose loss-law convolution exceeds
:data:`~dpopt.privacy.discrete_gg_profile.MAX_PRODUCTS` (p ≥ 2 under pDP and (ε, δ)), p ≥ 3 under zCDP and
GDP, a lattice variance beyond the certified GDP slope's range (p = 2 under GDP), a scale beyond the sampler's
2^40.

**A bounded mean with public n under pure ε** (the truncated variant, Liu 2019 Def. 5): each record is rounded
to g = 2^e and summed exactly as in :mod:`dpopt.mechanisms.exact_sum` (:mod:`dpopt.mechanisms.real_lattice`, the
rounding charged to Δ_u); when the bounds are multiples of g the sum N lies in the box {nL/g, …, nU/g} and receives
discrete GG noise conditioned on N + K in the box, calibrated on the exact worst-case loss over the box's lattice
points (:mod:`dpopt.privacy.discrete_truncated_gg`). Its predicted utility is the worst case over every lattice
answer (finite sums in double precision). The family's design keeps the best exact option whenever there is one,
and states its cost against the best floating-point option (``exact_cost``).
"""

from __future__ import annotations

import math
from fractions import Fraction

from dpopt.core.checks import Check
from dpopt.core.decimals import float_below, written
from dpopt.errors import CalibrationError
from dpopt.mechanisms.discrete_laplace import DiscreteLaplaceMechanism, discrete_laplace_privacy_check
from dpopt.mechanisms.gaussian import CONTINUOUS_METRICS, counting_query
from dpopt.mechanisms.integer_noise import dyadic_ceil, move_patterns
from dpopt.mechanisms.lattice import lattice_isotropic_check, lattice_privacy_summary, target_lattice_variance
from dpopt.mechanisms.real_lattice import RealLattice, answer_units, exponent_at_most, real_lattice
from dpopt.mechanisms.real_lattice import lattice_refusal as real_lattice_refusal
from dpopt.privacy.discrete_gg_pdp import pdp_scale, worst_pdp_level
from dpopt.privacy.discrete_gg_profile import profile_scale, worst_profile_delta
from dpopt.privacy.discrete_truncated_gg import MAX_POINTS, truncated_loss_bound, truncated_scale
from dpopt.problem import Problem
from dpopt.sensitivity.space import SensitivitySpace
from dpopt.spec.models import Privacy

LATTICE_TARGETS = ("pure", "pdp", "approx", "zcdp", "gdp")
"""The targets whose lattice privacy is derived here."""

RENYI_TARGETS = ("zcdp", "gdp")
"""Targets served by p = 1 (discrete Laplace) and p = 2 (discrete Gaussian) only."""

SCALE_STEPS = 8
"""Steps of 2^-20 relative by which a dyadic s is raised until its exact check passes (zCDP, GDP at p = 2)."""

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
        return f"the discrete GG's privacy is not derived for {spec.privacy.definition}"
    if not counting_query(problem):
        return "the query's answers are not integer counts"
    return None


def lattice_scale(p: int, continuous: float, problem: Problem) -> Fraction:
    """The dyadic s of the lattice measurement of the continuous design GG(0, b, p) (module docstring).

    Raises
    ------
    CalibrationError
        p ≥ 2 and the neighbours' moves are not listed integer patterns (pDP, (ε, δ)) or their box is too large,
        p ≥ 3 under zCDP or GDP, no scale meets the target, or s is beyond :data:`MAX_LATTICE_SCALE`.
    """
    space, privacy = problem.space, problem.spec.privacy
    target = privacy.parameters
    if p == 1 and privacy.definition in ("pure", "pdp"):
        s = dyadic_ceil(Fraction(continuous))
    elif p == 1:
        s = DiscreteLaplaceMechanism.design(problem).scale
    elif privacy.definition == "pdp":
        s = pdp_scale(p, _patterns(space), written(target["epsilon"]), written(target["delta"]), continuous,
                      dyadic_ceil)
    elif privacy.definition == "approx":
        s = profile_scale(p, _patterns(space), written(target["epsilon"]), written(target["delta"]), continuous,
                          dyadic_ceil)
    elif p == 2:
        s = _gaussian_scale(space, privacy)
    else:
        raise CalibrationError(f"no {privacy.definition} guarantee is derived for the discrete GG with p = {p} > 2")
    if s > MAX_LATTICE_SCALE:
        raise CalibrationError(f"the discrete GG scale {float(s):.6g} exceeds the exact sampler's 2^40")
    return s


def _gaussian_scale(space: SensitivitySpace, privacy: Privacy) -> Fraction:
    """The smallest dyadic s (up to :data:`SCALE_STEPS` steps above the start) at which N_ℤ(0, s²/2) passes the
    zCDP or GDP check (:func:`lattice_privacy_check`), started at s² = 2σ², σ² = Δ₂²/(2ρ) (zCDP) or the lattice
    variance whose certified effective variance is Δ₂²/μ² (GDP, :func:`~dpopt.mechanisms.lattice.target_lattice_variance`)."""
    target = privacy.parameters
    if privacy.definition == "zcdp":
        sigma2 = Fraction(space.l2_squared) / (2 * written(target["rho"]))
    else:
        sigma2 = target_lattice_variance(Fraction(space.l2_squared) / written(target["mu"]) ** 2, 1, "gdp")
        if sigma2 is None:
            raise CalibrationError("the discrete Gaussian's GDP slope is not certified at this variance")
    s = dyadic_ceil(Fraction(math.sqrt(float(2 * sigma2))))
    while s * s < 2 * sigma2:
        s = dyadic_ceil(s * (1 + Fraction(1, 2**20)))
    for _ in range(SCALE_STEPS):
        if lattice_privacy_check(2, s, space, privacy).passed:
            return s
        s = dyadic_ceil(s * (1 + Fraction(1, 2**20)))
    raise CalibrationError(f"no dyadic discrete GG scale near {float(s):.6g} passes the {privacy.definition} check")


def lattice_calibration(p: int, definition: str) -> str:
    """The calibration label of the lattice option of shape p under a target (the certificate's ``calibration``)."""
    if p == 1:
        return "laplace" if definition in ("pure", "pdp") else "discrete_laplace"
    return {"pdp": "lattice_pdp", "approx": "lattice_profile"}.get(definition, "lattice_gaussian")


def lattice_target_summary(p: int, scale: Fraction, space: SensitivitySpace, calibration: str) -> dict:
    """The privacy summary of the p = 2 lattice option calibrated under zCDP or GDP (``lattice_gaussian``): the
    discrete Gaussian's ρ = Δ₂²/s² (σ² = s²/2, CKS 2020, Thm 14); empty otherwise."""
    if p != 2 or calibration != "lattice_gaussian":
        return {}
    return lattice_privacy_summary(Fraction(space.l2_squared), scale * scale / 2, "zcdp")


def _patterns(space: SensitivitySpace) -> list[tuple[int, ...]]:
    patterns = move_patterns(space)
    if patterns is None:
        raise CalibrationError("the neighbouring differences are not listed integer vectors")
    return patterns


def lattice_privacy_check(p: int, scale: Fraction, space: SensitivitySpace, privacy: Privacy) -> Check:
    """The privacy check of i.i.d. discrete GG noise of shape p and scale s on integer answers (module docstring)."""
    if privacy.definition not in LATTICE_TARGETS:
        return Check("privacy", "discrete generalized Gaussian", False,
                     f"no {privacy.definition} guarantee is derived for the discrete GG")
    target = privacy.parameters
    if p == 1 and privacy.definition not in ("pure", "pdp"):
        return discrete_laplace_privacy_check(space, scale, privacy)
    if privacy.definition in RENYI_TARGETS:
        if p != 2:
            return Check("privacy", "discrete generalized Gaussian, p > 2", False,
                         f"no {privacy.definition} guarantee is derived for the discrete GG with p = {p}")
        check = lattice_isotropic_check(Fraction(space.l2_squared), scale * scale / 2, privacy)
        return Check(check.claim, f"discrete GG with p = 2 is N_ℤ(0, s²/2), s = {scale}: {check.method}",
                     check.passed, check.detail)
    eps = written(target["epsilon"])
    if p > 1 and privacy.definition in ("approx", "pdp"):
        level_of = worst_profile_delta if privacy.definition == "approx" else worst_pdp_level
        try:
            patterns = _patterns(space)
            level = level_of(p, scale, patterns, eps)
        except CalibrationError as exc:
            return Check("privacy", f"{privacy.definition} level of the discrete GG on ℤ", False, str(exc))
    if p > 1 and privacy.definition == "approx":
        return Check(
            "privacy",
            "exact (ε, δ) profile of the discrete GG on ℤ: δ_v(ε) = Σ_a P[A = a](1 − e^{ε − a/s^p})₊, "
            "A = Σ_i (|K_i + v_i|^p − |K_i|^p) (integer loss numerator; its law the exact convolution of the "
            "coordinates' laws over the box |K_i| ≤ R), 128-bit arb arithmetic plus a proven tail bound, per move "
            f"pattern {', '.join(str(pattern) for pattern in patterns)}",
            level <= written(target["delta"]),
            f"s = {scale}, p = {p}: δ(ε={target['epsilon']}) ≤ {float(level):.12g} vs δ = {target['delta']}",
        )
    if p == 1:
        ratio = Fraction(space.l1) / scale
        pdp = "; pure ε-DP implies (ε, δ)-pDP" if privacy.definition == "pdp" else ""
        return Check("privacy", "exact rational check Δ₁/s ≤ ε (discrete Laplace on ℤ: w(k)/w(k + v) ≤ "
                     f"e^{{‖v‖₁/s}}{pdp})", ratio <= eps, f"Δ₁/s = {float(ratio):.17g} vs ε = {target['epsilon']}")
    if privacy.definition != "pdp":
        return Check("privacy", "discrete generalized Gaussian, p > 1", False,
                     f"discrete GG noise with p = {p} > 1 is not ε-DP for any scale (the loss grows like |k|^(p−1))")
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
