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

import dpopt
import dpopt.mechanisms.k_norm as k_norm_module
from dpopt.geometry import UNLIMITED, HullBudgetExceeded, Polytope, SymmetricPolytope, table_symmetries
from dpopt.geometry.hull_budget import known_facets


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


@pytest.mark.parametrize("m", [2, 5, 16])
def test_known_facet_counts(m):
    eye = np.eye(m + 1)[:m]  # a zero column: the support, not the width, counts
    roots = np.array([eye[i] - eye[j] for i, j in itertools.permutations(range(m), 2)])
    assert known_facets(np.vstack([roots, roots, np.zeros((1, m + 1))])) == (f"root polytope of {m} coordinates",
                                                                            2**m - 2)
    assert known_facets(np.vstack([eye, -eye])) == (f"cross-polytope of {m} coordinates", 2**m)
    assert known_facets(roots[1:]) is None and known_facets(2 * roots) is None


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
    def never(*args, **kwargs):
        raise AssertionError("the hull was attempted")

    for name in ("table_symmetries", "table_shape"):
        monkeypatch.setattr(k_norm_module, name, never)
    monkeypatch.setattr(k_norm_module.Polytope, "from_points", never)
    cells = [f"c{i:02d}" for i in range(16)]
    sol = dpopt.solve({"dpopt": 1, "name": "16 cells", "data": {"attributes": {"cell": cells}, "n": 1000},
                       "query": {"kind": "histogram", "attribute": "cell"}, "adjacency": "replace_one",
                       "privacy": {"pure": {"epsilon": 1.0}}, "mechanism": "k_norm", "utility": "l2"})
    params = sol.certificate["mechanism"]["parameters"]
    budget = k_norm_module.HULL_BUDGET.facets
    assert params["norm_ball"] == "lattice_cross_polytope" and params["optimal_k"] is False
    assert f"root polytope of 16 coordinates: {2**16 - 2} facets, more than {budget}" in params["fallback_reason"]
    assert dpopt.verify(sol.certificate).passed
