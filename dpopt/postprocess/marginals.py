r"""Consistent, non-negative, integer marginal tables of a marginal workload, in marginal space.

A ``marginals`` release y = (y_S)_S (one noisy table per attribute set S of the workload
:math:`W = [M_S]_S`, :mod:`dpopt.domain.marginal_algebra`) is post-processed without the
histogram of :math:`N = \prod_k n_k` cells:

1. **Projection** onto the closed convex set

   .. math:: C = \{\mu \in \mathbb R^d : \mu \ge 0,\ M^{S}_{U}\mu_S = M^{S'}_{U}\mu_{S'}
             \text{ for all } S, S' \text{ of the workload},\ U = S \cap S'\}

   (every table non-negative; every two tables agree on the marginal of the attributes they
   share), in the Euclidean metric of the released cells:
   :math:`\hat\mu = \arg\min_{\mu\in C}\tfrac12\sum_S\|\mu_S - y_S\|_2^2`, a convex QP with d
   variables and sparse equality constraints, solved by Clarabel (interior point) with each shared
   margin a variable of its own (:func:`hub_projection`; through cvxpy in the pairwise form when that
   does not solve).
   Tables that agree on every pairwise intersection have well-defined ANOVA components
   :math:`c_T` for every T of the workload's closure (a T-component is read off the
   T-marginal of any S ⊇ T), so they are the marginals :math:`W x` of one real table x
   (:meth:`~dpopt.domain.marginal_algebra.MarginalWorkload.from_components`): C is
   :math:`\mathrm{range}(W) \cap \mathbb R^d_{\ge 0}`, the *local* polytope (scaled). It contains
   the marginals of every dataset, and the Euclidean projection onto a closed convex set is
   non-expansive, so for the true marginals :math:`\mu^\star = W h \in C`,
   :math:`\|\hat\mu - \mu^\star\|_2 \le \|y - \mu^\star\|_2` for **every** release, not only on
   average: the projection never increases the l2 error the design minimised.

   What is **not** guaranteed: that a non-negative table h ≥ 0 (a dataset) has the marginals
   :math:`\hat\mu` — the marginal polytope :math:`\{W h: h \ge 0\}` is smaller than C when the
   workload's sets are not a junction tree (e.g. the three two-way margins of a 3-way table);
   for a junction tree (a decomposable workload, such as {A,B}, {B,C}) the two coincide.

2. **Consistent rounding**: integer tables z with the same pairwise agreement (exactly, in
   integers) and |z − μ̂| < 1 per cell, closest to μ̂ in l1: with z = ⌊μ̂⌋ + b, b ∈ {0, 1},
   the 0/1 program :math:`\min \sum(1 - 2f)b` subject to the agreement equations (f the
   fractional parts; scipy.optimize.milp, HiGHS). Its LP relaxation is feasible (b = f), but
   the constraint matrix is not totally unimodular when tables share more than one attribute
   set, so an integer point may not exist; then the rounding drops |z − μ̂| < 1 and solves
   the l1 program :math:`\min\sum|z - \hat\mu|` over integer z ≥ 0 with the same equations
   (always feasible: z = 0 meets them), and the route says so.

   Tables of one or two attributes over more than :data:`TWO_STAGE_CELLS` cells (e.g. every two-way
   marginal of adult, 148,137 cells, where HiGHS reached its time limit with a poor point) are rounded in
   two stages instead (:func:`two_stage_rounding`): each shared one-way margin by largest remainders to
   the rounded total, then each two-way table alone to those margins, an LP whose constraint matrix (row
   and column sums) is totally unimodular, so its optimal vertex is whole (Bacharach, "Matrix rounding
   problems", Management Science 12(9), 1966: such a rounding always exists). Not the joint optimum in
   general; on adult its l1 objective beat the time-limited joint program's.

Components the mechanism releases without noise (the grand total under replace-one, the
components inside invariant margins) are kept: the marginal of y over such a set is a whole
number per cell (up to floating-point error), and the projection and the rounding keep it
exactly.

Every claim of the output is re-checked in Python integers by :func:`marginal_checks`,
never taken from a solver's status.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np
from scipy import sparse

from dpopt.core.checks import Check
from dpopt.domain.marginal_algebra import MarginalAlgebra, MarginalWorkload, Subset
from dpopt.errors import SolverError, UnsupportedSpecError
from dpopt.optimize.solve import solve_convex
from dpopt.postprocess.certify import POSTPROCESSING_THEOREM
from dpopt.postprocess.table import PostprocessResult
from dpopt.spec.models import Postprocess

DENSE_CELLS = 10_000
"""Histograms up to this many cells are estimated whole (:mod:`dpopt.postprocess.table`); above, in marginal space."""

GUARANTEES = ("the published tables are whole, non-negative counts, and every two tables have exactly the same "
              "marginal over the attributes they share (so they are the marginals of one real-valued table, and "
              "share one grand total); not guaranteed: that one non-negative table (a dataset) has all of them")
"""What the marginal-space post-processing guarantees, in the certificate's words."""

ERROR_BOUND = ("the projection is non-expansive and the true tables lie in the set projected on, so its l2 error "
               "is at most the release's, for every release (not simulated)")
"""The error statement of the projection (module docstring, step 1)."""

ROUNDING_CELLS = 1000
"""The most cells the consistent rounding of marginals that share two attributes or more takes on: integer tables
that agree on shared two-way (or larger) margins are NP-hard to find in general, and HiGHS did not finish on 2,036
cells (5 attributes, every three-way marginal) in 2 minutes, while 580 cells (4 attributes) took 0.5 s."""

TWO_STAGE_CELLS = 20_000
"""Above this many cells, tables of at most two attributes are rounded in two stages (module docstring)."""

HUB_TOLERANCE = 1e-10
"""Clarabel's gap and feasibility tolerances in the shared-margin form (defaults 1e-8): its objective omits the
constant ½‖y‖², so the default relative gap let adult's all-2-way optimum sit 2·10⁻⁶ above the cvxpy form's; at
1e-10 the two agree to 2·10⁻¹⁰ (35 s against 66 s CPU)."""

ROUNDING_TIME_LIMIT = 120.0
"""Seconds each integer program of the consistent rounding may run (HiGHS ``time_limit``)."""

EXACT_TOLERANCE = 1e-6
"""Largest distance of a noise-free marginal of the release from a whole number (float round-off)."""


def shared_sets(workload: MarginalWorkload) -> tuple[Subset, ...]:
    """Every intersection S ∩ S' of two different sets of the workload (by size, then order)."""
    found = {tuple(sorted(set(s) & set(t))) for s, t in itertools.combinations(workload.sets, 2)}
    return tuple(sorted(found, key=lambda u: (len(u), u)))


def margin_matrix(algebra: MarginalAlgebra, s: Subset, u: Subset) -> sparse.csr_matrix:
    """The 0/1 matrix (∏_{U} n_k × ∏_{S} n_k) that sums an s-table (axes in increasing attribute
    order, row-major) onto its u-marginal (u ⊆ s)."""
    size = algebra.size(s)
    coords = np.unravel_index(np.arange(size), algebra.table_shape(s)) if s else ()
    rows = (np.ravel_multi_index([coords[s.index(k)] for k in u], algebra.table_shape(u)) if u
            else np.zeros(size, dtype=np.int64))
    return sparse.csr_matrix((np.ones(size), (rows, np.arange(size))), shape=(algebra.size(u), size))


def _block(workload: MarginalWorkload, i: int, matrix: sparse.csr_matrix) -> sparse.csr_matrix:
    """``matrix`` (acting on block i's table) as a map on the whole released vector (in laid-out
    block order: the block's own attribute order, first listed slowest)."""
    s, block = workload.sets[i], workload.blocks[i]
    size = workload.algebra.size(s)
    laid = np.arange(size).reshape(workload.algebra.table_shape(tuple(block)))
    to_sorted = np.moveaxis(laid, list(np.argsort(block)), list(range(len(s)))).reshape(-1)
    columns = workload.offsets[i] + to_sorted
    coo = matrix.tocoo()
    return sparse.csr_matrix((coo.data, (coo.row, columns[coo.col])), shape=(matrix.shape[0], workload.dimension))


def agreement_matrix(workload: MarginalWorkload) -> sparse.csr_matrix:
    r"""K (integer entries 0, ±1) with K μ = 0 exactly when every two tables agree on their shared
    attributes: for each U of :func:`shared_sets` and the sets :math:`S_0, S_1, \dots \supseteq U`,
    the rows :math:`M^{S_i}_U \mu_{S_i} - M^{S_0}_U \mu_{S_0}`."""
    rows = []
    for u in shared_sets(workload):
        holders = [i for i, s in enumerate(workload.sets) if set(u) <= set(s)]
        first = _block(workload, holders[0], margin_matrix(workload.algebra, workload.sets[holders[0]], u))
        rows += [_block(workload, i, margin_matrix(workload.algebra, workload.sets[i], u)) - first
                 for i in holders[1:]]
    if not rows:
        return sparse.csr_matrix((0, workload.dimension))
    return sparse.vstack(rows).tocsr()


@dataclass(frozen=True)
class ExactMargins:
    """Marginals the release states exactly (noise-free components), kept by every step.

    Attributes
    ----------
    matrix : scipy.sparse.csr_matrix
        E: for each noise-free set U, its marginal read off the first table S ⊇ U.
    values : numpy.ndarray of int64
        t = E y rounded (each within :data:`EXACT_TOLERANCE` of a whole number).
    sets : tuple of Subset
    """

    matrix: sparse.csr_matrix = field(repr=False)
    values: np.ndarray
    sets: tuple[Subset, ...]


def exact_margins(workload: MarginalWorkload, noisy: np.ndarray, sets: tuple[Subset, ...],
                  total: int | None = None) -> ExactMargins:
    """The whole-number marginals of ``noisy`` over the noise-free ``sets`` (each inside a workload set),
    and the grand total ``total`` when it is public.

    Raises
    ------
    SolverError
        A noise-free marginal of the release is not a whole number (the release is not this
        mechanism's).
    """
    blocks, kept = [], []
    for u in sets:
        holders = [i for i, s in enumerate(workload.sets) if set(u) <= set(s)]
        if holders:
            blocks.append(_block(workload, holders[0], margin_matrix(workload.algebra, workload.sets[holders[0]], u)))
            kept.append(u)
    if not blocks and total is None:
        return ExactMargins(sparse.csr_matrix((0, workload.dimension)), np.zeros(0, dtype=np.int64), ())
    t = np.zeros(0)
    if blocks:
        raw = sparse.vstack(blocks).tocsr() @ np.asarray(noisy, dtype=float)
        t = np.round(raw)
        if np.any(np.abs(raw - t) > EXACT_TOLERANCE * np.maximum(1.0, np.abs(raw))):
            raise SolverError("consistent marginals: a marginal the mechanism releases without noise is not a whole "
                              "number")
    if total is not None and () not in kept:
        blocks.append(_block(workload, 0, margin_matrix(workload.algebra, workload.sets[0], ())))
        kept.append(())
        t = np.append(t, total)
    return ExactMargins(sparse.vstack(blocks).tocsr(), t.astype(np.int64), tuple(kept))


def nonnegative_projection(workload: MarginalWorkload, noisy, exact: ExactMargins | None = None) -> np.ndarray:
    """μ̂ = argmin ½‖μ − y‖² over non-negative tables that agree on shared attributes (module step 1).

    Solved in the shared-margin form (:func:`hub_projection`) when Clarabel reports it solved there, else as
    written through cvxpy (the same program). The solver's output is clipped at 0; its agreement residual is
    left to the rounding and the checks.

    Raises
    ------
    SolverError
        The QP failed (e.g. invariant margins that no non-negative tables meet).
    """
    y = np.nan_to_num(np.asarray(noisy, dtype=float).reshape(-1), nan=0.0)
    direct = hub_projection(workload, y, exact)
    if direct is not None:
        return direct
    import cvxpy as cp

    k = agreement_matrix(workload)
    mu = cp.Variable(workload.dimension)
    constraints = [mu >= 0]
    if k.shape[0]:
        constraints.append(k @ mu == 0)
    if exact is not None and exact.matrix.shape[0]:
        constraints.append(exact.matrix @ mu == exact.values.astype(float))
    problem = cp.Problem(cp.Minimize(0.5 * cp.sum_squares(mu - y)), constraints)
    solve_convex(problem, program="consistent non-negative marginals")
    if mu.value is None:
        raise SolverError(f"consistent non-negative marginals: no solution ({problem.status})")
    return np.maximum(np.asarray(mu.value, dtype=float), 0.0)


def hub_sets(workload: MarginalWorkload) -> tuple[Subset, ...]:
    """The shared sets the shared-margin form states: :func:`shared_sets`, less the empty set when it is implied
    (every two tables joined by a chain of tables sharing a non-empty set: each link ties their grand totals)."""
    sets = shared_sets(workload)
    if () not in sets:
        return sets
    parent = list(range(len(workload.sets)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for s, t in itertools.combinations(range(len(workload.sets)), 2):
        if set(workload.sets[s]) & set(workload.sets[t]):
            parent[root(s)] = root(t)
    joined = len({root(i) for i in range(len(workload.sets))}) == 1
    return tuple(u for u in sets if u or not joined)


def hub_projection(workload: MarginalWorkload, y: np.ndarray, exact: ExactMargins | None = None) -> np.ndarray | None:
    r"""The projection of :func:`nonnegative_projection` with each shared margin a variable of its own.

    Variables μ (the tables) and :math:`m_U` (one table per shared set U of :func:`hub_sets`); the constraints
    :math:`M^S_U \mu_S = m_U` for every S ⊇ U, μ ≥ 0, and the noise-free margins. The feasible μ are those of
    :func:`agreement_matrix`'s form (two tables agree on U exactly when both equal :math:`m_U`), the objective
    is the same, so the optimum is. What changes is the sparsity of the interior point's linear systems: a
    table's rows meet only its own cells and :math:`m_U`, where the pairwise form ties every table to the first
    holder of U. On every two-way marginal of adult (148,137 cells): 35 s CPU against 66 s for the pairwise form
    through cvxpy, objectives equal to 2·10⁻¹⁰. Clarabel called directly, tolerances :data:`HUB_TOLERANCE`;
    None unless its status is ``Solved`` (the caller then solves the pairwise form).
    """
    import clarabel
    from scipy import sparse as sp

    d = workload.dimension
    sets = hub_sets(workload)
    if not sets:
        return None
    hub_offsets, size = {}, 0
    for u in sets:
        hub_offsets[u] = size
        size += workload.algebra.size(u)
    rows = []
    for u in sets:
        for i, s in enumerate(workload.sets):
            if set(u) <= set(s):
                margin = _block(workload, i, margin_matrix(workload.algebra, s, u))
                hub = sp.csr_matrix((-np.ones(margin.shape[0]), (np.arange(margin.shape[0]),
                                                                 hub_offsets[u] + np.arange(margin.shape[0]))),
                                    shape=(margin.shape[0], size))
                rows.append(sp.hstack([margin, hub]))
    values = [np.zeros(sum(r.shape[0] for r in rows))]
    if exact is not None and exact.matrix.shape[0]:
        rows.append(sp.hstack([exact.matrix, sp.csr_matrix((exact.matrix.shape[0], size))]))
        values.append(exact.values.astype(float))
    equalities = sp.vstack(rows).tocsc()
    a = sp.vstack([equalities, sp.hstack([-sp.identity(d), sp.csr_matrix((d, size))])]).tocsc()
    b = np.concatenate(values + [np.zeros(d)])
    p = sp.block_diag([sp.identity(d), sp.csc_matrix((size, size))]).tocsc()
    q = np.concatenate([-y, np.zeros(size)])
    settings = clarabel.DefaultSettings()
    settings.verbose = False
    settings.tol_gap_abs = settings.tol_gap_rel = settings.tol_feas = HUB_TOLERANCE
    cones = [clarabel.ZeroConeT(equalities.shape[0]), clarabel.NonnegativeConeT(d)]
    solution = clarabel.DefaultSolver(p, q, a, b, cones, settings).solve()
    if solution.status != clarabel.SolverStatus.Solved:
        return None
    return np.maximum(np.asarray(solution.x, dtype=float)[:d], 0.0)


def consistent_rounding(workload: MarginalWorkload, estimate, exact: ExactMargins | None = None) -> tuple[np.ndarray, str]:
    """Integer tables agreeing exactly on shared attributes, closest to ``estimate`` in l1 (module step 2).

    Returns
    -------
    (z, route) : (int64 array (d,), str)

    Raises
    ------
    SolverError
        Neither integer program found a solution.
    """
    x = np.asarray(estimate, dtype=float).copy()
    x[(x < 0) & (x > -1e-9)] = 0.0
    base = np.floor(x)
    frac = x - base
    k = agreement_matrix(workload)
    e = exact.matrix if exact is not None else sparse.csr_matrix((0, workload.dimension))
    t = exact.values if exact is not None else np.zeros(0)
    a = sparse.vstack([k, e]).tocsr()
    rhs = np.concatenate([np.zeros(k.shape[0]), np.asarray(t, dtype=float)]) - a @ base
    free = np.nonzero(frac > 0)[0]
    if free.size == 0 and np.all(rhs == 0):
        return base.astype(np.int64), "already whole numbers"
    if workload.dimension > TWO_STAGE_CELLS:
        staged = two_stage_rounding(workload, x, exact)
        if staged is not None:
            return staged, ("two stages: shared one-way margins by largest remainders, then each two-way table "
                            "by a totally unimodular LP (|z − μ̂| < 1 per cell; scipy.optimize.linprog, HiGHS)")
    from scipy.optimize import Bounds, LinearConstraint, milp  # imported where used: a report need not

    constraints = [LinearConstraint(a[:, free], rhs, rhs)] if a.shape[0] else []
    result = milp(1 - 2 * frac[free], constraints=constraints, integrality=np.ones(free.size), bounds=Bounds(0, 1),
                  options={"time_limit": ROUNDING_TIME_LIMIT})
    if result.x is not None:
        out = base.copy()
        out[free] += np.round(result.x)
        return out.astype(np.int64), "0/1 integer program (|z − μ̂| < 1 per cell; scipy.optimize.milp, HiGHS)"
    return _l1_rounding(x, a, np.concatenate([np.zeros(k.shape[0]), np.asarray(t, dtype=float)]))


def largest_remainder(values: np.ndarray, total: int) -> np.ndarray:
    """Whole numbers summing to ``total``, each the floor or the ceiling of its value (``total`` within the
    values' floors' sum and that sum plus their count): the floors, plus one on the largest remainders."""
    floor = np.floor(values)
    out = floor.astype(np.int64)
    out[np.argsort(-(values - floor), kind="stable")[:total - int(out.sum())]] += 1
    return out


def two_stage_rounding(workload: MarginalWorkload, x: np.ndarray, exact: ExactMargins | None = None
                       ) -> np.ndarray | None:
    """Consistent whole tables for a workload of one- and two-attribute tables (module docstring, step 2).

    Stage 1: the grand total rounded (or the noise-free one), each attribute's one-way margin (read off the
    first table holding it) by :func:`largest_remainder` to it. Stage 2: a one-way table is its margin; a
    two-way table is ⌊μ̂⌋ + b with b ∈ [0, 1] (0 where μ̂ is whole) minimising Σ(1 − 2f) b subject to its row
    and column sums equal to the stage-1 margins, solved as an LP (a transportation polytope: its vertices
    are whole). None when the workload or its noise-free margins are of another shape, or an LP has no
    whole solution (the caller then solves the joint program).
    """
    from scipy.optimize import linprog

    sets = workload.sets
    free_sets = exact.sets if exact is not None else ()
    if any(len(s) > 2 for s in sets) or any(len(u) > 0 for u in free_sets):
        return None
    tables = workload.tables(x)
    total = int(exact.values[list(free_sets).index(())]) if () in free_sets else int(round(float(tables[0].sum())))
    margins: dict[int, np.ndarray] = {}
    for s, table in zip(sets, tables):
        for axis, k in enumerate(s):
            if k not in margins:
                others = tuple(a for a in range(len(s)) if a != axis)
                values = table.sum(axis=others) if others else table
                if not int(np.floor(values).sum()) <= total <= int(np.floor(values).sum()) + values.size:
                    return None
                margins[k] = largest_remainder(values, total)
    out = []
    for s, table in zip(sets, tables):
        if len(s) == 1:
            out.append(margins[s[0]].astype(float))
            continue
        if len(s) == 0:
            return None
        base = np.floor(table)
        frac = table - base
        rows, columns = table.shape
        a = sparse.vstack([sparse.kron(sparse.identity(rows), np.ones((1, columns))),
                           sparse.kron(np.ones((1, rows)), sparse.identity(columns))]).tocsr()
        b = np.concatenate([margins[s[0]] - base.sum(axis=1), margins[s[1]] - base.sum(axis=0)])
        upper = (frac.reshape(-1) > 0).astype(float)
        result = linprog((1 - 2 * frac).reshape(-1), A_eq=a, b_eq=b, bounds=np.stack([np.zeros(upper.size), upper], 1),
                         method="highs")
        if result.status != 0 or np.abs(result.x - np.round(result.x)).max() > 1e-6:
            return None
        out.append(base + np.round(result.x).reshape(table.shape))
    return np.round(workload.vector(out)).astype(np.int64)


def _l1_rounding(x: np.ndarray, a: sparse.csr_matrix, values: np.ndarray) -> tuple[np.ndarray, str]:
    """min Σ|z − x| over integer z ≥ 0 with A z = values: variables (z, p, q), z − p + q = x, p, q ≥ 0."""
    from scipy.optimize import Bounds, LinearConstraint, milp

    d = x.size
    eye = sparse.identity(d, format="csr")
    zero = sparse.csr_matrix((a.shape[0], d))
    constraints = [LinearConstraint(sparse.hstack([eye, -eye, eye]).tocsr(), x, x)]
    if a.shape[0]:
        constraints.append(LinearConstraint(sparse.hstack([a, zero, zero]).tocsr(), values, values))
    cost = np.concatenate([np.zeros(d), np.ones(2 * d)])
    integrality = np.concatenate([np.ones(d), np.zeros(2 * d)])
    result = milp(cost, constraints=constraints, integrality=integrality, bounds=Bounds(0, np.inf),
                  options={"time_limit": ROUNDING_TIME_LIMIT})
    if result.x is None:
        raise SolverError(f"consistent rounding: no integer tables meet the agreement equations ({result.message})")
    return np.round(result.x[:d]).astype(np.int64), ("l1 integer program (no 0/1 rounding within 1 of every cell "
                                                     "exists; scipy.optimize.milp, HiGHS)")


def marginal_checks(workload: MarginalWorkload, tables, exact: ExactMargins | None = None, *,
                    nonnegative: bool = True, integer: bool = True, consistent: bool = True,
                    prefix: str = "postprocess") -> list[Check]:
    """Exact checks of published marginal tables: whole numbers, none negative, agreement on every
    shared attribute set and the noise-free marginals, in Python integers."""
    z = np.asarray(tables)
    whole = bool(z.dtype.kind in "iu" or (np.all(np.isfinite(z)) and np.array_equal(z, np.round(z))))
    checks = []
    if integer:
        checks.append(Check(f"{prefix}.integer", "every published cell is a whole number (exact)", whole, f"{z.size} cells"))
    if nonnegative:
        low = z.min() if z.size else 0
        checks.append(Check(f"{prefix}.nonnegative", "every published cell ≥ 0 (exact)", bool(low >= 0),
                            f"smallest cell {low}"))
    if consistent:
        k = agreement_matrix(workload)
        if whole:
            ints = np.round(z).astype(np.int64).astype(object)
            residual = _integer_product(k, ints)
            bad = sum(1 for r in residual if r != 0)
            how, ok = "in Python integers", bad == 0
            detail = f"{k.shape[0]} agreement equations over {len(shared_sets(workload))} shared attribute sets"
        else:
            worst = float(np.abs(k @ z).max(initial=0.0))
            tolerance = 1e-6 * max(1.0, float(np.abs(z).max(initial=0.0)))
            how, ok = f"to {tolerance:.3g} (real tables)", worst <= tolerance
            bad, detail = 0, f"largest disagreement {worst:.3g}"
        checks.append(Check(f"{prefix}.consistent",
                            f"every two tables have the same marginal over their shared attributes ({how})",
                            ok, detail + (f"; {bad} equations fail" if bad else "")))
        if exact is not None and exact.matrix.shape[0]:
            same = whole and all(a == b for a, b in zip(_integer_product(exact.matrix, np.round(z).astype(np.int64).astype(object)),
                                                         exact.values.tolist()))
            checks.append(Check(f"{prefix}.exact_margins", "the marginals released without noise are kept (Python integers)",
                                bool(same), f"{exact.matrix.shape[0]} cells over {len(exact.sets)} sets"))
    return checks


def _integer_product(matrix: sparse.csr_matrix, z: np.ndarray) -> list[int]:
    """``matrix @ z`` in Python integers for a sparse matrix of whole entries."""
    csr = matrix.tocsr()
    data = np.round(csr.data).astype(np.int64)
    return [sum(int(data[j]) * int(z[csr.indices[j]]) for j in range(csr.indptr[i], csr.indptr[i + 1]))
            for i in range(csr.shape[0])]


def uses_marginal_space(query) -> bool:
    """Whether a release of ``query`` is post-processed here: a ``marginals`` query of two tables or
    more over a histogram of more than :data:`DENSE_CELLS` cells (below, :mod:`dpopt.postprocess.table`
    estimates the whole histogram, which also makes the marginals those of one non-negative table)."""
    workload = getattr(query, "workload", None)
    return (getattr(query, "kind", None) == "marginals" and workload is not None and len(workload.blocks) >= 2
            and query.cells > DENSE_CELLS)


def require_roundable(query, options: Postprocess) -> None:
    """Refuse, before the release, a consistent rounding of marginals in marginal space that would not finish:
    tables sharing two attributes or more over more than :data:`ROUNDING_CELLS` cells.

    Raises
    ------
    UnsupportedSpecError
        Naming ``postprocess.integer``, the cells and the limit.
    """
    if not (options.integer and options.consistent and uses_marginal_space(query)):
        return
    workload = query.workload
    shared = max((len(u) for u in shared_sets(workload)), default=0)
    if shared >= 2 and workload.dimension > ROUNDING_CELLS:
        raise UnsupportedSpecError(
            "postprocess.integer", f"whole-number tables that agree on shared {shared}-way margins are an integer "
            f"program (NP-hard in general), here over {workload.dimension} cells, above the {ROUNDING_CELLS} it is "
            "run on; release fewer or smaller marginals, or post-process the raw release with dpopt.postprocess")


def noise_free_sets(mechanism) -> tuple[Subset, ...]:
    """The maximal sets of the workload's closure whose components the mechanism releases without noise
    (``marginal_gaussian``: every component without a coefficient a_T); none for other families."""
    coefficients = getattr(mechanism, "coefficients", None)
    workload = getattr(mechanism, "workload", None)
    if not isinstance(coefficients, dict) or not isinstance(workload, MarginalWorkload):
        return ()
    free = [t for t in workload.closure if t not in coefficients]
    return tuple(t for t in free if not any(set(t) < set(u) for u in free))


def postprocess_marginals(workload: MarginalWorkload, noisy, options: Postprocess, exact_sets: tuple[Subset, ...] = (),
                          total: int | None = None) -> PostprocessResult:
    """Consistent, non-negative, integer tables of a marginal release (module docstring), checked.

    Parameters
    ----------
    workload : MarginalWorkload
    noisy : array (d,)
        The released tables, laid out as the query's labels.
    options : Postprocess
        ``consistent`` (tables agree on shared attributes), ``nonnegative``, ``integer``.
    exact_sets : tuple of Subset
        Sets whose marginals the release states without noise (:func:`noise_free_sets`).
    total : int, optional
        The public number of records (``data.n``): the grand total of every table.

    Raises
    ------
    SolverError
        A step failed, or the output failed one of its own exact checks.
    """
    y = np.asarray(noisy, dtype=float).reshape(-1)
    exact = exact_margins(workload, y, exact_sets, total)
    if not options.consistent:
        exact = ExactMargins(sparse.csr_matrix((0, workload.dimension)), np.zeros(0, dtype=np.int64), ())
    steps = []
    if options.consistent and options.nonnegative:
        estimate = nonnegative_projection(workload, y, exact)
        steps.append("Euclidean projection onto non-negative tables that agree on every shared attribute set "
                     "(convex QP in marginal space, Clarabel)")
    elif options.nonnegative:
        estimate = np.maximum(y, 0.0)
        steps.append("negative cells set to 0 (cell by cell)")
    else:
        estimate = workload.project(y) if options.consistent else y
        steps.append("least squares in marginal space (orthogonal projection onto range(W))" if options.consistent
                     else "the release as it is")
    if options.integer:
        if options.consistent:
            table, route = consistent_rounding(workload, estimate, exact)
        else:
            table, route = np.rint(estimate).astype(np.int64), "nearest integer, cell by cell"
        steps.append(f"consistent rounding: {route}" if options.consistent else route)
    else:
        table = estimate
    checks = marginal_checks(workload, table, exact, nonnegative=options.nonnegative, integer=options.integer,
                             consistent=options.consistent)
    failed = [c.claim for c in checks if not c.passed]
    if failed:
        raise SolverError("post-processing failed its own checks: " + ", ".join(failed))
    method = {
        "steps": steps,
        "space": "marginal tables (the histogram of "
                 f"{workload.algebra.cells:,} cells is never formed)",
        "guarantees": GUARANTEES if options.consistent else "cell by cell: no agreement between tables is enforced",
        "consistent": options.consistent,
        "nonnegative": options.nonnegative,
        "integer": options.integer,
        "noise_free_margins": [list(u) for u in exact.sets],
        "error": (ERROR_BOUND if options.consistent and options.nonnegative else "not simulated") + (
            "; rounding then moves each cell by less than 1" if options.integer and "0/1" in steps[-1] else ""),
        "preserves_guarantee": POSTPROCESSING_THEOREM,
    }
    return PostprocessResult(table, table, y, estimate if options.nonnegative else None, checks, method)
