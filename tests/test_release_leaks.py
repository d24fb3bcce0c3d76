"""Nothing exact of the data leaves in a release folder (issue 35): every kind of folder, every file read.

Two record files are built so that every exact, data-dependent count is a distinctive number:

* ``table``: 1237 records in region R1 and 1091 in R2 (2328 in all), race and sex cycling row by row (so each
  of the 6 cells of a region holds about 200 records, far from those totals), a state and county per row;
* ``visits``: 1237 persons, person p with 1 + p mod 6 visits (206 · 21 + 1 = 4327 rows), its j-th visit in
  clinic (p + ⌊j/3⌋) mod 5; so contribution bounding (≤ 4 rows, ≤ 2 clinics, ≤ 3 rows per cell) drops rows.

Each kind of release (single table, marginals on Dask, post-processed, grouped on DuckDB and Dask with Parquet
and CSV tables, plan and grouped plan, hierarchy, person-level table, person-level grouped on DuckDB and Dask,
person-level plan, private-key selection) is written with ``dpopt release --out`` and ``--operator-report``
(a file outside the folder). The forbidden numbers are the record counts above (by construction, counted
again here with ``collections.Counter``) and every count of the operator's reports; none is covered by a
certificate (the specs declare no ``data.n``, every adjacency is add/remove or person-level). Every file of
every folder is read (JSON, CSV, Parquet; any other kind fails the test) and none of those numbers may appear,
as a value or inside a text, nor a key of a release document that names an exact count. Only numbers ≥ 100 are forbidden: the
released cells (about 200 records each, noise σ ≤ 5) cannot reach any of them, and smaller numbers (bounds,
levels) appear legitimately.
"""

from __future__ import annotations

import csv
import json
import re
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
from pyarrow import csv as arrow_csv
import pytest
import yaml
from conftest import ROOT

from dpopt.cli import main

RACES, SEXES = ["white", "black", "other"], ["f", "m"]
CLINICS, AGES = ["north", "south", "east", "west", "central"], ["0-17", "18-39", "40-64", "65+"]
REGIONS = {"R1": 1237, "R2": 1091}
PERSONS = 1237
EXACT_KEYS = {"records", "rows", "rows_kept", "rows_dropped", "persons", "persons_truncated", "clamped"}
NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?!\w)")


def _table_rows() -> list[dict]:
    rows = []
    for region, n in REGIONS.items():
        for i in range(n):
            state = "S1" if region == "R1" else "S2"
            rows.append({"region": region, "state": state, "county": f"{state}C{i % 3}", "race": RACES[i % 3],
                         "sex": SEXES[(i // 3) % 2], "income": str(i % 101)})
    return rows


def _visit_rows() -> list[dict]:
    return [{"person_id": f"P{p:04d}", "age_group": AGES[p % 4], "clinic": CLINICS[(p + j // 3) % 5],
             "duration": str((7 * p + 13 * j) % 121)} for p in range(PERSONS) for j in range(1 + p % 6)]


def _write(path: Path, rows: list[dict]) -> Path:
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


TABLE = {"dpopt": 1, "name": "race by sex", "data": {"attributes": {
    "race": RACES, "sex": SEXES, "income": {"min": 0, "max": 100}, "region": list(REGIONS)}},
    "query": {"kind": "contingency_table", "attributes": ["race", "sex"]}, "adjacency": "add_remove",
    "privacy": {"gdp": {"mu": 1.0}}, "mechanism": "gaussian"}
PLAN = {"dpopt": 1, "name": "a plan", "data": TABLE["data"], "adjacency": "add_remove",
        "privacy": {"zcdp": {"rho": 0.5}}, "mechanism": "gaussian",
        "queries": [{"name": "race", "query": {"kind": "histogram", "attribute": "race"}},
                    {"name": "race x sex", "query": {"kind": "contingency_table", "attributes": ["race", "sex"]}}]}
HIERARCHY = {**{k: v for k, v in TABLE.items() if k != "mechanism"},
             "data": {"attributes": {"race": RACES, "sex": SEXES}}, "privacy": {"zcdp": {"rho": 1.0}},
             "mechanism": "gaussian", "postprocess": {"nonnegative": True, "integer": True, "consistent": True},
             "geography": {"levels": ["state", "county"], "units": {
                 "state": ["S1", "S2", "S3"],
                 "county": {"S1C0": "S1", "S1C1": "S1", "S1C2": "S1", "S2C0": "S2", "S2C1": "S2", "S2C2": "S2",
                            "S3C0": "S3", "S3C1": "S3"}}}}
"""The data hold 2 states and 6 counties; the geography declares 3 and 8: the release publishes the declared ones."""
VISITS = yaml.safe_load((ROOT / "specs" / "visits_person_level.yaml").read_text())
VISITS_PLAN = {"dpopt": 1, "name": "visits plan", "data": VISITS["data"], "adjacency": "add_remove",
               "privacy": {"zcdp": {"rho": 0.5}}, "mechanism": "gaussian",
               "queries": [{"name": "clinics", "query": {"kind": "histogram", "attribute": "clinic"}},
                           {"name": "mean", "query": {"kind": "mean", "attribute": "duration"}}]}


def _releases(tmp: Path) -> list[tuple[str, dict | Path, str, list[str]]]:
    """(name, spec, data file, extra options) of every kind of release folder."""
    table, visits = _write(tmp / "table.csv", _table_rows()), _write(tmp / "visits.csv", _visit_rows())
    parquet = tmp / "table.parquet"
    pq.write_table(arrow_csv.read_csv(table), parquet)
    marginals = {**TABLE, "query": {"kind": "marginals", "attributes": [["race"], ["sex"]]}}
    post = {**TABLE, "postprocess": {"nonnegative": True, "integer": True, "consistent": True}}
    return [
        ("single", TABLE, table, []),
        ("postprocessed", post, table, ["--error-draws", "0"]),
        ("marginals-dask", marginals, parquet, ["--engine", "dask"]),
        ("grouped", TABLE, parquet, ["--group-by", "region", "--format", "csv"]),
        ("grouped-dask", TABLE, table, ["--group-by", "region", "--engine", "dask"]),
        ("plan", PLAN, table, []),
        ("plan-grouped", PLAN, table, ["--group-by", "region"]),
        ("hierarchy", HIERARCHY, table, ["--error-draws", "0"]),
        ("person", VISITS, visits, []),
        ("person-grouped", ROOT / "specs" / "visits_sums_by_clinic.yaml", visits, ["--group-by", "clinic"]),
        ("person-grouped-dask", ROOT / "specs" / "visits_sums_by_clinic.yaml", visits,
         ["--group-by", "clinic", "--engine", "dask"]),
        ("person-plan", VISITS_PLAN, visits, []),
        ("selection", ROOT / "specs" / "visits_private_clinics.yaml", visits, []),
    ]


def _numbers(value, found: set[float], keys: set[str]) -> None:
    """Every number in ``value`` (a JSON or Parquet value), including the numbers written inside its texts, and
    every key of its mappings that holds no list (a count, or counts per attribute; ``cells.rows`` is a table)."""
    if isinstance(value, dict):
        keys.update(str(k) for k, v in value.items() if not isinstance(v, list))
        for key, item in value.items():
            _numbers(str(key), found, keys)
            _numbers(item, found, keys)
    elif isinstance(value, list):
        for item in value:
            _numbers(item, found, keys)
    elif isinstance(value, bool) or value is None:
        return
    elif isinstance(value, (int, float)):
        found.add(float(value))
    else:
        found.update(float(m) for m in NUMBER.findall(str(value)))


def published(folder: Path) -> tuple[set[float], set[str]]:
    """The numbers of every file of a release folder and the JSON keys of its documents (not its certificates);
    a file of another kind fails."""
    found, keys = set(), set()
    for path in sorted(folder.iterdir()):
        if path.suffix == ".json":  # a certificate's keys are the spec's (its sensitivity's rows: max_rows)
            _numbers(json.loads(path.read_text()), found, set() if path.name.startswith("certificate") else keys)
        elif path.suffix == ".parquet":
            table = pq.read_table(path)
            _numbers(table.column_names, found, keys)
            _numbers(table.to_pylist(), found, keys)
        elif path.suffix in (".csv", ".md", ".html"):
            _numbers(path.read_text(), found, keys)
        else:
            pytest.fail(f"{path.name}: a file of a kind this test does not read")
    return found, keys


def _counts(report) -> set[int]:
    """Every exact count of an operator's report: the values under its count keys (:data:`EXACT_KEYS`)."""
    if isinstance(report, list):
        return set().union(*map(_counts, report))
    if not isinstance(report, dict):
        return set()
    found = set()
    for key, value in report.items():
        if key in EXACT_KEYS:
            found |= {value} if isinstance(value, int) else set(value.values()) if isinstance(value, dict) else set()
        found |= _counts(value)
    return found


def test_no_release_folder_publishes_an_exact_count(tmp_path, capsys):
    table, visits = _table_rows(), _visit_rows()
    per_clinic = Counter(r["clinic"] for r in visits)
    exact = {len(table), *REGIONS.values(), PERSONS, len(visits), *per_clinic.values()}
    assert len(table) == 2328 and len(visits) == 206 * 21 + 1 == 4327
    for name, spec, data, options in _releases(tmp_path):
        if isinstance(spec, dict):
            path = tmp_path / f"{name}.json"
            path.write_text(json.dumps(spec))
            spec = path
        out, operator = tmp_path / name, tmp_path / f"{name}.operator.json"
        code = main(["release", str(spec), "--data", str(data), "--seed", "3", "--insecure-seed", "--out", str(out),
                     "--operator-report", str(operator), *options])
        assert code == 0, (name, capsys.readouterr().err)
        report = json.loads(operator.read_text())
        assert report["not_private"].startswith("NOT PRIVATE")
        forbidden = {n for n in exact | _counts(report) if n >= 100}
        numbers, keys = published(out)
        assert not forbidden & {int(x) for x in numbers if x == int(x)}, (name, sorted(forbidden & numbers))
        assert not EXACT_KEYS & keys, (name, EXACT_KEYS & keys)
        if name.startswith("person") or name == "selection":  # the bounding counts reach the operator
            bounding = report["bounding"] if isinstance(report["bounding"], list) else [report["bounding"]]
            assert all(b["persons"] == PERSONS and b["rows"] == len(visits) > b["rows_kept"] for b in bounding)
        elif name == "single":
            assert report["records"] == len(table)
        elif name == "hierarchy":  # the declared units, every one with a table, none counted from the data
            document = json.loads((out / "release.json").read_text())
            assert [lv["units"] for lv in document["hierarchy"]["levels"]] == [1, 3, 8]
            assert {n: sorted(t) for n, t in document["tables"].items() if n != "nation"} == {
                "state": ["S1", "S2", "S3"], "county": sorted(HIERARCHY["geography"]["units"]["county"])}


# ------------------------------------------------------------------ refused before anything is read or published
@pytest.mark.parametrize("options, words", [
    (["--group-by", "person_id"], "--group-by: person_id is the privacy unit's id (data.privacy_unit.id)"),
    (["--group-by", "duration_band"], "groups of duration_band are not declared public: list them in the spec "
                                      "(data.attributes.duration_band: [...]) or give a public list (--groups FILE)"),
])
def test_grouping_by_the_person_or_by_undeclared_groups_is_refused_in_one_line(tmp_path, capsys, options, words):
    data = _write(tmp_path / "visits.csv", [r | {"duration_band": "short"} for r in _visit_rows()[:50]])
    out = tmp_path / "out"
    code = main(["release", str(ROOT / "specs" / "visits_sums_by_clinic.yaml"), "--data", str(data),
                 "--out", str(out), *options])
    err = capsys.readouterr().err
    assert code == 2 and words in err and err.count("\n") == 1 and not out.exists()


def test_the_data_file_is_no_public_list_of_groups(tmp_path, capsys):
    data = _write(tmp_path / "table.csv", _table_rows()[:30])
    spec = tmp_path / "table.json"
    spec.write_text(json.dumps(TABLE))
    code = main(["release", str(spec), "--data", str(data), "--group-by", "county", "--groups", str(data)])
    err = capsys.readouterr().err
    assert code == 2 and "--groups: is the data file itself" in err and err.count("\n") == 1


@pytest.mark.parametrize("units, words", [
    (None, "geography.units: the units of each level are not declared"),
    ({"state": ["S1"], "county": {"S1C0": "S1", "S1C1": "S1", "S1C2": "S1"}},
     "is not a declared unit of the geography (declared in the spec"),
    ({"state": ["S1", "S2"], "county": {"S1C0": "S1", "S1C1": "S1", "S1C2": "S2", "S2C0": "S2", "S2C1": "S2",
                                        "S2C2": "S2"}},
     "a record in county 'S1C2' has state 'S1', which is not its declared parent"),
])
def test_hierarchy_units_come_from_the_declared_geography(tmp_path, capsys, units, words):
    """No declared units, a record in an undeclared unit, a record against its declared parent: one line each,
    nothing written (the file's first rows are in S1 and S2, counties S1C0–S1C2 and S2C0–S2C2)."""
    data = _write(tmp_path / "table.csv", _table_rows()[:12] + _table_rows()[-12:])
    geography = {"levels": ["state", "county"], **({"units": units} if units else {})}
    spec = tmp_path / "hierarchy.json"
    spec.write_text(json.dumps({**HIERARCHY, "geography": geography}))
    out = tmp_path / "out"
    code = main(["release", str(spec), "--data", str(data), "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and words in err and err.count("\n") == 1 and not out.exists(), err


def test_hierarchy_units_from_a_public_file(tmp_path, capsys):
    """The geography as a public file (a column per level): 2 states, 4 counties declared, S2C3 without records;
    the data file itself is refused as that file."""
    data = _write(tmp_path / "table.csv", _table_rows()[:12] + _table_rows()[-12:])
    public = _write(tmp_path / "geography.csv", [{"state": s, "county": c} for s, c in
                                                 [("S1", "S1C0"), ("S1", "S1C1"), ("S1", "S1C2"), ("S2", "S2C0"),
                                                  ("S2", "S2C1"), ("S2", "S2C2"), ("S2", "S2C3")]])
    spec = tmp_path / "hierarchy.json"
    spec.write_text(json.dumps({**HIERARCHY, "geography": {"levels": ["state", "county"]}}))
    assert main(["release", str(spec), "--data", str(data), "--groups", str(data)]) == 2
    assert "--groups: is the data file itself" in capsys.readouterr().err
    out = tmp_path / "out"
    assert main(["release", str(spec), "--data", str(data), "--groups", str(public), "--seed", "1",
                 "--insecure-seed", "--out", str(out), "--error-draws", "0"]) == 0
    document = json.loads((out / "release.json").read_text())
    assert [lv["units"] for lv in document["hierarchy"]["levels"]] == [1, 2, 7]
    assert "S2C3" in document["tables"]["county"]
    assert document["hierarchy"]["levels"][2]["units_from"] == "public file (geography.csv)"


def test_an_operator_report_inside_the_published_folder_is_refused(tmp_path, capsys):
    out = tmp_path / "out"
    code = main(["release", str(ROOT / "specs" / "count_add_remove.yaml"), "--data",
                 str(ROOT / "specs" / "data" / "survey.csv"), "--out", str(out), "--operator-report",
                 str(out / "counts.json")])
    err = capsys.readouterr().err
    assert code == 2 and "--operator-report" in err and err.count("\n") == 1 and not out.exists()


@pytest.mark.parametrize("person, problem", [
    (" P0005", "person id ' P0005' begins or ends with whitespace"),
    ("P0005\t", "person id 'P0005\\t' begins or ends with whitespace"),
    ("   ", "blank person id"),
    ("", "missing person id"),
])
def test_person_ids_are_compared_exactly_on_every_path(tmp_path, person, problem):
    """An id with surrounding whitespace, a blank id and an empty one are refused, naming the row (CSV line 4:
    the header, then rows 0 and 1), by DuckDB, by Dask and for Python rows alike (never normalised)."""
    from dpopt.domain.queries import compile_query
    from dpopt.domain.records import validate_records
    from dpopt.errors import DataError
    from dpopt.spec.load import load_spec
    from dpopt.release import sources
    from dpopt.release.bounding import bound_contributions
    from dpopt.release.distributed_bounding import bound_contributions_dask
    from dpopt.rng import random_source

    rows = _visit_rows()[:40]
    rows[2] = rows[2] | {"person_id": person}
    path = _write(tmp_path / "visits.csv", rows)
    spec = load_spec(VISITS)
    query, source = compile_query(spec), sources.open_source(path)
    paths = {"duckdb": lambda: bound_contributions(sources.connect(), source, spec, query, random_source(1, True)),
             "dask": lambda: bound_contributions_dask(source, spec, query, random_source(1, True)),
             "python": lambda: validate_records(list(csv.DictReader(path.open(newline=""))), spec, str(path))}
    for name, run in paths.items():
        with pytest.raises(DataError) as caught:
            run()
        assert f"row 4, column person_id: {problem}" in str(caught.value), name
