r"""Expected squared error of each workload marginal: the certified design against direct measurement.

For a marginal workload :math:`W = [M_S]_S` (:mod:`dpopt.domain.marginal_algebra`) released with
``marginal_gaussian`` noise :math:`Z = W\xi,\ \xi\sim N(0, (\sum_T a_T E_T)^+)`, and target μ
(μ-GDP, i.e. Gaussian noise of standard deviation Δ/μ at l2 sensitivity Δ), three errors per
table S, each the same in every cell of S (the algebra is invariant under permuting each
attribute's levels):

* **certified**: :math:`\mathrm{Var}\,Z_i = \sum_{T\subseteq S,\,a_T>0}
  \frac{\prod_{k\notin T} n_k}{a_T}\,\frac{m_T}{\prod_{k\in T} n_k}\Big/\big(\prod_{k\in S\setminus T}n_k\big)^2`
  (:func:`~dpopt.mechanisms.marginal_gaussian.cell_variances`);
* **direct + least squares**: every table measured with i.i.d. :math:`N(0, \sigma^2)`,
  :math:`\sigma = \Delta_2/\mu` (Δ₂ the workload's l2 sensitivity), then projected onto the
  span the noise may move (least squares; the noise-free components are kept exact): the
  variance of a cell is :math:`\sigma^2 P_{ii}` with :math:`P_{ii} = \sum_{T\subseteq S}
  \frac{m_T/\prod_{k\in T}n_k}{\kappa_T\,(\prod_{k\in S\setminus T}n_k)^2}`
  (:meth:`~dpopt.domain.marginal_algebra.MarginalWorkload.projector_diagonal`, over the
  noisy components);
* **this table alone**: S measured by itself with the whole budget, σ² = Δ_S²/μ², with
  Δ_S² = c·k² (c = 1 add/remove, 2 replace-one: a record moves one cell, or two;
  k the Hamming or semi-adjacent multiplier) — the error were S the only table published.

A table's error is the per-cell value times its number of cells.
"""

from __future__ import annotations

from collections.abc import Sequence

from dpopt.domain.marginal_algebra import MarginalWorkload, Subset
from dpopt.mechanisms.marginal_gaussian import cell_variances


def per_marginal_errors(workload: MarginalWorkload, coefficients: dict[Subset, float], mu: float, l2: float,
                        replace: bool, multiplier: int, names: Sequence[str]) -> list[dict]:
    """One row per workload table (module docstring): its cells and the three errors, per cell and per table.

    Parameters
    ----------
    workload : MarginalWorkload
    coefficients : dict
        a_T of the certified design (the components without one are noise-free).
    mu : float
        The target μ (1/σ at unit sensitivity).
    l2 : float
        The workload's l2 sensitivity Δ₂ (the certificate's ``sensitivity.l2``).
    replace, multiplier
        Replace-one (or Hamming) neighbours; the Hamming or semi-adjacent multiplier k.
    names : sequence of str
        Attribute names, for the table labels.
    """
    certified = cell_variances(workload, coefficients)
    noise_free = [t for t in workload.closure if t not in coefficients]
    projector = workload.projector_diagonal(without=noise_free)
    sigma2 = (l2 / mu) ** 2
    alone = (2.0 if replace else 1.0) * multiplier ** 2 / mu ** 2
    rows = []
    for i, block in enumerate(workload.blocks):
        first, cells = workload.offsets[i], workload.offsets[i + 1] - workload.offsets[i]
        cell, direct = float(certified[first]), sigma2 * float(projector[first])
        rows.append({
            "table": " × ".join(names[k] for k in block) or "total",
            "cells": cells,
            "certified_cell": cell,
            "certified_table": cell * cells,
            "direct_ls_cell": direct,
            "direct_ls_table": direct * cells,
            "ratio": cell / direct if direct > 0 else None,
            "alone_table": alone * cells,
        })
    return rows
