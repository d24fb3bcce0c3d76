r"""The best discrete Laplace mixture for a per-coordinate metric: the R²DP mixture LP on the integers.

A mixture Σ_j w_j DLap(1/t_j) (:mod:`dpopt.noise.discrete_laplace_mixture`) meets ε at an integer shift Δ iff
a(0) ≤ e^ε a(Δ) (:mod:`dpopt.privacy.r2dp_lattice`), i.e. the constraint is linear in the weights:

.. math:: \sum_j w_j\, r(t_j) \le 0, \qquad r(t) = \tanh(t/2)\,\big(1 - e^{\varepsilon - \Delta t}\big),

the lattice form of the continuous LP's t(1 − e^{ε−Δt}) (:mod:`dpopt.optimize.r2dp_lp`). Every metric below is
E[c(t)] for the per-component cost c of DLap(1/t), so the best mixture on a grid of rates is the same LP
(:func:`~dpopt.optimize.r2dp_lp.solve_mixture_lp`), its basic solutions two atoms at most:

=============  ====================================================  ======================
metric         c(t) (discrete Laplace of rate t, r = e^{−t})          metric from E[c]
=============  ====================================================  ======================
usefulness γ   P(|Z| > γ) = 2r^{⌊γ⌋+1}/(1 + r)                        1 − E[c]
l1             E|Z| = 2r/(1 − r²)                                    d·E[c]
l2             E Z² = 2r/(1 − r)²                                    ‖W‖_F²·E[c]
kl, renyi      the clipped release's divergence (finite sums)        as the continuous family
=============  ====================================================  ======================

The caller's grid holds the rates of dyadic scales (the exact sampler's), so the LP's atoms are the released ones.
Nothing is taken on trust: the mechanism re-certifies the mixture with rounded integer weights in ball arithmetic.
Weak duality bounds every mixture (any scales): for λ ≥ 0, E c ≥ inf_{t>0} c(t) + λ r(t) (evaluated on a log grid refined around its minima,
:func:`~dpopt.optimize.r2dp_lp.min_on_line`); the discrete Laplace (one atom at t₀ = ε/Δ, r(t₀) = 0) is optimal
among all mixtures when that bound at λ* = −c'(t₀)/r'(t₀) reaches c(t₀).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from dpopt.errors import SolverError
from dpopt.noise.discrete_laplace_mixture import DiscreteLaplaceMixture, round_weights
from dpopt.noise.prior_metrics import kl_from_expectations, renyi_bracket_from_expectations
from dpopt.optimize.r2dp_lp import min_on_line, solve_mixture_lp
from dpopt.spec.models import Utility

LATTICE_METRICS = ("l1", "l2", "max_variance", "usefulness", "kl", "renyi")
"""Metrics the lattice LP optimises (``mallows`` is not linear in the mixture: the mechanism values candidates by
their exact Mallows distance, :mod:`dpopt.mechanisms.r2dp_counts`)."""

MAX_SUM_TERMS = 5 * 10**7
"""Largest (grid rates × cells × summed integers) of a prior metric's per-atom costs: beyond, the lattice design
is refused (the sums grow with the noise scale)."""


@dataclass(frozen=True)
class LatticeObjective:
    """A per-coordinate cost c(t) of DLap(1/t), minimised in expectation over the mixture.

    Attributes
    ----------
    name, description : str
    cost : callable
        c(t), vectorised over rates t > 0.
    cheap : bool
        False when c(t) is a sum per rate (the prior metrics): coarser grids.
    """

    name: str
    cost: Callable[[np.ndarray], np.ndarray]
    description: str
    cheap: bool = True


def _geometric(t, form: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> np.ndarray:
    """``form(r, 1 − r)`` at r = e^{−t} (1 − r by ``expm1``: no cancellation at small t), vectorised."""
    t = np.asarray(t, dtype=float)
    return form(np.exp(-t), -np.expm1(-t))


def lattice_objective(utility: Utility) -> LatticeObjective | None:
    """The per-coordinate objective of ``utility`` on the lattice; None for a metric not in
    :data:`LATTICE_METRICS`."""
    metric = utility.metric
    if metric == "usefulness":
        m = math.floor(utility.gamma) + 1
        return LatticeObjective(metric, lambda t: _geometric(t, lambda r, q: 2.0 * r**m / (1.0 + r)),
                                f"P(|Z| > {utility.gamma:g}) = Σ w_j 2r_j^{m}/(1 + r_j)")
    if metric == "l1":
        return LatticeObjective(metric, lambda t: _geometric(t, lambda r, q: 2.0 * r / (q * (1.0 + r))),
                                "E|Z| = Σ w_j 2r_j/(1 − r_j²)")
    if metric in ("l2", "max_variance"):
        return LatticeObjective(metric, lambda t: _geometric(t, lambda r, q: 2.0 * r / q**2),
                                "E Z² = Σ w_j 2r_j/(1 − r_j)²")
    if metric == "kl":
        return LatticeObjective(metric, lambda t: _kl_costs(utility, t),
                                f"generalised KL of the released histogram clipped at {utility.floor:g} (sums over ℤ)",
                                cheap=False)
    if metric == "renyi":
        return LatticeObjective(metric, lambda t: _renyi_costs(utility, t),
                                f"Rényi divergence of order {utility.order:g}, histogram clipped at "
                                f"{utility.floor:g} (sums over ℤ)", cheap=False)
    return None


def _components(t) -> DiscreteLaplaceMixture:
    """The discrete Laplace laws of rates t, as the components of one mixture (equal weights, unused)."""
    t = np.ravel(np.asarray(t, dtype=float))
    return DiscreteLaplaceMixture(tuple(Fraction(1.0 / x) for x in t), (1,) * t.size)


def _kl_costs(utility: Utility, t) -> np.ndarray:
    """The generalised KL of the clipped release (:func:`~dpopt.noise.prior_metrics.kl_divergence`) of
    DLap(1/t) for every rate t."""
    laws, c = _components(t), np.asarray(utility.prior, dtype=float)
    mean_r = laws.component_expectations(lambda y: y, c, utility.floor)
    mean_log = laws.component_expectations(np.log, c, utility.floor)
    return kl_from_expectations(utility.prior, mean_r, mean_log)


def _renyi_costs(utility: Utility, t) -> np.ndarray:
    """The Rényi bracket (:func:`~dpopt.noise.prior_metrics.renyi_divergence`) of DLap(1/t) for every rate t,
    signed so that it is minimised: the metric is ln(1 + bracket)/(α − 1)."""
    laws, c, order = _components(t), np.asarray(utility.prior, dtype=float), utility.order
    powers = np.where(c > 0, laws.component_expectations(lambda y: y ** (1.0 - order), c, utility.floor), 0.0)
    mean_r = laws.component_expectations(lambda y: y, c, utility.floor)
    bracket = renyi_bracket_from_expectations(utility.prior, order, powers, mean_r)
    return bracket if order > 1 else -bracket


def lattice_row(t, epsilon: float, shift: int) -> np.ndarray:
    """r(t) = tanh(t/2)(1 − e^{ε − Δt}) (the privacy constraint is Σ w_j r(t_j) ≤ 0)."""
    t = np.asarray(t, dtype=float)
    return np.tanh(t / 2.0) * -np.expm1(epsilon - shift * t)


@dataclass(frozen=True)
class LatticeOptimum:
    """The LP's mixture and what it proves.

    Attributes
    ----------
    mixture : DiscreteLaplaceMixture
        The LP's support with weights rounded to integers over 2^32 (the last atom, the one with the most negative
        constraint value, takes the remainder: rounding moves mass toward privacy); not yet certified.
    bound : float
        Weak-duality lower bound on E[c] of every mixture meeting ε at Δ.
    laplace_optimal : bool
        The dual certificate of the one-atom law's optimality among all mixtures (module docstring).
    multiplier : float
    grid : int
    solver : str
    """

    mixture: DiscreteLaplaceMixture
    bound: float
    laplace_optimal: bool
    multiplier: float
    grid: int
    solver: str


def grid_decades(objective: LatticeObjective) -> tuple[float, float]:
    """The LP grid's rates, in decades around the discrete Laplace's ε/Δ: [−2, 2]; [−1, 2] for the prior metrics,
    whose sums grow with the largest scale (and whose optima are within a factor 2 of ε/Δ on the examples)."""
    return (-2.0, 2.0) if objective.cheap else (-1.0, 2.0)


def grid_points(objective: LatticeObjective) -> int:
    """Rates of the LP's grid: 801, 161 for the prior metrics (a sum per rate)."""
    return 801 if objective.cheap else 161


def sum_terms(objective: LatticeObjective, epsilon: float, shift: int, cells: int) -> int:
    """The work of the prior metrics' sums at the dual bound's largest scale 100Δ/ε (0 for closed forms)."""
    if objective.cheap:
        return 0
    largest = 100.0 * shift / epsilon
    return grid_points(objective) * cells * 2 * DiscreteLaplaceMixture((Fraction(largest),), (1,)).truncation


def optimize_lattice_mixture(objective: LatticeObjective, epsilon: float, shift: int,
                             scales: list[Fraction]) -> LatticeOptimum:
    """The LP over mixtures of discrete Laplace laws of the given dyadic ``scales``, at per-coordinate ε and integer
    shift Δ, with its dual bound (module docstring).

    Raises
    ------
    SolverError
        If the LP does not solve.
    """
    t = np.array([1.0 / float(s) for s in scales])
    costs, row = objective.cost(t), lattice_row(t, epsilon, shift)
    if not np.all(np.isfinite(costs)):
        raise SolverError(f"the {objective.name} cost is not finite on the lattice grid")
    t0 = epsilon / shift
    c0 = float(objective.cost(np.array([t0]))[0])
    norm = abs(c0) if c0 != 0 else 1.0
    w, lam, solver = solve_mixture_lp(costs / norm, row)
    lam *= norm
    support = np.flatnonzero(w > 1e-9 * w.max())
    order = support[np.argsort(-row[support])]  # the most negative constraint value last
    mixture = DiscreteLaplaceMixture(tuple(scales[i] for i in order), round_weights(w[order]))

    dual_grid = t0 * (np.logspace(-4.0, 4.0, 4001) if objective.cheap else np.logspace(-2.0, 4.0, 301))
    h = 1e-5 * t0
    slope = float((objective.cost(np.array([t0 + h])) - objective.cost(np.array([t0 - h])))[0] / (2 * h))
    lam_star = max(-slope / float(np.tanh(t0 / 2.0) * shift), 0.0)  # r'(t₀) = tanh(t₀/2)·Δ
    bounds = {}
    for m in {lam, lam_star}:
        bounds[m] = min_on_line(lambda x, m=m: objective.cost(x) + m * lattice_row(x, epsilon, shift), dual_grid)[1]
    best_lam = max(bounds, key=bounds.get)
    optimal = bounds[lam_star] >= c0 - 1e-10 * abs(c0)
    return LatticeOptimum(mixture, bounds[best_lam], optimal, best_lam, len(scales), solver)
