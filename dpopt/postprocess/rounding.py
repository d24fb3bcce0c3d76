r"""Step 3 of TopDown: controlled rounding to whole counts that keep every published sum.

Given a real table x̂ ≥ 0 with C x̂ = t (t integral), find an integer table x with
C x = t and |x_i − x̂_i| < 1 for every cell, closest to x̂ in ℓ₁. Writing x = ⌊x̂⌋ + b with
b ∈ {0, 1} (b = 0 where x̂ is already whole) the ℓ₁ distance is Σ f_i + Σ (1 − 2f_i) b_i
(f the fractional parts), so the problem is the 0/1 linear program

.. math:: \min_b \sum_i (1 - 2 f_i)\, b_i \quad\text{s.t.}\quad C_F b = t - C \lfloor \hat x \rfloor.

* one sum per group (a total, a single margin, children summing to their parent cell):
  round up the r_g cells with the largest fractional parts (largest remainders; exact and
  optimal, vectorised);
* a two-way table with both margins: a min-cost flow from rows to columns (Cox & Ernst
  1982, controlled rounding; the constraint matrix is totally unimodular, so the network
  simplex returns an integral optimum whenever a real solution exists), with networkx;
* otherwise an integer program (scipy.optimize.milp, HiGHS); it can be infeasible for
  structures that are not totally unimodular (e.g. three two-way margins of a 3-way table),
  and says so.

The result is certified by :mod:`dpopt.postprocess.certify`, never by the solver's status.
"""

from __future__ import annotations

import numpy as np

from dpopt.errors import SolverError
from dpopt.postprocess.structure import Structure, exact_product, margin_rows

COST_SCALE = 1_000_000
"""Costs 1 − 2f are scaled to integers for the network simplex (exact integer pivots)."""


def clean_zeros(estimate, tolerance: float = 1e-9) -> np.ndarray:
    """The estimate with solver round-off below 0 (|x| < tolerance) set to 0, so that its floor is 0."""
    x = np.asarray(estimate, dtype=float).copy()
    x[(x < 0) & (x > -tolerance)] = 0.0
    return x


def _split(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    base = np.floor(x)
    return base.astype(np.int64), x - base


def round_grouped(estimate, groups, totals) -> np.ndarray:
    """Largest-remainder rounding of every group to its integer total, vectorised.

    Parameters
    ----------
    estimate : array (n,), ≥ 0, Σ_{j∈g} estimate_j = totals_g up to rounding error
    groups : int array (n,), values 0 … G − 1
    totals : int array (G,)

    Raises
    ------
    SolverError
        A group's total cannot be reached by rounding its cells up or down.
    """
    x = np.asarray(estimate, dtype=float)
    groups = np.asarray(groups)
    base, frac = _split(x)
    t = np.asarray(totals, dtype=np.int64)
    need = t - np.bincount(groups, weights=base, minlength=len(t)).round().astype(np.int64)
    order = np.lexsort((-frac, groups))
    size = np.bincount(groups, minlength=len(t))
    start = np.concatenate([[0], np.cumsum(size)[:-1]])
    rank = np.empty(x.size, dtype=np.int64)
    rank[order] = np.arange(x.size) - start[groups[order]]
    fractional = np.bincount(groups, weights=frac > 0, minlength=len(t))
    if np.any(need < 0) or np.any(need > fractional):
        raise SolverError("controlled rounding: a group total is not within the floors and ceilings of its cells")
    return base + ((rank < need[groups]) & (frac > 0))


def round_two_way(estimate: np.ndarray, rows: np.ndarray, columns: np.ndarray) -> np.ndarray:
    """Controlled rounding of an r × c table to integer row and column totals (min-cost flow).

    Row node i supplies r_i = rows_i − Σ_j ⌊x̂_ij⌋ units, column node j demands c_j; an arc
    i → j of capacity 1 and cost ⌊COST_SCALE (1 − 2 f_ij)⌉ exists where f_ij > 0.

    Raises
    ------
    SolverError
        No rounding meets the totals (they do not fit the table's floors and ceilings).
    """
    import networkx as nx

    base, frac = _split(np.asarray(estimate, dtype=float))
    supply = np.asarray(rows, dtype=np.int64) - base.sum(axis=1)
    demand = np.asarray(columns, dtype=np.int64) - base.sum(axis=0)
    if supply.sum() != demand.sum() or np.any(supply < 0) or np.any(demand < 0):
        raise SolverError("controlled rounding: the margins do not fit the table's floors")
    graph = nx.DiGraph()
    for i, s in enumerate(supply):
        graph.add_node(("r", i), demand=-int(s))
    for j, d in enumerate(demand):
        graph.add_node(("c", j), demand=int(d))
    for i, j in zip(*np.nonzero(frac > 0)):
        graph.add_edge(("r", int(i)), ("c", int(j)), capacity=1, weight=int(round(COST_SCALE * (1 - 2 * frac[i, j]))))
    try:
        flow = nx.network_simplex(graph)[1]
    except nx.NetworkXUnfeasible:
        raise SolverError("controlled rounding: no rounding of the table meets both margins") from None
    out = base.copy()
    for (side, i), targets in flow.items():
        if side == "r":
            for (_, j), units in targets.items():
                out[i, j] += units
    return out


def round_integer_program(estimate, constraints: np.ndarray, values) -> np.ndarray:
    """The 0/1 program of the module docstring, by scipy.optimize.milp (HiGHS).

    Raises
    ------
    SolverError
        No rounding within 1 of every cell meets the constraints.
    """
    base, frac = _split(np.asarray(estimate, dtype=float))
    c = np.asarray(constraints, dtype=np.int64)
    free = np.nonzero(frac > 0)[0]
    target = np.asarray(values, dtype=object) - exact_product(c, base)
    if free.size == 0:
        if any(target):
            raise SolverError("controlled rounding: the whole-number table misses an invariant")
        return base
    rhs = np.asarray(target, dtype=float)
    from scipy.optimize import Bounds, LinearConstraint, milp  # imported where used (0.2 s: a report imports this module)

    result = milp(
        1 - 2 * frac[free],
        constraints=[LinearConstraint(c[:, free].astype(float), rhs, rhs)] if c.shape[0] else [],
        integrality=np.ones(free.size),
        bounds=Bounds(0, 1),
    )
    if result.x is None:
        raise SolverError(f"controlled rounding: no integer table within 1 of every cell meets the invariants ({result.message})")
    out = base.copy()
    out[free] += np.round(result.x).astype(np.int64)
    return out


def controlled_round(estimate, structure: Structure, values) -> tuple[np.ndarray, str]:
    """Round a table meeting C x̂ = t to an integer one meeting C x = t; returns (x, route).

    Routes: ``nearest`` (no constraint: |x − x̂| ≤ 1/2), ``largest remainders`` (the total
    only), ``min-cost flow`` (a two-way table with both margins), ``integer program``.
    """
    x = clean_zeros(estimate)
    c = structure.constraints
    if c.shape[0] == 0:
        return np.rint(x).astype(np.int64), "nearest integer (no invariant)"
    values = np.asarray(values, dtype=np.int64)
    if c.shape[0] == 1 and np.all(c == 1):
        return round_grouped(x, np.zeros(x.size, dtype=np.int64), values), "largest remainders (the total)"
    if len(structure.shape) == 2 and set(structure.margins) == {(0,), (1,)} and _margins_only(structure):
        r, k = structure.shape
        table = x.reshape(r, k)
        rows = _margin_values(structure, values, (0,), r)
        columns = _margin_values(structure, values, (1,), k)
        return round_two_way(table, rows, columns).reshape(-1), "min-cost flow (networkx network simplex)"
    return round_integer_program(x, c, values), "integer program (scipy.optimize.milp, HiGHS)"


def _margins_only(structure: Structure) -> bool:
    """C holds the total and the two one-way margins only (no linear rows)."""
    r, k = structure.shape
    return structure.constraints.shape[0] in (r + k, r + k + 1)


def _margin_values(structure: Structure, values: np.ndarray, axes: tuple[int, ...], size: int) -> np.ndarray:
    """The values of the margin over ``axes``, read off the rows of C that are that margin."""
    rows = margin_rows(structure.shape, axes)
    out = np.empty(size, dtype=np.int64)
    for i, row in enumerate(rows):
        match = np.nonzero(np.all(structure.constraints == row, axis=1))[0]
        if match.size == 0:
            raise SolverError(f"controlled rounding: margin {axes} row {i} is not among the invariants")
        out[i] = values[match[0]]
    return out
