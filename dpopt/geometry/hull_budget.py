r"""A deterministic work budget for building K = conv(points): counts, never seconds.

The facets of a hull are enumerated by gift wrapping (:mod:`dpopt.geometry.polytope`) or up to a
symmetry group (:mod:`dpopt.geometry.symmetric_hull`). Whether a hull is built must not depend on the
machine's load, so the budget counts work inside the enumeration, each count a function of the points
alone:

* **facets** — distinct facets listed (a facet orbit counts its members). Every later use of K scales with
  them: the gauge's normals, the lattice law's rational facets, the cone sampler.
* **ridges** — ridges crossed (gift-wrapping steps: one rotation of a facet's hyperplane about a ridge, an
  SVD and a pass over the points; a facet's ridges come from one qhull call on its points).
* **facet hull** — for each facet with v > s vertices of an s-dimensional hull, C(v, ⌊(s − 1)/2⌋): the
  order of the upper bound theorem's limit on the facets of an (s − 1)-polytope with v vertices (McMullen
  1970), i.e. of the size of the one qhull call that triangulates the facet (a call that cannot be stopped
  once started, so it is bounded before it starts).
* **images** — point images |G|·n a symmetric build computes before its first facet (the group's
  permutations, the linear maps M_g and their check on every point). Its later work per facet orbit (|G|
  images of the orbit's vertex set) is bounded through the ridges: every ridge of a representative is
  crossed, and a facet of an s-dimensional polytope has at least s ridges. A hull whose group exceeds it is
  built by plain gift wrapping under the other counts (:func:`dpopt.mechanisms.k_norm.hull_group`: the 2×8
  table with both margins, |G| = 161,280 and 57 points, 254 facets).

Two polytopes' face counts are known in closed form and refuse before any work (:func:`known_faces`), also
through a linear image (a table with both margins fixed): the root polytope conv{e_i − e_j : i ≠ j} of m
coordinates (a replace-one histogram) has 2^m − 2 facets Σ_{i∈I} x_i ≤ 1, ∅ ≠ I ⊊ [m] (Gelfand, Graev &
Postnikov 1997) and m·2^{m−1} − 2m ridges, and the cross-polytope conv{±e_i} of m coordinates (an add/remove
histogram) 2^m facets ⟨σ, x⟩ ≤ 1, σ ∈ {±1}^m and m·2^{m−1} ridges. Plain gift wrapping crosses each ridge once,
so a ridge count above the budget refuses it too (an 11-cell replace-one histogram: 11,242 ridges).

References
----------
.. [1] P. McMullen, "The maximum numbers of faces of a convex polytope", Mathematika 17 (1970), 179–184.
.. [2] I. M. Gelfand, M. I. Graev and A. Postnikov, "Combinatorics of hypergeometric functions associated
   with positive roots", in The Arnold–Gelfand Mathematical Seminars (1997), 205–221.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from dpopt.errors import SolverError


class HullBudgetExceeded(SolverError):
    """The facets of a polytope need more work than its :class:`HullBudget` allows."""


@dataclass(frozen=True)
class HullBudget:
    """Limits on the work of a hull enumeration (see the module docstring).

    Attributes
    ----------
    facets : int
        Most distinct facets listed.
    ridges : int
        Most ridges crossed.
    facet_hull : int
        Largest C(v, ⌊(s − 1)/2⌋) of a facet with v > s vertices.
    images : int
        Most point images |G|·n of a symmetric build.
    """

    facets: int
    ridges: int
    facet_hull: int
    images: int

    def check_facets(self, found: int, points: np.ndarray) -> None:
        """Raise :class:`HullBudgetExceeded` when ``found`` facets exceed :attr:`facets`."""
        if found > self.facets:
            raise HullBudgetExceeded(f"{_hull(points)} has more than {self.facets} facets (the hull budget)")

    def check_ridges(self, crossed: int, points: np.ndarray) -> None:
        """Raise :class:`HullBudgetExceeded` when ``crossed`` ridges exceed :attr:`ridges`."""
        if crossed > self.ridges:
            raise HullBudgetExceeded(f"{_hull(points)} needs more than {self.ridges} ridge crossings "
                                     "(gift-wrapping steps; the hull budget)")

    def check_facet_hull(self, vertices: int, points: np.ndarray) -> None:
        """Raise :class:`HullBudgetExceeded` when a facet with ``vertices`` vertices (v > s) has
        C(v, ⌊(s − 1)/2⌋) above :attr:`facet_hull`."""
        s = points.shape[1]
        size = math.comb(vertices, (s - 1) // 2)
        if vertices > s and size > self.facet_hull:
            raise HullBudgetExceeded(f"{_hull(points)} has a facet with {vertices} vertices: C({vertices}, "
                                     f"{(s - 1) // 2}) = {size}, more than {self.facet_hull} (the hull budget)")

    def check_images(self, order: int, points: np.ndarray) -> None:
        """Raise :class:`HullBudgetExceeded` when a group of ``order`` maps more point images than :attr:`images`."""
        images = order * len(points)
        if images > self.images:
            raise HullBudgetExceeded(f"{_hull(points)} built up to its {order} symmetries needs {images} point "
                                     f"images, more than {self.images} (the hull budget)")

    def check_known(self, vectors: np.ndarray, known: KnownFaces | None, plain: bool = False) -> None:
        """Raise :class:`HullBudgetExceeded` when the ``known`` face counts of conv(``vectors``)
        (:func:`known_faces`) exceed :attr:`facets`, or, for a ``plain`` gift-wrapping build, which crosses every
        ridge of the polytope once, :attr:`ridges`."""
        if known is None:
            return
        if known.facets > self.facets:
            raise HullBudgetExceeded(f"{_hull(vectors)} is the {known.name}: {known.facets} facets, more than "
                                     f"{self.facets} (the hull budget)")
        if plain and known.ridges > self.ridges:
            raise HullBudgetExceeded(f"{_hull(vectors)} is the {known.name}: {known.ridges} ridges, more than the "
                                     f"{self.ridges} ridge crossings plain gift wrapping may make (the hull budget)")


UNLIMITED = HullBudget(sys.maxsize, sys.maxsize, sys.maxsize, sys.maxsize)
"""No limit: the builders' default."""


KNOWN_IMAGE_WORK = 50_000_000
"""Largest n·d·min(n, d) (n distinct nonzero rows, d coordinates) for which :func:`known_faces` looks for a
linear image of the root polytope or the cross-polytope (an elimination in floating point that picks the
candidate coordinates; the answer is then checked exactly)."""


class KnownFaces(NamedTuple):
    """The facet and ridge counts of a polytope known in closed form (:func:`known_faces`)."""

    name: str
    facets: int
    ridges: int


def known_faces(vectors: np.ndarray) -> KnownFaces | None:
    r"""The facet and ridge counts of conv(vectors) when the nonzero rows are, up to repetition, the root
    polytope's {e_i − e_j : i ≠ j} or the cross-polytope's {±e_i} on m ≥ 2 coordinates, or a linear image of one;
    else None.

    The root polytope of m coordinates has 2^m − 2 facets F_I = conv{e_i − e_j : i ∈ I, j ∉ I}, ∅ ≠ I ⊊ [m]
    (Gelfand, Graev & Postnikov 1997), each a product of simplices Δ_{|I|−1} × Δ_{m−|I|−1}, whose facets number
    |I|·[|I| ≥ 2] + (m − |I|)·[m − |I| ≥ 2]; every ridge lies in two facets, so (pairing I with its complement)
    the ridges number Σ_{k=2}^{m−1} k·C(m, k) = m·2^{m−1} − 2m. The cross-polytope of m coordinates has 2^m facets
    ⟨σ, x⟩ ≤ 1, σ ∈ {±1}^m, and m·2^{m−1} ridges (its (m − 2)-faces: 2^{m−1}·C(m, m − 1)).

    A linear image: for r coordinates C, the rows restricted to C form Y = {±e_i} (the cross-polytope of
    r coordinates) or Y = {±e_i} ∪ {e_i − e_j : i ≠ j} (the root polytope of m = r + 1 coordinates with its last
    coordinate dropped, a linear isomorphism of the sum-zero hyperplane), and every row v equals
    v = Σ_i (v_C)_i u_i, u_i the row with v_C = e_i (checked in exact integer arithmetic). Then
    L: y ↦ Σ_i y_i u_i maps conv(Y) onto conv(rows) and π_C ∘ L is the identity on span(Y), so L is a linear
    isomorphism of the two spans and the facet counts agree. A table with both margins published exactly is
    such an image: the 2 × J table's replace-one moves are (a, −a), a ∈ {e_i − e_j}. C is chosen as the pivot
    columns of a floating-point elimination (first columns first); a wrong choice only fails the exact check.

    Examples
    --------
    >>> a = np.array([[1., -1, 0], [-1, 1, 0], [1, 0, -1], [-1, 0, 1], [0, 1, -1], [0, -1, 1]])
    >>> known_faces(a)
    KnownFaces(name='root polytope of 3 coordinates', facets=6, ridges=6)
    >>> known_faces(np.array([[1., 0], [-1, 0], [0, 1], [0, -1]]))
    KnownFaces(name='cross-polytope of 2 coordinates', facets=4, ridges=4)
    >>> known_faces(np.hstack([a, -a]))  # the 2 × 3 table with both margins fixed, replace-one
    KnownFaces(name='root polytope of 3 coordinates', facets=6, ridges=6)
    """
    rows = np.unique(np.atleast_2d(np.asarray(vectors, dtype=float)) + 0.0, axis=0)
    rows = rows[np.any(rows != 0, axis=1)]
    if not np.all(rows == np.round(rows)) or np.abs(rows).max(initial=0.0) > 2.0**20:
        return None
    n, d = rows.shape
    native = _named(rows[:, np.any(rows != 0, axis=0)])
    if native is not None or n * d * min(n, d) > KNOWN_IMAGE_WORK:
        return native
    columns = _pivot_columns(rows)
    image = rows[:, columns]
    named = _named(image, dropped=True)
    if named is None:
        return None
    units = np.array([rows[np.flatnonzero((image == np.eye(len(columns))[i]).all(axis=1))[0]]
                      for i in range(len(columns))], dtype=np.int64)
    return named if np.array_equal(image.astype(np.int64) @ units, rows.astype(np.int64)) else None


def _named(rows: np.ndarray, dropped: bool = False) -> KnownFaces | None:
    """The counts when the distinct nonzero ``rows`` are {e_i − e_j} on their m ≥ 2 columns (or, ``dropped``,
    {±e_i} ∪ {e_i − e_j} on r columns: the root polytope of r + 1 with one coordinate dropped) or {±e_i}."""
    m = rows.shape[1]
    if m < 1 + int(not dropped) or not np.all(np.isin(rows, (-1.0, 0.0, 1.0))):
        return None
    plus, minus = (rows == 1).sum(axis=1), (rows == -1).sum(axis=1)
    if len(rows) == 2 * m and np.all(plus + minus == 1):
        return KnownFaces(f"cross-polytope of {m} coordinates", 2**m, m * 2 ** (m - 1)) if m >= 2 else None
    pairs = (plus == 1) & (minus == 1)
    roots = m + int(dropped)  # the root polytope's coordinates
    if len(rows) == roots * (roots - 1) and np.all(pairs | (dropped & (plus + minus == 1))):
        ridges = roots * 2 ** (roots - 1) - 2 * roots
        return KnownFaces(f"root polytope of {roots} coordinates", 2**roots - 2, ridges)
    return None


def _pivot_columns(rows: np.ndarray) -> list[int]:
    """The pivot columns of a reduced row echelon form of ``rows`` (columns in order, partial pivoting), in
    floating point: a candidate only, :func:`known_faces` checks its use exactly."""
    work = np.array(rows, dtype=float)
    pivots, top = [], 0
    for j in range(work.shape[1]):
        if top == len(work):
            break
        below = np.abs(work[top:, j])
        k = top + int(np.argmax(below))
        if below.max(initial=0.0) <= 1e-9:
            continue
        work[[top, k]] = work[[k, top]]
        work[top + 1:] -= np.outer(work[top + 1:, j] / work[top, j], work[top])
        pivots.append(j)
        top += 1
    return pivots


def _hull(points: np.ndarray) -> str:
    return f"the hull of {len(points)} points in dimension {np.shape(points)[1]}"
