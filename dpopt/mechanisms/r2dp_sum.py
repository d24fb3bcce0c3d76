r"""R²DP on a bounded sum or mean, measured exactly on a dyadic lattice.

The answer is measured as the integer lattice sum N of :mod:`dpopt.mechanisms.real_lattice` (units of g = 2^e, each
record rounded half up in exact arithmetic, the rounding charged to the sensitivity Δ_u), and receives η from the
mixture of discrete Laplace laws of :mod:`dpopt.mechanisms.r2dp_counts`, designed on ℤ for the integer shift Δ_u:

- **the lattice** as ``laplace``'s sum path: g = 2^e ≤ 2^-20 min(b, Δ) in sum units, b = Δ/ε₀ the Laplace scale at
  the target's pure ε₀ (:func:`~dpopt.privacy.pure_conversion.pure_epsilon_for`), so that the unit the rounding
  adds to Δ costs below 2^-20 relative in the scale;
- **the mixture**: the LP on ℤ of :func:`~dpopt.optimize.r2dp_lattice_lp.optimize_lattice_mixture` over dyadic
  scales at ε₀ and the shift Δ_u, its weights rounded to integers over 2^32, certified by the ball check, and the
  discrete Laplace at Δ_u/ε₀ as a candidate (:meth:`~dpopt.mechanisms.r2dp_counts.R2DPOnCounts._lp_design`, on the
  lattice's one-dimensional integer space, the metric in units of g/n: usefulness's γ divided by g/n);
- **privacy**: ε(Δ_u) = ln(Σ_j w_j c_j / Σ_j w_j c_j e^{−Δ_u/s_j}), c_j = tanh(1/(2s_j)), the supremum of the log
  pmf ratio under integer shifts ≤ Δ_u (:mod:`dpopt.privacy.r2dp_lattice`), in 256-bit ball arithmetic, converted
  to the target as the continuous family's ε₀; the brute-force cross-check of the closed form enumerates the
  integers |k| ≤ 2Δ_u (the supremum is attained at k = 0, inside the window);
- **the release** g(N + η)/n, formed from the integer N + η alone.

The metrics are the discrete law's, in answer units: E|η|·g/n, E η²·(g/n)², P(|η| ≤ γn/g). The record compares the
mixture with the discrete Laplace at the same ε and with the continuous R²DP (its staircase bound, or its second
fold), and states the cost of exactness (``exact_cost``), all recomputed by ``dpopt verify``. The prior metrics
(kl, renyi, mallows: sums over 10⁶ lattice units per atom), ``sampler: floating_point`` and the other refusals of
:func:`~dpopt.mechanisms.exact_sum._refusal` keep the continuous design, the reason in its notes.
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import numpy as np

from dpopt.core.checks import Check
from dpopt.domain.queries import NumericQuery
from dpopt.errors import CalibrationError
from dpopt.mechanisms.exact_sum import _LatticeSum, _refusal
from dpopt.mechanisms.iid_floor import symmetric_iid_bound
from dpopt.mechanisms.r2dp import R2DPMechanism
from dpopt.mechanisms.r2dp_counts import R2DPOnCounts, _one_atom, certify_mixture, fill_budget
from dpopt.mechanisms.real_lattice import (
    EXACT_SUM_NOTE,
    LATTICE_BITS,
    RealLattice,
    answer_units,
    exponent_at_most,
    real_lattice,
)
from dpopt.noise.discrete_laplace_mixture import DiscreteLaplaceMixture
from dpopt.privacy.pure_conversion import pure_epsilon_for
from dpopt.problem import Problem
from dpopt.sensitivity.patterns import shift_pattern
from dpopt.sensitivity.space import SensitivitySpace
from dpopt.spec.models import Privacy, Utility

SUM_METRICS = ("l1", "l2", "max_variance", "usefulness")
"""The metrics of the discrete mixture in closed form (the LP's cheap objectives)."""


def sum_reason(problem: Problem) -> str | None:
    """Why ``r2dp`` on a bounded sum or mean keeps the continuous design (None: measured on the lattice)."""
    if R2DPMechanism.supports(problem) is not None:
        return "unsupported"
    if problem.spec.utility.metric not in SUM_METRICS:
        return (f"the {problem.spec.utility.metric} metric of the lattice mixture is not predicted on a sum "
                f"(metrics: {', '.join(SUM_METRICS)})")
    return _refusal(problem)


def _units_utility(utility: Utility, unit: Fraction) -> Utility:
    """The metric in units of the published spacing u = g/n (only usefulness's γ depends on it)."""
    if utility.metric == "usefulness":
        return Utility(metric="usefulness", gamma=float(Fraction(utility.gamma) / unit))
    return Utility(metric=utility.metric)


def _in_answer_units(value: float | None, metric: str, unit: Fraction) -> float | None:
    """A value of the metric in units (E|η|, E η², a probability) in answer units."""
    if value is None:
        return None
    power = {"l1": 1, "l2": 2, "max_variance": 2}.get(metric, 0)
    return value * float(unit) ** power


class R2DPOnSums(_LatticeSum, R2DPOnCounts):
    """``r2dp``: on a bounded sum or mean, N + η with η from a discrete Laplace mixture in units of g (module
    docstring); on any other spec the design of :class:`~dpopt.mechanisms.r2dp_counts.R2DPOnCounts`."""

    family = "r2dp"  # registered in place of R2DPOnCounts, whose design it refines on bounded sums and means
    title = "R²DP on a bounded sum or mean: a mixture of discrete Laplace laws on a dyadic lattice (exact sampler)"
    needs_integer_answers = False  # the answer is real, measured on the lattice

    def __init__(self, mixture: DiscreteLaplaceMixture, lattice: RealLattice, design: dict | None = None):
        super().__init__(mixture, 1, design)
        self.lattice = lattice

    @classmethod
    def utility_bound(cls, problem: Problem) -> float | None:
        """The larger of :meth:`R2DPOnCounts.utility_bound` and, under ρ-zCDP and μ-GDP with every move listed,
        :func:`~dpopt.mechanisms.iid_floor.symmetric_iid_bound` (every R²DP design, continuous or a discrete Laplace
        mixture on ℤ or (1/D)ℤ, adds i.i.d. noise symmetric about 0); None on a sum measured on the lattice (the
        continuous family's staircase bound is proven for noise private under every real shift, which a lattice law is
        not, and a sum's space does not list its moves)."""
        if isinstance(problem.query, NumericQuery) and sum_reason(problem) is None:
            return None
        floor = symmetric_iid_bound(problem) if cls.supports(problem) is None else None
        return max((b for b in (R2DPOnCounts.utility_bound(problem), floor) if b is not None), default=None)

    @classmethod
    def design(cls, problem: Problem) -> R2DPMechanism:
        """On a bounded sum or mean the exact lattice mixture unless :func:`sum_reason` rules it out (then the
        continuous design, the reason in its notes); otherwise :meth:`R2DPOnCounts.design`."""
        if not isinstance(problem.query, NumericQuery):
            return R2DPOnCounts.design(problem)
        reason = sum_reason(problem)
        if reason is None:
            try:
                return R2DPOnCounts._compared(problem, cls._sum_design(problem))
            except CalibrationError as exc:
                reason = f"on the lattice: {exc}"
        continuous = R2DPMechanism.design(problem)
        if reason != "unsupported":
            continuous.refusal = reason
        return continuous

    @classmethod
    def _sum_design(cls, problem: Problem) -> R2DPOnSums:
        """The lattice (module docstring), the certified mixture for the metric in units, and its record."""
        spec = problem.spec
        utility = spec.utility
        epsilon = pure_epsilon_for(spec.privacy)
        _, sensitivity = answer_units(problem)
        lattice = real_lattice(problem, exponent_at_most(min(sensitivity / Fraction(epsilon), sensitivity),
                                                         LATTICE_BITS))
        units = replace(problem, space=lattice.space())
        pattern = shift_pattern(units.space)
        laplace = certify_mixture(fill_budget(_one_atom(pattern, epsilon), pattern, epsilon), pattern, spec.privacy)
        chosen, optimal, how, extra = R2DPOnCounts._lp_design(units, pattern, laplace,
                                                              _units_utility(utility, lattice.unit))
        if chosen is None or laplace is None:
            raise CalibrationError("no discrete Laplace mixture passed the exact privacy check")
        extra["bound_all_mixtures"] = _in_answer_units(extra["bound_all_mixtures"], utility.metric, lattice.unit)
        record = {
            "metric": utility.metric,
            "per_coordinate": {"epsilon": epsilon, "shift": lattice.shift, "coordinates_moved": 1, "exact": True},
            "method": f"{how}; on the lattice sum N in units of g (shift Δ_u = {lattice.shift})",
            "discrete_laplace_optimal_among_mixtures": optimal,
            **extra,
        }
        mechanism = cls(chosen, lattice, record)
        record["baselines"] = {"discrete_laplace": {"scale": str(laplace.scales[0]),
                                                    "value": mechanism.one_atom_value(laplace.scales[0], utility)}}
        record["value"] = mechanism.expected_utility(utility).value
        return mechanism

    @classmethod
    def from_parameters(cls, parameters: dict, space: SensitivitySpace) -> R2DPMechanism:
        if "sum_lattice" not in parameters:
            return R2DPOnCounts.from_parameters(parameters, space)
        return cls(DiscreteLaplaceMixture.from_parameters(parameters["mixture"]),
                   RealLattice.from_dict(parameters["sum_lattice"]), parameters.get("design"))

    @property
    def parameters(self) -> dict:
        return {**R2DPOnCounts.parameters.fget(self), "sum_lattice": self.lattice.to_dict()}

    def one_atom_value(self, scale: Fraction, utility: Utility) -> float:
        return R2DPOnSums(DiscreteLaplaceMixture((scale,), (1,)), self.lattice).expected_utility(utility).value

    # --------------------------------------------------------------- release and privacy
    def _units_noise(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return self.mixture.sample(rng, size)

    def units_privacy_checks(self, units: SensitivitySpace, privacy: Privacy) -> list[Check]:
        """The mixture's check on the integer moves of ``units`` (:meth:`R2DPOnCounts._privacy_checks`)."""
        return R2DPOnCounts._privacy_checks(self, units, privacy)

    def ratio_window(self, shift: int) -> int:
        """2Δ: the brute-force window holds k = 0, where the supremum is attained (module docstring), without the
        10⁷ integers of the counts' window at scales of 10⁶ units."""
        return 2 * shift

    def scope_checks(self, problem: Problem) -> list[Check]:
        """The lattice re-derived from the spec, and the recorded comparison recomputed."""
        return [*_LatticeSum.scope_checks(self, problem), *self.comparison_checks(problem, self.lattice.space())]

    def privacy_summary(self, space: SensitivitySpace) -> dict:
        return R2DPOnCounts.privacy_summary(self, self.lattice.space())

    def notes(self) -> list[str]:
        lat = self.lattice
        noise = (f"η from the discrete Laplace mixture {self.mixture} (a component from one uniform integer below "
                 f"{self.mixture.total}, then its discrete Laplace, Algorithms 1–2)")
        return [EXACT_SUM_NOTE.format(g=f"2^{lat.exponent}", noise=noise, divisor=lat.divisor, shift=lat.shift_text),
                *(note.replace("R²DP on counts:", "R²DP on the lattice sum:", 1)
                  for note in R2DPOnCounts.notes(self)[1:])]

    # --------------------------------------------------------------- utility
    def _utility(self, utility: Utility):
        return None

    def _expected_l1(self) -> float:
        return self.mixture.moments()["mean_abs"] * float(self.lattice.unit)

    def _expected_l2(self, workload: np.ndarray | None) -> float:
        frob = 1.0 if workload is None else float(np.sum(workload**2))
        return self._max_variance() * frob

    def _usefulness(self, gamma: float) -> float:
        return self.mixture.moments(float(Fraction(gamma) / self.lattice.unit))["within"]

    def _max_variance(self) -> float:
        return self.mixture.moments()["second_moment"] * float(self.lattice.unit) ** 2


__all__ = ["R2DPOnSums", "sum_reason"]
