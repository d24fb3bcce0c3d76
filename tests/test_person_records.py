"""Person-level privacy, part two: marginals with a per-cell cap below the total, linear queries,
post-processing with a privacy unit, Dask bounding against DuckDB's.

Expected values come from the brute force of ``tests/test_person_level.py`` (every per-cell count vector
a person may keep, listed with ``itertools.product``, the query applied with its dense matrix), from
closed forms worked by hand in the comments, and from the DuckDB engine for the Dask engine's kept rows.
"""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

import dpopt
from dpopt.cli import main
from dpopt.domain.queries import compile_query
from dpopt.errors import DataError, SpecError, UnsupportedSpecError
from dpopt.release import sources
from dpopt.release.bounding import bound_contributions
from dpopt.rng import random_source
from dpopt.sensitivity.enumerate import enumerate_persons
from test_person_level import UNITS, VISITS_DATA, VISITS_SPEC, brute_norms, brute_space, spec_of

SMALL = {"a": ["0", "1"], "b": ["x", "y", "z"], "c": ["only"]}
DERIVED_MARGINALS = [  # (tables, unit, adjacency) whose closed form is attained (see person_structure)
    ([["a"], ["b"], ["c"], ["a", "b"]], {"max_rows": 3, "max_rows_per_group": 1}, "add_remove"),
    ([["a"], ["b"], ["c"], ["a", "b"]], {"max_rows": 5, "max_rows_per_group": 2}, "add_remove"),
    ([["a"], ["b"]], {"max_rows": 3, "max_rows_per_group": 2, "max_groups": 2}, "add_remove"),
    ([["a"], ["b"]], {"max_rows_per_group": 1, "max_groups": 3}, "add_remove"),
    ([["b"], ["a", "b"]], {"max_rows": 4, "max_rows_per_group": 2}, "add_remove"),
    ([["b"], ["a", "b"]], {"max_rows": 4, "max_rows_per_group": 2}, "replace_one"),
    ([["b"], ["a", "b"]], {"max_rows": 3, "max_rows_per_group": 2, "max_groups": 2}, "replace_one"),
    # no attribute of the fewest tables has ⌈R/t⌉ levels: found by exhaustive search of the placements
    ([["b"], ["a", "b"]], {"max_rows": 3, "max_rows_per_group": 1}, "add_remove"),
    ([["b"], ["a", "b"]], {"max_rows": 5, "max_rows_per_group": 2}, "add_remove"),
    ([["b"], ["a", "b"]], {"max_rows_per_group": 1, "max_groups": 3}, "add_remove"),
]


@pytest.mark.parametrize("tables, unit, adjacency", DERIVED_MARGINALS)
def test_marginals_below_the_total_match_brute_force(tables, unit, adjacency):
    spec = spec_of({"kind": "marginals", "attributes": tables}, unit, adjacency, SMALL)
    space = dpopt.derive(dpopt.load_spec(spec))
    expected = brute_space(spec)
    assert (space.l1, space.l2_squared, space.linf) == expected
    assert brute_norms(space.extreme_vectors(), pairs=False) == expected  # the stated extremes attain them


def test_marginals_below_the_total_by_hand():
    # tables {a}, {b}; ≤ 4 rows, ≤ 2 per cell: two cells of 2 rows differing in b only. Table {a} sees 4 rows
    # in one cell (16), table {b} 2 and 2 (8): l2² = 24, l1 = 2·4 = 8, l∞ = 4 (a's cell gathers b's 3 cells)
    space = dpopt.derive(dpopt.load_spec(spec_of({"kind": "marginals", "attributes": [["a"], ["b"]]},
                                                 {"max_rows": 4, "max_rows_per_group": 2}, "add_remove", SMALL)))
    assert (space.l1, space.l2_squared, space.linf) == (8, 24, 4)


BINARY = {f"x{i}": ["0", "1"] for i in range(10)}


@pytest.mark.parametrize("query, attributes, adjacency, words", [
    # ten binary attributes, 3 cells to place: 4 growth strings each, 4¹⁰ > 200,000 placements to search
    ({"kind": "marginals", "all_of_size": 1}, BINARY, "add_remove", "too many to search"),
    ({"kind": "marginals", "attributes": [["a"], ["b"]]}, SMALL, "replace_one", "placed apart"),
])
def test_marginals_not_derived_are_refused_in_one_line(query, attributes, adjacency, words):
    spec = dpopt.load_spec(spec_of(query, {"max_rows": 3, "max_rows_per_group": 1}, adjacency, attributes))
    with pytest.raises(UnsupportedSpecError, match=words) as info:
        dpopt.derive(spec)
    assert info.value.field == "data.privacy_unit.max_rows_per_group" and "\n" not in str(info.value)


@pytest.mark.parametrize("rows, per_cell", [(3, 1), (5, 2), (4, 3)])
def test_closed_form_equals_the_exhaustive_search(rows, per_cell):
    # all 2-way marginals of attributes with 3, 3, 2 and 4 levels (too many persons to enumerate): where the
    # closed form is attained, the search over every placement of the cells (an independent computation of
    # the same maximum) finds the same l2²
    from dpopt.sensitivity.person_structure import MarginalStructure

    blocks = tuple(itertools.combinations(range(4), 2))
    structure = MarginalStructure((3, 3, 2, 4), blocks)
    assert structure.best_add(rows, per_cell) is not None
    closed = structure.moving_bound(rows, per_cell) + structure.single * rows**2
    assert structure.searched(rows, per_cell)[0] == closed


@pytest.mark.parametrize("adjacency", ["add_remove", "replace_one"])
@pytest.mark.parametrize("unit", UNITS)
def test_linear_query_matches_brute_force(unit, adjacency):
    spec = spec_of({"kind": "linear", "attribute": "a", "matrix": [[1, -2, 3], [0, 1, 1]]}, unit, adjacency)
    space = dpopt.derive(dpopt.load_spec(spec))
    assert (space.l1, space.l2_squared, space.linf) == brute_space(spec)


def test_linear_query_by_hand():
    # A = [1 −2 3]: ≤ 4 rows in all, any per level: all 4 rows on level 2 gives 12, on level 1 gives −8;
    # add/remove l1 = l2 = l∞ = 12; replace: 12 − (−8) = 20
    for adjacency, expected in (("add_remove", 12), ("replace_one", 20)):
        space = dpopt.derive(dpopt.load_spec(spec_of({"kind": "linear", "attribute": "a", "matrix": [[1, -2, 3]]},
                                                     {"max_rows": 4}, adjacency)))
        assert (space.l1, space.l2_squared, space.linf) == (expected, expected**2, expected)


# ------------------------------------------------------------------------ means
MEAN = {"kind": "mean", "attribute": "s"}  # s in [−1, 3]: midpoint m = 1, half-width h = 2


@pytest.mark.parametrize("adjacency, expected", [
    # R = min(k, c) = 3. add/remove: vertices ±3(±2, 1): l1 = 3·3 = 9, l2² = 9·(4 + 1) = 45, l∞ = 3·2 = 6.
    # replace: also 3·(±4, 0) (a person's 3 rows at 3 against another's 3 at −1): l1 = 12, l2² = 144, l∞ = 12
    ("add_remove", (9, 45, 6)), ("replace_one", (12, 144, 12))])
def test_mean_pair_sensitivity_by_hand_and_by_enumeration(adjacency, expected):
    spec = dpopt.load_spec(spec_of(MEAN, {"max_rows": 5, "max_rows_per_group": 3}, adjacency))
    space = dpopt.derive(spec)
    assert (space.l1, space.l2_squared, space.linf) == expected and space.dimension == 2
    brute = enumerate_persons(spec, compile_query(spec))  # every person of ≤ 3 rows on the grid {−1, 0, 1, 3}
    assert (brute.l1, brute.l2_squared, brute.linf) == expected


def test_mean_design_splits_the_budget_equally(tmp_path):
    # the plain l2 utility becomes weights [1, h²] = [1, 3600] (h = 60 for durations in [0, 120]): gaussian_optimal
    # then takes the split that minimises the mean's worst-case first-order variance, half of ρ = 0.5 each, so
    # with R = 4 rows σ_S² = R²h²/ρ = 16·3600/0.5 = 115200 and σ_n² = R²/ρ = 32 (zCDP of a Gaussian: Δ²/(2σ²))
    base = dpopt.load_spec(VISITS_SPEC).model_dump(exclude_none=True)
    spec = {**base, "query": {"kind": "mean", "attribute": "duration"}, "mechanism": "gaussian_optimal",
            "data": {**base["data"], "privacy_unit": {"id": "person_id", "max_rows": 4}}}
    loaded = dpopt.load_spec(spec)
    assert loaded.utility.weights == [1.0, 3600.0]
    solution = dpopt.solve(loaded)
    covariance = np.array(solution.mechanism.parameters["covariance"])
    assert covariance == pytest.approx(np.diag([115200.0, 32.0]), rel=1e-6)


def test_mean_release_is_the_pair_and_its_ratio(tmp_path, capsys):
    base = dpopt.load_spec(VISITS_SPEC).model_dump(exclude_none=True)
    spec = {**base, "query": {"kind": "mean", "attribute": "duration"},
            "data": {**base["data"], "privacy_unit": {"id": "person_id", "max_rows": 4}}}
    path = tmp_path / "mean.yaml"
    path.write_text(json.dumps(spec))
    assert main(["release", str(path), "--data", str(VISITS_DATA), "--seed", "2", "--insecure-seed"]) == 0
    document = json.loads(capsys.readouterr().out)
    pair = document["release"]
    assert set(pair) == {"centered_sum", "count"}
    # the post-processed mean: midpoint 60 + S/n, by hand from the released pair
    assert document["mean"]["unclipped"] == pytest.approx(60 + pair["centered_sum"] / pair["count"], rel=1e-12)
    # the true pair on the kept rows, recounted with the csv module's rows the bounding kept
    loaded = dpopt.load_spec(spec)
    con, source = sources.connect(), sources.open_source(VISITS_DATA)
    bounded, _ = bound_contributions(con, source, loaded, compile_query(loaded), random_source(2, True))
    kept = [float(x) for (x,) in con.execute(f"SELECT duration FROM {bounded.sql}").fetchall()]
    value, _ = sources.answer(con, bounded, loaded)
    assert value.tolist() == pytest.approx([sum(x - 60 for x in kept), len(kept)], rel=1e-12)


# -------------------------------------------------------------- post-processing
def test_postprocessing_with_a_privacy_unit(tmp_path):
    spec = dpopt.load_spec(VISITS_SPEC).model_dump(exclude_none=True)
    spec["postprocess"] = {"nonnegative": True, "integer": True, "consistent": True}
    path = tmp_path / "pp.yaml"
    path.write_text(json.dumps(spec))
    assert main(["release", str(path), "--data", str(VISITS_DATA), "--seed", "4", "--insecure-seed",
                 "--out", str(tmp_path / "out")]) == 0
    document = json.loads((tmp_path / "out" / "release.json").read_text())
    values = document["postprocess"]["values"]
    assert all(isinstance(v, int) and v >= 0 for v in values.values()) and "bounding" in document
    assert main(["verify", str(tmp_path / "out" / "certificate.json")]) == 0


@pytest.mark.parametrize("change, words", [
    ({"invariants": [{"kind": "total"}]}, "one-record moves"),
    ({"geography": {"levels": ["clinic"]}}, "several units"),
])
def test_remaining_refusals_say_why(change, words):
    spec = {**spec_of({"kind": "count"}, {"max_rows": 2}), **change}
    with pytest.raises(SpecError, match=words):
        dpopt.load_spec(spec)


# ----------------------------------------------------------------- Dask bounding
@pytest.mark.parametrize("unit", [{"max_rows": 4, "max_groups": 2, "max_rows_per_group": 3}, {"max_rows_per_group": 1},
                                  {"max_rows": 2, "max_groups": 1}, {"max_rows": 3}])
@pytest.mark.parametrize("query", [{"kind": "contingency_table", "attributes": ["age_group", "clinic"]},
                                   {"kind": "count"}])
def test_dask_keeps_the_rows_duckdb_keeps(unit, query):
    # the same file in 5 partitions and the same secret: the kept rows (with their file positions) are DuckDB's
    pd = pytest.importorskip("pandas")
    dd = pytest.importorskip("dask.dataframe")
    from dpopt.release.bounding import BoundedSource, bounding_sql
    from dpopt.release.distributed_bounding import bound_records_dask

    base = dpopt.load_spec(VISITS_SPEC).model_dump(exclude_none=True)
    spec = dpopt.load_spec({**base, "query": query,
                            "data": {**base["data"], "privacy_unit": {"id": "person_id", **unit}}})
    secret = "ab" * 32
    con, source = sources.connect(), sources.open_source(VISITS_DATA)
    con.execute(f"CREATE TEMP VIEW numbered AS SELECT *, row_number() OVER () AS position FROM {source.sql}")
    numbered = BoundedSource(source.path, source.format, "numbered")
    duck = con.execute(f"SELECT position FROM ({bounding_sql(numbered, spec, compile_query(spec), secret)})").fetchall()
    frame = pd.read_csv(VISITS_DATA, dtype=str, keep_default_na=False)
    frame["position"] = (np.arange(len(frame)) + 1).astype(str)
    kept = bound_records_dask(dd.from_pandas(frame, npartitions=5), spec, compile_query(spec), secret).compute()
    assert sorted(int(p) for (p,) in duck) == sorted(kept["position"].astype(int))


def test_dask_report_is_duckdbs_and_a_missing_id_is_one_line(tmp_path):
    pytest.importorskip("dask.dataframe")
    from dpopt.release.distributed_bounding import bound_contributions_dask

    spec = dpopt.load_spec(VISITS_SPEC)
    query = compile_query(spec)
    con, source = sources.connect(), sources.open_source(VISITS_DATA)
    _, duck = bound_contributions(con, source, spec, query, random_source(7, True))
    kept, report = bound_contributions_dask(source, spec, query, random_source(7, True))
    assert {k: v for k, v in report.items() if k != "method"} == {k: v for k, v in duck.items() if k != "method"}
    assert len(kept.compute()) == duck["rows_kept"]
    lines = VISITS_DATA.read_text().splitlines()
    lines[5] = "," + lines[5].split(",", 1)[1]  # line 6 of the file: its person id emptied
    data = tmp_path / "noid.csv"
    data.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError, match="row 6, column person_id: missing person id"):
        bound_contributions_dask(sources.open_source(data), spec, query, random_source(7, True))
    lines = VISITS_DATA.read_text().splitlines()
    lines[3] = lines[3].replace("north", "nowhere").replace("south", "nowhere").replace("east", "nowhere") \
        .replace("west", "nowhere").replace("central", "nowhere")  # line 4: a clinic that is not a level
    data.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError, match="column clinic: 'nowhere' is not a level"):
        bound_contributions_dask(sources.open_source(data), spec, query, random_source(7, True))


# ------------------------------------------------------------------------ plans
@pytest.mark.slow  # ~38 s; test_a_plans_queries_see_the_bounds_of_one_bounding keeps a plan's bounding in the default run
def test_a_plan_is_bounded_once_before_every_query(tmp_path, capsys):
    from dpopt.plan.release import plan_answers
    from dpopt.plan.solve import solve_plan
    from dpopt.plan.spec import load_plan

    base = dpopt.load_spec(VISITS_SPEC).model_dump(exclude_none=True)
    plan = {"dpopt": 1, "name": "visits plan", "adjacency": "add_remove", "privacy": {"zcdp": {"rho": 0.5}},
            "data": {**base["data"], "privacy_unit": {"id": "person_id", "max_rows": 4}},
            "queries": [{"name": "clinics", "query": {"kind": "histogram", "attribute": "clinic"}},
                        {"name": "mean", "query": {"kind": "mean", "attribute": "duration"}}]}
    path = tmp_path / "plan.yaml"
    path.write_text(json.dumps(plan))
    out = tmp_path / "out"
    operator = tmp_path / "operator.json"
    assert main(["release", str(path), "--data", str(VISITS_DATA), "--seed", "6", "--insecure-seed",
                 "--out", str(out), "--operator-report", str(operator)]) == 0
    document = json.loads((out / "release.json").read_text())
    report = json.loads(operator.read_text())  # the exact counts: the operator's, not in the document (issue 35)
    assert "records" not in document and "rows_kept" not in document["bounding"]
    assert report["records"] == report["bounding"]["rows_kept"] <= report["bounding"]["rows"]
    assert "mean" in document["tables"][1]
    assert main(["verify", str(out / "certificate.json")]) == 0
    # the true answers are those of the kept rows, recounted here from the bounded table
    solution = solve_plan(load_plan(plan))
    con, source = sources.connect(), sources.open_source(VISITS_DATA)
    first = solution.designs[0].problem
    bounded, _ = bound_contributions(con, source, first.spec, first.query, random_source(6, True))
    kept = con.execute(f"SELECT clinic, CAST(duration AS DOUBLE) FROM {bounded.sql}").fetchall()
    answers, records = plan_answers(solution, VISITS_DATA, (con, bounded))
    clinics = dpopt.load_spec(VISITS_SPEC).data.attributes["clinic"]
    assert answers[0].tolist() == [sum(c == name for c, _ in kept) for name in clinics]
    assert answers[1].tolist() == pytest.approx([sum(d - 60 for _, d in kept), len(kept)], rel=1e-12)
    capsys.readouterr()
    assert main(["release", str(path), "--data", str(VISITS_DATA), "--group-by", "clinic"]) == 2
    assert "privacy_unit" in capsys.readouterr().err


def test_a_plans_queries_see_the_bounds_of_one_bounding():
    # the visits plan bounds each person once over the 20 (age group, clinic) cells: ≤ 3 rows per cell, ≤ 2 cells,
    # ≤ 4 rows. Brute force: every such person (supports of ≤ 2 of the 20 cells, 1..3 rows each, ≤ 4 in all),
    # projected on each query; by hand, a clinic can gather 3 + 1 = 4 of a person's rows from two age groups
    from dpopt.plan.solve import solve_plan
    from dpopt.plan.spec import load_plan

    base = dpopt.load_spec(VISITS_SPEC).model_dump(exclude_none=True)
    plan = {"dpopt": 1, "name": "visits plan", "adjacency": "add_remove", "privacy": {"zcdp": {"rho": 0.5}},
            "data": base["data"], "mechanism": "gaussian",  # the spaces are checked, not auto's choice
            "queries": [{"name": "clinics", "query": {"kind": "histogram", "attribute": "clinic"}},
                        {"name": "table", "query": {"kind": "contingency_table", "attributes": ["age_group", "clinic"]}},
                        {"name": "total", "query": {"kind": "count"}}]}
    persons = [np.zeros(20)]
    for support in (1, 2):
        for cells in itertools.combinations(range(20), support):
            for rows in itertools.product(range(1, 4), repeat=support):
                if sum(rows) <= 4:
                    v = np.zeros(20)
                    v[list(cells)] = rows
                    persons.append(v)
    persons = np.array(persons)
    by_clinic = np.zeros((5, 20))
    by_clinic[np.arange(20) % 5, np.arange(20)] = 1  # cells row-major: age group slowest, clinic fastest
    projections = {"clinics": persons @ by_clinic.T, "table": persons, "total": persons.sum(axis=1, keepdims=True)}
    solution = solve_plan(load_plan(plan))
    for design in solution.designs:
        space = design.problem.space
        assert (space.l1, space.l2_squared, space.linf) == brute_norms(projections[design.name], pairs=False)
    assert solution.designs[0].problem.space.l2_squared == 16


# --------------------------------------------------------------------- --group-by
@pytest.mark.parametrize("adjacency, mechanism, changed, whole",
                         [("add_remove", "auto", 2, 1.0), ("replace_one", "discrete_gaussian", 4, 0.5)])
def test_a_grouped_release_composes_over_the_groups_a_person_keeps(tmp_path, adjacency, mechanism, changed, whole):
    # bounding counts a person's cells with their clinic, so a person keeps rows in ≤ min(g, k) = min(2, 4) = 2
    # clinics (4 under replace: the two persons'); the composition is 2-fold (4-fold) of the per-group ρ = 0.5
    # (zCDP composition adds ρ: Bun & Steinke 2016, Lemma 2.3). Add/remove: the table's noise is correlated
    # (gaussian_optimal), no joint form, so ρ = 1. Replace: isotropic discrete Gaussian, and the table already
    # holds the clinic: the stacked tables are the table padded with cells no person reaches, same l2² = 20,
    # so the joint guarantee is the per-group ρ = 0.5 (parallel), below the composed 2.0. Replace names the family
    # auto chooses there (discrete_gaussian, l2 400 on 20 cells) instead of designing every family (~20 s: the
    # generalized Gaussian ties it at p = 2 and the staircase's floor is below it, so neither is pruned)
    from dpopt.release.batch import release_groups

    spec = {**dpopt.load_spec(VISITS_SPEC).model_dump(exclude_none=True), "adjacency": adjacency,
            "mechanism": mechanism}
    release = release_groups(spec, VISITS_DATA, "clinic", seed=8, insecure_seed=True)
    block = release.certificate["groups"]
    assert block["groups_changed"] == changed and block["composition"]["rho"] == pytest.approx(whole)
    loaded = dpopt.load_spec(spec)
    con, source = sources.connect(), sources.open_source(VISITS_DATA)
    bounded, report = bound_contributions(con, source, loaded, compile_query(loaded), random_source(8, True),
                                          groups=["clinic"])
    assert report == release.bounding and release.level("clinic").records == report["rows_kept"]
    most = con.execute(f"SELECT max(n) FROM (SELECT person_id, count(DISTINCT clinic) AS n FROM {bounded.sql} "
                       "GROUP BY ALL)").fetchone()[0]
    assert most <= 2
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    out = tmp_path / "out"
    assert main(["release", str(path), "--data", str(VISITS_DATA), "--group-by", "clinic", "--seed", "8",
                 "--insecure-seed", "--out", str(out)]) == 0
    assert main(["verify", str(out / "certificate.json")]) == 0


@pytest.mark.parametrize("unit, options, words", [
    ({"max_rows_per_group": 2}, [], "max_rows or max_groups"),
])
def test_grouped_releases_refused_with_a_privacy_unit(unit, options, words, tmp_path, capsys):
    spec = dpopt.load_spec(VISITS_SPEC).model_dump(exclude_none=True)
    spec["data"]["privacy_unit"] = {"id": "person_id", **unit}
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    assert main(["release", str(path), "--data", str(VISITS_DATA), "--group-by", "clinic", *options]) == 2
    err = capsys.readouterr().err
    assert words in err and len(err.strip().splitlines()) == 1
