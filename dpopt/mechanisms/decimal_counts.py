r"""A counting family's exact design measured on the decimal lattice (``k_norm``, ``r2dp``, ``generalized_gaussian``).

A ``linear`` query with decimal weights W = M/D (D the least common denominator of the weights as written, M = D·W
an integer matrix: :func:`~dpopt.mechanisms.decimal_lattice.lattice_scale`) has on whole counts x the integer
answers k = Mx, and neighbouring k differ by the integer moves MΔ = D·WΔ. So the family's counting path (its
discrete law on ℤ^d, its calibration and its exact privacy checks) applies unchanged to the **scaled problem**: the
query M, the sensitivity space D·S (:func:`scaled_space`: the listed moves WΔ times D, each checked to be an integer
vector, the largest ‖D·WΔ‖² equal to the Δ_D² that :func:`lattice_scale` derives on M itself). The release is

.. math:: \tilde y = (k + z)/D, \qquad k = D\cdot Wx \in \mathbb{Z}^d,

z the family's integer noise for the moves D·S, k + z in int64 (:func:`~dpopt.mechanisms.decimal_lattice.
scaled_answers` recovers k exactly from the answers computed as k/D), then divided by D: post-processing of an exact
integer measurement, so no floating-point number touches the noise. **Privacy**: the output is a bijective image of
k + z and the neighbouring k differ by D·S, so the scaled design's guarantee (its checks, run on D·S) is the
release's. **Utility**: the noise is z/D: E‖WZ‖² and max Var divided by D², E‖Z‖₁ by D, the usefulness at γ is the
scaled design's at γD, and a confidence region's volume (of dimension s, the rank of the span) is divided by D^s;
``kl`` and ``renyi`` are the scaled design's at the prior and floor times D (the proportions of the clipped release
are the same draw by draw), ``mallows`` the scaled design's at the prior times D, divided by D (W_p(Dμ, Dν) =
D·W_p(μ, ν)), and ``test_power`` the scaled design's against the alternative times D (the tests correspond through
the bijection y ↦ y/D): :func:`~dpopt.mechanisms.decimal_lattice.scaled_utility` derives each.

``dpopt verify`` re-derives D and Δ_D² from the spec (:func:`~dpopt.mechanisms.decimal_lattice.scale_check`; a
forged ``lattice_scale`` makes D·S non-integral or of another Δ_D², and the certificate fails to rebuild), runs the
family's own checks on D·S and the scaled spec, and re-derives the stated cost of exactness. The family's
parameters are recorded as they are on counts, in units of the integers k (noise scales, bounds, and its own
``exact_cost`` when it states one: both values in units of k, their ratio the same as in answer units);
``lattice_scale`` (D) and ``lattice_l2_squared`` (Δ_D²) are added. A family that states no cost of its own (at the
top level or in its design record) gets ``exact_cost`` against its floating-point design for the spec (``sampler: floating_point``), in answer
units, with ``exact_cost_rival`` saying so.

Scope: the metrics of :data:`DECIMAL_METRICS` (the ones whose scaling by D is above), no invariants, no privacy
unit (:func:`lattice_scale`'s), and a scaled design that is itself exact (otherwise the floating-point design for
the original spec is kept).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from dpopt.core.checks import Check
from dpopt.errors import CalibrationError
from dpopt.mechanisms.base import Mechanism, UtilityValue, registry
from dpopt.mechanisms.decimal_lattice import (
    DecimalScale,
    in_answer_units,
    lattice_scale,
    scale_check,
    scaled_answers,
    scaled_utility,
    unit_power,
)
from dpopt.mechanisms.exact_cost import EXACT_COST_CLAIM, EXACT_COST_KEY, cost_text, exact_cost, same_cost
from dpopt.problem import Problem
from dpopt.sensitivity.space import SensitivitySpace
from dpopt.spec.models import Privacy, Utility

DECIMAL_METRICS = ("l2", "l1", "usefulness", "max_variance", "ci_volume", "test_power", "kl", "renyi", "mallows")
"""The metrics a scaled design predicts in answer units (module docstring; the options restated for k by
:func:`~dpopt.mechanisms.decimal_lattice.scaled_utility`)."""

DECIMAL_NOTE = ("decimal lattice: the answers Wx are measured as the integers k = D·Wx (D = {scale}, the least common "
                "denominator of the query's decimal weights) plus the family's exact integer noise for the integer "
                "moves D·WΔ (Δ_D² = {l2}), and released as (k + z)/D (post-processing); the design's parameters are "
                "in units of k")

DECIMAL_KEYS = ("lattice_scale", "lattice_l2_squared", "exact_cost_rival")
"""The keys this module adds to a family's parameters (removed before the family rebuilds its own design)."""

COST_RIVAL = "the family's floating-point design for the spec (sampler: floating_point), in answer units"
"""``exact_cost_rival``: recorded when the ``exact_cost`` is this module's, not the family's own."""

DECIMAL_LAW = ("no noise law stated on the decimal lattice: the released noise z/D lives on (1/D)ℤ^d (the scaled "
               "design's law, divided by D)")


def decimal_reason(problem: Problem) -> DecimalScale | str:
    """The decimal lattice on which a counting family measures the spec exactly, or why it does not."""
    spec = problem.spec
    if spec.sampler == "floating_point":
        return "the spec asks for sampler: floating_point"
    if spec.utility.metric not in DECIMAL_METRICS:
        return f"the {spec.utility.metric} metric is not scaled to the decimal lattice"
    return lattice_scale(problem)


def scaled_space(space: SensitivitySpace, scale: DecimalScale) -> SensitivitySpace:
    """D·S: :meth:`DecimalScale.scaled_space <dpopt.mechanisms.decimal_lattice.DecimalScale.scaled_space>` (the listed
    moves times D, integer vectors whose largest ‖·‖² is the recorded Δ_D², with their exact norms; the span is the
    same).

    Raises
    ------
    ValueError
        A move that is not a point of the decimal lattice, shifts of another Δ_D², or a space that is not listed.
    """
    if space.listed() is None:
        raise ValueError("the sensitivity space cannot be listed (no integer moves D·WΔ)")
    return scale.scaled_space(space)


def scaled_problem(problem: Problem, scale: DecimalScale) -> Problem:
    """The problem of the integers k = D·Wx: the query M = D·W (spec and compiled query), the space D·S, and the
    utility's options restated for k (:func:`~dpopt.mechanisms.decimal_lattice.scaled_utility`: γ, the alternative,
    the prior and the floor times D)."""
    spec, query = problem.spec, problem.query
    _, integer = query.scale
    utility = scaled_utility(spec.utility, scale.scale)
    scaled_spec = spec.model_copy(update={"query": spec.query.model_copy(update={"matrix": integer.tolist()}),
                                          "utility": utility})
    return replace(problem, spec=scaled_spec, query=replace(query, user_matrix=integer.astype(float)),
                   space=scaled_space(problem.space, scale))


class OnDecimalLattice(Mechanism):
    """A counting family's exact design for D·S, released as (k + z)/D (module docstring). Not a family of its own:
    it carries the family's name, and the family's ``design`` and ``from_parameters`` build it."""

    needs_integer_answers = True
    integer_noise = False

    def __init__(self, inner: Mechanism, decimal: DecimalScale, rank: int, stated_cost: dict | None = None):
        self.inner = inner
        self.decimal = decimal
        self.rank = int(rank)
        self.stated_cost = stated_cost
        self.family = inner.family
        self.title = f"{inner.title}, on the decimal lattice"
        self.dimension = inner.dimension
        self.noise_in_span = inner.noise_in_span

    # ------------------------------------------------------------------ design
    @classmethod
    def supports(cls, problem: Problem) -> str | None:
        found = decimal_reason(problem)
        return found if isinstance(found, str) else None

    @classmethod
    def design(cls, problem: Problem, family: type[Mechanism] | None = None) -> OnDecimalLattice:
        """``family`` (default: the spec's ``mechanism``) designed for the scaled problem.

        Raises
        ------
        CalibrationError
            No decimal lattice, or a scaled design that is not exact.
        """
        name = problem.spec.mechanism
        if family is None and not (isinstance(name, str) and name in registry()):
            raise CalibrationError(f"no exact design on the decimal lattice: the spec names no family ({name!r})")
        found = cls.measured(problem, family or registry()[name])
        if isinstance(found, str):
            raise CalibrationError(f"no exact design on the decimal lattice: {found}")
        return found

    @classmethod
    def measured(cls, problem: Problem, family: type[Mechanism]) -> OnDecimalLattice | str:
        """``family``'s design for the scaled problem, released on the decimal lattice, or why there is none (the
        family then keeps its floating-point design for ``problem``)."""
        found = decimal_reason(problem)
        if isinstance(found, str):
            return found
        try:
            scaled = scaled_problem(problem, found)
        except ValueError as exc:  # moves that cannot be listed
            return f"no integer moves D·WΔ: {exc}"
        try:
            inner = family.design(scaled)
        except CalibrationError as exc:
            return f"the scaled design failed: {exc}"
        if not inner.exact_noise:
            why = getattr(inner, "refusal", None)
            return "the scaled design is not exact" + (f" ({why})" if why else "")
        mechanism = cls(inner, found, problem.space.rank)
        if not _states_cost(inner.parameters):
            mechanism.stated_cost = mechanism._cost(problem)
        return mechanism

    @classmethod
    def bound(cls, problem: Problem, family: type[Mechanism]) -> float | None:
        """``family``'s utility bound for the scaled problem in answer units (None without one, or without a
        decimal lattice): a bound on the scaled design's value bounds the release's, divided by D to the same
        power."""
        found = decimal_reason(problem)
        if isinstance(found, str) or problem.space.listed() is None:
            return None
        scaled = family.utility_bound(scaled_problem(problem, found))
        metric = problem.spec.utility.metric
        return None if scaled is None else scaled / float(found.scale) ** unit_power(metric, problem.space.rank)

    def _cost(self, problem: Problem) -> dict:
        """:func:`~dpopt.mechanisms.exact_cost.exact_cost` against the family's floating-point design for the spec."""
        spec = problem.spec
        rival = type(self.inner).design(problem.restated(spec.model_copy(update={"sampler": "floating_point"})))
        return exact_cost(spec.utility.metric, self.expected_utility(spec.utility).value,
                          rival.expected_utility(spec.utility).value)

    # ------------------------------------------------------------------ record
    @classmethod
    def from_parameters(cls, parameters: dict, space: SensitivitySpace,
                        family: type[Mechanism] | None = None) -> OnDecimalLattice:
        """The recorded design of ``family`` rebuilt on D·S.

        Raises
        ------
        ValueError
            No family, no ``lattice_scale``, or a space whose moves times D are not the recorded integer moves.
        """
        decimal = DecimalScale.from_parameters(parameters)
        if family is None or decimal is None:
            raise ValueError("a decimal-lattice design needs its family and its recorded lattice_scale")
        own = {key: value for key, value in parameters.items() if key not in DECIMAL_KEYS}
        stated = None
        if "exact_cost_rival" in parameters:
            stated = own.pop(EXACT_COST_KEY)
        inner = family.from_parameters(own, scaled_space(space, decimal))
        return cls(inner, decimal, space.rank, stated)

    @property
    def parameters(self) -> dict:
        out = {**self.inner.parameters, **self.decimal.parameters()}
        if self.stated_cost is not None:
            out |= {EXACT_COST_KEY: dict(self.stated_cost), "exact_cost_rival": COST_RIVAL}
        return out

    # ------------------------------------------------------------------ release
    def _sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return self.inner.sample(size, rng) / self.decimal.scale

    def _release(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """(k + z)/D: k recovered exactly (:func:`scaled_answers`), k + z by the family's integer release."""
        k = scaled_answers(values, self.decimal.scale).astype(float)
        return np.asarray(self.inner.release(k, rng), dtype=float) / self.decimal.scale

    def noise_law(self) -> str:
        return DECIMAL_LAW

    # ------------------------------------------------------------------ checks
    def _privacy_checks(self, space: SensitivitySpace, privacy: Privacy) -> list[Check]:
        """The family's checks on D·S (a space whose moves times D are not the recorded integer moves fails)."""
        try:
            scaled = scaled_space(space, self.decimal)
        except ValueError as exc:
            return [Check("mechanism.lattice", "the integer moves D·WΔ of the decimal lattice", False, str(exc))]
        return self.inner.privacy_checks(scaled, privacy)

    def scope_checks(self, problem: Problem) -> list[Check]:
        """D and Δ_D² re-derived from the spec (claim ``mechanism.lattice``), the family's other scope checks on the
        scaled problem, and the stated cost of exactness re-derived (its floating-point design re-solved)."""
        checks = [scale_check(problem, self.decimal)]
        found = lattice_scale(problem)
        if not isinstance(found, DecimalScale) or found != self.decimal:
            return checks
        # the family's own ``mechanism.lattice`` (its query counts) is the scaled query's, by construction: the
        # decimal lattice's check above stands for it under the one claim
        checks += [c for c in self.inner.scope_checks(scaled_problem(problem, found)) if c.claim != checks[0].claim]
        if self.stated_cost is not None:
            again = self._cost(problem)
            checks.append(Check(EXACT_COST_CLAIM, "the stated cost of exactness re-derived: this design's value and "
                                "the family's floating-point design's for the spec, re-solved",
                                same_cost(self.stated_cost, again), f"{cost_text(again)} re-derived; stated "
                                f"ratio {self.stated_cost.get('ratio')!r}"))
        return checks

    def privacy_summary(self, space: SensitivitySpace) -> dict:
        try:
            return self.inner.privacy_summary(scaled_space(space, self.decimal))
        except ValueError:
            return {}

    def notes(self) -> list[str]:
        notes = [*self.inner.notes(), DECIMAL_NOTE.format(scale=self.decimal.scale, l2=self.decimal.l2_squared)]
        if self.stated_cost is not None:
            notes.append(f"against the family's floating-point design (sampler: floating_point): "
                         f"{cost_text(self.stated_cost)}")
        return notes

    # ------------------------------------------------------------------ utility
    def _utility(self, utility: Utility) -> UtilityValue:
        if utility.metric not in DECIMAL_METRICS:
            raise CalibrationError(f"the {utility.metric} metric is not scaled to the decimal lattice")
        scaled = scaled_utility(utility, self.decimal.scale)
        return in_answer_units(self.inner.expected_utility(scaled), self.decimal.scale, self.rank)


def _states_cost(parameters: dict) -> bool:
    """Whether a family's parameters state its own cost of exactness (top level, or in its design record)."""
    return EXACT_COST_KEY in parameters or EXACT_COST_KEY in (parameters.get("design") or {})


__all__ = ["DECIMAL_METRICS", "OnDecimalLattice", "decimal_reason", "in_answer_units", "scaled_problem",
           "scaled_space"]
