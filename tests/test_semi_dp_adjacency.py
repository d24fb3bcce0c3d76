"""The semi-adjacent parameter a(t) (Cho & Awan, Def. 13) on the paper's examples.

Expected values: Example 3 and Example 5 / Theorem 16 of the paper, and the table of
digest §1.7 (computed there by exhaustive enumeration of datasets), for both readings.
Every case is computed twice here, by breadth-first search (networkx) over ordered
datasets and by the histogram formula, which share no code.
"""

from __future__ import annotations

import itertools

import networkx as nx
import numpy as np
import pytest

import dpopt
from dpopt.domain.queries import compile_query
from dpopt.sensitivity.invariants import conforming_histograms, histograms, invariant_domain
from dpopt.sensitivity.semi_adjacency import (
    closed_form_parameter,
    dataset_graph,
    exact_parameter,
    histogram_parameter,
    search_parameter,
    semi_adjacency_graph,
)


def _table_margins(r: int, c: int):
    """T of a row-major r×c table: (row counts, column counts)."""
    def T(X):
        rows, cols = [0] * r, [0] * c
        for cell in X:
            rows[cell // c] += 1
            cols[cell % c] += 1
        return tuple(rows + cols)
    return T


def _binary_features(p: int):
    """T = number of records with level 1 in each of p binary features (cell = bit mask)."""
    return lambda X: tuple(sum((cell >> j) & 1 for cell in X) for j in range(p))


def _both_routes(m: int, n: int, T, t, reading: str) -> tuple[int, int]:
    G = dataset_graph(m, n)
    conforming = [X for X in G if T(X) == t]
    H = np.unique(np.array([np.bincount(X, minlength=m) for X in conforming]), axis=0)
    return search_parameter(G, conforming, reading), histogram_parameter(H, reading)


# (m, n, invariant, t, a_worst, a_literal): digest §1.7 and paper Examples 3 and 5
CASES = {
    "example3_t2": (2, 3, lambda X: sum(X), 2, 2, 2),
    "example3_t0": (2, 3, lambda X: sum(X), 0, 0, 0),
    "example3_t1": (2, 3, lambda X: sum(X), 1, 2, 2),
    "example3_t3": (2, 3, lambda X: sum(X), 3, 0, 0),
    "2x2_n3_2121": (4, 3, _table_margins(2, 2), (2, 1, 2, 1), 3, 2),
    "2x2_n4_2222": (4, 4, _table_margins(2, 2), (2, 2, 2, 2), 2, 2),
    "2x2_n4_3122": (4, 4, _table_margins(2, 2), (3, 1, 2, 2), 3, 2),
    "3x3_n3_ones": (9, 3, _table_margins(3, 3), (1,) * 6, 3, 2),
    "states_3_levels": (3, 3, lambda X: tuple(np.bincount(X, minlength=3)), (2, 1, 0), 2, 2),
    "states_single": (3, 3, lambda X: tuple(np.bincount(X, minlength=3)), (0, 3, 0), 0, 0),
    "full_joint_2x2": (4, 3, lambda X: tuple(np.bincount(X, minlength=4)), (1, 1, 1, 0), 2, 2),
}


@pytest.mark.parametrize("name", CASES)
def test_parameter_matches_paper_and_digest(name):
    m, n, T, t, worst, literal = CASES[name]
    assert _both_routes(m, n, T, t, "worst_case") == (worst, worst)
    assert _both_routes(m, n, T, t, "literal") == (literal, literal)


def test_theorem16_bound_attained_with_three_binary_features():
    # digest §1.7: p = 3, n = 4, one-way margins (1, 1, 1) -> worst case 4 = p + 1, literal 2
    assert _both_routes(8, 4, _binary_features(3), (1, 1, 1), "worst_case") == (4, 4)
    assert _both_routes(8, 4, _binary_features(3), (1, 1, 1), "literal") == (2, 2)


@pytest.mark.parametrize("t", [(0, 0, 0), (4, 4, 4), (0, 4, 0)])
def test_degenerate_margins_leave_nothing_to_protect(t):
    # digest §9 case 8: a zero or full count on every feature determines the data
    H = np.unique(np.array([np.bincount(X, minlength=8) for X in itertools.product(range(8), repeat=4)
                            if _binary_features(3)(X) == t]), axis=0)
    assert histogram_parameter(H, "worst_case") == histogram_parameter(H, "literal") == 0


def test_semi_adjacency_graph_of_3x3_permutation_tables():
    # digest §9 case 9: |D_t| = 36; a = 3 complete (630 edges), a = 2 has 162 edges; both connected
    G = dataset_graph(9, 3)
    conforming = [X for X in G if _table_margins(3, 3)(X) == (1,) * 6]
    assert len(conforming) == 36
    g3, g2 = semi_adjacency_graph(G, conforming, 3), semi_adjacency_graph(G, conforming, 2)
    assert (g3.number_of_edges(), g2.number_of_edges()) == (630, 162)
    assert nx.is_connected(g3) and nx.is_connected(g2)


def test_least_record_changes_between_histograms_is_half_their_l1_distance():
    # digest §9 case 10 (the fact the histogram formula and the brute force rely on), 2×2, n = 3
    G = dataset_graph(4, 3)
    by_hist: dict[tuple, list] = {}
    for X in G:
        by_hist.setdefault(tuple(np.bincount(X, minlength=4)), []).append(X)
    hists = list(by_hist)
    for h in hists:
        lengths = nx.single_source_shortest_path_length(G, by_hist[h][0])
        for g in hists:
            least = min(lengths[Y] for Y in by_hist[g])
            assert least == np.abs(np.subtract(h, g)).sum() // 2


def _domain(levels: tuple[int, ...], n: int | None, groups=None, query=None):
    attributes = {f"a{i}": [str(j) for j in range(k)] for i, k in enumerate(levels)}
    groups = [[f"a{i}"] for i in range(len(levels))] if groups is None else groups
    spec = dpopt.load_spec({
        "dpopt": 1, "name": "t", "data": {"attributes": attributes, **({"n": n} if n else {})},
        "query": query or {"kind": "contingency_table", "attributes": list(attributes)},
        "invariants": [{"kind": "margins", "attributes": g} for g in groups],
        "adjacency": "replace_one", "privacy": {"gdp": {"mu": 1.0}},
    })
    return invariant_domain(spec, compile_query(spec))


@pytest.mark.parametrize("levels,n", [((2, 2), 2), ((2, 2), 3), ((2, 2), 4), ((2, 3), 3), ((3, 3), 2),
                                      ((3, 3), 3), ((2, 2, 2), 2), ((2, 2, 2), 3), ((2, 2, 2), 4),
                                      ((3,), 3), ((2, 2), 1)])
def test_closed_form_equals_exact_search_over_all_invariant_values(levels, n):
    # max_t a_worst(t) = min(p + 1, n) (Thm 16 bound, attained) against the exhaustive search
    domain = _domain(levels, n)
    closed = closed_form_parameter(domain, "worst_case")
    assert closed.exact
    assert closed.value == exact_parameter(domain, n, "worst_case").value


def test_closed_form_counts_groups_and_ignores_uncovered_attributes():
    # margins of a0 only on a 3×2 table: one covered group -> 2; a merged group [a0, a1] of a
    # 2×2×2 table with a2 free -> still one group
    assert closed_form_parameter(_domain((3, 2), None, [["a0"]]), "worst_case").value == 2
    domain = _domain((2, 2, 2), 4, [["a0", "a1"]])
    assert closed_form_parameter(domain, "worst_case").value == exact_parameter(domain, 4).value == 2


def test_literal_reading_falls_back_to_an_upper_bound():
    domain = _domain((2, 2), 3)
    bound = closed_form_parameter(domain, "literal")
    exact = exact_parameter(domain, 3, "literal")
    assert not bound.exact and bound.value == 3
    assert exact.exact and exact.value == 2 <= bound.value


def test_histogram_enumeration_groups_by_invariant_value():
    domain = _domain((2, 2), 3)
    groups = dict(conforming_histograms(domain, 3))
    assert sum(len(H) for H in groups.values()) == len(histograms(4, 3)) == 20
    for t, H in groups.items():
        assert np.all(H @ domain.invariant_matrix().T == np.array(t))


def test_search_claim_in_a_certificate():
    spec = {
        "dpopt": 1, "name": "t", "data": {"attributes": {"a": ["x", "y"], "b": ["u", "v"]}, "n": 3},
        "query": {"kind": "contingency_table", "attributes": ["a", "b"]},
        "invariants": [{"kind": "margins", "attributes": ["a"]}, {"kind": "margins", "attributes": ["b"]}],
        "adjacency": "replace_one", "privacy": {"gdp": {"mu": 1.0}},
    }
    checks = {c["claim"]: c for c in dpopt.solve(spec).certificate["checks"]}
    assert checks["semi_adjacency.search"]["passed"]
    assert "searched max_t a(t) = 3" in checks["semi_adjacency.search"]["detail"]
