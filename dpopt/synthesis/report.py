r"""The report of a synthesis: what was measured, the budget, the selection, and how well the records agree
with the published tables.

The residual of a marginal is the L1 gap between the synthetic records' tabulation and the published table,
:math:`r_C = \sum_c |\text{count}_C(\text{records})_c - \hat M_C[c]|`, shown with its total variation form
:math:`r_C / (2n)` (n synthetic records). Both sides are published, so the report adds nothing the
certificate does not cover.
"""

from __future__ import annotations

import numpy as np

from dpopt.certificate.model import Certificate
from dpopt.report.document import Figure
from dpopt.report.plots import _figure, _png
from dpopt.report.render import html_page, markdown_page
from dpopt.report.sections import Image

FIGURE = "residual"
"""The stem of the report's figure (``residual.png`` beside ``report.md``)."""


def residual_figure(residual: dict[str, float], records: int) -> Figure:
    """A bar chart of each marginal's residual as total variation distance, largest first (at most 40 bars)."""
    names = sorted(residual, key=lambda k: -residual[k])[:40]
    tvd = np.array([residual[k] for k in names]) / (2 * max(records, 1))
    fig = _figure(8.0, 4.4)
    ax = fig.add_subplot(1, 1, 1)
    ax.bar(range(len(names)), tvd, color="#1f77b4")
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, rotation=70, fontsize=6, ha="right")
    ax.set_ylabel("TVD to published table")
    ax.set_title("Synthetic records against the published marginals")
    fig.subplots_adjust(bottom=0.45)
    return Figure(FIGURE, "Residual per marginal", "Total variation distance between the synthetic records' "
                  "tabulation and each published table (0: they agree exactly); the largest 40.", _png(fig))


def sections(certificate: Certificate, residual: dict[str, float], records: int, figure: Figure | None) -> list:
    """The report's ``(heading, blocks)`` sections (:func:`dpopt.report.render.markdown_page`)."""
    c = certificate.data
    budget = c["budget"]
    parts = [["part", "definition", "parameters"]] + [
        [p["part"], p["definition"], ", ".join(f"{k} = {v}" for k, v in p.items() if k not in ("part", "definition"))]
        for p in budget["parts"]]
    measured = [["measurement", "marginals", "family", "E‖noise‖² (certified)", "post-processing"]]
    for m in c["measurements"]:
        inner = m["certificate"]
        measured.append([m["part"], ", ".join("×".join(g) for g in m["marginals"]), inner["mechanism"]["family"],
                         f"{inner['utility']['value']:.6g}", "; ".join(inner["postprocess"]["method"]["steps"])
                         if "method" in inner.get("postprocess", {}) else ""])
    out = [
        ("Guarantee", [f"**{c['guarantee']['definition']}** "
                       + ", ".join(f"{k} = {budget['target'][k]}" for k in budget["target"] if k != "definition")
                       + f" under {c['guarantee']['scope']['adjacency']['kind']}. The parts below add up, in exact "
                       "rationals, to at most the target (numbers shown to six digits; `budget` in "
                       f"certificate.json keeps every digit; {budget['composition']}).", parts]),
        ("What was measured", [measured]),
    ]
    if c["selection"] is not None:
        rows = [["round", "ρ", "ε", "Δ", "candidates", "selected"]] + [
            [s["round"], s["rho"], f"{s['epsilon']:.6g}", s["sensitivity"], s["candidates"], "×".join(s["selected"])]
            for s in c["selection"]["steps"]]
        out.append(("Selection", [c["selection"]["method"], rows]))
    worst = max(residual.values(), default=0.0)
    table = [["marginal", "L1 residual", "TVD"]] + [[k, f"{v:.6g}", f"{v / (2 * max(records, 1)):.4g}"]
                                                    for k, v in sorted(residual.items(), key=lambda kv: -kv[1])]
    blocks: list = [c["synthesis"]["method"], c["synthesis"]["post_processing"],
                    "The published tables (marginals.json): " + c["synthesis"]["published_tables"] + ".",
                    f"{records} records; largest residual {worst:.6g} (TVD {worst / (2 * max(records, 1)):.4g}); "
                    + ("the records tabulate exactly to every published table." if worst == 0 else
                       "the records were fitted to the noisy tables shrunk toward independence (exact: false), not to "
                       "the published tables: a residual is their gap to a published table." if
                       c["spec"]["synthesize"].get("exact") is False else
                       "the records were fitted to the noisy tables shrunk toward independence, then matched "
                       "exactly to the published tables listed in synthesize.exact (and the one-way margins of "
                       "their attributes) only: a residual elsewhere is their gap to a published table." if
                       isinstance(c["spec"]["synthesize"].get("exact"), list) else
                       "a residual above 0 means no record file of this size tabulates to the published tables as "
                       "the synthesizer fitted them (see the method)."), table]
    if figure is not None:
        blocks.insert(4, Image(figure))
    out.append(("Agreement with the published tables", blocks))
    return out


def _summary(certificate: Certificate) -> str:
    c = certificate.data
    return (f"Synthetic records from {len(c['measurements'])} certified measurement(s) "
            f"({c['synthesis']['records']} records, selection {c['mechanism']['parameters']['selection']}). "
            "Run `dpopt verify certificate.json` to re-derive every claim.")


def synthesis_markdown(certificate: Certificate, residual: dict[str, float], records: int,
                       figure: Figure | None) -> str:
    """The report in Markdown (the figure linked as ``residual.png``)."""
    return markdown_page(f"dpopt synthesis: {certificate['spec']['name']}", _summary(certificate),
                         sections(certificate, residual, records, figure)) + "\n"


def synthesis_html(certificate: Certificate, residual: dict[str, float], records: int, figure: Figure | None) -> str:
    """The report as one self-contained HTML page."""
    return html_page(f"dpopt synthesis: {certificate['spec']['name']}", _summary(certificate),
                     sections(certificate, residual, records, figure)) + "\n"
