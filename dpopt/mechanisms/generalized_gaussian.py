r"""The generalized Gaussian (GG) mechanism: i.i.d. GG(0, b, p) noise, unbounded or on a box.

Noise density per coordinate :math:`\frac{p}{2b\Gamma(1/p)}e^{-(|x|/b)^p}`
(:class:`dpopt.noise.GeneralizedGaussian`, re-exported here); p = 1 is Laplace, p = 2 is
Gaussian with σ = b/√2 (Liu 2019). The family serves two targets:

**Pure ε-DP** (``privacy: {pure: ...}``).

* Unbounded noise is ε-DP only for p = 1 (Claim 4): b = Δ₁/ε, the Laplace mechanism.
* When the spec implies a public box for the answers (:func:`dpopt.domain.bounds.answer_bounds`:
  a mean with public n, counts and sums with n fixed by the adjacency), the bounded variants of
  :mod:`dpopt.privacy.truncated_gg` join: the truncated GG (Def. 5, p = 1, 2, 3) and the
  boundary-inflated truncated GG (BIT, Def. 6, p = 2, 3), each at the smallest b whose certified worst-case
  loss bound is ≤ ε (the paper's Eq. 7 is valid but about 3× conservative), and BIT at p = 1,
  which is Laplace noise followed by clamping (post-processing).

**(ε, δ)-probabilistic DP** (``privacy: {pdp: ...}``, :mod:`dpopt.privacy.pdp`; pDP is not
(ε, δ)-DP, see the certificate's guarantee). p = 1: b = Δ₁/ε (pure ε-DP implies pDP);
p = 2: Lemma 10 with Δ₂ (the Gaussian pDP bound, for any query); p = 3, 4: Corollary 8's
closed form when one neighbour moves one coordinate, else Corollary 7 by Monte Carlo with a
recorded seed and a Clopper–Pearson bound at a stated confidence.

**(ε, δ), ρ-zCDP and μ-GDP** (:mod:`dpopt.mechanisms.generalized_gaussian_targets`), unbounded
noise: p = 1 and p = 2 are Laplace and Gaussian noise, calibrated exactly as those families;
p = 3, 4 under (ε, δ) on their exact one-coordinate profile (:mod:`dpopt.privacy.gg_profile`);
p > 2 has no zCDP or GDP guarantee at any scale.

**Exact measurement** (:mod:`dpopt.mechanisms.generalized_gaussian_lattice`, unless ``sampler:
floating_point``): on counting queries the unbounded options are joined by the discrete GG on ℤ (p = 1 the
discrete Laplace; under pDP p ≥ 2 calibrated on the lattice pDP level, :mod:`dpopt.privacy.discrete_gg_pdp`, and
under (ε, δ) on the lattice profile, :mod:`dpopt.privacy.discrete_gg_profile`; under ρ-zCDP and μ-GDP p = 2 as the
discrete Gaussian);
on a bounded mean with public n under pure ε the truncated options are joined by the truncated discrete GG on
the lattice box (:mod:`dpopt.privacy.discrete_truncated_gg`); on a bounded sum or mean the unbounded options are
joined by the discrete GG on the sum's dyadic lattice (:mod:`dpopt.mechanisms.generalized_gaussian_sum`, whose class
the registry holds for the family). The samplers are exact
(:mod:`dpopt.noise.discrete_generalized_gaussian`).

``design`` calibrates every applicable (p, variant) and keeps the best exact option for the spec's metric when
there is one (exact is the default), else the best option; the chosen exact option's parameters state its cost
against the best floating-point option (``exact_cost``, :func:`dpopt.mechanisms.exact_cost.exact_cost`) and the
design notes name it. Bounded
variants' noise depends on the true answer: their
predicted utility is the worst case over true answers in the box (closed forms on a grid), and
:meth:`sample` draws the noise for a true answer at the centre of the box; :meth:`release`
uses the actual answer. The privacy checks at given parameters (pDP bounds, the bounded
variants' certified loss) are in :mod:`dpopt.mechanisms.generalized_gaussian_checks`.

References
----------
.. [1] F. Liu, "Generalized Gaussian mechanism for differential privacy", IEEE TKDE 31(4), 2019
   (digest ``papers/002_generalized_gaussian.md``).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from dpopt.core.checks import Check
from dpopt.core.decimals import float_below, written
from dpopt.core.rounding import nudge_until
from dpopt.domain.bounds import answer_bounds
from dpopt.errors import CalibrationError, DataError, DpoptError, UnsupportedSpecError
from dpopt.mechanisms.base import SCALE_MONOTONE_METRICS, Mechanism, better
from dpopt.mechanisms.decimal_counts import OnDecimalLattice, decimal_reason
from dpopt.mechanisms.gaussian import lattice_scope_check
from dpopt.mechanisms.generalized_gaussian_bound import FLOOR_TARGETS, target_floors
from dpopt.mechanisms.generalized_gaussian_checks import bounded_checks, lemma10_bound, pdp_check
from dpopt.mechanisms.exact_cost import EXACT_COST_KEY, cost_text, exact_cost, stated_cost_check
from dpopt.mechanisms.generalized_gaussian_lattice import (
    BOX_NOTE,
    LATTICE_NOTE,
    box_lattice,
    box_lattice_checks,
    box_lattice_refusal,
    box_lattice_scale,
    box_units,
    lattice_calibration,
    lattice_privacy_check,
    lattice_refusal,
    lattice_scale,
    lattice_target_summary,
)
from dpopt.mechanisms.real_lattice import RealLattice
from dpopt.mechanisms.real_lattice import lattice_scope_check as real_lattice_scope_check
from dpopt.mechanisms.generalized_gaussian_targets import TARGETS, target_check, target_scales
from dpopt.mechanisms.lattice import integer_answers
from dpopt.noise.discrete_generalized_gaussian import DiscreteGeneralizedGaussian, DiscreteGeneralizedGaussianMarginal
from dpopt.noise.generalized_gaussian import GeneralizedGaussian
from dpopt.noise.law import ProductLaw
from dpopt.noise.marginal import NoiseObjectMarginal
from dpopt.privacy.discrete_truncated_gg import truncated_loss_bound
from dpopt.privacy.laplace import laplace_epsilon, laplace_scale_for
from dpopt.privacy.pdp import (
    PDP_CAVEAT,
    PDP_MONTE_CARLO_DRAWS,
    gaussian_pdp_sigma,
    gg_pdp_bound_disjoint_mp,
    gg_pdp_scale_disjoint,
    gg_pdp_scale_monte_carlo,
)
from dpopt.privacy.truncated_gg import (
    scale_lower_bound,
    tight_scale,
    worst_case_loss,
)
from dpopt.problem import Problem
from dpopt.sensitivity.lp import difference_magnitudes, lp_sensitivity_power
from dpopt.sensitivity.space import SensitivitySpace
from dpopt.spec.models import Privacy

__all__ = ["GeneralizedGaussian", "GeneralizedGaussianMechanism"]

PDP_SHAPES = (1, 2, 3, 4)
"""Shapes p tried under pDP."""
TRUNCATED_SHAPES = (1, 2, 3)
"""Shapes p tried for the truncated variant under pure ε."""
BIT_SHAPES = (2, 3)
"""Shapes p tried for the BIT variant under pure ε by the certified bound (p = 1 is clamped Laplace)."""
_WORST_CASE_GRID = 101

VARIANTS = ("unbounded", "truncated", "boundary_inflated")

BOX_SHORTLIST = 0.01
"""A truncated option is measured on the lattice box only when its continuous prediction is within 1% of the best
continuous truncated option's: the lattice law moves a prediction by about 0.1%, so the others cannot be the best
exact option."""

MAX_MONTE_CARLO_COORDINATES = 200
"""Moving coordinates (summed over the profiles) above which Corollary 7's Monte Carlo calibration
(:data:`PDP_MONTE_CARLO_DRAWS` draws of each) is not attempted: its time grows with their product."""


CALIBRATIONS = ("laplace", "clamped_laplace", "scale_lower_bound", "certified_bound", "lemma10", "corollary8",
                "corollary7_monte_carlo", "eq7", "gaussian", "exact_profile", "lattice_pdp", "lattice_box",
                "discrete_laplace", "lattice_profile", "lattice_gaussian")
"""How a scale b can have been obtained (see :class:`GeneralizedGaussianMechanism`)."""


_BOUND_WORDS = {1.0: "≥", -1.0: "≤"}
"""How a floor bounds a value: from below when lower is better (sign 1), from above when higher is."""


class GeneralizedGaussianMechanism(Mechanism):
    """i.i.d. GG(0, b, p) noise; unbounded, truncated to the box, or boundary-inflated.

    Parameters
    ----------
    p : int
        Shape, ≥ 1.
    scale : float
        b > 0.
    dimension : int
    variant : {'unbounded', 'truncated', 'boundary_inflated'}
    calibration : str
        How b was obtained (``laplace``, ``lemma10``, ``corollary8``, ``corollary7_monte_carlo``,
        ``certified_bound``, ``clamped_laplace``, ``eq7``; under (ε, δ), zCDP, GDP: ``laplace``,
        ``gaussian``, ``exact_profile``).
    lower, upper : array_like, optional
        The box, for the bounded variants.
    monte_carlo : dict, optional
        ``{seed, draws, confidence}`` of a Corollary 7 calibration.
    lattice_scale : Fraction, optional
        The exact measurement on counts (:mod:`dpopt.mechanisms.generalized_gaussian_lattice`): integer answers
        plus discrete GG noise of this dyadic scale s (``scale`` is then s as a float, exactly); calibration
        ``laplace`` (p = 1) or ``lattice_pdp`` (the lattice pDP level). With ``sum_lattice``, s is in units of
        the lattice g and ``scale`` is the double nearest s·g/n.
    sum_lattice : RealLattice, optional
        The lattice box of a bounded mean (variant ``truncated``, calibration ``lattice_box``): the truncated
        discrete GG on the integer sum N.
    """

    family = "generalized_gaussian"
    title = "Generalized Gaussian"

    def __init__(
        self,
        p: int,
        scale: float,
        dimension: int,
        variant: str = "unbounded",
        calibration: str = "laplace",
        lower=None,
        upper=None,
        monte_carlo: dict | None = None,
        lattice_scale: Fraction | None = None,
        sum_lattice: RealLattice | None = None,
        stated_cost: dict | None = None,
    ):
        if variant not in VARIANTS:
            raise ValueError(f"variant must be one of {VARIANTS} (got {variant!r})")
        if int(p) != p or p < 1:
            raise ValueError(f"p must be an integer >= 1 (got {p})")
        self.p = int(p)
        self.scale = float(scale)
        self.dimension = int(dimension)
        self.variant = variant
        self.calibration = calibration
        self.noise = GeneralizedGaussian(self.p, self.scale)
        bounded = variant != "unbounded"
        if bounded and (lower is None or upper is None):
            raise ValueError(f"the {variant} variant needs the box (lower, upper)")
        self.lower = np.asarray(lower, dtype=float).reshape(-1) if bounded else None
        self.upper = np.asarray(upper, dtype=float).reshape(-1) if bounded else None
        self.monte_carlo = dict(monte_carlo) if monte_carlo else None
        self._design_notes: list[str] = []
        self.stated_cost = None if stated_cost is None else dict(stated_cost)  # vs the best floating-point option
        self.lattice_scale = None if lattice_scale is None else Fraction(lattice_scale)
        self.sum_lattice = sum_lattice
        if self.lattice_scale is not None:
            unit = 1 if sum_lattice is None else sum_lattice.unit
            if float(self.lattice_scale * unit) != self.scale:
                raise ValueError("the lattice measurement's scale is float(lattice_scale · g/n) exactly")
            if bounded != (sum_lattice is not None) or (bounded and variant != "truncated"):
                raise ValueError("a lattice measurement is unbounded on counts, or truncated on a sum lattice box")
            self.lattice_law = DiscreteGeneralizedGaussian(self.p, self.lattice_scale)
            # counts: integer outputs; a mean's lattice box: outputs g(N + K)/n, N recounted from the records by
            # ``dpopt release`` through ``lattice`` (dpopt.release.lattice_sums)
            self.integer_noise = self.needs_integer_answers = sum_lattice is None
            if sum_lattice is not None:
                self.lattice = sum_lattice
            self._lattice_moments: dict[float | None, dict] = {}

    @property
    def exact_noise(self) -> bool:
        """True for the lattice measurements (counts, or a mean's lattice box whose outputs are not integers)."""
        return self.lattice_scale is not None

    # ------------------------------------------------------------------ facts
    @classmethod
    def supports(cls, problem: Problem) -> str | None:
        privacy = problem.spec.privacy
        if privacy.definition not in ("pure", "pdp") + TARGETS:
            return f"no {privacy.definition} calibration for generalized Gaussian noise"
        return None

    @classmethod
    def utility_bound(cls, problem: Problem) -> float | None:
        r"""Under pure ε: a bound on every option :meth:`design` can choose, the best of

        * the two p = 1 options (b = Δ₁/ε, unbounded and clamped), exactly: no calibration;
        * each bounded (variant, p) calibrated by :func:`~dpopt.privacy.truncated_gg.tight_scale`:
          its worst case over true answers at b ≥ :func:`~dpopt.privacy.truncated_gg.scale_lower_bound`
          is at least its value for the answer at the centre of the box (one of the grid's
          offsets), and that value, evaluated at the lower bound on b, is smaller still: at the
          centre the noise is a GG(0, b, p) conditioned on (truncated) or clamped to (BIT)
          [−R/2, R/2], whose |Z| grows stochastically with b (the truncated law's density
          ratio e^{(|z|/b')^p − (|z|/b)^p}, b' > b, falls in |z|: a likelihood-ratio order), so
          E|Z|, E Z² (= the variance: the law is symmetric) grow and P(|Z| ≤ γ) falls.

        * with the exact measurement on counts, the lattice p = 1 option (discrete Laplace), exactly.

        Under pDP, (ε, δ) and ρ-zCDP: every unbounded option at a floor on its scale
        (:mod:`dpopt.mechanisms.generalized_gaussian_bound`), and under pDP the p = 1 options (b = Δ₁/ε, no
        calibration) exactly, as under pure ε.

        None under μ-GDP, for metrics other than l1, l2, max_variance and usefulness, when a
        prediction is not a closed form or the discrete law's sum, when a floor is not proven, or when the truncated
        discrete GG on a mean's lattice box is an option (its law is not the continuous one whose centre values the
        bound rests on).
        """
        spec = problem.spec
        definition = spec.privacy.definition
        if definition not in ("pure",) + FLOOR_TARGETS or spec.utility.metric not in SCALE_MONOTONE_METRICS:
            return None
        if not isinstance(decimal_reason(problem), str):
            return OnDecimalLattice.bound(problem, cls)
        options = [] if definition in ("approx", "zcdp") else cls._laplace_options(problem)
        if definition in FLOOR_TARGETS:
            floors = target_floors(problem)
            if floors is None:
                return None
            d = problem.space.dimension
            at_floors = [cls(p, scale, d, "unbounded", "scale_lower_bound",
                             lattice_scale=Fraction(scale) if on_integers else None)
                         for p, scale, on_integers in floors]
            return cls._best_value(options + at_floors, spec.utility, unscored=at_floors)
        box = cls._box_bound_options(problem)
        return None if box is None else cls._best_value(options + box, spec.utility)

    @classmethod
    def _laplace_options(cls, problem: Problem) -> list[GeneralizedGaussianMechanism]:
        """The p = 1 options under pure ε and pDP, as designed: b = Δ₁/ε, and on the lattice its dyadic ceiling."""
        space = problem.space
        laplace = laplace_scale_for(problem.spec.privacy.parameters["epsilon"], space.l1)
        options = [cls(1, laplace, space.dimension, "unbounded", "laplace")]
        if lattice_refusal(problem) is None:
            try:
                options.append(cls._lattice_option(1, laplace, problem))
            except CalibrationError:  # design keeps the continuous option, already in the list
                pass
        return options

    @classmethod
    def _box_bound_options(cls, problem: Problem) -> list[GeneralizedGaussianMechanism] | None:
        """Under pure ε, the bounded options at their scale lower bounds, valued at the centre of the box
        (:meth:`utility_bound`); None when the truncated lattice box is an option."""
        spec, space = problem.spec, problem.space
        eps = spec.privacy.parameters["epsilon"]
        d = space.dimension
        laplace = laplace_scale_for(eps, space.l1)
        options = []
        box = answer_bounds(spec, problem.query)
        if box is not None and box_lattice_refusal(problem) is None:
            return None  # the truncated lattice box's law is not bounded by the continuous centre values
        if box is not None and spec.utility.workload is None:
            lower, upper = box
            rows = difference_magnitudes(space).rows
            widths = upper - lower
            options.append(cls(1, laplace, d, "boundary_inflated", "clamped_laplace", lower, upper))
            for variant, shapes in (("truncated", TRUNCATED_SHAPES), ("boundary_inflated", BIT_SHAPES)):
                for p in shapes:
                    b = scale_lower_bound(eps, variant, p, widths, rows)
                    if b > 0:
                        option = cls(p, b, d, variant, "scale_lower_bound", lower, upper)
                        option._centre_only = True
                        options.append(option)
        return options

    @staticmethod
    def _best_value(options: list[GeneralizedGaussianMechanism], utility,
                    unscored: list[GeneralizedGaussianMechanism] = ()) -> float | None:
        """The best predicted value among ``options`` (those design cannot score left out); None when one is not
        its closed form (or the discrete law's sum), or when one of ``unscored`` (options at a floor, whose
        calibrated scale design might still score) cannot be scored."""
        values = []
        for option in options:
            try:
                value = option.expected_utility(utility)
            except DpoptError:  # design cannot score this option either
                if any(option is other for other in unscored):
                    return None
                continue
            if value.method != option._closed_form_method():
                return None
            values.append(value.value)
        best = max if better(utility.metric) == "higher" else min
        return best(values) if values else None

    @classmethod
    def design(cls, problem: Problem) -> GeneralizedGaussianMechanism | OnDecimalLattice:
        """The best calibrated option for the spec's metric (an exact one whenever there is one); for a linear query
        with decimal weights, the exact design for the integer moves D·WΔ released on the decimal lattice
        (:mod:`dpopt.mechanisms.decimal_counts`) when it is exact."""
        decimal = OnDecimalLattice.measured(problem, cls)
        if not isinstance(decimal, str):
            return decimal
        spec = problem.spec
        options, skipped = cls._options(problem)
        if not options:
            raise CalibrationError(
                "no generalized Gaussian variant could be calibrated (" + "; ".join(skipped) + ")"
            )
        sign = -1.0 if better(spec.utility.metric) == "higher" else 1.0
        scored = []
        for mechanism in options:
            try:
                scored.append((sign * mechanism.expected_utility(spec.utility).value, mechanism))
            except DpoptError as exc:
                skipped.append(f"{mechanism._label()}: {exc}")
        if not scored:
            raise CalibrationError(
                "no generalized Gaussian variant predicts this utility (" + "; ".join(skipped) + ")"
            )
        exact = [item for item in scored if item[1].exact_noise]
        floating = [item for item in scored if not item[1].exact_noise]
        best_value, best = min(exact or scored, key=lambda item: item[0])
        stated = []
        if exact and floating:
            value, rival = min(floating, key=lambda item: item[0])
            best.stated_cost = exact_cost(spec.utility.metric, sign * best_value, sign * value)
            stated = [f"exact is the default: against the best floating-point option, {rival._label()}, "
                      + cost_text(best.stated_cost)]
        best._design_notes = [
            f"chosen by predicted {spec.utility.metric} among: "
            + ", ".join(f"{m._label()} ({sign * v:.6g})" for v, m in scored)
            + ("; not calibrated: " + "; ".join(skipped) if skipped else "")
        ] + stated
        return best

    @classmethod
    def _options(cls, problem: Problem) -> tuple[list[GeneralizedGaussianMechanism], list[str]]:
        """Every calibrated (p, variant) for the spec, and the reasons the others were skipped."""
        spec, space = problem.spec, problem.space
        target = spec.privacy.parameters
        d = space.dimension
        if spec.privacy.definition in TARGETS:
            scales, skipped = target_scales(problem)
            options = [cls(p, b, d, "unbounded", calibration) for p, b, calibration in scales]
            return options + cls._target_lattice_options(problem, scales, skipped), skipped
        laplace = laplace_scale_for(target["epsilon"], space.l1)
        skipped: list[str] = []
        refusal = lattice_refusal(problem)
        options = []
        if refusal is None:
            try:
                options.append(cls._lattice_option(1, laplace, problem))
            except CalibrationError as exc:
                skipped.append(f"p=1 on the lattice: {exc}")
        else:
            skipped.append(f"the exact lattice measurement: {refusal}")
        if not options:
            options.append(cls(1, laplace, d, "unbounded", "laplace"))
        eps = float_below(target["epsilon"])  # the calibrations below meet the decimal written (core.decimals)
        if spec.privacy.definition == "pdp":
            delta = float_below(target["delta"])
            magnitudes = difference_magnitudes(space)
            for p in PDP_SHAPES[1:]:
                if refusal is None:
                    try:
                        start = gg_pdp_scale_disjoint(eps, delta, p, float(space.linf))
                        options.append(cls._lattice_option(p, start, problem))
                        continue
                    except CalibrationError as exc:
                        skipped.append(f"p={p} on the lattice: {exc}")
                try:
                    options.append(cls._pdp_option(p, eps, delta, space, magnitudes))
                except CalibrationError as exc:
                    skipped.append(f"p={p}: {exc}")
            return options, skipped
        box = answer_bounds(spec, problem.query)
        if box is None:
            skipped.append("bounded variants: the spec implies no public box for the answers")
            return options, skipped
        if spec.utility.workload is not None:
            skipped.append("bounded variants: no worst-case prediction for a workload")
            return options, skipped
        lower, upper = box
        rows = difference_magnitudes(space).rows
        widths = upper - lower
        options.append(cls(1, laplace, d, "boundary_inflated", "clamped_laplace", lower, upper))
        for variant, shapes in (("truncated", TRUNCATED_SHAPES), ("boundary_inflated", BIT_SHAPES)):
            for p in shapes:
                try:
                    b = tight_scale(eps, variant, p, widths, rows)
                except CalibrationError as exc:
                    skipped.append(f"{variant} p={p}: {exc}")
                    continue
                options.append(cls(p, b, d, variant, "certified_bound", lower, upper))
        options += cls._box_lattice_options(problem, options, skipped)
        return options, skipped

    @classmethod
    def _box_lattice_options(cls, problem: Problem, options: list, skipped: list[str]) -> list:
        """The truncated discrete GG on the lattice box of a bounded mean, one per truncated shape calibrated above
        whose continuous prediction is within :data:`BOX_SHORTLIST` of the best continuous truncated option's
        (:mod:`dpopt.mechanisms.generalized_gaussian_lattice`), or the reason in ``skipped``."""
        refusal = box_lattice_refusal(problem)
        if refusal is not None:
            skipped.append(f"the exact lattice box: {refusal}")
            return []
        out = []
        utility = problem.spec.utility
        sign = -1.0 if better(utility.metric) == "higher" else 1.0
        values = {}
        for option in options:
            try:
                values[id(option)] = sign * option.expected_utility(utility).value
            except DpoptError:  # design cannot score it either
                values[id(option)] = math.inf
        truncated = [o for o in options if o.variant == "truncated"]
        best = min((values[id(o)] for o in truncated), default=math.inf)
        eps = problem.spec.privacy.parameters["epsilon"]
        for option in truncated:
            if values[id(option)] > best + BOX_SHORTLIST * abs(best):
                skipped.append(f"truncated p={option.p} on the lattice box: its continuous prediction is more than "
                               f"{BOX_SHORTLIST:.0%} from the best truncated option's")
                continue
            try:
                lattice = box_lattice(problem, option.scale)
                s = box_lattice_scale(option.p, lattice, option.scale, eps)
            except CalibrationError as exc:
                skipped.append(f"truncated p={option.p} on the lattice box: {exc}")
                continue
            out.append(cls(option.p, float(s * lattice.unit), option.dimension, "truncated", "lattice_box",
                           option.lower, option.upper, lattice_scale=s, sum_lattice=lattice))
        return out

    @classmethod
    def _target_lattice_options(cls, problem: Problem, scales: list, skipped: list[str]) -> list:
        """The exact measurements on counts under (ε, δ), ρ-zCDP or μ-GDP: p = 1, 2 and, under (ε, δ), p = 3, 4, each
        started at the continuous scale of its shape (of p = 2 when that shape was not calibrated), or the reason in
        ``skipped``. Under (ε, δ) and ρ-zCDP, for a metric that grows with the scale, the shapes are calibrated in
        the order of their values at the scale floors on ℤ (:func:`_lattice_floor_values`), and a shape whose floor
        value is no better than an exact option already calibrated is not calibrated (it cannot be chosen: its
        value is at least its floor's): a person's moves make a shape's calibration a convolution per move pattern
        (the discrete Laplace under ρ-zCDP on ``specs/visits_person_level.yaml`` replace-one: 25 s)."""
        refusal = lattice_refusal(problem)
        if refusal is not None:
            skipped.append(f"the exact lattice measurement: {refusal}")
            return []
        starts = {p: b for p, b, _ in scales}
        shapes = PDP_SHAPES if problem.spec.privacy.definition == "approx" else PDP_SHAPES[:2]
        utility = problem.spec.utility
        sign = -1.0 if better(utility.metric) == "higher" else 1.0
        floors = cls._lattice_floor_values(problem)
        out, best = [], None
        for p in sorted(shapes, key=lambda p: sign * floors.get(p, -sign * math.inf)):
            start = starts.get(p, starts.get(2))
            if start is None:
                skipped.append(f"p={p} on the lattice: no continuous scale to start from")
                continue
            if p in floors and best is not None and sign * floors[p] >= sign * best:
                skipped.append(f"p={p} on the lattice: at its scale floor {utility.metric} "
                               f"{_BOUND_WORDS[sign]} {floors[p]:.6g}, no better than {best:.6g} (not calibrated)")
                continue
            try:
                option = cls._lattice_option(p, start, problem)
            except CalibrationError as exc:
                skipped.append(f"p={p} on the lattice: {exc}")
                continue
            out.append(option)
            if p in floors:
                value = cls._best_value([option], utility)
                if value is not None and (best is None or sign * value < sign * best):
                    best = value
        return out

    @classmethod
    def _lattice_floor_values(cls, problem: Problem) -> dict[int, float]:
        """{p: the predicted value of the discrete GG of shape p at its scale floor on ℤ}
        (:func:`~dpopt.mechanisms.generalized_gaussian_bound.target_floors`), for a metric in
        SCALE_MONOTONE_METRICS under (ε, δ) or ρ-zCDP; the shapes whose value is not a closed form or the discrete
        law's sum left out (every shape when no floor is proven)."""
        spec = problem.spec
        if spec.privacy.definition not in ("approx", "zcdp") or spec.utility.metric not in SCALE_MONOTONE_METRICS:
            return {}
        floors = target_floors(problem)
        out = {}
        for p, scale, on_integers in floors or ():
            if on_integers:
                at_floor = cls(p, scale, problem.space.dimension, "unbounded", "scale_lower_bound",
                               lattice_scale=Fraction(scale))
                value = cls._best_value([at_floor], spec.utility)
                if value is not None:
                    out[p] = value
        return out

    @classmethod
    def _lattice_option(cls, p: int, start: float, problem: Problem) -> GeneralizedGaussianMechanism:
        """The exact measurement on counts of shape p, its scale from the continuous ``start``
        (:func:`~dpopt.mechanisms.generalized_gaussian_lattice.lattice_scale`)."""
        s = lattice_scale(p, start, problem)
        return cls(p, float(s), problem.space.dimension, "unbounded",
                   lattice_calibration(p, problem.spec.privacy.definition), lattice_scale=s)

    @classmethod
    def _pdp_option(cls, p, eps, delta, space, magnitudes) -> GeneralizedGaussianMechanism:
        d = space.dimension
        if p == 2:
            b = math.sqrt(2.0) * gaussian_pdp_sigma(eps, delta, space.l2)
            b = nudge_until(b, lambda s: lemma10_bound(s, eps, space.l2_squared) <= delta, up=True)
            return cls(2, b, d, "unbounded", "lemma10")
        if magnitudes.disjoint:
            b = gg_pdp_scale_disjoint(eps, delta, p, float(space.linf))
            b = nudge_until(b, lambda s: gg_pdp_bound_disjoint_mp(s, eps, p, space.linf) <= delta, up=True)
            return cls(p, b, d, "unbounded", "corollary8")
        coordinates = sum(len(profile) for profile in magnitudes.profiles())
        if coordinates > MAX_MONTE_CARLO_COORDINATES:
            raise CalibrationError(f"the Monte Carlo calibration (Corollary 7) would draw {PDP_MONTE_CARLO_DRAWS} "
                                   f"times {coordinates} moving coordinates (limit {MAX_MONTE_CARLO_COORDINATES})")
        power, _ = lp_sensitivity_power(space, p)
        result = gg_pdp_scale_monte_carlo(eps, delta, p, magnitudes.profiles(), lp_power=float(power))
        return cls(
            p,
            result.scale,
            d,
            "unbounded",
            "corollary7_monte_carlo",
            monte_carlo={"seed": result.seed, "draws": result.draws, "confidence": result.confidence},
        )

    @classmethod
    def from_parameters(cls, parameters: dict,
                        space: SensitivitySpace) -> GeneralizedGaussianMechanism | OnDecimalLattice:
        if "lattice_scale" in parameters:
            return OnDecimalLattice.from_parameters(parameters, space, cls)
        if parameters["calibration"] not in CALIBRATIONS:  # the label decides the caveats a certificate carries
            raise ValueError(f"unknown calibration {parameters['calibration']!r}")
        return cls(
            parameters["p"],
            parameters["scale"],
            space.dimension,
            parameters["variant"],
            parameters["calibration"],
            parameters.get("lower"),
            parameters.get("upper"),
            parameters.get("monte_carlo"),
            None if "scale_exact" not in parameters else Fraction(parameters["scale_exact"]),
            None if "sum_lattice" not in parameters else RealLattice.from_dict(parameters["sum_lattice"]),
            stated_cost=parameters.get(EXACT_COST_KEY),
        )

    @property
    def parameters(self) -> dict:
        out: dict = {
            "p": self.p,
            "scale": self.scale,
            "variant": self.variant,
            "calibration": self.calibration,
        }
        if self.variant != "unbounded":
            out["lower"] = self.lower.tolist()
            out["upper"] = self.upper.tolist()
        if self.monte_carlo:
            out["monte_carlo"] = dict(self.monte_carlo)
        if self.lattice_scale is not None:
            out["scale_exact"] = str(self.lattice_scale)
            out["sampler"] = "exact"
        if self.sum_lattice is not None:
            out["sum_lattice"] = self.sum_lattice.to_dict()
        if self.stated_cost is not None:
            out[EXACT_COST_KEY] = dict(self.stated_cost)
        return out

    def _label(self) -> str:
        kind = self.variant
        if self.lattice_scale is not None:
            kind = "truncated on the lattice box (exact)" if self.sum_lattice is not None else "discrete (exact)"
        return f"{kind} p={self.p} b={self.scale:.6g}"

    # --------------------------------------------------------------- privacy
    def _privacy_checks(self, space: SensitivitySpace, privacy: Privacy) -> list[Check]:
        definition, target = privacy.definition, privacy.parameters
        if self.sum_lattice is not None:
            if definition != "pure":
                return [Check("privacy", "truncated discrete GG", False,
                              "the lattice box is certified for pure ε only")]
            return box_lattice_checks(self.p, self.lattice_scale, self.sum_lattice, target["epsilon"])
        if self.lattice_scale is not None:
            return [lattice_privacy_check(self.p, self.lattice_scale, space, privacy)]
        if definition in TARGETS and self.variant == "unbounded":
            return [target_check(self.p, self.scale, space, privacy)]
        if definition not in ("pure", "pdp"):
            return [Check("privacy", "generalized Gaussian", False,
                          f"no {definition} calibration for the {self.variant} variant")]
        eps = target["epsilon"]
        if self.p == 1 and self.variant != "truncated":
            ratio = laplace_epsilon(space.l1, self.scale)
            post = " followed by clamping to the box (post-processing)" if self.variant != "unbounded" else ""
            return [
                Check(
                    "privacy",
                    f"exact rational check Δ₁/b ≤ ε (Laplace noise is ε-DP{post}"
                    + ("; pure ε-DP implies (ε, δ)-pDP" if definition == "pdp" else "")
                    + ")",
                    ratio <= written(eps),
                    f"Δ₁/b = {float(ratio):.17g} vs ε = {eps}",
                )
            ]
        if self.variant != "unbounded":
            if definition != "pure":
                return [
                    Check(
                        "privacy",
                        "bounded generalized Gaussian",
                        False,
                        "bounded variants are certified for pure ε only",
                    )
                ]
            return bounded_checks(self.variant, self.scale, self.p, self.lower, self.upper, space, eps)
        if definition == "pure":
            return [
                Check(
                    "privacy",
                    "Claim 4 (Liu 2019)",
                    False,
                    f"unbounded GG noise with p = {self.p} ≠ 1 is not ε-DP for any b",
                )
            ]
        return [pdp_check(self.scale, self.p, self.monte_carlo, space, eps, target["delta"])]

    def scope_checks(self, problem: Problem) -> list[Check]:
        """The lattice's or the box's scope (:meth:`_box_checks`), and the stated cost of exactness re-checked
        (:func:`~dpopt.mechanisms.exact_cost.stated_cost_check`)."""
        checks = self._box_checks(problem)
        if self.stated_cost is not None:
            checks.append(stated_cost_check(self.stated_cost, problem.spec.utility.metric,
                                            self.expected_utility(problem.spec.utility).value))
        return checks

    def _box_checks(self, problem: Problem) -> list[Check]:
        if self.lattice_scale is not None and self.sum_lattice is None:
            return [lattice_scope_check(problem)]
        if self.variant == "unbounded":
            return []
        lattice = [] if self.sum_lattice is None else [real_lattice_scope_check(problem, self.sum_lattice)]
        box = answer_bounds(problem.spec, problem.query)
        same = box is not None and np.array_equal(box[0], self.lower) and np.array_equal(box[1], self.upper)
        return [
            Check(
                "mechanism.box",
                "the box of the bounded variant equals the public bounds the spec implies for the answers",
                same,
                "box from the spec: "
                + ("none" if box is None else f"[{box[0].min():g}, {box[1].max():g}] per coordinate"),
            )
        ] + lattice

    def privacy_summary(self, space: SensitivitySpace) -> dict:
        if self.sum_lattice is not None:
            lo, hi = box_units(self.sum_lattice)
            bound = truncated_loss_bound(self.p, self.lattice_scale, hi - lo + 1, self.sum_lattice.shift)
            return {"epsilon_bound": bound, "conversion": "certified worst-case privacy loss on the lattice box"}
        if self.lattice_scale is not None:
            if self.p > 1:
                return lattice_target_summary(self.p, self.lattice_scale, space, self.calibration)
            eps = Fraction(space.l1) / self.lattice_scale
            return {"epsilon": float(eps), "epsilon_exact": str(eps),
                    "conversion": "discrete Laplace on ℤ: ε = Δ₁/s exactly (pure ε-DP, hence (ε, δ)-pDP for every δ)"}
        if self.variant == "truncated" or (self.variant == "boundary_inflated" and self.p > 1):
            bound, _ = worst_case_loss(
                self.variant, self.scale, self.p, self.upper - self.lower, difference_magnitudes(space).rows
            )
            return {"epsilon_bound": bound, "conversion": "certified worst-case privacy loss on the box"}
        if self.p == 1:
            eps = float(laplace_epsilon(space.l1, self.scale))
            return {
                "epsilon": eps,
                "conversion": "Laplace noise: ε = Δ₁/b (pure ε-DP, hence (ε, δ)-pDP for every δ)",
            }
        if self.p == 2:
            mu = math.sqrt(2.0) * space.l2 / self.scale
            return {
                "mu": mu,
                "rho": mu * mu / 2.0,
                "conversion": "GG(0, b, 2) = N(0, b²/2): exactly μ-GDP with μ = √2 Δ₂/b, μ²/2-zCDP",
            }
        return {}

    def notes(self) -> list[str]:
        if self.sum_lattice is not None:
            lat = self.sum_lattice
            lo, hi = box_units(lat)
            return list(self._design_notes) + [
                BOX_NOTE.format(g=f"2^{lat.exponent}", lo=lo, hi=hi, scale=self.lattice_scale, divisor=lat.divisor,
                                shift=lat.shift),
                "truncated noise on the box: the released values stay in the box; the noise depends on the true answer "
                "(predicted utility is the worst case over every lattice answer in the box; sample() draws noise for "
                "the lattice answer at the box centre)"]
        if self.lattice_scale is not None:
            notes = list(self._design_notes) + [LATTICE_NOTE.format(scale=self.lattice_scale)]
            return notes + ([PDP_CAVEAT] if self.calibration == "lattice_pdp" else [])
        notes = super().notes() + list(self._design_notes)
        if self.variant != "unbounded":
            notes.append(
                f"{self.variant} noise on the box: the released values stay in the box; the noise depends "
                "on the true answer (predicted utility is the worst case over answers in the box; sample() "
                "draws noise for an answer at the box centre)"
            )
        if self.calibration == "corollary7_monte_carlo":
            mc = self.monte_carlo
            notes.append(
                f"the pDP level is certified statistically: Monte Carlo with seed {mc['seed']}, "
                f"{mc['draws']} draws per profile, Clopper–Pearson at confidence {mc['confidence']}"
            )
        if self.calibration in ("lemma10", "corollary8", "corollary7_monte_carlo"):
            notes.append(PDP_CAVEAT)
        return notes

    # ----------------------------------------------------------------- noise
    def _centre(self) -> np.ndarray:
        return 0.5 * (self.lower + self.upper)

    def _bounded_noise(self, rng: np.random.Generator, value: np.ndarray, size: int) -> np.ndarray:
        lo, hi = self.lower - value, self.upper - value
        if self.variant == "truncated":
            return self.noise.sample_truncated(rng, lo, hi, (size, self.dimension))
        return np.clip(self.noise.sample(rng, (size, self.dimension)), lo, hi)

    def noise_law(self) -> ProductLaw | str:
        """The law of the emitted noise, for the second route of ``dpopt verify`` (:mod:`dpopt.noise.law`)."""
        if self.lattice_scale is not None and self.sum_lattice is None:
            return ProductLaw.iid(DiscreteGeneralizedGaussianMarginal(self.lattice_law), self.dimension,
                                  f"discrete GG on ℤ^d, s = {self.lattice_scale}, p = {self.p}")
        if self.variant != "unbounded":
            return (f"the {self.variant} generalized Gaussian's noise depends on the true answer (it is not "
                    "additive noise independent of the data)")
        n = self.noise
        marginal = NoiseObjectMarginal(n, ("generalized_gaussian", n.p, n.scale), n.scale, log_concave=n.p >= 1,
                                       tail=n.sf)
        return ProductLaw.iid(marginal, self.dimension, f"GG(0, b, p)^d, b = {n.scale:.17g}, p = {n.p}")

    def _box_noise(self, rng: np.random.Generator, units: np.ndarray) -> np.ndarray:
        """Integer noise K for each integer answer N of the lattice box, conditioned on N + K in the box."""
        lo, hi = box_units(self.sum_lattice)
        return self.lattice_law.sample_box(rng, lo - units, hi - units)

    def _sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        if self.sum_lattice is not None:
            lo, hi = box_units(self.sum_lattice)
            noise = self._box_noise(rng, np.full(size, (lo + hi) // 2, dtype=np.int64))
            return (noise.astype(float) * float(self.sum_lattice.unit)).reshape(size, 1)
        if self.lattice_scale is not None:
            return self.lattice_law.sample(rng, size * self.dimension).reshape(size, self.dimension).astype(float)
        if self.variant == "unbounded":
            return self.noise.sample(rng, (size, self.dimension))
        return self._bounded_noise(rng, self._centre(), size)

    def _release(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Releases at the true answers (rows of ``values``); bounded variants draw the noise
        around each answer, so that every output lies in the box.

        Raises
        ------
        DataError
            For a bounded variant, when an answer lies outside the box (the data do not fit the spec).
        """
        if self.sum_lattice is not None:
            units = self.sum_lattice.units(values)
            lo, hi = box_units(self.sum_lattice)
            if np.any(units < lo) or np.any(units > hi):
                raise DataError(
                    "the true answer lies outside the public box the spec implies; the data do not fit the spec"
                )
            return self.sum_lattice.answers(units + self._box_noise(rng, units))
        if self.lattice_scale is not None:
            counts = integer_answers(values)
            noise = self.lattice_law.sample(rng, counts.size).reshape(counts.shape)
            return (counts + noise).astype(float)
        if self.variant == "unbounded":
            return super()._release(values, rng)
        if np.any(values < self.lower) or np.any(values > self.upper):
            raise DataError(
                "the true answer lies outside the public box the spec implies; the data do not fit the spec"
            )
        return values + self._bounded_noise(rng, values, values.shape[0])

    # --------------------------------------------------------------- utility
    _centre_only = False
    """True for :meth:`utility_bound`'s options: the value at the centre of the box only."""

    def _box_worst(self, quantity: str, gamma: float | None = None) -> np.ndarray:
        """The worst value over every lattice answer in the box (:meth:`DiscreteGeneralizedGaussian.box_moments`),
        in answer units."""
        lo, hi = box_units(self.sum_lattice)
        unit = float(self.sum_lattice.unit)
        moments = self.lattice_law.box_moments(hi - lo + 1, None if gamma is None else gamma / unit)
        values = moments[quantity]
        worst = values.min() if quantity == "within" else values.max()
        power = {"square": 2, "variance": 2, "abs": 1, "within": 0}[quantity]
        return np.array([worst * unit**power])

    def _coordinate_worst(self, quantity: str, gamma: float | None = None) -> np.ndarray:
        """Per coordinate, the worst value over true answers in the box (grid of offsets;
        the noise law is symmetric under s ↦ R − s, so offsets in [0, R/2] suffice)."""
        widths = self.upper - self.lower
        out = np.empty(self.dimension)
        cache: dict[float, float] = {}
        for k, w in enumerate(widths):
            if w not in cache:
                s = np.array([w / 2.0]) if self._centre_only else np.linspace(0.0, w / 2.0, _WORST_CASE_GRID)
                values = self._moments(quantity, s, w, gamma)
                cache[w] = float(values.min() if quantity == "usefulness" else values.max())
            out[k] = cache[w]
        return out

    def _moments(self, quantity: str, s: np.ndarray, width: float, gamma: float | None) -> np.ndarray:
        """E|e|, E e², Var e or P(|e| ≤ γ) of the noise for a true answer at offset s from the lower bound."""
        g = self.noise
        lo, hi = -s, width - s
        inside = g.interval_probability(lo, hi)
        truncated = self.variant == "truncated"
        below, above = g.cdf(lo), g.sf(hi)
        if quantity == "usefulness":
            core = g.interval_probability(np.maximum(-gamma, lo), np.minimum(gamma, hi))
            if truncated:
                return core / inside
            return core + np.where(s <= gamma, below, 0.0) + np.where(width - s <= gamma, above, 0.0)

        def moment(m: int) -> np.ndarray:
            core = g.partial_abs_moment(m, lo, hi)
            if truncated:
                return core / inside
            return core + s**m * below + (width - s) ** m * above

        if quantity == "abs":
            return moment(1)
        if quantity == "square":
            return moment(2)
        signed = g.partial_abs_moment(1, 0.0, hi) - g.partial_abs_moment(1, lo, 0.0)
        mean = signed / inside if truncated else signed - s * below + (width - s) * above
        return moment(2) - mean**2

    def _lattice_moments_at(self, gamma: float | None = None) -> dict:
        """The discrete law's moments (exact sums with a proven tail, :meth:`DiscreteGeneralizedGaussian.moments`)."""
        if gamma not in self._lattice_moments:
            self._lattice_moments[gamma] = self.lattice_law.moments(gamma)
        return self._lattice_moments[gamma]

    def _closed_form_method(self) -> str:
        if self.sum_lattice is not None:
            return ("worst case over every lattice answer in the box: finite sums of the truncated discrete law "
                    "(double precision)")
        if self.lattice_scale is not None:
            return ("the discrete law's moments: exact sums over |k| ≤ R in 128-bit arb arithmetic plus a proven "
                    "tail bound below 2^-80")
        if self.variant != "unbounded":
            return f"worst case over true answers in the box (closed forms on a {_WORST_CASE_GRID}-point grid)"
        return super()._closed_form_method()

    def _expected_l2(self, workload: np.ndarray | None) -> float:
        if self.sum_lattice is not None and workload is None:
            return float(np.sum(self._box_worst("square")))
        if self.lattice_scale is not None and self.sum_lattice is None:
            frob = self.dimension if workload is None else float(np.sum(workload**2))
            return self._lattice_moments_at()["second_moment"] * frob
        if self.variant != "unbounded":
            if workload is not None:
                raise UnsupportedSpecError(
                    "utility.workload", "bounded GG variants have no worst-case workload prediction"
                )
            return float(np.sum(self._coordinate_worst("square")))
        frob = self.dimension if workload is None else float(np.sum(workload**2))
        return self.noise.var * frob

    def _expected_l1(self) -> float:
        if self.sum_lattice is not None:
            return float(np.sum(self._box_worst("abs")))
        if self.lattice_scale is not None:
            return self._lattice_moments_at()["mean_abs"] * self.dimension
        if self.variant != "unbounded":
            return float(np.sum(self._coordinate_worst("abs")))
        return self.noise.mean_abs * self.dimension

    def _usefulness(self, gamma: float) -> float:
        if self.sum_lattice is not None:
            return float(np.mean(self._box_worst("within", gamma)))
        if self.lattice_scale is not None:
            return self._lattice_moments_at(gamma)["within"]
        if self.variant != "unbounded":
            return float(np.mean(self._coordinate_worst("usefulness", gamma)))
        return float(1.0 - self.noise.tail(gamma))

    def _max_variance(self) -> float:
        if self.sum_lattice is not None:
            return float(np.max(self._box_worst("variance")))
        if self.lattice_scale is not None:
            return self._lattice_moments_at()["second_moment"]
        if self.variant != "unbounded":
            return float(np.max(self._coordinate_worst("variance")))
        return self.noise.var
