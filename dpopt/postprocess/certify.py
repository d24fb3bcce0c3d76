"""Certify a post-processed table in exact integer arithmetic, independently of the solvers.

Every claim is re-computed from the published integers: whole counts, no negative cell,
C h = t row by row, every released coordinate equal to its cell sum, every parent cell
equal to the sum of its children. Python integers throughout (no overflow, no rounding).
"""

from __future__ import annotations

import numpy as np

from dpopt.core.checks import Check
from dpopt.postprocess.structure import Structure, exact_product

POSTPROCESSING_THEOREM = (
    "post-processing: any function of the release that does not read the confidential data "
    "keeps its guarantee (Dwork & Roth 2014, Prop. 2.1 for (ε, δ); Bun & Steinke 2016, Lemma 1.8 for "
    "zCDP; Dong, Roth & Su 2022, Prop. 2.8 for f-DP/GDP). The invariants it reads are published "
    "exactly and are in the scope of the guarantee."
)


def _whole(values) -> tuple[bool, np.ndarray]:
    a = np.asarray(values)
    if a.dtype.kind in "iu":
        return True, a.astype(np.int64)
    whole = bool(np.all(np.isfinite(a)) and np.array_equal(a, np.round(a)) and np.all(np.abs(a) < 2**53))
    return whole, (np.round(a).astype(np.int64) if whole else a)


def cell_checks(table, *, nonnegative: bool = True, integer: bool = True, prefix: str = "postprocess") -> list[Check]:
    """Whole numbers and no negative cell (exact)."""
    whole, h = _whole(table)
    checks: list[Check] = []
    if integer:
        checks.append(Check(f"{prefix}.integer", "every cell is a whole number (exact)", whole, f"{h.size} cells"))
    if nonnegative:
        low = (int(h.min()) if whole else float(np.min(h))) if h.size else 0
        checks.append(Check(f"{prefix}.nonnegative", "every cell ≥ 0 (exact)", bool(low >= 0), f"smallest cell {low}"))
    return checks


def table_checks(
    table, structure: Structure, values, answers=None, *, nonnegative: bool = True, integer: bool = True, prefix: str = "postprocess"
) -> list[Check]:
    """Checks of one table: integer, non-negative, invariants, released answers consistent."""
    whole, h = _whole(table)
    checks = cell_checks(table, nonnegative=nonnegative, integer=integer, prefix=prefix)
    if not whole:
        return checks
    t = np.asarray(values, dtype=object)
    got = exact_product(structure.constraints, h)
    bad = [i for i, (g, want) in enumerate(zip(got, t)) if g != want]
    checks.append(
        Check(
            f"{prefix}.invariants",
            "C·h = t row by row in Python integers",
            not bad and len(got) == len(t),
            f"{len(t)} invariant rows" + (f"; rows {bad[:5]} differ" if bad else " met exactly"),
        )
    )
    if answers is not None:
        sums = exact_product(structure.queries.astype(np.int64), h)
        ok_answers, a = _whole(answers)
        same = ok_answers and all(int(x) == int(y) for x, y in zip(sums, a))
        checks.append(
            Check(f"{prefix}.consistent", "every released number equals its cell sum A·h (exact)", bool(same),
                  f"{len(sums)} released numbers")
        )
    return checks


def hierarchy_checks(levels: list[np.ndarray], parents: list[np.ndarray], prefix: str = "hierarchy") -> list[Check]:
    """Every unit's table equals the sum of its children's tables, level by level (exact).

    Parameters
    ----------
    levels : list of int arrays (units_l × cells)
        The published tables, nation first.
    parents : list of int arrays
        ``parents[l]`` (units_{l+1},): the index of each unit's parent in level l.
    """
    checks = []
    for depth, (upper, lower, parent) in enumerate(zip(levels, levels[1:], parents)):
        ok_u, u = _whole(upper)
        ok_l, low = _whole(lower)
        sums = np.zeros(u.shape, dtype=object)
        if ok_u and ok_l:
            np.add.at(sums, np.asarray(parent), low.astype(object))
        same = ok_u and ok_l and bool(np.all(sums == u.astype(object)))
        checks.append(
            Check(
                f"{prefix}.level{depth + 1}_sums",
                "each parent cell equals the sum of its children's cells (Python integers)",
                same,
                f"{lower.shape[0]} units into {upper.shape[0]}",
            )
        )
    return checks


def unit_total_checks(tables: np.ndarray, totals, prefix: str) -> list[Check]:
    """Every unit's table sums to its published total (Python integers)."""
    ok, t = _whole(tables)
    same = ok and [sum(int(x) for x in row) for row in t.tolist()] == [int(v) for v in np.asarray(totals).tolist()]
    return [Check(f"{prefix}.unit_totals", "each unit's cells sum to its published total (Python integers)", bool(same),
                  f"{len(t)} units")]
