r"""Utility metrics of R²DP noise as expectations over the second fold t = 1/b.

Every metric below is E[c(t)] for a per-rate cost c (the metric of Laplace(1/t) noise)
followed by a monotone map, so it is *linear in the mixing law of t* — the property the
global LP (:mod:`dpopt.optimize.r2dp_lp`) relies on (digest §1.6):

=============  ==========================  ==========================================
metric         c(t) (Laplace(1/t) noise)   metric from E[c]
=============  ==========================  ==========================================
usefulness γ   e^{−γt}                     1 − E[c] = 1 − M(−γ)          (Table 1)
l1             1/t                         E[c] = E|Z| = E[1/t]
l2             2/t²                        E[c] = E Z² = 2E[1/t²]
kl             generalised KL of a         E[c]
               clipped Laplace release
renyi α        ± E Σ[p^α q^{1−α} − αp      (1/(α−1)) ln(1 ± E[c])
               − (1−α)q]
mallows p      Γ(p+1)/t^p                  E|Z|^p, the paper's Table-1 form: an upper
                                           bound on W_p^p, optimised in its place
=============  ==========================  ==========================================

Per coordinate; a spec's vector metric is d times the l1 / l2 value (times ‖W‖_F²/d with
a workload), and the mean over coordinates for usefulness.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from dpopt.noise.prior_metrics import (
    R2DPNoise,
    kl_costs,
    kl_divergence,
    renyi_bracket_costs,
    renyi_divergence,
)
from dpopt.noise.second_folds import SecondFold


@dataclass(frozen=True)
class LinearObjective:
    """A metric E[c(t)] → ``to_metric(E[c])`` to be minimised in E[c].

    Attributes
    ----------
    name : str
        The metric's name, as in the spec.
    cost : callable
        c(t), vectorised over rates t > 0.
    to_metric : callable
        From E[c] to the metric's value.
    higher_is_better : bool
        Direction of the *metric* (usefulness: higher); E[c] is always minimised.
    fold_value : callable
        The metric of a second fold, computed from its MGF (closed form or quadrature).
    description : str
    """

    name: str
    cost: Callable[[np.ndarray], np.ndarray]
    to_metric: Callable[[float], float]
    higher_is_better: bool
    fold_value: Callable[[SecondFold], float]
    description: str
    cheap: bool = True
    """False when c(t) is a quadrature per rate (histogram metrics): the dual bound then
    uses a coarser grid."""

    def better(self, a: float, b: float) -> bool:
        """True when metric value ``a`` is strictly better than ``b``."""
        return a > b if self.higher_is_better else a < b


def usefulness_objective(gamma: float) -> LinearObjective:
    return LinearObjective(
        "usefulness",
        lambda t: np.exp(-gamma * np.asarray(t, dtype=float)),
        lambda e: 1.0 - e,
        True,
        lambda fold: 1.0 - float(fold.mgf(-gamma)),
        f"P(|Z| ≤ {gamma:g}) = 1 − M(−γ)",
    )


def l1_objective() -> LinearObjective:
    return LinearObjective(
        "l1", lambda t: 1.0 / np.asarray(t, dtype=float), lambda e: e, False,
        lambda fold: fold.inverse_moment(1.0), "E|Z| = E[1/t] = ∫₀^∞ M(−x) dx",
    )


def l2_objective() -> LinearObjective:
    return LinearObjective(
        "l2", lambda t: 2.0 / np.asarray(t, dtype=float) ** 2, lambda e: e, False,
        lambda fold: 2.0 * fold.inverse_moment(2.0), "E Z² = 2E[1/t²] = 2∫₀^∞ x M(−x) dx",
    )


def kl_objective(prior, floor: float) -> LinearObjective:
    return LinearObjective(
        "kl", lambda t: kl_costs(prior, floor, t), lambda e: e, False,
        lambda fold: kl_divergence(R2DPNoise(fold), prior, floor),
        f"generalised KL of the released histogram clipped at {floor:g}",
        cheap=False,
    )


def renyi_objective(prior, floor: float, order: float) -> LinearObjective:
    sign = 1.0 if order > 1 else -1.0  # the bracket is ≥ 0 for α > 1, ≤ 0 for α < 1

    def to_metric(e: float) -> float:
        argument = 1.0 + sign * e
        return math.log(argument) / (order - 1.0) if argument > 0 else math.inf

    return LinearObjective(
        "renyi",
        lambda t: sign * renyi_bracket_costs(prior, floor, order, t),
        to_metric,
        False,
        lambda fold: renyi_divergence(R2DPNoise(fold), prior, floor, order),
        f"Rényi divergence of order {order:g} (positive-measure form), histogram clipped at {floor:g}",
        cheap=False,
    )


def abs_moment_objective(order: float) -> LinearObjective:
    """E|Z|^p = Γ(p+1) E[t^{−p}]: the paper's Table-1 Mallows expression, an upper bound on
    the Mallows distance W_p^p (identity coupling), linear in the mixture."""
    factor = math.gamma(order + 1.0)
    return LinearObjective(
        f"abs_moment_{order:g}", lambda t: factor * np.asarray(t, dtype=float) ** (-order), lambda e: e, False,
        lambda fold: factor * fold.inverse_moment(order), f"E|Z|^{order:g} = Γ(p+1)E[t^(−p)]",
    )
