"""The report of a plan certificate: the composed guarantee, the allocation and each query's error."""

from __future__ import annotations

import math

from dpopt.certificate.model import Certificate
from dpopt.report.words import format_parameters


def _table(rows: list[list[str]]) -> list[str]:
    head, body = rows[0], rows[1:]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return lines + ["| " + " | ".join(str(c).replace("|", "\\|") for c in row) + " |" for row in body]


def _target(definition: str, params: dict) -> str:
    return ", ".join(f"{k}={params[k]:.6g}" for k in ("epsilon", "delta", "mu", "rho") if k in params) + \
        f" ({definition})"


def allocation_rows(cert: Certificate) -> list[list[str]]:
    """One row per query: weight, share, per-query target, family, parameters, sensitivity, predicted error."""
    rows = [["query", "weight", "share", "target", "mechanism", "parameters", "Δ₂", "metric", "predicted",
             "weighted", "RMSE per cell"]]
    for q in cert["queries"]:
        definition, params = next(iter(q["target"].items()))
        u = q["utility"]
        d = q["sensitivity"].get("dimension") or 1
        rmse = f"{math.sqrt(u['value'] / d):.4g}" if u["metric"] == "l2" else ""
        rows.append([q["name"], f"{q['weight']:.4g}", f"{q['share']:.4f}", _target(definition, params), q["family"],
                     format_parameters(q["parameters"], width=40),
                     f"{q['sensitivity']['l2']:.4g}" if q["sensitivity"].get("l2") is not None else "—",
                     u["metric"], f"{u['value']:.6g}", f"{q['weight'] * u['value']:.6g}", rmse])
    return rows


def plan_markdown(cert: Certificate) -> str:
    """The plan report in Markdown (the single-query report's sections live in each query's certificate)."""
    g, a = cert["guarantee"], cert["allocation"]
    out = [f"# {cert['spec']['name']}", ""]
    if cert["spec"].get("description"):
        out += [cert["spec"]["description"].strip(), ""]
    out += ["## Composed guarantee", "",
            f"**{_target(g['definition'], g)}** for the whole plan of {len(cert['queries'])} queries, "
            f"adjacency `{g['scope']['adjacency']['kind']}`"
            + (f", invariants {len(g['scope']['invariants'])}, a(t) = {g['scope']['semi_adjacent_parameter']}"
               if g["scope"]["invariants"] else "") + ".", "",
            f"Composition: {g['composition']}.", ""]
    out += ["## Allocation and per-query error", "",
            f"Shares of the budget: {a['method']}. Weighted total Σ w_i u_i = {cert['utility']['value']:.6g}; "
            f"equal split {a['equal_split_weighted_total']:.6g}; optimal {a['optimal_weighted_total']:.6g} "
            f"(ratio optimal/equal = {a['ratio_optimal_to_equal']:.4f}); kept: {a['kept']}.", ""]
    if cert.data.get("design") == "joint":
        out += ["Design kept: **joint** — one release of the shared histogram by `gaussian_optimal` under the "
                "whole budget; every query is its post-processing (its error below is E‖W_i A_i P_i Z‖²).", ""]
    out += _table(allocation_rows(cert)) + [""]
    if cert.data.get("candidates"):
        out += ["## Designs compared", ""]
        out += _table([["design", "weighted total", "note"]] + [
            [c["design"], f"{c['weighted_total']:.6g}" if c.get("weighted_total") is not None else "—",
             c.get("note", "")] for c in cert["candidates"]]) + [""]
    if cert.data.get("notes"):
        out += ["## Notes", ""] + [f"- {n}" for n in cert["notes"]] + [""]
    out += ["## Checks", ""]
    rows = [["claim", "holds", "method", "detail"]]
    rows += [[f"`{c['claim']}`", "yes" if c["passed"] else "**NO**", c["method"], c["detail"]] for c in cert["checks"]]
    subs = [(q["name"], q["certificate"]) for q in cert["queries"] if "certificate" in q]
    if cert.data.get("joint"):
        subs.append(("joint", cert["joint"]["certificate"]))
    for name, sub_cert in subs:
        sub = sub_cert["checks"]
        rows.append([f"`{name}.*`", "yes" if all(c["passed"] for c in sub) else "**NO**",
                     f"{len(sub)} claims of the query's own certificate", ""])
    out += _table(rows) + [""]
    return "\n".join(out)
