"""CSV and Parquet read through DuckDB: answers counted in SQL, domain checked in SQL.

Expected answers are counted here record by record with ``collections.Counter`` (and the
query's own record-level ``evaluate``), never by the SQL under test.
"""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest
from conftest import ROOT, make_spec
from release_data import RACES, SEXES, make_records, write_csv, write_parquet

import dpopt
from dpopt.cli import main
from dpopt.domain.queries import compile_query
from dpopt.errors import DataError, UnsupportedSpecError
from dpopt.release import sources
from dpopt.release.sources import read_records


@pytest.fixture(scope="module")
def records():
    return make_records()


@pytest.fixture(scope="module", params=["csv", "parquet"])
def data_file(request, records, tmp_path_factory):
    folder = tmp_path_factory.mktemp("data")
    if request.param == "csv":
        return write_csv(folder / "records.csv", records)
    return write_parquet(folder / "records.parquet", records)


QUERIES = [
    {"kind": "count"},
    {"kind": "histogram", "attribute": "race"},
    {"kind": "contingency_table", "attributes": ["race", "sex"]},
    {"kind": "marginals", "attributes": [["sex"], ["race", "sex"]]},
    {"kind": "linear", "attribute": "race", "matrix": [[1, 1, 0], [0, 0.5, 1]]},
    {"kind": "sum", "attribute": "income"},
]


@pytest.mark.parametrize("query", QUERIES, ids=[q["kind"] for q in QUERIES])
def test_sql_answer_equals_the_record_by_record_answer(query, data_file, records):
    spec = dpopt.load_spec(make_spec(query=query, adjacency={"kind": "add_remove"}))
    value, n = sources.answer(sources.connect(), sources.open_source(data_file), spec)
    expected = compile_query(spec).evaluate([{**r, "income": float(r["income"])} for r in records])
    assert n == len(records)
    assert value == pytest.approx(expected, rel=1e-12)


def test_grouped_counts_equal_counter_counts(data_file, records):
    spec = dpopt.load_spec(make_spec(adjacency={"kind": "add_remove"}))
    answers = sources.group_answers(sources.connect(), sources.open_source(data_file), spec, "block")
    keys = [str(k) for k in answers.keys]
    count = Counter((str(r["block"]), r["race"], r["sex"]) for r in records)
    expected = np.array([[count[(k, race, sex)] for race in RACES for sex in SEXES] for k in keys])
    assert np.array_equal(answers.values, expected) and answers.records == len(records)
    assert keys == sorted(keys, key=lambda k: int(k) if data_file.suffix == ".parquet" else k)


def test_pivot_and_long_layouts_agree(data_file, monkeypatch):
    spec = dpopt.load_spec(make_spec(adjacency={"kind": "add_remove"}))
    con, src = sources.connect(), sources.open_source(data_file)
    pivot = sources.group_answers(con, src, spec, "block")
    monkeypatch.setattr(sources, "PIVOT_CELLS", 1)
    long = sources.group_answers(con, src, spec, "block")
    assert np.array_equal(pivot.keys, long.keys) and np.array_equal(pivot.values, long.values)


def test_public_groups_include_empty_groups_and_reject_others(tmp_path, records):
    spec = dpopt.load_spec(make_spec(adjacency={"kind": "add_remove"}))
    data = write_parquet(tmp_path / "r.parquet", records)
    con, src = sources.connect(), sources.open_source(data)
    keys = np.arange(0, 45)
    answers = sources.group_answers(con, src, spec, "block", keys=keys, domain="public")
    assert answers.values.shape == (45, 6) and not answers.values[40:].any()
    with pytest.raises(DataError, match=r"column block: 39 is not one of the public groups"):
        sources.group_answers(con, src, spec, "block", keys=np.arange(0, 39))


def test_read_records_goes_through_duckdb_with_the_csv_semantics(records, tmp_path):
    spec = dpopt.load_spec(make_spec())
    csv_rows = read_records(write_csv(tmp_path / "r.csv", records), spec)
    parquet_rows = read_records(write_parquet(tmp_path / "r.parquet", records), spec)
    expected = [{"race": r["race"], "sex": r["sex"], "income": float(r["income"])} for r in records]
    assert csv_rows == expected and parquet_rows == expected


BAD = [
    ({"race": "martian"}, "column race: 'martian' is not a level (white, black, other)"),
    ({"race": ""}, "column race: '' is not a level"),
    ({"income": "lots"}, "column income: 'lots' is not a number"),
    ({"income": "250"}, "column income: 250.0 is outside [0.0, 100.0]"),
    ({"income": "nan"}, "column income: nan is outside [0.0, 100.0]"),
]


@pytest.mark.parametrize(
    "change,message", BAD, ids=[m.split(":")[0] + str(i) for i, (_, m) in enumerate(BAD)]
)
@pytest.mark.parametrize("grouped", [False, True])
def test_an_offending_value_is_named_with_its_row_and_column(change, message, grouped, tmp_path, records):
    rows = [dict(r) for r in records[:50]]
    rows[6].update(change)  # CSV line 8 (header is line 1)
    rows[9].update(change)
    data = write_csv(tmp_path / "bad.csv", rows)
    spec = dpopt.load_spec(make_spec(adjacency={"kind": "add_remove"}))
    con, src = sources.connect(), sources.open_source(data)
    with pytest.raises(DataError) as info:
        if grouped:
            sources.group_answers(con, src, spec, "block")
        else:
            sources.answer(con, src, spec)
    assert str(info.value) == f"{data} row 8, {message}" or str(info.value).startswith(
        f"{data} row 8, {message}"
    )


def test_parquet_errors_name_the_record(tmp_path, records):
    rows = [dict(r) for r in records[:20]]
    rows[4]["sex"] = "x"
    data = write_parquet(tmp_path / "bad.parquet", rows)
    spec = dpopt.load_spec(make_spec())
    with pytest.raises(DataError, match=r"bad.parquet record 5, column sex: 'x' is not a level"):
        read_records(data, spec)


def test_missing_columns_keys_and_files_are_data_errors(tmp_path, records):
    spec = dpopt.load_spec(make_spec(adjacency={"kind": "add_remove"}))
    con = sources.connect()
    no_sex = write_csv(tmp_path / "a.csv", records[:5], header=("block", "tract", "race", "income"))
    with pytest.raises(DataError, match="missing column"):
        sources.answer(con, sources.open_source(no_sex), spec)
    rows = [dict(r) for r in records[:5]]
    rows[2]["block"] = ""
    with pytest.raises(DataError, match=r"row 4, column block: missing group key"):
        sources.group_answers(con, sources.open_source(write_csv(tmp_path / "b.csv", rows)), spec, "block")
    with pytest.raises(DataError, match="no such file"):
        sources.open_source(tmp_path / "nope.csv")
    (tmp_path / "x.txt").write_text("a\n")
    with pytest.raises(DataError, match=".csv or .parquet"):
        sources.open_source(tmp_path / "x.txt")


def test_a_fixed_n_must_match_and_a_grouped_mean_is_refused(tmp_path, records):
    data = write_csv(tmp_path / "r.csv", records[:10])
    con, src = sources.connect(), sources.open_source(data)
    with pytest.raises(DataError, match="has 10 records but the spec fixes n = 1000"):
        sources.answer(con, src, dpopt.load_spec(make_spec(data={**make_spec()["data"], "n": 1000})))
    mean = dpopt.load_spec(
        make_spec(query={"kind": "mean", "attribute": "income"}, data={**make_spec()["data"], "n": 10})
    )
    with pytest.raises(UnsupportedSpecError, match="grouped mean"):
        sources.group_answers(con, src, mean, "block")


def test_cli_release_reads_parquet(tmp_path, records, capsys):
    data = write_parquet(tmp_path / "r.parquet", records)
    spec = tmp_path / "s.yaml"
    spec.write_text(
        (ROOT / "specs" / "table_replace_gdp.yaml")
        .read_text()
        .replace("n: 1000", "n: 3000")
        .replace("[female, male]", "[f, m]")
    )
    assert main(["release", str(spec), "--data", str(data), "--seed", "2", "--insecure-seed"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert "records" not in doc and sum(doc["release"].values()) == pytest.approx(3000.0, abs=1e-6)
