r"""Staircase noise on a bounded sum or mean, measured exactly on a dyadic lattice.

The continuous design (:class:`~dpopt.mechanisms.staircase.StaircaseMechanism`: ε₀, step Δ₀ = Δ, the metric-optimal
g) is implemented on the lattice sum N of :mod:`dpopt.mechanisms.real_lattice` (units of h = 2^e), as the exact
``laplace`` and ``gaussian`` sums are (:mod:`dpopt.mechanisms.exact_sum`): the release is h(N + η)/n with η the
**discrete staircase** of :mod:`dpopt.noise.discrete_staircase` — the staircase density restricted to the lattice,
with

- the step m = Δ_u, the lattice sum's sensitivity in units of h (the rounding charged to it: at most one unit more
  than Δ/h), so that the step Δ₀ = m·h/n (answer units) covers every neighbouring move of N;
- the per-step ε' = ε₀ rounded **down** to a dyadic rational of 30 significant bits (the private side; 2⁻²⁹
  relative at most), the parameter of the sampler's Bernoulli(e^{−ε'}) and geometric law;
- the boundary g·Δ₀ on the lattice: g = r/m, the integer r ∈ {1, …, m} minimising the discrete law's closed-form
  metric (:func:`best_boundary`: every r when m ≤ :data:`EXHAUSTIVE_STEPS`, else the :data:`BOUNDARY_WINDOW`
  integers either side of g*·m, g* the continuous optimum at ε').

**Privacy.** Neighbours move N by at most Δ_u (integers, :func:`~dpopt.mechanisms.real_lattice.real_lattice`), and
the discrete staircase of step m is ε'-DP for every shift |t| ≤ m, Kε' for |t| ≤ Km (the module docstring of
:mod:`dpopt.noise.discrete_staircase`): the measurement is ε'⌈Δ_u/m⌉-DP exactly, converted to the spec's target as the
continuous design is (:func:`~dpopt.privacy.pure_conversion.pure_privacy_check`: ε-DP ⇒ (ε, δ), ρ-zCDP, μ-GDP
through randomized response). ``dpopt verify`` re-derives Δ_u from the spec at the stated h (``mechanism.lattice``),
rebuilds the law from the recorded ε', m and r (exact rationals and integers) and re-evaluates ε'⌈Δ_u/m⌉ against the
target in exact rational arithmetic. A continuous design whose ε₀ was raised on the continuous law's exact profile
(listed moves; never for a sum's or mean's space, which lists only its extremes) is not carried over: the lattice
design must pass the pure check, else the continuous one is kept and the note says why.

**Cost.** h = 2^e ≤ 2⁻²⁰·Δ·min(1, g, 1/ε₀) (sum units), so that the step, its boundary and the noise's scale are
each over 2²⁰ lattice points; the design keeps the floating-point sampler when the discrete law's predicted metric
is worse than the continuous design's by more than :data:`~dpopt.mechanisms.exact_sum.COST_MARGIN` (0.1%). The
certificate records the continuous design (``continuous``: its ε₀, step and g) and states E X² of the discrete law
over the continuous one's (``lattice_cost_ratio``, re-derived by ``dpopt verify`` from both).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from dpopt.core.checks import Check
from dpopt.domain.queries import NumericQuery
from dpopt.errors import CalibrationError
from dpopt.mechanisms.exact_sum import _cost_refusal, _LatticeSum, _refusal
from dpopt.mechanisms.real_lattice import (
    EXACT_SUM_NOTE,
    LATTICE_BITS,
    RealLattice,
    answer_units,
    exponent_at_most,
    real_lattice,
)
from dpopt.mechanisms.staircase import PRIOR_METRICS, StaircaseMechanism, metric_optimal_g
from dpopt.noise.discrete_staircase import MAX_STEP, DiscreteStaircase, dyadic_floor
from dpopt.noise.staircase import StaircaseNoise
from dpopt.privacy.pure_conversion import pure_privacy_check
from dpopt.problem import Problem
from dpopt.sensitivity.space import SensitivitySpace
from dpopt.spec.models import Privacy, Utility

EPSILON_BITS = 30
"""Significant bits of the per-step ε' (rounded down from ε₀): 2⁻²⁹ relative at most, about 10⁻⁹ in E X²; its
denominator 2^k stays far below the samplers' 2⁶² (:func:`~dpopt.noise.discrete_laplace.sample_geometric`,
:func:`~dpopt.noise.discrete_laplace.bernoulli_exp`)."""

EXHAUSTIVE_STEPS = 4096
"""Steps m up to which :func:`best_boundary` tries every boundary r ∈ {1, …, m}."""

BOUNDARY_WINDOW = 64
"""Boundaries tried either side of g*·m above :data:`EXHAUSTIVE_STEPS` (the metric moves by about 10⁻¹² relative
per unit of r there; tests/test_staircase_lattice.py checks the window against every r on smaller steps)."""


def _metric_value(law: DiscreteStaircase, lattice: RealLattice, utility: Utility) -> float:
    """The spec's metric of the discrete law in answer units (one coordinate), as the mechanism states it."""
    return LatticeSumStaircase(law, lattice, "", None).expected_utility(utility).value


def best_boundary(epsilon: Fraction, lattice: RealLattice, utility: Utility) -> tuple[DiscreteStaircase, str]:
    """The discrete staircase of per-step ε = ``epsilon`` and step m = Δ_u whose boundary r minimises the spec's
    metric (maximises usefulness), and the policy recorded: every r for m ≤ :data:`EXHAUSTIVE_STEPS`, else the
    :data:`BOUNDARY_WINDOW` integers either side of g*·m (g* the continuous metric-optimal g at ε; ties: the
    smallest r)."""
    m = lattice.shift
    if m > MAX_STEP:
        raise CalibrationError(f"the lattice step of {m} units is beyond the sampler's 2^40")
    step = float(m * lattice.unit)
    g_star, policy = metric_optimal_g(float(epsilon), step, utility)
    if m <= EXHAUSTIVE_STEPS:
        boundaries = range(1, m + 1)
    else:
        centre = min(max(round(g_star * m), 1), m)
        boundaries = range(max(centre - BOUNDARY_WINDOW, 1), min(centre + BOUNDARY_WINDOW, m) + 1)
    sign = -1.0 if utility.metric == "usefulness" else 1.0
    laws = [DiscreteStaircase(epsilon, m, r) for r in boundaries]
    values = [sign * _metric_value(law, lattice, utility) for law in laws]
    best = laws[int(np.argmin(values))]
    return best, (f"{policy}, on the lattice: r = {best.boundary} of m = {m} (g = r/m; the continuous "
                  f"g* = {g_star:.17g})")


class LatticeSumStaircase(_LatticeSum, StaircaseMechanism):
    """Staircase on a bounded sum or mean, measured on the lattice: N + η, η discrete staircase (units of h)."""

    family = "staircase"  # registered in place of StaircaseMechanism, whose design it refines

    def __init__(self, law: DiscreteStaircase, lattice: RealLattice, policy: str, continuous: dict | None):
        unit = lattice.unit
        super().__init__(float(law.epsilon), float(law.step * unit), law.boundary / law.step, 1, policy)
        self.law, self.lattice, self.continuous = law, lattice, continuous
        self.cost_ratio = None if continuous is None else self._max_variance() / StaircaseNoise(
            continuous["epsilon0"], continuous["step"], continuous["g"]).abs_moment(2)

    @classmethod
    def design(cls, problem: Problem) -> StaircaseMechanism:
        """:meth:`StaircaseMechanism.design`; on a bounded sum or mean, its exact lattice measurement unless the spec
        or the cost rules it out (then the continuous staircase and the reason)."""
        return cls.from_design(problem, StaircaseMechanism.design(problem))

    @classmethod
    def from_design(cls, problem: Problem, continuous: StaircaseMechanism) -> StaircaseMechanism:
        """The exact measurement of ``continuous``'s design, or ``continuous`` with its refusal."""
        if not isinstance(problem.query, NumericQuery):
            return continuous
        spec = problem.spec
        refusal = _refusal(problem)
        if refusal is None and spec.utility.metric in PRIOR_METRICS:
            refusal = f"the {spec.utility.metric} prediction is a quadrature of the continuous law"
        if refusal is None:
            noise = continuous.noise
            _, sensitivity = answer_units(problem)
            scale = sensitivity * min(Fraction(1), Fraction(1) / Fraction(noise.epsilon0),
                                      Fraction(noise.g) if noise.g > 0 else Fraction(1))
            try:
                lattice = real_lattice(problem, exponent_at_most(scale, LATTICE_BITS))
                law, policy = best_boundary(dyadic_floor(Fraction(noise.epsilon0), EPSILON_BITS), lattice, spec.utility)
            except CalibrationError as exc:
                refusal = f"on the lattice: {exc}"
            else:
                exact = cls(law, lattice, policy, {key: continuous.parameters[key] for key in ("epsilon0", "step", "g")})
                refusal = _cost_refusal(_ratio(exact.expected_utility(spec.utility).value,
                                               continuous.expected_utility(spec.utility).value, spec.utility))
                if refusal is None and not exact.privacy_checks(problem.space, spec.privacy)[0].passed:
                    refusal = ("the continuous design's ε₀ rests on the continuous law's exact profile, which the "
                               "discrete staircase does not inherit")
                if refusal is None:
                    return exact
        continuous.refusal = refusal
        return continuous

    @classmethod
    def from_parameters(cls, parameters: dict, space: SensitivitySpace) -> StaircaseMechanism:
        if "sum_lattice" not in parameters:
            return StaircaseMechanism.from_parameters(parameters, space)
        law = DiscreteStaircase(Fraction(parameters["epsilon0_exact"]), int(parameters["step_units"]),
                                int(parameters["boundary_units"]))
        return cls(law, RealLattice.from_dict(parameters["sum_lattice"]), parameters["g_policy"],
                   parameters["continuous"])

    @property
    def parameters(self) -> dict:
        return {**super().parameters, "sampler": "exact", "epsilon0_exact": str(self.law.epsilon),
                "step_units": self.law.step, "boundary_units": self.law.boundary,
                "sum_lattice": self.lattice.to_dict(), "continuous": self.continuous,
                "lattice_cost_ratio": self.cost_ratio}

    def _units_noise(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return self.law.sample(rng, size)

    def _steps(self) -> int:
        """K = ⌈Δ_u/m⌉: the most levels a neighbouring move of N crosses."""
        return -(-self.lattice.shift // self.law.step)

    def _privacy_checks(self, space: SensitivitySpace, privacy: Privacy) -> list[Check]:
        k = self._steps()
        total = self.law.epsilon * k
        return [pure_privacy_check(
            total, privacy,
            "exact rational product ε'·⌈Δ_u/m⌉: the discrete staircase p(k) ∝ e^{−ε'⌊(|k| + m − r)/m⌋} changes level "
            "by at most ⌈|t|/m⌉ under an integer shift t, and neighbours move the lattice sum N by at most Δ_u "
            "units (dpopt.noise.discrete_staircase; Geng & Viswanath 2016 restricted to the lattice)",
            f"ε' = {self.law.epsilon}, m = {self.law.step}, r = {self.law.boundary}, Δ_u = {self.lattice.shift}: "
            f"ε'·{k} = {float(total):.17g}",
        )]

    def privacy_summary(self, space: SensitivitySpace) -> dict:
        total = self.law.epsilon * self._steps()
        return {"epsilon": float(total), "epsilon_exact": str(total), "steps_per_worst_shift": self._steps(),
                "conversion": "exact: ε = ε'·⌈Δ_u/m⌉ on the lattice (Δ_u the lattice sum's sensitivity, m the step, "
                              "both in units of h)"}

    def notes(self) -> list[str]:
        lat, law = self.lattice, self.law
        noise = (f"discrete staircase noise of step m = {law.step}, boundary r = {law.boundary} and per-step "
                 f"ε' = {law.epsilon} (the staircase density restricted to the lattice; a geometric period by CKS "
                 "Algorithm 2, its part by rejection with Bernoulli(e^{−ε'}), Algorithm 1)")
        return [EXACT_SUM_NOTE.format(g=f"2^{lat.exponent}", noise=noise, divisor=lat.divisor, shift=lat.shift),
                f"staircase step g-policy: {self.policy}"]

    def _utility(self, utility: Utility) -> None:
        return None

    def _expected_l1(self) -> float:
        return self.law.abs_moment(1) * float(self.lattice.unit)

    def _expected_l2(self, workload: np.ndarray | None) -> float:
        frob = 1.0 if workload is None else float(np.sum(workload**2))
        return self._max_variance() * frob

    def _usefulness(self, gamma: float) -> float:
        return self.law.within(math.floor(Fraction(gamma) / self.lattice.unit))

    def _max_variance(self) -> float:
        return self.law.abs_moment(2) * float(self.lattice.unit) ** 2


def _ratio(exact: float, continuous: float, utility: Utility) -> float:
    """The lattice's cost: the exact measurement's metric over the continuous design's (the inverse for usefulness,
    which is maximised)."""
    return continuous / exact if utility.metric == "usefulness" else exact / continuous


__all__ = ["LatticeSumStaircase", "best_boundary"]
