r"""The algebra of marginal workloads: ANOVA components, Gram eigenvalues, consistent marginals.

A table over attributes with :math:`n_1 \times \dots \times n_p` levels is a vector of
:math:`\mathbb{R}^N`, :math:`N = \prod_k n_k`. For each attribute let
:math:`P^0_k = J/n_k` (the constants) and :math:`P^1_k = I - J/n_k` (the sum-zero vectors);
for :math:`T \subseteq \{1..p\}`

.. math:: E_T = \bigotimes_{k \in T} P^1_k \otimes \bigotimes_{k \notin T} P^0_k

are orthogonal projectors that sum to :math:`I`, of rank
:math:`m_T = \prod_{k\in T}(n_k - 1)` (the ANOVA decomposition). They span a commutative
algebra of dimension :math:`2^p` that contains every Kronecker product of :math:`I` and
:math:`J`; it is the commutant of the group :math:`\prod_k S_{n_k}` that permutes the levels
of each attribute (the commutant of :math:`S_n` on :math:`\mathbb{R}^n` is
:math:`\mathrm{span}\{I, J\}`, and commutants of tensor products of representations are
tensor products of commutants).

The marginal over a set :math:`S` of attributes is
:math:`M_S = \bigotimes_{k\in S} I \otimes \bigotimes_{k\notin S} \mathbf{1}^\top`, and

.. math::

    M_S^\top M_S = \prod_{k \notin S} n_k \sum_{T \subseteq S} E_T ,\qquad
    M_S E_T x = \frac{\operatorname{bcast}_{T \to S}(c_T)}{\prod_{k \in S\setminus T} n_k}
    \quad (T \subseteq S),\ 0 \text{ otherwise},

with :math:`c_T = \bigotimes_{k\in T} P^1_k\, M_T x` the centred :math:`T`-marginal. Hence a
weighted marginal workload :math:`W = [\,w_S M_S\,]_S` has
:math:`W^\top W = \sum_T \lambda_T E_T`, :math:`\lambda_T = \sum_{S \supseteq T} w_S^2
\prod_{k\notin S} n_k`, its singular values are :math:`\sqrt{\lambda_T}` with multiplicity
:math:`m_T`, and every table of marginals splits into components :math:`c_T` on tables of
:math:`\prod_{k\in T} n_k` cells only: nothing of size :math:`N` is ever formed
(McKenna et al., VLDB 2018, Sec. 5 use the same structure for their ``MarginalsGram``).

Tables here are numpy arrays whose *last* axes are the attributes of their set in
increasing order; leading axes are batch axes (one table per draw).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property

import numpy as np

Subset = tuple[int, ...]
"""A set of attributes, as increasing axis indices."""


def subsets(s: Subset) -> Iterable[Subset]:
    """Every subset of ``s`` (increasing), from the empty set up."""
    for r in range(len(s) + 1):
        yield from itertools.combinations(s, r)


@dataclass(frozen=True)
class MarginalAlgebra:
    """The ANOVA algebra of the tables over attributes with ``sizes`` levels.

    Examples
    --------
    >>> alg = MarginalAlgebra((3, 2))
    >>> alg.cells, alg.multiplicity((0, 1)), alg.diagonal((0,))
    (6, 2, Fraction(1, 3))
    """

    sizes: tuple[int, ...]

    @property
    def cells(self) -> int:
        """N, the number of cells of the full table (an exact integer)."""
        return math.prod(self.sizes)

    def size(self, s: Subset) -> int:
        """∏_{k∈s} n_k, the number of cells of the s-marginal."""
        return math.prod(self.sizes[k] for k in s)

    def co_size(self, s: Subset) -> int:
        """∏_{k∉s} n_k, the number of cells summed into each cell of the s-marginal."""
        return self.cells // self.size(s)

    def multiplicity(self, t: Subset) -> int:
        """m_T = ∏_{k∈T}(n_k − 1), the rank of E_T."""
        return math.prod(self.sizes[k] - 1 for k in t)

    def diagonal(self, t: Subset) -> Fraction:
        """(E_T)_jj = m_T / N, the same for every cell j."""
        return Fraction(self.multiplicity(t), self.cells)

    def pair_gap(self, t: Subset, disagree: Iterable[int]) -> Fraction:
        r"""(E_T)_ii − (E_T)_ij for two cells i, j that differ exactly on the attributes ``disagree``.

        .. math:: \prod_{k\notin T}\frac1{n_k}\Big[\prod_{k\in T}\big(1-\tfrac1{n_k}\big)
                  - \prod_{k\in T\setminus D}\big(1-\tfrac1{n_k}\big)
                    \prod_{k\in T\cap D}\big(-\tfrac1{n_k}\big)\Big]
        """
        d = set(disagree)
        same = Fraction(1)
        cross = Fraction(1)
        for k in t:
            n = self.sizes[k]
            same *= Fraction(n - 1, n)
            cross *= Fraction(-1, n) if k in d else Fraction(n - 1, n)
        return (same - cross) / self.co_size(t)

    def table_shape(self, s: Subset) -> tuple[int, ...]:
        return tuple(self.sizes[k] for k in s)

    # ------------------------------------------------------------ tables of a set
    def marginal(self, table: np.ndarray, s: Subset, t: Subset) -> np.ndarray:
        """The t-marginal (t ⊆ s) of s-tables: a sum over the attributes of s outside t."""
        lead = table.ndim - len(s)
        axes = tuple(lead + i for i, k in enumerate(s) if k not in t)
        return table.sum(axis=axes) if axes else table

    @staticmethod
    def center(table: np.ndarray, arity: int) -> np.ndarray:
        """⊗ P¹ on the last ``arity`` axes: subtract the mean along each (a new array)."""
        out = np.array(table, dtype=float)
        for axis in range(out.ndim - arity, out.ndim):
            out -= out.mean(axis=axis, keepdims=True)
        return out

    def broadcast(self, component: np.ndarray, t: Subset, s: Subset) -> np.ndarray:
        """A t-table repeated along the attributes of s outside t (t ⊆ s): shape (..., sizes[s])."""
        lead = component.shape[: component.ndim - len(t)]
        expanded = component.reshape(lead + tuple(self.sizes[k] if k in t else 1 for k in s))
        return np.broadcast_to(expanded, lead + self.table_shape(s))

    def components(self, table: np.ndarray, s: Subset) -> dict[Subset, np.ndarray]:
        """The ANOVA components c_T = ⊗_{k∈T} P¹ M_T(table) of an s-table, for every T ⊆ s."""
        return {t: self.center(self.marginal(table, s, t), len(t)) for t in subsets(s)}

    def synthesize(self, components: Mapping[Subset, np.ndarray], s: Subset) -> np.ndarray:
        """The s-table Σ_{T⊆s} bcast(c_T) / ∏_{k∈s∖T} n_k of the given components (missing ones are 0)."""
        out = None
        for t in subsets(s):
            c = components.get(t)
            if c is None:
                continue
            term = self.broadcast(c, t, s) / self.size(tuple(k for k in s if k not in t))
            out = term.copy() if out is None else out + term
        if out is None:
            raise ValueError(f"no component of {s} given")
        return out


@dataclass(frozen=True)
class MarginalWorkload:
    """A weighted stack of marginals W = [w_S M_S]_S of one table, kept implicit.

    Parameters
    ----------
    algebra : MarginalAlgebra
    blocks : tuple of tuple of int
        The attributes of each released marginal, in the order its table is laid out
        (row-major, the first listed attribute slowest), as in
        :class:`dpopt.domain.queries.CountingQuery`.
    weights : tuple of Fraction, optional
        w_S per block (default 1 each).

    The released vector is the concatenation of the blocks' tables.
    """

    algebra: MarginalAlgebra
    blocks: tuple[tuple[int, ...], ...]
    weights: tuple[Fraction, ...] | None = None

    @cached_property
    def sets(self) -> tuple[Subset, ...]:
        """Each block's attributes as an increasing :data:`Subset`."""
        return tuple(tuple(sorted(b)) for b in self.blocks)

    def weight(self, i: int) -> Fraction:
        return Fraction(1) if self.weights is None else Fraction(self.weights[i])

    @cached_property
    def offsets(self) -> tuple[int, ...]:
        sizes = [self.algebra.size(s) for s in self.sets]
        return tuple(itertools.accumulate(sizes, initial=0))

    @property
    def dimension(self) -> int:
        """d, the number of released cells."""
        return self.offsets[-1]

    @cached_property
    def closure(self) -> tuple[Subset, ...]:
        """Every T contained in some block (the components the workload sees), by size then order."""
        found = {t for s in self.sets for t in subsets(s)}
        return tuple(sorted(found, key=lambda t: (len(t), t)))

    @cached_property
    def _gram_eigenvalues(self) -> dict[Subset, Fraction]:
        """λ_T for every T of the closure, each block adding its term to its subsets (Σ_S 2^|S| steps)."""
        out: dict[Subset, Fraction] = {}
        for i, s in enumerate(self.sets):
            term = self.weight(i) ** 2 * self.algebra.co_size(s)
            for t in subsets(s):
                out[t] = out.get(t, Fraction(0)) + term
        return out

    def gram_eigenvalue(self, t: Subset) -> Fraction:
        """λ_T = Σ_{S⊇T} w_S² ∏_{k∉S} n_k, the eigenvalue of WᵀW on range(E_T)."""
        return self._gram_eigenvalues.get(tuple(sorted(t)), Fraction(0))

    def rank(self, without: Sequence[Subset] = ()) -> int:
        """dim range(W) = Σ_{T in the closure} m_T, leaving out the components ``without``."""
        return sum(self.algebra.multiplicity(t) for t in self.closure if t not in without)

    # --------------------------------------------------- released vector <-> tables
    def tables(self, vectors: np.ndarray, dtype: type = float) -> list[np.ndarray]:
        """The block tables of released vectors (shape (..., d)), axes in increasing attribute order; ``dtype``
        ``object`` keeps python integers exact."""
        vectors = np.asarray(vectors, dtype=dtype)
        lead = vectors.shape[:-1]
        out = []
        for i, block in enumerate(self.blocks):
            flat = vectors[..., self.offsets[i]: self.offsets[i + 1]]
            table = flat.reshape(lead + tuple(self.algebra.sizes[k] for k in block))
            order = np.argsort(block)
            out.append(np.moveaxis(table, [len(lead) + j for j in order], list(range(len(lead), table.ndim))))
        return out

    def vector(self, tables: Sequence[np.ndarray]) -> np.ndarray:
        """The released vectors of block tables (inverse of :meth:`tables`)."""
        flats = []
        for block, s, table in zip(self.blocks, self.sets, tables):
            lead = table.ndim - len(s)
            positions = [lead + s.index(k) for k in block]
            laid = np.moveaxis(table, positions, list(range(lead, table.ndim)))
            flats.append(laid.reshape(table.shape[:lead] + (-1,)))
        return np.concatenate(flats, axis=-1)

    # ------------------------------------------------------------ least squares
    def precision(self, t: Subset) -> Fraction:
        """κ_T = Σ_{S⊇T} 1/∏_{k∈S∖T} n_k: B_TᵀB_T = κ_T I for the map B_T: c_T ↦ its share of every block."""
        return sum((Fraction(1, self.algebra.size(tuple(k for k in s if k not in t)))
                    for s in self.sets if set(t) <= set(s)), Fraction(0))

    def consistent_components(self, vectors: np.ndarray) -> dict[Subset, np.ndarray]:
        r"""The components of the orthogonal projection of released vectors onto range(W).

        Minimising Σ_S ‖y_S − ŷ_S‖² over consistent ŷ decouples by component:
        :math:`\hat c_T = \sum_{S\supseteq T} c^{(S)}_T / \prod_{S\setminus T} n_k \,/\, \kappa_T`.
        """
        sums: dict[Subset, np.ndarray] = {}
        for s, table in zip(self.sets, self.tables(vectors)):
            for t, c in self.algebra.components(table, s).items():
                share = c / self.algebra.size(tuple(k for k in s if k not in t))
                sums[t] = share if t not in sums else sums[t] + share
        return {t: c / float(self.precision(t)) for t, c in sums.items()}

    def from_components(self, components: Mapping[Subset, np.ndarray]) -> np.ndarray:
        """The released vector W x of the table x whose components are ``components``."""
        return self.vector([self.algebra.synthesize(components, s) for s in self.sets])

    def project(self, vectors: np.ndarray, without: Sequence[Subset] = ()) -> np.ndarray:
        """Orthogonal projection onto range(W) (leaving out the components ``without``)."""
        comps = {t: c for t, c in self.consistent_components(vectors).items() if t not in without}
        if not comps:
            return np.zeros_like(np.asarray(vectors, dtype=float))
        return self.from_components(comps)

    def projector_diagonal(self, without: Sequence[Subset] = ()) -> np.ndarray:
        r"""diag of that projector: in a cell of block S, :math:`\sum_{T\subseteq S}
        \prod_{k\in T}(1-1/n_k) / (\kappa_T \prod_{S\setminus T} n_k^2)`, the same in every cell of S."""
        out = np.empty(self.dimension)
        for i, s in enumerate(self.sets):
            value = Fraction(0)
            for t in subsets(s):
                if t in without:
                    continue
                rest = self.algebra.size(tuple(k for k in s if k not in t))
                centred = Fraction(self.algebra.multiplicity(t), self.algebra.size(t))
                value += centred / (self.precision(t) * rest * rest)
            out[self.offsets[i]: self.offsets[i + 1]] = float(value)
        return out
