"""The hull budget (dpopt.geometry.hull_budget) counts work, never seconds.

Expected values and their sources, all closed forms for the root polytope conv{e_i − e_j : i ≠ j} of m coordinates
(the hull of an m-cell replace-one histogram, dimension s = m − 1):

* facets: Σ_{i∈I} x_i ≤ 1 for ∅ ≠ I ⊊ [m], 2^m − 2 of them (Gelfand, Graev & Postnikov 1997); facet I holds the
  |I|(m − |I|) vertices e_i − e_j, i ∈ I, j ∉ I (Δ_I × Δ_{I^c});
* ridges: facets I and J meet in the face Δ_{I∩J} × Δ_{(I∪J)^c} (the vertices on both), of dimension
  |I∩J| − 1 + (m − |I∪J|) − 1, which is s − 2 = m − 3 exactly when J = I ∪ {x} (or I = J ∪ {x}); so the ridges are
  the pairs (I, I ∪ {x}) with I ≠ ∅ and I ∪ {x} ≠ [m]: Σ_{k=1}^{m−2} C(m, k)(m − k) of them, each crossed once by
  gift wrapping (from one of its two facets);
* the table-move group of an r×c table has order 2·r!·c! (×2 when r = c): 96 for 8 cells read as 2×4.
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import replace

import numpy as np
import pytest
from scipy.linalg import orth
from scipy.spatial import ConvexHull

import dpopt
import dpopt.mechanisms.k_norm as k_norm_module
from dpopt.geometry import UNLIMITED, HullBudgetExceeded, Polytope, SymmetricPolytope, table_symmetries
from dpopt.geometry.hull_budget import KnownFaces, known_faces


def root_points(m: int) -> tuple[np.ndarray, np.ndarray]:
    """The vectors e_i − e_j of R^m and their coordinates in an orthonormal basis of the sum-zero span."""
    eye = np.eye(m)
    vectors = np.array([eye[i] - eye[j] for i, j in itertools.permutations(range(m), 2)])
    return vectors, vectors @ orth(vectors.T)


def root_ridges(m: int) -> int:
    return sum(math.comb(m, k) * (m - k) for k in range(1, m - 1))


def test_gift_wrapping_stops_at_the_facet_and_ridge_counts_of_the_closed_form():
    """m = 7: 126 facets and 434 ridges; a budget one below either count refuses, naming it; at the counts it builds."""
    _, y = root_points(7)
    facets, ridges = 2**7 - 2, root_ridges(7)
    assert ridges == 434
    with pytest.raises(HullBudgetExceeded, match=f"more than {facets - 1} facets"):
        Polytope.from_points(y, replace(UNLIMITED, facets=facets - 1))
    with pytest.raises(HullBudgetExceeded, match=f"more than {ridges - 1} ridge crossings"):
        Polytope.from_points(y, replace(UNLIMITED, ridges=ridges - 1))
    K = Polytope.from_points(y, replace(UNLIMITED, facets=facets, ridges=ridges))
    assert len(K.normals) == facets


def test_a_facet_triangulation_is_bounded_before_qhull_runs():
    """m = 7, s = 6: the largest facets hold 3·4 = 12 vertices, C(12, ⌊5/2⌋) = 66."""
    _, y = root_points(7)
    with pytest.raises(HullBudgetExceeded, match=r"facet with 12 vertices: C\(12, 2\) = 66, more than 65"):
        Polytope.from_points(y, replace(UNLIMITED, facet_hull=65))
    assert len(Polytope.from_points(y, replace(UNLIMITED, facet_hull=66)).normals) == 2**7 - 2


def test_symmetric_build_counts_orbit_members_and_group_images():
    """m = 8 read as a 2×4 table: |G| = 2·2!·4! = 96, 56 points, so 5,376 point images; 2^8 − 2 = 254 facets."""
    vectors, y = root_points(8)
    group = table_symmetries(vectors)
    assert len(group) == 2 * math.factorial(2) * math.factorial(4)
    images = len(group) * len(vectors)
    with pytest.raises(HullBudgetExceeded, match=f"needs {images} point images, more than {images - 1}"):
        SymmetricPolytope.from_points(y, group, replace(UNLIMITED, images=images - 1))
    with pytest.raises(HullBudgetExceeded, match="more than 253 facets"):
        SymmetricPolytope.from_points(y, group, replace(UNLIMITED, facets=253))
    K = SymmetricPolytope.from_points(y, group, replace(UNLIMITED, facets=254, images=images))
    assert int(K.orbit_sizes.sum()) == 254


def cross_ridges(m: int) -> int:
    """The (m − 2)-faces of the cross-polytope: choose m − 1 axes and a sign on each."""
    return math.comb(m, m - 1) * 2 ** (m - 1)


@pytest.mark.parametrize("m", [2, 5, 16])
def test_known_face_counts(m):
    eye = np.eye(m + 1)[:m]  # a zero column: the support, not the width, counts
    roots = np.array([eye[i] - eye[j] for i, j in itertools.permutations(range(m), 2)])
    assert known_faces(np.vstack([roots, roots, np.zeros((1, m + 1))])) == KnownFaces(
        f"root polytope of {m} coordinates", 2**m - 2, root_ridges(m))
    assert known_faces(np.vstack([eye, -eye])) == KnownFaces(f"cross-polytope of {m} coordinates", 2**m,
                                                             cross_ridges(m))
    assert known_faces(roots[1:]) is None and known_faces(2 * roots) is None


@pytest.mark.parametrize("m", [3, 4, 6])
def test_ridge_counts_against_qhull(m):
    """The closed forms against qhull: the facets are the vertex sets tight at its simplices' hyperplanes, and in
    dimension s = m − 1 (root) or m (cross) the ridges are the pairs of facets meeting in an (s − 2)-face."""
    _, y = root_points(m)
    cross = np.vstack([np.eye(m), -np.eye(m)])
    for points, ridges in ((y, root_ridges(m)), (cross, cross_ridges(m))):
        hull = ConvexHull(points)
        tight = list({frozenset(np.flatnonzero(np.abs(points @ e[:-1] + e[-1]) < 1e-6)) for e in hull.equations})
        s = points.shape[1]
        shared = (points[sorted(a & b)] for a, b in itertools.combinations(tight, 2) if len(a & b) >= s - 1)
        meets = sum(1 for face in shared if np.linalg.matrix_rank(face[1:] - face[0], tol=1e-9) == s - 2)
        assert meets == ridges


@pytest.mark.parametrize("rows, columns", [(2, 5), (5, 2), (3, 3)])
def test_a_table_with_both_margins_is_known_through_a_linear_image(rows, columns):
    """The moves of an r × c table whose margins are published exactly (Semi-DP: two records swap their columns,
    e_il + e_kj − e_ij − e_kl, listed by brute force). For min(r, c) = 2 they are (a, −a), a ∈ {e_i − e_j}: the
    root polytope of max(r, c) coordinates through a linear image (its facets counted by qhull); for r, c ≥ 3
    (36 moves of rank 4 at 3 × 3, neither r(r + 1) nor 2r of them) nothing is claimed."""
    cells = [(i, j) for i in range(rows) for j in range(columns)]
    moves = set()
    for (i, j), (k, l) in itertools.permutations(cells, 2):
        if i != k and j != l:  # swap the columns of two records: (i, j), (k, l) -> (i, l), (k, j)
            v = np.zeros((rows, columns))
            v[i, j] -= 1
            v[k, l] -= 1
            v[i, l] += 1
            v[k, j] += 1
            moves.add(tuple(v.ravel()))
    found = known_faces(np.array(sorted(moves)))
    if min(rows, columns) == 2:
        m = max(rows, columns)
        assert found == KnownFaces(f"root polytope of {m} coordinates", 2**m - 2, root_ridges(m))
        vectors = np.array(sorted(moves))
        assert len(np.unique(np.round(ConvexHull(vectors @ orth(vectors.T)).equations, 9), axis=0)) == 2**m - 2
    else:
        assert found is None


def never(*args, **kwargs):
    raise AssertionError("the hull was attempted")


def replace_one_histogram(cells: int):
    """``dpopt.solve`` of a replace-one histogram of ``cells`` cells under pure ε = 1, ``mechanism: k_norm``."""
    levels = [f"c{i:02d}" for i in range(cells)]
    return dpopt.solve({"dpopt": 1, "name": f"{cells} cells", "data": {"attributes": {"cell": levels}, "n": 1000},
                        "query": {"kind": "histogram", "attribute": "cell"}, "adjacency": "replace_one",
                        "privacy": {"pure": {"epsilon": 1.0}}, "mechanism": "k_norm", "utility": "l2"})


def test_an_11_cell_replace_one_histogram_built_plainly_is_refused_by_its_ridges(monkeypatch):
    """2^11 − 2 = 2,046 facets fit the budget's 5,000, but its 11·2^10 − 22 = 11,242 ridges exceed the 2,500
    crossings plain gift wrapping may make (|G| = 2·11! is too large for the symmetric build): refused before the
    polytope is attempted, the lattice cross-polytope designed instead."""
    monkeypatch.setattr(k_norm_module.Polytope, "from_points", never)
    sol = replace_one_histogram(11)
    params = sol.certificate["mechanism"]["parameters"]
    assert root_ridges(11) == 11_242 > k_norm_module.HULL_BUDGET.ridges
    assert params["norm_ball"] == "lattice_cross_polytope"
    assert "root polytope of 11 coordinates: 11242 ridges" in params["fallback_reason"]


def test_the_outcome_does_not_depend_on_the_clock(monkeypatch):
    """Every clock of the time module jumps an hour at each reading (a machine slowed without limit): the same
    facets are built, and the same budget refuses the same hull."""
    _, y7 = root_points(7)
    vectors8, y8 = root_points(8)
    group = table_symmetries(vectors8)
    plain, symmetric = Polytope.from_points(y7, k_norm_module.HULL_BUDGET), SymmetricPolytope.from_points(
        y8, group, k_norm_module.HULL_BUDGET)
    hours = itertools.count()
    for name in ("time", "monotonic", "perf_counter", "process_time"):
        monkeypatch.setattr(time, name, lambda: 3600.0 * next(hours))
    assert np.array_equal(Polytope.from_points(y7, k_norm_module.HULL_BUDGET).normals, plain.normals)
    again = SymmetricPolytope.from_points(y8, group, k_norm_module.HULL_BUDGET)
    assert np.array_equal(again.normals, symmetric.normals)
    with pytest.raises(HullBudgetExceeded, match="more than 125 facets"):
        Polytope.from_points(y7, replace(UNLIMITED, facets=125))


def test_a_16_cell_replace_one_histogram_refuses_its_hull_before_any_work(monkeypatch):
    """2^16 − 2 = 65,534 facets exceed the budget's facets: the design falls back to the lattice cross-polytope without
    building a polytope or a group, and the certificate's reason states the count and the budget."""
    for name in ("table_symmetries", "table_shape"):
        monkeypatch.setattr(k_norm_module, name, never)
    monkeypatch.setattr(k_norm_module.Polytope, "from_points", never)
    sol = replace_one_histogram(16)
    params = sol.certificate["mechanism"]["parameters"]
    budget = k_norm_module.HULL_BUDGET.facets
    assert params["norm_ball"] == "lattice_cross_polytope" and params["optimal_k"] is False
    assert f"root polytope of 16 coordinates: {2**16 - 2} facets, more than {budget}" in params["fallback_reason"]
    assert dpopt.verify(sol.certificate).passed
