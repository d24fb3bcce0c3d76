"""The constraint set of the optimal-covariance program (:mod:`dpopt.optimize.covariance`).

The directions of the sensitivity space that give distinct constraints vᵀΣ⁺v ≤ 1/μ²
(:func:`distinct_directions`), the extreme points of conv(±S) among them
(:func:`extreme_points`), and the groups of signed coordinate permutations that may map
±S to itself (:class:`Symmetry`, :func:`candidate_symmetries`), which reduce the program
to one variable per isotypic component.
"""

from __future__ import annotations

import hashlib
import itertools
from dataclasses import dataclass

import numpy as np
from scipy import optimize as sp_optimize

from dpopt.core.memory import dense_bytes, require_memory
from dpopt.core.rows import row_groups

_LP_BUDGET = 50  # largest number of points the hull test decides by LP
ROUND = 9
"""Decimals for comparing normalised vectors and constraint rows."""


_DISTINCT: dict[tuple, np.ndarray] = {}
"""The last few results of :func:`distinct_directions`, by the shape and digest of their input (a report designs
the family again at two more budgets on the same listed vectors)."""


def distinct_directions(vectors: np.ndarray) -> np.ndarray:
    """The vectors without zeros, with one of ±v, and with the longest of positive multiples.

    vᵀΣ⁺v is even in v and grows with its scale, so these give the same constraints. Kept for the last
    four inputs (by a BLAKE2b digest of their bytes): the census example's 538,571 moves took 1.4 s, their
    digest 0.1 s (its Semi-DP space now lists only its 471 distinct vectors).
    """
    v = np.ascontiguousarray(np.atleast_2d(np.asarray(vectors, dtype=float)))
    key = (v.shape, hashlib.blake2b(v.view(np.uint8), digest_size=32).digest())
    if key not in _DISTINCT:
        while len(_DISTINCT) >= 4:
            del _DISTINCT[next(iter(_DISTINCT))]
        _DISTINCT[key] = _distinct_directions(v)
    return _DISTINCT[key].copy()


def _distinct_directions(v: np.ndarray) -> np.ndarray:
    """:func:`distinct_directions` of a float array, computed."""
    norms = np.linalg.norm(v, axis=1)
    top = norms.max(initial=0.0)
    keep = norms > 1e-12 * top
    v, norms = v[keep], norms[keep]
    if v.shape[0] == 0:
        return v
    u = v / norms[:, None]
    lead = u[np.arange(u.shape[0]), np.argmax(np.abs(u) > 1e-9, axis=1)]
    sign = np.where(lead < 0, -1.0, 1.0)
    u *= sign[:, None]
    keys = np.round(u, ROUND) + 0.0  # + 0.0: −0 and 0 are one key
    first, group = row_groups(keys)  # hashing: np.unique(axis=0) would sort 10⁵ rows column by column
    best = np.full(first.size, -1)
    order = np.argsort(norms)
    np.maximum.at(best, group[order], np.arange(order.size))  # per group, its last (longest) in `order`
    chosen = np.sort(order[best])
    return v[chosen] * sign[chosen, None]


def extreme_points(y: np.ndarray) -> tuple[np.ndarray, np.ndarray, str]:
    """The rows of ``y`` (spanning R^r) that are extreme points of conv(±y), their leverages,
    and how they were found.

    With G = yᵀy, the functional c_j = G⁻¹y_j exposes y_j when its leverage
    y_jᵀG⁻¹y_j exceeds max_{k≠j} |y_jᵀG⁻¹y_k| (then y_j is the unique maximiser of ⟨c_j, ·⟩
    over ±y, so an extreme point). The remaining rows are decided by an LP
    (y_j ∈ conv(±y_k, k ≠ j)?) when they are at most :data:`_LP_BUDGET`, and kept otherwise.
    Removing non-extreme points leaves conv(±y), hence every constraint, unchanged.

    Raises
    ------
    MemoryLimitError
        When the n × n matrices of the test exceed the memory limit (:mod:`dpopt.core.memory`).
    """
    n = y.shape[0]
    if y.shape[1] == 1:
        top = int(np.argmax(np.abs(y[:, 0])))
        return y[[top]], np.ones(1), "rank 1: the longest vector"
    require_memory(2 * dense_bytes(n, n), f"the leverage test's {n} x {n} matrices over the sensitivity vectors")
    gram = (y @ np.linalg.inv(y.T @ y)) @ y.T
    leverage = np.diag(gram).copy()
    off = np.abs(gram)
    np.fill_diagonal(off, -np.inf)
    exposed = leverage > off.max(axis=1, initial=-np.inf) * (1.0 + 1e-9)
    undecided = np.flatnonzero(~exposed)
    if undecided.size == 0:
        return y, leverage, f"all {n} points are exposed vertices (leverage test)"
    if undecided.size > _LP_BUDGET:
        return y, leverage, (
            f"{int(exposed.sum())} exposed vertices (leverage test); {undecided.size} points not tested"
        )
    keep = exposed.copy()
    for j in undecided:
        others = np.delete(y, j, axis=0)
        z = np.vstack([others, -others]).T
        res = sp_optimize.linprog(
            np.zeros(z.shape[1]), A_ub=np.ones((1, z.shape[1])), b_ub=[1.0], A_eq=z, b_eq=y[j],
            bounds=(0, None), method="highs",
        )
        keep[j] = res.status != 0
    how = f"{int(keep.sum())} of {n} points are extreme (leverage test, {undecided.size} LPs)"
    return y[keep], leverage[keep], how


# ------------------------------------------------------------------ symmetry
@dataclass(frozen=True)
class Symmetry:
    """A group of signed coordinate permutations with a multiplicity-free decomposition.

    Attributes
    ----------
    name : str
    generators : list of (permutation, signs)
        g acts as (g x)_i = s_i x_{π(i)}.
    projectors : list of ndarray
        Orthogonal projectors onto the isotypic components (they sum to I); the group's
        commutant is their span.
    """

    name: str
    generators: list[tuple[np.ndarray, np.ndarray]]
    projectors: list[np.ndarray]

    def maps_to_itself(self, vectors: np.ndarray) -> bool:
        """Whether every generator maps the set ±``vectors`` onto itself."""
        reference = _canonical_rows(vectors)
        return all(
            np.array_equal(_canonical_rows(vectors[:, perm] * signs), reference) for perm, signs in self.generators
        )

    def preserves(self, kind: str, m: np.ndarray | None) -> bool:
        """Whether the utility of ``kind`` (and trace matrix ``m``) is invariant (max_variance and
        log det are, under signed permutations)."""
        if kind != "trace":
            return True
        tol = 1e-10 * max(float(np.abs(m).max()), 1e-300)
        return all(
            np.abs(m[np.ix_(perm, perm)] * np.outer(signs, signs) - m).max() <= tol for perm, signs in self.generators
        )


def _canonical_rows(v: np.ndarray) -> np.ndarray:
    scale = max(float(np.abs(v).max(initial=0.0)), 1e-300)
    r = np.round(v / scale, ROUND) + 0.0
    lead = r[np.arange(r.shape[0]), np.argmax(r != 0, axis=1)]
    r = r * np.where(lead < 0, -1.0, 1.0)[:, None] + 0.0
    return np.unique(r, axis=0)


def symmetric_group(d: int) -> Symmetry:
    """S_d permuting all coordinates: R^d = span(1) ⊕ sum-zero vectors."""
    ones = np.ones(d)
    gens = [(np.r_[1, 0, np.arange(2, d)].astype(int), ones), (np.roll(np.arange(d), -1), ones)] if d > 1 else []
    j = np.full((d, d), 1.0 / d)
    return Symmetry(f"S_{d} on the coordinates", gens, [j, np.eye(d) - j] if d > 1 else [np.eye(d)])


def table_group(shape: tuple[int, ...]) -> Symmetry:
    """S_{n1}×…×S_{np} permuting the levels of each attribute of a row-major table.

    Components: the ANOVA projectors ⊗_i F_i with F_i = J/n_i or I − J/n_i (main effects and
    interactions); they are the tensor products of distinct irreducibles, so the
    decomposition is multiplicity-free.
    """
    d = int(np.prod(shape))
    index = np.arange(d).reshape(shape)
    gens = []
    for axis, n in enumerate(shape):
        if n < 2:
            continue
        for order in (np.r_[1, 0, np.arange(2, n)].astype(int), np.roll(np.arange(n), -1)):
            gens.append((np.take(index, order, axis=axis).reshape(-1), np.ones(d)))
    projectors = []
    for choice in itertools.product((False, True), repeat=len(shape)):
        if any(c and n < 2 for c, n in zip(choice, shape)):
            continue
        p = np.ones((1, 1))
        for c, n in zip(choice, shape):
            j = np.full((n, n), 1.0 / n)
            p = np.kron(p, np.eye(n) - j if c else j)
        projectors.append(p)
    return Symmetry(f"S_{'×S_'.join(map(str, shape))} on the table's levels", gens, projectors)


def sign_flips(d: int) -> Symmetry:
    """Independent sign flips of each coordinate: the commutant is the diagonal matrices."""
    ident = np.arange(d)
    gens = [(ident, np.where(ident == i, -1.0, 1.0)) for i in range(d)]
    return Symmetry("coordinate sign flips", gens, [np.diag((ident == i).astype(float)) for i in range(d)])


def candidate_symmetries(d: int, table_shape: tuple[int, ...] | None) -> list[Symmetry]:
    """The groups tried, coarsest commutant first."""
    out = [symmetric_group(d)]
    if table_shape is not None and len(table_shape) > 1 and int(np.prod(table_shape)) == d:
        out.append(table_group(tuple(table_shape)))
    out.append(sign_flips(d))
    return out
