"""The report of a hierarchical release's certificate (``dpopt solve`` or ``dpopt release`` on a spec with
``geography``): the whole release's guarantee with its ε per δ first, then every level's share, budget,
mechanism and per-cell error, the post-processing and the checks. Rendered by
:func:`dpopt.report.render.markdown_page` and :func:`~dpopt.report.render.html_page`, as the single report is.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from dpopt.certificate.model import Certificate
from dpopt.report.reading import (
    MAX_CELL_ROWS,
    claims_sentence,
    composed_epsilon_blocks,
    composed_opening,
    part_claims,
    target_text,
)
from dpopt.report.hierarchy_coverage import CHILDREN, coverage_rows, simulate_hierarchy
from dpopt.report.intervals import SEED
from dpopt.report.render import html_page, markdown_page
from dpopt.report.words import format_parameters


def _errors(level_cert: dict) -> tuple[str, str]:
    """A level's standard error and 95% margin of error per cell: one figure when every cell has the same."""
    cells = [c for c in level_cert["utility"]["per_cell"]["cells"] if c["standard_error"] is not None]
    pairs = {(f"{c['standard_error']:.4g}", f"± {c['margin_of_error']:.4g}") for c in cells}
    return next(iter(pairs)) if len(pairs) == 1 else ("by cell, below", "by cell, below")


def level_rows(cert: Certificate) -> list[list[str]]:
    """One row per level, nation first."""
    rows = [["level", "share of the budget", "budget", "mechanism", "parameters", "units", "SE per cell",
             "95% margin of error"]]
    for lv in cert["hierarchy"]["levels"]:
        definition, params = next(iter(lv["privacy"].items()))
        se, moe = _errors(cert["levels"][lv["level"]])
        rows.append([lv["level"], f"{float(Fraction(lv['share'])):.4f}", target_text(definition, params),
                     lv["mechanism"]["family"], format_parameters(lv["mechanism"]["parameters"], width=40),
                     str(lv.get("units", "designed per unit")), se, moe])
    return rows


def _cell_rows(cert: Certificate) -> list:
    """The cells of the levels whose cells differ in error (the others have one figure, in the levels' table)."""
    rows = [["level", "cell", "standard error", "95% margin of error"]]
    for name, sub in cert["levels"].items():
        if _errors(sub)[0] == "by cell, below":
            rows += [[name, c["cell"], f"{c['standard_error']:.3g}", f"± {c['margin_of_error']:.3g}"]
                     for c in sub["utility"]["per_cell"]["cells"] if c["standard_error"] is not None]
    return rows


def _interval_blocks(cert: Certificate) -> list:
    """Each level's interval for the true values (``utility.per_cell.intervals`` of its certificate)."""
    rows = [["level", "columns", "level of confidence", "half-width per cell", "method"]]
    for name, sub in cert["levels"].items():
        block = sub["utility"]["per_cell"].get("intervals")
        if not block:
            continue
        widths = {f"± {h:.4g}" for h in block["half_widths"] or [] if h is not None}
        rows.append([name, ", ".join(f"`{c}`" for c in block["columns"]),
                     f"{block['level']:g}" + (" (simultaneous)" if block["simultaneous"] else " (per cell)"),
                     next(iter(widths)) if len(widths) == 1 else "by cell (the level's certificate)",
                     block["method"].split(":", 1)[0]])
    if len(rows) == 1:
        return []
    first = next(iter(cert["levels"].values()))["utility"]["per_cell"]["intervals"]
    out = [f"Beside every published value of every level, `release.csv` gives an interval for the true value: "
           f"{first['method']}. Each level's noise-stage value is released and unbiased, so its interval covers the "
           f"truth whatever TopDown publishes (the published value may lie outside it). Budget: {first['budget']}.",
           rows]
    simulated = simulate_hierarchy(cert)
    if simulated is None:
        return out + ["Coverage was not simulated in this report (a level without intervals, a query that is not a "
                      "table of counts, or a large table: `benchmarks/bench_intervals.py` measures those)."]
    return out + [
        f"Coverage measured in simulation, per level, on a synthetic sparse hierarchy ({CHILDREN} units under each "
        f"unit of the level above; at the bottom about one cell in six occupied, 1 to 8 records each; every upper "
        f"table the sum of its units), {simulated['releases']} independent releases post-processed top-down as "
        f"`dpopt release` does (seed {SEED}). Coverage is the share of cell-releases whose interval holds the "
        "synthetic truth (± its binomial standard error); the naive interval is the published value ± the margin "
        "of error, on the same releases.", coverage_rows(simulated)]


def _postprocess_blocks(block: dict) -> list:
    post = block.get("postprocess")
    if not post:
        return []
    out = [f"{post['method']['algorithm']}; the guarantee is {post['guarantee']}.",
           *[f"- {line}" for line in post["method"]["levels"]]]
    error = post.get("error")
    if error:
        rows = [["level", "RMSE before", "RMSE after", "bias before", "bias after"]]
        for lv in error["levels"]:
            raw, pp = lv["raw"], lv["postprocessed"]
            rows.append([lv["level"], f"{raw['rmse']:.3g}", f"{pp['rmse']:.3g}",
                         f"{raw['bias']:.2g} ± {raw['bias_se']:.2g}", f"{pp['bias']:.2g} ± {pp['bias_se']:.2g}"])
        out += [f"Error before and after, per cell: {error['method']} (bias ± its standard error).", rows]
    return out


def hierarchy_sections(cert: Certificate, verified: Sequence | None = None) -> tuple[str, list]:
    """(summary paragraph, ``(heading, blocks)`` sections) of a hierarchy report; the claims counted as ``dpopt
    verify`` counts them when its checks ``verified`` are given (:func:`dpopt.report.reading.claims_sentence`)."""
    g, block = cert["guarantee"], cert["hierarchy"]
    names = [lv["level"] for lv in block["levels"]]
    summary, sections = composed_opening(cert.data, f"{len(names)} levels ({', '.join(names)})", "whole release",
                                         "each level's own certificate is inside", verified)
    guarantee = [f"**{target_text(g['definition'], g)}** for the whole release: {g['composition']}.",
                 g["scope"]["adjacency_description"][:1].upper() + g["scope"]["adjacency_description"][1:] + "."]
    if block.get("caveat"):
        guarantee.append(f"Caveat: {block['caveat']}.")
    guarantee += composed_epsilon_blocks(g)
    sections.append(("The guarantee of the whole release", guarantee))
    sections.append(("Levels", [f"Shares: {block['shares']}. Each level's budget is its share of the target, "
                                "rounded down; each unit of a level is released with the level's mechanism.",
                                level_rows(cert)]))
    cells = _cell_rows(cert)
    shown = cells[: MAX_CELL_ROWS + 1]
    sections.append(("Error of each cell", [
        "**Standard error**: the root mean squared error of a released (noisy) cell. **95% margin of error**: "
        "the released cell is within this distance of the true value in 95% of releases. "
        + ("Every cell of a level has the same: the levels' table above gives them; `release.csv` of `dpopt "
           "release --out` lists every unit's cells with their value, standard error and margin."
           if len(cells) == 1 else "By cell:")]
        + ([shown] if len(cells) > 1 else [])
        + ([f"The other {len(cells) - len(shown)} cells: `utility.per_cell` of each level's certificate."]
           if len(cells) > len(shown) else [])))
    intervals = _interval_blocks(cert)
    if intervals:
        sections.append(("Intervals for the true values", intervals))
    post = _postprocess_blocks(block)
    if post:
        sections.append(("Post-processing", post))
    checks = [["claim", "holds", "method", "detail"]]
    checks += [[f"`{c['claim']}`", "yes" if c["passed"] else "**NO**", c["method"], c["detail"]] for c in cert["checks"]]
    for name, sub in cert["levels"].items():
        checks.append([f"`{name}.*`", "yes" if all(c["passed"] for c in sub["checks"]) else "**NO**",
                       part_claims(verified, name), ""])
    sections.append(("Checks", [claims_sentence(verified) + ": the claims of the whole release below, and those of "
                                "each level's certificate.", checks]))
    return summary, sections


def hierarchy_markdown(cert: Certificate, verified: Sequence | None = None) -> str:
    """The hierarchy report in Markdown (``verified``: the checks of ``dpopt verify``, for its claim count)."""
    return markdown_page(f"dpopt report: {cert['spec']['name']}", *hierarchy_sections(cert, verified))


def hierarchy_html(cert: Certificate, verified: Sequence | None = None) -> str:
    """The hierarchy report as one self-contained HTML page (``verified`` as for :func:`hierarchy_markdown`)."""
    return html_page(f"dpopt report: {cert['spec']['name']}", *hierarchy_sections(cert, verified))
