"""The audit report a person reads, rendered from a certificate (Markdown or HTML)."""

from __future__ import annotations

import html

from dpopt.certificate.model import Certificate

_DEFINITIONS = {
    "pure": "pure ε-differential privacy",
    "approx": "(ε, δ)-differential privacy",
    "gdp": "μ-Gaussian differential privacy",
    "zcdp": "ρ-zero-concentrated differential privacy",
    "pdp": "(ε, δ)-probabilistic differential privacy",
}


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


def format_parameters(parameters: dict) -> str:
    """Mechanism parameters on one line, ``k=v`` with values shortened as in the report's tables."""
    return ", ".join(f"{k}={_short(v)}" for k, v in parameters.items())


def _sections(cert: Certificate) -> list[tuple[str, list]]:
    """The report's content as (heading, blocks); a block is a paragraph or a table."""
    d = cert.data
    spec, g, s, m, u = d["spec"], d["guarantee"], d["sensitivity"], d["mechanism"], d["utility"]
    params = ", ".join(f"{k} = {v}" for k, v in g.items() if k not in ("definition", "scope"))
    query = spec["query"]
    what = query["kind"].replace("_", " ") + (
        f" over {', '.join(map(str, query['attributes']))}" if "attributes" in query else
        f" of {query['attribute']}" if "attribute" in query else ""
    )
    sections: list[tuple[str, list]] = [
        ("What is released", [
            f"**{spec['name']}**: the {what}, a vector of dimension {s['dimension']}, "
            f"with noise added so that the release satisfies {_DEFINITIONS[g['definition']]} ({params}).",
            f"Protected unit: neighbouring datasets {g['scope']['adjacency_description']}. "
            + ("Invariants: " + ", ".join(str(i) for i in g["scope"]["invariants"]) + "."
               if g["scope"]["invariants"] else "No statistic is published exactly."),
            *([f"Semi-DP (a = {g['scope']['semi_adjacent_parameter']}, "
               f"{g['scope']['semi_dp']['semi_adjacent_parameter_reading'].replace('_', '-')} reading: "
               f"{g['scope']['semi_dp']['semi_adjacent_parameter_method']}). "
               + g["scope"]["semi_dp"]["statement"] + " " + g["scope"]["semi_dp"]["not_protected"]]
              if "semi_dp" in g["scope"] else []),
        ]),
        ("Sensitivity", [
            [["dimension", "rank", "l1", "l2", "linf", "span"],
             [s["dimension"], s["rank"], s["l1_exact"], f"√{s['l2_squared_exact']}", s["linf_exact"],
              s["span"]["kind"]]],
            f"Derived by {s['method']}.",
        ]),
        ("Mechanism", [
            f"**{m['title']}** (`{m['family']}`), parameters: "
            + ", ".join(f"{k} = {_short(v)}" for k, v in m["parameters"].items()) + ".",
            *(["Its own privacy: " + ", ".join(f"{k} = {v}" for k, v in m["privacy"].items()) + "."]
              if m.get("privacy") else []),
            f"Predicted utility: {u['metric']} = {u['value']:.6g} ({u['method']}"
            + (f", 95% CI [{u['ci95'][0]:.6g}, {u['ci95'][1]:.6g}]" if "ci95" in u else "") + ").",
        ]),
    ]
    from dpopt.mechanisms.base import better  # here: the mechanisms import dpopt.certificate

    direction = better(u["metric"])
    rows = [["family", "parameters", f"predicted {u['metric']} ({direction} is better)", "method", "note"]]
    for c in d.get("candidates", []):
        if "utility" in c:
            cu = c["utility"]
            note = "selected" if c["family"] == m["family"] else ""
            rows.append([c["family"], ", ".join(f"{k}={_short(v)}" for k, v in c["parameters"].items()),
                         f"{cu['value']:.6g}",
                         cu["method"] + (f", 95% CI [{cu['ci95'][0]:.6g}, {cu['ci95'][1]:.6g}]" if "ci95" in cu else ""),
                         note])
        else:
            rows.append([c["family"], "—", "—", "—", c["reason"]])
    sections.append(("Candidates compared", [rows]))
    checks = [["claim", "passed", "method", "detail"]] + [
        [c["claim"], "yes" if c["passed"] else "**NO**", c["method"], c["detail"]] for c in d["checks"]
    ]
    sections.append(("Checks", [checks]))
    sections.append(("Caveats", list(m.get("notes", []))))
    sections.append(("Provenance", [f"dpopt {d['dpopt_version']}, spec SHA-256 `{d['spec_sha256']}`. "
                                    "Re-check with `dpopt verify certificate.json`."]))
    return sections


def render_markdown(cert: Certificate) -> str:
    """The report as Markdown."""
    lines = [f"# dpopt report: {cert['spec']['name']}", ""]
    for heading, blocks in _sections(cert):
        lines += [f"## {heading}", ""]
        for block in blocks:
            if isinstance(block, list):
                header, *body = block
                lines.append("| " + " | ".join(map(str, header)) + " |")
                lines.append("|" + "---|" * len(header))
                lines += ["| " + " | ".join(str(x).replace("|", "\\|") for x in row) + " |" for row in body]
            else:
                lines.append(str(block))
            lines.append("")
    return "\n".join(lines)


def render_html(cert: Certificate) -> str:
    """The report as one self-contained HTML page (no external resources)."""
    esc = html.escape
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>dpopt report: {esc(cert['spec']['name'])}</title>",
        "<style>body{font-family:sans-serif;max-width:60em;margin:2em auto}"
        "table{border-collapse:collapse}td,th{border:1px solid #999;padding:.3em .6em}</style>",
        f"</head><body><h1>dpopt report: {esc(cert['spec']['name'])}</h1>",
    ]
    for heading, blocks in _sections(cert):
        parts.append(f"<h2>{esc(heading)}</h2>")
        for block in blocks:
            if isinstance(block, list):
                header, *body = block
                parts.append("<table><tr>" + "".join(f"<th>{esc(str(h))}</th>" for h in header) + "</tr>")
                parts += ["<tr>" + "".join(f"<td>{esc(str(x))}</td>" for x in row) + "</tr>" for row in body]
                parts.append("</table>")
            else:
                parts.append(f"<p>{esc(str(block))}</p>")
    parts.append("</body></html>")
    return "\n".join(parts)
