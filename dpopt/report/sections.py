"""The report's content as (heading, blocks), shared by the Markdown and HTML renderers
(:mod:`dpopt.report.render`): a block is a paragraph, a table (a list of rows) or an image."""

from __future__ import annotations

from dataclasses import dataclass

from dpopt.certificate.model import Certificate
from dpopt.certificate.second_route import is_not_available
from dpopt.mechanisms.base import better
from dpopt.postprocess.evaluation import report_blocks
from dpopt.report.document import AUDIT_NOT_RUN, Figure, Report
from dpopt.report.intervals import interval_blocks
from dpopt.report.marginal_table import marginal_error_block, table_goal_block
from dpopt.report.reading import (
    ball_fallback,
    checks_sentence,
    claim_counts,
    epsilon_by_delta,
    epsilon_table,
    glossary,
    name_cells,
    per_cell_block,
)
from dpopt.report.words import (
    EXACT_PART,
    SYMBOLS,
    exact_number,
    format_parameters,
    short,
    spec_in_words,
    target_in_words,
)
from dpopt.stats.log_volume import ci_text, utility_value_text

_SUMMARY_ROWS = {"mu": "μ-GDP", "rho": "ρ-zCDP", "epsilon": "pure ε-DP"}
_SECOND_ROUTE = ("privacy.second_route", "privacy.second_route.sampler", "utility.integration")


@dataclass(frozen=True)
class Image:
    """A figure placed among the blocks of a section."""

    figure: Figure


def _guarantee(d: dict) -> list:
    g, m = d["guarantee"], d["mechanism"]
    target = {k: v for k, v in g.items() if k not in ("definition", "scope", "note")}
    blocks: list = [
        f"The release satisfies **{target_in_words(g['definition'], target)}** between any two datasets that "
        f"{g['scope']['adjacency_description']}. The family's own check (`privacy`) and the second route from "
        "the noise law (`privacy.second_route`) both evaluate it; see *Checks*."
    ]
    rows = [["language", "value", "obtained by"], ["the certified target", target_in_words(g["definition"], target),
                                                   "the checks `privacy` and `privacy.second_route`"]]
    summary = m.get("privacy", {}) or {}
    how = "; ".join(str(v) for k, v in summary.items() if isinstance(v, str) and not k.endswith("_exact"))
    for key, value in summary.items():
        if key in _SUMMARY_ROWS and isinstance(value, (int, float)):
            exact = summary.get(f"{key}_exact")
            rows.append([_SUMMARY_ROWS[key], f"{SYMBOLS[key]} = {value:.6g}" + (f" (exactly {exact})" if exact else ""),
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
            values = ", ".join(f"{SYMBOLS[k]} = {ordinary[k]:.6g}" for k in ("epsilon", "mu", "rho")
                               if isinstance(ordinary.get(k), (int, float)))
            table.append(["for comparison, not this release: an ordinary-DP mechanism read under the invariants",
                          ordinary.get("description", "") + (f" ({values})" if values else "")])
        blocks.append(table)
    return blocks


def _sensitivity(d: dict, figures: dict) -> list:
    s = d["sensitivity"]
    blocks: list = [
        [["dimension d", "rank of the span", "Δ₁", "Δ₂", "Δ∞", "span"],
         [s["dimension"], s["rank"], exact_number(s["l1_exact"]), exact_number(s["l2_squared_exact"], root=True),
          exact_number(s["linf_exact"]),
          s["span"].get("kind", short(s["span"])) if isinstance(s["span"], dict) else s["span"]]],
        f"Derived by {s['method']}. Neighbours: {s.get('adjacency', '')}.",
    ]
    if "sensitivity" in figures:
        blocks.append(Image(figures["sensitivity"]))
    return blocks


def _checks_table(d: dict) -> list:
    def status(c: dict) -> str:
        return "n/a" if is_not_available(c) else "yes" if c["passed"] else "**NO**"

    return [["claim", "holds", "method", "detail"]] + [
        [f"`{c['claim']}`", status(c), c["method"], name_cells(c["detail"], d)] for c in d["checks"]
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
            rows.append([f"`{claim}`", ("" if c["passed"] else "**FAILED** ") + name_cells(c["detail"], d)])
    return [
        "Independently of the family's own formulas, `dpopt verify` takes the law of the noise the mechanism "
        "emits and computes the privacy loss at the neighbouring differences numerically (a bracketed "
        "privacy-loss distribution), checks that the sampler draws that law, and integrates the costs.",
        rows,
    ]


def _audit(report: Report | None) -> list:
    failed = [n for n in (report.notes if report is not None else ()) if n.startswith(AUDIT_NOT_RUN)]
    if failed:  # tried by the command that wrote this page: its reason, not advice to run that command
        return [f"Not run: {failed[0].removeprefix(AUDIT_NOT_RUN).removesuffix(')')}."]
    if report is None or report.audit is None:
        return ["Not run for this document (`dpopt report CERT --out report.html` without `--no-audit` runs it; so "
                "does `dpopt audit`)."]
    a = report.audit
    symbol = SYMBOLS.get(a.parameter, a.parameter)
    if not a.audited:
        return [a.note]
    verdict = ("**not refuted**" if a.passed else "**REFUTED**")
    at = f" at δ = {a.delta:g}" if a.delta else ""
    certified = f"the audited value {symbol} = {a.certified:.6g}{at}"
    if a.certified_from:
        headline = epsilon_by_delta(report.certificate.data).get(a.delta)
        differs = headline and f"{headline[0][0]:.6g}" != f"{a.certified:.6g}"
        certified += f" ({a.certified_from}" + (f"; the headline at this δ is ε = {headline[0][0]:.6g}, see *The "
                                                 "guarantee*)" if differs else ")")
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


def _lower_bound_lines(m: dict, u: dict) -> list[str]:
    """How far the design is from the best possible: the achieved error beside the certified lower bounds a
    pure-ε workload family records (``marginal_laplace``: every unbiased ε-DP mechanism and every Laplace strategy;
    ``kronecker_laplace``: every Laplace matrix mechanism), each with its ratio; none for other families."""
    design = (m.get("parameters") or {}).get("design")
    if not isinstance(design, dict):
        return []
    value, bounds = u["value"], []
    found = design.get("lower_bounds") or {}
    if isinstance(found.get("unbiased_pure"), (int, float)) and found["unbiased_pure"] > 0:
        bounds.append((found["unbiased_pure"], "every unbiased ε-DP mechanism of this workload "
                                               "(Hammersley–Chapman–Robbins)"))
    if isinstance(found.get("laplace_strategies"), (int, float)) and found["laplace_strategies"] > 0:
        bounds.append((found["laplace_strategies"], "every strategy measured with Laplace noise (SVD bound)"))
    if isinstance(design.get("laplace_lower_bound"), (int, float)) and design["laplace_lower_bound"] > 0:
        bounds.append((design["laplace_lower_bound"], design.get("lower_bound_covers") or "Laplace matrix mechanisms"))
    if not bounds:
        return []
    parts = "; ".join(f"≥ {bound:.6g} for {who}: achieved / bound = {value / bound:.3g}" for bound, who in bounds)
    return [f"**Against the best possible.** Achieved {u['metric']} = {value:.6g}; certified lower bounds "
            f"(re-derived by `dpopt verify`, claim `utility.lower_bound`): {parts}."]


def report_sections(source: Report | Certificate) -> list[tuple[str, list]]:
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
            f"Predicted utility: {u['metric']} = {utility_value_text(u)} ({u['method']}{ci_text(u)}).",
            *_lower_bound_lines(m, u),
            *[Image(figures[name]) for name in ("tradeoff", "noise") if name in figures],
        ]),
        ("Error of each cell", per_cell_block(d)),
    ]
    per_cell = d["utility"].get("per_cell") or {}
    if per_cell.get("intervals"):
        sections.append(("Intervals for the true values", interval_blocks(
            per_cell, report.intervals if report else None,
            Image(figures["intervals"]) if "intervals" in figures else None)))
    by_table = marginal_error_block(d)
    if by_table:
        sections.append(("Error of each marginal table", by_table))
    goals = table_goal_block(d)
    if goals:
        sections.append(("Error of each table against its weight and target", goals))
    direction = better(u["metric"])
    rows = [["family", "parameters", f"predicted {u['metric']} ({direction} is better)", "method", "note"]]
    for c in d.get("candidates", []):
        if "utility" in c:
            cu = c["utility"]
            note = "selected" if c["family"] == m["family"] else ""
            rows.append([c["family"], format_parameters(c["parameters"]), utility_value_text(cu),
                         cu["method"] + ci_text(cu), note])
        else:
            skipped = {"capability table": "not a candidate (capability table): ",
                       "supports": "refused: "}.get(c.get("skipped"), "")  # a bound's reason says "not designed"
            rows.append([c["family"], "—", "—", "—", skipped + c["reason"]])
    candidates: list = [rows]
    if "utility" in figures:
        candidates.append(Image(figures["utility"]))
    sections.append(("Candidates compared", candidates))
    if "groups" in d:
        sections.append(("Release by group", _groups(d["groups"])))
    if "postprocess" in d:
        sections.append(("Post-processing", report_blocks(d)))
    sections.append(("Second route", _second_route(d)))
    sections.append(("Empirical audit", _audit(report)))
    terms = glossary(d)
    sections.append(("Checks", [checks_sentence(d), _checks_table(d)]
                     + (["**Terms used above.**", *terms] if terms else [])))
    caveats = [n for n in m.get("notes", []) if EXACT_PART not in n] + (list(report.notes) if report else [])
    sections.append(("Caveats", caveats or ["None recorded."]))
    sections.append(("Provenance", [f"dpopt {d['dpopt_version']}, spec SHA-256 `{d['spec_sha256']}`. "
                                    "Re-check with `dpopt verify certificate.json`."]))
    return sections


def summary_paragraph(cert: Certificate) -> str:
    """The opening paragraph: the mechanism, the target, the claims to re-derive, the headline ε."""
    d = cert.data
    g = d["guarantee"]
    target = {k: v for k, v in g.items() if k not in ("definition", "scope", "note")}
    held = all(c["passed"] for c in d["checks"])
    claims, unavailable = claim_counts(d)
    text = (f"{d['mechanism']['title']} (`{d['mechanism']['family']}`) releasing a vector of dimension "
            f"{d['sensitivity']['dimension']} under {target_in_words(g['definition'], target)}; "
            f"{claims} claims for `dpopt verify` to re-derive" + (f" ({unavailable} not available)" if unavailable else "")
            + (", all held when issued." if held else " — **some FAIL**."))
    by_delta = epsilon_by_delta(d)
    if by_delta:
        text += (" Headline per group: " if "groups" in d else " Headline: ") + ", ".join(f"ε = {v[0][0]:.4g} at δ = {k:g}" for k, v in by_delta.items()) + "."
    return text + ball_fallback(d)
