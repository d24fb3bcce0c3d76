r"""The joint design: every counting query of a plan answered from one noisy histogram.

When the queries overlap (marginals of one table, a table and its total, ranges of the same
attribute) separate noise spends budget on the same records several times. The joint
design stacks them as one linear workload on the histogram of the attributes they use,

.. math:: W = \begin{pmatrix} \sqrt{w_1}\,W_1 A_1 P_1 \\ \vdots \\ \sqrt{w_k}\,W_k A_k P_k
          \end{pmatrix},

(P_i sums the shared histogram's cells into query i's cells, A_i is its matrix, W_i its own l2
workload, w_i its weight), so that E‖WZ‖² = Σ w_i E‖W_i A_i P_i Z‖² is the plan's weighted
total, and lets the ``gaussian_optimal`` family choose the covariance of Z for the whole
plan under the whole budget (:mod:`dpopt.optimize.covariance`; the strategy-matrix view of
HDMM, McKenna et al. 2018, with a Gaussian). Every query's answer A_i P_i (h + Z) is then
post-processing of one certified release. The plan keeps whichever of the joint and the
separate design has the smaller weighted total; both appear in the certificate's candidates.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dpopt.certificate.intervals import with_intervals
from dpopt.certificate.per_cell import mapped_half_widths, mapped_per_cell_errors
from dpopt.design.select import Candidate, design_candidates, select
from dpopt.domain.queries import CountingQuery, NumericQuery, compile_query
from dpopt.domain.workload import workload_matrix
from dpopt.errors import DpoptError
from dpopt.mechanisms import Mechanism, UtilityValue
from dpopt.problem import OnProblem, Problem, compile
from dpopt.plan.spec import plan_unit, query_spec
from dpopt.spec.models import Plan, Spec, Utility

FAMILY = "gaussian_optimal"
MAX_CELLS = 64
"""Largest shared histogram the joint design is tried on (its covariance program grows as cells²)."""
MAX_GENERATORS = 2_000
"""Largest number of listed sensitivity vectors (one privacy constraint of the covariance program each)."""


@dataclass(frozen=True)
class JointDesign(OnProblem):
    """The shared histogram's compiled spec, its certified mechanism and each query's map and error."""

    problem: Problem
    mechanism: Mechanism
    utility: UtilityValue
    candidates: list[Candidate]
    maps: list[np.ndarray]
    errors: list[UtilityValue]


def query_maps(specs: list[Spec],
               queries: list[CountingQuery | NumericQuery]) -> tuple[list[str], list[np.ndarray]] | str:
    """The shared histogram's attributes and each compiled query's map A_i P_i onto it, or why
    there is none."""
    if not all(isinstance(q, CountingQuery) for q in queries):
        return "a sum or mean is not a linear query of the histogram"
    used = {a for q in queries for a in q.attributes}
    attributes = [a for a in specs[0].data.attributes if a in used]
    if not attributes:
        return "no categorical attribute to share"
    shape = [len(specs[0].data.attributes[a]) for a in attributes]
    cells = int(np.prod(shape))
    if cells > MAX_CELLS:
        return f"the shared histogram has {cells} cells (limit {MAX_CELLS})"
    coords = np.unravel_index(np.arange(cells), shape)
    maps = []
    for q in queries:
        own = [coords[attributes.index(a)] for a in q.attributes]
        own_shape = [len(lv) for lv in q.levels]
        index = np.ravel_multi_index(own, own_shape) if own else np.zeros(cells, dtype=int)
        p = np.zeros((q.cells, cells))
        p[index, np.arange(cells)] = 1.0
        maps.append(np.asarray(q.matrix @ p, dtype=float))
    return attributes, maps


def joint_spec(plan: Plan, specs: list[Spec], target: dict,
               queries: list[CountingQuery | NumericQuery]) -> tuple[Spec, list[np.ndarray]] | str:
    """The shared histogram's spec (workload W of the module docstring, whole target), or why there is
    none; ``queries`` are the specs' compiled queries."""
    if any(s.utility.metric != "l2" for s in specs):
        return "the joint workload needs an l2 metric for every query"
    found = query_maps(specs, queries)
    if isinstance(found, str):
        return found
    attributes, maps = found
    rows = []
    for q, s, m in zip(plan.queries, specs, maps):
        w = workload_matrix(s.utility)
        rows.append(np.sqrt(q.weight) * (m if w is None else w @ m))
    workload = np.vstack(rows)
    document = specs[0].model_dump(mode="json", exclude_none=True)
    if plan.data.privacy_unit is not None:  # the bounds the shared histogram sees (specs[0] has its own query's)
        document["data"]["privacy_unit"] = plan_unit(plan.data, attributes).model_dump(exclude_none=True)
    document.update({
        "name": f"{plan.name} / joint",
        "query": {"kind": "contingency_table", "attributes": attributes},
        "privacy": target,
        "mechanism": FAMILY,
        "utility": {"metric": "l2", "workload": workload.tolist()},
    })
    return Spec.model_validate(document), maps


def query_errors(mechanism: Mechanism, specs: list[Spec], maps: list[np.ndarray]) -> list[UtilityValue]:
    """E‖W_i A_i P_i Z‖² for every query (closed forms of the joint mechanism)."""
    out = []
    for s, m in zip(specs, maps):
        w = workload_matrix(s.utility)
        u = mechanism.expected_utility(Utility(metric="l2", workload=(m if w is None else w @ m).tolist()))
        out.append(u)
    return out


def joint_per_cell(plan: Plan, target: dict, mechanism: Mechanism, maps: list[np.ndarray]) -> list[dict]:
    """Each query's ``utility.per_cell`` block under the joint release: the errors of its noise M_i·Z
    (:func:`~dpopt.certificate.per_cell.mapped_per_cell_errors`) and its intervals, at any level through the
    proven half-widths of the mapped law (:func:`~dpopt.certificate.per_cell.mapped_half_widths`). Recorded in
    each row of the plan certificate and re-derived by :func:`dpopt.plan.certificate.verify_plan`."""
    out = []
    for i, m in enumerate(maps):
        spec = query_spec(plan, i, target)
        block = mapped_per_cell_errors(mechanism, m, compile_query(spec).labels)
        out.append(with_intervals(block, spec, half_width=lambda level, m=m: mapped_half_widths(mechanism, m, level)))
    return out


def _cached_problem(problems: list[Problem], joint: Spec) -> Problem | None:
    """The plan's table over exactly the shared attributes, compiled, restated for the joint spec
    (the same query, hence the same space: it does not depend on the target or the utility), or None."""
    for problem in problems:
        query = problem.spec.query
        if query.kind == "contingency_table" and query.attributes == joint.query.attributes:
            return problem.restated(joint)
    return None


def design_joint(plan: Plan, specs: list[Spec], target: dict, problems: list[Problem]) -> JointDesign | str:
    """The joint design under ``target`` (the plan's whole budget), or the reason it is not available.

    ``problems`` are the plan's queries compiled. Under invariants the shared histogram must be
    one of the plan's tables (its Semi-DP space, costly to derive, is then reused); without, it
    is compiled.
    """
    found = joint_spec(plan, specs, target, [p.query for p in problems])
    if isinstance(found, str):
        return found
    spec, maps = found
    problem = _cached_problem(problems, spec)
    if problem is None and plan.invariants:
        return ("under invariants the shared histogram (" + " x ".join(spec.query.attributes)
                + ") must be one of the plan's tables")
    try:
        problem = compile(spec) if problem is None else problem
        generators = len(problem.space.vectors())
        if generators > MAX_GENERATORS:
            return f"the shared histogram's sensitivity space has {generators} generators (limit {MAX_GENERATORS})"
        candidates = design_candidates(problem)
        chosen = select(candidates, "l2")
        errors = query_errors(chosen.mechanism, specs, maps)
    except (DpoptError, ValueError) as exc:
        return f"{FAMILY} on the shared histogram: {exc}"
    return JointDesign(problem, chosen.mechanism, chosen.utility, candidates, maps, errors)
