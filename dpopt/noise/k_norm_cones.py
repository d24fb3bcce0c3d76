r"""The discrete K-norm law on ℤ^s sampled exactly by a half-open cone decomposition of K's boundary.

For a polytope K = Hull(S) (S integer points, 0 interior) with the rational gauge g of
:mod:`dpopt.noise.k_norm_lattice`, the law p(z) ∝ exp(−ε g(z)) on ℤ^s is drawn without the l1-ball proposal,
whose acceptance falls with the rank (2·10⁻⁴ for the 4×4 table with both margins, s = 9).

**Cones.** Each facet F of K is triangulated into simplices whose vertices are points of S on F (a placing
triangulation, :func:`_placing_triangulation`: a proposal with floating-point orientations, then proven in
integers, below). On the cone
C = {Σ λ_i v_i : λ ≥ 0} over such a simplex (integer columns v_i, V = (v_1 … v_s), d = det V ≠ 0) the gauge is
linear, g(Σ λ_i v_i) = Σ λ_i: ⟨a_F, v_i⟩ = 1 gives g ≥ Σλ_i, sublinearity and g(v_i) ≤ 1 give g ≤ Σλ_i.

**Half-open cones** (Köppe & Verdoolaege 2008, Thm 3). With y* a point on no cone's facet hyperplane,
μ = V⁻¹y* has no zero entry; the half-open cone C̃ = {Σλ_i v_i : λ_i ≥ 0, λ_i > 0 where μ_i < 0} holds x
exactly when x + δy* ∈ C for every small δ > 0. When the cones cover R^s with multiplicity one off their
boundaries, x + δy* (off every facet hyperplane for small δ) lies in exactly one cone, so **every point of
R^s lies in exactly one half-open cone**, the origin included. The lattice points of C̃ are uniquely

.. math:: z = \tilde p + \sum_i n_i v_i, \quad n_i \in \{0, 1, \dots\}, \qquad
          \tilde p \in \tilde\Pi = \{\textstyle\sum_i \lambda_i v_i : \lambda_i \in [0, 1)
          \text{ or } (0, 1] \text{ where } \mu_i < 0\} \cap \mathbb{Z}^s,

|Π̃| = |d| (the residues of ℤ^s/Vℤ^s: λ(w) = frac(V⁻¹w), shifted by one where μ_i < 0 and λ_i = 0), and
g(z) = g(p̃) + Σ n_i.

**Sampler.** Draw (cone, residue) uniformly among the Σ|d| pairs, accept with Bernoulli(exp(−ε g(p̃))) (CKS
Algorithm 1), draw n_i i.i.d. with P(n) ∝ e^{−εn} (exact geometric, CKS Algorithm 2's magnitude), return
z = p̃ + Σ n_i v_i. Every z has exactly one (cone, residue, n), drawn with probability
∝ e^{−ε g(p̃)}·e^{−εΣn_i} = e^{−ε g(z)}: the law is p exactly, a round accepting with probability
E[e^{−ε g(p̃)}] ≥ e^{−εs}. Every value is an integer: λ = adj(V)·w/d, z = (Σ_i Λ_i v_i)/|d| with Λ the λ
numerators, divided exactly.

**Symmetry.** A group G of linear maps permuting S (table moves, :func:`dpopt.geometry.table_symmetries`) maps
facets to facets: only one representative facet F_r per orbit is triangulated, and facet f = g_f F_r takes
the image triangulation, its vertices the permuted points (no matrix needed).

**Proof of the decomposition** (:func:`fan_check`, exact integers; the sampler is refused without it):

1. every listed vector satisfies every gauge row (N·v ≤ D) and the l1 bound (h(v) ≤ 1), and G's permutations are
   induced by linear maps (M_g p_i = p_{π_g(i)} for every point, M_g solved on a basis in rationals);
2. every gauge row is the image g_f F_r of a representative's vertex set, and G maps the representatives'
   vertex sets onto listed ones (the facet list is closed under G);
3. every simplex of a representative lies on it (N_r·v = D at its vertices) and has d ≠ 0;
4. every (s − 2)-face of a representative's simplices is shared by exactly two of them on opposite sides
   of its hyperplane, or lies on a second listed facet (it is then on ∂F_r, and that facet is the one across
   F_r's ridge);
5. one point (the barycentre of the first simplex) lies inside exactly one simplex and on none's boundary;
6. μ = V⁻¹y* has no zero entry for every cone of every facet (and the recorded half-open sets are its signs);
7. each simplex lists |d| distinct residues whose points are lattice points of its parallelepiped.

By 4 the number of simplices over a point of relint F_r is the same on both sides of every interior face, so
constant off their boundaries, and by 5 it is 1: F_r is triangulated. By 2–4 every ridge of every listed
facet leads to a listed facet, so (facets of a convex K having cones with disjoint interiors) the facet cones
cover R^s once; with 1 the gauge rows are K's facets and g = Σλ on every cone (the h term of the gauge is at
most Σλ as h(v_i) ≤ 1). Step 6 makes y* generic, step 7 lists every residue once. The law does not depend on
the triangulation or on y*, only on g; privacy rests on g alone (:mod:`dpopt.mechanisms.k_norm_lattice`).

Not covered: timing (the number of rounds depends on the noise drawn, never on data).

References
----------
.. [1] M. Köppe and S. Verdoolaege, "Computing parametric rational generating functions with a primal
   Barvinok algorithm", Electronic Journal of Combinatorics 15 (2008), R16 (half-open decompositions).
.. [2] C. Canonne, G. Kamath and T. Steinke, "The discrete Gaussian for differential privacy", NeurIPS 2020,
   Algorithms 1 and 2.
.. [3] M. Hardt and K. Talwar, "On the geometry of differential privacy", STOC 2010 (the K-norm law).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import cached_property
from fractions import Fraction

import numpy as np

from dpopt.core.integer_matrices import independent_rows
from dpopt.core.rows import row_groups
from dpopt.noise.discrete_laplace import bernoulli_exp, sample_geometric
from dpopt.noise.k_norm_lattice import LatticeGauge

REFERENCE_SEED = 20260101
"""Seed of the coefficients of the reference point y* (any generic y* serves: the law does not depend on it)."""

GENERIC_ATTEMPTS = 8
"""Reference points y* tried before the cone sampler is refused (a y* on some cone's facet hyperplane)."""

MAX_REPRESENTATIVE_SIMPLICES = 200_000
"""Most simplices over the representative facets (their adjugates: 200,000 × s² int64, 130 MB at s = 9); the
4×4 table with both margins has 34,896. Above, the cone sampler is refused."""

PAIR_TABLE = 2**24
"""Most (cone, residue) pairs the sampler looks up in a table (int32, 64 MB at most; the 4×4 table: 1,069,376
pairs, 4 MB) instead of a binary search over the simplices' running weights."""

MAX_ENTRY = 2**20
"""Largest |coordinate| of a listed vector the fan accepts (the integer products stay far below 2^63)."""


class FanError(ValueError):
    """The cone decomposition could not be built or proven."""


@dataclass(frozen=True, eq=False)
class ConeFan:
    """The half-open cone decomposition of ℤ^s (module docstring).

    Attributes
    ----------
    points : ndarray of int64, shape (n, s)
        The listed vectors in lattice coordinates.
    simplices : ndarray of int, shape (m, s)
        The representatives' simplices (point indices).
    simplex_rep : ndarray of int, shape (m,)
    determinants : ndarray of int64, shape (m,)
        d_j = det V_j (signed).
    adjugates : ndarray of int64, shape (m, s, s)
        adj(V_j): V_j⁻¹ = adj(V_j)/d_j.
    facet_perm : ndarray of int, shape (F, n)
        For gauge row f, the point permutation of g_f (facet f = g_f F_{rep(f)}).
    facet_rep : ndarray of int, shape (F,)
    orbit_facets : tuple of ndarray of int
        The gauge rows of each orbit.
    residues : ndarray of int64, shape (Σ_j |d_j|, s)
        The λ numerators (in [0, |d_j|)) of the lattice points of each representative's half-open
        parallelepiped Π_j, simplex after simplex (``residue_start``).
    residue_start : ndarray of int64, shape (m + 1,)
    open_masks : tuple of ndarray of int64
        Per representative r, shape (|orbit r|, m_r): bit i set when μ_i < 0 for the cone (f, j).
    reference : ndarray of int64, shape (n,)
        y* = Σ_k reference_k p_k.
    proof : str
        What :func:`fan_check` found (set by :func:`build_fan`, which refuses a fan that fails it).
    """

    points: np.ndarray
    simplices: np.ndarray
    simplex_rep: np.ndarray
    determinants: np.ndarray
    adjugates: np.ndarray
    facet_perm: np.ndarray
    facet_rep: np.ndarray
    orbit_facets: tuple
    residues: np.ndarray
    residue_start: np.ndarray
    open_masks: tuple
    reference: np.ndarray
    proof: str = ""

    @property
    def rank(self) -> int:
        return self.points.shape[1]

    @property
    def cones(self) -> int:
        """Cones over every facet: Σ_r |orbit r|·m_r."""
        return int(sum(len(f) * int(np.sum(self.simplex_rep == r)) for r, f in enumerate(self.orbit_facets)))

    @cached_property
    def weights(self) -> np.ndarray:
        """|orbit|·|d_j| per representative simplex (int64): the (cone, residue) pairs it stands for."""
        sizes = np.array([len(f) for f in self.orbit_facets], dtype=np.int64)
        return sizes[self.simplex_rep] * np.abs(self.determinants)

    @cached_property
    def cumulative(self) -> np.ndarray:
        """The running sums of :attr:`weights` (a uniform integer below their total picks a pair)."""
        return np.cumsum(self.weights)

    @cached_property
    def common_determinant(self) -> int:
        """lcm of the |d_j|: the Bernoulli exponents' common denominator (times ε's)."""
        return math.lcm(*{int(x) for x in np.abs(self.determinants)})

    @cached_property
    def simplex_of_pair(self) -> np.ndarray | None:
        """The representative simplex of each of the :attr:`total` (cone, residue) pairs, in the order of
        :attr:`cumulative` (int32; a table of at most 2^24 entries, None above: then a binary search)."""
        if self.total > PAIR_TABLE:
            return None
        return np.repeat(np.arange(len(self.simplices), dtype=np.int32), self.weights)

    @cached_property
    def mask_table(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The half-open sets in one array: (masks, start, stride) with the mask of the cone over gauge row
        ``orbit_facets[r][k]`` and representative simplex j (of representative r) at masks[start_j + k·stride_j]
        (:attr:`open_masks` row-major, stride m_r)."""
        reps = len(self.orbit_facets)
        first = np.searchsorted(self.simplex_rep, np.arange(reps))  # simplices are grouped by representative
        offsets = np.concatenate([[0], np.cumsum([m.size for m in self.open_masks])])[:-1].astype(np.int64)
        start = offsets[self.simplex_rep] + np.arange(len(self.simplices)) - first[self.simplex_rep]
        stride = np.bincount(self.simplex_rep, minlength=reps)[self.simplex_rep]
        return np.concatenate([m.ravel() for m in self.open_masks]), start, stride

    @cached_property
    def facet_table(self) -> tuple[np.ndarray, np.ndarray]:
        """The gauge rows of every orbit in one array and each orbit's start: row ``orbit_facets[r][k]`` at
        rows[start_r + k]."""
        sizes = [len(f) for f in self.orbit_facets]
        return np.concatenate(self.orbit_facets).astype(np.int64), np.concatenate([[0], np.cumsum(sizes)])[:-1]

    @property
    def total(self) -> int:
        """Σ|d| over every cone = s!·vol K (lattice coordinates)."""
        return int(self.weights.sum())

    def describe(self) -> dict:
        return {"lattice_sampler": "cones", "cone_representatives": len(self.orbit_facets),
                "representative_simplices": len(self.simplices), "cones": self.cones,
                "cone_determinant_sum": self.total}


# ---------------------------------------------------------------------- integers
def integer_determinants(matrices: np.ndarray) -> np.ndarray:
    """det of each integer matrix (shape (m, s, s)), exactly: fraction-free Gaussian elimination (Bareiss) with
    row pivoting. Every intermediate value is an integer, a minor times a minor (at most H² in magnitude,
    H = max ∏_i max(‖row_i‖₂, 1), Hadamard), and each division is exact (Bareiss). So the arithmetic is exact in
    float64 when 2H² < 2^53 (every operand, product, difference and quotient an integer below 2^53, exactly
    represented, and IEEE division correctly rounded to the exact integer quotient), in int64 when 2H² < 2^61,
    else in Python integers (numpy object arrays)."""
    matrices = np.asarray(matrices, dtype=np.int64)
    norms = np.maximum(np.linalg.norm(matrices.astype(float), axis=2), 1.0)
    hadamard = float(np.max(np.prod(norms, axis=1), initial=1.0))
    kind = float if 2.0 * hadamard**2 < 2.0**53 else np.int64 if 2.0 * hadamard**2 < 2.0**61 else object
    divide = np.true_divide if kind is float else np.floor_divide
    a = np.ascontiguousarray(matrices.transpose(1, 2, 0)).astype(kind)  # (s, s, m): the batch innermost
    s, _, m = a.shape
    sign = np.ones(m, dtype=kind)
    previous = np.ones(m, dtype=kind)
    alive = np.ones(m, dtype=bool)
    for k in range(s - 1):
        nonzero = a[k:, k, :] != 0
        has = nonzero.any(axis=0)
        alive &= has
        pivot = k + np.argmax(nonzero, axis=0)
        swap = np.flatnonzero(has & (pivot != k))
        if len(swap):
            top = a[k, :, swap].copy()
            a[k, :, swap] = a[pivot[swap], :, swap]
            a[pivot[swap], :, swap] = top
            sign[swap] = -sign[swap]
        p = a[k, k, :].copy()
        p[~has] = 1
        a[k + 1:, k + 1:, :] = divide(a[k + 1:, k + 1:, :] * p - a[k + 1:, k:k + 1, :] * a[k:k + 1, k + 1:, :],
                                      previous)
        previous = p
    out = sign * a[s - 1, s - 1, :]
    out[~alive] = 0
    return np.array([int(x) for x in out], dtype=np.int64)


def integer_adjugates(matrices: np.ndarray, determinants: np.ndarray) -> np.ndarray:
    """adj(V) for integer matrices with det ≠ 0, exactly: a floating-point inverse proposes d·V⁻¹, rounded,
    and V·A = d·I is checked in integers (then A = d·V⁻¹ = adj V, V being invertible).

    Raises
    ------
    FanError
        If the proposal fails the integer check."""
    v = np.asarray(matrices, dtype=np.int64)
    hadamard = float(np.max(np.prod(np.linalg.norm(v.astype(float), axis=2), axis=1), initial=1.0))
    if v.shape[1] * float(np.abs(v).max(initial=0)) * hadamard >= 2.0**62:
        raise FanError("the simplices' adjugates would leave the int64 range")
    guess = np.rint(np.linalg.inv(v.astype(float)) * determinants[:, None, None]).astype(np.int64)
    eye = np.eye(v.shape[1], dtype=np.int64)
    if not np.array_equal(_integer_products(v, guess), determinants[:, None, None] * eye):
        raise FanError("a simplex's adjugate could not be confirmed in integers")
    return guess


def _linear_maps_exist(points: np.ndarray, permutations: np.ndarray) -> bool:
    """Whether every permutation π is induced by a linear map (M p_i = p_{π(i)} for all i), exactly: M·det B
    = P_π(B)ᵀ·adj(B) on a basis B of the points, then checked on every point (in float64 when every product
    and partial sum is an integer below 2^53, so exactly represented; int64 below 2^62; else Python integers)."""
    from flint import fmpz_mat  # imported where used

    s = points.shape[1]
    basis = independent_rows(points, s)
    if len(basis) < s:
        return False
    b = fmpz_mat(points[basis].T.tolist())
    det = int(b.det())
    inverse = b.inv()  # fmpq_mat: B⁻¹
    adj = np.array([[int(inverse[i, j] * det) for j in range(s)] for i in range(s)], dtype=object)
    bound = float(np.abs(points).max()) ** 2 * s * s * float(np.abs(adj).max()) * s
    kind = float if bound < 2.0**53 else np.int64 if bound < 2.0**62 else object  # float64: exact below 2^53
    pts, adj = points.astype(kind), adj.astype(kind)
    for block in range(0, len(permutations), 256):
        pis = permutations[block:block + 256]
        scaled = pts[pis[:, basis]].transpose(0, 2, 1) @ adj  # M·det, shape (b, s, s)
        if not np.array_equal(scaled @ pts.T, det * pts[pis].transpose(0, 2, 1)):
            return False
    return True


# ---------------------------------------------------------------------- construction
def _placing_triangulation(points: np.ndarray, tight: np.ndarray, row: np.ndarray) -> np.ndarray:
    """A placing (beneath-beyond) triangulation of the facet conv(points[tight]) with its own points as
    vertices: a first simplex, then each further point p coned to the boundary faces it sees (strictly beyond
    their hyperplane, in the facet's coordinates: one coordinate with a_k ≠ 0 dropped). Orientations are
    floating-point evaluations of integer determinants (:func:`_face_planes`), so the triangulation is a
    proposal, proven by :func:`fan_check`.

    Raises
    ------
    FanError
        If the facet's points do not span it."""
    tight = np.asarray(tight)
    drop = int(np.argmax(np.abs(row)))
    y = np.delete(points[tight].astype(float), drop, axis=1)
    k = y.shape[1]  # the facet's dimension s − 1; a simplex has k + 1 vertices
    first = [0]
    for i in range(1, len(y)):
        if len(first) == k + 1:
            break
        if np.linalg.matrix_rank(y[first + [i]][1:] - y[first[0]]) == len(first):
            first.append(i)
    if len(first) < k + 1:
        raise FanError("a facet's points do not span it")
    simplices = [np.array([first])]
    faces = np.array([sorted(set(first) - {x}) for x in first], dtype=np.int64).reshape(k + 1, k)
    inner, offsets, normals = _face_planes(y, faces, y[first])
    for p in range(len(y)):
        if p in first:
            continue
        visible = np.sign(np.rint(offsets + normals @ y[p])) * inner < 0
        if not visible.any():
            continue
        seen = faces[visible]
        apex = np.full((len(seen), 1), p)
        simplices.append(np.hstack([seen, apex]))
        new = np.sort(np.concatenate([np.hstack([np.delete(seen, x, axis=1), apex]) for x in range(k)]), axis=1)
        opposite = np.concatenate([seen[:, x] for x in range(k)])
        group, counts = _groups(new)
        fresh = counts[group] == 1  # a face of two new simplices is interior
        faces = np.concatenate([faces[~visible], new[fresh]])
        planes = _face_planes(y, new[fresh], y[opposite[fresh]])
        inner, offsets, normals = (np.concatenate([old[~visible], add]) for old, add in
                                   zip((inner, offsets, normals), planes))
    return tight[np.concatenate(simplices)]


def _face_planes(y: np.ndarray, faces: np.ndarray, opposite: np.ndarray) -> tuple[np.ndarray, ...]:
    """For each face τ (a row of k point indices, k dimensions) and a point o off its hyperplane (a row of
    ``opposite``, the vertex of the simplex across τ): the sign of f_τ(o) and f_τ(q) = c + ⟨n, q⟩, where
    f_τ(q) = det(y_τ − 1qᵀ) is an affine function of q vanishing on aff τ (an integer at integer points), so
    sign(rint f_τ(q))·sign f_τ(o) < 0 tells that q sees τ. With E = y_τ − 1oᵀ (invertible, the simplex's
    edges from o) the matrix determinant lemma gives f_τ(q) = det E·(1 − ⟨E⁻¹1, q − o⟩): c and n from one
    determinant and one solve per face, then one inner product per face and point. Returns (sign f_τ(o), c, n)."""
    edges = y[faces] - opposite[:, None, :]
    at_opposite = np.rint(np.linalg.det(edges))
    try:
        w = np.linalg.solve(edges, np.ones(edges.shape[:2] + (1,)))[:, :, 0]
    except np.linalg.LinAlgError:
        raise FanError("a facet's triangulation proposal has a degenerate simplex") from None
    normals = -at_opposite[:, None] * w
    return np.sign(at_opposite), at_opposite - np.einsum("fi,fi->f", normals, opposite), normals


def _proposed_determinants(matrices: np.ndarray) -> np.ndarray:
    """det of each integer matrix (shape (m, s, s)), proposed: the floating-point determinant rounded while the
    Hadamard bound H = max ∏_i ‖row_i‖₂ stays below 2^40 (far within double precision), else exactly
    (:func:`integer_determinants`). :func:`fan_check` recomputes them exactly."""
    hadamard = float(np.max(np.prod(np.linalg.norm(matrices.astype(float), axis=2), axis=1), initial=1.0))
    if hadamard >= 2.0**40:
        return integer_determinants(matrices)
    return np.rint(np.linalg.det(matrices.astype(float))).astype(np.int64)


def _all_residues(adjugates: np.ndarray, determinants: np.ndarray) -> np.ndarray:
    """The :func:`_residues` of every simplex, stacked (a unimodular simplex has the single residue 0)."""
    s = adjugates.shape[1]
    sizes = np.abs(determinants)
    out = np.zeros((int(sizes.sum()), s), dtype=np.int64)
    start = np.concatenate([[0], np.cumsum(sizes)])
    for j in np.flatnonzero(sizes > 1):
        out[start[j]:start[j + 1]] = _residues(adjugates[j], determinants[j])
    return out


def _residues(adjugate: np.ndarray, determinant: int) -> np.ndarray:
    """The λ numerators L = sign(d)·adj(V)·w mod |d| of the |d| classes of ℤ^s/Vℤ^s (the subgroup of
    (ℤ/|d|)^s generated by the unit vectors' images, by closure under addition)."""
    n = abs(int(determinant))
    s = adjugate.shape[0]
    if n == 1:
        return np.zeros((1, s), dtype=np.int64)
    generators = [tuple(int(x) for x in (np.sign(determinant) * adjugate[:, k]) % n) for k in range(s)]
    found = {tuple([0] * s)}
    frontier = list(found)
    while frontier:
        nxt = []
        for x in frontier:
            for gen in generators:
                y = tuple((a + b) % n for a, b in zip(x, gen))
                if y not in found:
                    found.add(y)
                    nxt.append(y)
        frontier = nxt
    if len(found) != n:
        raise FanError(f"a simplex's parallelepiped holds {len(found)} residues, not |det| = {n}")
    return np.array(sorted(found), dtype=np.int64)


def _orbits(tight: np.ndarray, permutations: np.ndarray) -> tuple[np.ndarray, np.ndarray, list]:
    """For every gauge row f (a column of the point-on-facet matrix ``tight``): its representative and the
    element g_f with π_{g_f}(F_rep) = F_f; the rows of each orbit. Raises :class:`FanError` when an image of a
    representative is not a listed facet."""
    index = _facet_index(tight)
    facets = tight.shape[1]
    rep = np.full(facets, -1)
    element = np.zeros(facets, dtype=int)
    orbits = []
    for f in range(facets):
        if rep[f] >= 0:
            continue
        targets = _image_facets(index, tight[:, f], permutations)
        if np.any(targets < 0):
            raise FanError("an image of a facet under the symmetry group is not a listed facet")
        _, first = np.unique(targets, return_index=True)
        elements = np.sort(first)  # each target at the first element reaching it, in the group's order
        members = targets[elements]
        fresh = rep[members] < 0
        rep[members[fresh]], element[members[fresh]] = len(orbits), elements[fresh]
        orbits.append(members[fresh])
    return rep, element, orbits


def _facet_index(tight: np.ndarray) -> dict[bytes, int]:
    """Each gauge row named by its set of points (the bits of its column of ``tight``)."""
    return {key: f for f, key in enumerate(_set_keys(tight.T))}


def _set_keys(members: np.ndarray) -> list[bytes]:
    """One byte string per row of the boolean matrix ``members`` (equal exactly when the sets are)."""
    packed = np.packbits(members, axis=1)
    return [row.tobytes() for row in packed]


def _image_facets(index: dict[bytes, int], on: np.ndarray, permutations: np.ndarray) -> np.ndarray:
    """For each permutation π (a row), the gauge row whose point set is π(F) for the point set F = ``on``,
    or −1 when there is none (or π is not one-to-one on F)."""
    base = np.flatnonzero(on)
    images = _point_sets(permutations[:, base], len(on))
    whole = images.sum(axis=1) == len(base)
    return np.array([index.get(key, -1) if ok else -1 for key, ok in zip(_set_keys(images), whole)], dtype=int)


def _point_sets(rows: np.ndarray, n: int) -> np.ndarray:
    """The boolean membership matrix (len(rows), n) of each row's point indices."""
    out = np.zeros((len(rows), n), dtype=bool)
    out[np.arange(len(rows))[:, None], rows] = True
    return out


def build_fan(points: np.ndarray, gauge: LatticeGauge, permutations: np.ndarray | None = None) -> ConeFan:
    """The half-open cone decomposition of ℤ^s for the gauge of Hull(points), proven (:func:`fan_check`).

    Parameters
    ----------
    points : ndarray of int, shape (n, s)
        The listed vectors in lattice coordinates (rank s ≥ 2).
    gauge : LatticeGauge
        Its rational facets.
    permutations : ndarray of int, shape (|G|, n), optional
        A symmetry group of the points (row g: π_g); checked, not trusted. None: the identity.

    Raises
    ------
    FanError
        If the decomposition cannot be built or its proof fails (the message says which step).
    """
    points = np.asarray(points, dtype=np.int64)
    n, s = points.shape
    if s < 2:
        raise FanError("the cone sampler serves ranks ≥ 2")
    if np.abs(points).max() > MAX_ENTRY:
        raise FanError(f"the listed vectors' coordinates exceed {MAX_ENTRY}")
    perms = np.arange(n)[None, :] if permutations is None else np.asarray(permutations, dtype=int)
    values = points @ gauge.numerators.T
    if values.max() > gauge.denominator:
        raise FanError("a listed vector violates a gauge row (N·v > D)")
    tight = values == gauge.denominator
    rep, element, orbits = _orbits(tight, perms)
    simplices, simplex_rep, dets = [], [], []
    for r, members in enumerate(orbits):
        f = int(members[0])
        cells = np.sort(_placing_triangulation(points, np.flatnonzero(tight[:, f]), gauge.numerators[f]), axis=1)
        d = _proposed_determinants(points[cells].transpose(0, 2, 1))
        if np.any(d == 0):
            raise FanError("a facet's triangulation proposal has a degenerate simplex")
        if sum(len(x) for x in simplices) + len(cells) > MAX_REPRESENTATIVE_SIMPLICES:
            raise FanError(f"the representative facets need more than {MAX_REPRESENTATIVE_SIMPLICES:,} simplices")
        simplices.append(cells)
        simplex_rep.append(np.full(len(cells), r))
        dets.append(d)
    simplices = np.concatenate(simplices)
    simplex_rep = np.concatenate(simplex_rep)
    dets = np.concatenate(dets)
    rep_rows = np.array([int(members[0]) for members in orbits])  # F_r: the first row of orbit r
    adjugates = integer_adjugates(points[simplices].transpose(0, 2, 1), dets)
    residues = _all_residues(adjugates, dets)
    start = np.concatenate([[0], np.cumsum(np.abs(dets))]).astype(np.int64)
    facet_perm = perms[element]
    facet_perm[rep_rows] = np.arange(n)  # F_r takes its own triangulation (not a stabiliser element's image)
    room = float(s) * float(np.abs(adjugates).max()) * n * float(np.abs(points).max())
    bits = int(min(40, max(12, 52 - math.ceil(math.log2(room)))))
    for attempt in range(GENERIC_ATTEMPTS):
        reference = _reference(n, attempt, bits)
        masks = _open_masks(points, simplex_rep, dets, adjugates, facet_perm, orbits, reference)
        if masks is not None:
            break
    else:
        raise FanError("no generic reference point y* was found (every trial lies on some cone's facet)")
    fan = ConeFan(points, simplices, simplex_rep, dets, adjugates, facet_perm, rep, tuple(orbits),
                  residues, start, masks, reference)
    ok, detail = fan_check(fan, gauge, perms, computed_masks=masks)
    if not ok:
        raise FanError(detail)
    return replace(fan, proof=detail)


def _reference(n: int, attempt: int, bits: int) -> np.ndarray:
    """The coefficients of y* = Σ_k c_k p_k: a fixed pseudo-random integer vector per attempt, entries below
    2^bits (as large as keeps μ's products below 2^52: the wider the range, the rarer a zero μ_i)."""
    return np.random.default_rng(REFERENCE_SEED + attempt).integers(1, 2**bits, size=n).astype(np.int64)


def _open_masks(points, simplex_rep, dets, adjugates, facet_perm, orbits, reference) -> tuple | None:
    """Per representative r, shape (|orbit|, m_r): the bits i with μ_i < 0 for the cone (f, j), where
    μ = V_{f,j}⁻¹y* = V_j⁻¹·M_f⁻¹y* and M_f⁻¹y* = Σ_m c_{π_f(m)} p_m (M_f p_m = p_{π_f(m)}); None when some
    μ_i = 0 (y* not generic). sign μ_i is that of d_j·(adj(V_j)·M_f⁻¹y*)_i, an integer."""
    out = []
    s = points.shape[1]
    for r, members in enumerate(orbits):
        js = np.flatnonzero(simplex_rep == r)
        y = reference[facet_perm[members]] @ points  # (|orbit|, s)
        scaled = _integer_products(adjugates[js].reshape(-1, s), y.T).reshape(len(js), s, len(members))
        if not np.all(scaled):
            return None
        negative = (scaled < 0) ^ (dets[js] < 0)[:, None, None]  # (m_r, s, |orbit|)
        bits = np.zeros((len(js), len(members)), dtype=np.int64)
        for i in range(s):
            bits |= negative[:, i, :].astype(np.int64) << i
        out.append(np.ascontiguousarray(bits.T))
    return tuple(out)


def _integer_products(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a @ b for int64 arrays (matrices, or stacks of them), exactly: in float64 (BLAS) when every partial sum is
    below 2^53 in magnitude (k·max|a|·max|b|, every operand and sum then an exactly represented integer; the
    float64 result is returned, each entry an integer), else in int64 below 2^62.

    Raises
    ------
    FanError
        If the products could leave the int64 range."""
    bound = float(a.shape[-1]) * float(np.abs(a).max(initial=0)) * float(np.abs(b).max(initial=0))
    if bound < 2.0**53:
        return a.astype(float) @ b.astype(float)
    if bound >= 2.0**62:
        raise FanError("the integer products would leave the int64 range")
    return a @ b


# ---------------------------------------------------------------------- proof
def fan_check(fan: ConeFan, gauge: LatticeGauge, permutations: np.ndarray,
              computed_masks: tuple | None = None) -> tuple[bool, str]:
    """Steps 1–6 of the module docstring's proof, in integers: (passed, what was found).

    ``computed_masks``: the half-open sets :func:`_open_masks` has just computed from this fan's own simplices,
    adjugates, permutations and y* (:func:`build_fan`, which drew the fan's masks from them); None: computed
    here. Either way step 6 compares the fan's masks with :func:`_open_masks` of its data."""
    points = fan.points
    n, s = points.shape
    values = points @ gauge.numerators.T
    if values.max() > gauge.denominator or (np.abs(points) @ gauge.units).max() > gauge.denominator:
        return False, "a listed vector violates a gauge row or the l1 bound h ≤ 1"
    if not _linear_maps_exist(points, permutations):
        return False, "a symmetry permutation is not induced by a linear map of the listed vectors"
    tight = values == gauge.denominator
    index = _facet_index(tight)
    for members in fan.orbit_facets:  # step 2: the facet list is closed under G
        if np.any(_image_facets(index, tight[:, members[0]], permutations) < 0):
            return False, "the facet list is not closed under the symmetry group"
    orbits = len(fan.orbit_facets)
    if fan.facet_rep.shape != (tight.shape[1],) or np.any((fan.facet_rep < 0) | (fan.facet_rep >= orbits)):
        return False, "a gauge row has no representative facet"
    for r, members in enumerate(fan.orbit_facets):  # every row is the image of its representative
        rows = np.flatnonzero(fan.facet_rep == r)
        base = np.flatnonzero(tight[:, members[0]])
        images = _point_sets(fan.facet_perm[rows][:, base], n)
        wrong = (images.sum(axis=1) != len(base)) | np.any(images != tight[:, rows].T, axis=1)
        if wrong.any():
            return False, f"gauge row {rows[np.argmax(wrong)]} is not the image of its representative facet"
    rep_rows = np.array([members[0] for members in fan.orbit_facets])
    on_rep = tight[fan.simplices, rep_rows[fan.simplex_rep][:, None]]
    if not on_rep.all():  # step 3
        return False, "a simplex has a vertex off its facet"
    d = integer_determinants(points[fan.simplices].transpose(0, 2, 1))
    eye = np.eye(s, dtype=np.int64)
    if (np.any(d == 0) or not np.array_equal(d, fan.determinants)
            or not np.array_equal(_integer_products(points[fan.simplices].transpose(0, 2, 1), fan.adjugates),
                                  d[:, None, None] * eye)):
        return False, "a simplex is degenerate or its determinant/adjugate is wrong"
    paired, boundary, problem = _faces(fan, tight)  # step 4
    if problem:
        return False, problem
    for r in range(len(fan.orbit_facets)):  # step 5
        js = np.flatnonzero(fan.simplex_rep == r)
        b = points[fan.simplices[js[0]]].sum(axis=0)
        lam = np.einsum("jab,b->ja", fan.adjugates[js], b) * np.sign(fan.determinants[js])[:, None]
        inside = (lam >= 0).all(axis=1)
        if int(inside.sum()) != 1 or np.any(inside & (lam == 0).any(axis=1)):
            return False, f"representative facet {r}: the test point is not inside exactly one simplex"
    masks = computed_masks if computed_masks is not None else _open_masks(  # step 6
        points, fan.simplex_rep, fan.determinants, fan.adjugates, fan.facet_perm, list(fan.orbit_facets),
        fan.reference)
    if masks is None or any(not np.array_equal(a, b) for a, b in zip(masks, fan.open_masks)):
        return False, "the reference point y* lies on a cone's facet hyperplane, or the half-open sets are wrong"
    sizes = np.abs(d)  # the residues: |d_j| classes per simplex, numerators in [0, |d_j|), lattice points
    owner = np.repeat(np.arange(len(d)), np.diff(fan.residue_start))
    if not np.array_equal(np.diff(fan.residue_start), sizes) or np.any(fan.residues < 0) \
            or np.any(fan.residues >= sizes[owner][:, None]):
        return False, "a simplex's residue list is wrong"
    scaled = np.einsum("ri,rik->rk", fan.residues, points[fan.simplices[owner]])
    if np.any(scaled % sizes[owner][:, None]) or len(np.unique(np.column_stack([owner, fan.residues]), axis=0)) \
            != len(owner):
        return False, "a listed residue is not a lattice point, or is listed twice"
    return True, (f"{tight.shape[1]} facets in {len(fan.orbit_facets)} orbits, closed under the {len(permutations)} "
                  f"symmetries; {len(fan.simplices)} representative simplices, every vertex on its facet, d ≠ 0; "
                  f"{paired} interior (s−2)-faces each shared by two simplices on opposite sides, {boundary} on a "
                  f"second listed facet; one test point per facet inside exactly one simplex; y* generic for all "
                  f"{fan.cones} cones; Σ|d| = {fan.total}")


def _groups(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The class of each row among equal rows (:func:`dpopt.core.rows.row_groups`) and each class's size."""
    _, group = row_groups(np.asarray(rows, dtype=np.int64))
    return group, np.bincount(group)


def _faces(fan: ConeFan, tight: np.ndarray) -> tuple[int, int, str | None]:
    """Step 4: (interior faces paired on opposite sides, faces on a second facet, the first failure or None)."""
    s = fan.rank
    simplices = fan.simplices
    m = len(simplices)
    faces = np.stack([np.delete(simplices, i, axis=1) for i in range(s)], axis=1).reshape(m * s, s - 1)
    owner, dropped = np.repeat(np.arange(m), s), np.tile(np.arange(s), m)
    inverse, counts = _groups(_packed_rows(faces, len(fan.points)))
    if counts.max() > 2:
        return 0, 0, "an (s−2)-face is shared by more than two simplices"
    order = np.argsort(inverse, kind="stable")
    pair_of = counts[inverse[order]] == 2
    first, second = order[pair_of][0::2], order[pair_of][1::2]
    across = fan.simplex_rep[owner[first]] != fan.simplex_rep[owner[second]]  # on two representatives' ridge
    single = np.concatenate([order[counts[inverse[order]] == 1], first[across], second[across]])
    first, second = first[~across], second[~across]
    normal = fan.adjugates[owner[first], dropped[first]] * np.sign(fan.determinants[owner[first]])[:, None]
    other = fan.points[simplices[owner[second], dropped[second]]]
    if np.any(np.einsum("ij,ij->i", normal, other) >= 0):
        return 0, 0, "two simplices sharing an (s−2)-face lie on the same side of it"
    words = _bit_words(tight)  # each point's facets as a bitset of 64-bit words
    on = words[faces[single, 0]]
    for i in range(1, s - 1):
        on &= words[faces[single, i]]
    holding = np.bitwise_count(on).sum(axis=1)
    if np.any(holding < 2):
        return 0, 0, "an unpaired (s−2)-face lies inside its facet (the facet is not covered)"
    return len(first), len(single), None


def _packed_rows(rows: np.ndarray, n: int) -> np.ndarray:
    """Rows of point indices below ``n`` packed four 16-bit fields to a 64-bit word when n ≤ 2^16 (equal rows
    exactly when their packings are), else as they are."""
    if n > 2**16:
        return rows
    width = rows.shape[1]
    padded = np.zeros((len(rows), -(-width // 4) * 4), dtype=np.uint64)
    padded[:, :width] = rows
    fields = padded.reshape(len(rows), -1, 4)
    shifts = np.array([0, 16, 32, 48], dtype=np.uint64)
    return np.bitwise_or.reduce(fields << shifts, axis=2)


def _bit_words(members: np.ndarray) -> np.ndarray:
    """The rows of a boolean matrix as bitsets of uint64 words (bit order irrelevant: only ANDs and counts)."""
    packed = np.packbits(members, axis=1)
    padded = np.zeros((len(members), -(-packed.shape[1] // 8) * 8), dtype=np.uint8)
    padded[:, :packed.shape[1]] = packed
    return padded.view(np.uint64)


# ---------------------------------------------------------------------- sampling
def sample_cone_k_norm(rng: np.random.Generator, fan: ConeFan, epsilon: Fraction, size: int) -> np.ndarray:
    """``size`` exact draws of p(z) ∝ exp(−ε g(z)) on ℤ^s (int64, shape (size, s); module docstring).

    Rounds of pending draws: (cone, residue) uniform, accepted with Bernoulli(exp(−ε g(p̃))); the accepted
    ones get geometric n_i. The rounds depend on the noise drawn, never on data."""
    epsilon = Fraction(epsilon)
    if epsilon <= 0:
        raise ValueError(f"ε must be positive (got {epsilon})")
    s = fan.rank
    cumulative, weights = fan.cumulative, fan.weights
    total = int(cumulative[-1])
    dets = np.abs(fan.determinants)
    common = fan.common_determinant
    den = epsilon.denominator * common
    if den >= 2**62 or epsilon.numerator * s * common >= 2**62:
        raise ValueError("ε′ and the cones' determinants leave the sampler's integer range")
    bits = 1 << np.arange(s)
    pairs = fan.simplex_of_pair
    masks, mask_start, mask_stride = fan.mask_table
    facet_rows, facet_start = fan.facet_table
    out, filled = np.zeros((size, s), dtype=np.int64), 0
    while filled < size:
        batch = size - filled
        u = rng.integers(0, total, size=batch, dtype=np.int64)
        j = np.searchsorted(cumulative, u, side="right") if pairs is None else pairs[u]
        offset = u - (cumulative[j] - weights[j])
        k, q = np.divmod(offset, dets[j])
        mask = masks[mask_start[j] + k * mask_stride[j]]
        total_lam = np.bitwise_count(mask).astype(np.int64)  # |d| = 1: p̃ = Σ_{i open} v_i, so ΣL = #open bits
        wide = np.flatnonzero(dets[j] > 1)
        total_lam[wide] = _residue_numerators(fan, j[wide], q[wide], mask[wide], bits).sum(axis=1)
        keep = bernoulli_exp(rng, epsilon.numerator * total_lam * (common // dets[j]), den)
        j, k, q, mask = j[keep], k[keep], q[keep], mask[keep]
        if not len(j):
            continue
        lam, r = _residue_numerators(fan, j, q, mask, bits), fan.simplex_rep[j]
        n = sample_geometric(rng, epsilon.denominator, epsilon.numerator, len(j) * s).reshape(len(j), s)
        lam = lam + n * dets[j][:, None]
        facets = facet_rows[facet_start[r] + k]
        vertices = fan.points[fan.facet_perm[facets[:, None], fan.simplices[j]]]  # (b, s, s): rows v_i
        if float(lam.max()) * float(np.abs(vertices).max(initial=1)) * s < 2.0**62:
            scaled = np.einsum("bi,bik->bk", lam, vertices)
        else:  # geometric multiples far in the tail: Python integers, then back (z itself fits in int64)
            scaled = np.einsum("bi,bik->bk", lam.astype(object), vertices.astype(object))
        z, rest = np.divmod(scaled, dets[j][:, None])
        z = z.astype(np.int64)
        if np.any(rest):
            raise FanError("a cone point is not a lattice point (the fan is inconsistent)")
        out[filled:filled + len(z)] = z
        filled += len(z)
    return out


def _residue_numerators(fan: ConeFan, j: np.ndarray, q: np.ndarray, mask: np.ndarray, bits: np.ndarray) -> np.ndarray:
    """The λ numerators L of the half-open residues p̃ (int64, shape (len(j), s)): residue q of simplex j, each
    L_i = 0 with bit i of ``mask`` set (μ_i < 0: λ_i > 0) shifted to |d_j|."""
    lam = fan.residues[fan.residue_start[j] + q]
    shift = ((mask[:, None] & bits) != 0) & (lam == 0)
    return lam + shift * np.abs(fan.determinants[j])[:, None]


def acceptance_rate(fan: ConeFan, epsilon: float) -> float:
    """The probability that a round of :func:`sample_cone_k_norm` accepts: the mean of e^{−ε g(p̃)} over the
    Σ|d| (cone, residue) pairs, each half-open residue's g(p̃) = (ΣL + |d|·#{i open : L_i = 0})/|d| (computed
    in floating point: a reported figure, not part of the law)."""
    total = 0.0
    zero_bits = ((fan.residues == 0) * (1 << np.arange(fan.rank))).sum(axis=1)
    owner = np.repeat(np.arange(len(fan.simplices)), np.diff(fan.residue_start))
    dets = np.abs(fan.determinants).astype(float)
    for r, masks in enumerate(fan.open_masks):
        first = int(np.searchsorted(fan.simplex_rep, r))
        rows = np.flatnonzero(fan.simplex_rep[owner] == r)
        base = fan.residues[rows].sum(axis=1) / dets[owner[rows]]
        shifts = np.bitwise_count(masks[:, owner[rows] - first] & zero_bits[rows][None, :])
        total += float(np.exp(-epsilon * (base[None, :] + shifts)).sum())
    return total / fan.total
