r"""The guarantee of a grouped release: per group, and composed over the groups a record touches.

A grouped release applies the spec's mechanism independently to the records of every
group of one or more grouping columns (``--group-by``). The spec's adjacency applies
*within* groups: a record is added or removed with its group keys, or replaced by one
with the same group keys (so under ``replace_one`` the group sizes are public).

Neighbouring datasets then differ in the input of at most

.. math:: m = L \cdot k

groups, L the number of grouping columns (a record is counted in one group of each) and
k the records changed (k = 1, or the Hamming distance); every other group's input, and so
its output distribution, is the same. Each changed group's release meets the spec's
target, so the whole release meets its m-fold composition:

* pure ε → mε; (ε, δ) → (mε, mδ) (basic composition; Dwork & Roth 2014, Thm 3.16);
* μ-GDP → √m·μ (G_μ₁ ⊗ G_μ₂ = G_√(μ₁²+μ₂²); Dong, Roth & Su 2022, Cor. 3.3);
* ρ-zCDP → mρ (Bun & Steinke 2016, Lemma 2.3);
* (ε, δ)-pDP → (mε, mδ) (the losses add; the bad events have total probability ≤ mδ).

With m = 1 (one grouping column, one record) this is parallel composition: the whole
release has the per-group guarantee. The composed values are rounded up to floats and
checked against the exact rational composition.
"""

from __future__ import annotations

import math
from fractions import Fraction

from dpopt.core.checks import Check
from dpopt.spec.models import Spec

_METHODS = {
    "pure": "basic composition: ε adds up (Dwork & Roth 2014, Thm 3.16)",
    "approx": "basic composition: ε and δ add up (Dwork & Roth 2014, Thm 3.16)",
    "gdp": "GDP composition: μ = √(Σ μ_i²) (Dong, Roth & Su 2022, Cor. 3.3)",
    "zcdp": "zCDP composition: ρ adds up (Bun & Steinke 2016, Lemma 2.3)",
    "pdp": "pDP composition: ε adds up, δ by the union bound over the bad events",
}


def person_groups(spec: Spec) -> int:
    """With ``data.privacy_unit``: the most groups of one grouping column a person's kept rows touch, min(g, k)
    (bounding counts a person's cells with their group keys, and each touched group holds a kept row)."""
    unit = spec.data.privacy_unit
    return min(n for n in (unit.max_groups, unit.max_rows) if n is not None)


def groups_changed(spec: Spec, columns: int) -> int:
    """m: the number of groups whose input differs between neighbouring datasets (with a privacy unit: the
    groups of the person added or removed, of both persons under replace)."""
    if spec.data.privacy_unit is not None:
        return columns * person_groups(spec) * (1 if spec.adjacency.kind == "add_remove" else 2)
    k = spec.adjacency.distance if spec.adjacency.kind == "hamming" else 1
    return columns * k


def within_group_adjacency(spec: Spec) -> str:
    """The neighbouring relation of a grouped release, in words."""
    if spec.data.privacy_unit is not None:
        g = person_groups(spec)
        verb = "adding or removing one person" if spec.adjacency.kind == "add_remove" else \
            "replacing one person's rows by another person's"
        return (f"neighbouring datasets differ by {verb} with all their rows, which bounding keeps in at most {g} "
                "group(s) of each grouping column (their cells counted with the group keys)")
    if spec.adjacency.kind == "add_remove":
        return "neighbouring datasets differ by adding or removing one record, with its group key(s)"
    k = spec.adjacency.distance if spec.adjacency.kind == "hamming" else 1
    who = "one record" if k == 1 else f"up to {k} records"
    return (
        f"neighbouring datasets differ by replacing {who} by record(s) with the same group key(s): "
        "group sizes are not protected"
    )


PER_GROUP = "each group's released table satisfies the certificate's guarantee"
PLAN_PER_GROUP = "each group's released plan satisfies the plan's guarantee"
STREAMS = ("noise of block b (groups of rank [bB, (b+1)B) in canonical order) of grouping column l drawn from "
           "the stream at SeedSequence path (l, b)")
"""The fixed texts of a ``groups`` block (a single query's, a plan's, and how the noise streams are derived)."""


def groups_block(spec: Spec, levels: list[tuple[str, int, str]], per_group: str = PER_GROUP,
                 block: int | None = None) -> dict:
    """The certificate's ``groups`` block for grouping columns ``levels`` = (column, number of groups,
    where the groups come from): the composition over the groups a record touches, and (``block``,
    the groups per noise stream) how the streams are derived.

    Under add/remove adjacency, groups observed in the data carry a caveat: the set of non-empty
    groups is published as found and is not protected.
    """
    columns = [column for column, _, _ in levels]
    m = groups_changed(spec, len(columns))
    rows = []
    for column, count, domain in levels:
        row = {"column": column, "groups": count, "domain": domain}
        if spec.adjacency.kind == "add_remove" and domain.startswith("observed"):
            row["caveat"] = (f"the set of non-empty groups of {column} is published as found in the data; the "
                             "guarantee covers the released values given that set, not the set itself")
        rows.append(row)
    out = {"columns": columns, "levels": rows, "adjacency": within_group_adjacency(spec), "groups_changed": m,
           "per_group": per_group, "composition": compose(spec, m)}
    if block is not None:
        out["streams"] = {"block_groups": block, "derivation": STREAMS}
    return out


def groups_record_check(spec: Spec, block: dict, per_group: str = PER_GROUP) -> Check:
    """``groups.record``: the recorded block equals the one rebuilt from its grouping columns
    (one level per column, in order, each column once; group counts non-negative integers)."""
    levels = block.get("levels") if isinstance(block, dict) else None
    rows = [(row.get("column"), row.get("groups"), row.get("domain")) for row in levels or [] if isinstance(row, dict)]
    columns = block.get("columns") if isinstance(block, dict) else None
    well_formed = (
        isinstance(columns, list) and columns and len(rows) == len(levels) == len(columns)
        and len(set(map(str, columns))) == len(columns)
        and all(isinstance(c, str) and c == col and isinstance(g, int) and not isinstance(g, bool) and g >= 0
                and isinstance(d, str) for (c, g, d), col in zip(rows, columns))
    )
    streams = block.get("streams") if isinstance(block, dict) else None
    size = streams.get("block_groups") if isinstance(streams, dict) else None
    if not well_formed or (streams is not None and not (isinstance(size, int) and size > 0)):
        return Check("groups.record", "one level per grouping column, in order", False,
                     f"columns {columns!r} and levels do not match (or a count is not a non-negative integer)")
    expected = groups_block(spec, rows, per_group, size)
    same = block == expected
    return Check("groups.record", "the groups block equals the one rebuilt from its grouping columns (texts, "
                                  "caveats, groups changed, composition, streams)", same,
                 f"{len(columns)} grouping column(s): {', '.join(columns)}" if same else "the recorded block differs")


def _float_above(x: Fraction) -> float:
    f = float(x)
    return f if Fraction(f) >= x else math.nextafter(f, math.inf)


def _sqrt_above(x: Fraction) -> float:
    """The smallest float f found upward from √x with f² ≥ x exactly."""
    f = math.sqrt(float(x))
    while Fraction(f) ** 2 < x:
        f = math.nextafter(f, math.inf)
    return f


def compose(spec: Spec, m: int) -> dict:
    """The spec's target composed m times: ``{definition, parameters..., method}``, rounded up."""
    definition, p = spec.privacy.definition, spec.privacy.parameters
    if definition == "gdp":
        params = {"mu": _sqrt_above(m * Fraction(p["mu"]) ** 2)}
    else:
        params = {name: _float_above(m * Fraction(value)) for name, value in p.items()}
    if "delta" in params and params["delta"] >= 1:
        params["delta"] = 1.0  # a vacuous δ: say so rather than print a probability above 1
    return {
        "definition": definition,
        **params,
        "method": _METHODS[definition]
        if m > 1
        else "parallel composition: each record is in one group, the groups' noise is independent",
    }


def composition_checks(spec: Spec, block: dict) -> list[Check]:
    """Re-derive the grouped guarantee recorded in a certificate's ``groups`` block.

    The count m follows from the spec's adjacency and the number of grouping columns;
    the composed parameters are compared exactly with m times the per-group target.
    """
    columns = block.get("columns") or []
    m = groups_changed(spec, len(columns))
    recorded = block.get("composition", {})
    expected = compose(spec, m)
    definition, p = spec.privacy.definition, spec.privacy.parameters
    if definition == "gdp":
        holds = Fraction(recorded.get("mu", 0.0)) ** 2 >= m * Fraction(p["mu"]) ** 2
    else:
        holds = all(
            (name == "delta" and recorded.get(name) == 1.0)
            or Fraction(recorded.get(name, 0.0)) >= m * Fraction(value)
            for name, value in p.items()
        )
    same = (
        block.get("groups_changed") == m
        and recorded == expected
        and block.get("adjacency") == within_group_adjacency(spec)
    )
    shown = ", ".join(f"{k} = {v}" for k, v in expected.items() if k not in ("definition", "method"))
    return [
        Check(
            "groups.composition",
            f"{m} group(s) change between neighbours ({len(columns)} grouping column(s)); "
            f"{expected['method']}; exact rational comparison",
            bool(holds and same),
            f"per group {definition} {p}; whole release {shown}",
        )
    ]
