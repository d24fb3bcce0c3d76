"""What a statistician reads first in a report (issue 19): one headline ε per δ with the looser
figures labelled, each cell's standard error and 95% margin of error, the claim count of ``dpopt
verify``, a K-norm fallback named with its possible cost, plain words for the checks' terms, and
numbers rounded for people. Each function reads a certificate's data (a dict) and returns text or
a table (a list of rows) for :mod:`dpopt.report.sections`.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Sequence

from dpopt.certificate.second_route import is_not_available
from dpopt.certificate.verify import STRUCTURAL_CLAIMS, output_claims

_LONG_NUMBER = re.compile(r"(?<![\w.])-?\d+\.\d{7,}(?:[eE][+-]?\d+)?(?![\w.])")


def human(text: str) -> str:
    """Numbers with more than six decimals (``2.5600000000000001``, ``10.000000000000002``) rounded to six
    significant digits (``2.56``, ``10``) for a person; the certificate's JSON keeps every digit. A number beyond
    the double range (a region's volume, ``1.3394511e+380``) is shortened in its own digits, not read as a float."""
    return _LONG_NUMBER.sub(_six_digits, str(text))


def _six_digits(match: re.Match) -> str:
    """The matched number to six significant digits (:func:`human`)."""
    text = match.group()
    if math.isfinite(float(text)):
        return f"{float(text):.6g}"
    mantissa, _, exponent = text.lower().partition("e")
    digits, power = float(f"{float(mantissa):.6g}"), int(exponent)
    if abs(digits) >= 10.0:  # 9.9999999 rounds up to 10
        digits, power = digits / 10.0, power + 1
    return f"{digits:.6g}e{power:+03d}"


def epsilon_by_delta(d: dict) -> dict[float, list[tuple[float, str]]]:
    """Every (ε, δ) figure a certificate states for this release, by δ: the mechanism's own
    profile (``mechanism.privacy.epsilon_at_delta``) and the Semi-DP scope's
    (``guarantee.scope.semi_dp.epsilon_at_delta``), each as (ε, how it was obtained),
    smallest ε first: the first is the headline, the others looser bounds."""
    summary = d["mechanism"].get("privacy", {}) or {}
    how = "; ".join(str(v) for k, v in summary.items() if isinstance(v, str) and not k.endswith("_exact"))
    semi = d["guarantee"]["scope"].get("semi_dp") or {}
    sources = [(summary.get("epsilon_at_delta"), f"the mechanism's own profile ({how})" if how else
                "the mechanism's own profile"),
               (semi.get("epsilon_at_delta"), f"Semi-DP scope: {semi.get('epsilon_conversion', '')}")]
    out: dict[float, list[tuple[float, str]]] = {}
    for values, method in sources:
        for delta, eps in (values or {}).items():
            if isinstance(eps, (int, float)):
                out.setdefault(float(delta), []).append((float(eps), method))
    return {delta: sorted(out[delta]) for delta in sorted(out, reverse=True)}


def epsilon_line(by_delta: dict) -> str:
    """The headline ε at each δ on one line (``ε = 4.38 at δ = 1e-05, ...``), as a report's headline
    states them: ``by_delta`` maps δ to ε, or to the figures of :func:`epsilon_by_delta` (tightest first)."""
    def first(value):
        return value[0][0] if isinstance(value, list) else value

    return ", ".join(f"ε = {first(eps):.4g} at δ = {float(delta):g}" for delta, eps in by_delta.items())


def target_text(definition: str, params: dict) -> str:
    """A privacy target on one line: ``rho = 0.5 (zcdp)``."""
    return ", ".join(f"{k} = {params[k]:.6g}" for k in ("epsilon", "delta", "mu", "rho") if k in params) + \
        f" ({definition})"


def verified_claims(verified: Sequence | None, prefix: str = "") -> int | None:
    """How many claims ``dpopt verify`` re-derived (its checks ``verified``, those whose name starts with
    ``prefix`` when given), counted as it counts them: the second routes not available left out; None without
    a verification."""
    if verified is None:
        return None
    return sum(1 for c in verified if c.claim.startswith(prefix) and not is_not_available(c))


def claims_sentence(verified: Sequence | None) -> str:
    """The claim count of a composite certificate's report, the verifier's: ``N claims hold, as `dpopt verify`
    counts them`` after a verification (``verified``: its checks, all holding), else that verify re-derives every
    claim (no other count: a certificate's recorded checks are fewer than the claims verify re-derives)."""
    if verified is None:
        return "`dpopt verify certificate.json` re-derives every claim"
    return f"{verified_claims(verified)} claims hold, as `dpopt verify` counts them"


def part_claims(verified: Sequence | None, name: str) -> str:
    """The checks-table text of one part (query, level) of a composite certificate: the verifier's count of the
    claims named ``name.*``, or that verify re-derives them."""
    count = verified_claims(verified, f"{name}.")
    return ("every claim of its own certificate (`dpopt verify` re-derives them)" if count is None
            else f"{count} claims of its own certificate, as `dpopt verify` counts them")


def composed_opening(d: dict, parts: str, whole: str, inside: str,
                     verified: Sequence | None = None) -> tuple[str, list]:
    """The opening of a plan's or a hierarchy's report: the summary sentence (``parts``, the target of the
    ``whole``, its ε per δ, the verifier's claim count (:func:`claims_sentence`), what is ``inside``) and the
    *What is released* section, if described."""
    g = d["guarantee"]
    eps = epsilon_line(g.get("epsilon_at_delta") or {})
    summary = (f"{parts} released under **{target_text(g['definition'], g)}** for the {whole}"
               + (f"; {eps}" if eps else "") + f". {claims_sentence(verified)}; {inside}.")
    description = d["spec"].get("description")
    return summary, [("What is released", [description.strip()])] if description else []


def composed_epsilon_blocks(guarantee: dict) -> list:
    """A composed guarantee's ε per δ (``epsilon_at_delta`` and ``epsilon_method`` of a plan's or a
    hierarchy's ``guarantee``) as a report block: a table, or a sentence saying why none is stated."""
    eps = guarantee.get("epsilon_at_delta")
    if not eps:
        return [f"ε per δ: {guarantee.get('epsilon_method', 'not stated')}."]
    return [[["δ", "ε of the whole release", "obtained by"]] + [
        [delta, f"**{e:.6g}**" if e is not None else "—", guarantee["epsilon_method"]] for delta, e in eps.items()]]


def epsilon_table(by_delta: dict) -> list:
    if not by_delta:
        return []
    rows = [["δ", "headline ε (tightest valid)", "obtained by", "looser bounds of the same guarantee"]]
    for delta, figures in by_delta.items():
        (eps, method), *looser = figures
        rows.append([f"{delta:g}", f"**{eps:.6g}**", method,
                     "; ".join(f"ε = {e:.6g} by {m}" for e, m in looser) or "—"])
    return rows


MAX_CELL_ROWS = 60

_GLOSSARY = {
    "bracket": "**pessimistic / optimistic bracket**: the privacy loss is computed on a grid twice, rounded against "
               "the mechanism (pessimistic: an upper bound) and in its favour (optimistic: a lower bound); the exact "
               "value lies between.",
    "Λ^(-1/2)Bᵀv": "**‖Λ^(-1/2)Bᵀv‖**: a neighbouring difference v measured in standard deviations of the noise along "
                   "each of its principal axes; for Gaussian noise this length is the whole privacy cost of v.",
    "margins_kernel": "**margins_kernel**: the tables whose published margins are all zero, i.e. the directions in "
                      "which a neighbouring dataset can move the table; the noise is added there only.",
    "sum_zero": "**sum_zero**: the vectors whose entries sum to zero, i.e. the directions in which a neighbouring "
                "dataset can move the answer when the total is fixed; the noise is added there only.",
    "Rényi": "**Rényi divergence D_α**: a measure of how distinguishable two output laws are; ρ-zCDP means "
             "D_α ≤ αρ for every order α > 1.",
    "Kolmogorov–Smirnov": "**Kolmogorov–Smirnov test**: compares draws of the sampler with the law the privacy "
                          "proof assumes; a tiny p-value would mean the sampler draws another law.",
    "Bonferroni": "**Bonferroni**: the level is divided among the tests, so that all of them together keep it.",
    "5 SE": "**5 SE**: the prediction must lie within five standard errors of the Monte Carlo average.",
    "span": "**span**: the directions in which neighbouring datasets differ; noise outside it would add error "
            "without adding privacy.",
    "gauge": "**‖·‖_K (gauge)**: the norm whose unit ball is the convex hull K of the neighbouring differences.",
}


def glossary(d: dict) -> list[str]:
    """One plain-language line for each term of the checks' and sensitivity's wording that needs one."""
    text = " ".join(f"{c['method']} {c['detail']}" for c in d["checks"]) + " " + str(d["sensitivity"].get("span"))
    return [line for term, line in _GLOSSARY.items() if term in text]


def per_cell_block(d: dict) -> list:
    """The per-cell standard error and 95% margin of error (``utility.per_cell``)."""
    per_cell = d["utility"].get("per_cell")
    if not per_cell:
        return ["Not in this certificate (issued before per-cell errors were recorded)."]
    cells = per_cell["cells"]
    released = [c for c in cells if c["standard_error"] is not None]
    intro = (f"Each released cell differs from the true value by its noise. **Standard error**: the noise's "
             f"standard deviation. **{per_cell['level']:.0%} margin of error**: the released cell is within this "
             f"distance of the true value in {per_cell['level']:.0%} of releases. Method: {per_cell['method']}.")
    first = (round(released[0]["standard_error"], 4), round(released[0]["margin_of_error"], 4)) if released else None
    # stops at the first cell that differs (the range example's 175,270 cells: at the second)
    uniform = bool(released) and all((round(c["standard_error"], 4), round(c["margin_of_error"], 4)) == first
                                     for c in itertools.islice(released, 1, None))
    if uniform and len(released) > 1:
        c = released[0]
        rows = [["cells", "standard error", f"{per_cell['level']:.0%} margin of error"],
                [f"every released cell ({len(released)} of {len(cells)})", f"{c['standard_error']:.3g}",
                 f"± {c['margin_of_error']:.3g}"]]
    else:
        rows = [["cell", "standard error", f"{per_cell['level']:.0%} margin of error"]] + [
            [c["cell"], "not released" if c["standard_error"] is None else f"{c['standard_error']:.3g}",
             "—" if c["margin_of_error"] is None else f"± {c['margin_of_error']:.3g}"] for c in cells[:MAX_CELL_ROWS]]
    blocks = [intro, rows]
    if released and not uniform and len(cells) > MAX_CELL_ROWS:
        blocks.append(f"The other {len(cells) - MAX_CELL_ROWS} cells: `utility.per_cell` in certificate.json.")
    return blocks


_INDEXED = re.compile(r"worst difference \{([^}]*)\}")


def name_cells(text: str, d: dict) -> str:
    """``worst difference {94: 2, 95: -2}`` (cell indices, as the certificate records a long vector) with the
    cells' labels from ``utility.per_cell`` instead: ``worst difference {state=WY,voting_age=under_18: 2, ...}``."""
    text = str(text)
    if _INDEXED.search(text) is None:  # most details: no list of the cells' labels (175,270 for the range example)
        return text
    cells = (d["utility"].get("per_cell") or {}).get("cells", [])

    def named(match: re.Match) -> str:
        parts = []
        for item in match.group(1).split(", "):
            index, sep, value = item.partition(": ")
            parts.append(f"{cells[int(index)]['cell']}: {value}" if sep and index.isdigit() and int(index) < len(cells)
                         else item)
        return "worst difference {" + ", ".join(parts) + "}"

    return _INDEXED.sub(named, text)


def checks_sentence(d: dict) -> str:
    """How the checks table adds up to the claim count of the report's first paragraph (:func:`claim_counts`)."""
    claims, unavailable = claim_counts(d)
    return (f"{claims} claims in all, as `dpopt verify` counts them: the {len(d['checks']) - unavailable} recorded "
            f"checks below that hold" + (f" (and {unavailable} marked n/a: not available)" if unavailable else "")
            + f", plus {len(STRUCTURAL_CLAIMS)} that verify re-derives from the embedded spec: "
            + ", ".join(f"`{c}`" for c in STRUCTURAL_CLAIMS) + ".")


def claim_counts(d: dict) -> tuple[int, int]:
    """(claims `dpopt verify` re-derives, claims whose second route is not available), counted as verify counts
    them: the recorded checks plus :data:`~dpopt.certificate.verify.STRUCTURAL_CLAIMS` (and ``output`` when a rounding
    is stated: :func:`~dpopt.certificate.verify.output_claims`)."""
    unavailable = sum(1 for c in d["checks"] if is_not_available(c))
    return len(d["checks"]) + len(STRUCTURAL_CLAIMS) + output_claims(d) - unavailable, unavailable


def ball_fallback(d: dict) -> str:
    """A sentence when a K-norm design fell back from the optimal K = Hull(S) to a ball, with what
    it may cost (the check ``k_norm.excess_cost``); empty otherwise."""
    check = next((c for c in d["checks"] if c["claim"] == "k_norm.excess_cost"), None)
    if check is None:
        return ""
    ratio = re.search(r"≤ ([0-9.eE+-]+) ×", check["detail"])
    reason = next((n for n in d["mechanism"].get("notes", []) if n.startswith("K is NOT the optimal K")), "")
    return (" **K is not the optimal K-norm body: the design fell back to a ball**"
            + (f" ({reason[len('K is NOT the optimal K: '):].split(';')[0]})" if reason else "")
            + (f"; its expected squared error may be up to {float(ratio.group(1)):.3g}× that of the optimal "
               "K-norm mechanism (check `k_norm.excess_cost`)." if ratio else f"; {check['detail']}."))
