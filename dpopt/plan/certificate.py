"""One certificate for a plan, and its verification.

The plan certificate embeds the plan, the composed guarantee with the method that proves
it, the allocation, and for every query the full single-query certificate of its design
under its own target (mechanism, parameters, sensitivity, predicted utility, every check).
:func:`verify_plan` re-derives all of it: each query's certificate by
:func:`dpopt.certificate.verify.verify` (its spec must be the plan's query under the recorded
share), and the composition twice — by the target's composition rule in exact rational
arithmetic (additive targets) and by a second, numerical route: the privacy-loss
distributions of the rebuilt mechanisms' dominating pairs, composed by convolution
(:mod:`dpopt.plan.compose`).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from dpopt._version import __version__
from dpopt.certificate.composition import PLAN_PER_GROUP, groups_record_check
from dpopt.certificate.composition import composition_checks as composition_checks_groups
from dpopt.certificate.model import Certificate
from dpopt.certificate.recorded import certificate_schema, compare, recorded_check_claims
from dpopt.certificate.second_route import is_not_available
from dpopt.certificate.verify import Verification, rebuild_mechanism, verify
from dpopt.core.checks import Check
from dpopt.domain.queries import compile_query
from dpopt.privacy.semi_dp import REPORTED_DELTAS
from dpopt.errors import CalibrationError, DpoptError
from dpopt.plan.allocate import Allocation
from dpopt.plan.compose import ADDITIVE, additive_check, epsilon_per_delta, gdp_route_check, pld_check
from dpopt.plan.joint import joint_per_cell, joint_spec, query_errors
from dpopt.plan.spec import KIND, load_plan, plan_document, plan_sha256, query_spec
from dpopt.spec.load import load_spec
from dpopt.spec.models import Plan, Privacy

NOTES = [
    "each query's second route (privacy-loss distribution of its noise law, sampler tests, utility by "
    "integration) and the composition's second route are re-derived by dpopt verify, not recorded at solve time",
    "the shares are optimal for the power-law model of each query's utility fitted on its chosen family; the "
    "utilities recorded are those of the designed mechanisms",
]
"""Caveats every plan certificate carries."""


def _guarantee(plan: Plan, method: str, spaces, mechanisms) -> dict:
    """The plan's target and scope; a(t) is the same for every query (it depends on the
    invariants and n only), taken from the first query's space; the composed ε at each δ a
    single certificate states (:func:`dpopt.plan.compose.epsilon_per_delta`)."""
    return {
        "definition": plan.privacy.definition,
        **plan.privacy.parameters,
        "scope": {
            "adjacency": plan.adjacency.model_dump(),
            "invariants": [inv.model_dump() for inv in plan.invariants],
            "semi_adjacent_parameter": spaces[0].semi_adjacent_parameter,
        },
        "composition": method,
        **epsilon_per_delta(list(mechanisms), list(spaces), REPORTED_DELTAS,
                            plan.privacy.parameters["rho"] if plan.privacy.definition == "zcdp" else None),
    }


def _composition_method(definition: str) -> str:
    if definition in ADDITIVE:
        return {"zcdp": "ρ = Σ ρ_i", "gdp": "μ = √(Σ μ_i²)", "pure": "ε = Σ ε_i"}[definition] + (
            ", exact rational arithmetic; second route (dpopt verify): composed PLD of the dominating pairs")
    return ("designed in μ-GDP; (ε, δ) of the composed privacy-loss distributions of the dominating pairs "
            "(pessimistic side, grid 1e-4 nats)")


UTILITY_METHOD = {"separate": "Σ w_i u_i of the per-query predicted utilities",
                  "joint": "Σ w_i E‖W_i A_i P_i Z‖² of the joint release (closed forms)"}
"""How the plan's weighted total is computed, per design."""

CANDIDATE_ROWS = ("separate, optimal allocation", "separate, equal split",
                  "joint: gaussian_optimal on the shared histogram")
"""The designs a plan's comparison (``candidates``) lists, in order."""

SECOND_ROUTE = "composition.second_route"
"""The claim of the composition's second route: re-derived by :func:`verify_plan`, never recorded at solve time."""


def composition_checks(plan: Plan, targets: list[Privacy], mechanisms, spaces, names: list[str],
                       second_route: bool = True) -> list[Check]:
    """The composed guarantee: the exact rule for additive targets, then (``second_route``) the
    PLD route; for (ε, δ) the PLD route is the rule."""
    checks = []
    if plan.privacy.definition in ADDITIVE:
        checks.append(additive_check(plan.privacy, targets, names))
        if second_route:
            checks.append(pld_check(mechanisms, spaces, plan.privacy, claim=SECOND_ROUTE))
    else:
        pld = pld_check(mechanisms, spaces, plan.privacy, claim="composition.pld")
        checks.append(pld)
        if is_not_available(pld):  # no dominating pair: the GDP design's own composition is the proof
            checks.append(gdp_route_check(plan.privacy, targets, names))
    return checks


def _joint_rows(plan: Plan, target: dict, maps, errors, per_cells: list[dict]) -> list[dict]:
    """The ``queries`` rows of a joint design: each query post-processes the one release under the whole target;
    its ``per_cell`` block (errors and intervals of its mapped noise, :func:`dpopt.plan.joint.joint_per_cell`)."""
    return [{"name": q.name, "weight": q.weight, "share": 1.0, "target": target, "family": "joint",
             "parameters": {}, "sensitivity": {"dimension": int(m.shape[0])}, "utility": u.to_dict(),
             "per_cell": per_cell}
            for q, m, u, per_cell in zip(plan.queries, maps, errors, per_cells)]


def _joint_certificate(plan: Plan, certificate: Certificate, allocation: Allocation, comparison: dict,
                       joint) -> Certificate:
    """The plan certificate of a joint design: one certified release of the shared histogram, every
    query its post-processing (:mod:`dpopt.plan.joint`)."""
    checks = composition_checks(plan, [joint.spec.privacy], [joint.mechanism], [joint.space], ["joint"],
                                second_route=False)
    failed = [c for c in checks if not c.passed]
    if failed:
        raise CalibrationError("plan certification failed: " + "; ".join(f"{c.claim} ({c.detail})" for c in failed))
    target = joint.spec.privacy.model_dump(exclude_none=True)
    queries = _joint_rows(plan, target, joint.maps, joint.errors,
                          joint_per_cell(plan, target, joint.mechanism, joint.maps))
    return Certificate({
        "dpopt_version": __version__,
        "kind": KIND,
        "spec_sha256": plan_sha256(plan),
        "spec": plan_document(plan),
        "guarantee": _guarantee(plan, _composition_method(plan.privacy.definition), [joint.space], [joint.mechanism]),
        "sensitivity": certificate["sensitivity"],
        "mechanism": {"family": "plan", "parameters": {"joint": joint.mechanism.family}},
        "utility": {"metric": "weighted_total", "value": sum(q.weight * u.value for q, u in zip(plan.queries,
                                                                                              joint.errors)),
                    "method": UTILITY_METHOD["joint"]},
        "allocation": {**allocation.to_dict(), **{k: v for k, v in comparison.items() if k != "candidates"}},
        "design": "joint",
        "joint": {"certificate": certificate.data},
        "queries": queries,
        "candidates": comparison.get("candidates", []),
        "notes": NOTES,
        "checks": [c.to_dict() for c in checks],
        "whole_release": None,
    })


def group_checks(plan: Plan, block: dict) -> list[Check]:
    """The ``groups`` block of a grouped plan release (:func:`dpopt.certificate.composition.composition_checks`
    with the plan's target as the per-group one): the block's record check first, then the claims the
    release records (``dpopt release`` appends them to the plan's checks)."""
    per_group = query_spec(plan, 0, plan.privacy.model_dump(exclude_none=True))
    return [groups_record_check(per_group, block, PLAN_PER_GROUP)] + composition_checks_groups(per_group, block)


def _recorded_claims(data: dict, composed: list[Check], grouped: list[Check]) -> list[Check]:
    """The plan's recorded ``checks`` against the re-derived claims it records: the composition (its second
    route is re-derived only) and, for a grouped release, the groups' composition (not the block's record
    check, ``grouped[0]``); every recorded claim re-derived, none missing
    (:func:`dpopt.certificate.recorded.recorded_check_claims`)."""
    expected = [c for c in composed if c.claim != SECOND_ROUTE] + grouped[1:]
    return recorded_check_claims(data.get("checks"), expected, complete=True)


def _baselines(data: dict, total: float) -> list[Check]:
    """The allocation's comparison (the baselines) against the recomputed weighted total ``total`` of the
    certified design: the ratio and the kept allocation follow from the recorded totals, the comparison's
    rows repeat them, and the kept row is the certified total (a separate design outside (ε, δ), whose
    designs are recalibrated after the comparison; a joint design's row). The equal split's and the
    other allocation's totals are the solver's baselines (every query designed again), not re-derived."""
    allocation, rows = data["allocation"], data["candidates"]
    optimal, equal = allocation.get("optimal_weighted_total"), allocation.get("equal_split_weighted_total")
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) and x > 0 for x in (optimal, equal)) \
            or len(rows) != 3 or not all(isinstance(r, dict) for r in rows):
        return [Check("allocation.baselines", "the comparison records two positive totals and three rows", False,
                      f"optimal {optimal!r}, equal split {equal!r}, {len(rows)} rows")]
    kept = "optimal" if optimal <= equal else "equal split"
    expected = {"ratio_optimal_to_equal": optimal / equal, "kept": kept, "design": data.get("design"),
                "rows": [optimal, equal], "designs": list(CANDIDATE_ROWS)}
    recorded = {k: allocation.get(k) for k in ("ratio_optimal_to_equal", "kept", "design")}
    recorded["rows"] = [r.get("weighted_total") for r in rows[:2]]
    recorded["designs"] = [r.get("design") for r in rows]
    if data.get("design") == "joint":
        expected["joint"] = total
        recorded["joint"] = rows[2].get("weighted_total")
    elif data["guarantee"].get("definition") != "approx":
        expected["kept_total"] = total
        recorded["kept_total"] = optimal if kept == "optimal" else equal
    return [compare("allocation.baselines", "comparison of the allocations (ratio, kept, rows) and the certified "
                    "design's weighted total", recorded, expected)]


def plan_certificate(plan: Plan, designs, certificates: list[Certificate], allocation: Allocation,
                     comparison: dict, joint=None) -> Certificate:
    """Assemble the plan certificate (module docstring); with ``joint`` (a kept joint design),
    ``certificates`` holds its single certificate.

    Raises
    ------
    CalibrationError
        If the composition check fails: no certificate for a guarantee that does not hold.
    """
    if joint is not None:
        return _joint_certificate(plan, certificates[0], allocation, comparison, joint)
    names = [d.name for d in designs]
    targets = [d.spec.privacy for d in designs]
    checks = composition_checks(plan, targets, [d.mechanism for d in designs], [d.space for d in designs], names,
                                second_route=False)
    failed = [c for c in checks if not c.passed]
    if failed:
        raise CalibrationError("plan certification failed: " + "; ".join(f"{c.claim} ({c.detail})" for c in failed))
    queries = []
    for d, cert in zip(designs, certificates):
        queries.append({
            "name": d.name,
            "weight": d.weight,
            "share": d.share,
            "target": d.target,
            "family": d.mechanism.family,
            "parameters": d.mechanism.parameters,
            "sensitivity": {k: cert["sensitivity"].get(k) for k in ("dimension", "l1", "l2", "linf")},
            "utility": d.utility.to_dict(),
            "certificate": cert.data,
        })
    total = sum(d.weighted() for d in designs)
    data = {
        "dpopt_version": __version__,
        "kind": KIND,
        "spec_sha256": plan_sha256(plan),
        "spec": plan_document(plan),
        "guarantee": _guarantee(plan, _composition_method(plan.privacy.definition), [d.space for d in designs],
                                [d.mechanism for d in designs]),
        "sensitivity": {"queries": {d.name: q["sensitivity"] for d, q in zip(designs, queries)}},
        "mechanism": {"family": "plan", "parameters": {d.name: d.mechanism.family for d in designs}},
        "utility": {"metric": "weighted_total", "value": total,
                    "method": UTILITY_METHOD["separate"]},
        "allocation": {**allocation.to_dict(), **{k: v for k, v in comparison.items() if k != "candidates"}},
        "design": "separate",
        "queries": queries,
        "candidates": comparison.get("candidates", []),
        "notes": NOTES,
        "checks": [c.to_dict() for c in checks],
        "whole_release": None,
    }
    return Certificate(data)


def verify_plan(certificate: Certificate | dict | str | Path) -> Verification:
    """Re-check every claim of a plan certificate (module docstring)."""
    cert = Certificate.read(certificate)
    data = cert.data
    schema = certificate_schema(data, top="plan")
    recorded = data.get("queries")
    if not schema.passed:  # a block missing, or not of its type: nothing else can be read safely
        return Verification([schema])
    try:
        plan = load_plan(data["spec"])
    except DpoptError as exc:
        return Verification([schema, Check("spec", "re-validate the embedded plan", False, str(exc))])
    digest = plan_sha256(plan)
    checks = [schema, Check("spec_sha256", "SHA-256 of the canonical JSON of the embedded plan",
                            digest == data["spec_sha256"], f"recomputed {digest}")]
    if [q.get("name") for q in recorded] != [q.name for q in plan.queries]:
        return Verification(checks + [Check("queries", "one certificate per query of the plan, in order", False,
                                            "the recorded queries do not match the plan's")])
    if data.get("design") == "joint":
        return Verification(checks + _verify_joint(plan, data))
    targets, mechanisms, spaces = [], [], []
    total = 0.0
    for i, (q, entry) in enumerate(zip(plan.queries, recorded)):
        name = q.name
        sub = entry.get("certificate", {})
        try:
            expected = query_spec(plan, i, entry["target"])
            spec = load_spec(sub["spec"])
        except (DpoptError, KeyError, TypeError) as exc:
            checks.append(Check(f"{name}.spec", "the query's spec is the plan's under its recorded target", False,
                                str(exc)))
            continue
        checks.append(Check(f"{name}.spec", "the query's spec is the plan's under its recorded target",
                            spec == expected, f"target {entry['target']}"))
        result = verify(sub)
        checks.extend(Check(f"{name}.{c.claim}", c.method, c.passed, c.detail) for c in result.checks)
        if result.problem is None:  # the query's spec did not compile: verify named the failure
            continue
        space = result.problem.space
        try:
            mechanism = rebuild_mechanism(sub, space)
        except DpoptError as exc:
            checks.append(Check(f"{name}.mechanism", "rebuild from family and parameters", False, str(exc)))
            continue
        row = {"weight": q.weight, "family": sub["mechanism"]["family"], "parameters": sub["mechanism"]["parameters"],
               "sensitivity": {k: sub["sensitivity"].get(k) for k in ("dimension", "l1", "l2", "linf")},
               "utility": {k: v for k, v in sub["utility"].items() if k != "per_cell"}}
        same = all(entry.get(k) == v for k, v in row.items()) and "per_cell" not in entry  # a joint row's only
        checks.append(Check(f"{name}.parameters", "the plan's row repeats the plan's weight and the query "
                                                  "certificate's mechanism, sensitivity and utility", same,
                            f"{mechanism.family}"))
        targets.append(spec.privacy)
        mechanisms.append(mechanism)
        spaces.append(space)
        total += q.weight * float(sub["utility"]["value"])
    if len(targets) == len(plan.queries):
        rows = list(zip(plan.queries, recorded))
        summary = {"mechanism": {"family": "plan", "parameters": {q.name: e.get("family") for q, e in rows}},
                   "sensitivity": {"queries": {q.name: e.get("sensitivity") for q, e in rows}}, "notes": NOTES}
        allocation = data.get("allocation")
        same = (all(data.get(k) == v for k, v in summary.items()) and isinstance(allocation, dict)
                and allocation.get("shares") == [e.get("share") for _, e in rows])
        checks.append(Check("plan.summary", "the plan's mechanism, sensitivity, notes and allocation shares repeat "
                                            "its queries' rows", same, f"{len(recorded)} queries"))
    if spaces:
        semi = {s.semi_adjacent_parameter for s in spaces}
        checks.append(Check("guarantee", "the guarantee equals the plan's target, adjacency and a(t) (one for all queries)",
                            len(semi) == 1 and data["guarantee"] == _guarantee(
                                plan, _composition_method(plan.privacy.definition), spaces, mechanisms),
                            f"{plan.privacy.definition} {plan.privacy.parameters}"))
    grouped = group_checks(plan, data["groups"]) if "groups" in data else []  # the target composed over groups
    if len(targets) == len(plan.queries):
        composed = composition_checks(plan, targets, mechanisms, spaces, [q.name for q in plan.queries])
        checks += composed + _recorded_claims(data, composed, grouped)
    checks += grouped + _utility_checks(data, total, "Σ w_i u_i recomputed from the per-query certificates")
    return Verification(checks)


def _utility_checks(data: dict, total: float, method: str) -> list[Check]:
    """The plan's weighted total (``utility``) and its baselines against the recomputed total."""
    value = data["utility"].get("value")
    return [Check("utility", method, data["utility"].get("metric") == "weighted_total"
                  and data["utility"].get("method") == UTILITY_METHOD.get(data.get("design"))
                  and isinstance(value, (int, float)) and math.isclose(value, total, rel_tol=1e-9),
                  f"recomputed {total:.12g}, recorded {value}"), *_baselines(data, total)]


def _verify_joint(plan: Plan, data: dict) -> list[Check]:
    """A joint design's claims: its spec is the plan's stacked workload, its certificate holds,
    each query's error and the composition (one mechanism under the whole target) re-derived."""
    target = data["queries"][0].get("target", {})
    try:
        specs = [query_spec(plan, i, target) for i in range(len(plan.queries))]
        found = joint_spec(plan, specs, target, [compile_query(s) for s in specs])
        if isinstance(found, str):
            return [Check("joint.spec", "the plan's queries stacked on the shared histogram", False, found)]
        expected, maps = found
        sub = data["joint"]["certificate"]
        spec = load_spec(sub["spec"])
    except (DpoptError, KeyError, TypeError) as exc:
        return [Check("joint.spec", "the plan's queries stacked on the shared histogram", False, str(exc))]
    checks = [Check("joint.spec", "the plan's queries stacked on the shared histogram (weights, workloads)",
                    spec == expected, f"{len(maps)} queries on {' x '.join(spec.query.attributes)}")]
    result = verify(sub)
    checks += [Check(f"joint.{c.claim}", c.method, c.passed, c.detail) for c in result.checks]
    if result.problem is None:  # the joint spec did not compile: verify named the failure
        return checks
    space = result.problem.space
    try:
        mechanism = rebuild_mechanism(sub, space)
    except DpoptError as exc:
        return checks + [Check("joint.mechanism", "rebuild from family and parameters", False, str(exc))]
    errors = query_errors(mechanism, specs, maps)
    for q, entry, u in zip(plan.queries, data["queries"], errors):
        value = entry.get("utility", {}).get("value")
        checks.append(Check(f"{q.name}.utility", f"E‖W_i A_i P_i Z‖² of the joint release ({u.method})",
                            isinstance(value, (int, float)) and math.isclose(value, u.value, rel_tol=1e-9),
                            f"recomputed {u.value:.12g}, recorded {value}"))
    target = spec.privacy.model_dump(exclude_none=True)
    rows = json.loads(json.dumps(_joint_rows(plan, target, maps, errors,
                                             joint_per_cell(plan, target, mechanism, maps))))
    summary = {"mechanism": {"family": "plan", "parameters": {"joint": mechanism.family}},
               "sensitivity": sub["sensitivity"], "notes": NOTES, "queries": rows}
    checks.append(compare("plan.summary", "plan's rows, mechanism, sensitivity and notes (from the joint release)",
                          {k: data.get(k) for k in summary}, summary))
    checks.append(Check("guarantee", "the guarantee equals the plan's target, adjacency and a(t)",
                        data["guarantee"] == _guarantee(plan, _composition_method(plan.privacy.definition), [space],
                                                        [mechanism]),
                        f"{plan.privacy.definition} {plan.privacy.parameters}"))
    composed = composition_checks(plan, [spec.privacy], [mechanism], [space], ["joint"])
    grouped = group_checks(plan, data["groups"]) if "groups" in data else []
    checks += composed + _recorded_claims(data, composed, grouped) + grouped
    total = sum(q.weight * u.value for q, u in zip(plan.queries, errors))
    return checks + _utility_checks(data, total, "Σ w_i u_i recomputed from the joint release")
