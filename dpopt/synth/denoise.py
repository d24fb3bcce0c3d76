r"""Targets for the record search: each published table shrunk toward the independence of its attributes.

A table :math:`A` over the attributes :math:`S` (:math:`|S| \ge 2`, total :math:`N`) is split into the
product of its own one-way margins, :math:`B = N \prod_{k \in S} (a_k / N)` (the table its attributes
would have if independent), and the rest :math:`I = A - B`, the interactions. Under the release's noise
(per-cell variance :math:`\sigma^2`), the interactions carry noise of expected energy
:math:`p\,\sigma^2` with :math:`p = \prod_{k \in S} n_k - 1 - \sum_{k \in S} (n_k - 1)`, the dimension
of the interaction space (:math:`(n_a - 1)(n_b - 1)` for two attributes), so

.. math:: \hat I = \max\Big(0,\ 1 - \frac{p\,\sigma^2}{\|I\|_2^2}\Big)\, I

keeps the share of :math:`I` the noise cannot explain: the positive-part James–Stein estimator
(Efron & Morris, JASA 68, 1973; James & Stein 1961), here the empirical Wiener factor "estimated
signal energy over observed energy". A pair of nearly independent attributes, whose measured
interactions are mostly noise, is pulled to independence; a strongly dependent pair keeps almost all
of its table. The target is then :math:`B + \hat I` projected onto the non-negative tables of total
:math:`N` (Euclidean projection onto the scaled simplex: Held, Wolfe & Crowder, Math. Prog. 6, 1974;
a soft threshold that sets the smallest cells to 0 rather than only clipping negative ones).

Why. Published tables of many cells at a small budget are mostly noise in their small cells: on adult
(all 91 two-way tables, ρ = 0.1) the records fitted to these targets are closer to the true data than
those fitted to the tables themselves (benchmarks/bench_synthesize.py). It is post-processing of the
published tables and their public noise level: it spends no privacy budget, and the records are still
repaired to the published tables themselves where exactness is asked (:mod:`dpopt.synth.repair`).
"""

from __future__ import annotations

import math

import numpy as np


def independence(table: np.ndarray) -> np.ndarray:
    r""":math:`B = N \prod_k (a_k / N)`: the product of the table's one-way margins (zeros when N ≤ 0)."""
    total = table.sum()
    if total <= 0:
        return np.zeros_like(table, dtype=float)
    out = np.ones((1,) * table.ndim)
    for axis in range(table.ndim):
        margin = table.sum(axis=tuple(a for a in range(table.ndim) if a != axis)) / total
        out = out * margin.reshape([-1 if a == axis else 1 for a in range(table.ndim)])
    return total * out


def interaction_dimension(shape: tuple[int, ...]) -> int:
    r""":math:`p = \prod n_k - 1 - \sum (n_k - 1)`: the dimension of a table's interactions."""
    return math.prod(shape) - 1 - sum(n - 1 for n in shape)


def simplex_projection(values: np.ndarray, total: float) -> np.ndarray:
    """The Euclidean projection of ``values`` (flat) onto {x ≥ 0, Σ x = total} (``total`` > 0): x = max(v − τ, 0)
    with τ found from the sorted values (Held, Wolfe & Crowder 1974)."""
    u = np.sort(values)[::-1]
    excess = np.cumsum(u) - total
    k = np.arange(1, u.size + 1)
    last = np.nonzero(u - excess / k > 0)[0][-1]
    return np.maximum(values - excess[last] / (last + 1), 0.0)


def shrink(table: np.ndarray, sd: float, total: float) -> np.ndarray:
    """A released table (real-valued, possibly negative cells) shrunk toward the independence of its
    attributes and projected onto the non-negative tables of sum ``total`` (module docstring); a one-way
    table, or one without interactions, is only projected.

    Parameters
    ----------
    table : numpy.ndarray
        The released table, one axis per attribute.
    sd : float
        The per-cell noise standard deviation σ of its release (≥ 0).
    total : float
        The sum of the result (> 0), e.g. the release's estimate of the number of records.
    """
    full = np.asarray(table, dtype=float)
    p = interaction_dimension(full.shape)
    if full.ndim >= 2 and p > 0 and full.sum() > 0:
        base = independence(full)
        rest = full - base
        energy = float(np.square(rest).sum())
        factor = max(0.0, 1.0 - p * sd**2 / energy) if energy > 0 else 0.0
        full = base + factor * rest
    return simplex_projection(full.reshape(-1), total).reshape(full.shape)
