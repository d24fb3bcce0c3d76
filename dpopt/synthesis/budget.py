r"""The privacy budget of a synthesis, split and composed exactly.

``selection: fixed`` spends the spec's target on one certified measurement of the marginals.

``selection: adaptive`` (MST, McKenna, Miklau & Sheldon 2021, Sec. 4) spends zCDP ρ in three parts,
the shares of ``synthesize.split`` (default one third each): the one-way marginals (ρ₁), ``rounds``
exponential-mechanism selections (ρ_r each) and the selected two-way marginals (ρ₃). Each part is the
largest decimal of at most :data:`DIGITS` significant digits not above its exact share (a measurement's
spec must state its ρ as a decimal a float keeps: :mod:`dpopt.core.decimals`), so

.. math:: \rho_1 + \text{rounds}\cdot\rho_r + \rho_3 \le \rho

holds in exact rational arithmetic (zCDP composes additively: Bun & Steinke 2016, Lemma 2.3). The
exponential mechanism with parameter ε is ε-DP and ε-bounded-range, hence ε²/8-zCDP (Cesar & Rogers
2021, Lemma 3.2 and Prop. 3.3, the accounting MST uses); :func:`em_epsilon` is the largest float ε with
ε²/8 ≤ ρ_r exactly.
"""

from __future__ import annotations

import math
from decimal import ROUND_FLOOR, Context, Decimal
from fractions import Fraction

from dpopt.core.checks import Check
from dpopt.core.decimals import kept, written
from dpopt.spec.synthesis import SynthesisSpec

DIGITS = 12
"""Significant digits of each part's ρ (a float keeps up to 15)."""

COMPOSITION = ("zCDP composes additively (Bun & Steinke 2016, Lemma 2.3); the exponential mechanism with "
               "parameter ε is ε²/8-zCDP (Cesar & Rogers 2021, Prop. 3.3); sums in exact rationals of the decimals "
               "as written")


def decimal_below(exact: Fraction, digits: int = DIGITS) -> str:
    """The largest decimal of at most ``digits`` significant digits that is ≤ ``exact`` (> 0), as text."""
    context = Context(prec=digits, rounding=ROUND_FLOOR)
    value = context.divide(Decimal(exact.numerator), Decimal(exact.denominator))
    text = str(value.normalize())
    assert written(text) <= exact and kept(text)
    return text


def em_epsilon(rho: str) -> float:
    """The largest float ε with ε²/8 ≤ ρ in exact arithmetic (ρ the decimal written)."""
    bound = written(rho)
    epsilon = math.sqrt(8 * float(bound))
    while Fraction(epsilon) ** 2 / 8 > bound:
        epsilon = math.nextafter(epsilon, 0.0)
    return epsilon


def target_text(spec: SynthesisSpec) -> dict:
    """The spec's target with each parameter as the decimal written."""
    return {"definition": spec.privacy.definition,
            **{k: repr(v) for k, v in spec.privacy.parameters.items()}}


def budget_parts(spec: SynthesisSpec) -> list[dict]:
    """Each part of the budget: ``{"part", "definition", parameters as text}`` (module docstring)."""
    if spec.synthesize.selection == "fixed":
        return [{"part": "measurement", **target_text(spec)}]
    rho = written(spec.privacy.zcdp.rho)
    shares = spec.split.fractions()
    per_round = decimal_below(rho * shares["selection"] / spec.rounds)
    return ([{"part": "one_way", "definition": "zcdp", "rho": decimal_below(rho * shares["one_way"])}]
            + [{"part": f"selection_round_{i + 1}", "definition": "zcdp", "rho": per_round}
               for i in range(spec.rounds)]
            + [{"part": "selected", "definition": "zcdp", "rho": decimal_below(rho * shares["selected"])}])


def budget_block(spec: SynthesisSpec) -> dict:
    """The certificate's ``budget``: the target, the parts, their exact total and the composition rule."""
    parts = budget_parts(spec)
    if spec.synthesize.selection == "fixed":
        total = target_text(spec)
    else:
        total = {"definition": "zcdp", "rho": _sum_text(parts)}
    return {"target": target_text(spec), "parts": parts, "total": total, "composition": COMPOSITION}


def _sum_text(parts: list[dict]) -> str:
    exact = sum((written(p["rho"]) for p in parts), Fraction(0))
    return str(Decimal(exact.numerator) / Decimal(exact.denominator))  # a finite decimal: a sum of decimals


def budget_checks(spec: SynthesisSpec, block: dict) -> list[Check]:
    """The recorded budget re-derived from the spec, and its total at most the target (exact rationals)."""
    fresh = budget_block(spec)
    checks = [Check("budget.parts", "each part's share of the target re-derived from the spec (decimals at most "
                    f"{DIGITS} significant digits, rounded down)", block.get("parts") == fresh["parts"],
                    f"{len(fresh['parts'])} parts")]
    if spec.synthesize.selection == "fixed":
        checks.append(Check("budget.total", "one measurement spends the target as it is",
                            block.get("total") == fresh["target"], f"{fresh['target']}"))
        return checks
    parts = block.get("parts") if isinstance(block.get("parts"), list) else []
    try:
        exact = sum((written(p["rho"]) for p in parts), Fraction(0))
        holds = (exact <= written(spec.privacy.zcdp.rho) and written(block["total"]["rho"]) == exact
                 and block["total"].get("definition") == "zcdp")
    except (KeyError, TypeError, ValueError):
        exact, holds = None, False
    checks.append(Check("budget.total", "Σ ρ of the parts (exact rationals of the decimals written) equals the "
                        "recorded total and is at most the target ρ", holds,
                        f"Σ ρ = {_sum_text(fresh['parts'])} ≤ ρ = {fresh['target']['rho']}"
                        if holds else f"recomputed Σ ρ = {exact}"))
    return checks
