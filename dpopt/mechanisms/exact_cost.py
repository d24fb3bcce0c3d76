r"""The cost of exactness, stated one way in every certificate that measures on a lattice.

Exact noise is the default (issue 39): whenever a family has an exact lattice measurement for the spec it uses
it, whatever the lattice (the rounding of a bound to g = 2^e, of a variance to a dyadic rational, of a strategy to
integers) costs against the continuous design it implements. That cost is not a reason to refuse; it is stated,
under the one key :data:`EXACT_COST_KEY` of the design record (or the mechanism's parameters), as

.. math:: r = \frac{v_\text{exact}}{v_\text{continuous}} \quad\text{(lower is better)}, \qquad
          r = \frac{v_\text{continuous}}{v_\text{exact}} \quad\text{(higher is better: usefulness, test power)},

so r > 1 always means the exact measurement is worse, r < 1 better (a discrete law can beat the continuous one:
the discrete Laplace's variance 2e^{−ε}/(1 − e^{−ε})² is below Laplace's 2/ε² on counts). ``metric`` names what
is compared: the spec's utility metric, or ``variance`` (the noise's second moment per coordinate, in answer
units) where the record compares the noise laws themselves. ``sampler: floating_point`` keeps the continuous
design (and its idealized-numerics note); nothing else does on cost grounds.
"""

from __future__ import annotations

import math

from dpopt.core.checks import Check
from dpopt.mechanisms.base import better
from dpopt.stats.log_volume import exp_or_inf, volume_text

EXACT_COST_KEY = "exact_cost"
"""The key of the stated cost in a design record or a mechanism's parameters."""

EXACT_COST_CLAIM = "mechanism.exact_cost"
"""The claim of :func:`stated_cost_check` in a verification."""


def exact_cost(metric: str, exact: float, continuous: float) -> dict:
    """The cost of exactness: ``{"metric", "exact", "continuous", "ratio"}`` (module docstring).

    Parameters
    ----------
    metric : str
        What is compared: a utility metric (``better(metric)`` orients the ratio) or ``"variance"``.
    exact, continuous : float
        The exact measurement's value and the continuous design's, for that metric.

    Returns
    -------
    dict
        ``ratio`` > 1 when the exact measurement is worse; 1 when both are 0; inf when only the reference is 0.
    """
    exact, continuous = float(exact), float(continuous)
    top, bottom = (continuous, exact) if better(metric) == "higher" else (exact, continuous)
    ratio = top / bottom if bottom != 0 else (1.0 if top == 0 else math.inf)
    return {"metric": metric, "exact": exact, "continuous": continuous, "ratio": ratio}


def volume_cost(log_exact: float, log_continuous: float) -> dict:
    """The cost of exactness of a ``ci_volume`` from the two regions' log-volumes (a region of a few hundred
    dimensions exceeds the double range, :mod:`dpopt.stats.log_volume`): :func:`exact_cost`'s keys, ``exact`` and
    ``continuous`` null beyond the range and the ratio exp(log_exact − log_continuous), with ``log_exact`` and
    ``log_continuous``."""
    exact, continuous = exp_or_inf(log_exact), exp_or_inf(log_continuous)
    return {"metric": "ci_volume", "exact": exact if math.isfinite(exact) else None,
            "continuous": continuous if math.isfinite(continuous) else None,
            "ratio": exp_or_inf(log_exact - log_continuous), "log_exact": log_exact, "log_continuous": log_continuous}


def stated_cost_check(stated: dict, metric: str, exact: float) -> Check:
    """``dpopt verify``'s check of a stated cost whose continuous value is echoed (the rival design is not
    re-solved): its metric is the spec's, its exact value this mechanism's prediction (10⁻⁹ relative), and its ratio
    :func:`exact_cost` of the two values."""
    try:
        again = exact_cost(metric, exact, stated["continuous"])
        holds = (stated["metric"] == metric and math.isclose(stated["exact"], exact, rel_tol=1e-9)
                 and math.isclose(stated["ratio"], again["ratio"], rel_tol=1e-9))
    except (KeyError, TypeError, ValueError):
        holds, again = False, None
    detail = ("malformed record" if again is None else
              f"{metric} {exact:.9g} on the lattice vs {again['continuous']:.9g} recorded for the continuous rival: "
              f"ratio {again['ratio']:.9g}, stated {stated.get('ratio')!r}")
    return Check(EXACT_COST_CLAIM, "the stated cost of exactness: the spec's metric, this mechanism's predicted value, "
                 "the ratio of the two values (the continuous rival's value as recorded)", holds, detail)


def stated_volume_cost_check(stated: dict, log_exact: float) -> Check:
    """:func:`stated_cost_check` for a ``ci_volume`` stated by :func:`volume_cost`: the continuous rival's
    log-volume as recorded, this mechanism's log-volume, and every key recomputed from the two (10⁻⁹ relative)."""
    try:
        again = volume_cost(log_exact, float(stated["log_continuous"]))
    except (KeyError, TypeError, ValueError):
        again = None
    holds = again is not None and same_cost(stated, again)
    detail = ("malformed record" if again is None else
              f"log ci_volume {log_exact:.12g} on the lattice vs {again['log_continuous']:.12g} recorded for the "
              f"continuous rival: ratio {again['ratio']:.9g}, stated {stated.get('ratio')!r}")
    return Check(EXACT_COST_CLAIM, "the stated cost of exactness: ci_volume, this mechanism's predicted log-volume, "
                 "the ratio of the two volumes (the continuous rival's log-volume as recorded)", holds, detail)


def same_cost(stated: dict, cost: dict, rel_tol: float = 1e-9) -> bool:
    """A stated cost is ``cost``, recomputed in full (both values, not only the exact one as in
    :func:`stated_cost_check`): the same metric and ``exact``, ``continuous`` and ``ratio`` within ``rel_tol``
    relative; a malformed record is not."""
    keys = ("exact", "continuous", "ratio") + tuple(k for k in ("log_exact", "log_continuous") if k in cost)
    try:
        return stated["metric"] == cost["metric"] and all(
            stated[key] is None if cost[key] is None else math.isclose(float(stated[key]), cost[key], rel_tol=rel_tol)
            for key in keys)
    except (KeyError, TypeError, ValueError):
        return False


def cost_text(cost: dict) -> str:
    """One sentence for a certificate's notes: the exact measurement's value against the continuous design's (a
    volume's from its logarithm, :func:`volume_cost`)."""
    exact, continuous = ((volume_text(cost["log_exact"], 6), volume_text(cost["log_continuous"], 6))
                         if "log_exact" in cost else (f"{cost['exact']:.6g}", f"{cost['continuous']:.6g}"))
    return (f"cost of exactness: {cost['metric']} {exact} on the lattice vs {continuous} "
            f"for the continuous design, ratio {cost['ratio']:.6f} (> 1: the exact measurement is worse)")
