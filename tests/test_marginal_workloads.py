"""Marginal workloads without the domain: spec sugar, implicit span, release counts, memory guard.

Expected values come from independent routes: the span's projector against numpy's SVD of the
brute-force difference vectors (:func:`dpopt.sensitivity.enumerate_space`, which evaluates the
query record by record); sensitivities against that enumeration; released counts against
:meth:`CountingQuery.evaluate` (record by record, no SQL); ranks against Σ_T ∏(n_k − 1)
summed with itertools; the projected Gaussian's error against σ² · rank with σ² = Δ₂²/(2ρ).
"""

from __future__ import annotations

import csv
import itertools
import math
from pathlib import Path

import numpy as np
import pytest

import dpopt
from conftest import make_spec
from dpopt.design.select import design_candidates
from dpopt.errors import DataError, MemoryLimitError, SpecError
from dpopt.release import sources
from dpopt.sensitivity import enumerate_space
from dpopt.sensitivity.marginal_span import MarginalSpan

ROOT = Path(__file__).resolve().parents[1]
ATTRIBUTES = {"a": ["a0", "a1", "a2"], "b": ["b0", "b1"], "c": ["c0", "c1", "c2", "c3"], "one": ["only"],
              "x": {"min": 0, "max": 1}}


def _spec(query: dict, adjacency="add_remove") -> dpopt.Spec:
    return dpopt.load_spec(make_spec(query=query, adjacency=adjacency, data={"attributes": ATTRIBUTES}))


def test_all_of_size_expands_over_the_categorical_attributes_in_order():
    spec = _spec({"kind": "marginals", "all_of_size": 2})
    assert dpopt.compile(spec).query.groups == (("a", "b"), ("a", "c"), ("a", "one"), ("b", "c"), ("b", "one"),
                                                ("c", "one"))
    over = _spec({"kind": "marginals", "all_of_size": 2, "over": ["c", "a", "b"]})
    assert dpopt.compile(over).query.groups == (("c", "a"), ("c", "b"), ("a", "b"))


@pytest.mark.parametrize("query, field", [
    ({"kind": "marginals", "all_of_size": 2, "over": ["a", "x"]}, "query.over[1]"),
    ({"kind": "marginals", "all_of_size": 5}, "query.all_of_size"),
    ({"kind": "marginals", "all_of_size": 1, "attributes": [["a"]]}, "query"),
    ({"kind": "marginals", "attributes": [["a"]], "over": ["a"]}, "query"),
    ({"kind": "marginals"}, "query"),
])
def test_marginal_sugar_refusals_name_the_field(query, field):
    with pytest.raises(SpecError) as err:
        _spec(query)
    assert err.value.field == field


WORKLOADS = {
    "pairs": [["a", "b"], ["a", "c"], ["b", "c"]],
    "overlap_and_repeat": [["c", "a"], ["a"], ["a", "c"]],
    "single_level": [["a", "one"], ["b"]],
}
ADJACENCIES = {"add_remove": "add_remove", "replace_one": "replace_one",
               "hamming2": {"kind": "hamming", "distance": 2}}
CASES = [pytest.param(w, a, id=f"{w}-{a}",
                      marks=[pytest.mark.slow] if (w, a) == ("pairs", "hamming2") else [])  # ~60 s of enumeration
         for w in WORKLOADS for a in ADJACENCIES]


@pytest.mark.parametrize("wname, aname", CASES)
def test_marginal_span_and_norms_equal_brute_force(wname, aname):
    spec = _spec({"kind": "marginals", "attributes": WORKLOADS[wname]}, ADJACENCIES[aname])
    space = dpopt.derive(spec)
    brute = enumerate_space(spec, max_records=2 if aname != "hamming2" else 3)
    assert (space.l1, space.l2_squared, space.linf) == (brute.l1, brute.l2_squared, brute.linf)
    assert isinstance(space.span, MarginalSpan) or space.span.rank == space.dimension
    # the projector onto span(S), from numpy's SVD of the enumerated differences
    u, s, _ = np.linalg.svd(brute.vectors().T, full_matrices=False)
    basis = u[:, s > 1e-9 * s.max()]
    assert space.rank == basis.shape[1]
    dense = basis @ basis.T
    x = np.random.default_rng(3).normal(size=(5, space.dimension))
    np.testing.assert_allclose(space.span.project(x), x @ dense, atol=1e-12)
    np.testing.assert_allclose(space.span.projector_diagonal(), np.diag(dense), atol=1e-12)
    own = space.span.basis()
    np.testing.assert_allclose(own.T @ own, np.eye(space.rank), atol=1e-12)
    np.testing.assert_allclose(own @ own.T, dense, atol=1e-12)
    _assert_extreme(space._extremes(), brute)


def _assert_extreme(vector, brute):
    """The constructed extreme difference is an enumerated one and attains the three norms."""
    assert any(np.array_equal(vector, v) for v in brute.vectors())
    assert (np.abs(vector).sum(), (vector**2).sum(), np.abs(vector).max()) == (brute.l1, brute.l2_squared, brute.linf)


AGENCY = ROOT / "specs" / "marginals_10attr_2way_zcdp.yaml"


def test_agency_spec_compiles_without_the_domain():
    problem = dpopt.compile(AGENCY)
    sizes = [len(levels) for levels in problem.spec.data.attributes.values()]
    pairs = list(itertools.combinations(sizes, 2))
    assert problem.query.cells == math.prod(sizes) > 10**9
    assert problem.space.dimension == sum(m * n for m, n in pairs)
    expected_rank = 1 + sum(n - 1 for n in sizes) + sum((m - 1) * (n - 1) for m, n in pairs)
    assert problem.space.rank == expected_rank
    assert (problem.space.l1, problem.space.l2_squared, problem.space.linf) == (45, 45, 1)
    with pytest.raises(ValueError):
        problem.space.vectors()
    with pytest.raises(MemoryLimitError):
        problem.query.dense()


def test_agency_spec_every_family_answers():
    problem = dpopt.compile(AGENCY)
    rows = {c.family: c for c in design_candidates(problem)}
    projected = rows["projected_gaussian"]
    # σ² = Δ₂²/(2ρ) = 45/2 at ρ = 1, measured on the lattice (the span's public part is exact,
    # MarginalSpan.invariant_component): σ_ℤ² is σ² rounded up to the sampler's 21-bit dyadic grid, and
    # E‖P_V η‖² = Var N_ℤ(0, σ_ℤ²) · rank, the variance summed here from the pmf ∝ exp(−k²/2σ_ℤ²)
    mechanism = projected.mechanism
    assert mechanism.parameters["sampler"] == "exact"
    s2 = float(mechanism.lattice_sigma2)
    assert 22.5 <= s2 <= 22.5 * (1 + 2.0**-20)
    k = np.arange(-400, 401)
    weights = np.exp(-k**2 / (2 * s2))
    assert projected.utility.value == pytest.approx(float(weights @ k**2 / weights.sum()) * problem.space.rank,
                                                    rel=1e-12)
    assert all(c.feasible or c.reason for c in rows.values())


def _records(path: Path, count: int, seed: int, bad: bool = False) -> list[dict]:
    rng = np.random.default_rng(seed)
    names = ["a", "b", "c", "one"]
    records = [{n: str(rng.choice(ATTRIBUTES[n])) for n in names} | {"x": "0.5", "g": str(rng.choice(["g1", "g2"]))}
               for _ in range(count)]
    if bad:
        records[7]["c"] = "c9"
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=[*names, "x", "g"])
        writer.writeheader()
        writer.writerows(records)
    return records


def test_marginal_counts_in_sql_equal_record_by_record(tmp_path):
    spec = _spec({"kind": "marginals", "attributes": WORKLOADS["overlap_and_repeat"] + [["b", "c", "a"]]})
    query = dpopt.compile(spec).query
    records = _records(tmp_path / "r.csv", 300, 5)
    source = sources.open_source(tmp_path / "r.csv")
    values, n = sources.answer(sources.connect(), source, spec, query=query)
    assert n == 300
    np.testing.assert_array_equal(values, query.evaluate(records))
    grouped = sources.group_answers(sources.connect(), source, spec, "g", query=query)
    assert list(grouped.keys) == ["g1", "g2"] and grouped.records == 300
    for key, row in zip(grouped.keys, grouped.values):
        np.testing.assert_array_equal(row, query.evaluate([r for r in records if r["g"] == key]))


def test_marginal_counts_name_an_off_domain_record(tmp_path):
    spec = _spec({"kind": "marginals", "all_of_size": 2, "over": ["a", "c"]})
    _records(tmp_path / "r.csv", 20, 6, bad=True)
    with pytest.raises(DataError, match="row 9, column c: 'c9' is not a level"):
        sources.answer(sources.connect(), sources.open_source(tmp_path / "r.csv"), spec)


SEMI_CASES = {
    "free_tables": [["a", "c"], ["b", "c"]],
    "inside_one_group": [["a", "c"], ["c"], ["a"]],
    "crossed_groups": [["a", "b"], ["a", "c"], ["b", "c"]],  # no closed form: the reduced-table route
}


@pytest.mark.parametrize("name", SEMI_CASES)
def test_semi_dp_marginals_under_one_way_margins_equal_enumeration(name):
    # a 2 x 2 x 3 table with the a and b margins invariant: a = 3 (Cho & Awan, Thm 16, p = 2);
    # every pair of conforming datasets of 3 records, evaluated record by record
    from dpopt.sensitivity.semi_enumerate import enumerate_semi_space

    data = {"attributes": {"a": ["a0", "a1"], "b": ["b0", "b1"], "c": ["c0", "c1", "c2"]}}
    problem = dpopt.compile(make_spec(
        data=data, query={"kind": "marginals", "attributes": SEMI_CASES[name]},
        invariants=[{"kind": "margins", "attributes": ["a"]}, {"kind": "margins", "attributes": ["b"]}]))
    space = problem.space
    assert space.semi_adjacent_parameter == 3
    assert ("closed form" in space.method) == (name != "crossed_groups")
    brute = enumerate_semi_space(problem.domain, 3, 3)
    assert (space.l1, space.l2_squared, space.linf) == (brute.l1, brute.l2_squared, brute.linf)
    assert space.rank == brute.rank
    assert space.span.contains(brute.vectors())
    if space._extremes is not None:
        _assert_extreme(space._extremes(), brute)


def test_semi_dp_agency_spec_compiles_in_closed_form():
    problem = dpopt.compile(ROOT / "specs" / "marginals_8attr_3way_invariants.yaml")
    # 56 three-way tables, each holding an attribute other than sex and region; a = 3 (two one-way margins)
    assert problem.space.semi_adjacent_parameter == 3
    assert (problem.space.l1, problem.space.l2_squared, problem.space.linf) == (2 * 3 * 56, 2 * 9 * 56, 3)
    sizes = [len(levels) for levels in problem.spec.data.attributes.values()]
    invariant = {1, 7}  # sex, region
    free = [t for r in range(1, 4) for t in itertools.combinations(range(8), r) if not set(t) <= {1} and
            not set(t) <= {7}]
    assert problem.space.rank == sum(math.prod(sizes[k] - 1 for k in t) for t in free)
    assert invariant and isinstance(problem.space.span, MarginalSpan)
