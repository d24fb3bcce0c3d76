"""Geometry behind the K-norm mechanism: l_p balls and polytopes (dpopt.geometry).

Expected values and their sources:

* root polytope conv{e_i − e_j : i ≠ j} of R^m (the hull of a histogram's replace-one
  space), dimension n = m − 1: 2^m − 2 facets Σ_{i∈I} x_i ≤ 1 (∅ ≠ I ⊊ [m]), m(m − 1)
  vertices, normalized volume C(2n, n) (Gelfand, Graev & Postnikov 1997; Ardila, Beck,
  Hosten, Pfeifle & Seashore 2011), i.e. Euclidean volume C(2n, n)·√(n + 1)/n! (the
  lattice of sum-zero integer vectors has covolume √(n + 1)); the facet I is
  Δ_I × Δ_{I^c}, whose cone from 0 has normalized volume C(n − 1, |I| − 1); and its
  gauge on sum-zero x is Σ_i max(x_i, 0) = ‖x‖₁/2 (a transport plan between x⁺ and x⁻
  writes x as Σλ_ij(e_i − e_j) with Σλ = ‖x⁺‖₁, and ‖·‖₁/2 is a norm equal to 1 on
  every e_i − e_j);
* the paper's 3×3 Semi-DP hull (Prop. 32 rectangles) and the correct one with the
  6-cycles: vertices, facets, volume 99/4 and 189/4, E‖U‖² = 86/55 and 226/105 (digest
  §2.2, simplex-cone formula and brute force);
* E‖U‖₂ for the cube and the Laplace vector (digest §6.3, quadrature to 1e-10), and the
  closed form (√2 + ln(1 + √2))/3 for the square.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats
from scipy.linalg import orth

import dpopt.geometry.polytope as polytope_module
from dpopt.geometry import LpBall, Polytope
from dpopt.sensitivity.table_moves import margin_moves, paper_moves


def root_vectors(m: int) -> np.ndarray:
    eye = np.eye(m)
    return np.array([eye[i] - eye[j] for i, j in itertools.permutations(range(m), 2)])


def span_coordinates(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    basis = orth(vectors.T)
    return vectors @ basis, basis


def semi_table_vectors(k: int, paper: bool) -> np.ndarray:
    """Semi-DP moves of a k×k table with both one-way margins, a = 3 (rows, ±)."""
    moves = paper_moves(k, k) if paper else margin_moves((k, k), ((0,), (1,)), 3)
    return np.unique(np.vstack([moves, -moves]).astype(float), axis=0)


# ------------------------------------------------------------------------ balls
@pytest.mark.parametrize("kind", ["l1", "l2", "linf"])
@pytest.mark.parametrize("s", [1, 3, 7])
def test_ball_sampler_radius_law_and_moments(kind, s):
    """U uniform on a ball B has P(‖U‖_B ≤ t) = t^s (volume scaling): a KS test; and the
    sample moments agree with the stated E U_i², E|U_i| within 5 standard errors."""
    ball = LpBall(kind, s)
    u = ball.sample(np.random.default_rng(11), 100_000)
    assert u.shape == (100_000, s)
    assert stats.kstest(ball.gauge(u) ** s, "uniform").pvalue > 1e-3
    for values, expected in ((u**2, ball.coordinate_second_moment), (np.abs(u), ball.coordinate_mean_abs)):
        se = values.std(ddof=1) / math.sqrt(values.size)
        assert abs(values.mean() - expected) <= 5 * se


def test_l1_ball_fills_every_orthant():
    """Uniform on the cross-polytope: each of the 2^s sign patterns has probability 2^-s (χ²)."""
    u = LpBall("l1", 3).sample(np.random.default_rng(3), 80_000)
    pattern = ((u > 0) * np.array([1, 2, 4])).sum(axis=1)
    counts = np.bincount(pattern, minlength=8)
    assert stats.chisquare(counts).pvalue > 1e-3


@pytest.mark.parametrize(
    "kind, s, expected",
    [
        ("linf", 2, (math.sqrt(2) + math.log(1 + math.sqrt(2))) / 3),  # closed form, unit square
        ("linf", 4, 1.1218996187),  # digest §6.3
        ("linf", 9, 1.7117216012),
        ("l1", 4, 2.5095684621 / 5),  # E‖Laplace_4‖ / (s + 1), digest §6.3
        ("l1", 9, 3.9980135830 / 10),
        ("l2", 5, 5 / 6),
    ],
)
def test_ball_mean_l2_norm(kind, s, expected):
    value, _ = LpBall(kind, s).mean_l2_norm()
    assert value == pytest.approx(expected, rel=1e-9)


def test_ball_rejects_bad_arguments():
    with pytest.raises(ValueError):
        LpBall("l3", 2)
    with pytest.raises(ValueError):
        LpBall("l2", 0)


# -------------------------------------------------------------------- polytopes
@pytest.mark.parametrize("m", [3, 4, 5, 6])
def test_root_polytope_facets_vertices_volume(m):
    """m = 3..5 use qhull's global hull (s ≤ 4), m = 6 gift wrapping (s = 5)."""
    y, basis = span_coordinates(root_vectors(m))
    n = m - 1
    K = Polytope.from_points(y)
    assert K.method == ("qhull" if n <= 4 else "gift wrapping")
    assert len(K.normals) == 2**m - 2
    assert len(K.vertices) == m * (m - 1)
    unit = math.sqrt(n + 1) / math.factorial(n)  # Euclidean volume of a unimodular simplex
    assert K.volume == pytest.approx(math.comb(2 * n, n) * unit, rel=1e-12)
    # facet Σ_{i∈I} x_i ≤ 1 has normal 1_I projected on the span; its cone has C(n−1, |I|−1) units
    indicators = np.array([[1.0 if i in I else 0.0 for i in range(m)]
                           for r in range(1, m) for I in itertools.combinations(range(m), r)])
    facet = K.facet_of(indicators @ basis)
    expected = [math.comb(n - 1, int(row.sum()) - 1) * unit for row in indicators]
    assert np.allclose(K.facet_cone_volumes()[facet], expected, rtol=1e-12)
    c = K.consistency()
    assert c["volume_mismatch"] < 1e-12 and c["open_ridges"] == 0
    assert c["max_simplex_off_facet"] < 1e-12 and c["max_point_gauge"] < 1 + 1e-12


@pytest.mark.parametrize("m", [4, 6])
def test_root_polytope_gauge_is_half_l1(m):
    vectors = root_vectors(m)
    y, basis = span_coordinates(vectors)
    K = Polytope.from_points(y)
    x = np.random.default_rng(5).standard_normal((500, m))
    x -= x.mean(axis=1, keepdims=True)
    assert np.allclose(K.gauge(x @ basis), np.abs(x).sum(axis=1) / 2, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    "paper, vertices, facets, volume, second_moment",
    [(True, 18, 30, 99 / 4, 86 / 55), (False, 30, 18, 189 / 4, 226 / 105)],
)
def test_semi_dp_3x3_hull(paper, vertices, facets, volume, second_moment):
    y, _ = span_coordinates(semi_table_vectors(3, paper))
    K = Polytope.from_points(y)
    assert (len(K.vertices), len(K.normals)) == (vertices, facets)
    assert K.volume == pytest.approx(volume, rel=1e-12)
    assert np.trace(K.second_moment()) == pytest.approx(second_moment, rel=1e-12)
    assert np.allclose(K.gauge(y[np.abs(y).sum(axis=1) > 0]), 1.0, atol=1e-12)


def test_gift_wrapping_agrees_with_global_qhull(monkeypatch):
    """The two triangulations of the same polytope (qhull's, and gift wrapping with facet
    centroids) give the same facets, volume and second moment."""
    y, _ = span_coordinates(semi_table_vectors(3, False))
    qhull = Polytope.from_points(y)
    monkeypatch.setattr(polytope_module, "_GLOBAL_QHULL_DIMENSION", 1)
    wrapped = Polytope.from_points(y)
    assert (qhull.method, wrapped.method) == ("qhull", "gift wrapping")
    assert len(wrapped.auxiliary) > 0  # facets with 8 vertices are coned from their centroids
    key = lambda normals: sorted(map(tuple, np.round(normals, 9)))
    assert key(qhull.normals) == key(wrapped.normals)
    assert wrapped.volume == pytest.approx(qhull.volume, rel=1e-12)
    assert np.allclose(wrapped.second_moment(), qhull.second_moment(), atol=1e-12)
    assert wrapped.consistency()["open_ridges"] == 0


def test_one_dimensional_polytope_is_an_interval():
    K = Polytope.from_points(np.array([[2.0], [-1.0], [0.5]]))
    assert K.volume == 3.0 and K.gauge(np.array([[1.0], [-0.5]])).tolist() == [0.5, 0.5]
    u = K.sample(np.random.default_rng(0), 50_000)[:, 0]
    assert stats.kstest(u, stats.uniform(-1, 3).cdf).pvalue > 1e-3


def test_polytope_rejects_bad_input():
    with pytest.raises(ValueError, match="origin"):
        Polytope.from_points(np.array([[1.0, 0], [2, 0], [1, 1], [2, 1]]))
    with pytest.raises(ValueError):
        Polytope.from_points(np.array([[1.0, 1, 0], [-1, -1, 0], [1, -1, 0], [-1, 1, 0]]))


def test_second_moment_matches_sampling():
    """Exact E[UUᵀ] (simplex formula) against 200,000 cone-decomposition draws; each entry
    within 5 standard errors of its sample mean."""
    y, _ = span_coordinates(root_vectors(5))
    K = Polytope.from_points(y)
    u = K.sample(np.random.default_rng(8), 200_000)
    products = u[:, :, None] * u[:, None, :]
    se = products.std(axis=0, ddof=1) / math.sqrt(len(u))
    assert np.all(np.abs(products.mean(axis=0) - K.second_moment()) <= 5 * se + 1e-12)


def test_rejection_sampler_agrees_with_cone_sampler():
    """Algorithm 3 (box rejection) and the cone decomposition draw the same law: a two-sample
    χ² test on facet hits and a KS test on the gauge, 3×3 paper hull."""
    y, _ = span_coordinates(semi_table_vectors(3, True))
    K = Polytope.from_points(y)
    rng = np.random.default_rng(21)
    cones = K.sample(rng, 60_000)
    boxed, drawn = K.sample_rejection(rng, 60_000)
    assert drawn >= 60_000 and np.all(K.gauge(boxed) <= 1.0)
    table = np.vstack([np.bincount(K.facet_of(cones), minlength=30), np.bincount(K.facet_of(boxed), minlength=30)])
    assert stats.chi2_contingency(table).pvalue > 1e-3
    assert stats.ks_2samp(K.gauge(cones), K.gauge(boxed)).pvalue > 1e-3
