r"""Query scaling: pose :math:`\mathrm{Diag}(\xi)^{1/2} f` instead of f, with ξ chosen for the
statistical procedure (Shoham & Rinott), and its generalisation to any sensitivity region.

**The transform.** The analyst poses the adjusted query
:math:`f_\xi = \mathrm{Diag}(\xi)^{1/2} f`; the agency answers it with the Gaussian
mechanism :math:`f_\xi(S) + U`, :math:`U \sim N(0, \sigma^2 I)`; the analyst inverts,
:math:`\mathrm{Diag}(\xi)^{-1/2}(f_\xi(S) + U) \sim N(f(S), \sigma^2\mathrm{Diag}(\xi)^{-1})`.
Conventions for ξ here: :math:`\xi_i = 0` means coordinate i is not asked (nothing about
it is released); :math:`\xi_i = \infty` means it is released exactly, which is allowed
only for a coordinate that never changes between neighbours (:math:`\psi_i = 0`, the
limit of the paper's :math:`\xi^*_i \propto 1/\psi_i^2`; digest pitfall 6).

**Sensitivity.** Over a sensitivity region K (the differences f(S) − f(S')),
:math:`\Delta(f_\xi)^2 = \max_{v \in K} \sum_i \xi_i v_i^2`, attained at a generator of
K's hull (a convex function). For the paper's box (disjoint columns, product domain:
Lemma 2.2) this is :math:`\psi^\top\mathrm{Diag}(\xi)\psi`. The privacy of the Gaussian
mechanism depends only on :math:`\Delta(f_\xi)/\sigma` (Lemma 2.3; Balle & Wang 2018), so
"same privacy as f" is :math:`\Delta(f_\xi) = \Delta(f)` at the same σ.

**Optimal ξ on a box** (Theorems 2.1 and 2.4):

* smallest confidence region: :math:`\xi^*_i = (\|\psi\|^2/k)/\psi_i^2`, with volume ratio
  :math:`\bigl((\prod\psi_i^2)^{1/k}/(\tfrac1k\sum\psi_i^2)\bigr)^{k/2} \le 1` against ξ = 1;
* most powerful test of H0: f = 0 against H1: f = η: all weight on
  :math:`j^* = \arg\max_i \eta_i^2/\psi_i^2`, :math:`\xi^*_{j^*} = \|\psi\|^2/\psi_{j^*}^2`.

**Any region, diagonal ξ** (:func:`optimal_diagonal_scaling`): with the constraint rows
:math:`a = v^2` (entrywise) of the generators, the three designs are convex programs in ξ:
``ci_volume`` maximises :math:`\sum\log\xi_i`, ``test_power`` maximises
:math:`\sum\xi_i\eta_i^2` (an LP), ``l2`` minimises :math:`\sum w_i/\xi_i`
(:math:`w_i = \|W e_i\|^2`), all subject to :math:`a^\top\xi \le 1` for every generator.
A single distinct row (a box) has the closed forms above. Each solution is certified by
a duality gap computed here from the solver's multipliers (any non-negative multipliers
give a valid bound, so the solver's status is never trusted).

**Any region, any linear map (beyond the paper)** (:func:`minimum_volume_adjustment`):
posing :math:`A f` with A acting on the span of K gives a confidence-region volume
proportional to :math:`\Delta_K(A)^r/\sqrt{\det A^\top A}`; scale-invariant, so the best A
maximises :math:`\log\det B` (:math:`B = A^\top A`) subject to :math:`v^\top B v \le 1` on the
generators: the minimum-volume (Löwner–John) ellipsoid enclosing K, centred at 0 (K is
symmetric). On a box it is :math:`B = \mathrm{Diag}(1/(k\psi_i^2))`, i.e. :math:`\xi^*`; on
other regions it can beat every diagonal ξ. API for other designs (e.g. the correlated
``gaussian_optimal`` noise): input the generators of the sensitivity region (rows),
output the map (:class:`LinearAdjustment`, with the equivalent noise covariance for a
μ-GDP target).

References
----------
.. [1] T. Shoham and Y. Rinott, "Adjusting queries to statistical procedures under
   differential privacy" (digest: ``papers/001_query_adjusting.md``).
.. [2] B. Balle and Y.-X. Wang, "Improving the Gaussian mechanism for differential
   privacy: analytical calibration and optimal denoising", ICML 2018.
.. [3] M. J. Todd, *Minimum-Volume Ellipsoids: Theory and Algorithms*, SIAM 2016 (the
   MVEE problem and its dual, Ch. 2–3).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from scipy import optimize

from dpopt.errors import SolverError
from dpopt.optimize.solve import solve_convex
from dpopt.privacy.gaussian_calibration import gaussian_sigma
from dpopt.sensitivity.subspace import span_of
from dpopt.spec.models import ApproxTarget, Privacy
from dpopt.stats.inference import ci_volume, power_from_noncentrality

OBJECTIVES = ("ci_volume", "test_power", "l2")
"""The goals a diagonal scaling can be optimised for."""

GAP_TOLERANCE = 1e-6
"""Largest accepted relative duality gap of a solved design (log-volume gap for ``ci_volume``)."""


# ------------------------------------------------------------------- transform
def _noisy(xi: np.ndarray) -> np.ndarray:
    return (xi > 0) & np.isfinite(xi)


def adjust_query(values, xi) -> np.ndarray:
    r"""The adjusted query :math:`f_\xi = \mathrm{Diag}(\xi)^{1/2} f`.

    Coordinates with ξ_i = ∞ (released exactly) are passed through unscaled; ξ_i = 0
    gives 0 (the coordinate is not asked).
    """
    f = np.asarray(values, dtype=float).reshape(-1)
    xi = np.asarray(xi, dtype=float).reshape(-1)
    _check_xi(xi, f.size)
    return np.where(np.isinf(xi), f, np.sqrt(np.where(np.isinf(xi), 1.0, xi)) * f)


def invert_adjusted_release(release, xi) -> np.ndarray:
    r"""The analyst's estimate of f from a release of :math:`f_\xi`: :math:`\mathrm{Diag}(\xi)^{-1/2} M`.

    ξ_i = ∞ coordinates are returned as released (exact); ξ_i = 0 coordinates were not
    asked and come back as NaN.
    """
    m = np.asarray(release, dtype=float).reshape(-1)
    xi = np.asarray(xi, dtype=float).reshape(-1)
    _check_xi(xi, m.size)
    out = np.full(m.size, np.nan)
    noisy = _noisy(xi)
    out[noisy] = m[noisy] / np.sqrt(xi[noisy])
    out[np.isinf(xi)] = m[np.isinf(xi)]
    return out


def _check_xi(xi: np.ndarray, k: int) -> None:
    if xi.shape != (k,):
        raise ValueError(f"xi must have {k} entries (got {xi.size})")
    if np.isnan(xi).any() or (xi < 0).any():
        raise ValueError("xi must be non-negative (0: not asked, inf: released exactly)")


# ---------------------------------------------------------- the paper: a box
def _psi_squared(psi) -> np.ndarray:
    p2 = np.asarray(psi, dtype=float).reshape(-1) ** 2
    if p2.size < 1 or not np.isfinite(p2).all():
        raise ValueError("psi must be a non-empty finite vector")
    if not (p2 > 0).any():
        raise ValueError("psi is zero: the query never changes between neighbours (no noise needed)")
    return p2


def box_sensitivity(psi, xi) -> float:
    r"""Lemma 2.2: :math:`\Delta(f_\xi) = \sqrt{\sum_i \xi_i\psi_i^2}` on a box (ψ_i = 0 where ξ_i = ∞).

    Raises
    ------
    ValueError
        If a coordinate with ψ_i ≠ 0 is released exactly (ξ_i = ∞): infinite sensitivity.
    """
    p2 = _psi_squared(psi)
    xi = np.asarray(xi, dtype=float).reshape(-1)
    _check_xi(xi, p2.size)
    if (np.isinf(xi) & (p2 > 0)).any():
        raise ValueError("a coordinate that changes between neighbours cannot be released exactly")
    finite = np.isfinite(xi)
    return math.sqrt(float(np.sum(xi[finite] * p2[finite])))


def volume_optimal_xi(psi) -> np.ndarray:
    r"""Theorem 2.1(3): :math:`\xi^*_i = (\|\psi\|^2/k')/\psi_i^2` (k' the coordinates with ψ_i ≠ 0).

    It keeps :math:`\sum_i\xi^*_i\psi_i^2 = \|\psi\|^2` (same privacy as f); ψ_i = 0
    coordinates get ξ_i = ∞ (released exactly).

    Examples
    --------
    >>> volume_optimal_xi([1.0, 2.0]).tolist()
    [2.5, 0.625]
    """
    p2 = _psi_squared(psi)
    noisy = p2 > 0
    xi = np.full(p2.size, np.inf)
    xi[noisy] = p2.sum() / (noisy.sum() * p2[noisy])
    return xi


def power_optimal_xi(psi, eta) -> np.ndarray:
    r"""Theorem 2.4(3): all weight on :math:`j^* = \arg\max_i \eta_i^2/\psi_i^2`,
    :math:`\xi_{j^*} = \|\psi\|^2/\psi_{j^*}^2`.

    ψ_i = 0 coordinates are released exactly (ξ_i = ∞); if η is non-zero on one of them
    the test is already perfect and j* is still chosen among the others. Ties in the
    argmax take the first index (any split among tied indices is optimal).

    Examples
    --------
    >>> power_optimal_xi([1.0, 2.0], [1.0, 1.0]).tolist()
    [5.0, 0.0]
    """
    p2 = _psi_squared(psi)
    e2 = np.asarray(eta, dtype=float).reshape(-1) ** 2
    if e2.shape != p2.shape:
        raise ValueError(f"eta must have {p2.size} entries (got {e2.size})")
    if not (e2 > 0).any():
        raise ValueError("eta equals the null hypothesis (all zeros)")
    noisy = p2 > 0
    ratio = np.where(noisy, e2 / np.where(noisy, p2, 1.0), -1.0)
    j = int(np.argmax(ratio))
    xi = np.where(noisy, 0.0, np.inf)
    xi[j] = p2.sum() / p2[j]
    return xi


def volume_ratio(psi) -> float:
    r"""The volume ratio of Theorem 2.1,
    :math:`\mathrm{Vol}(CR_{\xi^*})/\mathrm{Vol}(CR_{\xi=1})
    = \bigl((\prod\psi_i^2)^{1/k}/\overline{\psi^2}\bigr)^{k/2}`.

    0 when some ψ_i = 0 (that coordinate is then exact: the limit of the formula).

    Examples
    --------
    >>> round(volume_ratio([1.0, 2.0]), 12)
    0.8
    """
    p2 = _psi_squared(psi)
    if (p2 == 0).any():
        return 0.0
    k = p2.size
    return math.exp(0.5 * k * (float(np.mean(np.log(p2))) - math.log(float(p2.mean()))))


def scaled_ci_volume(xi, sigma: float, alpha: float = 0.05) -> float:
    r"""Eq. (6): :math:`V_r (\sigma^2 t)^{r/2}\det[\mathrm{Diag}(\xi)]^{-1/2}` over the noisy coordinates.

    Exact coordinates (ξ = ∞) add no volume (the region is a point along them); a
    coordinate not asked (ξ = 0) makes it unbounded (∞).
    """
    xi = np.asarray(xi, dtype=float).reshape(-1)
    _check_xi(xi, xi.size)
    if (xi == 0).any():
        return math.inf
    noisy = _noisy(xi)
    log_det = float(np.sum(2.0 * math.log(sigma) - np.log(xi[noisy])))
    return ci_volume(int(noisy.sum()), log_det, alpha)


def scaled_test_power(xi, eta, sigma: float, alpha: float = 0.05) -> float:
    r"""Power of the LR test (7),
    :math:`1 - \Phi(z_{1-\alpha} - \sqrt{\eta^\top\mathrm{Diag}(\xi)\eta}/\sigma)`.

    A non-zero η_i on an exact coordinate (ξ_i = ∞) is detected with certainty (power 1).

    Examples
    --------
    >>> round(scaled_test_power([5.0, 0.0], [1.0, 1.0], 1.0), 6)
    0.722812
    """
    xi = np.asarray(xi, dtype=float).reshape(-1)
    e = np.asarray(eta, dtype=float).reshape(-1)
    _check_xi(xi, e.size)
    if (np.isinf(xi) & (e != 0)).any():
        return 1.0
    noisy = _noisy(xi)
    lam = math.sqrt(float(np.sum(xi[noisy] * e[noisy] ** 2))) / sigma
    return power_from_noncentrality(lam, alpha)


@dataclass(frozen=True)
class FixedDataDesign:
    """The paper's fixed-data design for one goal at an (ε, δ) target.

    Attributes
    ----------
    xi : ndarray
        The optimal ξ (paper normalisation ψᵀDiag(ξ)ψ = ‖ψ‖²).
    sigma : float
        Certified noise scale for the adjusted query (= Δ(f)/s*(ε, δ) up to the safe rounding).
    sensitivity : float
        Δ(f_ξ), equal to Δ(f) = ‖ψ‖.
    noise_sd : ndarray
        Standard deviation of the recovered estimate per coordinate, σ/√ξ_i (0 exact, ∞ not asked).
    objective : str
    value, baseline : float
        The goal's value at ξ and at ξ = 1 (plain f, same privacy).
    ratio : float
        value / baseline.
    """

    xi: np.ndarray
    sigma: float
    sensitivity: float
    noise_sd: np.ndarray
    objective: str
    value: float
    baseline: float
    ratio: float


def design_fixed_data(psi, epsilon: float, delta: float, objective: str = "ci_volume", eta=None,
                      alpha: float = 0.05) -> FixedDataDesign:
    """Theorem 2.1 / 2.4 end to end: optimal ξ, Gaussian σ calibrated by the analytic condition (4).

    σ is the smallest float whose 60-digit analytic-Gaussian check (Balle & Wang, Thm 8)
    passes for the adjusted sensitivity Δ(f_ξ), evaluated exactly in rationals.

    Parameters
    ----------
    psi : array_like
        ψ = f(S̃) − f(S̃′), the per-coordinate worst-case differences (box sensitivity region).
    epsilon, delta : float
        The (ε, δ)-DP target.
    objective : {'ci_volume', 'test_power'}
    eta : array_like, optional
        The alternative (required for ``test_power``).
    alpha : float
        Confidence 1 − α / test level α.
    """
    p2 = _psi_squared(psi)
    if objective == "ci_volume":
        xi = volume_optimal_xi(psi)
    elif objective == "test_power":
        if eta is None:
            raise ValueError("objective 'test_power' needs eta")
        xi = power_optimal_xi(psi, eta)
    else:
        raise ValueError(f"objective must be 'ci_volume' or 'test_power' (got {objective!r})")
    privacy = Privacy(approx=ApproxTarget(epsilon=epsilon, delta=delta))
    finite = np.isfinite(xi)
    terms = zip(xi[finite], p2[finite])
    adjusted = sum((Fraction(float(x)) * Fraction(float(p)) for x, p in terms), Fraction(0))
    plain = sum((Fraction(float(v)) ** 2 for v in np.asarray(psi, dtype=float).reshape(-1)), Fraction(0))
    sigma = gaussian_sigma(adjusted, privacy)
    sigma_plain = gaussian_sigma(plain, privacy)
    if objective == "ci_volume":
        value = scaled_ci_volume(xi, sigma, alpha)
        baseline = scaled_ci_volume(np.ones(p2.size), sigma_plain, alpha)
    else:
        value = scaled_test_power(xi, eta, sigma, alpha)
        baseline = scaled_test_power(np.ones(p2.size), eta, sigma_plain, alpha)
    with np.errstate(divide="ignore"):
        sd = np.where(np.isinf(xi), 0.0, sigma / np.sqrt(np.where(np.isinf(xi), 1.0, xi)))
    delta_xi = math.sqrt(float(adjusted))
    return FixedDataDesign(xi, sigma, delta_xi, sd, objective, value, baseline, value / baseline)


# --------------------------------------------------- any region: diagonal ξ
def adjusted_l2_squared(vectors, xi) -> Fraction:
    r"""Exact :math:`\max_v \sum_i \xi_i v_i^2` over the rows of ``vectors`` (ξ_i = 0 terms dropped).

    Floats are binary rationals: rows whose float value is within 1e-9 of the float
    maximum are re-evaluated in :class:`~fractions.Fraction` (the exact maximum is among
    them). Coordinates with ξ_i = ∞ must be 0 in every row.

    Raises
    ------
    ValueError
        If a row is non-zero on a coordinate released exactly.
    """
    v = np.atleast_2d(np.asarray(vectors, dtype=float))
    xi = np.asarray(xi, dtype=float).reshape(-1)
    _check_xi(xi, v.shape[1])
    exact = np.isinf(xi)
    if (v[:, exact] != 0).any():
        raise ValueError("a coordinate released exactly changes between neighbours")
    w = np.where(exact, 0.0, xi)
    values = (v**2) @ w
    top = float(values.max(initial=0.0))
    rows = np.flatnonzero(values >= top * (1 - 1e-9))
    cols = np.flatnonzero(w > 0)
    weights = [Fraction(float(w[j])) for j in cols]
    return max(
        (sum((c * Fraction(float(v[i, j])) ** 2 for c, j in zip(weights, cols)), Fraction(0)) for i in rows),
        default=Fraction(0),
    )


@dataclass(frozen=True)
class DiagonalScaling:
    """An optimal diagonal ξ for a sensitivity region, normalised to max_v Σ ξ_i v_i² = 1.

    Attributes
    ----------
    xi : ndarray
        ∞ on coordinates that never change (released exactly), 0 on coordinates not asked.
    objective : str
    value : float
        The objective at ξ (Σ log ξ_i, Σ ξ_i η_i² or Σ w_i/ξ_i over the noisy coordinates).
    duality_gap : float
        Certified bound on the distance to the optimum: for ``ci_volume`` absolute, in
        Σ log ξ_i (twice the log-volume); relative for ``test_power`` and ``l2``; 0 for
        closed forms.
    method : str
    """

    xi: np.ndarray
    objective: str
    value: float
    duality_gap: float
    method: str


def constraint_rows(vectors) -> tuple[np.ndarray, np.ndarray]:
    """(distinct rows v² restricted to the changing coordinates, mask of changing coordinates).

    When one row dominates all others entrywise, only it is kept: Σ ξ_i v_i² ≤ 1 for it
    implies the rest (ξ ≥ 0), and the closed forms of a box apply.
    """
    v = np.atleast_2d(np.asarray(vectors, dtype=float))
    changing = (v != 0).any(axis=0)
    if not changing.any():
        raise ValueError("the region is {0}: nothing changes between neighbours")
    rows = np.unique(v[:, changing] ** 2, axis=0)
    rows = rows[rows.max(axis=1) > 0]
    top = rows[np.argmax(rows.sum(axis=1))]
    if (rows <= top).all():  # one generator dominates: the region behaves as the box it spans
        rows = top[None, :]
    return rows, changing


def optimal_diagonal_scaling(vectors, objective: str, *, eta=None, weights=None) -> DiagonalScaling:
    r"""The best diagonal ξ for a goal over the region generated by the rows of ``vectors``.

    Parameters
    ----------
    vectors : array_like, shape (m, k)
        Generators of the sensitivity region's hull (e.g. ``SensitivitySpace.vectors()``).
    objective : {'ci_volume', 'test_power', 'l2'}
    eta : array_like, shape (k,), optional
        The alternative, for ``test_power``.
    weights : array_like, shape (k,), optional
        w_i = ‖W e_i‖² for ``l2`` (all ones by default); must be positive on every
        coordinate that changes.

    Returns
    -------
    DiagonalScaling

    Raises
    ------
    SolverError
        The convex program failed or its certified duality gap exceeds :data:`GAP_TOLERANCE`.
    """
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {OBJECTIVES} (got {objective!r})")
    a, changing = constraint_rows(vectors)
    k = changing.size
    target = np.ones(changing.sum())
    if objective == "test_power":
        if eta is None:
            raise ValueError("objective 'test_power' needs eta")
        e = np.asarray(eta, dtype=float).reshape(-1)
        if e.shape != (k,):
            raise ValueError(f"eta must have {k} entries (got {e.size})")
        target = e[changing] ** 2
        if not (target > 0).any():
            raise ValueError("eta is zero on every coordinate that changes: the test is exact whatever ξ")
    if objective == "l2" and weights is not None:
        target = np.asarray(weights, dtype=float).reshape(-1)[changing]
        if not (target > 0).all():
            raise ValueError("the workload must use every coordinate that changes")
    if a.shape[0] == 1:
        sub, gap = _closed_form(a[0], objective, target), 0.0
        method = "closed form (one constraint row: a box)"
    else:
        sub, gap, method = _solve_program(a, objective, target)
    sub = sub / float((a @ sub).max())  # exactly feasible (max constraint = 1 in floating point)
    xi = np.full(k, np.inf)
    xi[changing] = sub
    return DiagonalScaling(xi, objective, _objective_value(sub, objective, target), gap, method)


def _objective_value(xi: np.ndarray, objective: str, target: np.ndarray) -> float:
    if objective == "ci_volume":
        return float(np.sum(np.log(xi)))
    if objective == "test_power":
        return float(target @ xi)
    return float(np.sum(target / xi))


def _closed_form(a: np.ndarray, objective: str, target: np.ndarray) -> np.ndarray:
    """Single constraint aᵀξ ≤ 1 (Theorems 2.1, 2.4; the l2 Lagrangian w_i/ξ_i² = λ a_i)."""
    if objective == "ci_volume":
        return 1.0 / (a.size * a)
    if objective == "test_power":
        j = int(np.argmax(target / a))
        xi = np.zeros(a.size)
        xi[j] = 1.0 / a[j]
        return xi
    return np.sqrt(target / a) / float(np.sum(np.sqrt(target * a)))


def _solve_program(a: np.ndarray, objective: str, target: np.ndarray) -> tuple[np.ndarray, float, str]:
    """Solve the convex program; certify with a duality gap from the multipliers u ≥ 0."""
    m, k = a.shape
    if objective == "test_power":
        res = optimize.linprog(-target, A_ub=a, b_ub=np.ones(m), bounds=(0, None), method="highs")
        if res.status != 0:
            raise SolverError(f"query-scaling LP failed: {res.message}")
        xi = np.maximum(res.x, 0.0)
        u = np.maximum(-res.ineqlin.marginals, 0.0)
        c = a.T @ u
        need = target > 0
        scale = float(np.max(target[need] / c[need])) if (c[need] > 0).all() else np.inf
        bound = scale * float(u.sum())  # u·scale is dual feasible: Aᵀu ≥ η², so Σu bounds the LP
        value = float(target @ (xi / float((a @ xi).max())))
        gap = (bound - value) / max(value, 1e-300)
        method = "linear program (HiGHS), dual bound from its multipliers"
    else:
        import cvxpy as cp  # deferred: importing cvxpy costs ~0.4 s on every `import dpopt`

        x = cp.Variable(k, pos=True)
        cons = [a @ x <= 1]
        if objective == "ci_volume":
            obj = cp.Maximize(cp.sum(cp.log(x)))
        else:
            obj = cp.Minimize(target @ cp.inv_pos(x))
        problem = cp.Problem(obj, cons)
        solve_convex(problem, program="query-scaling program failed")
        if x.value is None or cons[0].dual_value is None:
            raise SolverError(f"query-scaling program failed (status {problem.status})")
        xi = np.maximum(np.asarray(x.value, dtype=float), 1e-300)
        xi = xi / float((a @ xi).max())
        u = np.maximum(np.asarray(cons[0].dual_value, dtype=float), 0.0)
        c = a.T @ u
        if not (c > 0).all():
            raise SolverError("query-scaling program returned multipliers that certify nothing")
        if objective == "ci_volume":
            polished = _polish_design(a, u, diagonal=True)
            xi, gap = min((_certify_diagonal(a, xi, u), _certify_diagonal(a, None, polished)),
                          key=lambda pair: pair[1])
        else:
            # g(u) = 2Σ√(w_i c_i) − Σu, maximised over the scale of u: (Σ√(w c))²/Σu
            bound = float(np.sum(np.sqrt(target * c)) ** 2 / u.sum())
            value = float(np.sum(target / xi))
            gap = (value - bound) / value
        method = "convex program (cvxpy, CLARABEL), duality gap from its multipliers"
    if not gap <= GAP_TOLERANCE:
        raise SolverError(f"query-scaling design not certified: duality gap {gap:.3g} > {GAP_TOLERANCE}")
    return xi, max(gap, 0.0), method


def _certify_diagonal(a: np.ndarray, xi: np.ndarray | None, u: np.ndarray) -> tuple[np.ndarray, float]:
    """(feasible ξ, certified gap) for max Σ log ξ s.t. Aξ ≤ 1, from ξ (or ξ = 1/(Aᵀu)) and u ≥ 0.

    The dual g(u) = −Σ log(Aᵀu)_i − k + Σu, minimised over the scale of u (t = k/Σu),
    bounds Σ log ξ from above for any u ≥ 0.
    """
    k = a.shape[1]
    c = a.T @ u
    if not (c > 0).all():
        return np.ones(k), math.inf
    if xi is None:
        xi = 1.0 / c
    xi = xi / float((a @ xi).max())
    bound = float(-np.sum(np.log(c)) - k * math.log(k / u.sum()))
    return xi, max(bound - float(np.sum(np.log(xi))), 0.0)


def _polish_design(rows: np.ndarray, u: np.ndarray, diagonal: bool) -> np.ndarray:
    r"""Newton refinement of the multipliers of a log-det design, on their support.

    Minimises the dual :math:`g(u) = -\log\det V(u) - r + \sum u` with
    :math:`V(u) = \sum_j u_j c_j c_j^\top` (or :math:`\mathrm{Diag}(A^\top u)` for a diagonal
    design), whose gradient is :math:`1 - c_j^\top V^{-1} c_j`. Interior-point solutions are
    accurate to about the square root of their gap in the shape; a few Newton steps make
    the shape accurate to rounding. The caller keeps whichever multipliers certify the
    smaller gap, so a poor refinement can never be used.
    """
    support = u > 1e-6 * float(u.max())
    c, x = rows[support], u[support].copy()

    def parts(x):
        if diagonal:
            v = c.T @ x
            q = c @ (1.0 / v)
            return -float(np.sum(np.log(v))) + float(x.sum()), q, (c / v) @ (c / v).T
        v = (c * x[:, None]).T @ c
        vinv = np.linalg.inv(v)
        g = c @ vinv @ c.T
        return -float(np.linalg.slogdet(v)[1]) + float(x.sum()), np.diag(g).copy(), g**2

    for _ in range(60):
        value, q, hess = parts(x)
        grad = 1.0 - q
        if np.abs(grad).max() < 1e-14:
            break
        step = -np.linalg.lstsq(hess, grad, rcond=1e-12)[0]
        t = 1.0
        while t > 1e-12:
            trial = x + t * step
            if (trial > 0).all() and parts(trial)[0] <= value + 1e-4 * t * float(grad @ step):
                break
            t *= 0.5
        else:
            break
        x = trial
    out = np.zeros_like(u)
    out[support] = x
    return out


# ------------------------------------------- any region: full linear adjustment
@dataclass(frozen=True)
class LinearAdjustment:
    r"""The volume-optimal linear adjustment :math:`A = B^{1/2} U^\top` for a region K.

    Posing A f (r numbers) and answering with N(0, σ² I_r) is μ-GDP at σ = 1/μ, since
    :math:`\max_{v\in K}\|Av\|^2 = \max_v c^\top B c = 1` (c = Uᵀv); the analyst inverts
    with :math:`U B^{-1/2}`. Equivalently, the correlated noise
    :math:`N(0, U B^{-1}U^\top/\mu^2)` added to f itself (:meth:`noise_covariance`).

    Attributes
    ----------
    matrix : ndarray, shape (r, d)
        A.
    basis : ndarray, shape (d, r)
        U, an orthonormal basis of span(K); f's component off it never changes.
    shape : ndarray, shape (r, r)
        B = AᵀA in the coordinates of U.
    log_det : float
        log det B.
    duality_gap : float
        Certified bound on log det B* − log det B (the volume is within e^{gap/2} of optimal).
    sensitivity : float
        max_v ‖A v‖ over the generators, evaluated after the solve (≤ 1 + 1e-12).
    """

    matrix: np.ndarray
    basis: np.ndarray
    shape: np.ndarray
    log_det: float
    duality_gap: float
    sensitivity: float

    def apply(self, values) -> np.ndarray:
        """The adjusted query A f."""
        return self.matrix @ np.asarray(values, dtype=float).reshape(-1)

    def invert(self, release) -> np.ndarray:
        """The span component of f estimated from a release of A f: U B^{-1/2} M."""
        w, v = np.linalg.eigh(self.shape)
        return self.basis @ (v @ ((v.T @ np.asarray(release, dtype=float)) / np.sqrt(w)))

    def noise_covariance(self, mu: float) -> np.ndarray:
        """Σ = U B⁻¹ Uᵀ / μ²: correlated Gaussian noise with max_v vᵀΣ⁺v = μ² max_v cᵀBc ≤ μ² (μ-GDP)."""
        return self.basis @ np.linalg.inv(self.shape) @ self.basis.T / mu**2

    def log_volume(self, mu: float, alpha: float = 0.05) -> float:
        """log volume of the 1 − α confidence region for the span component of f (noise σ = 1/μ)."""
        r = self.basis.shape[1]
        return math.log(ci_volume(r, -self.log_det - 2.0 * r * math.log(mu), alpha))


def region_coordinates(vectors) -> tuple[np.ndarray, np.ndarray]:
    """(U, C): an orthonormal basis U of the span of the rows, and the rows' coordinates C = V U."""
    v = np.atleast_2d(np.asarray(vectors, dtype=float))
    basis = span_of(v.T).basis()
    if basis.shape[1] == 0:
        raise ValueError("the region is {0}: nothing changes between neighbours")
    coords = v @ basis
    coords = coords[np.linalg.norm(coords, axis=1) > 0]
    # ±v give the same constraint; keep one of each pair
    first = coords[np.arange(coords.shape[0]), np.argmax(np.abs(coords) > 1e-12, axis=1)]
    coords = coords * np.where(first < 0, -1.0, 1.0)[:, None]
    scale = float(np.abs(coords).max())
    _, keep = np.unique(np.round(coords / scale, 12), axis=0, return_index=True)
    return basis, coords[np.sort(keep)]


def minimum_volume_adjustment(vectors) -> LinearAdjustment:
    r"""The minimum-volume ellipsoid {x : xᵀBx ≤ 1} enclosing the region, centred at 0.

    Solves :math:`\max \log\det B` s.t. :math:`c_j^\top B c_j \le 1` (cvxpy, CLARABEL) in the
    coordinates of span(K), then (i) rescales B so the largest constraint is exactly 1 and
    (ii) certifies optimality with the dual bound
    :math:`g(u) = -\log\det(\sum_j u_j c_j c_j^\top) - r\log(r/\sum_j u_j)` for the
    multipliers u ≥ 0 (weak duality holds for any u ≥ 0, so the bound does not trust the
    solver).

    Parameters
    ----------
    vectors : array_like, shape (m, d)
        Generators of a sensitivity region symmetric about 0 (v and −v both present or
        implied); e.g. ``SensitivitySpace.vectors()``.

    Returns
    -------
    LinearAdjustment

    Raises
    ------
    SolverError
        If the program fails or the certified gap exceeds :data:`GAP_TOLERANCE`.

    Examples
    --------
    >>> box = [[s1, 2.0 * s2] for s1 in (-1, 1) for s2 in (-1, 1)]   # ψ = (1, 2)
    >>> adj = minimum_volume_adjustment(box)
    >>> np.round(np.diag(adj.basis @ adj.shape @ adj.basis.T), 6).tolist()   # Diag(1/(kψ²))
    [0.5, 0.125]
    """
    basis, c = region_coordinates(vectors)
    r = basis.shape[1]
    if r == 1:
        b = np.array([[1.0 / float(np.max(c[:, 0] ** 2))]])
        gap = 0.0
    else:
        import cvxpy as cp  # deferred, as in _solve_program

        bvar = cp.Variable((r, r), PSD=True)
        cons = [cp.sum(cp.multiply(c @ bvar, c), axis=1) <= 1]
        problem = cp.Problem(cp.Maximize(cp.log_det(bvar)), cons)
        solve_convex(problem, program="minimum-volume ellipsoid failed")
        if bvar.value is None or cons[0].dual_value is None:
            raise SolverError(f"minimum-volume ellipsoid failed (status {problem.status})")
        u = np.maximum(np.asarray(cons[0].dual_value, dtype=float), 0.0)
        if not u.any():
            raise SolverError("minimum-volume ellipsoid: multipliers certify nothing")
        polished = _polish_design(c, u, diagonal=False)
        b, gap = min((_certify_ellipsoid(c, bvar.value, u), _certify_ellipsoid(c, None, polished)),
                     key=lambda pair: pair[1])
        if not gap <= GAP_TOLERANCE:
            raise SolverError(f"minimum-volume ellipsoid not certified: duality gap {gap:.3g}")
    w, v = np.linalg.eigh(b)
    matrix = (v * np.sqrt(w)) @ v.T @ basis.T
    full = np.atleast_2d(np.asarray(vectors, dtype=float))
    sensitivity = float(np.sqrt(np.max(np.sum((full @ matrix.T) ** 2, axis=1))))
    return LinearAdjustment(matrix, basis, b, float(np.sum(np.log(w))), gap, sensitivity)


def _certify_ellipsoid(c: np.ndarray, shape: np.ndarray | None, u: np.ndarray) -> tuple[np.ndarray, float]:
    """(feasible B, certified gap) from a shape (or, if None, B = V(u)⁻¹) and multipliers u ≥ 0."""
    r = c.shape[1]
    v = (c * u[:, None]).T @ c
    sign, logdet_v = np.linalg.slogdet(v)
    if shape is None:
        if sign <= 0:
            return np.eye(r), math.inf
        shape = np.linalg.inv(v)
    b = 0.5 * (shape + shape.T)
    if np.linalg.eigvalsh(b).min() <= 0 or sign <= 0:
        return np.eye(r), math.inf
    b = b / float(np.max(np.einsum("ij,jk,ik->i", c, b, c)))
    bound = -logdet_v - r * math.log(r / u.sum())
    return b, max(bound - float(np.linalg.slogdet(b)[1]), 0.0)


def adjustment_log_volume(vectors, matrix, mu: float = 1.0, alpha: float = 0.05) -> float:
    r"""log volume of the 1 − α region for f's span component when posing ``matrix`` · f.

    For a map A whose restriction AU to span(K) is invertible (U an orthonormal basis),
    calibrated to its own sensitivity :math:`\Delta_K(A) = \max_v\|Av\|` at μ-GDP:
    :math:`\log V_r + \tfrac r2\log t + r\log(\Delta_K(A)/\mu) - \log|\det AU|`.
    Use it to compare any two adjustments (diagonal ξ: A = Diag(ξ)^{1/2}) on one region.
    """
    v = np.atleast_2d(np.asarray(vectors, dtype=float))
    basis, _ = region_coordinates(v)
    a = np.atleast_2d(np.asarray(matrix, dtype=float))
    restricted = a @ basis
    if restricted.shape[0] != restricted.shape[1]:
        # a map with more outputs than the span's rank: its volume is that of AU's column space
        restricted = np.linalg.qr(restricted)[1]
    sign, logdet = np.linalg.slogdet(restricted)
    if sign == 0:
        raise ValueError("matrix does not determine the span component of f (singular on the span)")
    r = basis.shape[1]
    delta = float(np.sqrt(np.max(np.sum((v @ a.T) ** 2, axis=1))))
    return math.log(ci_volume(r, 2.0 * r * math.log(delta / mu) - 2.0 * logdet, alpha))
