r"""Weighted marginals measured with Laplace noise: the strategy weights for a marginal workload (pure ε).

HDMM's marginal strategy (McKenna et al., VLDB 2018, Sec. 5): measure
:math:`y_S = \theta_S M_S x + \mathrm{Lap}(b)^{\otimes}` for the marginals S of the workload's
closure U, then answer W by least squares, :math:`W\hat x = W(A^\top A)^+A^\top y` with
:math:`A = [\theta_S M_S]_S`. In the ANOVA algebra :math:`A^\top A = \sum_T \kappa_T E_T`,
:math:`\kappa_T = \sum_{S \supseteq T} \theta_S^2 \prod_{k\notin S} n_k`, so the error is

.. math:: E\|W\hat x - Wx\|^2 = 2b^2 \sum_T \frac{m_T\lambda_T}{\kappa_T},\qquad
          b = \frac{\Delta_1(\theta)}{\varepsilon},\quad
          \Delta_1(\theta) = k\sum_S \theta_S\ \text{(add/remove)},\ \
          2k\sum_{S\ \mathrm{moving}} \theta_S\ \text{(replace-one)},

(one record adds θ_S to one cell of each measured marginal; two records that differ in every
attribute move two cells of every marginal with an attribute of ≥ 2 levels; Hamming-k sums k of
them). The error is homogeneous of degree 0 in θ and not convex: it is minimised from several
starts (the workload's own blocks, uniform weights on U, random points; L-BFGS-B on θ ≥ 0) and
the best is kept. The certified ε depends only on the stored θ and b (Δ₁(θ)/b, exact), never
on the optimiser.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dpopt.domain.marginal_algebra import MarginalWorkload, Subset
from dpopt.errors import CalibrationError

RESTARTS = 8
"""Random starts besides the two structured ones."""

SEED = 20261127


@dataclass(frozen=True)
class StrategyDesign:
    """The best weights found: θ_S per measured marginal (the others are 0), and the error at ε = 1."""

    weights: dict[Subset, float]
    unit_error: float
    starts: int


def strategy_sets(workload: MarginalWorkload, replace: bool) -> tuple[Subset, ...]:
    """The candidate marginals U: the workload's closure (without ∅ under replace-one)."""
    return tuple(s for s in workload.closure if not (replace and s == ()))


def moving(workload: MarginalWorkload, s: Subset) -> bool:
    """Whether two records can put different values in marginal s (an attribute with ≥ 2 levels)."""
    return any(workload.algebra.sizes[k] >= 2 for k in s)


def precisions(workload: MarginalWorkload, weights: dict[Subset, float], ts: tuple[Subset, ...]) -> dict[Subset, float]:
    """κ_T = Σ_{S⊇T} θ_S² ∏_{k∉S} n_k for each T of ``ts``."""
    alg = workload.algebra
    return {t: sum(w * w * alg.co_size(s) for s, w in weights.items() if set(t) <= set(s)) for t in ts}


def optimal_weights(workload: MarginalWorkload, ts: tuple[Subset, ...], replace: bool) -> StrategyDesign:
    """Weights θ minimising Δ₁(θ)² Σ_T m_T λ_T / κ_T(θ) over the components ``ts`` (restarts, best kept).

    Raises
    ------
    CalibrationError
        No start gives weights that cover every component.
    """
    from scipy import optimize  # imported where used (start-up of `dpopt verify`)

    alg = workload.algebra
    sets = strategy_sets(workload, replace)
    counted = np.array([1.0 if not replace else 2.0 * moving(workload, s) for s in sets])
    contains = np.array([[float(set(t) <= set(s)) for s in sets] for t in ts])  # T × S
    co = np.array([float(alg.co_size(s)) for s in sets])
    c = np.array([alg.multiplicity(t) * float(workload.gram_eigenvalue(t)) for t in ts])

    def objective(theta: np.ndarray) -> tuple[float, np.ndarray]:
        kappa = contains @ (theta * theta * co)
        if np.any(kappa <= 0):
            return np.inf, np.zeros_like(theta)
        ell = counted @ theta
        r = float(np.sum(c / kappa))
        grad = 2.0 * ell * r * counted - ell * ell * ((c / kappa**2) @ contains) * 2.0 * theta * co
        return ell * ell * r, grad

    rng = np.random.default_rng(SEED)
    blocks = np.array([1.0 if s in workload.sets else 1e-3 for s in sets])
    starts = [blocks, np.ones(len(sets))] + [rng.uniform(0.05, 1.0, len(sets)) for _ in range(RESTARTS)]
    best = None
    for start in starts:
        found = optimize.minimize(objective, start, jac=True, method="L-BFGS-B",
                                  bounds=[(0.0, None)] * len(sets), options={"maxiter": 2000})
        value, _ = objective(found.x)
        if np.isfinite(value) and (best is None or value < best[0]):
            best = (value, found.x)
    if best is None:
        raise CalibrationError("no strategy weights cover every component of the workload")
    theta = best[1] / best[1].max()
    weights = {s: float(w) for s, w in zip(sets, theta) if w > 0}
    return StrategyDesign(weights, float(objective(theta)[0]) * 2.0, len(starts))
