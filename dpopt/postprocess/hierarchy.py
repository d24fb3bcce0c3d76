r"""TopDown: post-process a geographic hierarchy level by level, each level summing to its parent.

Level 0 (the nation) is post-processed on its own (:func:`dpopt.postprocess.consistent_table`,
with its invariants). Then for each level, given the published integer tables h_p of the
level above, the tables of the children c of every parent p solve

.. math::

    \min_{x_c}\ \sum_c \|L (y_c - x_c)\|_2^2 \quad\text{s.t.}\quad \sum_{c \in p} x_c = h_p,

first without sign constraint (WLS), then with x ≥ 0 (NNLS), then rounded to integers that
still sum to h_p (controlled rounding) — the order of the Census TopDown algorithm (Abowd et
al. 2022, *The 2020 Census Disclosure Avoidance System TopDown Algorithm*, HDSR, §7).

When every unit's table is released cell by cell (A = I) and no direction is noiseless, the
WLS solution is the mean shift x_c = y_c + (h_p − Σ_c y_c)/k for *any* common metric (the
Lagrange conditions W(x_c − y_c) = λ give the same shift for every child), and the rounding
separates per (parent, cell) (largest remainders). With a diagonal covariance the NNLS
separates too (a simplex projection per (parent, cell)), so the whole level is vectorised; with
a correlated one the NNLS is one small QP per parent (cvxpy, optionally on Dask). Otherwise
(tables released through margins, noiseless directions) each parent's problem is solved
jointly by :func:`consistent_table`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from dpopt.core.checks import Check
from dpopt.errors import SolverError
from dpopt.optimize.solve import solve_convex
from dpopt.postprocess.certify import POSTPROCESSING_THEOREM, cell_checks, hierarchy_checks, unit_total_checks
from dpopt.postprocess.least_squares import grouped_sum_projection, metric
from dpopt.postprocess.nonnegative import FEASIBILITY_TOLERANCE, grouped_simplex_projection
from dpopt.postprocess.rounding import clean_zeros, round_grouped, round_two_way
from dpopt.postprocess.structure import Structure
from dpopt.postprocess.table import consistent_table
from dpopt.spec.models import Postprocess


@dataclass(frozen=True)
class TopDownResult:
    """The published tables of every level and the intermediate real-valued ones.

    Attributes
    ----------
    tables : list of numpy.ndarray
        Level l: (units_l × cells), int64 when integer; nation first.
    least_squares, nonnegative : list of numpy.ndarray
        The WLS and NNLS tables of each level, given the published level above.
    checks : list of Check
    method : dict
    """

    tables: list[np.ndarray]
    least_squares: list[np.ndarray] = field(repr=False)
    nonnegative: list[np.ndarray | None] = field(repr=False)
    checks: list[Check] = field(repr=False)
    method: dict = field(repr=False)

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)


def _table_query(structure: Structure) -> bool:
    n = structure.cells
    return structure.queries.shape == (n, n) and np.array_equal(structure.queries, np.eye(n))


def _diagonal(covariance: np.ndarray | None) -> bool:
    if covariance is None:
        return True
    c = np.asarray(covariance, dtype=float)
    d = np.diag(c)
    return bool(np.array_equal(c, np.diag(d)) and np.all(np.isfinite(d) & (d > 0)))


def children_level(
    noisy: np.ndarray,
    parent: np.ndarray,
    upper: np.ndarray,
    structure: Structure,
    covariance: np.ndarray | None,
    options: Postprocess,
    engine: str = "numpy",
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, str]:
    """One level of TopDown: (published, WLS, NNLS, route) for children given their parents' tables.

    Parameters
    ----------
    noisy : (n × d)
        The children's noisy tables.
    parent : int (n,)
        Index of each child's parent in ``upper``.
    upper : (P × m)
        The parents' published tables.
    engine : {'numpy', 'dask'}
        Where the per-parent problems run when the fast path does not apply.

    Raises
    ------
    SolverError
        A parent without children whose table is not zero, or a failed sub-problem.
    """
    n, m = noisy.shape[0], structure.cells
    upper = np.asarray(upper)
    counts = np.bincount(parent, minlength=upper.shape[0])
    if np.any((counts == 0) & np.any(upper != 0, axis=1)):
        raise SolverError("TopDown: a unit with a non-zero table has no child units")
    if (not _table_query(structure) or metric(covariance, structure.cells).exact.shape[1]
            or not np.all(np.isfinite(noisy))):  # margins, noiseless or unreleased coordinates: jointly
        return _per_parent(noisy, parent, upper, structure, covariance, options, engine)
    groups = (np.asarray(parent)[:, None] * m + np.arange(m)).ravel()
    totals = upper.reshape(-1)
    y = np.asarray(noisy, dtype=float).reshape(-1)
    ls = grouped_sum_projection(y, groups, totals).reshape(n, m)
    if not options.nonnegative:
        nn, route = None, "mean shift"
    elif _diagonal(covariance):
        nn, route = grouped_simplex_projection(y, groups, totals).reshape(n, m), "mean shift, simplex projection"
    else:
        whitening = metric(covariance, structure.cells).whitening
        nn = _nonnegative_per_parent(noisy, parent, upper, whitening, engine)
        route = f"mean shift, one cvxpy QP per parent ({engine})"
    estimate = (nn if nn is not None else ls).reshape(-1)
    if options.integer:
        out = round_grouped(clean_zeros(estimate), groups, totals.astype(np.int64)).reshape(n, m)
    else:
        out = estimate.reshape(n, m)
    return out, ls, nn, f"per (parent, cell): {route}, largest remainders"


def _parent_nnls(y: np.ndarray, total: np.ndarray, whitening: np.ndarray) -> np.ndarray:
    """min Σ_c ‖L(y_c − x_c)‖² over x ≥ 0 with Σ_c x_c = total (children as rows), by cvxpy."""
    import cvxpy as cp

    x = cp.Variable(y.shape)
    problem = cp.Problem(cp.Minimize(cp.sum_squares((y - x) @ whitening.T)), [x >= 0, cp.sum(x, axis=0) == total])
    solve_convex(problem, program="TopDown non-negative least squares")
    if x.value is None:
        raise SolverError(f"TopDown non-negative least squares: {problem.status}")
    out = np.maximum(np.asarray(x.value, dtype=float), 0.0)
    if np.abs(out.sum(axis=0) - total).max() > FEASIBILITY_TOLERANCE * (1.0 + float(np.abs(total).max(initial=0))):
        raise SolverError("TopDown non-negative least squares: the solver's tables do not sum to their parent")
    return out


def _nonnegative_per_parent(noisy, parent, upper, whitening, engine) -> np.ndarray:
    """The NNLS step for correlated noise: one small QP per parent (optionally on Dask)."""
    members = [np.nonzero(parent == p)[0] for p in range(upper.shape[0])]
    tasks = [(idx, noisy[idx], upper[p].astype(float)) for p, idx in enumerate(members) if idx.size]
    if engine == "dask":
        import dask

        solved = dask.compute(*[dask.delayed(_parent_nnls)(y, t, whitening) for _, y, t in tasks])
    else:
        solved = [_parent_nnls(y, t, whitening) for _, y, t in tasks]
    out = np.zeros(noisy.shape)
    for (idx, _, _), x in zip(tasks, solved):
        out[idx] = x
    return out


def _parent_problem(y_children: np.ndarray, total: np.ndarray, structure: Structure, covariance, options):
    k, m = y_children.shape[0], structure.cells
    joint = Structure(
        np.kron(np.eye(k), structure.queries),
        tuple(f"child{c}:{label}" for c in range(k) for label in structure.labels),
        np.tile(np.eye(m, dtype=np.int64), (1, k)),
        tuple(f"parent cell {j}" for j in range(m)),
        (k * m,),
    )
    cov = None if covariance is None else np.kron(np.eye(k), covariance)
    result = consistent_table(y_children.reshape(-1), joint, total, cov, options=options)
    return (
        result.table.reshape(k, m),
        result.least_squares.reshape(k, m),
        None if result.nonnegative is None else result.nonnegative.reshape(k, m),
    )


def _per_parent(noisy, parent, upper, structure, covariance, options, engine):
    n, m = noisy.shape[0], structure.cells
    members = [np.nonzero(parent == p)[0] for p in range(upper.shape[0])]
    tasks = [(idx, noisy[idx], upper[p]) for p, idx in enumerate(members) if idx.size]
    if engine == "dask":
        import dask

        solved = dask.compute(
            *[dask.delayed(_parent_problem)(y, t, structure, covariance, options) for _, y, t in tasks]
        )
    else:
        solved = [_parent_problem(y, t, structure, covariance, options) for _, y, t in tasks]
    out = np.zeros((n, m), dtype=np.int64 if options.integer else float)
    ls = np.zeros((n, m))
    nn = np.zeros((n, m)) if options.nonnegative else None
    for (idx, _, _), (table, wls, nnls) in zip(tasks, solved):
        out[idx], ls[idx] = table, wls
        if nn is not None:
            nn[idx] = nnls
    return out, ls, nn, f"one joint problem per parent ({engine}): WLS, NNLS (cvxpy), controlled rounding"


def two_way_projection(y: np.ndarray, rows: np.ndarray, columns: np.ndarray) -> np.ndarray:
    r"""Least squares (isotropic) of a k × m table y onto given row and column totals.

    .. math:: x_{cj} = y_{cj} + \frac{r_c - y_{c\cdot}}{m} + \frac{s_j - y_{\cdot j}}{k}
              - \frac{G - y_{\cdot\cdot}}{k m}

    (G = Σ r_c = Σ s_j): the orthogonal projection onto the affine set of tables with those
    margins (the classical two-way additive adjustment; it meets both margins by construction).
    """
    k, m = y.shape
    grand = float(np.sum(rows))
    return (y + ((rows - y.sum(axis=1)) / m)[:, None] + ((columns - y.sum(axis=0)) / k)[None, :]
            - (grand - y.sum()) / (k * m))


def _parent_with_totals(y, total, unit_totals, whitening, options):
    """One parent's children under both sums: cells to the parent's cells, each child to its total."""
    import cvxpy as cp

    isotropic = np.allclose(whitening, whitening[0, 0] * np.eye(whitening.shape[0]))
    if isotropic:
        ls = two_way_projection(y, unit_totals.astype(float), total.astype(float))
    else:
        ls = None
    estimate = ls
    if options.nonnegative or ls is None:
        x = cp.Variable(y.shape)
        constraints = [cp.sum(x, axis=0) == total, cp.sum(x, axis=1) == unit_totals]
        problem = cp.Problem(cp.Minimize(cp.sum_squares((y - x) @ whitening.T)),
                             constraints + ([x >= 0] if options.nonnegative else []))
        solve_convex(problem, program="TopDown with unit totals")
        if x.value is None:
            raise SolverError(f"TopDown with unit totals: no table meets the parent and the unit totals ({problem.status})")
        solved = np.asarray(x.value, dtype=float)
        if options.nonnegative:
            solved = np.maximum(solved, 0.0)
        ls = ls if ls is not None else solved
        estimate = solved if options.nonnegative else ls
    out = round_two_way(clean_zeros(estimate), unit_totals, total) if options.integer else estimate
    return out, ls, (estimate if options.nonnegative else None)


def children_with_totals(noisy, parent, upper, unit_totals, structure, covariance, options, engine="numpy"):
    """One level of TopDown when every unit's total is published exactly (an invariant).

    Per parent: the children's tables (rows) must sum to the parent's cells (columns) and each
    to its own total (rows): least squares (closed-form two-way projection when isotropic), NNLS
    (one cvxpy QP per parent), controlled rounding of a two-way table with both margins by
    min-cost flow (Cox & Ernst 1982).

    Raises
    ------
    SolverError
        The totals of the children of a parent do not add up to the parent's total.
    """
    if not _table_query(structure):
        raise SolverError("TopDown with unit totals needs every unit's table released cell by cell")
    totals = np.asarray(unit_totals, dtype=np.int64)
    sums = np.bincount(parent, weights=totals, minlength=upper.shape[0]).round().astype(np.int64)
    if np.any(sums != upper.sum(axis=1)):
        raise SolverError("TopDown: the unit totals of some children do not add up to their parent's total")
    whitening = metric(covariance, structure.cells).whitening
    members = [np.nonzero(parent == p)[0] for p in range(upper.shape[0])]
    tasks = [(idx, noisy[idx], upper[p], totals[idx]) for p, idx in enumerate(members) if idx.size]
    if engine == "dask":
        import dask

        solved = dask.compute(*[dask.delayed(_parent_with_totals)(y, t, u, whitening, options) for _, y, t, u in tasks])
    else:
        solved = [_parent_with_totals(y, t, u, whitening, options) for _, y, t, u in tasks]
    n, m = noisy.shape
    out = np.zeros((n, m), dtype=np.int64 if options.integer else float)
    ls = np.zeros((n, m))
    nn = np.zeros((n, m)) if options.nonnegative else None
    for (idx, _, _, _), (table, wls, nnls) in zip(tasks, solved):
        out[idx], ls[idx] = table, wls
        if nn is not None:
            nn[idx] = nnls
    return out, ls, nn, f"per parent ({engine}): two-way least squares, NNLS (cvxpy), min-cost-flow rounding"


def topdown(
    noisy_levels: list[np.ndarray],
    parents: list[np.ndarray],
    structure: Structure,
    nation_values=None,
    covariances: list[np.ndarray | None] | None = None,
    *,
    options: Postprocess = Postprocess(),
    engine: str = "numpy",
    unit_totals: list[np.ndarray] | None = None,
) -> TopDownResult:
    """Post-process the noisy tables of a hierarchy top-down (see module).

    Parameters
    ----------
    noisy_levels : list of (units_l × d) arrays
        Nation first (one unit), then each level's units.
    parents : list of int arrays
        ``parents[l]``: for each unit of level l + 1, its parent's index in level l.
    structure : Structure
        One unit's table: its queries and (for the nation) invariants.
    nation_values : array, optional
        The nation's invariant values (one per row of ``structure.constraints``).
    covariances : list, optional
        Each level's noise covariance (None: isotropic).
    unit_totals : list of int arrays, optional
        ``unit_totals[l]``: the exact total of every unit of level l + 1 (published invariants,
        e.g. population counts); each child's table then sums to it as well.

    Returns
    -------
    TopDownResult

    Examples
    --------
    >>> from dpopt.postprocess import table_structure
    >>> s = table_structure((2,))
    >>> r = topdown([np.array([[5.2, 3.9]]), np.array([[2.6, 2.1], [3.1, -0.4]])], [np.array([0, 0])], s)
    >>> r.tables[1].sum(axis=0).tolist() == r.tables[0][0].tolist()
    True
    """
    if len(parents) != len(noisy_levels) - 1:
        raise ValueError("give one parent index per level below the nation")
    if np.asarray(noisy_levels[0]).shape[0] != 1:
        raise ValueError("the first level is the nation: one unit")
    covariances = covariances or [None] * len(noisy_levels)
    nation = consistent_table(np.asarray(noisy_levels[0])[0], structure, nation_values, covariances[0], options=options)
    tables = [nation.table[None, :]]
    ls_levels = [nation.least_squares[None, :]]
    nn_levels = [None if nation.nonnegative is None else nation.nonnegative[None, :]]
    checks = list(nation.checks)
    routes = ["nation: " + "; ".join(nation.method["steps"])]
    for depth, (noisy, parent) in enumerate(zip(noisy_levels[1:], parents), start=1):
        y, parent = np.asarray(noisy, dtype=float), np.asarray(parent)
        if unit_totals is not None:
            out, ls, nn, route = children_with_totals(
                y, parent, tables[-1], unit_totals[depth - 1], structure, covariances[depth], options, engine
            )
            if options.integer:
                checks += unit_total_checks(out, unit_totals[depth - 1], f"level{depth}")
        else:
            out, ls, nn, route = children_level(y, parent, tables[-1], structure, covariances[depth], options, engine)
        tables.append(out)
        ls_levels.append(ls)
        nn_levels.append(nn)
        routes.append(f"level {depth}: {route}")
        checks += cell_checks(out, nonnegative=options.nonnegative, integer=options.integer, prefix=f"level{depth}")
    if options.integer:
        checks += hierarchy_checks(tables, parents)
    method = {"algorithm": "TopDown (Abowd et al. 2022): each level WLS, NNLS, controlled rounding given its parent",
              "levels": routes, "preserves_guarantee": POSTPROCESSING_THEOREM, "nonnegative": options.nonnegative,
              "integer": options.integer}
    failed = [c.claim for c in checks if not c.passed]
    if failed:
        raise SolverError("TopDown failed its own checks: " + ", ".join(failed))
    return TopDownResult(tables, ls_levels, nn_levels, checks, method)

