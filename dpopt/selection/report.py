"""The report of a certificate of :mod:`dpopt.selection.design`: guarantee, each release's mechanism and
utility, the checks (Markdown, or one HTML page with the same sections, by the renderers of the other reports)."""

from __future__ import annotations

from collections.abc import Sequence

from dpopt.certificate.model import Certificate
from dpopt.report.reading import claims_sentence
from dpopt.report.render import html_page, markdown_page


def _count_lines(block: dict) -> list[str]:
    sel, noise, utility = block["partition_selection"], block["noise"], block["utility"]
    declared = ", ".join(block["declared"]) or "none"
    lines = [f"- keys of `{block['by']}`: declared (always released, zero rows when absent): {declared}; any other "
             "key found in the data is released only when selected; how many keys the data hold is not released",
             f"- selection: {sel['method']}"]
    if "keep_probabilities" in sel:
        lines.append(f"  - (ε, δ) = ({sel['epsilon']:g}, {sel['delta']:g}) over ≤ {sel['keys_per_person']} keys per "
                     f"person: ({sel['epsilon_per_key']:.6g}, {sel['delta_per_key']:.6g}) per key; a key with n users "
                     f"is kept with probability π_n, π_n ≥ 1/2 from n = {utility['selection']['value']}, certain from "
                     f"n = {len(sel['keep_probabilities']) - 1}")
    else:
        lines.append(f"  - threshold τ = {sel['threshold']:.6g} on the noisy row count (a key with τ rows is kept "
                     "with probability 1/2)")
    scale = f"scale b = {noise['scale']}" if "scale" in noise else f"σ² = {noise['sigma2']} (on the integers)"
    lines.append(f"- counts: {noise['family'].replace('_', ' ')} noise, {scale}, ε = {noise['epsilon']}; "
                 f"standard deviation {utility['value']:.4g} per count")
    return lines


def _quantile_lines(block: dict) -> list[str]:
    grid = block["grid"]
    where = "overall" if block["by"] is None else f"per level of `{block['by']}` ({', '.join(block['groups'])})"
    lines = [f"- quantiles of `{block['attribute']}` {where}, exponential mechanism on {grid['size']} grid points "
             f"in [{grid['low']:g}, {grid['high']:g}], utility −|rank − q·n|"]
    for p, bound in zip(block["per_q"], block["utility"]["value"]):
        lines.append(f"  - q = {p['q']:g}: ε = {p['epsilon']:.6g}, β = {p['beta']:.6g}; expected rank error beyond "
                     f"the best grid point ≤ {bound:.4g} rows ({block['utility']['method']})")
    return lines


def _mean_lines(block: dict) -> list[str]:
    noise, low_high = block["noise"], block["bounds"]
    return [f"- mean of `{block['attribute']}` in [{low_high[0]:g}, {low_high[1]:g}] per key of `{block['by']}`, only "
            f"for the keys released by `{block['keys_from']}` (declared and selected)",
            f"- noise on (Σ(x − {block['midpoint']}), rows) per key: discrete Laplace of scale "
            f"b_S = {noise['centred_sum']['scale']} steps of {noise['centred_sum']['step']} on the sums (each value "
            f"rounded to that lattice, in integers), discrete Laplace of scale "
            f"b_n = {noise['count']['scale']} on the counts (ε = {noise['centred_sum']['epsilon']} each; "
            f"l1 = {block['sensitivity']['l1']})",
            f"- mean = clip(midpoint + S̃/ñ) (post-processing); standard deviation ≈ "
            f"{block['utility']['value']:.4g}/n for a key with n rows ({block['utility']['method']})"]


_LINES = {"count": _count_lines, "mean": _mean_lines, "quantile": _quantile_lines}


def _text(line: str) -> str:
    """A line of :data:`_LINES` as a paragraph (its list marker dropped: each is a block of the page)."""
    return line.lstrip().removeprefix("- ")


def selection_page(certificate: Certificate, verified: Sequence | None = None) -> tuple[str, str, list]:
    """The title, the summary and the ``(heading, blocks)`` sections of the report (read by
    :func:`dpopt.report.render.markdown_page` and :func:`~dpopt.report.render.html_page`); the claims counted as
    ``dpopt verify`` counts them when its checks ``verified`` are given
    (:func:`dpopt.report.reading.claims_sentence`)."""
    g = certificate["guarantee"]
    delta = f", δ = {g['delta']:g}" if "delta" in g else ""
    summary = (f"**Guarantee:** {g['definition']} ε = {g['epsilon']:g}{delta} ({g['composition']}). "
               f"**Protected:** {g['scope']['adjacency']}. {claims_sentence(verified)}.")
    sections = []
    for block in certificate["releases"]:
        heading = (f"{block['name']} ({block['kind']}): {block['guarantee']['definition']} "
                   f"ε = {block['guarantee']['epsilon']:g}"
                   + (f", δ = {block['guarantee']['delta']:g}" if block["guarantee"]["delta"] else ""))
        lines = [f"sensitivity: {block['sensitivity']['how']}", *_LINES[block["kind"]](block)]
        sections.append((heading, [_text(line) for line in lines]))
    table = [["claim", "holds", "detail"]] + [[c["claim"], "yes" if c["passed"] else "NO", c["detail"]]
                                            for c in certificate["checks"]]
    sections.append(("Checks", [f"{claims_sentence(verified)}: each claim below, re-derived from the recorded spec, "
                                "and the certificate's schema, spec hash and recorded numbers besides.", table,
                                f"*Numerics:* {certificate['numerics']}."]))
    return f"dpopt report: {certificate['spec']['name']}", summary, sections


def selection_markdown(certificate: Certificate, verified: Sequence | None = None) -> str:
    """The report as Markdown (``verified``: the checks of ``dpopt verify``, for its claim count)."""
    return markdown_page(*selection_page(certificate, verified))


def selection_html(certificate: Certificate, verified: Sequence | None = None) -> str:
    """The report as one self-contained HTML page (the sections of :func:`selection_page`, as the other reports)."""
    return html_page(*selection_page(certificate, verified))
