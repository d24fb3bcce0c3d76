r"""A span V given by integer generators, with an integer basis C of V^⊥: public statistics neighbours keep.

When the neighbouring differences δ are integer vectors spanning V, the orthogonal complement V^⊥ has a basis of
integer rows C (k × d, k = d − dim V). For integer answers y the statistics Cy are integers, the same on every
neighbour (Cδ = 0 exactly), and the component off the span is a function of them alone:

.. math:: (I - P_V)\,y = C^\top (C C^\top)^{-1} (C y),

so it can be formed in floating point from the integers Cy and is the same float vector, bit for bit, on
neighbouring datasets (the public component of an exact lattice release, :mod:`dpopt.mechanisms.integer_strategy`).

C is canonical, a function of V alone: with R the reduced row echelon form of the generators (exact, in
rationals, python-flint) and F its free columns, row f of C is the null vector with 1 in column f, 0 in the other
free columns and −R[i, f] in the i-th pivot column (the basis of V^⊥ with C[:, F] = I), scaled by a positive
factor to coprime integers. `dpopt verify` re-derives C from the spec and checks Cδ = 0 for every listed δ
in integers.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from dpopt.sensitivity.subspace import DenseSubspace

MAX_COMPLEMENT_DIMENSION = 256
"""Largest ambient dimension d whose integer complement is computed (an exact echelon form of the generators
reduced to d × d; the census age ranges: d = 15)."""

MAX_ENTRY = 2**20
"""Largest |C_ij| served: with |Cy| summed in int64 over d ≤ 256 answers below 2³⁰, far from overflow."""


def integer_complement(generators: np.ndarray) -> np.ndarray | None:
    """The canonical integer basis C of the orthogonal complement of the rows of ``generators`` (module
    docstring), shape (d − rank, d) as int64; None when a generator is not an integer vector, d exceeds
    :data:`MAX_COMPLEMENT_DIMENSION` or an entry of C exceeds :data:`MAX_ENTRY`."""
    from flint import fmpq_mat  # imported where used: python-flint loads in ~0.1 s

    g = np.atleast_2d(np.asarray(generators, dtype=float))
    d = g.shape[1]
    if d > MAX_COMPLEMENT_DIMENSION or not np.array_equal(g, np.round(g)) or np.abs(g).max(initial=0) > 2.0**52:
        return None
    rows = np.unique(g.astype(np.int64), axis=0)
    rows = rows[np.any(rows != 0, axis=1)]
    if not len(rows):
        return np.eye(d, dtype=np.int64)
    echelon, rank = fmpq_mat(len(rows), d, [int(x) for x in rows.ravel().tolist()]).rref()
    pivots = [next(j for j in range(d) if echelon[i, j] != 0) for i in range(rank)]
    free = [j for j in range(d) if j not in set(pivots)]
    out = np.zeros((len(free), d), dtype=np.int64)
    for r, f in enumerate(free):
        entries = {f: (1, 1)} | {p: (-int(echelon[i, f].p), int(echelon[i, f].q)) for i, p in enumerate(pivots)}
        scale = math.lcm(*(q for _, q in entries.values()))
        numerators = {j: n * (scale // q) for j, (n, q) in entries.items()}
        common = math.gcd(*numerators.values())
        for j, n in numerators.items():
            if abs(n // common) > MAX_ENTRY:
                return None
            out[r, j] = n // common
    return out


class IntegerComplementSpan(DenseSubspace):
    """A :class:`DenseSubspace` V whose neighbouring differences are integer vectors listed by ``generators``,
    with the public component (I − P_V)y computed from the integer statistics Cy (module docstring).

    Parameters
    ----------
    basis : ndarray, shape (d, r)
        An orthonormal basis of V.
    generators : callable
        Returns integer vectors (rows) spanning V, e.g. the listed Semi-DP differences; called once, on the first
        use of the complement. A ValueError from it (too many to list) leaves the span without one.
    """

    def __init__(self, basis: np.ndarray, generators: Callable[[], np.ndarray]):
        super().__init__(basis)
        self._generators = generators
        self._complement: list[np.ndarray | None] = []

    def complement(self) -> np.ndarray | None:
        """C (int64, (d − r) × d), or None when the generators are not listed, not integers, or do not span V
        (the exact rank of C differs from d − r, or C is not orthogonal to the basis within 1e-9)."""
        if not self._complement:
            self._complement.append(self._derive())
        return self._complement[0]

    def _derive(self) -> np.ndarray | None:
        if self.ambient > MAX_COMPLEMENT_DIMENSION:  # before listing the generators
            return None
        try:
            generators = self._generators()
        except ValueError:
            return None
        c = integer_complement(generators)
        if c is None or c.shape[0] != self.ambient - self.rank:
            return None
        scale = np.abs(c).sum(axis=1, keepdims=True).astype(float)
        if self.rank and float(np.abs((c / scale) @ self.basis()).max()) > 1e-9:
            return None
        return c

    def invariant_component(self, counts: np.ndarray) -> np.ndarray | None:
        """Cᵀ(CCᵀ)⁻¹(Cy) from the int64 statistics Cy of the integer answers y (rows); None without C."""
        c = self.complement()
        if c is None:
            return None
        counts = np.asarray(counts)
        statistics = counts.astype(np.int64) @ c.T
        if not len(c):
            return np.zeros(counts.shape)
        return statistics.astype(float) @ np.linalg.solve((c @ c.T).astype(float), c.astype(float))
