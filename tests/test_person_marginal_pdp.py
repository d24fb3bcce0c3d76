"""A person's moves on tables and marginal workloads under pDP: their move patterns derived without listing the moves
(dpopt.sensitivity.person_patterns), so that ``gaussian`` measures exactly with a privacy unit.

Expected values: the allowed contributions by brute force over every vector in {0, …, c}^m (Σv ≤ k, at most g
non-zero), the moves A v (add/remove) and A(v − v′) over every pair (replace), with A the marginal tables built as
an explicit 0/1 matrix on these tiny domains, and their patterns (sorted non-zero |Δ_k|) read off those vectors; the
discrete Gaussian's pDP level δ(v) = P[|L| > ε], L = (2⟨η, v⟩ + ‖v‖²)/(2σ²) (Canonne, Kamath & Steinke 2020:
integer shifts, no normaliser term), from the law of ⟨η, v⟩ convolved coordinate by coordinate in mpmath at 40
digits over |η_i| ≤ 20σ + 1 (the outside mass below e^{−200}).
"""

from __future__ import annotations

import itertools
import json
import math
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import mpmath
import numpy as np
import pytest

import dpopt
from dpopt.mechanisms.integer_noise import move_patterns, vector_patterns
from dpopt.privacy.discrete_gaussian_pdp import pdp_level, subgaussian_level, worst_pdp_level
from dpopt.sensitivity import person_patterns
from dpopt.sensitivity.patterns import move_multisets, shift_pattern
from dpopt.sensitivity.person_patterns import count_weight_tuples, marginal_patterns, table_patterns, weight_tuples
from dpopt.sensitivity.space import SensitivitySpace
from pdp_brute import mp_level
from person_brute import allowed, marginal_matrix

VISITS = Path(__file__).resolve().parents[1] / "specs" / "data" / "visits.csv"
ATTRIBUTES = {"a": ["x", "y", "z"], "b": ["u", "v"], "c": ["p", "q", "r"]}


def brute_patterns(matrix: np.ndarray, k: int, c: int | None, g: int | None, replace: bool) -> list[tuple[int, ...]]:
    """The patterns of ±A v or A(v − v′) over every allowed v, v′ (every pair formed)."""
    images = np.unique(allowed(matrix.shape[1], k, c, g) @ matrix.T, axis=0)
    moves = (images[:, None, :] - images[None, :, :]).reshape(-1, matrix.shape[0]) if replace else images
    found = {tuple(int(x) for x in row if x) for row in np.sort(np.abs(moves), axis=1)}
    return sorted(found - {()})


def unit_of(k: int, c: int | None, g: int | None, cells: int) -> tuple[int, int, int]:
    """(R, t, min(g, m)) as dpopt.sensitivity.person.most_rows states them."""
    groups = min(g or cells, cells)
    rows = min(k, (c or k) * groups)
    return rows, min(c or rows, rows), groups


UNITS = [(3, None, None), (4, 2, 2), (3, 1, 3), (4, 3, 2)]


@pytest.mark.parametrize("k, c, g", UNITS)
@pytest.mark.parametrize("cells", [1, 3, 4])
@pytest.mark.parametrize("replace", [False, True])
def test_table_patterns_are_the_brute_force_ones(k, c, g, cells, replace):
    expected = brute_patterns(np.eye(cells, dtype=int), k, c, g, replace)
    assert table_patterns(*unit_of(k, c, g, cells), cells, replace) == expected


@pytest.mark.parametrize("sizes, blocks", [
    ((3, 2), ((0,), (1,))),
    ((2, 2, 2), ((0, 1), (0, 2), (1, 2))),
    ((2, 2, 2), ((), (0, 1), (2,))),     # with the total (a one-cell table)
    ((2, 3), ((0, 1),)),                 # the full table as a marginal
])
@pytest.mark.parametrize("k, c, g", [(3, None, None), (3, 2, 2), (2, 1, 2)])
@pytest.mark.parametrize("replace", [False, True])
def test_marginal_patterns_are_the_brute_force_ones(sizes, blocks, k, c, g, replace):
    cells = math.prod(sizes)
    expected = brute_patterns(marginal_matrix(sizes, blocks), k, c, g, replace)
    assert marginal_patterns(sizes, blocks, *unit_of(k, c, g, cells), replace) == expected


def test_weight_tuples_and_their_count_are_the_brute_force_ones():
    for t, rows in [(1, 3), (2, 4), (3, 3), (4, 6)]:
        for support in range(5):
            brute = [w for w in itertools.product(range(1, t + 1), repeat=support) if sum(w) <= rows]
            assert list(weight_tuples(support, t, rows)) == brute  # lexicographic, as itertools lists them
        assert count_weight_tuples(t, rows, 4) == [len([w for w in itertools.product(range(1, t + 1), repeat=s)
                                                         if sum(w) <= rows]) for s in range(5)]


def spec(query: dict, adjacency: str, unit: dict, mechanism: str = "gaussian", epsilon: float = 1) -> dict:
    return {"dpopt": 1, "name": "person-level tables under pDP",
            "data": {"attributes": ATTRIBUTES, "privacy_unit": {"id": "pid", **unit}},
            "query": query, "adjacency": {"kind": adjacency},
            "privacy": {"pdp": {"epsilon": epsilon, "delta": 1e-3}}, "mechanism": mechanism,
            "utility": {"metric": "l2"}}


@pytest.mark.parametrize("pairs", [person_patterns.MAX_PARTITION_PAIRS, 3])
def test_a_listed_table_space_states_the_patterns_of_its_listed_moves(pairs, monkeypatch):
    # 3 cells, ≤ 2 rows: the moves are listed (complete) and the stated patterns are theirs; with a budget of 3
    # pairs of partitions (4² are needed) none are stated and the listed moves' are read
    monkeypatch.setattr(person_patterns, "MAX_PARTITION_PAIRS", pairs)
    space = dpopt.derive(dpopt.load_spec(spec({"kind": "histogram", "attribute": "a"}, "replace_one",
                                              {"max_rows": 2})))
    assert (space._patterns() is None) == (pairs == 3)
    assert space.complete and move_patterns(space) == vector_patterns(space.listed())


@pytest.mark.parametrize("query, adjacency, unit, sizes, blocks", [
    ({"kind": "marginals", "attributes": [["a"], ["b"]]}, "add_remove", {"max_rows": 2}, (3, 2), ((0,), (1,))),
    ({"kind": "contingency_table", "attributes": ["a", "b"]}, "replace_one", {"max_rows": 2}, (3, 2), ((0, 1),)),
])
def test_the_certified_level_is_the_independent_worst_move_level(query, adjacency, unit, sizes, blocks):
    # ε = 3 keeps σ_ℤ² small, so that the 40-digit convolutions stay fast
    solution = dpopt.solve(spec(query, adjacency, unit, epsilon=3))
    certificate = json.loads(solution.certificate.to_json())
    assert "idealized" not in json.dumps(certificate) and dpopt.verify(certificate).passed
    sigma2 = Fraction(certificate["mechanism"]["parameters"]["lattice_sigma2"])
    (check,) = [c for c in certificate["checks"] if c["claim"] == "privacy"]
    stated = float(check["detail"].split("δ(v) ≤ ")[1].split(" ")[0])
    patterns = brute_patterns(marginal_matrix(sizes, blocks), unit["max_rows"], None, None,
                              adjacency == "replace_one")
    worst = max(mp_level(sigma2, pattern, Fraction(3)) for pattern in patterns)
    # the stated level is the largest arb upper bound (exact up to a tail below 2^-79), printed to 12 digits
    assert stated == pytest.approx(float(worst), rel=1e-10)
    assert worst <= mpmath.mpf("0.001")
    # a forged, smaller lattice variance fails verify: it re-derives the patterns from the spec and the level at σ²
    forged = json.loads(json.dumps(certificate))
    forged["mechanism"]["parameters"]["lattice_sigma2"] = str(sigma2 / 2)
    assert mp_level(sigma2 / 2, max(patterns, key=lambda p: sum(t * t for t in p)), Fraction(3)) > 1e-3
    assert "privacy" in {check.claim for check in dpopt.verify(forged).failed}


@pytest.mark.parametrize("sigma2, pattern", [(Fraction(40), (1, 2, 2)), (Fraction(97, 2), (3, 3)),
                                             (Fraction(12), (1, 1, 1, 2))])
def test_the_sub_gaussian_bound_is_above_the_level(sigma2, pattern):
    bound = subgaussian_level(sigma2, pattern, Fraction(1))
    assert mpmath.mpf(bound.numerator) / bound.denominator >= mp_level(sigma2, pattern, Fraction(1))


def test_the_screened_maximum_is_the_largest_level_and_a_search_stops_at_the_first_failure():
    patterns = table_patterns(3, 3, 3, 3, True)  # 18 patterns, ‖v‖² up to 18
    sigma2, epsilon = Fraction(60), Fraction(1)
    levels = {pattern: pdp_level(sigma2, pattern, epsilon) for pattern in patterns}
    assert worst_pdp_level(sigma2, patterns, epsilon) == max(levels.values())
    top = max(levels.values())
    assert worst_pdp_level(sigma2, patterns, epsilon, target=top) <= top  # every pattern passes at its level
    below = worst_pdp_level(sigma2, patterns, epsilon, target=top / 2)
    assert below > top / 2 and below in levels.values()


@pytest.mark.parametrize("mechanism", ["gaussian", "discrete_gaussian"])
def test_two_way_marginals_with_a_unit_measure_exactly(mechanism):
    solution = dpopt.solve(spec({"kind": "marginals", "all_of_size": 2}, "add_remove",
                                {"max_rows": 2, "max_groups": 2, "max_rows_per_group": 1}, mechanism))
    certificate = json.loads(solution.certificate.to_json())
    assert "idealized" not in json.dumps(certificate) and dpopt.verify(certificate).passed
    assert "move patterns from" in certificate["sensitivity"]["method"]


@pytest.mark.parametrize("adjacency", ["add_remove", "replace_one"])
def test_the_per_coordinate_shifts_of_stated_patterns_are_those_of_the_brute_force_moves(adjacency):
    space = dpopt.derive(dpopt.load_spec(spec({"kind": "marginals", "attributes": [["a"], ["b"]]}, adjacency,
                                              {"max_rows": 2})))
    assert not space.complete and space.stated_patterns() is not None
    matrix = marginal_matrix((3, 2), ((0,), (1,)))
    images = np.unique(allowed(6, 2, None, None) @ matrix.T, axis=0)
    moves = (images[:, None, :] - images[None, :, :]).reshape(-1, 5) if adjacency == "replace_one" else \
        np.vstack([images, -images])
    brute = SensitivitySpace.from_vectors(moves[np.any(moves != 0, axis=1)], method="brute force",
                                          adjacency=adjacency, complete=True)
    mine, theirs = shift_pattern(space), shift_pattern(brute)
    assert mine.magnitudes == theirs.magnitudes
    assert sorted(map(tuple, mine.counts)) == sorted(map(tuple, theirs.counts))
    assert move_multisets(space, 10**6) == move_multisets(brute, 10**6)


@pytest.mark.parametrize("mechanism, privacy", [("staircase", {"pdp": {"epsilon": 1, "delta": 1e-3}}),
                                                ("staircase", {"approx": {"epsilon": 1, "delta": 1e-6}}),
                                                ("r2dp", {"pdp": {"epsilon": 1, "delta": 1e-3}})])
def test_per_coordinate_families_read_the_stated_patterns(mechanism, privacy):
    document = spec({"kind": "marginals", "all_of_size": 1}, "replace_one", {"max_rows": 2, "max_rows_per_group": 1},
                    mechanism)
    document["privacy"] = privacy
    certificate = json.loads(dpopt.solve(document).certificate.to_json())
    assert certificate["mechanism"]["family"] == mechanism
    assert "idealized" not in json.dumps(certificate) and dpopt.verify(certificate).passed


def test_a_unit_beyond_the_enumeration_budget_measures_on_the_norm_bound(monkeypatch):
    # the patterns not derived (a budget of 10 sequences): the lattice σ_ℤ² is calibrated on the sub-Gaussian bound
    # at max ‖v‖² (dpopt.mechanisms.lattice_pdp, moves not derived); with the budget restored, verify reads the
    # derived patterns, whose exact levels the bound must dominate
    with monkeypatch.context() as patched:
        patched.setattr(person_patterns, "MAX_SEQUENCES", 10)
        patched.setattr("dpopt.sensitivity.person.MAX_SEQUENCES", 10)
        solution = dpopt.solve(spec({"kind": "marginals", "all_of_size": 1}, "replace_one", {"max_rows": 2}))
        certificate = json.loads(solution.certificate.to_json())
        assert "idealized" not in json.dumps(certificate)
        assert "move patterns not derived" in certificate["sensitivity"]["method"]
        (check,) = [c for c in certificate["checks"] if c["claim"] == "privacy"]
        assert "the move patterns not derived" in check["method"] and dpopt.verify(certificate).passed
    (check,) = [c for c in dpopt.verify(certificate).checks if c.claim == "privacy"]
    assert check.passed and "max over the move patterns" in check.method


def test_cli_solve_release_verify_of_person_level_marginals(tmp_path):
    run = lambda *args: subprocess.run([sys.executable, "-m", "dpopt.cli", *args], capture_output=True, text=True)
    document = {"dpopt": 1, "name": "visits by age group and by clinic, person level, pDP",
                "data": {"attributes": {"age_group": ["0-17", "18-39", "40-64", "65+"],
                                        "clinic": ["north", "south", "east", "west", "central"]},
                         "privacy_unit": {"id": "person_id", "max_rows": 2, "max_groups": 2,
                                          "max_rows_per_group": 1}},
                "query": {"kind": "marginals", "all_of_size": 1}, "adjacency": {"kind": "add_remove"},
                "privacy": {"pdp": {"epsilon": 1, "delta": 1e-3}}, "mechanism": "gaussian",
                "utility": {"metric": "l2"}}
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(document))
    released = run("release", str(path), "--data", str(VISITS), "--out", str(tmp_path / "release"))
    assert released.returncode == 0, released.stderr
    checked = run("verify", str(tmp_path / "release"))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    record = json.loads((tmp_path / "release" / "certificate.json").read_text())
    assert record["mechanism"]["parameters"]["sampler"] == "exact"
    assert "idealized" not in (tmp_path / "release" / "release.json").read_text()
