r"""Staircase noise measured exactly on a lattice: integer counts, and bounded sums and means on a dyadic lattice.

The noise is the **discrete staircase** of :mod:`dpopt.noise.discrete_staircase` — the staircase density of Geng &
Viswanath restricted to a lattice hℤ, its step Δ₀ = m·h and its step boundary gΔ₀ = r·h lattice points — sampled in
integer arithmetic. Its parameters:

- the per-step ε' = 1/t, t = 1/ε₀ rounded **up** to a dyadic rational of 21 significant bits
  (:func:`~dpopt.mechanisms.integer_noise.dyadic_ceil`, 2⁻²⁰ relative at most: the private side), as the
  discrete Laplace rounds its scale: at m = 1 the discrete staircase *is* the discrete Laplace of scale t
  (p(k) ∝ e^{−|k|/t}), so the two families tie there and ``auto`` keeps the one listed first;
- the boundary g = r/m: the integer r ∈ {1, …, m} minimising the discrete law's closed-form metric
  (:func:`best_boundary`: every r when m ≤ :data:`EXHAUSTIVE_STEPS`, else the :data:`BOUNDARY_WINDOW` integers
  either side of g*·m, g* the continuous metric-optimal g at ε').

**Counts** (:class:`StaircaseOnCounts`): h = 1 and y = x + η in integers, η i.i.d. per cell. The step is an integer
m among the continuous design's candidates |v_i|/j (:func:`~dpopt.mechanisms.staircase.steps_per_shift`), ε₀ =
ε/K(m), K(m) = max_v Σ_i ⌈|v_i|/m⌉, from ε-DP at the target's pure ε (the generic conversion); the step with the
best metric is kept. Integer shifts |t| ≤ Km move the level of the law by at most K (the privacy of
:mod:`dpopt.noise.discrete_staircase`), so the measurement is ε'·K(m)-DP exactly.

**Decimal weights** (:class:`StaircaseOnCounts` with its ``decimal`` lattice,
:mod:`dpopt.mechanisms.decimal_lattice`): a ``linear`` query W = M/D measures the integers k = D·Wx the same way, on
the counting problem of M (the integer shifts D·WΔ: the steps, K(m) and the moves are theirs), and releases
(k + η)/D: h = 1/D, the utilities in answer units; ``kl``, ``renyi`` and ``mallows`` are the discrete law's sums
at the prior (and floor) times D, ``mallows`` then divided by D
(:func:`~dpopt.mechanisms.decimal_lattice.scaled_utility`).

**Sums and means** (:class:`LatticeSumStaircase`): the continuous design (ε₀, Δ₀ = Δ, the metric-optimal g) is
implemented on the lattice sum N of :mod:`dpopt.mechanisms.real_lattice` (units of h = 2^e), as the exact
``laplace`` and ``gaussian`` sums are (:mod:`dpopt.mechanisms.exact_sum`): the release is h(N + η)/n, the step
m = Δ_u the lattice sum's sensitivity in units of h (the rounding charged to it: at most one unit more than Δ/h),
h = 2^e ≤ 2⁻²⁰·Δ·min(1, g, 1/ε₀) (sum units) so that the step, its boundary and the noise's scale are each over 2²⁰
lattice points. Neighbours move N by at most Δ_u = m units: ε'⌈Δ_u/m⌉ = ε'.

**Privacy, as verified.** ε'·K (K = ⌈Δ_u/m⌉ on a sum, K(m) on counts) in exact rational arithmetic, converted to
the spec's target as the continuous staircase's pure ε₀ is (:func:`~dpopt.privacy.pure_conversion.pure_privacy_check`:
ε-DP ⇒ (ε, δ), ρ-zCDP, μ-GDP through randomized response). On counts under (ε, δ), ρ-zCDP and μ-GDP with listed
moves (integer shifts), the discrete law's own exact privacy-loss distribution
(:mod:`dpopt.privacy.discrete_staircase_profile`) is used instead, as the continuous design uses its own
(:mod:`dpopt.privacy.staircase_profile`): the design raises ε' by bisection on it (:func:`_raise_on_profile`) and the
certificate checks δ(ε), D_α ≤ ρα (Arb) or T ≥ G_μ over every move (:func:`_profile_check`), falling back to ε'K
through ε-DP when that check fails. ``dpopt verify`` rebuilds the law from the recorded ε', m and r (exact rationals
and integers), re-derives Δ_u from the spec at the stated h (``mechanism.lattice``) or the shift pattern and moves
from the spec's space, and checks the target. Bounded sums and means go through ε-DP (their spaces list only the
extreme shifts).

**Cost.** The discrete law is used whenever the spec allows it and it meets the target, whatever it costs against
the continuous design (``sampler: floating_point`` keeps the continuous one). The certificate records the
continuous design (``continuous``: its ε₀, step and g) and states E X² of the discrete law over the continuous
one's (``lattice_cost_ratio``, and ``exact_cost``: :func:`dpopt.mechanisms.exact_cost.exact_cost` of the two
second moments), both re-derived by ``dpopt verify`` from the recorded laws.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction

import numpy as np

from dpopt.core.checks import Check
from dpopt.core.decimals import float_below
from dpopt.domain.queries import NumericQuery
from dpopt.errors import CalibrationError
from dpopt.mechanisms.base import UtilityValue
from dpopt.mechanisms.decimal_lattice import (
    DecimalScale,
    counts_lattice,
    counts_scope_check,
    in_answer_units,
    scaled_answers,
    scaled_utility,
)
from dpopt.mechanisms.exact_cost import EXACT_COST_KEY, exact_cost
from dpopt.mechanisms.exact_sum import _LatticeSum, _refusal
from dpopt.mechanisms.gaussian import MAX_IMAGE_CELLS, counting_query, lattice_scope_check
from dpopt.mechanisms.integer_noise import dyadic_ceil
from dpopt.mechanisms.lattice import integer_answers
from dpopt.mechanisms.real_lattice import (
    EXACT_SUM_NOTE,
    LATTICE_BITS,
    RealLattice,
    answer_units,
    exponent_at_most,
    real_lattice,
)
from dpopt.mechanisms.staircase import (
    EXACT_TARGETS,
    PRIOR_METRICS,
    StaircaseMechanism,
    _candidate_steps,
    check_prior,
    exact_moves,
    metric_optimal_g,
    prior_metric,
    steps_per_shift,
)
from dpopt.noise.discrete_staircase import MAX_STEP, DiscreteStaircase, DiscreteStaircaseMarginal
from dpopt.noise.law import ProductLaw
from dpopt.noise.staircase import StaircaseNoise
from dpopt.privacy.discrete_staircase_profile import (
    discrete_delta,
    discrete_gdp,
    discrete_renyi_estimate,
    discrete_tradeoff,
    discrete_zcdp,
    profile_feasible,
)
from dpopt.privacy.gdp_check import mu_of_tradeoff
from dpopt.privacy.pure_conversion import pure_epsilon_for, pure_privacy_check
from dpopt.problem import Problem
from dpopt.sensitivity.patterns import coordinatewise_reason, shift_pattern
from dpopt.sensitivity.space import SensitivitySpace
from dpopt.spec.models import Privacy, Utility

EXHAUSTIVE_STEPS = 4096
"""Steps m up to which :func:`best_boundary` tries every boundary r ∈ {1, …, m}."""

BOUNDARY_WINDOW = 64
"""Boundaries tried either side of g*·m above :data:`EXHAUSTIVE_STEPS` (tests/test_staircase_lattice.py checks that
the window holds the best of every r at m = 5000, under l1 and l2)."""

SAMPLER_NOTE = ("discrete staircase noise of step m = {m}, boundary r = {r} and per-step ε' = {eps} (the staircase "
                "density restricted to the lattice; a geometric period by CKS Algorithm 2, its part by rejection with "
                "Bernoulli(e^{{−ε'}}), Algorithm 1)")


def per_step_epsilon(epsilon0: float | Fraction) -> Fraction:
    """ε' = 1/t with t = :func:`~dpopt.mechanisms.integer_noise.dyadic_ceil` (1/ε₀): at most ε₀, within 2⁻²⁰
    relative."""
    return 1 / dyadic_ceil(1 / Fraction(epsilon0))


def best_boundary(epsilon: Fraction, step: int, unit: Fraction, utility: Utility,
                  value: Callable[[DiscreteStaircase], float]) -> tuple[DiscreteStaircase, str]:
    """The discrete staircase of per-step ε = ``epsilon`` and step m = ``step`` whose boundary r optimises
    ``value`` (the spec's metric of the measurement; maximised for usefulness, else minimised), and the policy
    recorded: every r for m ≤ :data:`EXHAUSTIVE_STEPS`, else the :data:`BOUNDARY_WINDOW` integers either side of
    g*·m (g* the continuous metric-optimal g at ε, the step m·``unit``; ties: the smallest r)."""
    m = int(step)
    if m > MAX_STEP:
        raise CalibrationError(f"a lattice step of {m} units is beyond the sampler's 2^40")
    g_star, policy = metric_optimal_g(float(epsilon), float(m * unit), utility)
    if m <= EXHAUSTIVE_STEPS:
        boundaries = range(1, m + 1)
    else:
        centre = min(max(round(g_star * m), 1), m)
        boundaries = range(max(centre - BOUNDARY_WINDOW, 1), min(centre + BOUNDARY_WINDOW, m) + 1)
    sign = -1.0 if utility.metric == "usefulness" else 1.0
    laws = [DiscreteStaircase(epsilon, m, r) for r in boundaries]
    best = laws[int(np.argmin([sign * value(law) for law in laws]))]
    return best, (f"{policy}, on the lattice: r = {best.boundary} of m = {m} (g = r/m; the continuous "
                  f"g* = {g_star:.17g})")


def _lattice_refusal(problem: Problem) -> str | None:
    """Why a staircase design keeps the floating-point sampler, before any lattice is tried (None: it may not)."""
    spec = problem.spec
    if spec.sampler == "floating_point":
        return "the spec asks for sampler: floating_point"
    if spec.utility.metric in PRIOR_METRICS and isinstance(problem.query, NumericQuery):
        return f"the {spec.utility.metric} prediction is a quadrature of the continuous law"
    return _refusal(problem) if isinstance(problem.query, NumericQuery) else None


_RAISE_BISECTIONS = 30
"""Bisection steps raising the per-step ε on the discrete profile (2⁻³⁰ of the bracket; ε' is then rounded to 21
significant bits by :func:`per_step_epsilon`)."""


_ZCDP_MARGIN = 1e-6
"""Relative margin below ρ for the search's estimate of sup_α D_α/α on a grid of orders: the Arb certificate bounds
D_α/α on intervals of orders, a little above the values at their ends (the Kullback–Leibler limit held to ρ(1 − 10⁻⁸)
gave the two-cell histogram at ρ = 0.5 an ε' the certificate refused: its bound near α = 1 was 0.50227)."""


def _parameters(law: DiscreteStaircase) -> tuple[Fraction, int, int]:
    return law.epsilon, law.step, law.boundary


def _profile_holds(law: DiscreteStaircase, moves, privacy: Privacy) -> bool:
    """The search's test on the discrete law's exact profile over every move: (ε, δ) the certificate's own test; ρ-zCDP
    the estimate max_v sup_α D_α/α ≤ ρ(1 − :data:`_ZCDP_MARGIN`) and μ-GDP the estimate max_v μ(T_v) ≤ μ(1 − 10⁻⁹), both
    certified afterwards (:func:`_profile_check`), as the continuous staircase's search
    (:func:`dpopt.mechanisms.staircase._profile_test`)."""
    target, parameters = privacy.parameters, _parameters(law)
    if privacy.definition == "approx":
        delta, _ = discrete_delta(float_below(target["epsilon"]), parameters, moves)
        return bool(delta <= float_below(target["delta"]))
    if privacy.definition == "zcdp":
        return discrete_renyi_estimate(parameters, moves) <= target["rho"] * (1 - _ZCDP_MARGIN)
    return max(mu_of_tradeoff(discrete_tradeoff(parameters, move)) for move in moves) <= target["mu"] * (1 - 1e-9)


def _profile_check(law: DiscreteStaircase, moves, privacy: Privacy) -> Check:
    """The target checked on the discrete staircase's exact privacy-loss distribution over every listed move
    (:mod:`dpopt.privacy.discrete_staircase_profile`)."""
    target, parameters = privacy.parameters, _parameters(law)
    method = ("exact discrete staircase privacy-loss distribution on ε'ℤ (per coordinate from integer counts of "
              "(loss, level) over one period of each side and the outputs between; convolved over the coordinates of "
              "each listed move; dpopt.privacy.discrete_staircase_profile)")
    about = f"ε' = {law.epsilon}, m = {law.step}, r = {law.boundary}"
    if privacy.definition == "gdp":
        passed, detail = discrete_gdp(float_below(target["mu"]), parameters, moves)
        return Check("privacy", f"{method}: its piecewise-linear trade-off function T ≥ G_μ", passed,
                     f"{about}; {detail}")
    if privacy.definition == "zcdp":
        passed, detail = discrete_zcdp(target["rho"], parameters, moves)
        return Check("privacy", f"{method}: its Rényi divergences D_α ≤ ρα, certified on intervals of orders (Arb "
                                "balls)", passed, f"{about}; {detail}")
    delta, worst = discrete_delta(float_below(target["epsilon"]), parameters, moves)
    return Check("privacy", f"{method}, δ(ε) in 60 digits, against ε and δ as written (each the largest float not "
                            "above its decimal)", bool(delta <= float_below(target["delta"])),
                 f"{about}; {len(moves)} move pattern(s), the worst |v| = {tuple(int(t) for t in worst)}: "
                 f"δ(ε={target['epsilon']}) = {float(delta):.17g} vs δ = {target['delta']}")


def _raise_on_profile(law: DiscreteStaircase, policy: str,
                      best: Callable[[float], tuple[DiscreteStaircase, str]], privacy: Privacy,
                      moves) -> tuple[DiscreteStaircase, str]:
    """The discrete staircase at the largest per-step ε ≥ ``law``'s (bisection on :func:`_profile_holds`, the
    metric's best boundary at each ε by ``best``) whose exact profile the certificate's check passes
    (:func:`_profile_check`); ``law`` (through ε-DP) and ``policy`` when it does not."""
    lo = float(law.epsilon)
    hi = 2.0 * lo
    for _ in range(8):  # at most 2⁸ times the ε-DP calibration
        if not _profile_holds(best(hi)[0], moves, privacy):
            break
        lo, hi = hi, 2.0 * hi
    else:
        hi = lo
    for _ in range(_RAISE_BISECTIONS if hi > lo else 0):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if _profile_holds(best(mid)[0], moves, privacy) else (lo, mid)
    raised, raised_policy = best(lo)
    if raised.epsilon > law.epsilon and _profile_check(raised, moves, privacy).passed:
        return raised, raised_policy
    return law, policy


class _DiscreteStaircaseMeasurement:
    """What both lattice measurements share: the discrete law in units of the lattice, its utilities scaled by
    ``unit`` (the lattice's spacing in answer units), its parameters and its cost against the continuous design."""

    law: DiscreteStaircase
    unit: Fraction
    continuous: dict | None
    dimension: int
    policy: str

    def _measure(self, law: DiscreteStaircase, unit: Fraction, dimension: int, policy: str,
                 continuous: dict | None) -> None:
        StaircaseMechanism.__init__(self, float(law.epsilon), float(law.step * unit), law.boundary / law.step,
                                    dimension, policy)
        self.law, self.unit, self.continuous = law, Fraction(unit), continuous
        self.cost = None if continuous is None else exact_cost("variance", self._max_variance(), StaircaseNoise(
            continuous["epsilon0"], continuous["step"], continuous["g"]).abs_moment(2))
        self.cost_ratio = None if self.cost is None else self.cost["ratio"]

    @staticmethod
    def _law(parameters: dict) -> DiscreteStaircase:
        return DiscreteStaircase(Fraction(parameters["epsilon0_exact"]), int(parameters["step_units"]),
                                 int(parameters["boundary_units"]))

    @property
    def parameters(self) -> dict:
        out = {**StaircaseMechanism.parameters.fget(self), "sampler": "exact", "epsilon0_exact": str(self.law.epsilon),
               "step_units": self.law.step, "boundary_units": self.law.boundary, "continuous": self.continuous,
               "lattice_cost_ratio": self.cost_ratio}
        if self.cost is not None:
            out[EXACT_COST_KEY] = self.cost
        return out

    def _pure_check(self, steps: int, privacy: Privacy, shifts: str) -> Check:
        total = self.law.epsilon * steps
        return pure_privacy_check(
            total, privacy,
            "exact rational product ε'·K: the discrete staircase p(k) ∝ e^{−ε'⌊(|k| + m − r)/m⌋} changes level by "
            f"at most ⌈|t|/m⌉ under an integer shift t, and {shifts} (dpopt.noise.discrete_staircase; Geng & "
            "Viswanath 2016 restricted to the lattice)",
            f"ε' = {self.law.epsilon}, m = {self.law.step}, r = {self.law.boundary}, K = {steps}: "
            f"ε'K = {float(total):.17g}",
        )

    def _summary(self, steps: int, how: str) -> dict:
        total = self.law.epsilon * steps
        return {"epsilon": float(total), "epsilon_exact": str(total), "steps_per_worst_shift": steps,
                "conversion": f"exact: ε = ε'·K on the lattice ({how})"}

    def _sampler_note(self) -> str:
        return SAMPLER_NOTE.format(m=self.law.step, r=self.law.boundary, eps=self.law.epsilon)

    def _utility(self, utility: Utility) -> UtilityValue | None:
        """``kl``, ``renyi`` and ``mallows`` of the discrete law on counts (unit 1): :meth:`_prior_value`."""
        return self._prior_value(utility) if utility.metric in PRIOR_METRICS and self.unit == 1 else None

    def _prior_value(self, utility: Utility) -> UtilityValue:
        """``kl``, ``renyi`` and ``mallows`` of the discrete law added to the prior counts: exact sums over |k| ≤ K
        (:meth:`~dpopt.noise.discrete_staircase.DiscreteStaircase.clipped_expectations`,
        :meth:`~dpopt.noise.discrete_staircase.DiscreteStaircase.mallows`)."""
        check_prior(utility, self.dimension)
        order = (utility.order or 1.0) if utility.metric == "mallows" else 1.0
        try:
            value = (self.law.mallows(utility.prior, order) if utility.metric == "mallows"
                     else prior_metric(self.law, utility))
        except ValueError as exc:
            raise CalibrationError(str(exc)) from None
        return UtilityValue(utility.metric, value,
                            f"exact sum over the integers |k| ≤ {self.law.truncation(order)} of the discrete "
                            f"staircase's pmf (the neglected probability and absolute moment of order {order:g} below "
                            "1e-20)")

    def _expected_l1(self) -> float:
        return self.dimension * self.law.abs_moment(1) * float(self.unit)

    def _expected_l2(self, workload: np.ndarray | None) -> float:
        frob = self.dimension if workload is None else float(np.sum(workload**2))
        return self._max_variance() * frob

    def _usefulness(self, gamma: float) -> float:
        return self.law.within(math.floor(Fraction(gamma) / self.unit))

    def _max_variance(self) -> float:
        return self.law.abs_moment(2) * float(self.unit) ** 2


class StaircaseOnCounts(_DiscreteStaircaseMeasurement, StaircaseMechanism):
    """The ``staircase`` design measured exactly on counts: y = x + η in integers, η i.i.d. discrete staircase.
    ``decimal``: on the decimal lattice of a linear query with decimal weights, k = D·Wx + η released as (k + η)/D
    (the unit 1/D; the privacy on the integer shifts D·WΔ of the space; module docstring)."""

    integer_noise = True
    needs_integer_answers = True

    def __init__(self, law: DiscreteStaircase, dimension: int, policy: str, continuous: dict | None,
                 decimal: DecimalScale | None = None):
        self.decimal = decimal
        self._measure(law, Fraction(1, 1 if decimal is None else decimal.scale), dimension, policy, continuous)

    @property
    def integer_release(self) -> bool:
        """x + η on counts is whole; the decimal lattice's (k + η)/D is not."""
        return self.decimal is None

    def _utility(self, utility: Utility) -> UtilityValue | None:
        """On the decimal lattice ``kl``, ``renyi`` and ``mallows`` of the release (k + η)/D: the discrete law's
        sums (:meth:`_prior_value`) at the prior and floor times D, ``mallows`` divided by D
        (:func:`~dpopt.mechanisms.decimal_lattice.scaled_utility` derives both); else as on counts."""
        if self.decimal is None or utility.metric not in PRIOR_METRICS:
            return super()._utility(utility)
        scale = self.decimal.scale
        return in_answer_units(self._prior_value(scaled_utility(utility, scale)), scale, self.dimension)

    @classmethod
    def design_on(cls, problem: Problem, utility: Utility, record: dict,
                  decimal: DecimalScale | None = None) -> StaircaseOnCounts:
        """The integer step m (among the continuous candidates |v_i|/j that are integers) and boundary r with the
        best metric, at ε' = :func:`per_step_epsilon` (ε/K(m)), ε the target's pure ε, raised on the discrete law's
        exact profile for (ε, δ), ρ-zCDP and μ-GDP targets over listed moves (:func:`_raise_on_profile`);
        ``record`` the continuous design it measures. On the ``decimal`` lattice the steps and moves are those of
        the integer shifts D·WΔ (:meth:`~dpopt.mechanisms.decimal_lattice.DecimalScale.scaled_space`), the metric
        in answer units (unit 1/D)."""
        space, privacy = problem.space, problem.spec.privacy
        unit = Fraction(1)
        if decimal is not None:
            space, unit = decimal.scaled_space(space), Fraction(1, decimal.scale)
        pattern = shift_pattern(space)
        epsilon = Fraction(pure_epsilon_for(privacy))
        moves = exact_moves(space) if privacy.definition in EXACT_TARGETS else None
        steps = [int(step) for step in _candidate_steps(pattern) if float(step).is_integer()]
        sign = -1.0 if utility.metric == "usefulness" else 1.0
        found = []
        for m in steps:
            def best(e: float | Fraction, m: int = m) -> tuple[DiscreteStaircase, str]:
                return best_boundary(per_step_epsilon(e), m, unit, utility,
                                     lambda law: cls(law, space.dimension, "", None, decimal).expected_utility(
                                         utility).value)

            law, policy = best(epsilon / steps_per_shift(pattern, m))
            if profile_feasible(m, moves):
                law, policy = _raise_on_profile(law, policy, best, privacy, moves)
            mechanism = cls(law, space.dimension, policy, record, decimal)
            found.append((sign * mechanism.expected_utility(utility).value, m, mechanism))
        if not found:
            raise CalibrationError("no integer staircase step")
        return min(found, key=lambda t: t[:2])[2]

    @classmethod
    def from_parameters(cls, parameters: dict, space: SensitivitySpace) -> StaircaseOnCounts:
        return cls(cls._law(parameters), space.dimension, parameters["g_policy"], parameters["continuous"],
                   DecimalScale.from_parameters(parameters))

    @property
    def parameters(self) -> dict:
        out = _DiscreteStaircaseMeasurement.parameters.fget(self)
        return out if self.decimal is None else out | self.decimal.parameters()

    def scope_checks(self, problem: Problem) -> list[Check]:
        if self.decimal is not None:  # the cost is re-derived with the recorded laws (mechanism.parameters)
            return [counts_scope_check(problem, self.decimal, None, None)]
        return [lattice_scope_check(problem)]

    def _sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        draws = self.law.sample(rng, size * self.dimension).reshape(size, self.dimension)
        return draws if self.decimal is None else draws.astype(float) / self.decimal.scale

    def _release(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """x + η in int64 (the answers refused in one line unless whole numbers), then converted; on the decimal
        lattice (k + η)/D with k = D·Wx recovered exactly (:func:`~dpopt.mechanisms.decimal_lattice.scaled_answers`)."""
        if self.decimal is not None:
            scaled = scaled_answers(values, self.decimal.scale)
            noise = self.law.sample(rng, scaled.size).reshape(scaled.shape)
            return (scaled + noise).astype(float) / self.decimal.scale
        counts = integer_answers(values)
        return (counts + self.law.sample(rng, counts.size).reshape(counts.shape)).astype(float)

    def _counts_space(self, space: SensitivitySpace) -> SensitivitySpace:
        """The space of the measured integers: ``space`` on counts, its integer shifts D·WΔ on the decimal lattice.

        Raises
        ------
        ValueError
            As :meth:`~dpopt.mechanisms.decimal_lattice.DecimalScale.scaled_space`.
        """
        return space if self.decimal is None else self.decimal.scaled_space(space)

    def _steps_on(self, space: SensitivitySpace) -> int | None:
        space = self._counts_space(space)
        return None if coordinatewise_reason(space) is not None else steps_per_shift(shift_pattern(space),
                                                                                     self.law.step)

    def _privacy_checks(self, space: SensitivitySpace, privacy: Privacy) -> list[Check]:
        try:
            space = self._counts_space(space)
        except ValueError as error:
            return [Check("privacy", "discrete staircase noise on the decimal lattice", False, str(error))]
        reason = coordinatewise_reason(space)
        if reason is not None:
            return [Check("privacy", "discrete staircase noise, per coordinate", False, reason)]
        moves = exact_moves(space) if privacy.definition in EXACT_TARGETS else None
        if profile_feasible(self.law.step, moves):
            check = _profile_check(self.law, moves, privacy)
            if check.passed:
                return [check]
        return [self._pure_check(steps_per_shift(shift_pattern(space), self.law.step), privacy,
                                 "K = max_v Σ_i ⌈|v_i|/m⌉ over the spec's integer difference vectors"
                                 + ("" if self.decimal is None else " (the shifts D·WΔ of the decimal lattice)")
                                 + ", exact")]

    def privacy_summary(self, space: SensitivitySpace) -> dict:
        return self._summary(self._steps_on(space), "K = max_v Σ_i ⌈|v_i|/m⌉ over the integer difference vectors")

    def noise_law(self) -> ProductLaw | str:
        """d i.i.d. discrete staircase coordinates, for the second route of ``dpopt verify``; on the decimal lattice
        none is stated (the released noise η/D lives on (1/D)ℤ: :meth:`linear_noise_image`)."""
        law = self.law
        if self.decimal is not None:
            return ("no noise law stated on the decimal lattice: the released noise η/D lives on (1/D)ℤ (η i.i.d. "
                    f"discrete staircase, ε' = {law.epsilon}, m = {law.step}, r = {law.boundary}); its privacy is "
                    "the exact check's on the integer shifts D·WΔ")
        return ProductLaw.iid(DiscreteStaircaseMarginal(law), self.dimension,
                              f"discrete staircase^d (ε' = {law.epsilon}, m = {law.step}, r = {law.boundary})")

    def linear_noise_image(self) -> tuple[np.ndarray, tuple] | None:
        """On the decimal lattice: the released noise η/D, C = I/D, W = η i.i.d. discrete staircase (the per-cell
        errors by convolution on (1/D)ℤ); else None."""
        if self.decimal is None or self.dimension > MAX_IMAGE_CELLS:
            return None
        return (np.eye(self.dimension) / self.decimal.scale,
                (DiscreteStaircaseMarginal(self.law),) * self.dimension)

    def notes(self) -> list[str]:
        if self.decimal is not None:
            return [f"exact measurement of the staircase on the decimal lattice: k = D·Wx + η in integers, η i.i.d. "
                    f"{self._sampler_note()}, sampled in integer arithmetic, released as (k + η)/D (post-processing; "
                    "no floating point touches the noise). Randomness: the numpy Generator passed to release (dpopt "
                    "release: AES-CTR CSPRNG keyed from OS entropy unless --insecure-seed). Timing: not covered "
                    "(the running time depends on the noise drawn, never on the data)",
                    self.decimal.note("the discrete staircase noise"),
                    f"staircase step g-policy: {self.policy}"]
        return [f"exact measurement of the staircase on counts: y = x + η in integers, η i.i.d. {self._sampler_note()}"
                ", sampled in integer arithmetic; the released numbers are those integers (no floating point "
                "touches the noise). Randomness: the numpy Generator passed to release (dpopt release: AES-CTR CSPRNG "
                "keyed from OS entropy unless --insecure-seed). Timing: the noise is drawn before it is added, so the "
                "random words and rejection rounds depend on the parameters and the noise drawn, never on the data; "
                "not covered: the running time's dependence on the noise drawn",
                f"staircase step g-policy: {self.policy}"]


class LatticeSumStaircase(_DiscreteStaircaseMeasurement, _LatticeSum, StaircaseMechanism):
    """Staircase on a bounded sum or mean, measured on the lattice: N + η, η discrete staircase (units of h)."""

    family = "staircase"  # registered in place of StaircaseMechanism, whose design it refines

    def __init__(self, law: DiscreteStaircase, lattice: RealLattice, policy: str, continuous: dict | None):
        self.lattice = lattice
        self._measure(law, lattice.unit, 1, policy, continuous)

    @classmethod
    def design(cls, problem: Problem) -> StaircaseMechanism:
        """:meth:`StaircaseMechanism.design`; on counts and on a bounded sum or mean, its exact lattice measurement
        unless the spec rules it out (then the continuous staircase and the reason)."""
        return cls.from_design(problem, StaircaseMechanism.design(problem))

    @classmethod
    def from_design(cls, problem: Problem, continuous: StaircaseMechanism) -> StaircaseMechanism:
        """The exact measurement of ``continuous``'s design, or ``continuous`` with its refusal."""
        numeric = isinstance(problem.query, NumericQuery)
        spec = problem.spec
        decimal = None
        if not numeric and not counting_query(problem):
            if getattr(problem.query, "user_matrix", None) is None:
                return continuous
            decimal = counts_lattice(problem)
            if isinstance(decimal, str):
                continuous.refusal = decimal
                return continuous
        refusal = _lattice_refusal(problem)
        if refusal is None:
            record = {key: continuous.parameters[key] for key in ("epsilon0", "step", "g")}
            try:
                exact = (cls._lattice_design(problem, continuous, record) if numeric
                         else StaircaseOnCounts.design_on(problem, spec.utility, record, decimal))
            except CalibrationError as exc:
                refusal = f"on the lattice: {exc}"
            else:
                if exact.privacy_checks(problem.space, spec.privacy)[0].passed:
                    return exact
                refusal = "the discrete staircase does not meet the target"
        continuous.refusal = refusal
        return continuous

    @classmethod
    def _lattice_design(cls, problem: Problem, continuous: StaircaseMechanism, record: dict) -> LatticeSumStaircase:
        """The lattice of the continuous design's scale (module docstring), m = Δ_u, ε' from its ε₀, the best r."""
        noise, spec = continuous.noise, problem.spec
        _, sensitivity = answer_units(problem)
        scale = sensitivity * min(Fraction(1), 1 / Fraction(noise.epsilon0), Fraction(noise.g) or Fraction(1))
        lattice = real_lattice(problem, exponent_at_most(scale, LATTICE_BITS))
        law, policy = best_boundary(per_step_epsilon(noise.epsilon0), lattice.shift, lattice.unit, spec.utility,
                                    lambda law: cls(law, lattice, "", None).expected_utility(spec.utility).value)
        return cls(law, lattice, policy, record)

    @classmethod
    def from_parameters(cls, parameters: dict, space: SensitivitySpace) -> StaircaseMechanism:
        if parameters.get("sampler") != "exact":
            return StaircaseMechanism.from_parameters(parameters, space)
        if "sum_lattice" not in parameters:
            return StaircaseOnCounts.from_parameters(parameters, space)
        return cls(cls._law(parameters), RealLattice.from_dict(parameters["sum_lattice"]), parameters["g_policy"],
                   parameters["continuous"])

    @property
    def parameters(self) -> dict:
        return {**_DiscreteStaircaseMeasurement.parameters.fget(self), "sum_lattice": self.lattice.to_dict()}

    def _units_noise(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return self.law.sample(rng, size)

    def _steps(self) -> int:
        """K = ⌈Δ_u/m⌉: the most levels a neighbouring move of N crosses."""
        return -(-self.lattice.shift // self.law.step)

    def _privacy_checks(self, space: SensitivitySpace, privacy: Privacy) -> list[Check]:
        return [self._pure_check(self._steps(), privacy,
                                 f"neighbours move the lattice sum N by at most Δ_u = {self.lattice.shift} units: "
                                 "K = ⌈Δ_u/m⌉")]

    def privacy_summary(self, space: SensitivitySpace) -> dict:
        return self._summary(self._steps(), "K = ⌈Δ_u/m⌉, Δ_u the lattice sum's sensitivity and m the step, both "
                                            "in units of h")

    def notes(self) -> list[str]:
        lat = self.lattice
        return [EXACT_SUM_NOTE.format(g=f"2^{lat.exponent}", noise=self._sampler_note(), divisor=lat.divisor,
                                      shift=lat.shift),
                f"staircase step g-policy: {self.policy}"]


__all__ = ["LatticeSumStaircase", "StaircaseOnCounts", "best_boundary", "per_step_epsilon"]
