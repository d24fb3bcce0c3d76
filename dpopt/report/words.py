"""The spec of a certificate in words, and parameters shortened for a table cell: the first
section of the report (:mod:`dpopt.report.sections`) and the CLI's one-line summaries."""

from __future__ import annotations

import math
from fractions import Fraction

from dpopt.certificate.model import Certificate

DEFINITIONS = {
    "pure": "pure ε-differential privacy",
    "approx": "(ε, δ)-differential privacy",
    "gdp": "μ-Gaussian differential privacy",
    "zcdp": "ρ-zero-concentrated differential privacy",
    "pdp": "(ε, δ)-probabilistic differential privacy",
}
SYMBOLS = {"epsilon": "ε", "delta": "δ", "mu": "μ", "rho": "ρ"}
EXACT_PART = "released exactly"
"""A mechanism note with these words says what is published without noise: it goes under *Published exactly*."""


def short(value) -> str:
    """A parameter for a table cell: floats (also inside lists and dicts) to 6 significant
    digits; matrices of more than 16 entries by their shape only."""
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, list):
        if value and isinstance(value[0], list) and len(value) * len(value[0]) > 16:
            return f"⟨{len(value)}×{len(value[0])} matrix, in the certificate⟩"
        return "[" + ", ".join(short(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {short(v)}" for k, v in value.items()) + "}"
    return str(value)


def exact_number(exact, root: bool = False) -> str:
    """An exact rational (``"195025/665857"``, ``"2"``) for a person: an integer as it is, another rational as
    a decimal with the exact value after it (``0.292893 (exactly 195025/665857)``); ``root`` shows its
    square root, exactly where it is rational (√1 = 1, √(9/4) = 1.5), else ``√2 ≈ 1.41421``."""
    try:
        value = Fraction(str(exact))
    except (ValueError, ZeroDivisionError):  # not a rational (e.g. ``inf``): shown as recorded
        return str(exact)
    if root:
        num, den = math.isqrt(value.numerator), math.isqrt(value.denominator)
        if num * num != value.numerator or den * den != value.denominator:
            return f"√{exact} ≈ {math.sqrt(value):.6g}"
        value = Fraction(num, den)
    if value.denominator == 1:
        return str(value.numerator)
    return f"{float(value):.6g} (exactly {value})"


def format_parameters(parameters: dict, width: int = 90) -> str:
    """Mechanism parameters on one line, ``k=v`` with values shortened as in the report's tables
    (a value longer than ``width`` characters is left to the certificate)."""
    def value(v) -> str:
        text = short(v)
        return text if len(text) <= width else "⟨in the certificate⟩"

    return ", ".join(f"{k}={value(v)}" for k, v in parameters.items())


def _attribute(name: str, domain) -> str:
    if isinstance(domain, list):
        shown = ", ".join(map(str, domain[:6])) + (", …" if len(domain) > 6 else "")
        return f"{name} ({len(domain)} levels: {shown})"
    if isinstance(domain, dict) and {"min", "max"} <= set(domain):
        return f"{name} (a number between {domain['min']:g} and {domain['max']:g})"
    return f"{name} ({short(domain)})"


def _query(query: dict, dimension: int) -> str:
    kind = query["kind"]
    if kind == "count":
        return "the number of records"
    if kind == "histogram":
        return f"the histogram of {query['attribute']} ({dimension} counts)"
    if kind == "contingency_table":
        return (f"the contingency table of {' × '.join(query['attributes'])} ({dimension} cells, row-major, "
                f"{query['attributes'][0]} varying slowest)")
    if kind == "marginals" and "all_of_size" in query:
        over = f" of {', '.join(query['over'])}" if "over" in query else ""
        return f"every marginal table of {query['all_of_size']} attributes{over} ({dimension} counts in all)"
    if kind == "marginals":
        tables = "; ".join(" × ".join(g) for g in query["attributes"])
        return f"the marginal tables of {tables} ({dimension} counts in all)"
    if kind == "linear":
        return f"{dimension} linear combinations of the histogram of {query['attribute']}"
    if kind == "mean" and dimension == 2:  # with a privacy unit
        return f"the mean of {query['attribute']}, released as its centred sum and count (their ratio post-processed)"
    if kind in ("sum", "mean"):
        return f"the {kind} of {query['attribute']}"
    rest = {k: v for k, v in query.items() if k != "kind"}
    return f"a {kind.replace('_', ' ')} query {short(rest)} (dimension {dimension})"


def _invariant(inv: dict) -> str:
    if inv["kind"] == "total":
        return "the total number of records"
    if inv["kind"] == "margins":
        return f"the margins over {' × '.join(inv['attributes'])}"
    if inv["kind"] == "linear":
        return f"{len(inv.get('matrix', []))} linear statistics C·φ(X)"
    return short(inv)


def target_in_words(definition: str, params: dict) -> str:
    values = ", ".join(f"{SYMBOLS.get(k, k)} = {v:g}" for k, v in params.items() if isinstance(v, (int, float)))
    return f"{DEFINITIONS.get(definition, definition)} with {values}"


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
    return words.get(metric, f"the '{metric}' metric " + short({k: v for k, v in u.items() if k != "metric"}))


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
    exact = [note for note in d["mechanism"].get("notes", []) if EXACT_PART in note]
    invariants = "; ".join(_invariant(i) for i in spec.get("invariants", []))
    published = (invariants[:1].upper() + invariants[1:] + "." if invariants else "")
    if exact:
        published += (" Also" if invariants else " No invariant is declared, but") + " " + "; ".join(exact) + "."
    lines = [
        f"**Data.** Records with {attributes}.{n}",
        f"**Released.** {query[0].upper() + query[1:]}, with random noise added.",
        "**Published exactly.** " + (published.strip() or "Nothing: every released number carries noise."),
        f"**Who is protected.** Any two datasets that {g['scope']['adjacency_description']}.",
        f"**Target.** {target_in_words(g['definition'], {k: v for k, v in g.items() if k not in ('definition', 'scope', 'note')})}.",
        f"**Mechanism.** As requested ({how}), optimising {_utility(spec.get('utility', {'metric': 'l2'}))}.",
    ]
    if spec.get("description"):
        lines.append("**Purpose (from the spec).** " + " ".join(str(spec["description"]).split()))
    return lines
