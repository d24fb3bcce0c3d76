r"""The design of ``marginal_gaussian`` and its record, which ``dpopt verify`` re-derives (issue 35).

:func:`optimise` finds the coefficients a_T of the noise covariance (:mod:`dpopt.optimize.marginal_covariance`,
:mod:`dpopt.optimize.table_goals`). The design record of the parameters (``design``) states how they were found
and what they achieve; :func:`design_record_check` recomputes from the spec and the stored a_T every entry that a
closed form gives:

* ``target_mu``: μ of the target, 1/σ at unit sensitivity (:func:`target_mu`);
* ``mu_sigma_squared``: the exact Mahalanobis sensitivity μ_Σ² = max_δ δᵀGδ of the stored (continuous) a_T, times
  the multiplier² (:func:`~dpopt.optimize.marginal_covariance.exact_mahalanobis_squared`, rationals; the privacy
  check evaluates it at the lattice's a_T' instead);
* ``expected_l2``: Σ_T m_T λ_T / a_T; ``components``: the number of a_T;
* ``baselines`` (:func:`baselines`): with σ² = Δ₂²/μ², the direct Gaussian σ² d, its least-squares projection
  σ² rank, and the identity strategy (noise σ² k²·(2 under replace-one) on each of the N cells, summed into each
  of the B blocks: N·B·σ²);
* ``svd_bound`` (add/remove only): Li & Miklau's :math:`(\sum_T m_T\sqrt{\lambda_T})^2/(N\mu^2)`;
* ``lower_bound``: under add/remove with a total objective, the closed form of :func:`optimise` (the SVD
  bound, or its weighted form); otherwise the solver's dual bound, recorded — and then only checked to lie
  below the achieved objective;
* ``optimality_gap``: (objective − lower bound)/objective at the stored a_T;
* ``sampler``: ``exact``, or ``floating_point:`` and the reason the lattice sampler is refused;
* ``semi_dp`` (invariant margins): the exact bracket of :func:`semi_dp_bracket`.

Echoed, not re-derived (they state no guarantee): ``method`` (the optimiser's words), ``scale_factor`` (the
nudge's end point), ``semi_dp.error_lower_bound`` (a second program); ``tables`` is re-derived by
:func:`~dpopt.optimize.table_goals.goals_check`.
"""

from __future__ import annotations

import math
from fractions import Fraction

from dpopt.core.checks import Check
from dpopt.domain.marginal_algebra import MarginalWorkload, Subset
from dpopt.optimize.marginal_covariance import (
    MarginalDesign,
    components,
    exact_mahalanobis_squared,
    expected_error,
    optimal_coefficients,
    svd_bound,
)
from dpopt.optimize.table_goals import TableGoals, design_for_goals, table_errors, weighted_eigenvalues
from dpopt.privacy.gaussian_calibration import gaussian_sigma
from dpopt.problem import Problem
from dpopt.spec.models import Privacy

REL_TOL = 1e-9
"""Relative tolerance of a recorded float against its recomputation (the same closed form evaluated on another
machine; as :data:`dpopt.certificate.recorded.REL_TOL`)."""

ECHOED = ("method", "scale_factor", "semi_dp.error_lower_bound")
"""Entries of the record that are echoed (module docstring)."""


def target_mu(privacy: Privacy) -> float:
    """μ of the target: 1/σ at unit sensitivity (μ, √(2ρ), or the analytic-Gaussian μ*(ε, δ), rounded
    safely), as :func:`dpopt.optimize.covariance.target_mu` (which imports the SDP's constraint tools)."""
    return 1.0 / gaussian_sigma(Fraction(1), privacy)


def optimise(workload: MarginalWorkload, mu: float, replace: bool, fixed: tuple[Subset, ...], agree: Subset,
             goals: TableGoals, names: tuple[str, ...]) -> MarginalDesign:
    """The design for the spec's table goals (:mod:`dpopt.optimize.table_goals`): the unweighted total, the weighted
    total (at the weighted eigenvalues), or the convex program of the largest weighted error or of the targets;
    ``error`` and ``lower_bound`` are the objective's."""
    if goals.plain:
        return optimal_coefficients(workload, mu, replace, fixed, agree)
    if goals.objective == "total" and goals.targets_absent:
        return optimal_coefficients(workload, mu, replace, fixed, agree, weighted_eigenvalues(workload, goals.weights))
    found = design_for_goals(workload, components(workload, replace, fixed), goals, mu, replace, agree, names)
    return MarginalDesign(found.coefficients, found.objective, found.lower_bound, found.method)


def semi_dp_bracket(workload: MarginalWorkload, coefficients: dict, replace: bool, multiplier: int,
                    fixed: tuple[Subset, ...], agree: Subset) -> dict:
    r"""Under invariant margins, the exact Semi-DP Mahalanobis sensitivity μ_Σ² at ``coefficients`` bracketed
    (exact rationals, each times ``multiplier``²):

    * ``certified``: the max over the patterns D avoiding ``agree`` (the privacy check);
    * ``attained``: the max over the patterns D avoiding every invariant attribute, a lower bound that a pair of
      conforming datasets attains (a copies of a cell p replaced by a copies of a cell q that agrees with p on
      every invariant attribute: equal invariant margins, distance a);
    * ``all_pairs``: the max over every pattern, the bound before re-pairing.

    μ_Σ² is exact (``certified`` = ``attained``, ``relative_gap`` 0) when the worst pattern avoids every
    invariant attribute.
    """
    everything = tuple(sorted({k for f in fixed for k in f}))
    certified, attained, all_pairs = (exact_mahalanobis_squared(workload, coefficients, replace, a) * multiplier ** 2
                                      for a in (agree, everything, ()))
    return {"certified": str(certified), "attained": str(attained), "all_pairs": str(all_pairs),
            "relative_gap": float((certified - attained) / certified) if certified else 0.0,
            "gap_to_all_pairs": float((all_pairs - certified) / all_pairs) if all_pairs else 0.0}


def baselines(problem: Problem, workload: MarginalWorkload, mu: float, replace: bool, multiplier: int) -> dict:
    """The expected l2 errors of three simple designs at the same target (module docstring)."""
    space = problem.space
    sigma2 = float(space.l2_squared) / (mu * mu)
    identity = (2.0 if replace else 1.0) * multiplier * multiplier / (mu * mu) * len(workload.blocks) \
        * workload.algebra.cells
    return {"direct": sigma2 * workload.dimension, "direct_least_squares": sigma2 * space.rank,
            "identity_strategy": identity}


def objective_value(goals: TableGoals, workload: MarginalWorkload, coefficients: dict[Subset, float]) -> float:
    """The design's objective at ``coefficients``: E‖Z‖², or the table goals' value."""
    if goals.plain:
        return expected_error(workload, coefficients)
    return float(goals.value(table_errors(workload, coefficients)))


def design_record_check(problem: Problem, mechanism, sampler: str) -> Check:
    """``design.recorded``: the entries of ``mechanism.design_info`` a closed form gives, recomputed from the
    spec and the stored a_T (module docstring); ``sampler`` is the entry the design writes (``exact`` or
    ``floating_point: <reason>``).

    ``mechanism`` is a :class:`~dpopt.mechanisms.marginal_gaussian.MarginalGaussianMechanism` (its attributes,
    workload, replace, multiplier, fixed, agree, coefficients and design_info are read).
    """
    info = mechanism.design_info
    if not info:
        return Check("design.recorded", "no design record", True, "the parameters record none")
    spec, workload, k = problem.spec, mechanism.workload, mechanism.multiplier
    coefficients = mechanism.coefficients
    mu = target_mu(spec.privacy)
    goals = TableGoals.of(spec.utility, mechanism.attributes, workload)
    objective = objective_value(goals, workload, coefficients)
    expected = {
        "target_mu": mu,
        "mu_sigma_squared": str(exact_mahalanobis_squared(workload, coefficients, mechanism.replace, mechanism.agree)
                                * k * k),
        "expected_l2": expected_error(workload, coefficients),
        "components": len(coefficients),
        "sampler": sampler,
        "baselines": baselines(problem, workload, mu, mechanism.replace, k),
    }
    if not mechanism.replace:
        expected["svd_bound"] = svd_bound(workload, mu)
    closed = not mechanism.replace and goals.objective == "total" and goals.targets_absent
    if closed:  # no program: the bound is the closed form's
        expected["lower_bound"] = optimise(workload, mu / k, False, (), (), goals, mechanism.attributes).lower_bound
    lower = expected.get("lower_bound", info.get("lower_bound"))
    if _is_float(lower) and objective > 0:
        expected["optimality_gap"] = max(0.0, (objective - lower) / objective)
    if mechanism.fixed:
        expected["semi_dp"] = {**semi_dp_bracket(workload, coefficients, mechanism.replace, k, mechanism.fixed,
                                                 mechanism.agree), "error_lower_bound": _echo(info, "semi_dp")}
    off = [key for key, value in expected.items() if not _same(info.get(key), value, "gap" in key)]
    known = {*expected, "method", "scale_factor", "lower_bound", "optimality_gap", "tables"}
    off += [f"{key} (not recorded by this design)" for key in sorted(set(info) - known, key=str)]
    if not (_is_float(lower) and lower <= objective * (1 + REL_TOL)):
        off.append("lower_bound (above the achieved objective)")
    return Check("design.recorded",
                 "the design record re-derived from the spec and the stored a_T: target μ, the exact μ_Σ² of the "
                 "a_T, E‖Z‖², the baselines, the SVD bound (add/remove), the lower bound (closed form under "
                 "add/remove; a program's dual bound must lie below the objective), the optimality gap, the "
                 "sampler and the Semi-DP bracket; echoed: " + ", ".join(ECHOED),
                 not off,
                 f"μ = {mu:.17g}, E‖Z‖² = {expected['expected_l2']:.10g}, objective {objective:.10g}"
                 + (f"; recorded values differ: {', '.join(off)}" if off else ""))


def _is_float(value) -> bool:
    return isinstance(value, float) and math.isfinite(value)


def _echo(info: dict, block: str):
    """The recorded ``error_lower_bound`` of ``block`` when it is a finite float (echoed), else a marker that
    compares unequal to anything recorded."""
    value = info.get(block, {}).get("error_lower_bound") if isinstance(info.get(block), dict) else None
    return value if _is_float(value) else object()


def _same(recorded, expected, gap: bool = False) -> bool:
    """Equal JSON values, floats to :data:`REL_TOL` relative; a gap (a relative difference of two nearly equal
    floats, in [0, 1]) to :data:`REL_TOL` absolute."""
    if isinstance(expected, dict):
        return isinstance(recorded, dict) and set(expected) == set(recorded) \
            and all(_same(recorded[key], value, "gap" in key) for key, value in expected.items())
    if isinstance(expected, float):
        return _is_float(recorded) and math.isclose(recorded, expected, rel_tol=REL_TOL,
                                                    abs_tol=REL_TOL if gap else 1e-300)
    return type(recorded) is type(expected) and recorded == expected
