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

Two facet counts are known in closed form and refuse before any work (:func:`known_facets`): the root
polytope conv{e_i − e_j : i ≠ j} of m coordinates (a replace-one histogram) has 2^m − 2 facets
Σ_{i∈I} x_i ≤ 1, ∅ ≠ I ⊊ [m] (Gelfand, Graev & Postnikov 1997), and the cross-polytope conv{±e_i} of m
coordinates (an add/remove histogram) has 2^m facets ⟨σ, x⟩ ≤ 1, σ ∈ {±1}^m.

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

    def check_known(self, vectors: np.ndarray) -> None:
        """Raise :class:`HullBudgetExceeded` when :func:`known_facets` of ``vectors`` exceeds :attr:`facets`."""
        known = known_facets(vectors)
        if known is not None and known[1] > self.facets:
            name, count = known
            raise HullBudgetExceeded(f"{_hull(vectors)} is the {name}: {count} facets, more than {self.facets} "
                                     "(the hull budget)")


UNLIMITED = HullBudget(sys.maxsize, sys.maxsize, sys.maxsize, sys.maxsize)
"""No limit: the builders' default."""


def known_facets(vectors: np.ndarray) -> tuple[str, int] | None:
    """The facet count of conv(vectors) when the nonzero rows are, up to repetition, exactly the root
    polytope's {e_i − e_j : i ≠ j} or the cross-polytope's {±e_i} on m ≥ 2 coordinates: (its name, 2^m − 2
    or 2^m); else None.

    Examples
    --------
    >>> known_facets(np.array([[1., -1, 0], [-1, 1, 0], [1, 0, -1], [-1, 0, 1], [0, 1, -1], [0, -1, 1]]))
    ('root polytope of 3 coordinates', 6)
    >>> known_facets(np.array([[1., 0], [-1, 0], [0, 1], [0, -1]]))
    ('cross-polytope of 2 coordinates', 4)
    """
    rows = np.unique(np.atleast_2d(np.asarray(vectors, dtype=float)) + 0.0, axis=0)
    rows = rows[np.any(rows != 0, axis=1)]
    support = np.flatnonzero(np.any(rows != 0, axis=0))
    m = len(support)
    if m < 2 or not np.all(np.isin(rows, (-1.0, 0.0, 1.0))):
        return None
    plus, minus = (rows == 1).sum(axis=1), (rows == -1).sum(axis=1)
    if len(rows) == m * (m - 1) and np.all(plus == 1) and np.all(minus == 1):
        return f"root polytope of {m} coordinates", 2**m - 2
    if len(rows) == 2 * m and np.all(plus + minus == 1):
        return f"cross-polytope of {m} coordinates", 2**m
    return None


def _hull(points: np.ndarray) -> str:
    return f"the hull of {len(points)} points in dimension {np.shape(points)[1]}"
