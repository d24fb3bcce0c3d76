"""The structural Semi-DP space against brute force over conforming datasets.

Ground truth: :func:`dpopt.sensitivity.semi_enumerate.enumerate_semi_space`, which builds
every dataset as a list of records and evaluates query and invariants record by record
(no invariant or query matrix). Counts come from the paper (Prop. 32: r(r−1)c(c−1)/2
rectangles; Example 8's projector) and the digest (§2.2: 12 six-cycles in 3×3, 31
points, Δ₂ = √6; §9 cases 11–13).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from scipy.linalg import null_space

import dpopt
from dpopt.sensitivity.margin_subspace import MarginSubspace
from dpopt.sensitivity.semi_enumerate import enumerate_semi_space
from dpopt.sensitivity.table_moves import margin_matrix, margin_moves, paper_moves, reduced_shape


def _spec(levels, groups=None, n=None, query=None, invariants=None, **extra):
    attributes = {f"a{i}": [str(j) for j in range(k)] for i, k in enumerate(levels)}
    if invariants is None:
        groups = [[f"a{i}"] for i in range(len(levels))] if groups is None else groups
        invariants = [{"kind": "margins", "attributes": g} for g in groups]
    return dpopt.load_spec({
        "dpopt": 1, "name": "t", "data": {"attributes": attributes, **({"n": n} if n else {})},
        "query": query or {"kind": "contingency_table", "attributes": list(attributes)},
        "invariants": invariants, "adjacency": "replace_one", "privacy": {"gdp": {"mu": 1.0}}, **extra,
    })


def _rows(vectors) -> set:
    return {tuple(np.round(v, 9) + 0.0) for v in np.asarray(vectors, dtype=float)}


def _nonzero(vectors) -> set:
    """The listed differences other than 0 (X = X′), which changes neither hull nor norms."""
    return {v for v in _rows(vectors) if any(v)}


def _assert_equal_to_brute_force(spec, size=None):
    problem = dpopt.compile(spec)
    space = problem.space
    a = space.semi_adjacent_parameter
    brute = enumerate_semi_space(problem.domain, size or a, a)
    assert space.complete
    assert _nonzero(space.vectors()) == _nonzero(brute.vectors())
    assert (space.l1, space.l2_squared, space.linf, space.rank) == (brute.l1, brute.l2_squared, brute.linf, brute.rank)
    return space


@pytest.mark.parametrize("levels", [(2, 2), (2, 3), (3, 3), (2, 2, 2)])
def test_one_way_margins_structural_equals_brute_force(levels):
    _assert_equal_to_brute_force(_spec(levels))


@pytest.mark.parametrize("n", [2, 3, 4])
def test_2x2_with_public_n_equals_brute_force_at_that_n(n):
    _assert_equal_to_brute_force(_spec((2, 2), n=n), size=n)


def test_3x3_has_six_cycles_beyond_the_papers_rectangles():
    space = dpopt.derive(_spec((3, 3)))
    v = space.vectors()
    l1 = np.abs(v).sum(axis=1)
    # digest §9 case 13: 31 points: 0, 18 rectangles (l1 = 4), 12 six-cycles (l1 = 6); Δ₂ = √6
    assert len(v) == 31 and (l1 == 4).sum() == 18 and (l1 == 6).sum() == 12
    assert (space.l1, space.l2_squared, space.linf) == (6, 6, 1)
    cycle = (1, -1, 0, 0, 1, -1, -1, 0, 1)  # +1 at (1,1),(2,2),(3,3); −1 at (1,2),(2,3),(3,1)
    assert cycle in _rows(v)
    # the paper's set (Prop. 32) is exactly the degree-2 part, i.e. S_Semi for adjacency A_2
    assert _rows(paper_moves(3, 3)) == _rows(margin_moves((3, 3), ((0,), (1,)), 2))


@pytest.mark.parametrize("r,c", [(2, 2), (2, 3), (3, 3), (3, 4), (4, 4)])
def test_rectangle_counts_of_prop32(r, c):
    assert len(paper_moves(r, c)) == r * (r - 1) * c * (c - 1) // 2
    moves = margin_moves((r, c), ((0,), (1,)), 3)
    assert _rows(paper_moves(r, c)) <= _rows(moves)
    if min(r, c) == 2:  # a 2×c table has no longer cycles: the paper's set is exact
        assert _rows(paper_moves(r, c)) == _rows(moves)


def test_2x2_matches_examples_7_and_8():
    space = dpopt.derive(_spec((2, 2)))
    assert _rows(space.vectors()) == {(0.0,) * 4, (1.0, -1.0, -1.0, 1.0), (-1.0, 1.0, 1.0, -1.0)}
    assert (space.l1, space.l2_squared, space.linf, space.rank) == (4, 4, 1, 1)
    expected = np.array([[1, -1, -1, 1], [-1, 1, 1, -1], [-1, 1, 1, -1], [1, -1, -1, 1]]) / 4
    assert np.allclose(space.span.project(np.eye(4)), expected, atol=1e-15)


def test_2x2x2_one_way_margins_has_doubled_moves():
    # a = p + 1 = 4: 2·(degree-2 move) is realised by 4 record changes, so Δ₂² = 16
    space = _assert_equal_to_brute_force(_spec((2, 2, 2)))
    assert space.semi_adjacent_parameter == 4
    assert (space.l1, space.l2_squared, space.linf) == (8, 16, 2)


def test_total_only_invariant_is_the_replace_one_space():
    spec = _spec((3, 2), invariants=[{"kind": "total"}])
    space = _assert_equal_to_brute_force(spec)
    plain = dpopt.derive(spec.model_copy(update={"invariants": []}))
    assert space.semi_adjacent_parameter == 1
    assert (space.l1, space.l2_squared, space.linf, space.rank) == (plain.l1, plain.l2_squared, plain.linf, plain.rank)


def test_linear_invariant_equals_brute_force():
    # histogram of 3 levels; invariant: count of the first two levels (a linear C·φ)
    spec = _spec((3,), n=3, query={"kind": "histogram", "attribute": "a0"},
                 invariants=[{"kind": "linear", "matrix": [[1, 1, 0]]}])
    space = _assert_equal_to_brute_force(spec, size=3)
    assert space.semi.exact and space.semi.method.startswith("exact search")
    assert space.semi_adjacent_parameter == 2 and space.rank == 1


def test_linear_invariant_with_a_fixed_value_equals_brute_force():
    spec = _spec((3,), n=3, query={"kind": "histogram", "attribute": "a0"},
                 invariants=[{"kind": "linear", "matrix": [[1, 0.5, 0]], "value": [1.5]}])
    space = _assert_equal_to_brute_force(spec, size=3)
    assert space.method.startswith("enumeration: every pair of the")


def test_overlapping_two_way_margins_equal_brute_force():
    spec = _spec((2, 2, 2), n=3, groups=[["a0", "a1"], ["a1", "a2"]])
    space = _assert_equal_to_brute_force(spec, size=3)
    assert "listed" in space.method


def test_invariant_attribute_outside_the_query():
    # the histogram of a1 with the margin of a0 invariant: a record may change a0 only with
    # a compensating change, so a = 2 and the histogram moves by up to two replacements
    spec = _spec((2, 3), groups=[["a0"]], query={"kind": "histogram", "attribute": "a1"})
    space = _assert_equal_to_brute_force(spec)
    assert space.semi_adjacent_parameter == 2 and space.l2_squared == 8


def test_listed_vectors_are_distinct():
    """S_Semi is a set: the age-range sums of a 2×5 table with its row margin invariant map many of the table's moves
    to one vector; the space lists each vector once, the same set as brute force."""
    ranges = [[1 if lo <= k <= hi else 0 for k in range(5)] for lo in range(5) for hi in range(lo, 5)]
    spec = _spec((2, 5), groups=[["a0"]], query={"kind": "linear", "attribute": "a1", "matrix": ranges})
    space = _assert_equal_to_brute_force(spec)
    vectors = space.vectors()
    moves = margin_moves((2, 5), ((0,),), space.semi_adjacent_parameter)
    assert len(_rows(vectors)) == len(vectors) < len(moves)


@pytest.mark.parametrize("shape,groups", [((5, 5), ((0,), (1,))), ((4, 3), ((0,),)), ((5, 2, 2), ((0,), (1, 2)))])
def test_reduced_table_norms_equal_full_table_norms(shape, groups):
    degree = 1 + len(groups)
    covered = frozenset(a for g in groups for a in g)
    small = reduced_shape(shape, covered, frozenset(), degree)
    assert small != shape
    full, reduced = margin_moves(shape, groups, degree), margin_moves(small, groups, degree)
    for norm in (lambda v: np.abs(v).sum(1), lambda v: (v**2).sum(1), lambda v: np.abs(v).max(1)):
        assert norm(full).max() == norm(reduced).max()


@pytest.mark.parametrize("levels,groups", [((3, 3), None), ((3, 4), None), ((2, 2, 2), None),
                                           ((3, 2, 2), [["a0", "a1"]]), ((3, 4), [["a0"]])])
def test_implicit_projector_equals_the_span_of_the_listed_vectors(levels, groups):
    space = dpopt.derive(_spec(levels, groups))
    assert isinstance(space.span, MarginSubspace)
    v = space.vectors()
    basis = np.linalg.svd(v.T, full_matrices=False)[0][:, : np.linalg.matrix_rank(v)]
    dense = basis @ basis.T
    d = space.dimension
    assert space.rank == basis.shape[1]
    assert np.allclose(space.span.project(np.eye(d)), dense, atol=1e-12)
    assert np.allclose(space.span.projector_diagonal(), np.diag(dense), atol=1e-12)
    B = space.span.basis()
    assert np.allclose(B.T @ B, np.eye(space.rank), atol=1e-12) and np.allclose(B @ B.T, dense, atol=1e-12)


@pytest.mark.parametrize("k", [2, 3, 5, 10])
def test_kxk_rank_and_trace(k):
    # digest §9 case 12: rank (k−1)², P = (I − J/k) ⊗ (I − J/k), trace (k−1)²
    space = dpopt.derive(_spec((k, k)))
    assert space.rank == (k - 1) ** 2
    assert np.isclose(space.span.projector_diagonal().sum(), (k - 1) ** 2)
    centring = np.eye(k) - 1.0 / k
    x = np.random.default_rng(0).normal(size=(3, k * k))
    assert np.allclose(space.span.project(x), x @ np.kron(centring, centring), atol=1e-12)


def test_projector_is_applied_without_a_dense_matrix_for_large_tables():
    space = dpopt.derive(_spec((100, 100)))
    assert space.rank == 99 * 99 and not space.complete
    with pytest.raises(ValueError):
        space.vectors()
    x = np.random.default_rng(1).normal(size=(2, 10_000))
    p = space.span.project(x).reshape(2, 100, 100)
    assert np.abs(p.sum(axis=1)).max() < 1e-9 and np.abs(p.sum(axis=2)).max() < 1e-9
    assert (space.l1, space.l2_squared, space.linf) == (Fraction(6), Fraction(6), Fraction(1))


def test_kernel_of_margins_is_reached_so_the_noise_free_part_is_determined_by_the_invariants():
    for spec in (_spec((3, 3)), _spec((2, 3), groups=[["a0"]], query={"kind": "histogram", "attribute": "a1"}),
                 _spec((2, 2, 2), n=3, groups=[["a0", "a1"], ["a1", "a2"]])):
        space = dpopt.derive(spec)
        assert space.determined_by_invariants
    C = margin_matrix((3, 3), ((0,), (1,)))
    assert null_space(C.astype(float)).shape[1] == dpopt.derive(_spec((3, 3))).rank
