"""The report of a plan certificate: the composed guarantee with its ε per δ, the allocation, each query's
error and each cell's standard error, the checks — as Markdown or as one self-contained HTML page, through
the renderers of the single-query report (:func:`dpopt.report.render.markdown_page`, :func:`~dpopt.report.render.html_page`)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from dpopt.certificate.model import Certificate
from dpopt.report.reading import (
    MAX_CELL_ROWS,
    composed_epsilon_blocks,
    composed_opening,
    part_claims,
    target_text,
)
from dpopt.report.render import html_page, markdown_page
from dpopt.report.words import format_parameters


def allocation_rows(cert: Certificate) -> list[list[str]]:
    """One row per query: weight, share, per-query target, family, parameters, sensitivity, predicted error."""
    rows = [["query", "weight", "share", "target", "mechanism", "parameters", "Δ₂", "metric", "predicted",
             "weighted", "RMSE per cell"]]
    for q in cert["queries"]:
        definition, params = next(iter(q["target"].items()))
        u = q["utility"]
        d = q["sensitivity"].get("dimension") or 1
        rmse = f"{math.sqrt(u['value'] / d):.4g}" if u["metric"] == "l2" else ""
        rows.append([q["name"], f"{q['weight']:.4g}", f"{q['share']:.4f}", target_text(definition, params), q["family"],
                     format_parameters(q["parameters"], width=40),
                     f"{q['sensitivity']['l2']:.4g}" if q["sensitivity"].get("l2") is not None else "—",
                     u["metric"], f"{u['value']:.6g}", f"{q['weight'] * u['value']:.6g}", rmse])
    return rows


def _cell_rows(cert: Certificate) -> list:
    """Each query's cells: its certificate's ``utility.per_cell``, or a joint design's row ``per_cell``."""
    rows = [["query", "cell", "standard error", "95% margin of error"]]
    for q in cert["queries"]:
        per_cell = q.get("per_cell") or q.get("certificate", {}).get("utility", {}).get("per_cell", {})
        for c in per_cell.get("cells", []):
            rows.append([q["name"], c["cell"], "not released" if c["standard_error"] is None else
                         f"{c['standard_error']:.3g}",
                         "—" if c["margin_of_error"] is None else f"± {c['margin_of_error']:.3g}"])
    return rows


def plan_sections(cert: Certificate, verified: Sequence | None = None) -> tuple[str, list]:
    """(summary paragraph, ``(heading, blocks)`` sections) of a plan report; the claims counted as ``dpopt
    verify`` counts them when its checks ``verified`` are given (:func:`dpopt.report.reading.claims_sentence`)."""
    g, a = cert["guarantee"], cert["allocation"]
    summary, sections = composed_opening(cert.data, f"{len(cert['queries'])} queries", "whole plan",
                                         "each query's own certificate is inside", verified)
    sections.append(("Composed guarantee", [
        f"**{target_text(g['definition'], g)}** for the whole plan of {len(cert['queries'])} queries, "
        f"adjacency `{g['scope']['adjacency']['kind']}`"
        + (f", invariants {len(g['scope']['invariants'])}, a(t) = {g['scope']['semi_adjacent_parameter']}"
           if g["scope"]["invariants"] else "") + ".",
        f"Composition: {g['composition']}.", *composed_epsilon_blocks(g)]))
    blocks = [f"Shares of the budget: {a['method']}. Weighted total Σ w_i u_i = {cert['utility']['value']:.6g}; "
              f"equal split {a['equal_split_weighted_total']:.6g}; optimal {a['optimal_weighted_total']:.6g} "
              f"(ratio optimal/equal = {a['ratio_optimal_to_equal']:.4f}); kept: {a['kept']}."]
    if cert.data.get("design") == "joint":
        blocks.append("Design kept: **joint** — one release of the shared histogram by `gaussian_optimal` under the "
                      "whole budget; every query is its post-processing (its error below is E‖W_i A_i P_i Z‖²). "
                      "Each query's intervals: " + "; ".join(dict.fromkeys(
                          q["per_cell"]["intervals"]["method"] for q in cert["queries"] if "per_cell" in q)) + ".")
    sections.append(("Allocation and per-query error", blocks + [allocation_rows(cert)]))
    cells = _cell_rows(cert)
    if len(cells) > 1:
        shown = cells[: MAX_CELL_ROWS + 1]
        more = [f"The other {len(cells) - len(shown)} cells: `utility.per_cell` of each query's certificate."] \
            if len(cells) > len(shown) else []
        sections.append(("Error of each cell", ["**Standard error**: the root mean squared error of the released "
                                                "cell. **95% margin of error**: the released cell is within this "
                                                "distance of the true value in 95% of releases.", shown, *more]))
    if cert.data.get("candidates"):
        sections.append(("Designs compared", [[["design", "weighted total", "note"]] + [
            [c["design"], f"{c['weighted_total']:.6g}" if c.get("weighted_total") is not None else "—",
             c.get("note", "")] for c in cert["candidates"]]]))
    if cert.data.get("notes"):
        sections.append(("Notes", [f"- {n}" for n in cert["notes"]]))
    rows = [["claim", "holds", "method", "detail"]]
    rows += [[f"`{c['claim']}`", "yes" if c["passed"] else "**NO**", c["method"], c["detail"]] for c in cert["checks"]]
    subs = [(q["name"], q["certificate"]) for q in cert["queries"] if "certificate" in q]
    if cert.data.get("joint"):
        subs.append(("joint", cert["joint"]["certificate"]))
    for name, sub_cert in subs:
        rows.append([f"`{name}.*`", "yes" if all(c["passed"] for c in sub_cert["checks"]) else "**NO**",
                     part_claims(verified, name), ""])
    sections.append(("Checks", [rows]))
    return summary, sections


def plan_markdown(cert: Certificate, verified: Sequence | None = None) -> str:
    """The plan report in Markdown (``verified``: the checks of ``dpopt verify``, for its claim count)."""
    return markdown_page(f"dpopt plan report: {cert['spec']['name']}", *plan_sections(cert, verified))


def plan_html(cert: Certificate, verified: Sequence | None = None) -> str:
    """The plan report as one self-contained HTML page (``verified`` as for :func:`plan_markdown`)."""
    return html_page(f"dpopt plan report: {cert['spec']['name']}", *plan_sections(cert, verified))
