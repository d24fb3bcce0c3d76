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

**Joint sensitivity** (a privacy unit, one grouping column). Composition charges every group a
person touches the per-group worst case. The whole release is also the same noise family, with the
same parameters, on the stacked vector of all groups' answers, whose exact person-level norms
:func:`dpopt.sensitivity.person.grouped_norms` derives. For the families whose guarantee at fixed
parameters is a function of one norm Δ (isotropic Gaussian: ρ = Δ₂²/(2σ²), μ = Δ₂/σ; discrete
Gaussian: ρ = Δ₂²/(2σ²), Canonne, Kamath & Steinke 2020, Thm 14; Laplace and discrete Laplace:
ε = Δ₁/b) a mechanism meeting the per-group target p at the per-group norm Δ_g meets p·(Δ_J/Δ_g)² (ρ),
p·Δ_J/Δ_g (μ, ε) at the joint norm Δ_J. That value, rounded up, is re-checked by the family's own
privacy check on the joint space (:func:`joint_block`), and the whole release states the better
(smaller) of it and the composition. A sum measured on a lattice (:mod:`dpopt.mechanisms.real_lattice`) is
checked on its integers: the stacked N_j move by the lattice unit u = Δ_u/R per row of the person in group j, so
the joint norms in units of g are u times those of the person's rows per group (the same ratio to Δ_u as the real
norms' to Δ), and the family's integer-noise check (``units_privacy_checks``) evaluates the scaled target there.
"""

from __future__ import annotations

import math
from dataclasses import replace
from fractions import Fraction

from dpopt.core.decimals import float_written_above, written
from dpopt.core.checks import Check
from dpopt.domain.queries import CountingQuery, NumericQuery
from dpopt.mechanisms import Mechanism
from dpopt.mechanisms.base import registry
from dpopt.mechanisms.real_lattice import RealLattice
from dpopt.sensitivity.person import grouped_norms
from dpopt.sensitivity.space import SensitivitySpace
from dpopt.sensitivity.subspace import FullSpace
from dpopt.spec.models import Privacy, Spec

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
                 block: int | None = None, joint: dict | None = None) -> dict:
    """The certificate's ``groups`` block for grouping columns ``levels`` = (column, number of groups,
    where the groups come from): the composition over the groups a record touches, and (``block``,
    the groups per noise stream) how the streams are derived; with ``joint`` (:func:`joint_block`,
    checked) the whole release is the better of the composition and the joint guarantee.

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
           "per_group": per_group, "composition": whole_release(spec, m, joint)}
    if joint is not None:
        out["joint"] = joint
    if block is not None:
        out["streams"] = {"block_groups": block, "derivation": STREAMS}
    return out


def groups_record_check(spec: Spec, block: dict, per_group: str = PER_GROUP, joint: dict | None = None) -> Check:
    """``groups.record``: the recorded block equals the one rebuilt from its grouping columns
    (one level per column, in order, each column once; group counts non-negative integers), with the
    ``joint`` block re-derived by :func:`joint_block`."""
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
    expected = groups_block(spec, rows, per_group, size, joint)
    same = block == expected
    return Check("groups.record", "the groups block equals the one rebuilt from its grouping columns (texts, "
                                  "caveats, groups changed, composition, joint sensitivity, streams)", same,
                 f"{len(columns)} grouping column(s): {', '.join(columns)}" if same else "the recorded block differs")


def _sqrt_above(x: Fraction) -> float:
    """The smallest float f found upward from √x whose decimal (its repr) has square at least x."""
    f = math.sqrt(float(x))
    while written(f) ** 2 < x:
        f = math.nextafter(f, math.inf)
    return f


def compose(spec: Spec, m: int) -> dict:
    """The spec's target composed m times: ``{definition, parameters..., method}``, rounded up."""
    definition, p = spec.privacy.definition, spec.privacy.parameters
    if definition == "gdp":
        params = {"mu": _sqrt_above(m * written(p["mu"]) ** 2)}
    else:
        params = {name: float_written_above(m * written(value)) for name, value in p.items()}
    if "delta" in params and params["delta"] >= 1:
        params["delta"] = 1.0  # a vacuous δ: say so rather than print a probability above 1
    return {
        "definition": definition,
        **params,
        "method": _METHODS[definition]
        if m > 1
        else "parallel composition: each record is in one group, the groups' noise is independent",
    }


def composition_checks(spec: Spec, block: dict, joint: dict | None = None) -> list[Check]:
    """Re-derive the grouped guarantee recorded in a certificate's ``groups`` block.

    The count m follows from the spec's adjacency and the number of grouping columns;
    the composed parameters are compared exactly with m times the per-group target, or, where the
    re-derived ``joint`` guarantee (:func:`joint_block`) is the better, with the per-group target times
    the exact norm ratio.
    """
    columns = block.get("columns") or []
    m = groups_changed(spec, len(columns))
    recorded = block.get("composition", {})
    expected = whole_release(spec, m, joint)
    definition, p = spec.privacy.definition, spec.privacy.parameters
    factor = Fraction(joint["norm_ratio_exact"]) if expected["method"] == _JOINT_METHOD else Fraction(m)
    if definition == "gdp":
        holds = written(recorded.get("mu", 0.0)) ** 2 >= factor * written(p["mu"]) ** 2
    else:
        holds = all(
            (name == "delta" and recorded.get(name) == 1.0)
            or written(recorded.get(name, 0.0)) >= factor * written(value)
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


JOINT_TARGETS = {"gaussian": ("zcdp", "gdp"), "discrete_gaussian": ("zcdp",), "laplace": ("pure",),
                 "discrete_laplace": ("pure",)}
"""The families (and targets) whose guarantee at fixed parameters is a function of one norm (the module)."""

_JOINT_METHOD = "joint sensitivity: the same noise on the stacked vector of every group's answers"


def _scaled(definition: str, p: dict, ratio: Fraction) -> dict:
    """The per-group target scaled by the (squared, for gdp) norm ratio, rounded up."""
    if definition == "gdp":
        return {"mu": _sqrt_above(ratio * written(p["mu"]) ** 2)}
    return {name: float_written_above(ratio * written(value)) for name, value in p.items()}


def joint_block(spec: Spec, query: CountingQuery | NumericQuery, space: SensitivitySpace, mechanism: Mechanism,
                groups: list[int]) -> tuple[dict | None, list[Check]]:
    """The whole release's guarantee from the exact sensitivity of the stacked per-group answers (the module).

    Parameters
    ----------
    query, space :
        The spec's compiled query and its per-group (person-level) sensitivity space.
    mechanism :
        The per-group mechanism (applied to every group with the same parameters).
    groups :
        The number of groups of each grouping column.

    Returns
    -------
    (block, checks)
        The ``joint`` block of the certificate's ``groups`` block (None where not derived, or where its
        check fails) and the family's privacy check on the joint space (empty where not derived).
    """
    definition = spec.privacy.definition
    if (spec.data.privacy_unit is None or len(groups) != 1 or definition not in JOINT_TARGETS.get(mechanism.family, ())
            or not isinstance(space.span, FullSpace)):
        return None, []
    count = groups[0]
    norms = grouped_norms(spec, query, count) if isinstance(count, int) and not isinstance(count, bool) else None
    per_group = space.l1 if definition == "pure" else space.l2_squared
    if norms is None or per_group == 0:
        return None, []
    l1, l2sq, linf, how = norms
    ratio = (l1 if definition == "pure" else l2sq) / per_group
    dimension = count * space.dimension
    joint_space = SensitivitySpace(dimension, FullSpace(dimension), l1, l2sq, linf, how, space.adjacency,
                                   complete=False)
    params = _scaled(definition, spec.privacy.parameters, ratio)
    lattice = getattr(mechanism, "lattice", None)
    if isinstance(lattice, RealLattice):  # integers N_j on the lattice: the stacked moves in units of g
        units = grouped_norms(spec, query, count, per_row=Fraction(lattice.row_shift))
        units_space = SensitivitySpace(count, FullSpace(count), *units, space.adjacency, complete=False)
        checks = mechanism.units_privacy_checks(units_space, Privacy(**{definition: params}))
        stated = f"in units of g ({units[3]}: l1 = {units[0]}, l2² = {units[1]})"
        checks = [replace(c, detail=f"{stated}: {c.detail}") for c in checks]
    else:
        stacked = registry()[mechanism.family].from_parameters(mechanism.parameters, joint_space)
        checks = stacked.privacy_checks(joint_space, Privacy(**{definition: params}))
    passed = all(c.passed for c in checks)
    check = Check("groups.joint", f"the whole release on the stacked vector ({count} groups × {space.dimension} "
                                  f"cells) at {definition} {params}: the family's own check on the joint sensitivity",
                  passed, "; ".join(c.detail for c in checks))
    block = {"dimension": dimension, "l1_exact": str(l1), "l2_squared_exact": str(l2sq), "linf_exact": str(linf),
             "method": how, "norm_ratio_exact": str(ratio), "guarantee": {"definition": definition, **params}}
    return (block if passed else None), [check]


def whole_release(spec: Spec, m: int, joint: dict | None) -> dict:
    """The whole release's guarantee: the m-fold composition, or the ``joint`` one where it is smaller."""
    composed = compose(spec, m)
    if joint is None:
        return composed
    guarantee = joint["guarantee"]
    name = next(iter(spec.privacy.parameters))  # the joint targets have one parameter
    if guarantee[name] < composed[name]:
        return {**guarantee, "method": _JOINT_METHOD}
    return composed
