"""K = Hull(S) built up to its symmetry group of table moves (dpopt.geometry.symmetric_hull).

Oracles, none of them the code under test:

* the plain constructions of :class:`dpopt.geometry.Polytope` (qhull's global hull for the
  3×3 table, gift wrapping for 3×4 and, slow, 4×4): the same facet set, volume and second
  moment;
* digest ``papers/003_semi_dp_invariants.md`` §2.2 for the 3×3 table with both margins
  (a = 3): 30 vertices, 18 facets, volume 189/4, E‖U‖² = 226/105;
* the 4×4 table's 3,818 facets (counted by the plain gift wrapping, module docstring of
  ``dpopt.geometry.polytope``), and, in the default run, linear programs: a generic
  objective over the polar body {a : ⟨a, p⟩ ≤ 1} is maximised at a vertex, i.e. a facet
  normal of K, which must be listed; ‖x‖_K = min{Σλ : Σλ_j p_j = x, λ ≥ 0};
* the group orders 4(k!)² (square tables: rows, columns, transpose, sign) and 2·r!·c!;
* for the sampler, ‖Z‖_K ~ Gamma(s, rate ε) (module docstring of
  ``dpopt.mechanisms.k_norm``), and the share of each facet orbit, |orbit|·vol conv(0, F)/vol K,
  with vol conv(0, F) = vol_{s−1}(F)·dist(0, F)/s from qhull run here on F's vertices.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats
from scipy.linalg import null_space, orth
from scipy.optimize import linprog
from scipy.spatial import ConvexHull

from dpopt.geometry import Polytope, SymmetricPolytope, table_symmetries
from dpopt.mechanisms.k_norm import SYMMETRIC_HULL_MIN_RANK, HullBody, KNormMechanism
from dpopt.sensitivity.space import SensitivitySpace
from dpopt.sensitivity.table_moves import margin_moves


def table_vectors(r: int, c: int) -> np.ndarray:
    """Semi-DP moves of an r×c table with both one-way margins, a = 3 (rows, ±, and 0)."""
    moves = margin_moves((r, c), ((0,), (1,)), 3)
    return np.unique(np.vstack([moves, -moves, np.zeros((1, r * c))]).astype(float), axis=0)


def span(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    basis = orth(vectors.T)
    return vectors @ basis, basis


def facet_key(normals: np.ndarray) -> list:
    return sorted(map(tuple, np.round(normals, 8) + 0.0))


def mechanism(vectors: np.ndarray, epsilon: float) -> KNormMechanism:
    space = SensitivitySpace.from_vectors(vectors, method="test", adjacency="test", complete=True)
    return KNormMechanism(epsilon, HullBody(vectors, space.span.basis()), space)


@pytest.fixture(scope="module")
def mechanism_4x4():
    return mechanism(table_vectors(4, 4), 1.0)


@pytest.fixture(scope="module")
def hull_4x4(mechanism_4x4):
    """(vectors, their span coordinates, K), K built by the mechanism's HullBody."""
    body = mechanism_4x4.body
    return body.vectors, body.coordinates.of(body.vectors), body.polytope


# ------------------------------------------------------------------------ the group
@pytest.mark.parametrize("r, c, order", [(3, 3, 4 * 36), (4, 4, 4 * 576), (3, 4, 2 * 6 * 24)])
def test_group_of_table_moves(r, c, order):
    """|G| = 4(k!)² for k×k, 2·r!·c! otherwise; every element is a distinct point
    permutation, and (3×3) the set equals the test's own enumeration of ±P x Q (and xᵀ)."""
    vectors = table_vectors(r, c)
    perms = table_symmetries(vectors)
    assert perms.shape == (order, len(vectors))
    assert len(np.unique(perms, axis=0)) == order
    if (r, c) == (3, 3):
        index = {row.tobytes(): i for i, row in enumerate(vectors + 0.0)}
        expected = set()
        for p, q, t, sign in itertools.product(itertools.permutations(range(3)), itertools.permutations(range(3)),
                                               (False, True), (1.0, -1.0)):
            tables = vectors.reshape(-1, 3, 3)
            tables = tables.transpose(0, 2, 1) if t else tables
            moved = sign * tables[:, list(p)][:, :, list(q)].reshape(-1, 9) + 0.0
            expected.add(tuple(index[row.tobytes()] for row in moved))
        assert set(map(tuple, perms.tolist())) == expected


def test_no_group_without_table_symmetry():
    vectors = np.random.default_rng(3).standard_normal((20, 9))
    assert table_symmetries(np.vstack([vectors, -vectors])) is None


# ------------------------------------------------------------------------ facets
def test_3x3_agrees_with_qhull_and_the_digest():
    vectors = table_vectors(3, 3)
    y, _ = span(vectors)
    K = SymmetricPolytope.from_points(y, table_symmetries(vectors))
    plain = Polytope.from_points(y)
    assert plain.method == "qhull"
    assert facet_key(K.normals) == facet_key(plain.normals)
    assert (len(K.vertices), len(K.normals), len(K.tight)) == (30, 18, 1)
    assert K.volume == pytest.approx(189 / 4, rel=1e-12)
    assert np.trace(K.second_moment()) == pytest.approx(226 / 105, rel=1e-12)


def test_3x4_agrees_with_gift_wrapping():
    vectors = table_vectors(3, 4)
    y, _ = span(vectors)
    K = SymmetricPolytope.from_points(y, table_symmetries(vectors))
    plain = Polytope.from_points(y)
    assert plain.method == "gift wrapping"
    assert facet_key(K.normals) == facet_key(plain.normals)
    assert K.volume == pytest.approx(plain.volume, rel=1e-12)
    assert np.allclose(K.second_moment(), plain.second_moment(), rtol=0, atol=1e-12)
    assert set(K.vertices) == set(plain.vertices)


def test_4x4_facets_against_linear_programs(hull_4x4):
    vectors, y, K = hull_4x4
    c = K.consistency()
    assert (c["facets"], c["orbit_facets"], c["facet_orbits"], c["group_order"]) == (3818, 3818, 9, 2304)
    assert c["open_ridges"] == 0 and c["volume_mismatch"] < 1e-12
    assert c["max_point_gauge"] <= 1 + 1e-12 and c["max_symmetry_error"] < 1e-12
    assert len(K.vertices) == 264
    listed = {tuple(row) for row in np.round(K.normals, 6) + 0.0}
    rng = np.random.default_rng(5)
    for _ in range(60):
        res = linprog(-rng.standard_normal(y.shape[1]), A_ub=y, b_ub=np.ones(len(y)),
                      bounds=(None, None), method="highs")
        assert tuple(np.round(res.x, 6) + 0.0) in listed
    x = rng.standard_normal((25, y.shape[1]))
    lp = [linprog(np.ones(len(y)), A_eq=y.T, b_eq=row, bounds=(0, None), method="highs").fun for row in x]
    assert np.allclose(K.gauge(x), lp, rtol=1e-7)


@pytest.mark.slow
def test_4x4_agrees_with_plain_gift_wrapping(hull_4x4):
    """The plain construction (54–153 s): same facets, volume and second moment."""
    _, y, K = hull_4x4
    plain = Polytope.from_points(y)
    assert facet_key(K.normals) == facet_key(plain.normals)
    assert K.volume == pytest.approx(plain.volume, rel=1e-10)
    assert np.allclose(K.second_moment(), plain.second_moment(), rtol=0, atol=1e-12)


# ------------------------------------------------------------------------ sampler
def test_orbit_hits_follow_cone_volumes(hull_4x4):
    """The facet whose cone holds a uniform draw lies in orbit r with probability
    |orbit_r|·vol conv(0, F_r)/vol K. The 9 orbits of the 4×4 hull have facets with distinct
    vertex counts, so a draw's orbit is read from its maximising facet's vertex count; the
    cone volumes come from qhull on each facet's vertices (this test's own call). χ² over
    9 cells with 100,000 draws: p > 1e-3; drawing orbits uniformly fails (p < 1e-6)."""
    vectors, y, K = hull_4x4
    counts_by_size, volume_by_size = {}, {}
    for a in K.normals:
        on = np.flatnonzero(np.abs(y @ a - 1) <= 1e-9)
        counts_by_size[len(on)] = counts_by_size.get(len(on), 0) + 1
        if len(on) not in volume_by_size:
            z = (y[on] - y[on].mean(axis=0)) @ null_space(a[None, :])
            volume_by_size[len(on)] = ConvexHull(z).volume / np.linalg.norm(a) / y.shape[1]
    sizes = sorted(counts_by_size)
    assert len(sizes) == 9
    expected = np.array([counts_by_size[n] * volume_by_size[n] for n in sizes])
    assert expected.sum() == pytest.approx(K.volume, rel=1e-9)
    draws = 100_000
    u = K.sample(np.random.default_rng(31), draws)
    hit = np.concatenate([np.argmax(block @ K.normals.T, axis=1) for block in np.array_split(u, 50)])
    facet_sizes = (np.abs(y @ K.normals.T - 1) <= 1e-9).sum(axis=0)
    counts = np.array([(facet_sizes[hit] == n).sum() for n in sizes])
    assert stats.chisquare(counts, draws * expected / expected.sum()).pvalue > 1e-3
    assert stats.chisquare(counts, np.full(9, draws / 9)).pvalue < 1e-6


def test_4x4_k_norm_law(mechanism_4x4):
    """The mechanism (rank 9 ≥ SYMMETRIC_HULL_MIN_RANK, so built up to symmetry) draws
    ‖Z‖_K ~ Gamma(9, rate ε): E‖Z‖_K = s/ε within 5 standard errors (SD √s/ε), and a KS
    test p > 1e-3; the gauge is the LP-checked one above. ε = 1; ‖Z‖_K scales as 1/ε."""
    m = mechanism_4x4
    assert m.rank == 9 >= SYMMETRIC_HULL_MIN_RANK and isinstance(m.body.polytope, SymmetricPolytope)
    n = 50_000
    g = m.body.gauge(m.sample(n, np.random.default_rng(7)))
    assert abs(g.mean() - 9) <= 5 * 3 / math.sqrt(n)
    assert stats.kstest(g, stats.gamma(9).cdf).pvalue > 1e-3


def test_4x4_second_moment_and_margins(mechanism_4x4):
    """Exact E[UUᵀ] (representatives' simplex moments averaged over G) against 100,000
    draws in the table's own coordinates, each entry within 5 standard errors; the draws
    keep the margins (rows and columns sum to 0)."""
    body = mechanism_4x4.body
    u = body.uniform(np.random.default_rng(8), 100_000)
    products = u[:, :, None] * u[:, None, :]
    se = products.std(axis=0, ddof=1) / math.sqrt(len(u))
    assert np.all(np.abs(products.mean(axis=0) - body.second_moment(None)) <= 5 * se + 1e-12)
    tables = u.reshape(-1, 4, 4)
    assert np.abs(tables.sum(axis=1)).max() < 1e-12 and np.abs(tables.sum(axis=2)).max() < 1e-12


def test_small_ranks_keep_the_plain_construction():
    """Below SYMMETRIC_HULL_MIN_RANK the plain construction is used (its triangulation is
    pinned by the example certificates)."""
    m = mechanism(table_vectors(3, 4), 1.0)
    assert m.rank == 6 < SYMMETRIC_HULL_MIN_RANK and isinstance(m.body.polytope, Polytope)


def test_root_polytope_up_to_symmetry():
    """The hull of a replace-one histogram of 8 cells, conv{e_i − e_j} (s = 7), read as a 2×4
    table (G of order 2·2!·4! = 96): 2^8 − 2 = 254 facets, gauge ‖x‖₁/2 on sum-zero x, and
    E‖U‖₁ = 2·E‖U‖_K = 2s/(s + 1) (‖U‖_K ~ Beta(s, 1)), exact because ‖·‖₁ is linear on every
    cone (see test_k_norm_geometry.py for these facts)."""
    m = 8
    eye = np.eye(m)
    vectors = np.array([eye[i] - eye[j] for i, j in itertools.permutations(range(m), 2)])
    y, basis = span(vectors)
    group = table_symmetries(vectors)
    assert group.shape == (96, len(vectors))
    K = SymmetricPolytope.from_points(y, group)
    assert len(K.normals) == 2**m - 2
    x = np.random.default_rng(4).standard_normal((200, m))
    x -= x.mean(axis=1, keepdims=True)
    assert np.allclose(K.gauge(x @ basis), np.abs(x).sum(axis=1) / 2, rtol=1e-12, atol=1e-12)
    s = m - 1
    assert K.mean_l1(K.extend(vectors)) == pytest.approx(2 * s / (s + 1), rel=1e-12)
