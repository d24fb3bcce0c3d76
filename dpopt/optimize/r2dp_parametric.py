r"""The paper's parametric search: the best member of one second-fold family.

Mohammady et al. (App. D, Alg. 1) maximise utility over the parameters of chosen
families (Gamma, uniform, truncated Gaussian; non-central χ² and Rayleigh in the
experiments; their sum, the "ensemble") subject to the *equality* ε(params) = ε, with a
Lagrange multiplier and no stated solver, starts or bounds (digest P16). Here:

* ε(c·t; Δ) = ε(t; cΔ) increases in the scale c, and every metric handled improves with
  c, so the constraint is active and the scale is *solved* for each shape
  (:func:`dpopt.privacy.r2dp.rate_scale_for_epsilon`); the search runs over shape
  parameters only, unconstrained (logs / logits), by Nelder–Mead from ``starts`` seeded
  random points (above two parameters with the dimension-adapted coefficients of Gao &
  Han 2012, stopping once the simplex's values agree to 1e-11: the six-parameter
  ensemble has flat directions in which the simplex never shrinks; each scale is solved
  from the previous evaluation's);
* the result is re-checked exactly (Thm 4.1 at 60 digits) and scaled down until it holds
  (digest P7); the seed and the number of starts are recorded.

The global optimum over *all* second folds is the LP of :mod:`dpopt.optimize.r2dp_lp`;
no family found here can beat it (tested), and the gap shows how far each family is.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import optimize, special

from dpopt.errors import SolverError
from dpopt.noise.second_folds import (
    DiscreteFold,
    GammaFold,
    NoncentralChi2Fold,
    RayleighFold,
    SecondFold,
    SumFold,
    TruncatedNormalFold,
    UniformFold,
)
from dpopt.optimize.r2dp_lp import certify_fold
from dpopt.optimize.r2dp_objectives import LinearObjective
from dpopt.privacy.r2dp import rate_scale_for_epsilon


@dataclass(frozen=True)
class Family:
    """A parametric family of second folds with its shape parameters unconstrained.

    ``build(x)`` gives a member (its overall scale is then solved for ε); ``box`` is the
    range the random starts are drawn from.
    """

    name: str
    build: Callable[[np.ndarray], SecondFold]
    box: tuple[tuple[float, float], ...]


FAMILIES: dict[str, Family] = {
    "gamma": Family("gamma", lambda x: GammaFold(math.exp(x[0]), 1.0), ((-1.0, 3.0),)),
    "uniform": Family("uniform", lambda x: UniformFold(float(special.expit(x[0])), 1.0), ((-4.0, 4.0),)),
    "truncated_normal": Family(
        "truncated_normal", lambda x: TruncatedNormalFold(x[0], 1.0, math.exp(x[1])), ((-3.0, 3.0), (-3.0, 1.0))),
    "noncentral_chi2": Family(
        "noncentral_chi2", lambda x: NoncentralChi2Fold(math.exp(x[0]), math.exp(x[1])), ((-1.0, 3.0), (-3.0, 3.0))),
    "rayleigh": Family("rayleigh", lambda x: RayleighFold(1.0), ()),
    "bernoulli": Family(
        "bernoulli",
        lambda x: DiscreteFold([1.0, 1.0 + math.exp(x[0])], [float(special.expit(x[1])), float(special.expit(-x[1]))]),
        ((-2.0, 5.0), (-4.0, 4.0))),
    "ensemble": Family(
        "ensemble",
        lambda x: SumFold([
            GammaFold(math.exp(x[0]), 1.0),
            UniformFold(float(special.expit(x[1])) * math.exp(x[2]), math.exp(x[2])),
            TruncatedNormalFold(x[3] * math.exp(x[5]), math.exp(x[5]), math.exp(x[4] + x[5])),
        ]),
        ((-1.0, 3.0), (-4.0, 4.0), (-2.0, 2.0), (-3.0, 3.0), (-3.0, 1.0), (-2.0, 2.0))),
}
"""The families of the paper (§5, App. B, Alg. 1) plus the two-atom law (Example 3.1)."""


@dataclass(frozen=True)
class ParametricOptimum:
    """The best member found of one family.

    Attributes
    ----------
    family : str
    fold : SecondFold
        Scaled so that Thm 4.1 (60 digits) gives ε(fold) ≤ ε.
    value : float
        Its metric (from the MGF).
    epsilon_certified : float
    starts, seed, evaluations : int
    seconds : float
    """

    family: str
    fold: SecondFold
    value: float
    epsilon_certified: float
    starts: int
    seed: int
    evaluations: int
    seconds: float


def _member(family: Family, x: np.ndarray, epsilon: float, delta: float, guess: float | None = None
            ) -> tuple[SecondFold, float]:
    """The member of shape ``x`` scaled to ε(fold) = ε, and the scale factor (``guess``: a
    neighbouring shape's factor, to start the scale's bracket from)."""
    fold = family.build(x)
    scale = rate_scale_for_epsilon(fold, epsilon, delta, guess)
    return fold.scaled(scale), scale


def optimize_family(family: str | Family, objective: LinearObjective, epsilon: float, delta: float,
                    starts: int = 6, seed: int = 0) -> ParametricOptimum:
    """Multi-start search over one family's shapes at the active constraint ε(fold) = ε.

    Raises
    ------
    SolverError
        If no start gives a finite metric.
    """
    fam = FAMILIES[family] if isinstance(family, str) else family
    start_time = time.perf_counter()
    sign = -1.0 if objective.higher_is_better else 1.0
    count = 0

    last_scale = None  # Nelder–Mead's consecutive shapes are close: their scales too

    def loss(x: np.ndarray) -> float:
        nonlocal count, last_scale
        count += 1
        try:
            fold, last_scale = _member(fam, x, epsilon, delta, last_scale)
            value = objective.fold_value(fold)
        except (ValueError, ArithmeticError, OverflowError, FloatingPointError):
            return math.inf
        return sign * value if math.isfinite(value) else math.inf

    rng = np.random.default_rng(seed)
    best_x, best_loss = None, math.inf
    if not fam.box:
        best_x, best_loss = np.zeros(0), loss(np.zeros(0))
    else:
        lows = np.array([b[0] for b in fam.box])
        highs = np.array([b[1] for b in fam.box])
        for _ in range(starts):
            x0 = rng.uniform(lows, highs)
            if not math.isfinite(loss(x0)):
                continue
            many = len(x0) > 2
            res = optimize.minimize(loss, x0, method="Nelder-Mead",
                                    options={"xatol": math.inf if many else 1e-6, "fatol": 1e-11,
                                             "maxiter": 300 * len(x0), "adaptive": many})
            if res.fun < best_loss:
                best_x, best_loss = res.x, float(res.fun)
    if best_x is None or not math.isfinite(best_loss):
        raise SolverError(f"no member of the {fam.name} family has a finite {objective.name}")
    fold, eps_cert = certify_fold(_member(fam, best_x, epsilon, delta)[0], epsilon, delta)
    return ParametricOptimum(fam.name, fold, objective.fold_value(fold), eps_cert, starts, seed, count,
                             time.perf_counter() - start_time)
