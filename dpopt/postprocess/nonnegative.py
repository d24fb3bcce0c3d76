r"""Step 2 of TopDown: the closest non-negative table meeting the same constraints.

.. math::

    \tilde h = \arg\min_{h \ge 0}\ \|L (y - A h)\|_2^2 \quad\text{s.t.}\quad E h = f

(L, E, f from :mod:`dpopt.postprocess.least_squares`): a convex quadratic program, solved
by cvxpy (Clarabel or OSQP). It is feasible whenever a non-negative table meets the
invariants, e.g. the confidential table. For many small problems of one shape — the
children of a parent cell by cell, equal weights; or one table under disjoint sums such as its
total — :func:`grouped_simplex_projection` gives the exact solution in closed form, vectorised.
"""

from __future__ import annotations

import numpy as np

from dpopt.errors import SolverError
from dpopt.optimize.solve import solve_convex
from dpopt.postprocess.least_squares import Metric, equality_system
from dpopt.postprocess.structure import Structure

FEASIBILITY_TOLERANCE = 1e-6
"""Largest constraint residual (relative to the table's size) accepted from the QP solver."""


def nonnegative_least_squares(noisy, structure: Structure, values, m: Metric) -> tuple[np.ndarray, str]:
    """h̃ ≥ 0 closest to y in the metric m under E h = f (see module), and the route taken.

    The solver's output is clipped at 0 and its constraint residual re-checked here; the
    integer step (:mod:`dpopt.postprocess.rounding`) then enforces the constraints exactly.

    Raises
    ------
    SolverError
        No non-negative table meets the invariants, or the solver's answer violates them.
    """
    y = np.nan_to_num(np.asarray(noisy, dtype=float).reshape(-1), nan=0.0)
    groups = _partition(structure, m)
    if groups is not None:  # isotropic, cell by cell, disjoint sums: a product of simplices
        out = np.maximum(y, 0.0)
        covered = groups >= 0
        out[covered] = grouped_simplex_projection(y[covered], groups[covered], np.asarray(values, dtype=float))
        return out, "closed form (simplex projection per disjoint sum)"
    import cvxpy as cp

    e, f = equality_system(structure, np.asarray(values), y, m)
    h = cp.Variable(structure.cells)
    constraints = [h >= 0] + ([e @ h == f] if e.shape[0] else [])
    objective = cp.Minimize(cp.sum_squares(m.whitening @ (y - structure.queries @ h)))
    problem = cp.Problem(objective, constraints)
    solve_convex(problem, program="non-negative least squares")
    if h.value is None:
        raise SolverError(f"non-negative least squares: no non-negative table meets the invariants ({problem.status})")
    out = np.maximum(np.asarray(h.value, dtype=float), 0.0)
    scale = 1.0 + float(np.abs(f).max(initial=0.0)) + float(np.abs(y).max(initial=0.0))
    if e.shape[0] and np.abs(e @ out - f).max() > FEASIBILITY_TOLERANCE * scale:
        raise SolverError("non-negative least squares: the solver's table does not meet the invariants")
    return out, "cvxpy QP (Clarabel)"


def _partition(structure: Structure, m: Metric) -> np.ndarray | None:
    r"""The group of each cell (−1: none) when the problem is a product of simplices, else None.

    That is: the table released cell by cell, invariants that are sums over disjoint sets of cells (e.g. the
    total, or one margin), and a metric M = LᵀL isotropic on the tables that meet them: with Q the orthogonal
    projector onto the span of the invariants' rows,

    .. math:: (I - Q)\,M = c\,(I - Q),\quad c > 0,\qquad (I - Q)\,U_0 = 0,

    so that on {C h = t} the objective (y − h)ᵀM(y − h) equals c‖y − h‖² plus a constant (write y − h =
    (I − Q)(y − h) + Q(y − h), Q h fixed by C h = t, and (I − Q) M Q = c(I − Q)Q = 0), and every noiseless
    direction U₀ is a combination of the invariants (its equation is C h = t's). Isotropic noise (M = cI, no
    U₀) is the first case; Gaussian noise projected off the total (Σ = σ²(I − 11ᵀ/n), U₀ = 1/√n, the
    ``projected_gaussian`` family under an exact total) the second.
    """
    c = structure.constraints
    n = structure.cells
    if structure.queries.shape != (n, n) or not np.array_equal(structure.queries, np.eye(n)):
        return None
    if c.size and (not np.isin(c, (0, 1)).all() or np.any(c.sum(axis=0) > 1)):
        return None
    groups = np.full(n, -1)
    for g, row in enumerate(c):
        groups[row == 1] = g
    if not _isotropic_off_invariants(m, groups, len(c)):
        return None
    return groups


def _isotropic_off_invariants(m: Metric, groups: np.ndarray, count: int) -> bool:
    """Whether (I − Q)M = c(I − Q) with c > 0 and (I − Q)U₀ = 0 (see :func:`_partition`), to 10⁻⁹ relative;
    Q = Σ_g 1_g1_gᵀ/|g| over the disjoint groups (cells of no group: none)."""
    n = groups.size
    w = m.whitening
    if w.shape[1] != n:
        return False
    q = np.zeros((n, n))
    for g in range(count):
        members = np.flatnonzero(groups == g)
        if members.size:
            q[np.ix_(members, members)] = 1.0 / members.size
    free = np.eye(n) - q
    rest = free @ (w.T @ w)
    trace = float(np.trace(free))
    if trace < 0.5:  # every cell is its own invariant: one table meets them, whatever the metric
        return True
    scale = float(np.trace(rest)) / trace
    tolerance = 1e-9 * max(abs(scale), float(np.abs(rest).max(initial=0.0)))
    return (scale > 0 and bool(np.abs(rest - scale * free).max(initial=0.0) <= tolerance)
            and bool(np.abs(free @ m.exact).max(initial=0.0) <= 1e-9))


def grouped_simplex_projection(noisy: np.ndarray, groups: np.ndarray, totals: np.ndarray) -> np.ndarray:
    r"""Euclidean projection onto {x ≥ 0 : Σ_{j∈g} x_j = p_g} for every group g at once.

    .. math:: x_j = \max(y_j - \theta_g, 0),\quad
              \theta_g = \frac{\sum_{i \le \rho} u_i - p_g}{\rho},\quad
              \rho = \max\{k : u_k > (\textstyle\sum_{i\le k} u_i - p_g)/k\}

    with u the group's entries sorted in decreasing order (Held, Wolfe & Crowder 1974;
    Duchi, Shalev-Shwartz, Singer & Chandra 2008, Fig. 1). One sort of all entries by
    (group, −value); no loop over groups. A group with p_g = 0 is set to 0.

    Parameters
    ----------
    noisy : array (n,)
    groups : int array (n,), values 0 … G − 1
    totals : array (G,), p_g ≥ 0
    """
    y = np.asarray(noisy, dtype=float)
    groups = np.asarray(groups)
    p = np.asarray(totals, dtype=float)
    if np.any(p < 0):
        raise ValueError("group totals must be non-negative")
    order = np.lexsort((-y, groups))
    g, u = groups[order], y[order]
    size = np.bincount(groups, minlength=len(p))
    start = np.concatenate([[0], np.cumsum(size)[:-1]])
    rank = np.arange(y.size) - start[g] + 1
    csum = np.cumsum(u)
    before = np.concatenate([[0.0], csum])[start][g]
    within = csum - before
    active = u - (within - p[g]) / rank > 0
    rho = np.bincount(g, weights=active, minlength=len(p)).astype(int)
    last = start + np.maximum(rho, 1) - 1
    theta = np.where(rho > 0, (within[last] - p) / np.maximum(rho, 1), np.inf)
    out = np.maximum(y - theta[groups], 0.0)
    return np.where(p[groups] > 0, out, 0.0)
