r"""Per-cell standard error and 95% margin of error of a release: what a statistician reads first.

For released cell i with noise Z_i (mean zero: every family's noise is symmetric),

* the **standard error** is :math:`\sqrt{\mathbb E Z_i^2}`, the root mean squared error of the
  cell (the noise's standard deviation);
* the **95% margin of error** is the smallest m with :math:`P(|Z_i| \le m) \ge 0.95`: the
  released cell is within m of the true count in 95% of releases. For Gaussian noise
  m = 1.959964·SE; for heavier-tailed noise (Laplace, K-norm) it is computed from the law.

How, in order of preference (each cell records its method):

1. the noise law is a product Z = B·W of independent marginals with B the identity: E W² by
   numerical integration of the marginal (:meth:`Marginal.abs_moment`, exact for Gaussians)
   and m from its tail, 2·P(W > m) = 0.05 (bisection; the smallest integer for a lattice law);
2. B·W with Gaussian W: coordinate i is N(0, Σ_k B_ik² σ_k²), a closed form; Gaussian noise too
   large to state as a law: the family's closed-form variances (:meth:`Mechanism.cell_variances`);
3. otherwise (K-norm, families without a law) a Monte Carlo of the mechanism's own sampler
   (:data:`DRAWS` draws, fewer when d is large; seed :data:`SEED`).

A post-processed release (e.g. James–Stein shrinkage) is described by its noise stage, and
says so: the error after the post-processing depends on the true answer.
"""

from __future__ import annotations

import math

import numpy as np

from dpopt.core import normal
from dpopt.mechanisms import Mechanism
from dpopt.noise.law import PostProcessedLaw, ProductLaw

LEVEL = 0.95
Z_975 = float(normal.ndtri(0.975))  # 1.959963984540054
DRAWS = 20_000
SEED = 20261125


def _marginal_errors(marginal) -> tuple[float, float]:
    """(standard error, 95% margin of error) of one marginal law W."""
    if marginal.gaussian_sd is not None:
        return marginal.gaussian_sd, Z_975 * marginal.gaussian_sd
    se = math.sqrt(marginal.abs_moment(2.0))
    excess = (1.0 - LEVEL) / 2.0
    if marginal.lattice:
        k = 0
        while float(marginal.tail(k)) > excess:
            k += 1
        return se, float(k)
    from scipy import optimize  # imported where used (start-up of `dpopt verify`)

    hi = marginal.scale
    while float(marginal.tail(hi)) > excess:
        hi *= 2.0
    return se, float(optimize.brentq(lambda x: float(marginal.tail(x)) - excess, 0.0, hi, xtol=1e-12, rtol=1e-12))


def _from_law(law: ProductLaw) -> tuple[np.ndarray, np.ndarray, str] | None:
    observed = np.ones(law.dimension, bool) if law.observed is None else np.asarray(law.observed, bool)
    if law.basis is None:
        cache: dict = {}
        se = np.full(law.dimension, np.nan)
        moe = np.full(law.dimension, np.nan)
        for i, m in enumerate(law.marginals):
            if observed[i]:
                se[i], moe[i] = cache.setdefault(m.key, _marginal_errors(m))
        if law.gaussian:
            return se, moe, f"closed form: cell i is N(0, σ_i²) under {law.description}; margin 1.96·SE"
        return se, moe, (f"from the noise law {law.description}: E W² by integration, the margin from its tail, "
                         "2·P(W > m) = 0.05")
    if law.gaussian:
        sd = np.array([m.gaussian_sd for m in law.marginals])
        se = np.sqrt(np.asarray(law.basis, dtype=float) ** 2 @ sd**2)
        se[~observed] = np.nan
        return se, Z_975 * se, f"closed form: cell i is N(0, Σ_k B_ik² σ_k²) under {law.description}; margin 1.96·SE"
    return None


def _from_variances(mechanism: Mechanism) -> tuple[np.ndarray, np.ndarray, str] | None:
    variances = mechanism.cell_variances()
    if variances is None:
        return None
    se = np.sqrt(np.asarray(variances, dtype=float))
    return se, Z_975 * se, "closed form: cell i is N(0, Var Z_i) (the family's closed-form variances); margin 1.96·SE"


def _monte_carlo(mechanism: Mechanism) -> tuple[np.ndarray, np.ndarray, str]:
    draws = min(DRAWS, max(2_000, 40_000_000 // max(1, mechanism.dimension)))  # at most ~4·10⁷ numbers
    z = mechanism.sample(draws, np.random.default_rng(SEED))
    with np.errstate(invalid="ignore"):
        se = np.sqrt(np.mean(z**2, axis=0))
        moe = np.quantile(np.abs(z), LEVEL, axis=0)
    return se, moe, (f"Monte Carlo of the mechanism's sampler ({draws} draws, seed {SEED}): SE = √(mean Z_i²), "
                     "margin = the 95% quantile of |Z_i|")


def per_cell_errors(mechanism: Mechanism, labels) -> dict:
    """Each released cell's standard error and 95% margin of error (see the module docstring).

    Parameters
    ----------
    mechanism : Mechanism
    labels : sequence of str
        The query's cell labels (``race=other,sex=male``), in the order of the release.

    Returns
    -------
    dict
        ``{"level": 0.95, "method", "cells": [{"cell", "standard_error", "margin_of_error"}]}``;
        a cell the design does not release has nulls.
    """
    law = mechanism.noise_law()
    inner = law.inner if isinstance(law, PostProcessedLaw) else law
    found = _from_law(inner) if isinstance(inner, ProductLaw) else _from_variances(mechanism)
    se, moe, method = found if found is not None else _monte_carlo(mechanism)
    if isinstance(law, PostProcessedLaw):
        method += f"; the noise stage, before the post-processing ({law.operation}), whose error depends on the answer"
    cells = [
        {"cell": ", ".join(str(label).split(",")),
         "standard_error": float(s) if np.isfinite(s) else None,
         "margin_of_error": float(m) if np.isfinite(m) else None}
        for label, s, m in zip(labels, se, moe)
    ]
    return {"level": LEVEL, "method": method, "cells": cells}
