r"""The best R²DP mechanism for a linear metric: an LP over the mixing law of t = 1/b.

For a second fold with law G, the exact privacy constraint (Thm 4.1)
e^ε ≥ E[t] / E[t e^{−Δt}] is linear in G:

.. math:: \mathbb E_G[r(t)] \le 0, \qquad r(t) = \Delta t\,(1 - e^{\varepsilon-\Delta t}),

and so is every metric of :mod:`dpopt.optimize.r2dp_objectives`. On a grid of rates
t_1 … t_n the best mixture is the LP

.. math:: \min_w\ \sum_j w_j c(t_j) \quad\text{s.t.}\quad w \ge 0,\ \sum_j w_j = 1,\ \sum_j w_j r(t_j) \le 0,

solved with cvxpy (HiGHS; :func:`mixture_lp`). Its basic solutions have at most two atoms, so the optimum
over *all* laws is a two-point (Bernoulli) second fold; the grid solution is polished by
an exact two-atom search (s₁ < ε < s₂ with the weight that makes the constraint active).

Nothing is taken from the solver on trust:

* the returned law's ε is recomputed (Thm 4.1, 60-digit mpmath) and the atoms scaled down
  until it is within the target (ε increases with the scale of t, digest P7);
* weak duality gives a bound on the metric of *every* R²DP mechanism, not only those on
  the grid: for any λ ≥ 0 and any law G with E_G r ≤ 0,
  E_G c ≥ E_G[c + λr] ≥ inf_{t>0} (c(t) + λ r(t)); the infimum is evaluated on a fine
  log grid (20,001 points over 16 decades; 1,601 for the histogram metrics, whose costs are
  quadratures) refined around each local minimum by bounded scalar minimisation, and λ
  is then tuned to tighten the bound;
* Laplace (the point mass at t₀ = ε/Δ, where r(t₀) = 0) is the global R²DP optimum iff
  c(t) + λ* r(t) ≥ c(t₀) for all t with λ* = −c'(t₀)/r'(t₀) (a dual certificate; digest
  §3.3d). When it holds, the answer *is* Laplace — no fake gain.
"""

from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass, field

import numpy as np

from dpopt._lazy import lazy_module
from dpopt.core.rounding import nudge_until
from dpopt.errors import SolverError
from dpopt.noise.second_folds import DiscreteFold, SecondFold
from dpopt.optimize.r2dp_objectives import LinearObjective
from dpopt.optimize.solve import solve_convex
from dpopt.privacy.r2dp import r2dp_epsilon_mp

optimize = lazy_module("scipy.optimize")

DEFAULT_GRID = 2000
GRID_DECADES = (-4.0, 4.0)


@functools.cache
def _unit_dual_grid(points: int) -> np.ndarray:
    """``points`` rates log-spaced over [1e-8, 1e8] (built on first use, not at import)."""
    return np.logspace(-8.0, 8.0, points)


def _dual_grid(objective: LinearObjective, epsilon: float) -> np.ndarray:
    return _unit_dual_grid(20001 if objective.cheap else 1601) * epsilon


def constraint_row(s: np.ndarray, epsilon: float) -> np.ndarray:
    """r at s = Δt: s(1 − e^{ε − s}) (the privacy constraint is E r ≤ 0)."""
    s = np.asarray(s, dtype=float)
    return s * -np.expm1(epsilon - s)


@dataclass(frozen=True)
class LaplaceOptimality:
    """The dual certificate test of Laplace's optimality among all R²DP mechanisms.

    Attributes
    ----------
    optimal : bool
        True when min_s c(s) + λ* r(s) ≥ c(ε) (up to 1e-10 relative).
    multiplier : float
        λ* = −c'(t₀)/r'(t₀).
    margin : float
        min_s [c(s) + λ* r(s)] − c(ε), relative to |c(ε)| (≥ −1e-10 when optimal).
    argmin : float
        Where the minimum is attained, in units s = Δt.
    """

    optimal: bool
    multiplier: float
    margin: float
    argmin: float


@dataclass(frozen=True)
class MixtureOptimum:
    """The certified best R²DP second fold for one (ε, Δ, metric).

    Attributes
    ----------
    fold : DiscreteFold
        The law of t (one atom: Laplace; two: Bernoulli), privacy re-checked exactly.
    value : float
        Its metric (from the fold's MGF).
    laplace_value : float
        The Laplace mechanism's metric at the same ε.
    lp_value : float
        The metric of the grid LP's solution (before polishing).
    bound : float
        Weak-duality bound on the metric of every R²DP mechanism (an upper bound when
        higher is better).
    laplace : LaplaceOptimality
    epsilon_certified : float
        Thm 4.1 at the returned fold, 60-digit evaluation.
    grid : int
    solver : str
    seconds : float
    details : dict
    """

    fold: DiscreteFold
    value: float
    laplace_value: float
    lp_value: float
    bound: float
    laplace: LaplaceOptimality
    epsilon_certified: float
    grid: int
    solver: str
    seconds: float
    details: dict = field(default_factory=dict)

    @property
    def is_laplace(self) -> bool:
        return self.fold.is_degenerate


def _cost_in_s(objective: LinearObjective, delta: float):
    return lambda s: objective.cost(np.asarray(s, dtype=float) / delta)


def min_on_line(fun, grid: np.ndarray) -> tuple[float, float]:
    """Global minimum of a 1-D function of s > 0: a log grid (extended while the minimum
    sits at one of its ends), then bounded refinement around each of the eight lowest local
    minima of the grid (distinct basins)."""
    values = fun(grid)
    values = np.where(np.isfinite(values), values, np.inf)
    for _ in range(40):  # a minimum at an end of the grid: extend the grid beyond it
        i = int(np.argmin(values))
        if 0 < i < grid.size - 1:
            break
        ratio = grid[1] / grid[0]
        step = ratio ** np.arange(1, 2001)
        extra = grid[-1] * step if i == grid.size - 1 else grid[0] / step[::-1]
        if not np.all(np.isfinite(extra)) or extra.min() <= 0:
            break
        more = fun(extra)
        more = np.where(np.isfinite(more), more, np.inf)
        grid = np.concatenate([grid, extra]) if i else np.concatenate([extra, grid])
        values = np.concatenate([values, more]) if i else np.concatenate([more, values])
    padded = np.concatenate([[np.inf], values, [np.inf]])
    local = np.flatnonzero((values <= padded[:-2]) & (values <= padded[2:]))
    order = local[np.argsort(values[local])[:8]]
    best_s, best_v = float(grid[order[0]]), float(values[order[0]])
    for i in order:
        lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)]
        if hi <= lo:
            continue
        res = optimize.minimize_scalar(lambda ls: float(fun(np.array([math.exp(ls)]))[0]),
                                       bounds=(math.log(lo), math.log(hi)), method="bounded",
                                       options={"xatol": 1e-12})
        if res.fun < best_v:
            best_s, best_v = math.exp(res.x), float(res.fun)
    return best_s, best_v


def laplace_optimality(objective: LinearObjective, epsilon: float, delta: float) -> LaplaceOptimality:
    """Is Laplace (t ≡ ε/Δ) optimal among *all* R²DP mechanisms for this metric? (dual test)"""
    cost = _cost_in_s(objective, delta)
    h = 1e-5 * epsilon
    slope = float((cost(np.array([epsilon + h])) - cost(np.array([epsilon - h])))[0] / (2 * h))
    lam = max(-slope / epsilon, 0.0)  # r'(ε) = ε in units s = Δt
    c0 = float(cost(np.array([epsilon]))[0])
    s_min, v_min = min_on_line(lambda s: cost(s) + lam * constraint_row(s, epsilon), _dual_grid(objective, epsilon))
    margin = (v_min - c0) / max(abs(c0), 1e-300)
    return LaplaceOptimality(margin >= -1e-10, lam, margin, s_min)


def solve_mixture_lp(costs: np.ndarray, row: np.ndarray) -> tuple[np.ndarray, float, str]:
    """min c·w over w ≥ 0, Σw = 1, row·w ≤ 0 (cvxpy, HiGHS else Clarabel): (w clipped at 0, the privacy
    constraint's multiplier, the solver's name).

    Raises
    ------
    SolverError
        If no solver reaches optimality.
    """
    import cvxpy as cp  # deferred: importing cvxpy is slow, and only this LP needs it

    w = cp.Variable(costs.size, nonneg=True)
    constraints = [cp.sum(w) == 1, row @ w <= 0]
    problem = cp.Problem(cp.Minimize(costs @ w), constraints)
    solution = solve_convex(problem, ("HIGHS", "CLARABEL"), program="the R²DP mixture LP did not solve",
                            accept=("optimal",))
    if solution.status != "optimal" or w.value is None:
        raise SolverError(f"the R²DP mixture LP did not solve ({solution.status})")
    lam = float(constraints[1].dual_value)
    return np.maximum(np.asarray(w.value, dtype=float), 0.0), max(lam, 0.0), solution.solver


def _two_atoms(cost, epsilon: float, s1: float, s2: float, use_log: bool) -> tuple[float, float, float]:
    """Polish a two-atom law s₁ < ε < s₂ with the constraint active: weight on s₁ is
    p = r(s₂)/(r(s₂) − r(s₁))."""

    def mix(x):
        a = epsilon * math.exp(-math.exp(x[0]))
        b = epsilon * math.exp(math.exp(x[1]))
        ra, rb = constraint_row(np.array([a, b]), epsilon)
        p = rb / (rb - ra)
        ca, cb = cost(np.array([a, b]))
        return a, b, p, p * ca + (1 - p) * cb

    def objective(x):
        value = mix(x)[3]
        if not np.isfinite(value):
            return np.inf
        return math.log(value) if use_log else value

    x0 = [math.log(math.log(epsilon / s1)), math.log(math.log(s2 / epsilon))]
    res = optimize.minimize(objective, x0, method="Nelder-Mead",
                            options={"xatol": 1e-10, "fatol": 1e-14, "maxiter": 4000})
    a, b, p, _ = mix(res.x if res.fun <= objective(x0) else x0)
    return a, b, p


def certify_fold(fold: SecondFold, epsilon: float, delta: float) -> tuple[SecondFold, float]:
    """Scale t down until Thm 4.1 at 60 digits gives ε(fold) ≤ ε (digest P7)."""

    def ok(c: float) -> bool:
        return r2dp_epsilon_mp(fold.scaled(c), delta) <= epsilon

    c = nudge_until(1.0, ok, up=False)
    scaled = fold.scaled(c) if c != 1.0 else fold
    return scaled, float(r2dp_epsilon_mp(scaled, delta))


def _best_dual(cost, epsilon: float, lam0: float, grid: np.ndarray) -> tuple[float, float, float]:
    """max over λ ≥ 0 of g(λ) = inf_s c(s) + λ r(s) (concave), started at the LP's dual
    value: every g(λ) is a valid bound, the maximisation only tightens it (the LP's
    multiplier can be imprecise when the costs are tiny, digest P8). λ is tuned on the
    grid values alone (c on the grid computed once); the bound returned is g at that λ
    with the full refinement of :func:`min_on_line`."""
    c_grid, r_grid = cost(grid), constraint_row(grid, epsilon)
    c_grid = np.where(np.isfinite(c_grid), c_grid, np.inf)

    def coarse(lam: float) -> float:
        return float(np.min(c_grid + lam * r_grid))

    def g(lam: float) -> tuple[float, float]:
        return min_on_line(lambda x: cost(x) + lam * constraint_row(x, epsilon), grid)

    best = (lam0, *g(lam0))
    if lam0 > 0:
        res = optimize.minimize_scalar(lambda ll: -coarse(math.exp(ll)),
                                       bounds=(math.log(lam0) - 2.0, math.log(lam0) + 2.0),
                                       method="bounded", options={"xatol": 1e-8, "maxiter": 60})
        lam = math.exp(res.x)
        s_min, v_min = g(lam)
        if v_min > best[2]:
            best = (lam, s_min, v_min)
    return best


@dataclass(frozen=True)
class GridLP:
    """The LP over mixture weights on a grid, as solved (before any polishing or re-check).

    Attributes
    ----------
    s : numpy.ndarray
        The grid, in units s = Δt: ε·10^k, k log-spaced over [−4, 4], the point nearest ε
        replaced by ε itself (Laplace).
    costs, row : numpy.ndarray
        c(s/Δ) and the constraint row r(s).
    weights : numpy.ndarray
        The solver's mixture weights (clipped at 0).
    multiplier : float
        The dual value of the privacy constraint, in the costs' units.
    solver : str
    """

    s: np.ndarray
    costs: np.ndarray
    row: np.ndarray
    weights: np.ndarray
    multiplier: float
    solver: str


def mixture_lp(objective: LinearObjective, epsilon: float, delta: float, grid: int = DEFAULT_GRID) -> GridLP:
    """Solve the mixture LP on ``grid`` rates with cvxpy (HiGHS, else Clarabel); costs are
    normalised by Laplace's for conditioning.

    Raises
    ------
    SolverError
        If a cost is not finite on the grid or no solver reaches optimality.
    """
    s = np.logspace(*GRID_DECADES, grid) * epsilon
    s[np.argmin(np.abs(np.log(s / epsilon)))] = epsilon  # Laplace's rate is on the grid
    cost = _cost_in_s(objective, delta)
    c = cost(s)
    if not np.all(np.isfinite(c)):
        raise SolverError(f"the {objective.name} cost is not finite on the LP grid")
    row = constraint_row(s, epsilon)
    c0 = float(cost(np.array([epsilon]))[0])
    norm = abs(c0) if c0 != 0 else 1.0
    w, lam, solver = solve_mixture_lp(c / norm, row)
    return GridLP(s, c, row, w, lam * norm, solver)


def _metric_or_limit(objective: LinearObjective, expectation: float) -> float:
    """The metric of a dual bound; the trivial limit when the bound leaves its domain."""
    try:
        return objective.to_metric(expectation)
    except ValueError:
        return math.inf if objective.higher_is_better else -math.inf


def optimize_mixture(objective: LinearObjective, epsilon: float, delta: float,
                     grid: int = DEFAULT_GRID, dual_bound: bool = True) -> MixtureOptimum:
    """The best second fold for ``objective`` at (ε, Δ): LP on ``grid`` rates, two-atom
    polish, exact re-check, dual bound and Laplace-optimality test (module docstring).

    When the LP cannot be solved in floating point (large ε: the constraint row spans
    e^ε, and the optimal weight on the low atom is ~e^{−ε}, digest P8), the two-atom
    search runs from a default start instead and the record says so; its multiplier
    (the slope of the chord between the atoms) seeds the dual bound.

    ``dual_bound=False`` skips the dual bound (``bound`` is then NaN, no ``dual_multiplier`` in ``details``): the
    fold is the same, it does not depend on the bound (a report's utility curve needs the fold's value only).

    Raises
    ------
    SolverError
        If no candidate passes the exact privacy check.
    """
    start = time.perf_counter()
    cost = _cost_in_s(objective, delta)
    candidates = [DiscreteFold([epsilon / delta])]
    details: dict = {}
    try:
        lp = mixture_lp(objective, epsilon, delta, grid)
    except SolverError as exc:
        lp = None
        details["lp_failure"] = str(exc)
        s1 = s2 = None
        use_log = True
    if lp is not None:
        s, c, w, lam = lp.s, lp.costs, lp.weights, lp.multiplier
        support = np.flatnonzero(w > 1e-9 * w.max())
        candidates.append(DiscreteFold(s[support] / delta, w[support]))
        details.update(lp_support=(s[support] / delta).tolist(), lp_weights=w[support].tolist())
        low, high = s[support][s[support] < epsilon], s[support][s[support] > epsilon]
        s1 = s2 = None
        if low.size and high.size:
            s1 = float(np.exp(np.average(np.log(low), weights=w[support][s[support] < epsilon])))
            s2 = float(np.exp(np.average(np.log(high), weights=w[support][s[support] > epsilon])))
        use_log = bool(np.all(c > 0))
    # two-atom polish from the LP's support, and from a default start (the LP may miss a
    # low atom whose optimal weight is below its tolerance, digest P8)
    starts = [(min(1.0, epsilon / 2.0), 2.0 * epsilon)] + ([(s1, s2)] if s1 is not None else [])
    for a0, b0 in starts:
        a, b, p = _two_atoms(cost, epsilon, a0, b0, use_log=use_log)
        candidates.append(DiscreteFold([a / delta, b / delta], [p, 1 - p]))
        if lp is None:  # the chord's slope: the multiplier of the two-atom solution
            ca, cb = cost(np.array([a, b]))
            ra, rb = constraint_row(np.array([a, b]), epsilon)
            lam = max(-(cb - ca) / (rb - ra), 0.0)

    best = None
    for candidate in candidates:
        certified, eps_cert = certify_fold(candidate, epsilon, delta)
        expect = float(certified.weights @ objective.cost(certified.atoms))
        if best is None or expect < best[2] - 1e-12 * abs(best[2]):
            best = (certified, eps_cert, expect)
    if best is None:
        raise SolverError("no R²DP candidate passed the exact privacy check")
    fold, eps_cert, _ = best

    dual_v = math.nan
    if dual_bound:
        lam, dual_s, dual_v = _best_dual(cost, epsilon, lam, _dual_grid(objective, epsilon))
        details.update(dual_multiplier=lam, dual_argmin=dual_s / delta)
    laplace = laplace_optimality(objective, epsilon, delta)
    laplace_fold = certify_fold(DiscreteFold([epsilon / delta]), epsilon, delta)[0]
    if laplace.optimal:
        fold, eps_cert = laplace_fold, float(r2dp_epsilon_mp(laplace_fold, delta))
    return MixtureOptimum(
        fold=fold,
        value=objective.fold_value(fold),
        laplace_value=objective.fold_value(laplace_fold),
        lp_value=objective.to_metric(float(lp.weights @ lp.costs)) if lp is not None else math.nan,
        bound=_metric_or_limit(objective, dual_v) if dual_bound else math.nan,
        laplace=laplace,
        epsilon_certified=eps_cert,
        grid=int(lp.s.size) if lp is not None else 0,
        solver=lp.solver if lp is not None else "none (LP failed; two-atom search)",
        seconds=time.perf_counter() - start,
        details=details,
    )
