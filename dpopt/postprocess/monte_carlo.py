r"""Approximate intervals for post-processed values by Monte Carlo through the post-processing
(``intervals: {method: monte_carlo}``; the Census Bureau's approach for the 2020 TopDown tables, Ashmead et al.,
arXiv:2503.19714).

The published value p_i = g_i(y) is the post-processing g of the noisy release y. With the published table
:math:`\hat\theta` as a plug-in for the truth, R releases are simulated through the same mechanism and the same
post-processing, :math:`p^{(r)} = g(\hat\theta + Z^{(r)})`, and the errors
:math:`e^{(r)}_i = p^{(r)}_i - \hat\theta_i`, with :math:`q_\pm` their :math:`(1 \pm L)/2` quantiles, give the
**basic** bootstrap interval

.. math::  I_i = [\,p_i - q_+,\ p_i - q_-\,] \cap R

(it moves the published value back by the bias simulated at the plug-in; R as in
:mod:`dpopt.certificate.intervals`, ends rounded inward to whole counts), **except at a cell published at the
lower bound of R** (a count published as 0), whose upper end is :math:`\max(p_i - q_-,\ p_i + q_+)`, the
percentile interval's. There every simulated error is ≥ 0 (nothing is published below the bound), so the basic
interval is [0, 0] and never holds a true 1 published as 0: the errors at the truth (a published 0 is an error of
−1) are not those at the plug-in. The basic interval alone covered a true 1 in 0.250 of releases on the issue's
example; with the percentile end at the bound, 0.983 (worst cells 0.917, the cells of 30; mean width 5.65 against
2.30 and the proven noise-stage interval's 8.91; 60 releases, ``benchmarks/bench_intervals.py``).

Its coverage is still **approximate** (the certificate and the report say so): the bias and spread are simulated
at the plug-in, not at the truth. It is the interval to use only where that approximation was measured; the
default ``noise_stage`` interval's coverage is proven. It is post-processing of the published values and public
facts (the invariants' values, the mechanism's law): no budget; the simulation has its own fixed seed
(:data:`dpopt.certificate.intervals.MONTE_CARLO_SEED`), so the same published table always gets the same interval,
and ``dpopt verify DIR`` re-derives it (:mod:`dpopt.release.interval_check`).
"""

from __future__ import annotations

import numpy as np

from dpopt.certificate.intervals import MONTE_CARLO_SEED as SEED
from dpopt.postprocess.marginals import noise_free_sets, postprocess_marginals, uses_marginal_space
from dpopt.postprocess.table import postprocess_release


def simulate_postprocessed(solution, answers, draws: int, rng: np.random.Generator, values=None) -> np.ndarray:
    """(draws, d) post-processed releases simulated at the true answers ``answers`` (as ``dpopt release``
    post-processes: the table path with the invariants' ``values``, or marginal space)."""
    spec, mechanism = solution.spec, solution.mechanism
    out = np.empty((draws, len(answers)))
    if uses_marginal_space(solution.problem.query):
        exact = noise_free_sets(mechanism)
        for r in range(draws):
            y = mechanism.release(np.asarray(answers, dtype=float), rng)
            out[r] = postprocess_marginals(solution.problem.query.workload, y, spec.postprocess, exact,
                                           spec.data.n).answers
        return out
    for r in range(draws):
        out[r] = postprocess_release(solution, mechanism.release(np.asarray(answers, dtype=float), rng),
                                     values=values).answers
    return out


def monte_carlo_bounds(solution, published, values=None) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) of the module's interval for the published (post-processed) answers ``published`` of one
    release; ``values``: the invariants' public values (None: those the spec implies, e.g. ``data.n``)."""
    option = solution.spec.intervals
    block = solution.certificate["utility"]["per_cell"]["intervals"]
    p = np.asarray(published, dtype=float)
    errors = simulate_postprocessed(solution, p, option.draws, np.random.default_rng(SEED), values) - p
    alpha = 1.0 - option.level
    upper, lower = np.quantile(errors, 1.0 - alpha / 2.0, axis=0), np.quantile(errors, alpha / 2.0, axis=0)
    rng = block["range"]
    low, high = p - upper, p - lower
    if rng["lower"] is not None:  # at the bound, the percentile interval's upper end (module docstring)
        high = np.where(p <= rng["lower"], np.maximum(high, p + upper), high)
    if rng["integer"]:
        low, high = np.ceil(low - 1e-9 * np.abs(low)), np.floor(high + 1e-9 * np.abs(high))
    if rng["lower"] is not None:
        low = np.maximum(low, rng["lower"])
    empty = low > high
    point = np.round(p) if rng["integer"] else p
    point = np.maximum(point, rng["lower"]) if rng["lower"] is not None else point
    return np.where(empty, point, low), np.where(empty, point, high)


__all__ = ["monte_carlo_bounds", "simulate_postprocessed"]
