"""Grouped person-level releases at the exact joint sensitivity of the stacked groups.

Expected values: brute-force enumeration of every count vector a person may keep over the (group, cell)
pairs (``tests/test_person_level.contributions``: 0..cap in each pair, filtered by the bounds), the
per-group answers stacked; and the visits example worked by hand in the comments.
"""

from __future__ import annotations

import itertools
import json
from fractions import Fraction

import numpy as np
import pytest

import dpopt
from dpopt.cli import main
from dpopt.domain.queries import compile_query
from dpopt.release.batch import release_groups
from dpopt.sensitivity.person import grouped_norms
from test_person_level import UNITS, VISITS_DATA, VISITS_SPEC, brute_norms, contributions, spec_of

ATTRIBUTES = {"a": ["0", "1", "2"], "s": {"min": 0, "max": 3}, "t": {"min": -1, "max": 3}}


def unit_bounds(unit: dict) -> tuple:
    return unit.get("max_rows"), unit.get("max_groups"), unit.get("max_rows_per_group")


@pytest.mark.parametrize("adjacency", ["add_remove", "replace_one"])
@pytest.mark.parametrize("unit", UNITS)
@pytest.mark.parametrize("query, groups", [({"kind": "histogram", "attribute": "a"}, 2), ({"kind": "count"}, 3)])
def test_stacked_tables_match_brute_force(query, groups, unit, adjacency):
    # bounding keys a person's cells by (group, cell): every count vector over the groups × cells pairs with
    # ≤ c in a pair, ≤ g pairs, ≤ k in all is a person's stacked per-group answer (group-major order)
    spec = dpopt.load_spec(spec_of(query, unit, adjacency, ATTRIBUTES))
    query = compile_query(spec)
    stacked = contributions(groups * query.cells, *unit_bounds(unit))
    l1, l2sq, linf, _ = grouped_norms(spec, query, groups)
    assert (l1, l2sq, linf) == brute_norms(stacked, pairs=adjacency != "add_remove")


def group_sums(unit: dict, groups: int, low: int, high: int) -> np.ndarray:
    """Every stacked vector of per-group sums: v rows per group (brute force), each row's value at a or b.
    A norm is convex, so over the box of row values its maximum is at a vertex: i rows at a, the rest at b."""
    out = set()
    for v in contributions(groups, *unit_bounds(unit)).astype(int):
        for split in itertools.product(*(range(n + 1) for n in v)):
            out.add(tuple(i * low + (n - i) * high for i, n in zip(split, v)))
    return np.array(sorted(out), dtype=float)


@pytest.mark.parametrize("adjacency, attribute", [("add_remove", "s"), ("add_remove", "t"), ("replace_one", "s")])
@pytest.mark.parametrize("unit", UNITS)
def test_stacked_sums_match_brute_force(unit, adjacency, attribute):
    spec = dpopt.load_spec(spec_of({"kind": "sum", "attribute": attribute}, unit, adjacency, ATTRIBUTES))
    low, high = ATTRIBUTES[attribute]["min"], ATTRIBUTES[attribute]["max"]
    l1, l2sq, linf, _ = grouped_norms(spec, compile_query(spec), 3)
    assert (l1, l2sq, linf) == brute_norms(group_sums(unit, 3, low, high), pairs=adjacency != "add_remove")


def test_a_replace_sum_over_both_signs_is_not_derived():
    # values in [−1, 3], ≤ 2 rows per group: one person's 2 rows at 3 against the other's 2 at −1 in the same
    # group move it by 2·3 − 2·(−1) = 8, above max(|a|, |b|) × the histogram's replace l∞ (3·2 = 6): the scaled
    # form does not hold, so the joint form is refused and the release composes
    unit = {"max_rows": 4, "max_rows_per_group": 2}
    spec = dpopt.load_spec(spec_of({"kind": "sum", "attribute": "t"}, unit, "replace_one", ATTRIBUTES))
    assert grouped_norms(spec, compile_query(spec), 3) is None
    assert brute_norms(group_sums(unit, 3, -1, 3), pairs=True)[2] == 8


def visits(query: dict, privacy: dict, mechanism: str) -> dict:
    return {**dpopt.load_spec(VISITS_SPEC).model_dump(exclude_none=True), "query": query, "privacy": privacy,
            "mechanism": mechanism}


SUM = {"kind": "sum", "attribute": "duration"}


@pytest.mark.parametrize("query, privacy, mechanism, name, whole", [
    # sums of durations in [0, 120] per clinic, ≤ 3 rows per clinic, ≤ 2 clinics, ≤ 4 rows: per group
    # Δ₂ = 3·120 = 360; stacked: 120·√(3² + 1²), Δ₂² = 144000; ρ = 0.5 · 144000/129600 = 5/9 (composition: 1)
    (SUM, {"zcdp": {"rho": 0.5}}, "gaussian", "rho", Fraction(5, 9)),
    # μ = 1 · √(10/9) (composition: √2)
    (SUM, {"gdp": {"mu": 1.0}}, "gaussian", "mu", Fraction(10, 9)),
    # counts per clinic, Laplace: per group Δ₁ = min(k, c) = 3, stacked Δ₁ = min(k, c·g) = 4: ε = 4/3 (comp.: 2)
    ({"kind": "count"}, {"pure": {"epsilon": 1.0}}, "laplace", "epsilon", Fraction(4, 3)),
    # the same under zCDP with the discrete Gaussian: Δ₂² 9 per group, 10 stacked: ρ = 5/9
    ({"kind": "count"}, {"zcdp": {"rho": 0.5}}, "discrete_gaussian", "rho", Fraction(5, 9)),
])
def test_grouped_release_states_the_joint_guarantee(tmp_path, query, privacy, mechanism, name, whole):
    spec = visits(query, privacy, mechanism)
    release = release_groups(spec, VISITS_DATA, "clinic", seed=3, insecure_seed=True)
    composed = release.certificate["groups"]["composition"]
    if name == "mu":  # μ is recorded as the rounded-up square root of 10/9
        assert Fraction(composed["mu"]) ** 2 >= whole and composed["mu"] == pytest.approx(float(whole) ** 0.5)
    else:
        assert Fraction(composed[name]) >= whole and composed[name] == pytest.approx(float(whole), rel=1e-15)
    assert composed["method"].startswith("joint sensitivity")
    assert main(["verify", str(release_cli(tmp_path, spec) / "certificate.json")]) == 0


def release_cli(tmp_path, spec: dict):
    """``dpopt release`` of ``spec`` on the visits by clinic (seed 3) into ``tmp_path/out``."""
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    out = tmp_path / "out"
    assert main(["release", str(path), "--data", str(VISITS_DATA), "--group-by", "clinic", "--seed", "3",
                 "--insecure-seed", "--out", str(out)]) == 0
    return out


@pytest.mark.parametrize("tamper", [
    lambda g: g["joint"].update(norm_ratio_exact="1/2"),
    lambda g: g["joint"].update(l2_squared_exact="1"),
    lambda g: g["composition"].update(rho=0.5),
    lambda g: g.pop("joint"),
])
def test_verify_rederives_the_joint_block(tmp_path, tamper):
    out = release_cli(tmp_path, visits(SUM, {"zcdp": {"rho": 0.5}}, "gaussian"))
    certificate = json.loads((out / "certificate.json").read_text())
    tamper(certificate["groups"])
    (out / "certificate.json").write_text(json.dumps(certificate))
    assert main(["verify", str(out / "certificate.json")]) != 0


def test_two_grouping_columns_and_correlated_noise_compose():
    # not derived: two grouping columns (a person's cell counts in a group of each), and gaussian_optimal's
    # correlated noise (its guarantee is not a function of one norm): the composition stands
    spec = visits(SUM, {"zcdp": {"rho": 0.5}}, "gaussian")
    two = release_groups(spec, VISITS_DATA, ["clinic", "age_group"], seed=3, insecure_seed=True)
    assert "joint" not in two.certificate["groups"] and two.certificate["groups"]["composition"]["rho"] == 2.0
    table = visits({"kind": "histogram", "attribute": "age_group"}, {"zcdp": {"rho": 0.5}}, "gaussian_optimal")
    one = release_groups(table, VISITS_DATA, "clinic", seed=3, insecure_seed=True)
    assert "joint" not in one.certificate["groups"] and one.certificate["groups"]["composition"]["rho"] == 1.0


@pytest.mark.parametrize("query, mechanism", [(SUM, "gaussian"),
                                              ({"kind": "histogram", "attribute": "age_group"}, "discrete_gaussian")])
def test_dask_engine_releases_what_duckdb_releases(query, mechanism):
    # the same file, seed and bounds: Dask bounds each person's rows with their clinic on the workers, keyed as
    # DuckDB keys them (the clinics are text), so the same rows are kept, the same sums counted and the same
    # noise streams drawn: the releases and the bounding reports are equal (DuckDB is the reference)
    pytest.importorskip("dask.dataframe")
    spec = visits(query, {"zcdp": {"rho": 0.5}}, mechanism)
    duck = release_groups(spec, VISITS_DATA, "clinic", seed=5, insecure_seed=True)
    dask = release_groups(spec, VISITS_DATA, "clinic", seed=5, insecure_seed=True, engine="dask")
    assert {k: v for k, v in dask.bounding.items() if k != "method"} == \
        {k: v for k, v in duck.bounding.items() if k != "method"}
    ours, theirs = dask.level("clinic"), duck.level("clinic")
    assert list(ours.keys) == list(theirs.keys) and ours.records == theirs.records
    np.testing.assert_allclose(ours.values, theirs.values, rtol=1e-12, atol=1e-9)
    assert dask.certificate["groups"] == duck.certificate["groups"]
