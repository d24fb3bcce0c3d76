"""The audit report a person reads: Markdown (figures as PNG files next to it) or one
self-contained HTML page (figures embedded as base64 PNG, styles inline, no script, no
network).

:func:`build_report` gathers what the certificate alone does not hold: the figures (the
trade-off curve of the mechanism against the target, the noise against its stated law,
the sensitivity hull in 2-D/3-D projections, the predicted utility against the privacy
budget) and the empirical audit. :func:`render_markdown` and :func:`render_html` accept a
:class:`Report` or a bare certificate (then without figures and audit).

Sections: what is released (the spec in words, what is published exactly said once), the
guarantee in every language it holds in (the target; μ, ρ; one headline ε per δ, the
tightest valid, with every looser figure labelled by its method; the Semi-DP scope under
invariants), the sensitivity space, the mechanism, each cell's standard error and 95% margin
of error, the candidates compared, the figures, the second route and every check (with plain
words for their terms), the empirical audit, caveats and provenance. Numbers in text are
rounded for people (:func:`human`); the certificate keeps every digit.
"""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from dpopt.audit.empirical import audit_answer, audit_mechanism
from dpopt.certificate.model import Certificate, write_atomic
from dpopt.certificate.second_route import is_not_available, mechanism_tradeoff, noise_law_of
from dpopt.certificate.verify import rebuild_mechanism
from dpopt.domain.queries import compile_query
from dpopt.errors import DpoptError
from dpopt.mechanisms.base import better
from dpopt.postprocess.evaluation import report_blocks
from dpopt.report import data as report_data
from dpopt.report import plots
from dpopt.report.reading import (
    ball_fallback,
    claim_counts,
    epsilon_by_delta,
    epsilon_table,
    glossary,
    human,
    per_cell_block,
)
from dpopt.sensitivity.derive import derive
from dpopt.spec.load import load_spec

_DEFINITIONS = {
    "pure": "pure ε-differential privacy",
    "approx": "(ε, δ)-differential privacy",
    "gdp": "μ-Gaussian differential privacy",
    "zcdp": "ρ-zero-concentrated differential privacy",
    "pdp": "(ε, δ)-probabilistic differential privacy",
}
_SYMBOLS = {"epsilon": "ε", "delta": "δ", "mu": "μ", "rho": "ρ"}
_SUMMARY_ROWS = {"mu": "μ-GDP", "rho": "ρ-zCDP", "epsilon": "pure ε-DP"}
_EXACT_PART = "released exactly"
"""A mechanism note with these words says what is published without noise: it goes under *Published exactly*."""
_SECOND_ROUTE = ("privacy.second_route", "privacy.second_route.sampler", "utility.integration")


def _short(value) -> str:
    """A parameter for a table cell: floats (also inside lists and dicts) to 6 significant
    digits; matrices of more than 16 entries by their shape only."""
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, list):
        if value and isinstance(value[0], list) and len(value) * len(value[0]) > 16:
            return f"⟨{len(value)}×{len(value[0])} matrix, in the certificate⟩"
        return "[" + ", ".join(_short(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_short(v)}" for k, v in value.items()) + "}"
    return str(value)


def format_parameters(parameters: dict, width: int = 90) -> str:
    """Mechanism parameters on one line, ``k=v`` with values shortened as in the report's tables
    (a value longer than ``width`` characters is left to the certificate)."""
    def value(v) -> str:
        text = _short(v)
        return text if len(text) <= width else "⟨in the certificate⟩"

    return ", ".join(f"{k}={value(v)}" for k, v in parameters.items())


# ------------------------------------------------------------------------ the report
@dataclass(frozen=True)
class Figure:
    """One figure: ``name`` is its file stem, ``png`` the image."""

    name: str
    title: str
    caption: str
    png: bytes


@dataclass(frozen=True)
class Report:
    """A certificate with its figures and audit (see :func:`build_report`)."""

    certificate: Certificate
    figures: tuple[Figure, ...] = ()
    audit: object | None = None
    notes: tuple[str, ...] = field(default=())
    """Figures or parts that could not be produced, and why."""


def build_report(
    certificate: Certificate,
    *,
    audit_draws: int | None = 50_000,
    utility_families: str = "candidates",
    utility_scales: tuple[float, ...] = (0.25, 0.5, 1.0, 2.0, 4.0),
    progress: Callable[[str], None] | None = None,
) -> Report:
    """The certificate's figures and, unless ``audit_draws`` is None, its empirical audit.

    The spec is re-derived and the mechanism rebuilt from the certificate (as ``dpopt
    verify`` does), so the figures show the mechanism the file describes.

    Parameters
    ----------
    certificate : Certificate
    audit_draws : int or None
        Draws per dataset and pair for :func:`dpopt.audit.audit` (None: no audit).
    utility_families : {"candidates", "selected"}
        Whose predicted utility is drawn against the privacy budget.
    utility_scales : tuple of float
        Multiples of the target's ε, μ or ρ at which each family is re-designed.
    progress : callable, optional
        Called with the name of each stage as it starts (e.g. to show progress on stderr).
    """
    stage = progress or (lambda _: None)
    stage("rebuilding the mechanism")
    data = certificate.data
    spec = load_spec(data["spec"])
    space = derive(spec)
    mechanism = rebuild_mechanism(data, space)
    law = noise_law_of(mechanism)
    family = mechanism.family
    figures: list[Figure] = []
    notes: list[str] = []

    stage("trade-off curve")
    alpha = np.unique(np.concatenate([np.logspace(-10, -2, 161), np.linspace(0.0, 1.0, 501)]))
    target = report_data.target_tradeoff(data["guarantee"], alpha)
    curve = None if isinstance(law, str) else mechanism_tradeoff(law, space, alpha)
    if curve is None:
        notes.append("trade-off of the mechanism: not drawn (" + (law if isinstance(law, str) else
                     "no numerical route for this law or space") + ")")
    if target is None:
        notes.append("trade-off of the target: a probabilistic-DP target is not a trade-off guarantee")
    scope = "Semi-DP neighbours (D_t, A_a)" if "semi_dp" in data["guarantee"]["scope"] else "neighbouring datasets"
    figures.append(Figure(
        "tradeoff", "Trade-off curve: mechanism against target",
        f"Type-II against type-I error of the best test telling apart two {scope}. The mechanism meets an f-DP "
        "target when its curve lies on or above the target's; the mechanism's curve is a certified lower bound "
        "(from the pessimistic privacy-loss distribution of the second route).",
        plots.tradeoff_png(alpha, target, curve, f"{family}: {_DEFINITIONS[data['guarantee']['definition']]}"),
    ))

    stage("noise against its law")
    panels = report_data.noise_panels(mechanism, law if not isinstance(law, str) else None,
                                      compile_query(spec).labels)
    if panels:
        figures.append(Figure(
            "noise", "Noise: the sampler against the stated law",
            f"Histograms of {report_data.NOISE_DRAWS} draws of the mechanism's sampler (seed "
            f"{report_data.NOISE_SEED}) on the cells with the most noise"
            + ("" if isinstance(law, str) else ", with the density of the law the certificate relies on where it "
               "is stated per output coordinate") + ".",
            plots.noise_png(panels, f"{family} noise"),
        ))

    stage("sensitivity hull")
    hull = report_data.hull_points(space)
    if hull is None:
        notes.append("sensitivity hull: not drawn (the space is too large to list its vectors)")
    else:
        points, rank = hull
        figures.append(Figure(
            "sensitivity", "The sensitivity space",
            f"The {len(points)} listed difference vectors φ(X) − φ(X′) projected on the leading principal "
            f"directions of their span (rank {rank}), and their convex hull K"
            + ("" if rank <= 3 else " (a projection of a higher-dimensional polytope)") + ".",
            plots.hull_png(points, rank, f"rank {rank}, {len(points)} vectors"),
        ))

    candidates = [c["family"] for c in data.get("candidates", []) if "utility" in c]
    families = candidates if utility_families == "candidates" else [family]
    known = {c["family"]: c["utility"]["value"] for c in data.get("candidates", []) if "utility" in c}
    known.setdefault(family, data["utility"]["value"])
    curves, parameter, value = report_data.utility_curves(spec, space, families or [family], utility_scales, known,
                                                          progress=stage)
    if curves:
        metric = data["utility"]["metric"]
        figures.append(Figure(
            "utility", f"Predicted {metric} against the privacy budget",
            f"Each family re-designed at {', '.join(f'{s:g}' for s in utility_scales)} × the target {parameter} "
            "(other parameters kept); points a family cannot meet are left out.",
            plots.utility_png(curves, value, parameter, metric, better(metric), family,
                              f"{metric} against {parameter}, {len(curves)} famil{'y' if len(curves) == 1 else 'ies'}"),
        ))
    else:
        notes.append("utility against the privacy budget: no family could be re-designed")

    result = None
    if audit_draws:
        stage(f"empirical audit ({audit_draws} draws per dataset and pair)")
        try:
            result = audit_mechanism(mechanism, space, spec.privacy, draws=audit_draws, answer=audit_answer(spec))
        except (DpoptError, ValueError) as exc:
            notes.append(f"empirical audit: not run ({exc})")
    return Report(certificate, tuple(figures), result, tuple(notes))


# ------------------------------------------------------------------- the spec in words
def _attribute(name: str, domain) -> str:
    if isinstance(domain, list):
        shown = ", ".join(map(str, domain[:6])) + (", …" if len(domain) > 6 else "")
        return f"{name} ({len(domain)} levels: {shown})"
    if isinstance(domain, dict) and {"min", "max"} <= set(domain):
        return f"{name} (a number between {domain['min']:g} and {domain['max']:g})"
    return f"{name} ({_short(domain)})"


def _query(query: dict, dimension: int) -> str:
    kind = query["kind"]
    if kind == "count":
        return "the number of records"
    if kind == "histogram":
        return f"the histogram of {query['attribute']} ({dimension} counts)"
    if kind == "contingency_table":
        return (f"the contingency table of {' × '.join(query['attributes'])} ({dimension} cells, row-major, "
                f"{query['attributes'][0]} varying slowest)")
    if kind == "marginals":
        tables = "; ".join(" × ".join(g) for g in query["attributes"])
        return f"the marginal tables of {tables} ({dimension} counts in all)"
    if kind == "linear":
        return f"{dimension} linear combinations of the histogram of {query['attribute']}"
    if kind in ("sum", "mean"):
        return f"the {kind} of {query['attribute']}"
    rest = {k: v for k, v in query.items() if k != "kind"}
    return f"a {kind.replace('_', ' ')} query {_short(rest)} (dimension {dimension})"


def _invariant(inv: dict) -> str:
    if inv["kind"] == "total":
        return "the total number of records"
    if inv["kind"] == "margins":
        return f"the margins over {' × '.join(inv['attributes'])}"
    if inv["kind"] == "linear":
        return f"{len(inv.get('matrix', []))} linear statistics C·φ(X)"
    return _short(inv)


def _target(definition: str, params: dict) -> str:
    values = ", ".join(f"{_SYMBOLS.get(k, k)} = {v:g}" for k, v in params.items() if isinstance(v, (int, float)))
    return f"{_DEFINITIONS.get(definition, definition)} with {values}"


def _utility(u: dict) -> str:
    metric = u["metric"]
    words = {
        "l2": "the expected squared error E‖W·noise‖₂²" if u.get("workload") or u.get("weights")
        else "the expected squared error E‖noise‖₂²",
        "l1": "the expected absolute error E‖noise‖₁",
        "usefulness": f"the usefulness P(|noise| ≤ γ) per coordinate, γ = {u.get('gamma')}",
        "max_variance": "the largest variance of a coordinate",
        "ci_volume": f"the volume of the smallest {1 - u.get('alpha', 0.05):.0%} confidence region",
        "test_power": f"the power of the level-{u.get('alpha', 0.05):g} test of a shift η",
    }
    return words.get(metric, f"the '{metric}' metric " + _short({k: v for k, v in u.items() if k != "metric"}))


def spec_in_words(certificate: Certificate) -> list[str]:
    """The spec of a certificate as sentences."""
    d = certificate.data
    spec, g, s = d["spec"], d["guarantee"], d["sensitivity"]
    data = spec["data"]
    attributes = "; ".join(_attribute(k, v) for k, v in data["attributes"].items())
    n = f" The number of records, n = {data['n']}, is public." if data.get("n") is not None else ""
    request = spec.get("mechanism", "auto")
    if request == "auto":
        how = "every mechanism family that can meet the target is calibrated and the best predicted utility is kept"
    elif isinstance(request, list):
        how = f"the families {', '.join(request)} are compared and the best kept"
    else:
        how = f"the family `{request}` is used"
    query = _query(spec["query"], s["dimension"])
    exact = [note for note in d["mechanism"].get("notes", []) if _EXACT_PART in note]
    invariants = "; ".join(_invariant(i) for i in spec.get("invariants", []))
    published = (invariants[:1].upper() + invariants[1:] + "." if invariants else "")
    if exact:
        published += (" Also" if invariants else " No invariant is declared, but") + " " + "; ".join(exact) + "."
    lines = [
        f"**Data.** Records with {attributes}.{n}",
        f"**Released.** {query[0].upper() + query[1:]}, with random noise added.",
        "**Published exactly.** " + (published.strip() or "Nothing: every released number carries noise."),
        f"**Who is protected.** Any two datasets that {g['scope']['adjacency_description']}.",
        f"**Target.** {_target(g['definition'], {k: v for k, v in g.items() if k not in ('definition', 'scope', 'note')})}.",
        f"**Mechanism.** As requested ({how}), optimising {_utility(spec.get('utility', {'metric': 'l2'}))}.",
    ]
    if spec.get("description"):
        lines.append("**Purpose (from the spec).** " + " ".join(str(spec["description"]).split()))
    return lines


# ---------------------------------------------------------------------- the sections
@dataclass(frozen=True)
class _Image:
    figure: Figure


def _guarantee(d: dict) -> list:
    g, m = d["guarantee"], d["mechanism"]
    target = {k: v for k, v in g.items() if k not in ("definition", "scope", "note")}
    blocks: list = [
        f"The release satisfies **{_target(g['definition'], target)}** between any two datasets that "
        f"{g['scope']['adjacency_description']}. The family's own check (`privacy`) and the second route from "
        "the noise law (`privacy.second_route`) both evaluate it; see *Checks*."
    ]
    rows = [["language", "value", "obtained by"], ["the certified target", _target(g["definition"], target),
                                                   "the checks `privacy` and `privacy.second_route`"]]
    summary = m.get("privacy", {}) or {}
    how = "; ".join(str(v) for k, v in summary.items() if isinstance(v, str) and not k.endswith("_exact"))
    for key, value in summary.items():
        if key in _SUMMARY_ROWS and isinstance(value, (int, float)):
            exact = summary.get(f"{key}_exact")
            rows.append([_SUMMARY_ROWS[key], f"{_SYMBOLS[key]} = {value:.6g}" + (f" (exactly {exact})" if exact else ""),
                         how])
    blocks.append(rows)
    headline = epsilon_table(epsilon_by_delta(d))
    if headline:
        blocks += ["**ε at each δ.** One headline ε per δ: the smallest of the valid bounds below (every row holds "
                   "for the same neighbouring datasets); each other figure is a looser bound of the same guarantee, "
                   "named with its method.", headline]
    if g.get("note"):
        blocks.append(f"**Note.** {g['note']}")
    semi = g["scope"].get("semi_dp")
    if semi:
        blocks += [
            f"**Semi-DP scope (invariants).** {semi.get('notion', '')}. {semi.get('dataspace', '')}. "
            f"{semi.get('adjacency', '')}.",
            semi.get("statement", ""),
            f"**Not protected.** {semi.get('not_protected', '')}",
        ]
        table = [["Semi-DP quantity", "value"],
                 ["semi-adjacent parameter a", f"{g['scope'].get('semi_adjacent_parameter')} "
                  f"({'exact' if semi.get('semi_adjacent_parameter_exact') else 'a bound'}, "
                  f"{str(semi.get('semi_adjacent_parameter_reading', '')).replace('_', '-')} reading)"],
                 ["how a was found", semi.get("semi_adjacent_parameter_method", "")]]
        ordinary = semi.get("ordinary_dp_read_under_invariants")
        if ordinary:
            values = ", ".join(f"{_SYMBOLS[k]} = {ordinary[k]:.6g}" for k in ("epsilon", "mu", "rho")
                               if isinstance(ordinary.get(k), (int, float)))
            table.append(["for comparison, not this release: an ordinary-DP mechanism read under the invariants",
                          ordinary.get("description", "") + (f" ({values})" if values else "")])
        blocks.append(table)
    return blocks


def _sensitivity(d: dict, figures: dict) -> list:
    s = d["sensitivity"]
    blocks: list = [
        [["dimension d", "rank of the span", "Δ₁", "Δ₂", "Δ∞", "span"],
         [s["dimension"], s["rank"], s["l1_exact"], f"√{s['l2_squared_exact']} ≈ {s['l2']:.6g}", s["linf_exact"],
          s["span"].get("kind", _short(s["span"])) if isinstance(s["span"], dict) else s["span"]]],
        f"Derived by {s['method']}. Neighbours: {s.get('adjacency', '')}.",
    ]
    if "sensitivity" in figures:
        blocks.append(_Image(figures["sensitivity"]))
    return blocks


def _checks_table(d: dict) -> list:
    def status(c: dict) -> str:
        return "n/a" if is_not_available(c) else "yes" if c["passed"] else "**NO**"

    return [["claim", "holds", "method", "detail"]] + [
        [f"`{c['claim']}`", status(c), c["method"], c["detail"]] for c in d["checks"]
    ]


def _second_route(d: dict) -> list:
    by_claim = {c["claim"]: c for c in d["checks"]}
    rows = [["second-route claim", "outcome"]]
    for claim in _SECOND_ROUTE:
        c = by_claim.get(claim)
        if c is None:
            rows.append([f"`{claim}`", "not in this certificate (issued before the second route existed)"])
        elif is_not_available(c):
            rows.append([f"`{claim}`", f"not available: {c['detail']}"])
        else:
            rows.append([f"`{claim}`", ("" if c["passed"] else "**FAILED** ") + c["detail"]])
    return [
        "Independently of the family's own formulas, `dpopt verify` takes the law of the noise the mechanism "
        "emits and computes the privacy loss at the neighbouring differences numerically (a bracketed "
        "privacy-loss distribution), checks that the sampler draws that law, and integrates the costs.",
        rows,
    ]


def _audit(report: Report | None) -> list:
    if report is None or report.audit is None:
        return ["Not run for this document (`dpopt report CERT --out report.html` runs it; so does `dpopt audit`)."]
    a = report.audit
    symbol = _SYMBOLS.get(a.parameter, a.parameter)
    if not a.audited:
        return [a.note]
    verdict = ("**not refuted**" if a.passed else "**REFUTED**")
    at = f" at δ = {a.delta:g}" if a.delta else ""
    certified = f"the audited value {symbol} = {a.certified:.6g}{at}"
    if a.certified_from:
        headline = epsilon_by_delta(report.certificate.data).get(a.delta)
        certified += f" ({a.certified_from}" + (f"; the headline at this δ is ε = {headline[0][0]:.6g}, see *The "
                                                 "guarantee*)" if headline else ")")
    blocks: list = [
        f"Monte Carlo on the worst-case neighbouring pairs the spec implies ({a.draws} draws per dataset and "
        f"pair, seed {a.seed}): {verdict}. The {a.confidence:.0%} lower confidence bound is "
        f"{symbol} ≥ {a.lower_bound:.4g}{at}, below {certified}. An audit can refute a "
        "guarantee, never prove one." if a.passed else
        f"Monte Carlo on the worst-case neighbouring pairs the spec implies ({a.draws} draws per dataset and "
        f"pair, seed {a.seed}): {verdict}. The {a.confidence:.0%} lower confidence bound "
        f"{symbol} ≥ {a.lower_bound:.4g}{at} exceeds {certified}.",
        [["pair: ‖v‖₁", "‖v‖₂", "test statistic", "type-I α", "type-II β", f"lower bound on {symbol}"]]
        + [[f"{r['l1']:.6g}", f"{r['l2']:.6g}", r["statistic"], f"{r['alpha']:.4g}", f"{r['beta']:.4g}",
            f"{r['lower_bound']:.4g}"] for r in a.rows],
    ]
    return blocks


def _groups(g: dict) -> list:
    """The ``groups`` block of a grouped release (``dpopt release --group-by``) in words."""
    levels = [["grouping column", "groups", "where the groups come from"]] + [
        [level["column"], level["groups"], level["domain"]] for level in g["levels"]
    ]
    composed = g["composition"]
    budget = ", ".join(f"{k} = {v}" for k, v in composed.items() if k not in ("definition", "method"))
    return [
        levels,
        f"Protected unit: {g['adjacency']}; a change touches at most {g['groups_changed']} group(s). "
        f"Per group: {g['per_group']}.",
        f"The whole release: {composed['definition']} with {budget} ({composed['method']}).",
    ]


def _sections(source: Report | Certificate) -> list[tuple[str, list]]:
    """The report's content as (heading, blocks); a block is a paragraph, a table or an image."""
    report = source if isinstance(source, Report) else None
    cert = report.certificate if report else source
    figures = {f.name: f for f in (report.figures if report else ())}
    d = cert.data
    m, u = d["mechanism"], d["utility"]
    sections: list[tuple[str, list]] = [
        ("What is released", spec_in_words(cert)),
        ("The guarantee", _guarantee(d)),
        ("Sensitivity space", _sensitivity(d, figures)),
        ("Mechanism", [
            f"**{m['title']}** (`{m['family']}`), parameters: {format_parameters(m['parameters'])}.",
            f"Predicted utility: {u['metric']} = {u['value']:.6g} ({u['method']}"
            + (f", 95% CI [{u['ci95'][0]:.6g}, {u['ci95'][1]:.6g}]" if "ci95" in u else "") + ").",
            *[_Image(figures[name]) for name in ("tradeoff", "noise") if name in figures],
        ]),
        ("Error of each cell", per_cell_block(d)),
    ]
    direction = better(u["metric"])
    rows = [["family", "parameters", f"predicted {u['metric']} ({direction} is better)", "method", "note"]]
    for c in d.get("candidates", []):
        if "utility" in c:
            cu = c["utility"]
            note = "selected" if c["family"] == m["family"] else ""
            rows.append([c["family"], format_parameters(c["parameters"]), f"{cu['value']:.6g}",
                         cu["method"] + (f", 95% CI [{cu['ci95'][0]:.6g}, {cu['ci95'][1]:.6g}]" if "ci95" in cu else ""),
                         note])
        else:
            rows.append([c["family"], "—", "—", "—", c["reason"]])
    candidates: list = [rows]
    if "utility" in figures:
        candidates.append(_Image(figures["utility"]))
    sections.append(("Candidates compared", candidates))
    if "groups" in d:
        sections.append(("Release by group", _groups(d["groups"])))
    if "postprocess" in d:
        sections.append(("Post-processing", report_blocks(d)))
    sections.append(("Second route", _second_route(d)))
    sections.append(("Empirical audit", _audit(report)))
    terms = glossary(d)
    sections.append(("Checks", [_checks_table(d)] + (["**Terms used above.**", *terms] if terms else [])))
    caveats = [n for n in m.get("notes", []) if _EXACT_PART not in n] + (list(report.notes) if report else [])
    sections.append(("Caveats", caveats or ["None recorded."]))
    sections.append(("Provenance", [f"dpopt {d['dpopt_version']}, spec SHA-256 `{d['spec_sha256']}`. "
                                    "Re-check with `dpopt verify certificate.json`."]))
    return sections


def _summary(cert: Certificate) -> str:
    d = cert.data
    g = d["guarantee"]
    target = {k: v for k, v in g.items() if k not in ("definition", "scope", "note")}
    held = all(c["passed"] for c in d["checks"])
    claims, unavailable = claim_counts(d)
    text = (f"{d['mechanism']['title']} (`{d['mechanism']['family']}`) releasing a vector of dimension "
            f"{d['sensitivity']['dimension']} under {_target(g['definition'], target)}; "
            f"{claims} claims for `dpopt verify` to re-derive" + (f" ({unavailable} not available)" if unavailable else "")
            + (", all held when issued." if held else " — **some FAIL**."))
    by_delta = epsilon_by_delta(d)
    if by_delta:
        text += (" Headline per group: " if "groups" in d else " Headline: ") + ", ".join(f"ε = {v[0][0]:.4g} at δ = {k:g}" for k, v in by_delta.items()) + "."
    return text + ball_fallback(d)


# ------------------------------------------------------------------------- rendering
def render_markdown(source: Report | Certificate, image_prefix: str = "") -> str:
    """The report as Markdown; figures are linked as ``{image_prefix}{name}.png`` (see :func:`write_report`)."""
    cert = source.certificate if isinstance(source, Report) else source
    lines = [f"# dpopt report: {cert['spec']['name']}", "", _summary(cert), ""]
    for heading, blocks in _sections(source):
        lines += [f"## {heading}", ""]
        for block in blocks:
            if isinstance(block, _Image):
                f = block.figure
                lines += [f"![{f.title}]({image_prefix}{f.name}.png)", "", f"*{f.caption}*"]
            elif isinstance(block, list):
                header, *body = block
                lines.append("| " + " | ".join(map(str, header)) + " |")
                lines.append("|" + "---|" * len(header))
                lines += ["| " + " | ".join(human(x).replace("|", "\\|").replace("\n", " ") for x in row) + " |"
                          for row in body]
            else:
                lines.append(human(block))
            lines.append("")
    return "\n".join(lines)


_CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;color:#1d1d1f;max-width:72em;margin:2em auto;
padding:0 1.2em;line-height:1.45}
h1{font-size:1.6em;border-bottom:2px solid #1f77b4;padding-bottom:.3em}h2{font-size:1.25em;margin-top:1.8em;
color:#174a7c}
.summary{background:#eef4fb;border-left:4px solid #1f77b4;padding:.6em 1em}
.tablewrap{overflow-x:auto;margin:.8em 0}table{border-collapse:collapse;font-size:.88em}
th{background:#e8eef5;text-align:left}td,th{border:1px solid #c8d0da;padding:.3em .6em;vertical-align:top}
tr:nth-child(even) td{background:#fafbfd}code{background:#f1f1f4;padding:0 .25em;border-radius:3px}
figure{margin:1.2em 0;text-align:center}figure img{max-width:100%;height:auto;border:1px solid #e0e0e0}
figcaption{font-size:.88em;color:#444;max-width:52em;margin:.4em auto 0}
"""


def _inline(text: str) -> str:
    """Escape, then the Markdown the sections use: **bold**, *italic*, `code`."""
    out = html.escape(human(text))
    out = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", out)
    out = re.sub(r"`([^`]+)`", r"<code>\1</code>", out)
    return re.sub(r"(?<![\w*])\*([^*\s][^*]*?)\*(?![\w*])", r"<em>\1</em>", out)


def render_html(source: Report | Certificate) -> str:
    """The report as one self-contained HTML page: styles inline, figures as base64 PNG data URIs."""
    cert = source.certificate if isinstance(source, Report) else source
    title = html.escape(cert["spec"]["name"])
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
        f"<title>dpopt report: {title}</title><style>{_CSS}</style></head><body>",
        f"<h1>dpopt report: {title}</h1>",
        f"<p class='summary'>{_inline(_summary(cert))}</p>",
    ]
    for heading, blocks in _sections(source):
        parts.append(f"<h2>{html.escape(heading)}</h2>")
        for block in blocks:
            if isinstance(block, _Image):
                f = block.figure
                data = base64.b64encode(f.png).decode("ascii")
                parts.append(f"<figure><img alt='{html.escape(f.title, quote=True)}' "
                             f"src='data:image/png;base64,{data}'><figcaption><strong>{html.escape(f.title)}."
                             f"</strong> {_inline(f.caption)}</figcaption></figure>")
            elif isinstance(block, list):
                header, *body = block
                parts.append("<div class='tablewrap'><table><thead><tr>"
                             + "".join(f"<th>{_inline(h)}</th>" for h in header) + "</tr></thead><tbody>")
                parts += ["<tr>" + "".join(f"<td>{_inline(x)}</td>" for x in row) + "</tr>" for row in body]
                parts.append("</tbody></table></div>")
            else:
                parts.append(f"<p>{_inline(block)}</p>")
    parts.append("</body></html>")
    return "\n".join(parts)


def write_report(report: Report, path: str | Path, image_prefix: str | None = None) -> list[Path]:
    """Write the report to ``path`` (.html: one self-contained file; otherwise Markdown with a PNG
    per figure next to it, named ``{image_prefix}{name}.png``, by default ``{stem}_{name}.png``).

    Returns the files written.
    """
    path = Path(path)
    if path.suffix.lower() in (".html", ".htm"):
        write_atomic(path, render_html(report))
        return [path]
    prefix = f"{path.stem}_" if image_prefix is None else image_prefix
    written = []
    for f in report.figures:
        target = path.parent / f"{prefix}{f.name}.png"
        write_atomic(target, f.png)
        written.append(target)
    write_atomic(path, render_markdown(report, prefix))
    return [path, *written]

