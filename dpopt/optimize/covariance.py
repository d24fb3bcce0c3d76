r"""The optimal covariance of additive Gaussian noise, as a convex program over Σ ⪰ 0.

Gaussian noise N(0, Σ) added to a query whose sensitivity space S has generators v is
μ-GDP exactly when every v lies in range(Σ) and :math:`v^\top\Sigma^{+}v \le \mu^2`: the
trade-off between N(0, Σ) and N(v, Σ) is :math:`G_{\|\Sigma^{+1/2}v\|}` (Kim et al.,
Lemma A.2; Cho & Awan, Lemma 43), and :math:`v \mapsto v^\top\Sigma^{+}v` is convex, so its
supremum over the hull of S is attained at the generators. By the Schur complement each
condition is a linear matrix inequality, and the best Σ for a convex utility U is the
semidefinite program

.. math::

    \min_{\Sigma \succeq 0}\; U(\Sigma) \quad\text{s.t.}\quad
    \begin{pmatrix}\Sigma & v\\ v^\top & \mu^2\end{pmatrix} \succeq 0
    \quad\text{for every extreme point } v \text{ of } S .

μ is the target's Gaussian parameter: μ for μ-GDP, √(2ρ) for ρ-zCDP, and the analytic-Gaussian
threshold μ*(ε, δ) for (ε, δ)-DP (Balle & Wang 2018), all through
:func:`dpopt.privacy.gaussian_calibration.gaussian_sigma` at unit sensitivity.

Utilities (each convex in Σ):

* ``trace``: :math:`\operatorname{tr}(M\Sigma)`, M = WᵀW: the expected squared error
  E‖WZ‖² of a workload W (identity by default), or :math:`\sum_i w_i \Sigma_{ii}` for
  per-coordinate weights (M = Diag(w));
* ``max_variance``: :math:`\max_i \Sigma_{ii}`;
* ``log_det``: log pdet Σ on span(S) — the log-volume of every Gaussian confidence ellipsoid
  of the release; its optimum is the minimum-volume (Löwner–John) ellipsoid
  :math:`\{x : x^\top\Sigma^{+}x \le \mu^2\}` containing S.

How the program is made small (the order in which :func:`optimal_covariance` works):

1. **Span.** Noise outside V = span(S) buys nothing and range(Σ) must contain V, so
   Σ = U S Uᵀ with U an orthonormal basis of V and S ≻ 0 (r × r, r = rank).
2. **Constraint set.** Zero vectors are dropped; v, −v and positive multiples give one
   constraint (the largest); points that are not extreme in conv(±S) are dropped (a
   leverage test proves most points exposed vertices at once, an LP decides a few more).
3. **Symmetry.** If a group of signed coordinate permutations maps ±S to itself and leaves
   U unchanged, averaging an optimum over the group keeps it optimal, so an optimum lies in
   the group's commutant. For the groups tried here — S_d permuting all coordinates,
   S_{n1}×…×S_{np} permuting the levels of each attribute of a table, and coordinate sign
   flips — the representation is multiplicity-free: the commutant is spanned by the
   orthogonal projectors P_k onto the isotypic components (for a table, the ANOVA
   projectors ⊗_i (J/n_i or I − J/n_i)). Then :math:`\Sigma = \sum_k a_k P_k`,
   :math:`v^\top\Sigma^{+}v = \sum_k g_k(v)/a_k` with :math:`g_k(v) = \|P_k v\|^2`, and the
   SDP becomes a program in K scalars with one linear constraint per distinct row g(v).
   With a single row (one orbit, e.g. a table under replace-one, margin-preserving moves,
   the vertices of a box) the Lagrange conditions give closed forms:

   .. math::

       \text{trace } (c_k = \operatorname{tr} MP_k):\ a_k = \sqrt{g_k/c_k}\,\textstyle\sum_l\sqrt{c_l g_l}/\mu^2;
       \qquad \text{log det } (r_k = \operatorname{rank} P_k):\ a_k = R\,g_k/(r_k\mu^2),\ R = \textstyle\sum_k r_k .

   On a contingency table under replace-one this is the rank-deficient Gaussian
   (2/μ²)(I − J/d) of Lee et al. (2022, Ex. 1); on a box :math:`\prod_i[-\psi_i, \psi_i]`
   with the log-det utility it is :math:`\Sigma = \mathrm{Diag}(k\psi_i^2)/\mu^2`, the
   Shoham–Rinott ξ* (Thm 2.1) read as heterogeneous noise.
4. **Generic SDP** (cvxpy) otherwise, in the precision B = S⁻¹: each LMI is the linear
   inequality :math:`y_j^\top B y_j \le \mu^2` (:math:`y_j = U^\top v_j`) and the utility is
   tr(M_V B⁻¹) (``matrix_frac``), −log det B, or max_i u_iᵀB⁻¹u_i (solved in its dual
   form, see :func:`_solve_precision`): one cone of size 2r instead of one LMI per vector.
   The solve starts from the 8r constraints of largest leverage; constraints the solution violates are added back and the
   program re-solved (cutting planes), so the final Σ satisfies every constraint.

**Dual bound** (independent of the solver: numpy, any multipliers λ ≥ 0 on the
constraints, e.g. the solver's). With :math:`Y_\lambda = \sum_j \lambda_j y_j y_j^\top`,
minimising the Lagrangian over B ≻ 0 and over the scale of λ gives

.. math::

    \text{trace: } \frac{\big(\operatorname{tr}(M_V^{1/2} Y_\lambda M_V^{1/2})^{1/2}\big)^2}{\mu^2 \sum_j\lambda_j},
    \qquad
    \text{log det: } \log\det Y_\lambda + r\log\frac{r}{\mu^2\sum_j\lambda_j},

(using :math:`\min_{B\succ0} \operatorname{tr}(MB^{-1}) + \operatorname{tr}(YB) = 2\operatorname{tr}(M^{1/2}YM^{1/2})^{1/2}`),
and for max_variance the trace bound with :math:`M = U^\top\mathrm{Diag}(w)U`, w any
probability vector (the max is a max over such w). Every λ gives a lower bound on the optimum, so the
certified gap is the utility at the certified Σ minus this bound.

References
----------
.. [1] J. Dong, A. Roth and W. Su, "Gaussian differential privacy", JRSS-B 2022.
.. [2] B. Balle and Y.-X. Wang, "Improving the Gaussian mechanism for differential privacy:
   analytical calibration and optimal denoising", ICML 2018.
.. [3] Lee, Kim, Kwak and Jung, "Differentially private multivariate statistics with an
   application to contingency table analysis", 2022 (rank-deficient Gaussian).
.. [4] Cho and Awan, "Formal privacy guarantees with invariant statistics" (projected
   Gaussian, Algorithm 1; Lemma 43).
.. [5] T. Shoham and Y. Rinott, "Adjusting queries to statistical procedures under
   differential privacy" (ξ*, Theorem 2.1).
.. [6] C. Li, G. Miklau, M. Hay, A. McGregor and V. Rastogi, "The matrix mechanism:
   optimizing linear counting queries under differential privacy", VLDB J. 2015.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from dpopt.domain.workload import workload_matrix
from dpopt.errors import CalibrationError, SolverError, SpecError, UnsupportedSpecError
from dpopt.optimize.constraint_set import ROUND, candidate_symmetries, distinct_directions, extreme_points
from dpopt.optimize.solve import ACCEPTED, solve_convex
from dpopt.privacy.gaussian_calibration import gaussian_sigma
from dpopt.spec.models import Privacy, Utility

OBJECTIVES: dict[str, str] = {"l2": "trace", "max_variance": "max_variance", "ci_volume": "log_det"}
"""Spec utility metric → the convex utility of Σ that the program minimises."""

MAX_SDP_RANK = 50
"""Largest span rank sent to the generic SDP (symmetric problems are solved at any size)."""

WORKLOAD_FLOOR = 1e-6
"""Eigenvalues of the workload Gram matrix on the span are floored at this fraction of their
mean: directions a workload does not see would otherwise get unbounded noise (the infimum
is not attained); the reported utility is always the exact tr(WΣWᵀ)."""

_WORKING_SET = 8  # the SDP starts from the 8r points of largest leverage (cutting planes add the rest)


# ------------------------------------------------------------------ objective
@dataclass(frozen=True)
class Objective:
    """The convex utility of Σ to minimise.

    Attributes
    ----------
    kind : {'trace', 'max_variance', 'log_det'}
    matrix : ndarray or None
        M ⪰ 0 (d × d) for ``trace``: tr(MΣ); None elsewhere.
    description : str
    """

    kind: str
    matrix: np.ndarray | None = None
    description: str = ""

    @classmethod
    def for_utility(cls, utility: Utility, dimension: int) -> Objective:
        """The objective for a spec's utility (``l2`` with optional workload or weights,
        ``max_variance``, ``ci_volume``).

        Raises
        ------
        UnsupportedSpecError
            For metrics that are not a convex function of Σ (l1, usefulness, test power).
        SpecError
            A workload or weights that do not fit the query's dimension.
        """
        metric = utility.metric
        if metric not in OBJECTIVES:
            raise UnsupportedSpecError(
                "utility.metric",
                f"the optimal Gaussian covariance is designed for {', '.join(OBJECTIVES)}; "
                f"'{metric}' is not a convex function of the covariance",
            )
        if metric == "max_variance":
            return cls("max_variance", None, "max_i Σ_ii (worst-coordinate variance)")
        if metric == "ci_volume":
            return cls("log_det", None, "log pdet Σ on the span (confidence-region volume)")
        w = workload_matrix(utility)
        if w is None:
            return cls("trace", np.eye(dimension), "tr Σ (expected squared error)")
        if w.shape[1] != dimension:
            field = "utility.weights" if utility.weights is not None else "utility.workload"
            raise SpecError(field, f"has {w.shape[1]} entries per row but the query has dimension {dimension}")
        if utility.weights is not None:
            return cls("trace", w.T @ w, "Σ_i w_i Σ_ii (weighted per-coordinate error)")
        return cls("trace", w.T @ w, f"tr(WΣWᵀ), workload of {w.shape[0]} queries")

    def value(self, sigma: np.ndarray, rank: int) -> float:
        """U(Σ): tr(MΣ), max_i Σ_ii, or the log of the product of the ``rank`` largest eigenvalues."""
        if self.kind == "trace":
            return float(np.sum(self.matrix * sigma))
        if self.kind == "max_variance":
            return float(np.max(np.diag(sigma)))
        top = np.linalg.eigvalsh(sigma)[::-1][:rank]
        return float(np.sum(np.log(top)))

    def gap(self, value: float, bound: float) -> float:
        """Relative gap (value − bound)/value for trace-type utilities; for log det the
        gap in log units (log of the ratio of ellipsoid volumes squared)."""
        if self.kind == "log_det":
            return value - bound
        return (value - bound) / value if value > 0 else 0.0


def target_mu(privacy: Privacy) -> float:
    """μ of the target: the largest Mahalanobis sensitivity the noise may have.

    Taken as 1/σ for unit sensitivity from :func:`dpopt.privacy.gaussian_calibration.gaussian_sigma`
    (μ, √(2ρ), or the analytic-Gaussian μ*(ε, δ), rounded in the safe direction).

    Raises
    ------
    CalibrationError
        For targets Gaussian noise cannot meet in this form (pure ε, pDP).
    """
    if privacy.definition not in ("gdp", "zcdp", "approx"):
        raise CalibrationError(f"the optimal Gaussian covariance serves gdp, zcdp and approx targets, not {privacy.definition}")
    return 1.0 / gaussian_sigma(Fraction(1), privacy)


# ------------------------------------------------------------------ the design
@dataclass(frozen=True)
class CovarianceDesign:
    """The optimiser's answer, before the independent certification scales it.

    Attributes
    ----------
    covariance : ndarray, shape (d, d)
        Σ, symmetric, with range(Σ) = span(S), rescaled so that max_v vᵀΣ⁺v = μ² (up to
        rounding; the mechanism's independent check decides the last digits).
    objective : Objective
    mu : float
        The target's μ.
    method : str
        "closed form …", "reduced program …" or "SDP …" with the solver.
    constraints : dict
        How many generators were listed, distinct (zeros, ±v, multiples merged), and used.
    dual_bound : float
        A lower bound on the optimum from multipliers (see the module docstring); −inf if
        none was available.
    regularized : bool
        Whether :data:`WORKLOAD_FLOOR` changed the workload on the span.
    """

    covariance: np.ndarray
    objective: Objective
    mu: float
    method: str
    constraints: dict
    dual_bound: float
    regularized: bool = False


def optimal_covariance(
    vectors: np.ndarray,
    basis: np.ndarray,
    objective: Objective,
    mu: float,
    *,
    table_shape: tuple[int, ...] | None = None,
    use_symmetry: bool = True,
) -> CovarianceDesign:
    """Minimise the utility over Σ ⪰ 0 subject to vᵀΣ⁺v ≤ μ² for every generator v.

    Parameters
    ----------
    vectors : array_like, shape (m, d)
        Generators of the sensitivity space's hull (e.g. ``SensitivitySpace.vectors()``).
    basis : ndarray, shape (d, r)
        Orthonormal basis of span(S).
    objective : Objective
    mu : float
        The target's μ (:func:`target_mu`).
    table_shape : tuple of int, optional
        Levels per attribute when the coordinates are the cells of a table (row-major):
        enables the table's symmetry group.
    use_symmetry : bool
        False forces the generic SDP (tests compare both routes).

    Returns
    -------
    CovarianceDesign

    Raises
    ------
    CalibrationError
        Vectors outside the span, or a problem too large for the generic SDP.
    SolverError
        The SDP solver failed.

    Examples
    --------
    >>> import numpy as np
    >>> from dpopt.sensitivity.subspace import SumZeroSpace
    >>> d = 4; V = np.array([np.eye(d)[i] - np.eye(d)[j] for i in range(d) for j in range(d) if i != j])
    >>> design = optimal_covariance(V, SumZeroSpace(d).basis(), Objective("trace", np.eye(d)), 1.0)
    >>> np.allclose(design.covariance, 2 * (np.eye(d) - 1 / d))   # Lee et al.: (2/μ²)(I − J/d)
    True
    """
    v = np.atleast_2d(np.asarray(vectors, dtype=float))
    d, r = basis.shape
    if v.shape[1] != d:
        raise CalibrationError(f"sensitivity vectors have {v.shape[1]} coordinates, the span {d}")
    distinct = distinct_directions(v)
    if distinct.shape[0] == 0 or r == 0:
        raise CalibrationError("the sensitivity space is {0}: no noise is needed")
    coords = distinct @ basis
    residual = np.abs(distinct - coords @ basis.T).max()
    if residual > 1e-9 * np.abs(distinct).max():
        raise CalibrationError(f"sensitivity vectors leave the span of the space (residual {residual:.3g})")
    counts = {"listed": int(v.shape[0]), "distinct": int(distinct.shape[0])}
    if use_symmetry:
        for group in candidate_symmetries(d, table_shape):
            if group.preserves(objective.kind, objective.matrix) and group.maps_to_itself(distinct):
                design = _symmetric_design(distinct, basis, objective, mu, group, counts)
                if design is not None:
                    return design
    if r > MAX_SDP_RANK:
        raise CalibrationError(
            f"no symmetry reduces this problem and its span has rank {r} > {MAX_SDP_RANK}, "
            "the largest sent to the generic SDP"
        )
    return _sdp_design(coords, basis, objective, mu, counts)


# --------------------------------------------------------- symmetric route
def _symmetric_design(distinct, basis, objective, mu, group, counts) -> CovarianceDesign | None:
    """Σ = Σ_k a_k P_k from the reduced program; None if the components do not match the span."""
    projectors = group.projectors
    g = np.stack([np.einsum("ij,jk,ik->i", distinct, p, distinct) for p in projectors], axis=1)
    active = g.max(axis=0) > 1e-12 * g.max()
    ranks = np.array([round(float(np.trace(p))) for p in projectors])
    if int(ranks[active].sum()) != basis.shape[1]:
        return None
    g = g[:, active]
    proj = [p for p, a in zip(projectors, active) if a]
    ranks = ranks[active]
    rows, row_of = _distinct_rows(g)
    kept = _undominated(rows)
    mu2 = mu * mu
    regularized = False
    diag = np.stack([np.diag(p) for p in proj], axis=1)  # (d, K)
    constant_diag = bool(np.all(np.abs(diag - diag.mean(axis=0)) <= 1e-12))
    weights_w = None
    if objective.kind == "trace" or (objective.kind == "max_variance" and constant_diag):
        if objective.kind == "trace":
            coef = np.array([float(np.sum(objective.matrix * p)) for p in proj])
        else:
            coef = ranks / diag.shape[0]
            weights_w = np.full(diag.shape[0], 1.0 / diag.shape[0])
        floor = WORKLOAD_FLOOR * coef.sum() / ranks.sum() * ranks
        regularized = bool(np.any(coef < floor))
        coef = np.maximum(coef, floor)
        kind = "trace"
    else:
        coef = ranks.astype(float) if objective.kind == "log_det" else diag
        kind = objective.kind
    if len(kept) == 1:
        a, nu = _closed_form(rows[kept[0]], kind, coef, mu2), np.ones(1)
        method = f"closed form by symmetry ({group.name}; {len(proj)} component(s), one constraint orbit)"
    else:
        a, nu, w = _reduced_program(rows[kept], kind, coef, mu2)
        weights_w = w if w is not None else weights_w
        method = (
            f"reduced convex program by symmetry ({group.name}; {len(proj)} components, "
            f"{len(kept)} constraint rows; cvxpy CLARABEL)"
        )
    a = a * float(np.max(g @ (1.0 / a))) / mu2  # the largest constraint holds with equality
    sigma = sum(ak * p for ak, p in zip(a, proj))
    sigma = 0.5 * (sigma + sigma.T)
    lam = np.zeros(distinct.shape[0])
    for slot, row in enumerate(kept):
        members = row_of == row
        lam[members] = nu[slot] / members.sum()
    y = distinct @ basis
    bound = dual_bound(objective, y, lam, mu, basis, weights_w)
    counts = {**counts, "used": len(kept), "reduction": f"{len(kept)} constraint row(s) after symmetry"}
    return CovarianceDesign(sigma, objective, mu, method, counts, bound, regularized)


def _distinct_rows(g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    scale = g.max()
    _, first, inverse = np.unique(np.round(g / scale, ROUND), axis=0, return_index=True, return_inverse=True)
    return g[first], inverse.reshape(-1)


def _undominated(rows: np.ndarray) -> list[int]:
    """Indices of rows not dominated entrywise by another row (a dominated row's constraint is implied)."""
    tol = 1e-12 * rows.max()
    kept = []
    for i, row in enumerate(rows):
        dominated = any(
            j != i and np.all(rows[j] >= row - tol) and np.any(rows[j] > row + tol) for j in range(rows.shape[0])
        )
        if not dominated:
            kept.append(i)
    return kept


def _closed_form(row: np.ndarray, kind: str, coef: np.ndarray, mu2: float) -> np.ndarray:
    """The single-constraint optimum: Lagrange conditions of min U(a) s.t. Σ_k g_k/a_k ≤ μ²."""
    if kind == "trace":
        return np.sqrt(row / coef) * float(np.sum(np.sqrt(coef * row))) / mu2
    return coef.sum() * row / (coef * mu2)  # log det, coef = ranks


def _reduced_program(rows, kind, coef, mu2) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """min U over x_k = 1/a_k > 0 s.t. rows @ x ≤ μ² (a few variables; cvxpy CLARABEL)."""
    import cvxpy as cp  # deferred: importing cvxpy is slow

    k = rows.shape[1]
    x = cp.Variable(k, pos=True)
    cons = [rows @ x <= mu2]
    w_con = None
    if kind == "trace":
        problem = cp.Problem(cp.Minimize(coef @ cp.inv_pos(x)), cons)
    elif kind == "log_det":
        problem = cp.Problem(cp.Maximize(coef @ cp.log(x)), cons)
    else:
        t = cp.Variable()
        w_con = coef @ cp.inv_pos(x) <= t
        problem = cp.Problem(cp.Minimize(t), cons + [w_con])
    _solve(problem, ("CLARABEL", "SCS"))
    if x.value is None:
        raise SolverError(f"the reduced covariance program failed (status {problem.status})")
    nu = np.maximum(np.asarray(cons[0].dual_value, dtype=float).reshape(-1), 0.0)
    w = None if w_con is None else np.maximum(np.asarray(w_con.dual_value, dtype=float).reshape(-1), 0.0)
    return 1.0 / np.asarray(x.value, dtype=float), nu, w


# ------------------------------------------------------------ generic route
def _sdp_design(coords, basis, objective, mu, counts) -> CovarianceDesign:
    r = basis.shape[1]
    points, leverage, how = extreme_points(coords)
    scale = float(np.linalg.norm(coords, axis=1).max())
    yn = points / scale
    regularized = False
    factor = None
    if objective.kind == "trace":
        m_span = basis.T @ objective.matrix @ basis
        ev, q = np.linalg.eigh(0.5 * (m_span + m_span.T))
        floor = WORKLOAD_FLOOR * max(ev.sum(), 1e-300) / r
        regularized = bool(ev.min() < floor)
        ev = np.maximum(ev, floor)
        factor = q * np.sqrt(ev / (ev.sum() / r))
    # cutting planes: start from the points of largest leverage, add back what the solution violates
    working = np.zeros(yn.shape[0], dtype=bool)
    working[np.argsort(-leverage)[: _WORKING_SET * r]] = True
    for _ in range(8):
        b, lam, w, solver = _solve_precision(yn[working], objective, basis, factor)
        slack = np.einsum("ij,jk,ik->i", yn, b, yn)
        violated = (slack > 1.0 + 1e-7) & ~working
        if not violated.any():
            break
        working |= violated
    else:
        raise SolverError("the covariance SDP still violates constraints after 8 rounds of cutting planes")
    b = b / float(np.max(np.einsum("ij,jk,ik->i", yn, b, yn)))  # the largest constraint holds with equality
    ev, q = np.linalg.eigh(b)
    ev = np.maximum(ev, 1e-14 * ev.max())
    s = (q / ev) @ q.T
    sigma = (scale * scale / (mu * mu)) * (basis @ s @ basis.T)
    sigma = 0.5 * (sigma + sigma.T)
    bound = dual_bound(objective, points[working], lam, mu, basis, w)
    counts = {**counts, "used": int(working.sum()), "reduction": how + "; cutting planes from the largest leverages"}
    method = f"SDP in the precision on the {r}-dimensional span (cvxpy {solver})"
    return CovarianceDesign(sigma, objective, mu, method, counts, bound, regularized)


def _solve_precision(y, objective, basis, factor):
    """min U over B ⪰ 0 s.t. y_jᵀ B y_j ≤ 1; returns (B, λ, w, solver name).

    ``trace`` and ``log_det`` are solved as stated (B the variable). ``max_variance`` is
    solved in its dual form, max 2 tr Z − Σλ_j s.t. [[UᵀDiag(w)U, Z], [Zᵀ, Σ_j λ_j y_j y_jᵀ]] ⪰ 0,
    Σw = 1, w, λ ≥ 0 (the Lagrangian identity of the module docstring, written as an LMI with
    max tr Z = ‖D^{1/2}Y^{1/2}‖_*), which SCS solves in a few thousand iterations where the
    primal epigraph form needs ten thousand; B is the lower-right block of the LMI's
    multiplier (stationarity in Z makes the off-diagonal block −I, so the upper-left block is
    B⁻¹ and the multiplier is the primal solution).
    """
    import cvxpy as cp  # deferred: importing cvxpy is slow

    n, r = y.shape
    order = ("CLARABEL", "SCS") if r <= 12 else ("SCS", "CLARABEL")
    if objective.kind == "max_variance":
        d = basis.shape[0]
        w, lam, z = cp.Variable(d, nonneg=True), cp.Variable(n, nonneg=True), cp.Variable((r, r))
        lmi = cp.bmat([[basis.T @ cp.diag(w) @ basis, z], [z.T, y.T @ cp.diag(lam) @ y]])
        cons = [0.5 * (lmi + lmi.T) >> 0, cp.sum(w) == 1]
        problem = cp.Problem(cp.Maximize(2 * cp.trace(z) - cp.sum(lam)), cons)
        solver = _solve(problem, order)
        if cons[0].dual_value is None or lam.value is None:
            raise SolverError(f"the covariance SDP failed (status {problem.status})")
        value = np.asarray(cons[0].dual_value, dtype=float)[r:, r:]
        return (0.5 * (value + value.T), np.maximum(np.asarray(lam.value, dtype=float), 0.0),
                np.maximum(np.asarray(w.value, dtype=float), 0.0), solver + ", dual form")
    b = cp.Variable((r, r), PSD=True)
    rows = np.einsum("ji,jk->jik", y, y).reshape(n, r * r)
    cons = [rows @ cp.vec(b, order="F") <= 1.0]
    if objective.kind == "trace":
        problem = cp.Problem(cp.Minimize(cp.matrix_frac(factor, b)), cons)
    else:
        problem = cp.Problem(cp.Maximize(cp.log_det(b)), cons)
    solver = _solve(problem, order)
    if b.value is None or cons[0].dual_value is None:
        raise SolverError(f"the covariance SDP failed (status {problem.status})")
    value = np.asarray(b.value, dtype=float)
    lam = np.maximum(np.asarray(cons[0].dual_value, dtype=float).reshape(-1), 0.0)
    return 0.5 * (value + value.T), lam, None, solver


_SOLVER_OPTIONS = {"SCS": {"eps_abs": 1e-8, "eps_rel": 1e-8, "scale": 0.1, "max_iters": 100_000}, "CLARABEL": {}}


def _solve(problem, order) -> str:
    """Solve with the first solver in ``order`` that returns a solution; its name and version."""
    solution = solve_convex(problem, order, program="the covariance program failed", options=_SOLVER_OPTIONS)
    if solution.status not in ACCEPTED:
        raise SolverError(f"the covariance program failed: {solution.solver}: status {solution.status}")
    tolerance = ", ".join(f"{k}={v:g}" for k, v in _SOLVER_OPTIONS[solution.solver].items() if k.startswith("eps"))
    return (
        f"{solution.cvxpy_version}, {solution.solver} {solution.version}"
        + (f" ({tolerance})" if tolerance else " (default tolerances)")
        + (", inaccurate" if not solution.accurate else "")
    )


# --------------------------------------------------------------- dual bound
def dual_bound(objective: Objective, y: np.ndarray, lam: np.ndarray, mu: float, basis: np.ndarray,
               weights: np.ndarray | None = None) -> float:
    """A lower bound on the optimal utility from multipliers λ ≥ 0 (formulas in the module
    docstring); numpy only, valid for any λ, so it certifies the gap without trusting a solver.

    Parameters
    ----------
    y : ndarray, shape (n, r)
        Constraint vectors in span coordinates (unnormalised).
    lam : ndarray, shape (n,)
    weights : ndarray, optional
        For ``max_variance``: the weights w over coordinates (normalised here).
    """
    lam = np.maximum(np.asarray(lam, dtype=float), 0.0)
    total = lam.sum()
    if not total > 0:
        return -math.inf
    ylam = (y * lam[:, None]).T @ y
    ylam = 0.5 * (ylam + ylam.T)
    r = basis.shape[1]
    if objective.kind == "log_det":
        sign, logdet = np.linalg.slogdet(ylam)
        return logdet + r * math.log(r / (mu * mu * total)) if sign > 0 else -math.inf
    if objective.kind == "trace":
        m = basis.T @ objective.matrix @ basis
    else:
        if weights is None or not np.sum(weights) > 0:
            return -math.inf
        w = np.asarray(weights, dtype=float) / np.sum(weights)
        m = (basis * w[:, None]).T @ basis
    ev, q = np.linalg.eigh(0.5 * (m + m.T))
    root = (q * np.sqrt(np.maximum(ev, 0.0))) @ q.T
    inner = np.linalg.eigvalsh(root @ ylam @ root)
    nuclear = float(np.sum(np.sqrt(np.maximum(inner, 0.0))))
    return nuclear * nuclear / (mu * mu * total)
