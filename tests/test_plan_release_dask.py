"""A release plan grouped on Dask equals the DuckDB release of the same plan.

The per-(group, cell) counts and sums are checked against a brute-force count in Python, and
for a fixed seed the whole document and certificate against the DuckDB engine's bit for bit:
query u of group g of column l draws from the stream (l, g, u) whichever engine counted the
records. Incomes are integers, so their sums are exact in either addition order. Dask runs on
its local (threaded) scheduler, and once on a 2-worker dask.distributed cluster in this process.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest
from release_data import make_records, write_csv, write_parquet

from dpopt.cli import main
from dpopt.errors import DataError, SpecError
from dpopt.plan import solve_plan
from dpopt.plan.release import release_plan_groups
from dpopt.release import sources
from dpopt.release.distributed import table_sums_dask
from dpopt.rng import random_source

PLAN = {"dpopt": 1, "name": "grouped plan on dask",
        "data": {"attributes": {"race": ["white", "black", "other"], "sex": ["f", "m"],
                                "income": {"min": 0, "max": 100},  # the grouping columns' public levels:
                                "block": [str(b) for b in range(12)], "tract": ["t0", "t1"]}},
        "queries": [{"name": "race", "query": {"kind": "histogram", "attribute": "race"}},
                    {"name": "race x sex", "query": {"kind": "contingency_table", "attributes": ["race", "sex"]},
                     "mechanism": "discrete_gaussian"},  # integer noise next to floating-point noise
                    {"name": "total income", "query": {"kind": "sum", "attribute": "income"}, "weight": 0.01}],
        "adjacency": "add_remove", "privacy": {"zcdp": {"rho": 0.5}}, "mechanism": "gaussian"}


@pytest.fixture(scope="module")
def records():
    return make_records(n=400, seed=15, groups=12)


@pytest.fixture(scope="module")
def files(records, tmp_path_factory):
    folder = tmp_path_factory.mktemp("plan_dask")
    return {"csv": write_csv(folder / "records.csv", records),
            "parquet": write_parquet(folder / "records.parquet", records, row_group_size=100)}


def test_dask_table_sums_equal_a_brute_force_count(files, records):
    """Cell c = 2·race + sex (row-major, the last attribute fastest); income summed per cell."""
    races, sexes = PLAN["data"]["attributes"]["race"], PLAN["data"]["attributes"]["sex"]
    spec = solve_plan(PLAN).designs[0].spec
    rows = table_sums_dask(sources.open_source(files["parquet"]), spec, "tract", ["race", "sex"],
                           [tuple(races), tuple(sexes)], ["income"])
    counts, incomes = Counter(), Counter()
    for r in records:
        cell = (r["tract"], 2 * races.index(r["race"]) + sexes.index(r["sex"]))
        counts[cell] += 1
        incomes[cell] += r["income"]
    assert {(str(k), int(c)): (int(n), float(s)) for k, c, n, s in rows} == {
        cell: (counts[cell], float(incomes[cell])) for cell in counts}


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_dask_plan_release_is_bitwise_the_duckdb_release(fmt, files):
    """block is an integer column in Parquet and text in CSV: both engines release its groups in the order the
    plan declares them (the groups are declared, issue 35)."""
    local = release_plan_groups(PLAN, files[fmt], ["block", "tract"], random_source(7, insecure_seed=True))
    remote = release_plan_groups(PLAN, files[fmt], ["block", "tract"], random_source(7, insecure_seed=True),
                                 engine="dask")
    assert local[1] == remote[1]
    assert local[2].data == remote[2].data
    assert list(remote[1]["groups"]["block"]) == PLAN["data"]["attributes"]["block"]


def test_dask_plan_release_through_the_cli(files, tmp_path, capsys):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(PLAN))
    args = ["release", str(plan), "--data", str(files["csv"]), "--group-by", "tract", "--seed", "3", "--insecure-seed"]
    assert main(args + ["--out", str(tmp_path / "duckdb")]) == 0
    assert main(args + ["--engine", "dask", "--out", str(tmp_path / "dask")]) == 0
    for name in ("release.json", "certificate.json"):
        assert (tmp_path / "duckdb" / name).read_text() == (tmp_path / "dask" / name).read_text()
    assert main(["verify", str(tmp_path / "dask" / "certificate.json")]) == 0
    capsys.readouterr()
    assert main(["release", str(plan), "--data", str(files["csv"]), "--engine", "dask"]) == 2  # ungrouped: DuckDB
    assert "--engine and --scheduler apply to a grouped release" in capsys.readouterr().err


def test_dask_plan_release_names_an_offending_value(records, tmp_path):
    rows = [dict(r) for r in records]
    rows[57]["income"] = 250
    data = write_csv(tmp_path / "bad.csv", rows)
    with pytest.raises(DataError, match=r"column income: .*250"):
        release_plan_groups(PLAN, data, ["tract"], random_source(1, insecure_seed=True), engine="dask")
    with pytest.raises(SpecError, match="--engine"):
        release_plan_groups(PLAN, data, ["tract"], random_source(1, insecure_seed=True), engine="spark")


@pytest.mark.parametrize("engine", ["duckdb", "dask"])
def test_a_missing_group_key_is_refused_by_both_engines(records, tmp_path, engine):
    """The grouping column is a declared attribute: a record without its key is refused, naming the row (CSV line
    5: the header, then records 0 to 3), before any design, whatever the engine."""
    rows = [dict(r) for r in records]
    rows[3]["tract"] = None
    data = write_csv(tmp_path / "missing.csv", rows)
    with pytest.raises(DataError, match="row 5, column tract: '' is not a level"):
        release_plan_groups(PLAN, data, ["tract"], random_source(1, insecure_seed=True), engine=engine)


def test_dask_plan_release_on_a_distributed_client(files):
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None)
    with cluster, distributed.Client(cluster) as client:
        remote = release_plan_groups(PLAN, files["parquet"], ["tract"], random_source(9, insecure_seed=True),
                                     engine="dask", client=client)
    local = release_plan_groups(PLAN, files["parquet"], ["tract"], random_source(9, insecure_seed=True))
    assert local[1] == remote[1] and local[2].data == remote[2].data
