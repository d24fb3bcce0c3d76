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

The public part :math:`(I - P_V)x` of integer answers is computed in exact rational arithmetic and
rounded once (:meth:`MarginalSpan.invariant_component`), so that an exact lattice release
(:class:`~dpopt.mechanisms.gaussian.ProjectedGaussianMechanism`, ``gaussian_optimal``) gives
neighbours the same floats bit for bit.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from dpopt.core.memory import dense_bytes, require_memory
from dpopt.domain.marginal_algebra import MarginalWorkload, Subset, subsets
from dpopt.sensitivity.margin_subspace import helmert
from dpopt.sensitivity.subspace import Subspace

MAX_EXACT_TERMS = 4_000_000
"""Largest Σ_S 2^|S|·∏_{k∈S} n_k (a block's cells times its components, summed over the blocks) for which
:meth:`MarginalSpan.invariant_component` computes (I − P_V)x exactly (python integers, ~1 µs each); above it, None:
the lattice release is refused and the floating-point sampler keeps its note."""


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

    @property
    def exact_terms(self) -> int:
        """Σ_S 2^|S|·∏_{k∈S} n_k over the blocks S: the big-integer operations of :meth:`invariant_component`."""
        return sum(2 ** len(s) * self.workload.algebra.size(s) for s in self.workload.sets)

    def invariant_component(self, counts: np.ndarray) -> np.ndarray | None:
        r"""(I − P_V)x for integer answers x (rows, shape (..., d); consistent or not), exactly rounded.

        With :math:`n(S) = \prod_{k\in S} n_k` and :math:`K` the kept components (:attr:`components`),
        :meth:`MarginalWorkload.consistent_components` is, for :math:`T \in K`,

        .. math:: \hat c_T = \frac1{\kappa_T}\sum_{S\supseteq T}\frac{c^{(S)}_T}{n(S\setminus T)}
                  = \frac1{\kappa_T}\sum_{S\supseteq T}\frac{C^{(S)}_T}{n(S)},\qquad
                  C^{(S)}_T = \bigotimes_{k\in T}(n_k I - J)\, M_{S\to T}\, x_S \in \mathbb Z^{n(T)},

        (:math:`n(T)\,c^{(S)}_T = C^{(S)}_T`: centring is :math:`I - J/n_k` per attribute, and
        :math:`n(T)\,n(S\setminus T) = n(S)`), :math:`\kappa_T = \sum_{S\supseteq T} 1/n(S\setminus T)`
        (:meth:`~MarginalWorkload.precision`) rational. So :math:`\hat c_T = a_T/q_T` with integers
        :math:`q_T = L_T\,\mathrm{num}(\kappa_T)`, :math:`a_T = \mathrm{den}(\kappa_T)\sum_{S\supseteq T}
        C^{(S)}_T L_T/n(S)`, :math:`L_T = \operatorname{lcm}_{S\supseteq T} n(S)`, and block :math:`S` of the
        result is

        .. math:: x_S - \sum_{T\subseteq S,\,T\in K}\frac{\operatorname{bcast}(a_T)}{q_T\,n(S\setminus T)}
                  = \frac{Q_S x_S - \sum_T \operatorname{bcast}(a_T)\,Q_S/(q_T\,n(S\setminus T))}{Q_S},
                  \qquad Q_S = \operatorname{lcm}_T\, q_T\,n(S\setminus T),

        a ratio of python integers that Python's true division rounds correctly (round to nearest) to
        float64. The floats are therefore a function of the real vector (I − P_V)x alone: answers x′ whose
        difference x′ − x lies in V (every neighbour, a person's move being one) give the same floats bit for
        bit — unlike x − P_V x in floating point, whose rounding depends on x. Cost:
        :attr:`exact_terms` big-integer operations per row; None above :data:`MAX_EXACT_TERMS`.
        """
        if self.exact_terms > MAX_EXACT_TERMS:
            return None
        workload, alg = self.workload, self.workload.algebra
        counts = np.asarray(counts)
        exact = counts.astype(np.int64).astype(object)  # python integers: no overflow
        tables = workload.tables(exact, dtype=object)
        lead = exact.shape[:-1]
        kept = set(self.components)
        lcm: dict[Subset, int] = {}
        for s in workload.sets:
            for t in subsets(s):
                if t in kept:
                    lcm[t] = math.lcm(lcm.get(t, 1), alg.size(s))
        sums: dict[Subset, np.ndarray] = {}
        for s, table in zip(workload.sets, tables):
            for t in subsets(s):
                if t not in kept:
                    continue
                centred = np.asarray(alg.marginal(table, s, t), dtype=object)
                for axis in range(len(lead), len(lead) + len(t)):
                    centred = alg.sizes[t[axis - len(lead)]] * centred - centred.sum(axis=axis, keepdims=True)
                share = centred * (lcm[t] // alg.size(s))
                sums[t] = share if t not in sums else sums[t] + share
        numerators, denominators = {}, {}
        for t, total in sums.items():
            kappa = Fraction(workload.precision(t))
            numerators[t] = total * kappa.denominator
            denominators[t] = lcm[t] * kappa.numerator
        out = []
        for s, table in zip(workload.sets, tables):
            parts = [(t, denominators[t] * alg.size(tuple(k for k in s if k not in t)))
                     for t in subsets(s) if t in kept]
            common = math.lcm(*(q for _, q in parts)) if parts else 1
            numerator = table * common
            for t, q in parts:
                numerator = numerator - alg.broadcast(numerators[t], t, s) * (common // q)
            out.append((numerator / common).astype(float))  # int / int: correctly rounded
        return workload.vector(out) if out else np.zeros(counts.shape)

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
