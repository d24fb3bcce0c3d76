"""Solving a plan: allocate the budget, design every query, compose, certify.

1. Every query is designed (all the families it allows, :func:`dpopt.design.select.select`)
   under an **equal split** of the budget's additive currency (:mod:`dpopt.plan.compose`),
   then its chosen family again at half that share: the two designs fit the power law
   u_i(s) = a_i s^{−p_i} of its utility (:mod:`dpopt.plan.allocate`); for Gaussian noise
   with a variance metric under a zCDP/GDP currency p = 1 exactly and the second design
   is skipped.
2. The shares minimising Σ w_i a_i s_i^{−p_i} are found (closed form, else cvxpy), and every
   query is designed again at its share; the weighted total of the *designed* utilities is
   compared with the equal split's (the ratio is reported; the better of the two is kept).
3. An (ε, δ) target is designed in μ-GDP (currency μ²): the total μ starts at the exact
   conversion μ(ε, δ) (Dong, Roth & Su 2022, Cor. 2.13; tight when every mechanism is
   Gaussian) and is raised by bisection while the composed PLD of the dominating pairs
   still meets (ε, δ) on its pessimistic side.
4. Every query is certified by the single-query pipeline under its own target (its family's
   own privacy checks; the second routes are run by ``dpopt verify``), and the composition
   is checked (:mod:`dpopt.plan.compose`): exactly for additive targets, on the composed PLD
   for (ε, δ).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from dpopt.certificate.build import certify
from dpopt.certificate.model import Certificate
from dpopt.design.select import Candidate, design_candidates, select
from dpopt.errors import CalibrationError, UnsupportedSpecError
from dpopt.mechanisms import Mechanism, UtilityValue, better
from dpopt.plan.allocate import Allocation, allocate, power_law
from dpopt.plan.certificate import CANDIDATE_ROWS, plan_certificate
from dpopt.plan.compose import composed_pld, dominating_pair, fit_targets
from dpopt.plan.joint import JointDesign, design_joint
from dpopt.plan.spec import load_plan, query_spec
from dpopt.privacy.gaussian import gaussian_mu
from dpopt.problem import OnProblem, Problem, compile
from dpopt.spec.models import Plan, Spec

BISECTION_STEPS = 12
"""Bisection steps on the total μ of an (ε, δ) plan (relative precision 2⁻¹² of the bracket)."""


@dataclass(frozen=True)
class QueryDesign(OnProblem):
    """One query designed under its share of the budget, on its compiled problem."""

    name: str
    weight: float
    share: float
    target: dict
    problem: Problem
    mechanism: Mechanism
    utility: UtilityValue
    candidates: list[Candidate]

    def weighted(self) -> float:
        return self.weight * self.utility.value


@dataclass(frozen=True)
class PlanSolution:
    """What :func:`solve_plan` returns: the designs, the allocation and the plan certificate."""

    plan: Plan
    designs: list[QueryDesign]
    allocation: Allocation
    comparison: dict
    certificates: list[Certificate]
    certificate: Certificate
    joint: JointDesign | None = None
    """The joint design when it was kept (then every query is answered from its release)."""


def _design(plan: Plan, index: int, target: dict, share: float, family: str | None = None,
            problem: Problem | None = None) -> QueryDesign:
    """Query ``index`` designed under ``target``; ``problem`` is the query compiled under another
    target (:meth:`Problem.restated`), else it is compiled here."""
    spec = query_spec(plan, index, target)
    if family is not None:
        spec = spec.model_copy(update={"mechanism": family})
    problem = compile(spec) if problem is None else problem.restated(spec)
    candidates = design_candidates(problem)
    chosen = select(candidates, spec.utility.metric)
    q = plan.queries[index]
    if not math.isfinite(chosen.utility.value):
        raise UnsupportedSpecError(
            f"queries[{index}].utility", f"{q.name!r}: its {spec.utility.metric} lies beyond the double range (log "
            f"{chosen.utility.log_value:.6g}), so the plan's weighted total of the queries' utilities is not a number; "
            "solve that query alone (its certificate states the log-volume)")
    return QueryDesign(q.name, q.weight, share, target, problem, chosen.mechanism, chosen.utility, candidates)


def _design_all(plan: Plan, total: float, shares: list[float], problems: list[Problem | None],
                families: list[str] | None = None) -> list[QueryDesign]:
    """Every query designed at its share; ``problems`` holds each query compiled once (its query,
    invariant domain and sensitivity space depend on neither the target nor the family)."""
    definition = plan.privacy.definition
    targets = fit_targets(definition, total, shares)
    designs = [_design(plan, i, t, s, None if families is None else families[i], problems[i])
               for i, (t, s) in enumerate(zip(targets, shares))]
    problems[:] = [d.problem for d in designs]
    return designs


LATTICE_GAUSSIAN_FAMILIES = ("gaussian", "projected_gaussian", "marginal_gaussian", "kronecker_gaussian",
                             "gaussian_optimal")
"""Families whose exact (lattice) designs keep the continuous design's cost scaling 1/s (:func:`_exponent_known`)."""


def _exponent_known(design: QueryDesign, definition: str) -> bool:
    """p = 1 exactly: Gaussian noise under a zCDP/GDP currency with a variance metric. A Gaussian
    law is μ-GDP iff its whitened sensitivity is ≤ μ (and ρ-zCDP iff it is ≤ √(2ρ)), so the
    optimal covariance at share s is (s₀/s) times the one at s₀ and E‖WZ‖², max Var ∝ 1/s. A Gaussian design
    measured exactly on a lattice (:mod:`dpopt.mechanisms.lattice`) has the continuous design's cost up to its
    lattice variance's rounding (below 2^-20 relative): the allocation uses the same exponent. So do the exact
    Kronecker design (its blocks' variances are τ²w_T with τ² ∝ 1/s at fixed integer factors, E‖Z‖² linear in
    them; the scale search and the GDP slope's 1/(12σ²) move it by the recorded ``lattice_rounding_ratio``, below
    10⁻³ on the examples) and the integer strategy of ``gaussian_optimal`` (M = round(cΣ^{+1/2}) at the continuous
    Σ ∝ 1/s: the cost is the continuous one times the stated ``lattice_cost_ratio``, 1.0002–1.0003 on the examples). The
    model is only the allocation's: every design is then built at its share and certified at its own cost, and the
    plan keeps the better of the optimal and the equal split by those certified costs."""
    mechanism = design.mechanism
    gaussian = getattr(mechanism.noise_law(), "gaussian", False) or (
        mechanism.needs_integer_answers and mechanism.family in LATTICE_GAUSSIAN_FAMILIES)
    return definition in ("gdp", "zcdp", "approx") and design.spec.utility.metric in ("l2", "max_variance") and gaussian


def _check_plan(plan: Plan) -> None:
    if plan.privacy.definition == "pdp":
        raise UnsupportedSpecError("privacy", "a plan needs a composable target (pure, approx, gdp or zcdp); "
                                              "probabilistic DP does not compose additively")
    for i, q in enumerate(plan.queries):
        metric = (q.utility or plan.utility).metric
        if (q.utility or plan.utility).table_goals:
            raise UnsupportedSpecError(f"queries[{i}].utility", "table weights, targets and objective are served in "
                                                                "a single spec, not in a plan (whose allocation "
                                                                "weighs each query's total error)")
        if better(metric) == "higher":
            raise UnsupportedSpecError(f"queries[{i}].utility", f"a plan minimises a weighted total of costs; "
                                                                f"'{metric}' is to be maximised (use l2, l1 …)")


def equal_shares(fixed: list[float | None]) -> list[float]:
    """The fixed shares, and the rest of the budget split equally among the other queries."""
    free = [f for f in fixed if f is None]
    rest = (1.0 - sum(f for f in fixed if f is not None)) / len(free) if free else 0.0
    return [rest if f is None else f for f in fixed]


def _total(plan: Plan) -> float:
    p = plan.privacy.parameters
    if plan.privacy.definition == "approx":
        return gaussian_mu(p["epsilon"], p["delta"])
    return {"gdp": p.get("mu"), "zcdp": p.get("rho"), "pure": p.get("epsilon")}[plan.privacy.definition]


def _meets_approx(designs: list[QueryDesign], epsilon: float, delta: float) -> bool:
    pairs = [dominating_pair(d.mechanism, d.space) for d in designs]
    if any(isinstance(p, str) for p in pairs):
        return False
    return float(composed_pld(pairs).upper.delta(epsilon)[0]) <= delta


def _calibrate_approx(plan: Plan, mu: float, designs: list[QueryDesign]) -> tuple[float, list[QueryDesign]]:
    """The largest total μ (to 2⁻¹² of [μ, 3μ]) whose designs' composed PLD meets (ε, δ); μ itself
    is feasible by GDP composition and the exact conversion."""
    p = plan.privacy.parameters
    if all(getattr(d.mechanism.noise_law(), "gaussian", False) for d in designs):
        return mu, designs
    shares = [d.share for d in designs]
    families = [d.mechanism.family for d in designs]
    lo, hi, best = mu, 3.0 * mu, designs
    for _ in range(BISECTION_STEPS):
        mid = 0.5 * (lo + hi)
        try:
            trial = _design_all(plan, mid, shares, [d.problem for d in designs], families)
        except CalibrationError:
            hi = mid
            continue
        if _meets_approx(trial, p["epsilon"], p["delta"]):
            lo, best = mid, trial
        else:
            hi = mid
    return lo, best


def solve_plan(source: Plan | Spec | str | Path | Mapping[str, Any]) -> PlanSolution:
    """Allocate, design, compose and certify a plan (module docstring).

    Raises
    ------
    SpecError, UnsupportedSpecError
        A malformed plan, or a target or metric a plan cannot compose.
    CalibrationError
        A query no family can serve, or a failed certification.

    Examples
    --------
    >>> sol = solve_plan({"dpopt": 1, "name": "p", "data": {"attributes": {"a": ["x", "y", "z"]}},
    ...                   "queries": [{"query": {"kind": "count"}},
    ...                               {"query": {"kind": "histogram", "attribute": "a"}, "weight": 3}],
    ...                   "adjacency": "add_remove", "privacy": {"zcdp": {"rho": 0.5}},
    ...                   "mechanism": "gaussian"})
    >>> [round(d.share, 4) for d in sol.designs]
    [0.25, 0.75]
    """
    plan = load_plan(source)
    _check_plan(plan)
    total = _total(plan)
    fixed = [q.share for q in plan.queries]
    problems: list[Problem | None] = [None] * len(plan.queries)
    equal = _design_all(plan, total, equal_shares(fixed), problems)
    definition = plan.privacy.definition
    fits = []
    for i, e in enumerate(equal):
        if _exponent_known(e, definition):
            fits.append((e.utility.value * e.share, 1.0))
            continue
        target = fit_targets(definition, total, [e.share / 2])[0]
        h = _design(plan, i, target, e.share / 2, e.mechanism.family, problems[i])
        fits.append(power_law(e.utility.value, e.share, h.utility.value, h.share))
    b = np.array([d.weight * a for d, (a, _) in zip(equal, fits)])
    p = np.array([pi for _, pi in fits])
    allocation = allocate(b, p, fixed)
    optimal = _design_all(plan, total, list(allocation.shares), problems)
    equal_total = sum(d.weighted() for d in equal)
    optimal_total = sum(d.weighted() for d in optimal)
    kept = "optimal" if optimal_total <= equal_total else "equal split"
    designs = optimal if kept == "optimal" else equal
    comparison = {
        "equal_split_weighted_total": equal_total,
        "optimal_weighted_total": optimal_total,
        "ratio_optimal_to_equal": optimal_total / equal_total if equal_total > 0 else 1.0,
        "kept": kept,
        "exponents": p.tolist(),
    }
    if plan.privacy.definition == "approx":
        mu, designs = _calibrate_approx(plan, total, designs)
        comparison["gdp_design_total_mu"] = mu
    joint = _joint(plan, designs, total)
    separate_total = sum(d.weighted() for d in designs)
    comparison["candidates"] = [
        {"design": CANDIDATE_ROWS[0], "weighted_total": optimal_total},
        {"design": CANDIDATE_ROWS[1], "weighted_total": equal_total},
        {"design": CANDIDATE_ROWS[2],
         **({"weighted_total": joint.utility.value} if isinstance(joint, JointDesign) else
            {"weighted_total": None, "note": joint})},
    ]
    use_joint = isinstance(joint, JointDesign) and joint.utility.value < separate_total
    comparison["design"] = "joint" if use_joint else "separate"
    # the second routes (per query and of the composition) are left to dpopt verify: at 50 queries
    # they would dominate the solve (Kolmogorov–Smirnov tests of every coordinate's sampler)
    if use_joint:
        certificates = [certify(joint.problem, joint.mechanism, joint.utility, joint.candidates, second_route=False)]
        certificate = plan_certificate(plan, designs, certificates, allocation, comparison, joint)
        return PlanSolution(plan, designs, allocation, comparison, certificates, certificate, joint)
    certificates = [certify(d.problem, d.mechanism, d.utility, d.candidates, second_route=False)
                    for d in designs]
    certificate = plan_certificate(plan, designs, certificates, allocation, comparison)
    return PlanSolution(plan, designs, allocation, comparison, certificates, certificate)


def _joint(plan: Plan, designs: list[QueryDesign], total: float) -> JointDesign | str:
    """The joint design under the whole budget (μ-GDP μ(ε, δ) for an (ε, δ) target, exact for one
    Gaussian), or the reason there is none."""
    definition = plan.privacy.definition
    if definition == "pure":
        return "the joint design is Gaussian: no pure ε guarantee"
    allowed = plan.mechanism == "auto" or "gaussian_optimal" in (
        [plan.mechanism] if isinstance(plan.mechanism, str) else plan.mechanism)
    if not allowed or any(q.mechanism is not None for q in plan.queries):
        return "the plan's mechanism choice does not allow gaussian_optimal for all queries"
    target = {"gdp": {"mu": total}} if definition == "approx" else {definition: plan.privacy.parameters}
    specs = [query_spec(plan, i, target) for i in range(len(plan.queries))]
    return design_joint(plan, specs, target, [d.problem for d in designs])
