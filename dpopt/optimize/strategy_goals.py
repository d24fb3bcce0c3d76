r"""Table goals for the Laplace marginal strategy: the largest weighted table error, per-table targets.

For strategy weights θ (:mod:`dpopt.optimize.marginal_strategy`) and Laplace scale b = kΔ₁(θ)/ε, table S of
the workload has the expected squared error (:mod:`dpopt.optimize.table_goals`, at a_T = κ_T/2b²)

.. math:: e_S(\theta) = \frac{2k^2}{\varepsilon^2}\,u_S(\theta),\qquad
          u_S(\theta) = \Delta_1(\theta)^2 \prod_{k\notin S} n_k \sum_{T\subseteq S}\frac{m_T}{\kappa_T(\theta)},

homogeneous of degree 0 in θ. As for the total, the template is not convex in θ; the objectives are minimised
by L-BFGS-B with analytic gradients from the same seeded starts, best kept (deterministic):

* ``max``: :math:`\max_S w_S u_S` through the smooth p-norm :math:`\|(w_S u_S)_S\|_p`, p = 16 then 256
  from the first solution (within a factor (#tables)^{1/p} of the max), the best start chosen by the exact max;
* both start also from the weighted total's design (:func:`~dpopt.optimize.marginal_strategy.optimal_weights` at
  λ^w_T), which is kept as it is when nothing found beats it;
* targets τ_S: the objective times :math:`1 + M\sum_S \max(0, u_S/\tau'_S - 1)^2` with
  :math:`\tau'_S = \tau_S\varepsilon^2/2k^2` less 10⁻³, M = 10², 10⁴, 10⁶ in turn; only starts meeting every target
  (less :data:`~dpopt.optimize.table_goals.SLACK`) are kept.

The weighted total needs none of this: it is the template's objective at the weighted eigenvalues λ^w_T.
Whatever the optimiser did, the certificate's errors and targets are recomputed from the stored θ and b.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dpopt.domain.marginal_algebra import MarginalWorkload, Subset
from dpopt.errors import CalibrationError
from dpopt.optimize.marginal_strategy import SEED, PRUNE, StrategyDesign, template, optimal_weights, restarts
from dpopt.optimize.table_goals import SLACK, TableGoals, table_error_terms, weighted_eigenvalues

POWERS = (16.0, 256.0)
PENALTIES = (1e2, 1e4, 1e6)
_MARGIN = 1e-3


@dataclass(frozen=True)
class _Objective:
    weights: np.ndarray
    targets: np.ndarray  # τ' (inf: none)
    smooth_max: float | None  # p, or None for the weighted total
    penalty: float

    def value_grad(self, u: np.ndarray) -> tuple[float, np.ndarray]:
        v = self.weights * u
        if self.smooth_max is None:
            value, grad = float(v.sum()), self.weights.copy()
        else:
            p, top = self.smooth_max, float(v.max())
            ratio = v / top
            norm = float(np.sum(ratio ** p)) ** (1.0 / p)
            value = top * norm
            grad = ratio ** (p - 1.0) * norm ** (1.0 - p) * self.weights
        if self.penalty:
            over = np.maximum(u / self.targets - 1.0, 0.0)
            factor = 1.0 + self.penalty * float(np.sum(over ** 2))
            grad = grad * factor + value * 2.0 * self.penalty * over / self.targets
            value *= factor
        return value, grad


def goal_weights(workload: MarginalWorkload, ts: tuple[Subset, ...], replace: bool, goals: TableGoals,
                 unit: float, names: tuple[str, ...]) -> StrategyDesign:
    """Strategy weights for ``goals`` (module docstring); ``unit`` = ε²/2k² converts errors to u.

    Raises
    ------
    CalibrationError
        Targets no start meets (one line: the table and the best found for it alone, or the best common
        factor of the targets).
    """
    if goals.objective == "total" and goals.targets_absent:
        return optimal_weights(workload, ts, replace, weighted_eigenvalues(workload, goals.weights))
    targets = np.array([np.inf if t is None else t * unit for t in goals.targets])
    total = optimal_weights(workload, ts, replace, weighted_eigenvalues(workload, goals.weights))
    found = _search(workload, ts, replace, np.array(goals.weights), targets, goals.objective == "max", total.weights)
    if found is None:
        raise CalibrationError(_infeasible(workload, ts, replace, goals, unit, names))
    return found


def _search(workload, ts, replace, weights, targets, use_max,
            seed_design: dict[Subset, float] | None = None) -> StrategyDesign | None:
    """The best θ over the seeded starts (and ``seed_design``, kept as it is when it is best: the weighted total's
    design, so that targets it already meets cost nothing)."""
    from scipy import optimize

    sets, counted, contains, lifted, co = template(workload, ts, replace)
    q = np.zeros((len(workload.sets), len(ts)))
    index = {t: j for j, t in enumerate(ts)}
    for i, terms in enumerate(table_error_terms(workload, ts)):
        for t, term in terms.items():
            q[i, index[t]] = term

    def units(theta):
        kappa = contains @ (theta * theta * co)
        if np.any(kappa <= 0):
            return None, None, None
        ell = float(counted @ theta)
        r = q @ (1.0 / kappa)
        return ell * ell * r, kappa, ell

    def make(objective: _Objective):
        def f(theta):
            u, kappa, ell = units(theta)
            if u is None:
                return np.inf, np.zeros_like(theta)
            value, g = objective.value_grad(u)
            r = u / (ell * ell)
            grad = 2.0 * ell * float(g @ r) * counted - ell * ell * (lifted @ ((q.T @ g) / kappa**2)) * 2.0 * theta * co
            return value, grad
        return f

    limited = np.isfinite(targets)
    soft = np.where(limited, targets * (1 - _MARGIN), np.inf)
    stages = [_Objective(weights, soft, p if use_max else None, m if limited.any() else 0.0)
              for p in (POWERS if use_max else (None,)) for m in (PENALTIES if limited.any() else (0.0,))]

    def exact(theta) -> float:
        u, _, _ = units(theta)
        if u is None or np.any(u > targets * (1 - SLACK)):
            return np.inf
        return float(np.max(weights * u) if use_max else np.sum(weights * u))

    rng = np.random.default_rng(SEED)
    own = set(workload.sets)
    blocks = np.array([1.0 if s in own else 1e-3 for s in sets])
    n_random = max(2, restarts(len(sets)) // 2)
    starts = [blocks] + [rng.uniform(0.0, 1.0, len(sets)) if i % 2 == 0 else rng.exponential(1.0, len(sets)) ** 3
                         for i in range(n_random)]
    best = (np.inf, None)
    if seed_design is not None:
        seeded = np.array([seed_design.get(s, 0.0) for s in sets])
        starts.insert(0, seeded)
        best = (exact(seeded), seeded)
        if not np.isfinite(best[0]):
            best = (np.inf, None)
    for start in starts:
        theta = start
        for stage in stages:
            theta = optimize.minimize(make(stage), theta, jac=True, method="L-BFGS-B",
                                      bounds=[(0.0, None)] * len(sets), options={"maxiter": 3000}).x
        value = exact(theta)
        if value < best[0]:
            best = (value, theta)
    if best[1] is None:
        return None
    theta = best[1] / best[1].max()
    pruned = np.where(theta < PRUNE, 0.0, theta)
    if np.isfinite(exact(pruned)):
        theta = pruned
    weights_out = {s: float(w) for s, w in zip(sets, theta) if w > 0}
    return StrategyDesign(weights_out, 2.0 * exact(theta), len(starts), len(sets))


def _infeasible(workload, ts, replace, goals: TableGoals, unit: float, names) -> str:
    label = [" × ".join(names[k] for k in block) for block in workload.blocks]
    for i, tau in enumerate(goals.targets):
        if tau is None:
            continue
        alone = [1.0 if j == i else 0.0 for j in range(len(goals.weights))]
        searched = optimal_weights(workload, ts, replace, weighted_eigenvalues(workload, alone)).unit_error / 2.0
        best = min(searched, _direct(workload, ts, replace, i)) / unit
        if best > tau * (1 - SLACK):
            return (f"utility.tables: the target {tau:.6g} of table {label[i]} is below the best the strategy search "
                    f"found for that table alone (measuring it directly included) under this privacy target, "
                    f"{best:.6g}")
    ratios = np.array([0.0 if t is None else 1.0 / (t * unit) for t in goals.targets])
    found = _search(workload, ts, replace, ratios, np.full(len(ratios), np.inf), True)
    if found is None:
        return "utility.tables: the strategy search found no weights meeting every target together"
    return (f"utility.tables: the strategy search found no weights meeting every target together; the best it "
            f"found leaves every targeted table within {found.unit_error / 2.0:.6g} × its target")


def _direct(workload: MarginalWorkload, ts: tuple[Subset, ...], replace: bool, i: int) -> float:
    """u_S of measuring table S alone (θ_S = 1): κ_T = ∏_{k∉S} n_k, so u_S = Δ₁² Σ_{T⊆S} m_T over the noised T
    (Δ₁ = 1, or 2 under replace-one)."""
    s = workload.sets[i]
    ell = 2.0 if replace else 1.0
    return ell * ell * sum(workload.algebra.multiplicity(t) for t in ts if set(t) <= set(s))
