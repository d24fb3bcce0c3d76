r"""Intervals for the true values behind a release: what goes beside every published number.

A release publishes, for cell i, the noise-stage value :math:`y_i = x_i + Z_i` (unbiased: every family's noise
is symmetric about 0) and often a post-processed value :math:`\hat x_i` (least squares onto the invariants, then
non-negative, then whole numbers; TopDown down a hierarchy). The post-processed value is biased where the truth is
sparse: non-negativity pushes zeros up, and an exact total then pulls the large cells down. "Published value ±
margin of error" is therefore not an interval for the truth. This module gives one that is.

**Method** (``noise_stage_interval``). With :math:`h_i` the smallest number such that
:math:`P(|Z_i| \le h_i) \ge L'`,

.. math::  I_i = [y_i - h_i,\ y_i + h_i] \cap R, \qquad P(x_i \in I_i) \ge L'

for every true table x, whatever the post-processing does afterwards: the interval is built from the released
noisy value and public facts only (post-processing, no privacy budget), and it covers the truth with the
noise-stage probability. :math:`R` is what is known of every true answer without the data — counts of records
are non-negative whole numbers — so intersecting with it (and rounding the ends inward to whole numbers) never
removes the true value from an interval that held it; when nothing is left, the interval is the nearest point
of R (it did not hold the truth either way). Projection onto invariants is linear and leaves
:math:`y` unchanged when the noise lies in the invariants' null space (every Semi-DP family's noise does), so
the interval is that of the projected (least-squares) estimate too; the published value may lie outside it.

:math:`h_i` at level :math:`L'`:

* :math:`L' = 0.95`: the per-cell 95% margin of error of :mod:`dpopt.certificate.per_cell` (exact for Gaussian
  and i.i.d. lattice laws, a proven bound for mixed lattice noise, a Monte Carlo quantile otherwise — its
  ``method`` says which);
* Gaussian cells: :math:`h_i = z_{(1+L')/2}\,\mathrm{SE}_i`;
* lattice noise that is a linear image of independent discrete Gaussians (an exact measurement whose cells mix
  several lattice draws): the sub-Gaussian bound :math:`h_i = \sqrt{2 v_i \ln(2/(1 - L'))}`, v_i the cell's
  proxy (Canonne, Kamath & Steinke 2020, Corollary 9: :math:`P(|Z_i| \ge h) \le 2e^{-h^2/(2v_i)}`);
* independent coordinates with a known law (Laplace, discrete Gaussian, discrete Laplace ...): the smallest
  h with :math:`2\,P(W_i > h) \le 1 - L'` from the law's tail (the smallest whole h on a lattice);
* otherwise Chebyshev, :math:`h_i = \mathrm{SE}_i/\sqrt{1 - L'}` (:math:`P(|Z| \ge k\,\mathrm{SE}) \le 1/k^2`
  for any law), conservative.

**Simultaneous** (family-wise) intervals: :math:`L' = 1 - (1 - L)/k` for the k released cells of a table
(Bonferroni: :math:`P(\exists i: x_i \notin I_i) \le \sum_i (1 - L') = 1 - L` for any dependence).

**A shrunk release** (James–Stein, ``stage_preimage_interval``). The published value M is the noise stage y after
a shrinkage that the published value inverts up to two candidates (the shrink factor 1 − c/‖r‖² positive or
negative; :func:`dpopt.mechanisms.shrinkage.stage_candidates`). The interval is the hull
:math:`[\min_\pm y_{\pm,i} - h_i,\ \max_\pm y_{\pm,i} + h_i] \cap R`: it contains the stage interval of the
actual y, whichever candidate it is, so :math:`P(x_i \in I_i) \ge L'` as above. It is a function of the published
values alone (post-processing, no budget); it is wider than the stage interval by the distance between the
candidates, about |M_i − centre| when the signal is strong. A rotated variant in a Gram–Schmidt basis (not
rebuilt from the certificate) gets no interval.

References
----------
.. [1] Awan, J. & Wang, Z. (2023). Simulation-based, finite-sample inference for privatized data. arXiv:2303.05328
   (finite-sample coverage under clamping; here the clamping is avoided by centring on the unbiased stage).
.. [2] Ashmead, R. et al. (2025). Confidence intervals for the 2020 Census TopDown estimates. arXiv:2503.19714.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from dpopt.core import normal
from dpopt.certificate.per_cell import (image_half_widths, per_cell_errors, sub_gaussian_half_width,
                                       symmetric_differences)
from dpopt.mechanisms import Mechanism
from dpopt.mechanisms.shrinkage import helmert_columns, stage_candidates
from dpopt.noise.law import PostProcessedLaw, ProductLaw
from dpopt.problem import Problem
from dpopt.spec.models import Intervals as IntervalOption
from dpopt.spec.models import Spec

BUDGET = ("none: intervals are post-processing of the released noisy values and of public facts (the spec's "
          "query and level), so they spend no privacy budget")
"""What the certificate says intervals cost."""

DEFAULT = IntervalOption()

MONTE_CARLO_SEED = 20262503
"""Seed of the releases ``intervals: {method: monte_carlo}`` simulates at the published table (a simulation, not a
release; :mod:`dpopt.postprocess.monte_carlo`)."""
MONTE_CARLO = (
    "monte_carlo: approximate; {draws} releases simulated at the published (post-processed) table through the same "
    "mechanism and post-processing (seed {seed}); with q₊, q₋ the (1 ± L)/2 quantiles of each cell's simulated "
    "errors e_i, the interval is the basic bootstrap interval [p_i − q₊, p_i − q₋] ∩ R (Ashmead et al. 2025, "
    "arXiv:2503.19714), except that a cell published at the lower bound of R takes the percentile interval's upper "
    "end max(p_i − q₋, p_i + q₊) (every error simulated there is ≥ 0, so the basic interval would be [0, 0]), "
    "L = {level:g}: around the published value, its coverage is approximate (bias and spread simulated at the "
    "plug-in, not at the truth), measured in simulation, not proven; ends rounded inward to R. half_widths are "
    "the noise stage's, for reference")
"""The method the certificate names for ``intervals: {method: monte_carlo}``."""


def column_names(level: float) -> tuple[str, str]:
    """The interval's CSV/Parquet column names from its level: ``ci_95_low``, ``ci_95_high`` at 0.95,
    ``ci_99_5_low`` at 0.995."""
    text = f"{100 * level:.10g}".replace(".", "_")
    return f"ci_{text}_low", f"ci_{text}_high"


def answer_range(spec: Spec) -> dict:
    """What is known of every true answer of the spec's query without the data (the set R above)."""
    q = spec.query
    count = q.kind in ("count", "histogram", "contingency_table", "marginals")
    if q.kind == "linear":
        matrix = np.asarray(q.matrix, dtype=float)
        if np.all(matrix >= 0):
            whole = bool(np.all(matrix == np.round(matrix)))
            return {"lower": 0.0, "integer": whole,
                    "reason": "a non-negative" + (" whole" if whole else "") + " combination of counts"}
    if count:
        return {"lower": 0.0, "integer": True, "reason": "counts of records are non-negative whole numbers"}
    return {"lower": None, "integer": False, "reason": "no bound known without the data"}


def _lattice_half_width(marginal, excess: float) -> float:
    """Smallest whole k with P(W > k) ≤ excess (W symmetric on ℤ): exponential search, then bisection."""
    hi = max(1, int(math.ceil(marginal.scale)))
    while float(marginal.tail(hi)) > excess:
        hi *= 2
    lo = -1  # tail(lo) > excess by convention (P(W > -1) ≥ 1/2 > excess)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if mid >= 0 and float(marginal.tail(mid)) <= excess:
            hi = mid
        else:
            lo = mid
    return float(hi)


def _law_half_width(marginal, level: float) -> float:
    """Smallest h with P(|W| ≤ h) ≥ level for one symmetric marginal law W (exact tail)."""
    excess = (1.0 - level) / 2.0
    if marginal.gaussian_sd is not None:
        return float(normal.ndtri(1.0 - excess)) * marginal.gaussian_sd
    if marginal.lattice:
        return _lattice_half_width(marginal, excess)
    from scipy import optimize  # imported where used (start-up of `dpopt verify`)

    hi = marginal.scale
    while float(marginal.tail(hi)) > excess:
        hi *= 2.0
    return float(optimize.brentq(lambda x: float(marginal.tail(x)) - excess, 0.0, hi, xtol=1e-12, rtol=1e-12))


def _half_widths(per_cell: dict, level: float, law, half_width=None) -> tuple[list, str]:
    """(h_i per cell, how) at per-cell level ``level`` (module docstring); ``half_width(level)``, when given, is
    the proven (h, how) of the cells' law at any level (e.g. a mapped product law's)."""
    se = np.array([c["standard_error"] for c in per_cell["cells"]], dtype=float)  # None → nan
    at_margin = math.isclose(level, per_cell["level"], rel_tol=0, abs_tol=1e-15)
    proven = None if at_margin or half_width is None else half_width(level)
    if at_margin:
        h = np.array([c["margin_of_error"] for c in per_cell["cells"]], dtype=float)  # None → nan
        how = f"h = the per-cell {per_cell['level']:g} margin of error (utility.per_cell: {per_cell['method']})"
    elif proven is not None:
        h, how = np.asarray(proven[0], dtype=float), f"h_i: {proven[1]}"
    elif per_cell["method"].startswith("closed form") and "N(0" in per_cell["method"]:
        z = float(normal.ndtri((1.0 + level) / 2.0))
        h = z * se
        how = f"Gaussian cells: h = z·SE, z = Φ⁻¹((1 + {level:.10g})/2) = {z:.12g}"
    elif any(c.get("sub_gaussian_proxy") is not None for c in per_cell["cells"]):
        proxies = np.array([c.get("sub_gaussian_proxy") for c in per_cell["cells"]], dtype=float)  # None → nan
        h = sub_gaussian_half_width(proxies, level)
        how = (f"lattice noise, sub-Gaussian bound: h = √(2 v_i ln(2/(1 − {level:.10g}))) with v_i each cell's "
               "sub_gaussian_proxy (CKS 2020, Corollary 9), coverage ≥ the level")
    elif isinstance(law, ProductLaw) and law.basis is None and len(law.marginals) == len(se):
        cache: dict = {}
        h = np.array([np.nan if not np.isfinite(s) else cache.setdefault(m.key, _law_half_width(m, level))
                      for s, m in zip(se, law.marginals)])
        how = f"h = the smallest half-width with 2·P(W_i > h) ≤ 1 − {level:.10g} from the noise law {law.description}"
    else:
        h = se / math.sqrt(1.0 - level)
        how = f"Chebyshev: h = SE/√(1 − {level:.10g}) (P(|Z| ≥ k·SE) ≤ 1/k² for any law), conservative"
    return [float(v) if np.isfinite(v) else None for v in h], how


def interval_block(per_cell: dict, spec: Spec, law=None, half_width=None) -> dict:
    """The ``intervals`` entry of a ``utility.per_cell`` block: level, method, the set R, each cell's h_i.

    Parameters
    ----------
    per_cell : dict
        The block of :func:`dpopt.certificate.per_cell.per_cell_errors` (or its mapped form).
    spec : Spec
        Its ``intervals`` option (default level 0.95, per cell) and its query (the set R).
    law : optional
        The mechanism's noise law (:meth:`Mechanism.noise_law`), for exact tails at a level other than the
        per-cell block's; None falls back to the Gaussian closed form or Chebyshev.
    half_width : callable, optional
        level → (h, how) or None: a proven half-width at any level for the cells' law when ``law`` does not
        describe them (a plan's query mapped from a joint release: :func:`dpopt.certificate.per_cell.mapped_half_widths`).
    """
    option = spec.intervals or DEFAULT
    released = sum(c["standard_error"] is not None for c in per_cell["cells"])
    cell_level = 1.0 - (1.0 - option.level) / max(released, 1) if option.simultaneous else option.level
    block = {"level": option.level, "simultaneous": option.simultaneous, "cell_level": cell_level,
             "columns": list(column_names(option.level)), "budget": BUDGET, "range": answer_range(spec)}
    if isinstance(law, PostProcessedLaw) and law.preimage is None:
        return block | {"method": f"none: the released value is post-processed ({law.operation}), not the "
                                  "noise-stage value an interval is centred on", "half_widths": None}
    if isinstance(law, PostProcessedLaw):
        h, how = _half_widths(per_cell, cell_level, law.inner, half_width)
        family = (f"simultaneous over the {released} released cells, Bonferroni" if option.simultaneous
                  else "per cell")
        return block | {
            "method": (f"stage_preimage_interval: the published value is the noise stage after {law.operation}; it "
                       "determines the unbiased stage value y up to two candidates y₊, y₋ (stage_candidates: the "
                       "shrink factor positive or negative), and the interval is the hull of [y_i − h_i, y_i + h_i] "
                       f"over both, ∩ R: it contains the stage interval of the actual y, so it covers the true value "
                       f"with probability ≥ {option.level:g} ({family}); {how}; ends rounded inward to R"),
            "stage": law.preimage, "half_widths": h}
    h, how = _half_widths(per_cell, cell_level, law, half_width)
    if option.method == "monte_carlo":
        return block | {"method": MONTE_CARLO.format(draws=option.draws, seed=MONTE_CARLO_SEED, level=option.level),
                        "monte_carlo": {"draws": option.draws, "seed": MONTE_CARLO_SEED}, "half_widths": h}
    family = (f"simultaneous (family-wise) over the {released} released cells, Bonferroni: each cell at "
              f"1 − (1 − {option.level:g})/{released}" if option.simultaneous else "per cell")
    return block | {
        "method": ("noise_stage_interval: [y_i − h_i, y_i + h_i] ∩ R around the released unbiased noise-stage "
                   f"value y_i, covering the true value with probability ≥ {option.level:g} ({family}) whatever "
                   f"the post-processing publishes; {how}; ends rounded inward to R"),
        "half_widths": h,
    }


def with_intervals(per_cell: dict, spec: Spec, law=None, half_width=None) -> dict:
    """``per_cell`` with its ``intervals`` entry (:func:`interval_block`)."""
    return per_cell | {"intervals": interval_block(per_cell, spec, law, half_width)}


def certified_per_cell(mechanism: Mechanism, problem: Problem) -> dict:
    """The certificate's ``utility.per_cell`` block: each cell's standard error and margin of error
    (:func:`~dpopt.certificate.per_cell.per_cell_errors`) and the intervals' half-widths (:func:`interval_block`);
    what ``dpopt solve`` records and ``dpopt verify`` recomputes."""
    block = per_cell_errors(mechanism, problem.labels, symmetric_differences(problem))
    return with_intervals(block, problem.spec, mechanism.noise_law(),
                          lambda level: image_half_widths(mechanism, level))


def _stage_candidates(published: np.ndarray, stage: dict) -> tuple[np.ndarray, np.ndarray]:
    """The candidate stage values of a published post-processed release (``stage``: a law's ``preimage``)."""
    if stage.get("kind") != "james_stein":
        raise ValueError(f"unknown stage preimage {stage.get('kind')!r}")
    d = published.shape[-1]
    if stage["basis"] not in ("identity", "helmert"):
        raise ValueError(f"unknown stage basis {stage['basis']!r}")
    basis = None if stage["basis"] == "identity" else helmert_columns(d)
    rows = published.reshape(-1, d)
    y_plus, y_minus = stage_candidates(rows, stage["variant"], float(stage["constant"]), basis)
    return y_plus.reshape(published.shape), y_minus.reshape(published.shape)


def cell_intervals(values, block: dict) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) for released values y (NaN where a value or half-width is missing).

    .. math::  [\\max(\\text{lower}, y - h),\\ y + h], \\quad \\text{ends rounded inward to whole numbers when R
       is integral; an empty result becomes the point of R nearest } y.
    """
    y = np.array(values, dtype=float)  # None → NaN
    h = np.array(block["half_widths"] or [None] * y.shape[-1], dtype=float)
    if block.get("stage") is not None:  # the stage values the published ones come from (module docstring)
        y_plus, y_minus = _stage_candidates(y, block["stage"])
        low, high = np.fmin(y_plus, y_minus) - h, np.fmax(y_plus, y_minus) + h
        y = (y_plus + y_minus) / 2.0
    else:
        low, high = y - h, y + h
    rng = block["range"]
    point = y
    if rng["integer"]:
        low, high, point = np.ceil(low - 1e-9 * np.abs(low)), np.floor(high + 1e-9 * np.abs(high)), np.round(y)
    if rng["lower"] is not None:
        low = np.maximum(low, rng["lower"])
        point = np.maximum(point, rng["lower"])
    empty = low > high
    low, high = np.where(empty, point, low), np.where(empty, point, high)
    return low, high


@dataclass(frozen=True)
class Intervals:
    """Intervals for the true values behind one release (:func:`intervals`).

    Attributes
    ----------
    labels : tuple of str
    values : numpy.ndarray
        The released values the intervals are built on (the noise-stage values; for a shrunk release, the
        published values, inverted to their stage candidates).
    low, high : numpy.ndarray
        The interval ends (NaN for a cell the design does not release).
    level : float
    simultaneous : bool
        Family-wise over the released cells (Bonferroni) rather than per cell.
    method : str
        As the certificate states it (``utility.per_cell.intervals.method``).
    """

    labels: tuple
    values: np.ndarray
    low: np.ndarray
    high: np.ndarray
    level: float
    simultaneous: bool
    method: str = field(repr=False)


def intervals(solution, released) -> Intervals:
    """The interval for the true value of every cell of a release of ``solution``.

    Parameters
    ----------
    solution : Solution
        ``dpopt.solve(spec)``.
    released : array (d,) or (groups, d)
        ``solution.mechanism.release(...)`` (before any ``postprocess`` step; a James–Stein release as released).

    Raises
    ------
    ValueError
        For ``intervals: {method: monte_carlo}``, whose intervals centre on the post-processed values:
        :func:`dpopt.postprocess.monte_carlo.monte_carlo_bounds` gives them.

    Examples
    --------
    >>> import numpy as np, dpopt
    >>> sol = dpopt.solve("specs/sparse_histogram_intervals_zcdp.yaml")
    >>> truth = np.array([0, 0, 30, 0, 0, 0, 30] + [0] * 4 + [1] + [0] * 8, float)
    >>> ci = dpopt.intervals(sol, sol.mechanism.release(truth, np.random.default_rng(1)))
    >>> bool(np.all(ci.low >= 0)), ci.level
    (True, 0.95)
    """
    block = solution.certificate["utility"]["per_cell"]["intervals"]
    if "monte_carlo" in block:
        raise ValueError("intervals: {method: monte_carlo} centres on the post-processed values: use "
                         "dpopt.postprocess.monte_carlo.monte_carlo_bounds(solution, published)")
    values = np.asarray(released, dtype=float)
    low, high = cell_intervals(values, block)
    return Intervals(tuple(solution.problem.labels), values, low, high, block["level"], block["simultaneous"],
                     block["method"])


__all__ = [
    "BUDGET",
    "MONTE_CARLO",
    "MONTE_CARLO_SEED",
    "Intervals",
    "answer_range",
    "cell_intervals",
    "certified_per_cell",
    "column_names",
    "interval_block",
    "intervals",
    "with_intervals",
]
