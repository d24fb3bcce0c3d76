r"""The subspace of tables whose invariant margins vanish, with an O(d) projector.

A table x over attributes with n_1 × … × n_p levels splits orthogonally into ANOVA
components V_S, S ⊆ {1..p}: V_S = ⊗_{j∈S} 1^⊥_{n_j} ⊗_{j∉S} span(1_{n_j}), of dimension
∏_{j∈S}(n_j − 1). The marginal table over a group G sees exactly the components with
S ⊆ G. So with margins over groups G_1..G_q invariant (and the total, S = ∅),

.. math::

    \ker = \bigoplus_{S \notin \mathcal{S}} V_S,\qquad
    \mathcal{S} = \{S : S \subseteq G_k \text{ for some } k\} \cup \{\emptyset\},

and the projector onto it is P = I − Σ_{S∈𝒮} P_S. Expanding each centring I − J/n_j,
Σ_{S∈𝒮} P_S = Σ_{R∈𝒮} c_R M_R with M_R the average over the attributes outside R
(broadcast back) and c_R = Σ_{S∈𝒮, S⊇R} (−1)^{|S∖R|}. Applying P costs one pass per R and
O(d) memory; the d × d matrix is never formed. For two attributes with both one-way
margins this is P = (I − J_r/r) ⊗ (I − J_c/c) (Cho & Awan, Example 8 for 2 × 2).

Every diagonal entry of P_S is ∏_{j∈S}(1 − 1/n_j)∏_{j∉S}1/n_j, the same in every cell, so
diag(P) = rank/d.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from dpopt.sensitivity.subspace import Subspace


def helmert(n: int) -> np.ndarray:
    """An orthonormal basis of the sum-zero vectors of R^n, shape (n, n − 1)."""
    q, _ = np.linalg.qr(np.eye(n)[:, :-1] - 1.0 / n)
    return q


class MarginSubspace(Subspace):
    """Tables of ``shape`` whose total and marginal tables over ``groups`` are all zero.

    Parameters
    ----------
    shape : tuple of int
        Levels per attribute (cells row-major, the first attribute slowest).
    groups : tuple of tuple of int
        The attribute groups (axes) whose margins are invariant.

    Examples
    --------
    >>> P = MarginSubspace((2, 2), ((0,), (1,)))
    >>> P.rank, (4 * P.project(np.eye(4))).round(12).tolist()[0]
    (1, [1.0, -1.0, -1.0, 1.0])
    """

    name = "margins_kernel"

    def __init__(self, shape: tuple[int, ...], groups: tuple[tuple[int, ...], ...]):
        self.shape = tuple(int(s) for s in shape)
        self.groups = tuple(tuple(sorted(g)) for g in groups)
        p = len(self.shape)
        closure = {frozenset()}
        for g in self.groups:
            for k in range(1, len(g) + 1):
                closure.update(frozenset(c) for c in itertools.combinations(g, k))
        self._closure = closure
        coefficients = {}
        for R in closure:
            c = sum((-1) ** len(S - R) for S in closure if S >= R)
            if c:
                coefficients[R] = c
        self._terms = [(c, tuple(j for j in range(p) if j not in R)) for R, c in sorted(
            coefficients.items(), key=lambda item: (len(item[0]), sorted(item[0])))]
        self.ambient = math.prod(self.shape)
        removed = sum(math.prod(self.shape[j] - 1 for j in S) for S in closure)
        self.rank = self.ambient - removed

    def project(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=float)
        lead = x.shape[:-1]
        table = x.reshape(lead + self.shape)
        out = table.copy()
        offset = len(lead)
        for c, averaged in self._terms:
            axes = tuple(offset + j for j in averaged)
            out -= c * (table.mean(axis=axes, keepdims=True) if axes else table)
        return out.reshape(x.shape)

    def invariant_component(self, counts: np.ndarray) -> np.ndarray:
        """(I − P)x = Σ_R c_R M_R x (module docstring) for integer counts x, each M_R x the integer marginal
        over R (a sub-margin of an invariant one, or the total) divided by ∏_{j∉R} n_j: the marginals are
        summed in int64, so the floats depend on them alone."""
        counts = np.asarray(counts)
        lead = counts.shape[:-1]
        table = counts.astype(np.int64).reshape(lead + self.shape)
        out = np.zeros(table.shape)
        offset = len(lead)
        for c, averaged in self._terms:
            axes = tuple(offset + j for j in averaged)
            if not axes:  # the whole table is invariant
                out += c * table
                continue
            out += c * (table.sum(axis=axes, keepdims=True) / math.prod(self.shape[j] for j in averaged))
        return out.reshape(counts.shape)

    def projector_diagonal(self) -> np.ndarray:
        return np.full(self.ambient, self.rank / self.ambient)

    def basis(self) -> np.ndarray:
        """An orthonormal basis (d × rank), one Kronecker block per component V_S not fixed
        by the margins. Memory O(d · rank): for small tables (refused above the memory limit)."""
        self.require_basis_memory()
        p = len(self.shape)
        helmert_bases = [helmert(n) for n in self.shape]
        ones = [np.full((n, 1), 1.0 / math.sqrt(n)) for n in self.shape]
        blocks = []
        for k in range(1, p + 1):
            for S in itertools.combinations(range(p), k):
                if frozenset(S) in self._closure:
                    continue
                factor = np.ones((1, 1))
                for j in range(p):
                    factor = np.kron(factor, helmert_bases[j] if j in S else ones[j])
                if factor.shape[1]:
                    blocks.append(factor)
        return np.hstack(blocks) if blocks else np.zeros((self.ambient, 0))

    def describe(self) -> dict:
        return {
            **super().describe(),
            "shape": list(self.shape),
            "zero_margins": [list(g) for g in self.groups],
        }
