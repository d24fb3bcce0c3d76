"""The fast exact kernels behind the 4×4 table's lattice K-norm (issue 39's timing), each against an independent
computation.

Expected values and their sources:

* exact facets (:func:`dpopt.noise.rational_facets.rational_facets`): python-flint's rational solve of ⟨a, p⟩ = 1
  on the points of each facet, the facets and their points taken from scipy's ConvexHull (qhull), not from the
  code's floating-point hull;
* determinants (:func:`dpopt.noise.k_norm_cones.integer_determinants`): python-flint's fmpz_mat.det, exact
  integers, on random integer matrices (singular ones included) in the float64, int64 and Python-integer ranges;
* the placing triangulation's orientations (:func:`dpopt.noise.k_norm_cones._face_planes`): the determinant
  det(y_τ − 1qᵀ) computed by flint for each face and point;
* row grouping (:func:`dpopt.geometry.polytope._lexical_groups`, :func:`dpopt.noise.k_norm_cones._packed_rows`):
  numpy's ``np.unique(axis=0)`` on the same rows.

That the 4×4 table's fan and Monte Carlo estimate are unchanged is the golden snapshot's (slow) check in
``tests/test_golden.py``.
"""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
from flint import fmpq_mat, fmpz_mat
from scipy.spatial import ConvexHull

import dpopt.noise.k_norm_cones as cones
from dpopt.geometry.polytope import _lexical_groups
from dpopt.noise.rational_facets import _integer_route, rational_facets

SKEW = np.array([[1, 0, 0], [-1, 0, 0], [0, 1, 0], [0, -1, 0], [1, 1, 2], [-1, -1, -2]])
CUBE = np.array(list(itertools.product([-1, 1], repeat=3)))


def _random_body(seed: int, rank: int, count: int, extent: int) -> np.ndarray:
    """A centrally symmetric list of random integer points spanning R^rank (0 inside their hull)."""
    rng = np.random.default_rng(seed)
    half = rng.integers(-extent, extent + 1, size=(count, rank))
    points = np.unique(np.vstack([half, -half, np.eye(rank, dtype=int), -np.eye(rank, dtype=int)]), axis=0)
    return points[np.any(points != 0, axis=1)]


def _flint_facets(points: np.ndarray) -> set[tuple[Fraction, ...]]:
    """Each qhull facet made exact by flint: the rational solution of ⟨a, p⟩ = 1 on s of its points."""
    hull = ConvexHull(points.astype(float))
    found = set()
    for equation in hull.equations:
        a = -equation[:-1] / equation[-1]
        on = points[np.abs(points @ a - 1.0) <= 1e-9]
        t = fmpz_mat(on.tolist())
        solution = fmpq_mat(t.transpose() * t).solve(fmpq_mat(t.transpose() * fmpz_mat([[1]] * len(on))))
        found.add(tuple(Fraction(int(solution[i, 0].p), int(solution[i, 0].q)) for i in range(points.shape[1])))
    return found


@pytest.mark.parametrize("points", [SKEW, CUBE, _random_body(1, 3, 8, 4), _random_body(2, 4, 14, 3),
                                    _random_body(3, 5, 20, 2)], ids=["skew", "cube", "rank3", "rank4", "rank5"])
def test_exact_facets_agree_with_a_rational_solve(points):
    hull = ConvexHull(points.astype(float))
    normals = -hull.equations[:, :-1] / hull.equations[:, -1:]
    numerators, denominators = rational_facets(normals, points)
    mine = {tuple(Fraction(int(x), int(q)) for x in row) for row, q in zip(numerators, denominators)}
    assert mine == _flint_facets(points)
    assert np.all(denominators > 0)
    assert np.all(np.gcd.reduce(np.column_stack([numerators, denominators]), axis=1) == 1)


def test_a_dependent_basis_proposal_falls_back_to_the_rational_solve(monkeypatch):
    """With every proposed basis dependent (the same point s times), no facet is proven by the integer route and
    the rational route gives every facet; the result is the same."""
    points = _random_body(4, 4, 12, 3)
    hull = ConvexHull(points.astype(float))
    normals = -hull.equations[:, :-1] / hull.equations[:, -1:]
    expected = rational_facets(normals, points)
    tight = np.abs(points @ normals.T - 1.0) <= 1e-7
    repeated = lambda pts, t: np.repeat(np.argmax(t, axis=0)[:, None], pts.shape[1], axis=1)  # noqa: E731
    monkeypatch.setattr("dpopt.noise.rational_facets._proposed_bases", repeated)
    numerators = np.zeros((len(normals), 4), dtype=np.int64)
    assert not _integer_route(points, tight, numerators, np.zeros(len(normals), dtype=np.int64)).any()
    fallback = rational_facets(normals, points)
    assert np.array_equal(fallback[0], expected[0]) and np.array_equal(fallback[1], expected[1])


def test_facets_past_int64_take_the_rational_route():
    """Points ±(1, ±M, 0), ±(1, 0, ±M) with M = 2^33: a basis of the facet x = 1 has determinant ±2M² = ±2^68,
    past int64, yet the facets are small (x = ±1: N = (±1, 0, 0), q = 1; ±y ± z = M: q = M). The batched route
    cannot hold the determinants, the rational route gives the exact facets."""
    m = 2**33
    half = np.array([[1, m, 0], [1, -m, 0], [1, 0, m], [1, 0, -m]])
    points = np.vstack([half, -half])
    hull = ConvexHull(points.astype(float))
    normals = -hull.equations[:, :-1] / hull.equations[:, -1:]
    numerators, denominators = rational_facets(normals, points)
    mine = {tuple(Fraction(int(x), int(q)) for x in row) for row, q in zip(numerators, denominators)}
    assert mine == _flint_facets(points)
    assert (Fraction(1), Fraction(0), Fraction(0)) in mine


def test_a_facet_off_its_points_is_refused():
    """Far from the origin the 1e-7 tolerance takes in a point off the plane: the facet x = 10⁸ (a = (10⁻⁸, 0, 0))
    holds (10⁸, 0, 0), (10⁸, 1, 0), (10⁸, 0, 1) exactly, and (10⁸ + 1, 0, 0) has ⟨a, p⟩ − 1 = 10⁻⁸. No exact
    plane holds all four (three of them fix x = 10⁸), so the facet is refused; its integers also leave int64, so
    the rational route decides."""
    big = 10**8
    points = np.array([[big, 0, 0], [big, 1, 0], [big, 0, 1], [big + 1, 0, 0]])
    points = np.vstack([points, -points])
    result = rational_facets(np.array([[1.0 / big, 0.0, 0.0]]), points)
    assert isinstance(result, str) and "one hyperplane" in result


@pytest.mark.parametrize("extent, size", [(1, 9), (40, 6), (100, 4), (2**20, 3)],
                         ids=["float64", "float64-wide", "int64", "python-int"])
def test_integer_determinants_equal_flint(extent, size):
    """Random integer matrices in each arithmetic range of the elimination (2H² below 2^53, below 2^61, above;
    H ≤ (extent·√size)^size, and |det| ≤ H stays in int64 for the last)."""
    rng = np.random.default_rng(extent)
    matrices = rng.integers(-extent, extent + 1, size=(400, size, size))
    matrices[::5, 2] = 2 * matrices[::5, 0] - matrices[::5, 1]  # every fifth matrix singular
    matrices[::7, :, 0] = 0  # a zero column: the pivot search finds none
    expected = [int(fmpz_mat(m.tolist()).det()) for m in matrices]
    assert [int(x) for x in cones.integer_determinants(matrices)] == expected


def test_face_planes_give_the_determinant_orientation():
    """c + ⟨n, q⟩ equals det(y_τ − 1qᵀ) (flint) for faces of random integer points in dimension 4, and the sign
    at the opposite vertex is that determinant's sign there."""
    rng = np.random.default_rng(7)
    y = rng.integers(-3, 4, size=(12, 4)).astype(float)
    faces = np.array([rng.choice(12, size=4, replace=False) for _ in range(40)])
    opposite = np.array([next(i for i in range(12) if i not in f and
                              fmpz_mat((y[f] - y[i]).astype(int).tolist()).det() != 0) for f in faces])
    inner, offsets, normals = cones._face_planes(y, faces, y[opposite])
    for k, f in enumerate(faces):
        at_opposite = int(fmpz_mat((y[f] - y[opposite[k]]).astype(int).tolist()).det())
        assert inner[k] == np.sign(at_opposite)
        for q in y:
            exact = int(fmpz_mat((y[f] - q).astype(int).tolist()).det())
            assert np.rint(offsets[k] + normals[k] @ q) == exact


def test_lexical_groups_number_classes_as_numpy_unique():
    rng = np.random.default_rng(3)
    rows = np.round(rng.integers(-2, 3, size=(500, 3)) / 3.0, 8)
    rows[::11, 0] = -0.0  # −0.0 and 0.0 are one value
    expected = np.unique(rows, axis=0, return_inverse=True)[1].reshape(-1)
    assert np.array_equal(_lexical_groups(rows), expected)


def test_packed_rows_group_as_the_rows():
    rng = np.random.default_rng(5)
    rows = rng.integers(0, 300, size=(2000, 7))
    rows[1000:] = rows[:1000][rng.permutation(1000)]
    _, expected = np.unique(rows, axis=0, return_inverse=True)
    _, packed = np.unique(cones._packed_rows(rows, 300), axis=0, return_inverse=True)
    expected, packed = expected.reshape(-1), packed.reshape(-1)
    assert all(np.array_equal(expected == expected[i], packed == packed[i]) for i in range(0, 2000, 97))
