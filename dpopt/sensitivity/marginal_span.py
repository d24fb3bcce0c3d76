r"""The span of a marginal workload's sensitivity space, kept implicit.

For a marginal workload :math:`W = [M_S]_S` (:mod:`dpopt.domain.marginal_algebra`) the
released space splits orthogonally by ANOVA component: the component :math:`c_T` of a
table (a centred :math:`T`-table, :math:`m_T` free entries) appears in every block
:math:`S \supseteq T` as :math:`\operatorname{bcast}(c_T)/\prod_{k\in S\setminus T} n_k`,
a map :math:`B_T` with :math:`B_T^\top B_T = \kappa_T I`, and the images of different
components are orthogonal (a centred table sums to zero along each of its attributes,
and the other component is constant along one of them). Hence

* add/remove, differences :math:`\pm W e_j`: the span is range(W) =
  :math:`\bigoplus_{T} B_T(\text{centred } T\text{-tables})` over the closure of the blocks;
* replace-one (and Hamming), differences :math:`W(e_i - e_j)`: the grand total
  (:math:`T = \emptyset`) never moves and every other component does (the cells
  :math:`i, j` may differ on the attributes of :math:`T` alone), so the span leaves
  :math:`T = \emptyset` out.

The projector is :meth:`MarginalWorkload.project` (least squares component by component),
its rank :math:`\sum_T m_T`, and an orthonormal basis is
:math:`B_T (\bigotimes_{k\in T} H_{n_k}) / \sqrt{\kappa_T}` with :math:`H_n` an orthonormal
basis of the sum-zero vectors of :math:`\mathbb{R}^n`: nothing of the domain's size
:math:`N = \prod_k n_k` is formed.
"""

from __future__ import annotations

import math

import numpy as np

from dpopt.core.memory import dense_bytes, require_memory
from dpopt.domain.marginal_algebra import MarginalWorkload, Subset
from dpopt.sensitivity.margin_subspace import helmert
from dpopt.sensitivity.subspace import Subspace


def workload_column(workload: MarginalWorkload, cell: tuple[int, ...]) -> np.ndarray:
    """W e_j for the cell j with these level indices (one per attribute): a 1 in one cell of each table."""
    out = np.zeros(workload.dimension)
    for i, block in enumerate(workload.blocks):
        sizes = [workload.algebra.sizes[k] for k in block]
        index = int(np.ravel_multi_index([cell[k] for k in block], sizes)) if block else 0
        out[workload.offsets[i] + index] += 1.0
    return out


class MarginalSpan(Subspace):
    """range(W) of a marginal workload W, without the components ``without``.

    Parameters
    ----------
    workload : MarginalWorkload
    without : tuple of Subset
        Components left out: ``((),)`` under replace-one, where the grand total is fixed.

    Examples
    --------
    >>> from dpopt.domain.marginal_algebra import MarginalAlgebra
    >>> w = MarginalWorkload(MarginalAlgebra((3, 2)), ((0,), (1,)))
    >>> span = MarginalSpan(w, without=((),))
    >>> span.ambient, span.rank, span.project(np.array([1.0, 0, 0, 0, 0])).round(3).tolist()
    (5, 3, [0.667, -0.333, -0.333, 0.0, 0.0])
    """

    name = "marginal"

    def __init__(self, workload: MarginalWorkload, without: tuple[Subset, ...] = ()):
        self.workload = workload
        self.without = tuple(without)
        self.ambient = workload.dimension
        self.rank = workload.rank(self.without)

    @property
    def components(self) -> tuple[Subset, ...]:
        """The components T that span it (the closure of the blocks minus :attr:`without`, m_T > 0)."""
        alg = self.workload.algebra
        return tuple(t for t in self.workload.closure if t not in self.without and alg.multiplicity(t) > 0)

    def project(self, x: np.ndarray) -> np.ndarray:
        """:meth:`MarginalWorkload.project` without the components :attr:`without`; a table all of
        whose components are left out gets zeros (a zero grand total stands in for them)."""
        x = np.asarray(x, dtype=float)
        kept = {t: c for t, c in self.workload.consistent_components(x).items() if t not in self.without}
        kept.setdefault((), np.zeros(x.shape[:-1]))
        return self.workload.from_components(kept)

    def projector_diagonal(self) -> np.ndarray:
        return self.workload.projector_diagonal(self.without)

    def basis(self) -> np.ndarray:
        """An orthonormal basis (d × rank), one Kronecker block of Helmert columns per component.

        Raises
        ------
        MemoryLimitError
            When d × rank floats exceed the memory limit.
        """
        require_memory(dense_bytes(self.ambient, self.rank),
                       f"the dense {self.ambient} x {self.rank} basis of the span of the marginal workload")
        alg = self.workload.algebra
        columns = []
        for t in self.components:
            factor = np.ones((1, 1))
            for k in t:
                factor = np.kron(factor, helmert(alg.sizes[k]))
            tables = factor.T.reshape((factor.shape[1],) + alg.table_shape(t))
            zero_total = np.zeros(len(tables))  # as in project: the tables without T get zeros
            vectors = self.workload.from_components({(): zero_total, t: tables})
            vectors /= math.sqrt(self.workload.precision(t))
            columns.append(vectors.T)
        return np.hstack(columns) if columns else np.zeros((self.ambient, 0))

    def describe(self) -> dict:
        return {
            **super().describe(),
            "blocks": [list(b) for b in self.workload.blocks],
            "sizes": list(self.workload.algebra.sizes),
            "without": [list(t) for t in self.without],
        }
