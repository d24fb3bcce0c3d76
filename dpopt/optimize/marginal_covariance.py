r"""The optimal Gaussian noise of a marginal workload, in the ANOVA algebra (any number of cells).

A marginal workload :math:`W = [M_S]_S` over attributes with :math:`n_1,\dots,n_p` levels
(:class:`~dpopt.domain.marginal_algebra.MarginalWorkload`) is released as :math:`Wx + Z`,
:math:`Z \sim N(0, \Sigma)`. Writing :math:`G = W^\top\Sigma^+W` (the strategy Gram matrix,
:math:`\Sigma = WG^+W^\top` on range(W)), the error is :math:`E\|Z\|^2 = \operatorname{tr}(WG^+W^\top)`
and the Mahalanobis sensitivity is :math:`\mu_\Sigma^2 = \max_\delta \delta^\top G\delta` over
:math:`\delta = e_j` (add/remove) or :math:`\delta = e_i - e_j` (replace-one): the matrix
mechanism's program (Li, Miklau et al., VLDB J. 2015), i.e. ``gaussian_optimal``'s SDP.

**Why the optimum lies in the algebra.** Let Γ = S_{n_1} × … × S_{n_p} permute the levels of
each attribute, acting on cells by permutation matrices P. For every P there is a row
permutation Q with WP = QW, so :math:`\operatorname{tr}(W(PGP^\top)^+W^\top) =
\operatorname{tr}(QWG^+W^\top Q^\top) = \operatorname{tr}(WG^+W^\top)`, and δ ↦ Pδ maps
{e_j} and {e_i − e_j} onto themselves, so PGPᵀ is feasible whenever G is. The error
G ↦ tr(WG⁺Wᵀ) is convex on the PSD matrices whose range contains range(Wᵀ), and the
constraints are linear in G: the group average :math:`\bar G = |\Gamma|^{-1}\sum_P PGP^\top`
is feasible with no larger error. :math:`\bar G` commutes with Γ, and the commutant of Γ is
span{E_T} (the commutant of S_n on ℝⁿ is span{I, J}; commutants of tensor products of
representations are tensor products of commutants). Hence an optimum
:math:`G = \sum_T a_T E_T` exists, with

.. math::

    E\|Z\|^2 = \sum_T \frac{m_T\lambda_T}{a_T},\qquad
    \delta^\top G\delta = \begin{cases} \sum_T a_T m_T/N & \delta = e_j\\
    2\sum_T a_T\,\mathrm{gap}_T(D) & \delta = e_i - e_j \end{cases}

(λ_T the eigenvalues of WᵀW, m_T = rank E_T, D the attributes on which cells i and j differ,
:math:`\mathrm{gap}_T(D) = \tfrac{m_T}{N}\big(1 - \prod_{k\in T\cap D}\tfrac{-1}{n_k-1}\big)`, which
is :meth:`~dpopt.domain.marginal_algebra.MarginalAlgebra.pair_gap`). Only the T contained in a
block matter (λ_T = 0 elsewhere: no noise there); under replace-one a_∅ = ∞ (the grand
total is the same on neighbours and is released exactly).

**Where the symmetry fails** (and this module does not apply): per-cell utility weights or a
user workload on the released cells, unequal weights within or across marginals that are not
the spec's unit weights, a ``linear`` query, prefix/range queries on an ordered attribute
(not invariant under S_n); invariants that are margins are invariant under Γ and keep it.

**add/remove: closed form.** Minimising Σ m_Tλ_T/a_T subject to Σ a_T m_T/N ≤ μ² gives
:math:`a_T = \mu^2 N\sqrt{\lambda_T}/\sum_U m_U\sqrt{\lambda_U}` and the error
:math:`(\sum_T m_T\sqrt{\lambda_T})^2/(N\mu^2)`, which equals the SVD bound
:math:`(\operatorname{tr}\sqrt{W^\top W})^2/(N\mu^2)` of Li & Miklau that bounds every strategy:
the design is optimal among all Gaussian noise on Wx, certified by that bound.

**replace-one: a convex program.** With :math:`b_T = a_T m_T/N` and
:math:`c_T = m_T^2\lambda_T/N` it is

.. math:: \min_{b \ge 0} \sum_{T\ne\emptyset} \frac{c_T}{b_T}\quad\text{s.t.}\quad
          f_D(b) = 2\sum_T b_T\Big(1 - \prod_{k\in T\cap D}\rho_k\Big) \le \mu^2
          \ \ \forall D \neq \emptyset,\quad \rho_k = \frac{-1}{n_k - 1},

one constraint per disagreement pattern D ⊆ {k : n_k ≥ 2}. All 2^p values f_D come from one
fast transform :math:`h = (\otimes_k M_k)\,b`, :math:`M_k = \begin{pmatrix}1&1\\1&\rho_k\end{pmatrix}`
(O(p 2^p)), and so do the transposed sums. Attributes that are interchangeable (equal levels,
and the transposition preserves the components and their λ_T) reduce this to one variable per orbit
of components and one constraint per count vector of disagreeing attributes per class
(:mod:`dpopt.optimize.marginal_patterns`): the program is strictly convex and invariant under
those permutations, so its unique optimum is constant on orbits, and the dual bound of the reduced
program bounds the full one (the orbit average of any feasible b is feasible and no worse). The
program is solved by cutting planes (cvxpy, ``inv_pos``, on a working set of patterns; the most
violated patterns are added until none is), then scaled to be feasible for every pattern.
**Certificate**: for any ν ≥ 0 the Lagrange dual gives the lower bound

.. math:: L(\nu) = \frac{\big(\sum_T\sqrt{c_T\,(A^\top\nu)_T}\big)^2}{\mu^2\sum_D\nu_D},
          \qquad (A^\top\nu)_T = 2\sum_D\nu_D\Big(1-\prod_{k\in T\cap D}\rho_k\Big),

(minimise the Lagrangian over b, then over the scale of ν), evaluated here in numpy from the
solver's multipliers: the relative gap (error − L)/error is certified whatever the solver did.
Hamming-k neighbours: the hull of differences is k times replace-one's, so μ is divided by k.

**Invariant margins** (Semi-DP, replace-one, margins over attribute sets I_j published
exactly). The components T ⊆ some I_j are fixed by the invariants and get no noise (a_T = ∞).
Two conforming datasets within the semi-adjacent parameter a differ in m ≤ a records
p_1..p_m and q_1..q_m whose I_j-margins are equal (the common records cancel), so they pair up
(p_i with q_π(i)) into m pairs that **agree on I_j**: x − x′ = Σ_i (e_{p_i} − e_{q_π(i)}), and by the
triangle inequality of the seminorm ‖δ‖_G = √(δᵀGδ)
:math:`\mu_\Sigma \le a \max\{\|e_p - e_q\|_G : p, q \text{ agree on } I_j\}`: the same program
with the patterns D restricted to avoid I_j (``agree``) and μ divided by a. A copies of one cell
replaced by a copies of a cell that agrees with it on every invariant attribute is a conforming
pair at distance a, so a² times the maximum over the patterns avoiding every invariant attribute
is attained: the exact Semi-DP sensitivity lies between the two, and the program with that
weaker constraint bounds the error of every noise meeting the exact Semi-DP target from below
(:meth:`~dpopt.mechanisms.marginal_gaussian.MarginalGaussianMechanism.semi_dp_bracket`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from dpopt.domain.marginal_algebra import MarginalWorkload, Subset
from dpopt.errors import CalibrationError, SolverError
from dpopt.optimize.marginal_patterns import MAX_PATTERNS, PatternClasses, Type
from dpopt.optimize.solve import solve_convex

_VIOLATION = 1e-9
"""Relative violation above which a pattern joins the cutting-plane working set."""

_TIGHT = {"tol_gap_abs": 1e-13, "tol_gap_rel": 1e-13, "tol_feas": 1e-13, "tol_ktratio": 1e-10}
"""Clarabel's tolerances: tight, so that the design is optimal to rounding (the dual bound certifies it)."""

_ADD_PER_ROUND = 64
_MAX_ROUNDS = 60


def components(workload: MarginalWorkload, replace: bool, fixed: tuple[Subset, ...] = ()) -> tuple[Subset, ...]:
    """The T that get noise: the workload's closure without rank-0 components (an attribute
    with one level), without ∅ under replace-one, and without the T inside an invariant
    margin's attribute set ``fixed`` (those components are published exactly)."""
    alg = workload.algebra
    return tuple(t for t in workload.closure if alg.multiplicity(t) > 0 and not (replace and t == ())
                 and not any(set(t) <= set(f) for f in fixed))


def expected_error(workload: MarginalWorkload, coefficients: dict[Subset, float]) -> float:
    """E‖Z‖² = Σ_T m_T λ_T / a_T (the trace of W G⁺ Wᵀ, G = Σ_T a_T E_T)."""
    alg = workload.algebra
    return float(sum(alg.multiplicity(t) * float(workload.gram_eigenvalue(t)) / a
                     for t, a in coefficients.items()))


def svd_bound(workload: MarginalWorkload, mu: float) -> float:
    r"""Li & Miklau's SVD bound :math:`(\sum_T m_T\sqrt{\lambda_T})^2/(N\mu^2)` on E‖Z‖² for any
    Gaussian noise on Wx that is μ-GDP under add/remove (tr √(WᵀW) from the algebra's eigenvalues)."""
    alg = workload.algebra
    root = sum(alg.multiplicity(t) * math.sqrt(workload.gram_eigenvalue(t)) for t in workload.closure)
    return root * root / (alg.cells * mu * mu)


def design_classes(workload: MarginalWorkload, ts: tuple[Subset, ...], agree: Subset = ()) -> PatternClasses:
    """The classes of attributes interchangeable in the program: same levels, and the transposition maps
    the noised components ``ts`` onto themselves with equal λ_T (so the optimum is constant on orbits);
    the attributes ``agree`` never disagree."""
    return PatternClasses.of(workload.algebra.sizes, {t: workload.gram_eigenvalue(t) for t in ts}, agree)


def exact_mahalanobis_squared(workload: MarginalWorkload, coefficients: dict[Subset, float], replace: bool,
                              agree: Subset = ()) -> Fraction:
    """μ_Σ² = max_δ δᵀGδ of G = Σ_T a_T E_T, exactly, from the stored floats a_T.

    add/remove: Σ_T a_T m_T / N; replace-one: max over every disagreement pattern D of
    2 Σ_T a_T gap_T(D), over the count vectors of the classes of attributes interchangeable in b
    (:meth:`~dpopt.optimize.marginal_patterns.PatternClasses.exact_max_load`, integers); with ``agree``,
    over the patterns D that avoid those attributes (pairs of records that agree on them).

    Raises
    ------
    CalibrationError
        Replace-one with more than :data:`MAX_PATTERNS` reduced patterns, or more near-maximal patterns than
        the float screen hands to the exact evaluation.
    """
    alg = workload.algebra
    b = {t: Fraction(a) * alg.diagonal(t) for t, a in coefficients.items()}
    if not replace:
        return sum(b.values(), Fraction(0))
    classes = PatternClasses.of(alg.sizes, b, agree)
    _require_patterns(classes)
    try:
        return classes.exact_max_load(b)
    except ValueError as exc:  # too many near-maximal patterns for the exact evaluation
        raise CalibrationError(f"replace-one privacy check: {exc}") from None


def pattern_refusal(workload: MarginalWorkload, fixed: tuple[Subset, ...] = ()) -> str | None:
    """Why replace-one is not served (too many reduced patterns), or None."""
    ts = components(workload, True, fixed)
    try:
        _require_patterns(design_classes(workload, ts))
    except CalibrationError as exc:
        return str(exc)
    return None


def _require_patterns(classes: PatternClasses) -> None:
    if classes.count > MAX_PATTERNS:
        sizes = ", ".join(f"{len(c)}×{n}" for c, n in zip(classes.classes, classes.levels))
        raise CalibrationError(
            f"replace-one over {classes.attributes} attributes in {len(classes.classes)} classes of interchangeable "
            f"attributes (count×levels: {sizes}): {classes.count} reduced disagreement patterns, the exact privacy "
            f"check evaluates at most {MAX_PATTERNS} (attributes with equal levels and symmetric marginals "
            "reduce them)")


# ----------------------------------------------------------------------------- designs
@dataclass(frozen=True)
class MarginalDesign:
    """The optimiser's coefficients and their optimality certificate.

    Attributes
    ----------
    coefficients : dict
        a_T for each T of :func:`components` (floats), with max_δ δᵀGδ = μ² up to rounding.
    error : float
        E‖Z‖² at these coefficients.
    lower_bound : float
        A proven lower bound on E‖Z‖² over every Gaussian noise meeting μ (the SVD bound, or
        the dual bound L(ν)).
    method : str
    """

    coefficients: dict[Subset, float]
    error: float
    lower_bound: float
    method: str

    @property
    def gap(self) -> float:
        """(error − lower bound)/error."""
        return max(0.0, (self.error - self.lower_bound) / self.error)


def optimal_coefficients(workload: MarginalWorkload, mu: float, replace: bool,
                         fixed: tuple[Subset, ...] = (), agree: Subset = (),
                         gram: dict[Subset, float] | None = None) -> MarginalDesign:
    """The optimal a_T for target μ (μ already divided by the Hamming distance or the semi-adjacent
    parameter), with its certificate; ``fixed``: the attribute sets of invariant margins (replace-one);
    ``gram``: eigenvalues λ_T to use instead of the workload's (the weighted total Σ_T m_T λ_T / a_T of
    :func:`~dpopt.optimize.table_goals.weighted_eigenvalues`; ``error`` and ``lower_bound`` are then that total's).

    Raises
    ------
    CalibrationError
        Replace-one with more than :data:`~dpopt.optimize.marginal_patterns.MAX_PATTERNS` reduced patterns, or a
        workload with no component to protect.
    SolverError
        The cutting-plane program failed.
    """
    ts = components(workload, replace, fixed)
    if not ts:
        raise CalibrationError("the workload has no component that changes between neighbours")
    eigen = gram if gram is not None else {t: float(workload.gram_eigenvalue(t)) for t in workload.closure}
    if not replace:
        return _closed_form(workload, ts, mu, eigen)
    classes = (design_classes(workload, ts, agree) if gram is None
               else PatternClasses.of(workload.algebra.sizes, {t: eigen[t] for t in ts}, agree))
    _require_patterns(classes)
    return _cutting_planes(workload, ts, classes, mu, eigen)


def _total(workload: MarginalWorkload, coefficients: dict[Subset, float], eigen: dict[Subset, float]) -> float:
    """Σ_T m_T λ_T / a_T at the eigenvalues ``eigen``."""
    alg = workload.algebra
    return float(sum(alg.multiplicity(t) * eigen[t] / a for t, a in coefficients.items()))


def _closed_form(workload: MarginalWorkload, ts: tuple[Subset, ...], mu: float,
                 eigen: dict[Subset, float]) -> MarginalDesign:
    alg = workload.algebra
    roots = {t: math.sqrt(eigen[t]) for t in ts}
    total = sum(alg.multiplicity(t) * roots[t] for t in ts)
    coefficients = {t: mu * mu * alg.cells * roots[t] / total for t in ts}
    if all(eigen[t] == float(workload.gram_eigenvalue(t)) for t in ts):
        return MarginalDesign(coefficients, expected_error(workload, coefficients), svd_bound(workload, mu),
                              "closed form (Lagrange): a_T = μ² N √λ_T / Σ_U m_U √λ_U; lower bound: Li–Miklau SVD bound")
    return MarginalDesign(coefficients, _total(workload, coefficients, eigen), total * total / (alg.cells * mu * mu),
                          "closed form (Lagrange) at the weighted eigenvalues λ^w_T: a_T = μ² N √λ^w_T / Σ_U m_U √λ^w_U; "
                          "lower bound (Σ_T m_T √λ^w_T)²/(N μ²), the weighted SVD bound")


def _cutting_planes(workload: MarginalWorkload, ts: tuple[Subset, ...], patterns: PatternClasses,
                    mu: float, eigen: dict[Subset, float]) -> MarginalDesign:
    """The program over orbit totals B_o = Σ_{T∈o} b_T (b_T = B_o/|o|: its unique optimum is constant on
    orbits, the classes being symmetries of c), constraints per reduced pattern. An orbit is a type and the
    component's attributes in no class (they never disagree, so a constraint depends on the type only)."""
    import cvxpy as cp

    alg = workload.algebra
    n_cells = float(alg.cells)
    moving = {k for c in patterns.classes for k in c}
    orbits: dict[tuple[Type, Subset], list[Subset]] = {}  # (type, the attributes in no class)
    for t in ts:
        orbits.setdefault((patterns.type_of(t), tuple(k for k in t if k not in moving)), []).append(t)
    kinds = list(orbits)
    types = [kind for kind, _ in kinds]
    # Σ_{T∈o} c_T / b_T = |o| Σ_{T∈o} c_T / B_o
    c = np.array([len(orbits[k]) * sum(alg.multiplicity(t) ** 2 * eigen[t] for t in orbits[k]) / n_cells
                  for k in kinds])
    # B_t = s_t β_t with s the add/remove optimum (Σ s = 1/2): β is of order 1 at the optimum
    s = np.sqrt(c) / (2.0 * np.sqrt(c).sum())
    weights = np.sqrt(c) * 2.0 * np.sqrt(c).sum()

    def load_of(beta: np.ndarray) -> np.ndarray:
        return patterns.loads(types, s * beta)

    working = sorted({patterns.full} | set(patterns.singletons)
                     | set(np.argsort(load_of(np.ones(len(kinds))))[-_ADD_PER_ROUND:].tolist()))
    working = [d for d in working if d != 0]
    solution = None
    for _ in range(_MAX_ROUNDS):
        beta = cp.Variable(len(kinds), pos=True)
        matrix = patterns.rows(types, working) * s
        constraint = matrix @ beta <= 1.0
        program = cp.Problem(cp.Minimize(weights @ cp.inv_pos(beta)), [constraint])
        solution = solve_convex(program, ("CLARABEL", "SCS"), program="marginal covariance (replace-one)",
                                options={"CLARABEL": _TIGHT})
        if beta.value is None or solution.status not in ("optimal", "optimal_inaccurate"):
            raise SolverError(f"marginal covariance (replace-one): solver status {solution.status}")
        value = np.maximum(np.asarray(beta.value, dtype=float), 1e-300)
        loads = load_of(value)
        violated = np.flatnonzero(loads > 1.0 + _VIOLATION)
        known = set(working)
        new = [int(d) for d in violated[np.argsort(loads[violated])[::-1]] if int(d) not in known]
        if not new:
            break
        if len(working) > 2 * len(kinds):  # keep the working set small: drop slack patterns with no multiplier
            duals = np.asarray(constraint.dual_value, dtype=float).reshape(-1)
            keep = (duals > 1e-9 * duals.max()) | (loads[working] > 1.0 - 1e-6)
            working = [d for d, kept in zip(working, keep) if kept]
        working = sorted(set(working) | set(new[:_ADD_PER_ROUND]))
    else:
        raise SolverError(f"marginal covariance (replace-one): no convergence in {_MAX_ROUNDS} cutting-plane rounds")
    mu2 = mu * mu
    totals = s * value * (mu2 / float(loads.max()))
    coefficients = {}
    for kind, total in zip(kinds, totals):
        for t in orbits[kind]:
            coefficients[t] = total / len(orbits[kind]) * n_cells / alg.multiplicity(t)
    nu = np.zeros(patterns.count)
    nu[working] = np.maximum(np.asarray(constraint.dual_value, dtype=float).reshape(-1), 0.0)
    bound = dual_bound(c, patterns.transposed(nu, types), float(nu.sum()), mu2)
    method = (f"cutting planes over the 2^{patterns.attributes} − 1 disagreement patterns reduced by symmetry to "
              f"{patterns.count - 1} count vectors ({len(patterns.classes)} classes of interchangeable attributes, "
              f"{len(kinds)} orbits of components; {len(working)} patterns in the working set), "
              f"cvxpy {solution.solver} {solution.version}, inv_pos; lower bound: Lagrange dual at the solver's multipliers")
    return MarginalDesign(coefficients, _total(workload, coefficients, eigen), bound, method)


def dual_bound(c: np.ndarray, a_t_nu: np.ndarray, nu_total: float, mu2: float) -> float:
    """L(ν) = (Σ_T √(c_T (Aᵀν)_T))² / (μ² Σ_D ν_D), a lower bound on the program's optimum."""
    if not nu_total > 0:
        return 0.0
    return float(np.sum(np.sqrt(c * np.maximum(a_t_nu, 0.0)))) ** 2 / (mu2 * nu_total)
