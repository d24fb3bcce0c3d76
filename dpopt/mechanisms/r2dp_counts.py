r"""R²DP on counts, exactly: a mixture of discrete Laplace laws with rational weights, optimised for the metric.

On a counting query (integer answers, integer neighbouring shifts) the ``r2dp`` family releases x + η with η i.i.d.
per coordinate from

.. math:: p(k) = \sum_j \frac{n_j}{N}\, \tanh\!\Big(\frac{1}{2 s_j}\Big)\, e^{-|k|/s_j}

(:mod:`dpopt.noise.discrete_laplace_mixture`): the component drawn from one uniform integer below N, then the
discrete Laplace of the dyadic scale s_j by the exact sampler (Canonne, Kamath & Steinke 2020, Algorithms 1–2). It
is R²DP's construction (Mohammady et al., CCS 2020: a Laplace law whose rate t = 1/s is itself random) with the
discrete Laplace in place of Laplace and a finite rational mixing law in place of the second fold.

**Privacy.** ε(Δ) = ln(Σ_j w_j c_j / Σ_j w_j c_j e^{−Δ/s_j}), c_j = tanh(1/(2s_j)), exactly, attained at the output
equal to the answer (proof in :mod:`dpopt.privacy.r2dp_lattice`); for a vector, max_{v∈S} Σ_i ε(|v_i|). The
certificate evaluates it in 256-bit ball arithmetic from the rational scales and weights and compares the ball's
upper end with the target; other targets through the ε-DP conversions the continuous family uses
(:mod:`dpopt.privacy.pure_conversion`). A brute-force maximum of the log pmf ratio over the integers cross-checks
the closed form.

**Design.** The mixture LP on the integers (:mod:`dpopt.optimize.r2dp_lattice_lp`) over 801 dyadic scales (161 for
the prior metrics), per coordinate at ε/k for the shift Δ∞ (k = max_v ‖v‖₀), as the continuous design; weights
rounded to integers over 2^32 toward the more private atom; the scales then scaled down together while the whole
pattern's ε allows it (:func:`fill_budget`: when neighbours move coordinates by different amounts, k·ε(Δ∞) ≤ ε
leaves slack) and moved up by 2^-20 until the ball check passes. The discrete Laplace at the same ε is a candidate too, and the better certified one is released; when the
dual certificate proves the one-atom law optimal among all mixtures, an LP mixture can only recover what rounding
that atom's scale up to a dyadic costs (the record says which). Under unit shifts (the counts' usual case) the
one-atom law is proven optimal for l1, l2, max_variance and usefulness and the LP is not run
(:data:`UNIT_SHIFT_PROOF`). The continuous R²DP is compared through its staircase bound
(:meth:`R2DPMechanism.utility_bound`: no continuous design does better) when the lattice design is within
:data:`BOUND_MARGIN` of it; otherwise the continuous design is computed, and the certificate records its second fold
and value (both re-derived at verification). The exact mixture is used whatever it costs against the continuous
design: the record states the cost (``exact_cost``, :func:`dpopt.mechanisms.exact_cost.exact_cost` of the two
values; against the bound it is an upper bound on the true cost), re-derived by ``dpopt verify``.

**Mallows.** W_p(μ, μ∗ν) between the prior values' law μ and its convolution with the noise is not linear in the
mixture's weights, so it has no LP: the candidates — the discrete Laplace, and under shifts above 1 the certified LP
mixtures for l1 and l2 (E|Z|^p at p = 1, 2: the continuous family's proxy) — are each valued by the exact Mallows
distance of the discrete law (:func:`mallows_value`: the quantile coupling's finite sum, the support truncated with
a proven error ≤ :data:`MALLOWS_TRUNCATION`), and the least is released.

Bounded sums and means are measured on a dyadic lattice by the same mixture (:mod:`dpopt.mechanisms.r2dp_sum`).
``sampler: floating_point``, other non-counting queries, and prior metrics whose sums would exceed
:data:`~dpopt.optimize.r2dp_lattice_lp.MAX_SUM_TERMS` keep the continuous design (:mod:`dpopt.mechanisms.r2dp`).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from dpopt.core.checks import Check
from dpopt.domain.workload import workload_matrix
from dpopt.errors import CalibrationError, SolverError
from dpopt.mechanisms.base import SCALE_MONOTONE_METRICS, Mechanism, UtilityValue, better
from dpopt.mechanisms.decimal_counts import OnDecimalLattice, decimal_reason
from dpopt.mechanisms.exact_cost import EXACT_COST_KEY, exact_cost
from dpopt.mechanisms.gaussian import counting_query, lattice_scope_check
from dpopt.mechanisms.integer_noise import EXACT_SAMPLER_NOTE, dyadic_ceil
from dpopt.mechanisms.lattice import integer_answers
from dpopt.mechanisms.r2dp import R2DPMechanism
from dpopt.mechanisms.staircase import check_prior, prior_metric
from dpopt.noise.discrete_laplace_mixture import DiscreteLaplaceMixture, DiscreteLaplaceMixtureMarginal
from dpopt.noise.law import ProductLaw
from dpopt.noise.prior_metrics import lattice_mallows_distance
from dpopt.noise.second_folds import fold_from_parameters
from dpopt.optimize.r2dp_lattice_lp import (
    LATTICE_METRICS,
    MAX_SUM_TERMS,
    LatticeObjective,
    grid_decades,
    grid_points,
    lattice_objective,
    optimize_lattice_mixture,
    sum_terms,
)
from dpopt.privacy.pure_conversion import PURE_TARGETS, pure_epsilon_for, pure_privacy_check
from dpopt.privacy.r2dp_lattice import integer_shifts, mixture_epsilon, pattern_epsilon_upper, ratio_sup_enumerated
from dpopt.problem import Problem
from dpopt.sensitivity.patterns import ShiftPattern, coordinatewise_reason, shift_pattern
from dpopt.sensitivity.space import SensitivitySpace
from dpopt.spec.models import Privacy, Utility

BOUND_MARGIN = 1e-3
"""The largest relative distance of the lattice design's value from the staircase bound at which the cost is stated
against the bound (an upper bound on it, off by at most 0.1%) instead of against the continuous design, which is
then computed (its LP and second fold) for an exact figure."""

UNIT_SHIFT_PROOF = (
    "no LP: under unit shifts the discrete Laplace at ε/k is optimal among all symmetric integer noises whose "
    "coordinate is (ε/k)-DP, hence among all mixtures: such a law has p(j+1)/p(j) ≥ e^{−ε/k} for j ≥ 0, so its "
    "ratio to the geometric law e^{−ε|j|/k} does not decrease in |j| (monotone likelihood ratio), |Z| dominates the "
    "geometric |Z| stochastically, and every cost non-decreasing in |Z| (E|Z|, E Z², P(|Z| > γ)) is at least the "
    "geometric's; exact ball re-check")

NUDGES = 40
"""Times the scales are moved up by 2^-20 before a rounded mixture is given up (its ball check never passed)."""


def lattice_reason(problem: Problem) -> str | None:
    """Why the ``r2dp`` design on ``problem`` keeps the continuous (floating-point) mixture; None: it measures
    exactly on the integers (module docstring)."""
    spec = problem.spec
    if spec.sampler == "floating_point":
        return "the spec asks for sampler: floating_point"
    if not counting_query(problem):
        return "the answers are not counts"
    if spec.utility.metric not in (*LATTICE_METRICS, "mallows"):
        return (f"the {spec.utility.metric} metric of a lattice law is not predicted (metrics: "
                f"{', '.join(LATTICE_METRICS)}, mallows)")
    reason = _shift_reason(problem.space)
    if reason is not None:
        return reason
    pattern = shift_pattern(problem.space)
    epsilon = pure_epsilon_for(spec.privacy) / pattern.max_support
    if spec.utility.metric == "mallows":
        work = _mallows_terms(_one_atom(pattern, epsilon * pattern.max_support), spec.utility)
    else:
        objective = lattice_objective(spec.utility)
        work = sum_terms(objective, epsilon, int(pattern.largest), problem.space.dimension)
    if work > MAX_SUM_TERMS:
        return (f"the {spec.utility.metric} sums over ℤ would take {work:.3g} terms at this ε (above "
                f"{MAX_SUM_TERMS:.0e})")
    return None


MALLOWS_TRUNCATION = 1e-12
"""Bound on the change of a Mallows value (W_p, absolute) from truncating the noise's support
(:func:`~dpopt.noise.prior_metrics.lattice_mallows_distance`)."""

MALLOWS_LP_METRICS = ("l1", "l2")
"""The LP designs that are Mallows candidates under shifts above 1 (E|Z| and E Z², the orders 1 and 2 of the upper
bound E|Z|^p ≥ W_p^p)."""


def _one_atom(pattern: ShiftPattern, epsilon: float) -> DiscreteLaplaceMixture:
    """The discrete Laplace at ε/k for the shift Δ∞, its scale rounded up to a dyadic (not yet certified)."""
    k, shift = pattern.max_support, int(pattern.largest)
    return DiscreteLaplaceMixture((dyadic_ceil(Fraction(shift) / Fraction(epsilon / k)),), (1,))


def _mallows_support(mixture: DiscreteLaplaceMixture, order: float) -> int:
    """K with (E|Z|^p 1{|Z| > K})^{1/p} ≤ :data:`MALLOWS_TRUNCATION` (the bound of
    :meth:`~dpopt.noise.discrete_laplace_mixture.DiscreteLaplaceMixture.tail_moment_bound`)."""
    return mixture.moment_truncation(order, MALLOWS_TRUNCATION**order)


def _mallows_terms(mixture: DiscreteLaplaceMixture, utility: Utility) -> int:
    """The atoms of μ∗ν the exact Mallows sum of ``mixture`` sorts: prior values × (2K + 1)."""
    return len(utility.prior) * (2 * _mallows_support(mixture, utility.order) + 1)


def mallows_value(mixture: DiscreteLaplaceMixture, utility: Utility) -> float:
    """W_p(μ, μ∗ν) of the discrete law over the prior, from the pmf on |k| ≤ K (:func:`_mallows_support`)."""
    k = _mallows_support(mixture, utility.order)
    return lattice_mallows_distance(mixture.pmf(np.arange(-k, k + 1)), utility.prior, utility.order)


def _shift_reason(space: SensitivitySpace) -> str | None:
    """Why the mixture's privacy cannot be certified on ``space`` (None: every difference vector is listed and its
    coordinate shifts are whole numbers)."""
    reason = coordinatewise_reason(space)
    if reason is None and integer_shifts(shift_pattern(space)) is None:
        reason = "a neighbouring shift is not a whole number"
    return reason


def rate_grid(epsilon: float, shift: int, points: int, decades: tuple[float, float]) -> list[Fraction]:
    """Dyadic scales (:func:`~dpopt.mechanisms.integer_noise.dyadic_ceil`: rounded up to 21 significant bits) of
    ``points`` rates log-spaced over 10^``decades``·ε/Δ, and the discrete Laplace's Δ/ε rounded up; increasing, no
    repeats."""
    rates = np.logspace(*decades, points) * epsilon / shift
    scales = {dyadic_ceil(Fraction(1.0 / float(t))) for t in rates}
    scales.add(dyadic_ceil(Fraction(shift) / Fraction(epsilon)))
    return sorted(scales)


def fill_budget(mixture: DiscreteLaplaceMixture, pattern: ShiftPattern, epsilon: float) -> DiscreteLaplaceMixture:
    """``mixture`` with every scale multiplied by the smallest c ≤ 1 at which max_v Σ_i ε(|v_i|) ≤ ε in floating
    point (bisection in log c), rounded up to dyadics; ``mixture`` itself when it has no slack. The per-coordinate
    design k·ε(Δ∞) ≤ ε is sufficient, and loose when neighbours move coordinates by different amounts (as for the
    continuous family, :func:`dpopt.mechanisms.r2dp._fill_budget`); :func:`certify_mixture` then certifies the
    result."""
    shifts = integer_shifts(pattern)

    def excess(log_c: float) -> float:
        scales = [float(s) * math.exp(log_c) for s in mixture.scales]
        return pattern.worst([mixture_epsilon(scales, mixture.weights, m) for m in shifts]) - epsilon

    if excess(0.0) >= 0:
        return mixture
    lo = -0.5
    while excess(lo) < 0 and lo > -50:
        lo -= 0.5
    if excess(lo) < 0:
        return mixture
    hi = 0.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if excess(mid) >= 0 else (lo, mid)
    factor = Fraction(math.exp(hi))
    return DiscreteLaplaceMixture(tuple(dyadic_ceil(s * factor) for s in mixture.scales), mixture.weights)


def certify_mixture(mixture: DiscreteLaplaceMixture, pattern: ShiftPattern, privacy: Privacy
                    ) -> DiscreteLaplaceMixture | None:
    """``mixture``, or its scales moved up by 2^-20 at a time (at most :data:`NUDGES` times), once the ball check of
    :func:`lattice_privacy_check` passes; None if it never does."""
    for _ in range(NUDGES):
        if lattice_privacy_check(mixture, pattern, privacy).passed:
            return mixture
        mixture = DiscreteLaplaceMixture(tuple(dyadic_ceil(s * (1 + Fraction(1, 2**20))) for s in mixture.scales),
                                         mixture.weights)
    return None


def lattice_privacy_check(mixture: DiscreteLaplaceMixture, pattern: ShiftPattern, privacy: Privacy) -> Check:
    """The target from the rigorous upper bound on max_v Σ_i ε(|v_i|) (:func:`~dpopt.privacy.r2dp_lattice.
    pattern_epsilon_upper`), converted as the continuous family's ε₀ is."""
    eps = pattern_epsilon_upper(mixture, pattern)
    return pure_privacy_check(
        eps, privacy,
        "discrete Laplace mixture on ℤ under integer shifts: ε(Δ) = ln(Σ w_j tanh(1/(2s_j)) / Σ w_j tanh(1/(2s_j)) "
        "e^{−Δ/s_j}), the supremum of ln p(k)/p(k+Δ) attained at k = 0 (log-convexity of the mixture of geometric "
        "laws); max over every difference vector of Σ_i ε(|v_i|) (independent component per coordinate); "
        "256-bit ball arithmetic from the exact scales and weights, the ball's upper end compared exactly",
        f"ε ≤ {float(eps):.17g} (upper end of the ball)",
    )


def _cost(objective: LatticeObjective, mixture: DiscreteLaplaceMixture) -> float:
    """E[c] of ``mixture`` (weights as floats: a design criterion, not a claim)."""
    t = np.array([1.0 / float(s) for s in mixture.scales])
    return float(np.array([float(w) for w in mixture.probabilities]) @ objective.cost(t))


def _worse(value: float, reference: float, metric: str) -> float:
    """How much worse ``value`` is than ``reference``, relative (negative: better)."""
    sign = -1.0 if better(metric) == "higher" else 1.0
    return sign * (value - reference) / max(abs(reference), 1e-300)


class R2DPOnCounts(R2DPMechanism):
    """``r2dp`` on counts: x + η, η i.i.d. from a discrete Laplace mixture with rational weights (module
    docstring); on any other spec the continuous design of :class:`~dpopt.mechanisms.r2dp.R2DPMechanism`."""

    family = "r2dp"  # registered in place of R2DPMechanism, whose design it refines on counts
    title = "R²DP on counts: a mixture of discrete Laplace laws (exact sampler)"
    integer_noise = True
    needs_integer_answers = True

    def __init__(self, mixture: DiscreteLaplaceMixture, dimension: int, design: dict | None = None):
        self.mixture = mixture
        self.dimension = int(dimension)
        self.design_record = design or {}

    # ---------------------------------------------------------------- design
    @classmethod
    def utility_bound(cls, problem: Problem) -> float | None:
        """On counts whose neighbours move coordinates by at most 1: the discrete Laplace at ε/k per coordinate
        (its exact scale, rounded down by 10⁻⁹), which no integer noise beats (:data:`UNIT_SHIFT_PROOF`) for l1, l2, max_variance, usefulness; None for
        other counts (the continuous family's staircase bound does not hold for noise that only needs integer
        shifts: the discrete Laplace beats it at large ε); the continuous family's bound elsewhere."""
        if cls.supports(problem) is None and not isinstance(decimal_reason(problem), str):
            return OnDecimalLattice.bound(problem, cls)
        if cls.supports(problem) is not None or lattice_reason(problem) is not None:
            return R2DPMechanism.utility_bound(problem)
        pattern = shift_pattern(problem.space)
        if int(pattern.largest) != 1 or problem.spec.utility.metric not in SCALE_MONOTONE_METRICS:
            return None
        scale = Fraction(pattern.max_support / pure_epsilon_for(problem.spec.privacy) * (1 - 1e-9))
        return _one_atom_value(scale, problem.space.dimension, problem.spec.utility)

    @classmethod
    def design(cls, problem: Problem) -> Mechanism:
        """The exact design on counts, unless :func:`lattice_reason` rules it out (then the continuous design, with
        the reason in its notes); its cost against the continuous design is in the record (module docstring). A
        linear query with decimal weights: the exact design for the integer moves D·WΔ, released on the decimal
        lattice (:mod:`dpopt.mechanisms.decimal_counts`), or the continuous design with the reason why not."""
        decimal = None
        if cls.supports(problem) is None:
            decimal = OnDecimalLattice.measured(problem, cls)
            if not isinstance(decimal, str):
                return decimal
        reason = lattice_reason(problem) if cls.supports(problem) is None else "unsupported"
        if reason is not None:
            continuous = R2DPMechanism.design(problem)
            if reason != "unsupported" and counting_query(problem):
                continuous.refusal = reason
            elif decimal is not None and getattr(problem.query, "user_matrix", None) is not None:
                continuous.refusal = f"no decimal lattice: {decimal}"  # a linear query's weights are not whole
            return continuous
        return cls._compared(problem, cls._lattice_design(problem))

    @staticmethod
    def _compared(problem: Problem, exact: R2DPOnCounts) -> R2DPOnCounts:
        """``exact`` with the continuous R²DP design of ``problem`` (its staircase bound when the exact value is within
        :data:`BOUND_MARGIN` of it, else its second fold) and the cost of exactness added to its record."""
        metric = problem.spec.utility.metric
        bound = R2DPMechanism.utility_bound(problem)
        record = exact.design_record
        if bound is not None and _worse(record["value"], bound, metric) <= BOUND_MARGIN:
            record["baselines"]["continuous_r2dp"] = {"bound": bound}
            value = bound
        else:
            _, _, _, fold, value = R2DPMechanism._optimised(problem, dual_bound=False)
            record["baselines"]["continuous_r2dp"] = {"second_fold": fold.parameters, "value": value}
        record[EXACT_COST_KEY] = exact_cost(metric, record["value"], value)
        return exact

    @classmethod
    def design_value(cls, problem: Problem) -> float:
        return cls.design(problem).expected_utility(problem.spec.utility).value

    @classmethod
    def _lattice_design(cls, problem: Problem) -> R2DPOnCounts:
        """The certified mixture and its record (the continuous comparison is added by :meth:`design`)."""
        spec, space = problem.spec, problem.space
        utility = spec.utility
        check_prior(utility, space.dimension)
        pattern = shift_pattern(space)
        k, shift = pattern.max_support, int(pattern.largest)
        epsilon = pure_epsilon_for(spec.privacy)
        laplace = certify_mixture(fill_budget(_one_atom(pattern, epsilon), pattern, epsilon), pattern, spec.privacy)
        if shift == 1 and utility.metric in SCALE_MONOTONE_METRICS:
            chosen, optimal, how = laplace, True, UNIT_SHIFT_PROOF
            bound = cls.utility_bound(problem)
            extra = {"bound_all_mixtures": bound}
        elif utility.metric == "mallows":
            chosen, optimal, how, extra = cls._mallows_design(problem, pattern, laplace)
        else:
            chosen, optimal, how, extra = cls._lp_design(problem, pattern, laplace)
        if chosen is None or laplace is None:
            raise CalibrationError("no discrete Laplace mixture passed the exact privacy check")
        record = {
            "metric": utility.metric,
            "per_coordinate": {"epsilon": epsilon / k, "shift": shift, "coordinates_moved": k,
                               "exact": pattern.uniform},
            "method": how,
            "discrete_laplace_optimal_among_mixtures": optimal,
            **extra,
            "baselines": {"discrete_laplace": {"scale": str(laplace.scales[0]),
                                               "value": _one_atom_value(laplace.scales[0], space.dimension, utility)}},
        }
        mechanism = cls(chosen, space.dimension, record)
        record["value"] = mechanism.expected_utility(utility).value
        return mechanism

    @staticmethod
    def _lp_design(problem: Problem, pattern: ShiftPattern, laplace: DiscreteLaplaceMixture | None,
                   utility: Utility | None = None) -> tuple:
        """(the certified mixture, whether the one-atom law is proven optimal, the method, the LP's record) from
        :func:`~dpopt.optimize.r2dp_lattice_lp.optimize_lattice_mixture`, for ``utility`` (default: the spec's)."""
        spec, space = problem.spec, problem.space
        utility = utility or spec.utility
        k, shift = pattern.max_support, int(pattern.largest)
        epsilon = pure_epsilon_for(spec.privacy) / k
        objective = lattice_objective(utility)
        scales = rate_grid(epsilon, shift, grid_points(objective), grid_decades(objective))
        try:
            optimum = optimize_lattice_mixture(objective, epsilon * (1 - 1e-9), shift, scales)
        except SolverError as exc:
            raise CalibrationError(f"the R²DP lattice mixture LP failed ({exc})") from exc
        mixture = certify_mixture(fill_budget(optimum.mixture, pattern, epsilon * k), pattern, spec.privacy)
        candidates = [m for m in (laplace, mixture) if m is not None]
        chosen = min(candidates, key=lambda m: _cost(objective, m), default=None)
        how = (f"LP over mixtures of discrete Laplace laws of {optimum.grid} dyadic scales (cvxpy {optimum.solver}), "
               "weights rounded to integers over 2^32, exact ball re-check")
        extra = {"objective": objective.description, "dual_multiplier": optimum.multiplier,
                 "bound_all_mixtures": _metric_of_cost(optimum.bound, utility, space.dimension)}
        return chosen, optimum.laplace_optimal, how, extra

    @staticmethod
    def _mallows_design(problem: Problem, pattern: ShiftPattern, laplace: DiscreteLaplaceMixture | None) -> tuple:
        """(the candidate of least exact Mallows value, None (optimality among mixtures not determined), the method,
        the candidates' values).

        W_p(μ, μ∗ν) is not linear in the mixture's weights (a distance between the prior's law and its convolution),
        so no LP: the candidates are the discrete Laplace and, under shifts above 1, the certified LP mixtures for
        :data:`MALLOWS_LP_METRICS` (under unit shifts those LPs return the discrete Laplace,
        :data:`UNIT_SHIFT_PROOF`); each is valued by :func:`mallows_value`. Candidates whose sums would exceed
        :data:`~dpopt.optimize.r2dp_lattice_lp.MAX_SUM_TERMS` are skipped."""
        spec = problem.spec
        candidates = {"discrete_laplace": laplace}
        if int(pattern.largest) > 1:
            for metric in MALLOWS_LP_METRICS:
                candidates[f"lp_{metric}"] = R2DPOnCounts._lp_design(problem, pattern, laplace,
                                                                     Utility(metric=metric))[0]
        values = {name: mallows_value(m, spec.utility) for name, m in candidates.items()
                  if m is not None and _mallows_terms(m, spec.utility) <= MAX_SUM_TERMS}
        if not values:
            return None, None, "", {}
        best = min(values, key=values.get)
        how = (f"candidates valued by their exact Mallows-{spec.utility.order:g} distance on ℤ (quantile coupling, "
               f"support truncated with error ≤ {MALLOWS_TRUNCATION:g}): {', '.join(values)}; chosen {best}")
        return candidates[best], None, how, {"mallows_candidates": values}

    @classmethod
    def from_parameters(cls, parameters: dict, space: SensitivitySpace) -> Mechanism:
        if "lattice_scale" in parameters:
            return OnDecimalLattice.from_parameters(parameters, space, cls)
        if "mixture" not in parameters:
            return R2DPMechanism.from_parameters(parameters, space)
        return cls(DiscreteLaplaceMixture.from_parameters(parameters["mixture"]), space.dimension,
                   parameters.get("design"))

    @property
    def parameters(self) -> dict:
        out = {"sampler": "exact", "mixture": self.mixture.parameters,
               "coupling": "independent component draw per coordinate"}
        if self.design_record:
            out["design"] = self.design_record
        return out

    # --------------------------------------------------------------- release
    def noise_law(self) -> ProductLaw:
        """d i.i.d. copies of the mixture, a law on ℤ (:mod:`dpopt.noise.law`)."""
        return ProductLaw.iid(DiscreteLaplaceMixtureMarginal(self.mixture), self.dimension,
                              f"discrete Laplace mixture^d ({self.mixture})")

    def _sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return self.mixture.sample(rng, (size, self.dimension))

    def _release(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """x + η in int64 (the answers refused in one line unless whole numbers), then converted."""
        counts = integer_answers(values)
        return (counts + self.mixture.sample(rng, counts.shape)).astype(float)

    # --------------------------------------------------------------- privacy
    def _privacy_checks(self, space: SensitivitySpace, privacy: Privacy) -> list[Check]:
        reason = _shift_reason(space)
        if reason is not None:
            return [Check("privacy", "discrete Laplace mixture, per coordinate", False, reason)]
        pattern = shift_pattern(space)
        shift = int(pattern.largest)
        closed = mixture_epsilon(self.mixture.scales, self.mixture.weights, shift)
        window = self.ratio_window(shift)
        brute = ratio_sup_enumerated(self.mixture, shift, window)
        ratio = Check(
            "privacy.density_ratio",
            f"brute force: max over the integers |k| ≤ {'4Δ + 20·max s_j' if window is None else '2Δ'} of "
            "|ln p(k) − ln p(k+Δ)| equals the closed form ln a(0)/a(Δ) (the supremum is attained at k = 0: tight, "
            "not a bound)",
            abs(brute - closed) <= 1e-9 * max(1.0, closed),
            f"enumerated {brute:.12g} vs closed form {closed:.12g} at Δ = {shift}",
        )
        return [lattice_privacy_check(self.mixture, pattern, privacy), ratio]

    def ratio_window(self, shift: int) -> int | None:
        """The half-width of the brute-force cross-check (None: 4Δ + 20·max s_j, past the mixture's bulk)."""
        return None

    def scope_checks(self, problem: Problem) -> list[Check]:
        """The lattice's scope (a counting query) and the recorded comparison, recomputed."""
        return [lattice_scope_check(problem), *self.comparison_checks(problem, problem.space)]

    def one_atom_value(self, scale: Fraction, utility: Utility) -> float:
        """The metric of the discrete Laplace of ``scale`` in place of this mixture (the recorded baseline)."""
        return _one_atom_value(scale, self.dimension, utility)

    def comparison_checks(self, problem: Problem, units: SensitivitySpace) -> list[Check]:
        """The recorded comparison, recomputed: ``units`` the integer space the mixture's privacy is checked on
        (the counts' own, or a lattice sum's moves in units of g); empty when the record has none."""
        spec, space = problem.spec, problem.space
        record = self.design_record
        if (not record or record.get("metric") != spec.utility.metric or spec.privacy.definition not in PURE_TARGETS
                or _shift_reason(units) is not None):
            return []
        recorded = record["baselines"]
        laplace = DiscreteLaplaceMixture((Fraction(recorded["discrete_laplace"]["scale"]),), (1,))
        laplace_ok = lattice_privacy_check(laplace, shift_pattern(units), spec.privacy).passed
        continuous = recorded["continuous_r2dp"]
        if "second_fold" in continuous:
            design = R2DPMechanism(fold_from_parameters(continuous["second_fold"]), space.dimension)
            continuous_ok = all(c.passed for c in design.privacy_checks(space, spec.privacy))
            value, word = design.expected_utility(spec.utility).value, "its recorded second fold, privacy re-checked"
        else:
            value, word = R2DPMechanism.utility_bound(problem), "the staircase bound on every continuous design"
            continuous_ok = value is not None and _worse(record.get("value"), value, spec.utility.metric) <= BOUND_MARGIN
        mine = self.expected_utility(spec.utility).value
        stated = record.get(EXACT_COST_KEY)
        cost_ok = stated is None or (value is not None and isinstance(stated, dict)  # None: issued before the key
                                     and _close(exact_cost(spec.utility.metric, mine, value)["ratio"],
                                                stated.get("ratio")))
        values = (self.one_atom_value(laplace.scales[0], spec.utility), value)
        agree = (_close(values[0], recorded["discrete_laplace"]["value"])
                 and _close(values[1], continuous.get("value", continuous.get("bound")))
                 and _close(mine, record.get("value")) and laplace_ok and continuous_ok and cost_ok)
        return [Check(
            "r2dp.comparison",
            f"the recorded comparison at the same ε is recomputed: the discrete Laplace (its recorded scale, privacy "
            f"re-checked), the continuous R²DP ({word}), this mixture, for the spec's metric, and the stated cost of "
            f"exactness ({EXACT_COST_KEY}: the mixture's value over the continuous one's)",
            agree, _lattice_verdict(spec.utility.metric, mine, *values, "bound" in continuous),
        )]

    def privacy_summary(self, space: SensitivitySpace) -> dict:
        if _shift_reason(space) is not None:
            return {}
        eps = pattern_epsilon_upper(self.mixture, shift_pattern(space))
        return {"epsilon": float(eps), "epsilon_upper": str(eps),
                "conversion": "exact: ε = max_v Σ_i ln(a(0)/a(|v_i|)) for the discrete Laplace mixture, "
                              "a(n) = Σ w_j tanh(1/(2s_j)) e^{−n/s_j} (upper end of a 256-bit ball)"}

    def notes(self) -> list[str]:
        largest = max(1 / s for s in self.mixture.scales)
        notes = [
            EXACT_SAMPLER_NOTE.format(algorithm=f"Algorithms 1–2 for each discrete Laplace component; the component "
                                                f"from one uniform integer below {self.mixture.total}"),
            ("R²DP on counts: the component (its scale s_j) is drawn afresh for every coordinate of every release and "
             "is never disclosed; conditional on it the release would be discrete Laplace with ε = Δ/s_j, up to "
             f"{float(largest):.6g}·Δ here (the certificate holds only the mixture)"),
        ]
        b = self.design_record.get("baselines")
        if b:
            c = b["continuous_r2dp"]
            notes.append("comparison at the same ε: " + _lattice_verdict(
                self.design_record["metric"], self.design_record.get("value"), b["discrete_laplace"]["value"],
                c.get("value", c.get("bound")), "bound" in c))
        return notes

    # --------------------------------------------------------------- utility
    def _utility(self, utility: Utility) -> UtilityValue | None:
        if utility.metric == "mallows":
            check_prior(utility, self.dimension)
            return UtilityValue("mallows", mallows_value(self.mixture, utility),
                                f"exact sum over the quantile coupling of the discrete law (support |k| ≤ "
                                f"{_mallows_support(self.mixture, utility.order)}, truncation changes W_p by at most "
                                f"{MALLOWS_TRUNCATION:g})")
        if utility.metric in ("kl", "renyi"):
            check_prior(utility, self.dimension)
            return UtilityValue(utility.metric, prior_metric(self.mixture, utility),
                                f"exact sum over the integers |k| ≤ {self.mixture.truncation} (the neglected "
                                "probability and first absolute moment below 1e-20)")
        return None

    def _expected_l1(self) -> float:
        return self.dimension * self.mixture.moments()["mean_abs"]

    def _expected_l2(self, workload: np.ndarray | None) -> float:
        frob = self.dimension if workload is None else float(np.sum(workload**2))
        return self.mixture.moments()["second_moment"] * frob

    def _usefulness(self, gamma: float) -> float:
        return self.mixture.moments(gamma)["within"]

    def _max_variance(self) -> float:
        return self.mixture.moments()["second_moment"]


def _one_atom_value(scale: Fraction, dimension: int, utility: Utility) -> float:
    """The metric of i.i.d. discrete Laplace noise of ``scale`` (a one-atom mixture: the prior metrics too)."""
    return R2DPOnCounts(DiscreteLaplaceMixture((scale,), (1,)), dimension).expected_utility(utility).value


def _metric_of_cost(expectation: float, utility: Utility, dimension: int) -> float | None:
    """A per-coordinate E[c] as the spec's metric (the dual bound in the metric's units)."""
    metric = utility.metric
    if metric == "usefulness":
        return 1.0 - expectation
    if metric == "l1":
        return dimension * expectation
    if metric == "l2":
        w = workload_matrix(utility)
        return expectation * (dimension if w is None else float(np.sum(w**2)))
    if metric in ("max_variance", "kl"):
        return expectation
    if metric == "renyi":
        argument = 1.0 + (expectation if utility.order > 1 else -expectation)
        return math.log(argument) / (utility.order - 1.0) if argument > 0 else None
    return None


def _close(a, b) -> bool:
    return isinstance(b, (int, float)) and (a == b or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-15))


def _lattice_verdict(metric: str, mine: float, laplace: float, continuous: float | None, bound: bool) -> str:
    if continuous is None:
        return f"{metric}: no continuous R²DP bound to compare with"
    name = "every continuous R²DP (staircase bound)" if bound else "continuous R²DP (floating point)"
    values = {"R²DP on ℤ": mine, "discrete Laplace": laplace, name: continuous}
    text = ", ".join(f"{k} {v:.6g}" for k, v in values.items())
    return (f"{metric}: {text}; the exact mixture is {-_worse(mine, continuous, metric):+.3%} against the continuous "
            f"{'bound' if bound else 'design'} (positive: better), {-_worse(mine, laplace, metric):+.3%} against the "
            "discrete Laplace")


__all__ = ["R2DPOnCounts", "certify_mixture", "lattice_privacy_check", "lattice_reason"]
