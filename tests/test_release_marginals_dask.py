"""An ungrouped marginal release on Dask (``dpopt release SPEC --data FILE --engine dask``).

Reference: DuckDB's ``GROUP BY GROUPING SETS`` count of the same file
(:func:`dpopt.release.sources.answer`), an independent engine; the counts are integers and are
compared exactly, and for a fixed seed the two releases are the same draw added to the same
counts (one call to the family's ``release`` from the root stream), so they are equal bit for bit.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dpopt
from dpopt.cli import main
from dpopt.errors import DataError, UnsupportedSpecError
from dpopt.release import distributed, random_source, sources
from dpopt.release.batch import release_once
from dpopt.release.distributed import marginal_answer_dask

ATTRIBUTES = {"age": ["0-17", "18-39", "40-64", "65+"], "sex": ["f", "m"], "race": ["a", "b", "c"],
              "tenure": ["own", "rent"], "region": ["n", "s", "e", "w", "c"]}


def spec(query=None, **extra):
    return {"dpopt": 1, "name": "marginals on dask", "data": {"attributes": ATTRIBUTES},
            "query": query or {"kind": "marginals", "all_of_size": 2}, "adjacency": "add_remove",
            "privacy": {"zcdp": {"rho": 1.0}}, "mechanism": "marginal_gaussian", "utility": {"metric": "l2"},
            **extra}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    rng = np.random.default_rng(5)
    n = 3000
    columns = {a: np.array(levels)[rng.integers(0, len(levels), n)] for a, levels in ATTRIBUTES.items()}
    folder = tmp_path_factory.mktemp("marginals_dask")
    table = pa.table(columns)
    pq.write_table(table, folder / "people.parquet", row_group_size=400)
    csv = folder / "people.csv"
    csv.write_text(",".join(ATTRIBUTES) + "\n" + "\n".join(
        ",".join(row) for row in zip(*columns.values())) + "\n")
    bad = folder / "bad.csv"
    bad.write_text(csv.read_text().replace("rent", "RENT", 1))
    return {"parquet": folder / "people.parquet", "csv": csv, "bad": bad}


@pytest.fixture
def partitioned(monkeypatch):
    """Read every file in 7 partitions, so that the counts are summed across partitions."""
    read = distributed.read_records
    monkeypatch.setattr(distributed, "read_records", lambda source, columns, **kw: read(source, columns, **kw).repartition(
        npartitions=7))


QUERIES = [
    {"kind": "marginals", "all_of_size": 2},
    {"kind": "marginals", "attributes": [["region", "age"], ["sex"], ["race", "tenure", "age"]]},
    {"kind": "contingency_table", "attributes": ["sex", "race"]},
    {"kind": "count"},
]


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
@pytest.mark.parametrize("query", QUERIES, ids=["all-2way", "mixed-order", "table", "count"])
def test_dask_marginals_equal_duckdb(fmt, query, files, partitioned):
    problem = dpopt.compile(spec(query))
    source = sources.open_source(files[fmt])
    expected, records = sources.answer(sources.connect(), source, problem.spec, query=problem.query)
    got, counted = marginal_answer_dask(source, problem.spec, problem.query)
    assert counted == records == 3000
    assert np.array_equal(got, expected)


def test_release_is_the_same_draw_as_duckdb(files, partitioned):
    document = spec()
    runs = [release_once(document, files["parquet"], random_source(7, insecure_seed=True), engine=engine)
            for engine in ("duckdb", "dask")]
    assert np.array_equal(runs[0][1], runs[1][1]) and runs[0][2] == runs[1][2] == 3000


def test_off_domain_value_is_named_as_duckdb_names_it(files):
    problem = dpopt.compile(spec())
    source = sources.open_source(files["bad"])
    with pytest.raises(DataError) as duck:
        sources.answer(sources.connect(), source, problem.spec, query=problem.query)
    with pytest.raises(DataError) as dask_error:
        marginal_answer_dask(source, problem.spec, problem.query)
    assert str(dask_error.value) == re.sub(r" row \d+", "", str(duck.value))  # Dask does not number rows
    assert "column tenure: 'RENT' is not a level" in str(duck.value)


def test_a_sum_query_is_refused(files):
    document = {**spec({"kind": "count"}), "data": {"attributes": {**ATTRIBUTES, "age": {"min": 0, "max": 99}}},
                "query": {"kind": "sum", "attribute": "age"}, "mechanism": "gaussian"}
    with pytest.raises(UnsupportedSpecError, match="stacks of marginals"):
        release_once(document, files["csv"], random_source(1, insecure_seed=True), engine="dask")


def test_cli_release_with_the_dask_engine(files, tmp_path):
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec()))
    outs = {}
    for engine in ("duckdb", "dask"):
        out = tmp_path / engine
        assert main(["release", str(path), "--data", str(files["csv"]), "--engine", engine, "--seed", "3",
                     "--insecure-seed", "--out", str(out)]) == 0
        outs[engine] = json.loads((out / "release.json").read_text())
    assert outs["duckdb"]["release"] == outs["dask"]["release"]
    assert "records" not in outs["dask"]  # exact, not published (issue 35)
