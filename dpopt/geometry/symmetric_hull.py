r"""K = conv(points) built up to a symmetry group: facet orbits, orbit-wise exact sampling.

A finite group G of linear isometries of R^s that permutes the points (p_i ↦ p_{π_g(i)})
maps K onto itself and facets onto facets. The sensitivity spaces of contingency tables
have such a group: an r×c table's moves are kept by row permutations, column
permutations, the transpose (r = c) and the sign, which act on table cells as signed
permutations (:func:`table_symmetries` finds the largest such group that keeps the listed
vectors and verifies it; it is not assumed; :func:`table_shape` names it, and its order, without
enumerating it).

**Facets up to symmetry** (adjacency decomposition). A first facet comes from a linear
program; for each *representative* facet F its ridges (from qhull, on F's points with one
coordinate dropped) are crossed by rotating F's hyperplane about them
(:func:`dpopt.geometry.polytope._across`, the gift-wrapping step); a neighbour whose
vertex set is not in a known orbit becomes a new representative and its whole orbit
{g F : g ∈ G} is listed. The facet graph of a polytope is connected, so when every ridge
of every representative leads to a listed facet, the list holds every facet of K (an
image of a representative's ridge leads to the image of its neighbour).

**Exact uniform sampling by orbits.** K is tiled by the cones conv(0, g F_r) over all
facets, so with F_r triangulated from its centroid (cones C_{r,j} = conv(0, simplex)):

.. math:: \Pr(r, j) = \frac{|G F_r|\,\operatorname{vol} C_{r,j}}{\operatorname{vol} K},\qquad
          \operatorname{vol} K = \sum_r |G F_r| \operatorname{vol}\operatorname{conv}(0, F_r),

then g uniform on G (each facet of the orbit is g F_r for exactly |Stab F_r| elements g,
so g F_r is uniform on the orbit), then a Dirichlet point of the simplex, mapped by g. Only
the representatives are triangulated: the boundary simplices of K are never listed.

**Moments.** For x uniform on K, E[xxᵀ] = Σ_r w_r |G|⁻¹ Σ_g M_g E_r[xxᵀ] M_gᵀ with w_r
the orbit's share of the volume and E_r the (exact, simplex formula) moment of the
representative cone.

Measured (``benchmarks/bench_k_norm.py``, 2 shared cores) on k×k tables with both one-way
margins invariant, G = S_k × S_k × transpose × sign (order 4·(k!)²: 144, 2,304, 57,600
for k = 3, 4, 5): k = 4 (s = 9) has 9 facet orbits (3,818 facets), built in about 2.4 s
(plain gift wrapping: 73 s in the same run); k = 5 (s = 16) is out of
reach: it has at least 34,732 facet orbits holding over 10⁹ facets (docs/papers/k-norm.md),
so neither the representatives nor the gauge's list of normals can be built or stored.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from dpopt._lazy import lazy_module
from dpopt.geometry.hull_budget import UNLIMITED, HullBudget
from dpopt.geometry.polytope import (
    _TIGHT, ConeSampler, _abs_determinants, _across, _first_facet, _triangulate_facet, power_of_two_scale,
)

linalg = lazy_module("scipy.linalg")


_BLOCK = 2_000_000
"""Numbers held at once by the gauge (y·normalsᵀ) and the symmetry check (M_g p_i)."""

MAX_GROUP_ORDER = 200_000
"""Largest group of table moves that is enumerated (row and column permutations, transpose)."""


# ---------------------------------------------------------------------- the group
def table_symmetries(vectors: np.ndarray) -> np.ndarray | None:
    """The signed cell permutations of an r×c table that map the rows of ``vectors`` onto
    themselves, as point permutations; None when no table shape has such a group.

    The group of :func:`table_shape` (the largest verified one), every element's point
    permutation composed from its generators'.

    Returns
    -------
    ndarray of int, shape (|G|, n) or None
        Row g lists π_g: the image of vector i is vector π_g(i). The first half of the
        rows are the unsigned elements, the second half the same ones composed with −1.
    """
    shape = table_shape(vectors)
    return None if shape is None else _group(_clean(vectors), *shape)


def table_shape(vectors: np.ndarray) -> tuple[int, int] | None:
    """The shape r×c whose table-move group keeps the rows of ``vectors``, the largest such group of order
    ≤ :data:`MAX_GROUP_ORDER` (:func:`table_group_order`); None when no shape has one.

    The vectors are read as row-major r×c tables for every factorisation d = r·c with
    r, c ≥ 2; for each one, largest group first, the generators of S_r × S_c (× transpose
    when r = c) × {±1} are checked on the vectors (one whose image of some vector is not a
    listed vector rejects the shape). Nothing is enumerated: the order is known from the shape.
    """
    vectors = _clean(vectors)
    d = vectors.shape[1]
    shapes = [(r, d // r) for r in range(2, d // 2 + 1) if d % r == 0]
    for r, c in sorted(shapes, key=lambda rc: -table_group_order(*rc)):
        if table_group_order(r, c) <= MAX_GROUP_ORDER and _keeps(vectors, r, c):
            return r, c
    return None


def table_group_order(r: int, c: int) -> int:
    """|S_r × S_c (× transpose when r = c) × {±1}| = 2·r!·c! (·2 when r = c)."""
    return 2 * math.factorial(r) * math.factorial(c) * (2 if r == c else 1)


def _clean(vectors: np.ndarray) -> np.ndarray:
    return np.atleast_2d(np.asarray(vectors, dtype=float)) + 0.0  # no −0.0


def _keeps(vectors: np.ndarray, r: int, c: int) -> bool:
    """Whether the generators of the r×c table-move group (a swap and a cycle of the rows, the same of the
    columns, the transpose when r = c, −1) map the vectors onto themselves."""
    cells = np.arange(r * c).reshape(r, c)
    locate = _locator(vectors)
    generators = [cells[[1, 0, *range(2, r)]], cells[[*range(1, r), 0]],
                  cells[:, [1, 0, *range(2, c)]], cells[:, [*range(1, c), 0]]]
    if r == c:
        generators.append(cells.T)
    return all(locate(vectors[:, move.ravel()]) is not None for move in generators) and locate(-vectors) is not None


def _group(vectors: np.ndarray, r: int, c: int) -> np.ndarray:
    """Every π_g of S_r × S_c (× transpose when r = c) × {±1}, for a shape whose generators keep the
    vectors (:func:`_keeps`). The elements are composed from the generators' point permutations
    (π_{gh} = π_g ∘ π_h), so each is a symmetry."""
    cells = np.arange(r * c).reshape(r, c)
    locate = _locator(vectors)
    row_moves = [cells[list(p)].ravel() for p in itertools.permutations(range(r))]
    col_moves = [cells[:, list(q)].ravel() for q in itertools.permutations(range(c))]
    rows = np.array([locate(vectors[:, move]) for move in row_moves])
    cols = np.array([locate(vectors[:, move]) for move in col_moves])
    unsigned = rows[:, cols].reshape(-1, len(vectors))
    if r == c:
        unsigned = np.vstack([unsigned, unsigned[:, locate(vectors[:, cells.T.ravel()])]])
    return np.vstack([unsigned, locate(-vectors)[unsigned]])


def _locator(vectors: np.ndarray):
    """images ↦ the index of each image row among ``vectors`` (None if one is missing)."""
    n = len(vectors)
    keys = _row_keys(vectors)
    order = np.argsort(keys).astype(np.int16 if n < 2**15 else np.int32)
    sorted_keys = keys[order]

    def locate(images: np.ndarray) -> np.ndarray | None:
        found = _row_keys(images + 0.0)
        at = np.minimum(np.searchsorted(sorted_keys, found), n - 1)
        return order[at] if np.array_equal(sorted_keys[at], found) else None

    return locate


def _row_keys(rows: np.ndarray) -> np.ndarray:
    rows = np.ascontiguousarray(rows)
    return rows.view(np.dtype((np.void, rows.dtype.itemsize * rows.shape[1]))).ravel()


# ---------------------------------------------------------------------- the polytope
@dataclass(frozen=True, eq=False)
class SymmetricPolytope(ConeSampler):
    """K = conv(points) ⊂ R^s (origin interior) with a group G of symmetries of the points.

    Attributes
    ----------
    points : ndarray, shape (n, s)
    permutations : ndarray of int, shape (|G|, n)
        π_g for every g ∈ G (see :func:`table_symmetries`).
    maps : ndarray, shape (|G|, s, s)
        The linear map M_g with M_g p_i = p_{π_g(i)} (solved on s independent points; its error is in
        :meth:`consistency`).
    tight : tuple of ndarray of int
        The vertex set of each representative facet F_r.
    rep_normals : ndarray, shape (R, s)
        ⟨a_r, y⟩ ≤ 1 on F_r.
    orbit_sizes : ndarray of int, shape (R,)
        |G F_r|, the number of distinct images of the vertex set.
    simplices : ndarray of int, shape (m, s)
        The representatives' triangulations; index n + r is the centroid of F_r.
    simplex_rep : ndarray of int, shape (m,)
    cone_volumes : ndarray, shape (m,)
        vol conv(0, simplex) = |det|/s! for the representatives' simplices.
    normals : ndarray, shape (F, s)
        Every facet of K (the images M_g^{−T} a_r), for the gauge.
    reference_volume : float
        Σ_r |G F_r| vol_{s−1}(F_r)·dist(0, F_r)/s with qhull's facet volumes.
    open_ridges : int
        Representative ridges not held by the facet found across them.
    """

    points: np.ndarray
    permutations: np.ndarray
    maps: np.ndarray
    tight: tuple
    rep_normals: np.ndarray
    orbit_sizes: np.ndarray
    simplices: np.ndarray
    simplex_rep: np.ndarray
    cone_volumes: np.ndarray
    normals: np.ndarray
    reference_volume: float
    open_ridges: int
    method: str = "gift wrapping up to symmetry"

    @classmethod
    def from_points(cls, points: np.ndarray, permutations: np.ndarray,
                    budget: HullBudget = UNLIMITED) -> SymmetricPolytope:
        """The hull of ``points`` built up to the group given by ``permutations``.

        Raises
        ------
        ValueError
            If the points do not span R^s, the origin is not interior, or a permutation is
            not induced by a linear map.
        HullBudgetExceeded
            If the group maps more point images, or the orbits hold more facets, cross more
            ridges or have a larger facet triangulation, than ``budget`` allows.
        """
        points = np.atleast_2d(np.asarray(points, dtype=float))
        permutations = np.asarray(permutations)
        budget.check_images(len(permutations), points)
        scale = power_of_two_scale(points)
        unit = points / scale
        parts = _facet_orbits(unit, permutations, budget)
        maps, tight, rep_normals, orbit_sizes, simplices, simplex_rep, reference, open_ridges = parts
        s = points.shape[1]
        centroids = np.array([points[t].mean(axis=0) for t in tight])
        cones = _abs_determinants(np.vstack([points, centroids]), simplices) / math.factorial(s)
        rep_normals = rep_normals / scale
        inverse_transposed = np.linalg.inv(maps).transpose(0, 2, 1)
        images = np.einsum("gij,rj->rgi", inverse_transposed, rep_normals).reshape(-1, s)
        _, first = np.unique(np.round(images * scale, 8), axis=0, return_index=True)
        return cls(points, permutations, maps, tuple(tight), rep_normals, orbit_sizes, simplices,
                   simplex_rep, cones, images[np.sort(first)], reference * scale**s, open_ridges)

    @property
    def dimension(self) -> int:
        return self.points.shape[1]

    @property
    def group_order(self) -> int:
        return len(self.permutations)

    @cached_property
    def rep_cone_volumes(self) -> np.ndarray:
        """vol conv(0, F_r) for each representative."""
        return np.bincount(self.simplex_rep, weights=self.cone_volumes, minlength=len(self.tight))

    @property
    def volume(self) -> float:
        """vol K = Σ_r |G F_r| vol conv(0, F_r)."""
        return float(self.orbit_sizes @ self.rep_cone_volumes)

    @property
    def boundary_simplices(self) -> int:
        """Simplices of the boundary triangulation that the orbits stand for."""
        return int(self.orbit_sizes @ np.bincount(self.simplex_rep, minlength=len(self.tight)))

    @cached_property
    def vertices(self) -> np.ndarray:
        """Indices of the points that lie on some facet (the extreme points)."""
        return np.unique(np.concatenate([self.permutations[:, t].ravel() for t in self.tight]))

    def gauge(self, y: np.ndarray) -> np.ndarray:
        """‖y‖_K = max_f ⟨a_f, y⟩ over every facet, for the rows of ``y``."""
        y = np.atleast_2d(np.asarray(y, dtype=float))
        return np.maximum(self._by_rows(y, lambda block: block.max(axis=1)), 0.0)

    def orbit_of(self, y: np.ndarray) -> np.ndarray:
        """The facet orbit whose cones hold each row of ``y`` (the maximising facet's orbit)."""
        y = np.atleast_2d(np.asarray(y, dtype=float))
        return self._normal_orbit[self._by_rows(y, lambda block: block.argmax(axis=1))]

    def _by_rows(self, y: np.ndarray, reduce) -> np.ndarray:
        """``reduce`` of y·normalsᵀ, a block of rows at a time (the full matrix can be GBs)."""
        rows = max(1, _BLOCK // max(1, len(self.normals)))
        return np.concatenate([reduce(y[i:i + rows] @ self.normals.T) for i in range(0, len(y), rows)]
                              or [np.zeros(0)])

    @cached_property
    def _normal_orbit(self) -> np.ndarray:
        """Orbit index of each row of ``normals``: the representative it is a multiple of
        in the inner products with the points (the facets' vertex sets)."""
        tight_sets = {}
        for r, t in enumerate(self.tight):
            for row in np.unique(np.sort(self.permutations[:, t], axis=1), axis=0):
                tight_sets[row.tobytes()] = r
        out = np.empty(len(self.normals), dtype=int)
        for f, a in enumerate(self.normals):
            on = np.flatnonzero(np.abs(self.points @ a - 1.0) <= _TIGHT).astype(self.permutations.dtype)
            out[f] = tight_sets[on.tobytes()]
        return out

    def extend(self, images: np.ndarray) -> np.ndarray:
        """The values of a linear map L on the points, then on the centroid of every facet
        g F_r (row n + r·|G| + g: the mean of L over the points π_g(F_r))."""
        images = np.asarray(images, dtype=float)
        centroids = [images[self.permutations[:, t]].mean(axis=1) for t in self.tight]
        return np.vstack([images, *centroids])

    # ------------------------------------------------------------------ sampling
    def sample_cones(self, rng: np.random.Generator, size: int) -> tuple[np.ndarray, np.ndarray]:
        """``size`` uniform points of K as ((group element, simplex) pairs, weights)."""
        s = self.dimension
        weights = self.cone_volumes * self.orbit_sizes[self.simplex_rep]
        cumulative = np.cumsum(weights)
        simplex = np.searchsorted(cumulative, rng.random(size) * cumulative[-1], side="right")
        simplex = np.minimum(simplex, len(cumulative) - 1)
        element = rng.integers(0, self.group_order, size=size)
        e = rng.standard_exponential((size, s + 1))
        return np.column_stack([element, simplex]), e[:, :s] / e.sum(axis=1, keepdims=True)

    def combine(self, cone: np.ndarray, weights: np.ndarray, extended_images: np.ndarray) -> np.ndarray:
        """Σ_j w_j L(g p_j) for the draws of :meth:`sample_cones` (g p_j = p_{π_g(j)}; a
        centroid's image is the centroid of the image facet)."""
        n = len(self.points)
        element, simplex = cone[:, 0], cone[:, 1]
        out = np.zeros((len(cone), extended_images.shape[1]))
        for j in range(self.dimension):
            index = self.simplices[simplex, j]
            moved = np.where(index < n, self.permutations[element, np.minimum(index, n - 1)],
                             n + (index - n) * self.group_order + element)
            out += weights[:, j, None] * extended_images[moved]
        return out

    # ------------------------------------------------------------------ moments
    @cached_property
    def _second_moment(self) -> np.ndarray:
        """E[xxᵀ] for x uniform on K (s × s): the representatives' simplex moments, averaged
        over the group orbit by orbit."""
        s = self.dimension
        extended = np.vstack([self.points, [self.points[t].mean(axis=0) for t in self.tight]])
        corners = extended[self.simplices]  # (m, s, s)
        sums = corners.sum(axis=1)
        per_simplex = (np.einsum("mji,mjk->mik", corners, corners)
                       + np.einsum("mi,mk->mik", sums, sums)) / ((s + 1) * (s + 2))
        weights = self.cone_volumes * self.orbit_sizes[self.simplex_rep] / self.volume
        moment = np.einsum("m,mik->ik", weights, per_simplex)
        return np.einsum("gij,jk,glk->il", self.maps, moment, self.maps) / self.group_order

    def _linear_map(self, extended_images: np.ndarray) -> np.ndarray:
        """L (k × s) from its values on the points, which span R^s (least squares)."""
        solution, *_ = np.linalg.lstsq(self.points, extended_images, rcond=None)
        return solution.T

    def second_moment(self, extended_images: np.ndarray | None = None) -> np.ndarray:
        """E[xxᵀ] for x uniform on L K, L given by its values on the points (:meth:`extend`;
        default: the identity)."""
        if extended_images is None:
            return self._second_moment
        L = self._linear_map(np.asarray(extended_images)[:len(self.points)])
        return L @ self._second_moment @ L.T

    def mean_l1(self, extended_images: np.ndarray) -> float | None:
        """E‖x‖₁ for x uniform on L K when ‖·‖₁ is linear on every image cone and ‖L·‖₁ is
        G-invariant (every g permutes and flips the coordinates of L's images), else None.

        Then each orbit contributes |G F_r| times its representative's cones, each
        Σ_c |Σ_j (L p_j)_c|/(s + 1) as in :meth:`Polytope.mean_l1`.
        """
        images = np.asarray(extended_images, dtype=float)[:len(self.points)]
        s = self.dimension
        extended = np.vstack([images, [images[t].mean(axis=0) for t in self.tight]])
        corners = extended[self.simplices]
        if np.any((corners.max(axis=1) > 0) & (corners.min(axis=1) < 0)):
            return None
        if not all(_signed_column_permutation(images, images[perm]) for perm in self.permutations):
            return None
        weights = self.cone_volumes * self.orbit_sizes[self.simplex_rep] / self.volume
        return float(weights @ np.abs(corners.sum(axis=1)).sum(axis=1)) / (s + 1)

    # ------------------------------------------------------------------ checks
    def consistency(self) -> dict:
        """Numbers showing that the orbit cones tile K (see :class:`Polytope.consistency`),
        plus the largest error of the group maps (M_g p_i = p_{π_g(i)})."""
        n = len(self.points)
        centroids = np.array([self.points[t].mean(axis=0) for t in self.tight])
        extended = np.vstack([self.points, centroids])
        on_facet = np.einsum("msk,mk->ms", extended[self.simplices], self.rep_normals[self.simplex_rep])
        symmetry_error = _symmetry_residual(self.points, self.permutations, self.maps)
        return {
            "method": self.method,
            "facets": len(self.normals),
            "facet_orbits": len(self.tight),
            "orbit_facets": int(self.orbit_sizes.sum()),
            "group_order": self.group_order,
            "volume_mismatch": abs(self.volume - self.reference_volume) / self.reference_volume,
            "open_ridges": self.open_ridges,
            "max_simplex_off_facet": float(np.abs(on_facet - 1.0).max()),
            "max_point_gauge": float(self.gauge(self.points).max()),
            "max_symmetry_error": symmetry_error / float(np.abs(self.points).max()),
            "points": n,
        }


def _signed_column_permutation(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether the columns of b are the columns of a, permuted and possibly negated."""
    def canonical(m: np.ndarray) -> list[bytes]:
        cols = np.round(m.T, 12)
        lead = np.argmax(cols != 0, axis=1)
        flip = np.where(cols[np.arange(len(cols)), lead] < 0, -1.0, 1.0)
        return sorted(bytes(col) for col in cols * flip[:, None] + 0.0)
    return canonical(a) == canonical(b)


# ---------------------------------------------------------------------- builder
def _facet_orbits(points: np.ndarray, permutations: np.ndarray, budget: HullBudget):
    """Representatives of the facet orbits (adjacency decomposition) and their triangulations.

    Raises
    ------
    HullBudgetExceeded
        As soon as the orbits listed hold more facets, more ridges are crossed, or a representative is
        larger (:meth:`~dpopt.geometry.hull_budget.HullBudget.check_facet_hull`), than ``budget`` allows.
    """
    n, s = points.shape
    maps = _group_maps(points, permutations)
    tight, normals, orbit_sizes, simplices, simplex_rep = [], [], [], [], []
    known: dict[bytes, int] = {}
    reference, open_ridges, crossed = 0.0, 0, 0

    def add(a: np.ndarray) -> None:
        on = np.flatnonzero(np.abs(points @ a - 1.0) <= _TIGHT)
        if np.linalg.matrix_rank(points[on[1:]] - points[on[0]], tol=1e-9) != s - 1:
            raise ValueError("a facet of the hull does not span a hyperplane (degenerate input)")
        orbit = np.unique(np.sort(permutations[:, on], axis=1), axis=0)
        for row in orbit:
            known[row.astype(np.int64).tobytes()] = len(tight)
        tight.append(on)
        normals.append(a)
        orbit_sizes.append(len(orbit))
        budget.check_facets(sum(orbit_sizes), points)

    add(_first_facet(points))
    r = 0
    while r < len(tight):
        a, on = normals[r], tight[r]
        budget.check_facet_hull(len(on), points)
        ridges, rows, facet_volume, _ = _triangulate_facet(points, a, on, n + r)
        reference += orbit_sizes[r] * facet_volume / np.linalg.norm(a) / s
        simplices.append(rows)
        simplex_rep.extend([r] * len(rows))
        for ridge in ridges:
            crossed += 1
            budget.check_ridges(crossed, points)
            neighbour = _across(points, a, on, ridge)
            key = np.flatnonzero(np.abs(points @ neighbour - 1.0) <= _TIGHT)
            if key.astype(np.int64).tobytes() not in known:
                add(neighbour)
            held = np.zeros(n, dtype=bool)
            held[key] = True
            if not held[ridge].all():
                open_ridges += 1
        r += 1
    return (maps, tight, np.array(normals), np.array(orbit_sizes), np.concatenate(simplices),
            np.array(simplex_rep), reference, open_ridges)


def _group_maps(points: np.ndarray, permutations: np.ndarray) -> np.ndarray:
    """M_g with M_g p_i = p_{π_g(i)}: solved on s independent points p_J (pivoted QR), then
    checked on every point.

    Raises
    ------
    ValueError
        If some π_g is not induced by a linear map.
    """
    s = points.shape[1]
    _, _, pivots = linalg.qr(points.T, pivoting=True, mode="economic")
    basis = pivots[:s]
    inverse = np.linalg.inv(points[basis])  # M_g P_Jᵀ = P_{π_g(J)}ᵀ
    maps = np.matmul(inverse, points[permutations[:, basis]]).transpose(0, 2, 1)
    residual = _symmetry_residual(points, permutations, maps)
    if residual > 1e-9:
        raise ValueError(f"a symmetry of the points is not linear (residual {residual:.1e})")
    return maps


def _symmetry_residual(points: np.ndarray, permutations: np.ndarray, maps: np.ndarray) -> float:
    """max_{g, i} |M_g p_i − p_{π_g(i)}|."""
    residual, start = 0.0, 0
    for block in _blocks(permutations, points.shape[1]):
        moved = np.matmul(points, maps[start:start + len(block)].transpose(0, 2, 1))
        residual = max(residual, float(np.abs(moved - points[block]).max()))
        start += len(block)
    return residual


def _blocks(permutations: np.ndarray, width: int) -> list[np.ndarray]:
    """The rows of ``permutations`` in blocks of about :data:`_BLOCK` / ``width`` point indices."""
    rows = max(1, _BLOCK // (permutations.shape[1] * width))
    return [permutations[i:i + rows] for i in range(0, len(permutations), rows)]
