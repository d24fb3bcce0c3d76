"""The Dask path on a local 2-worker cluster equals the single-machine (DuckDB) path.

Same counts (integers, compared exactly), and for a fixed seed the same noisy release bit for
bit: block b of grouping column l draws from the stream (l, b) wherever it is computed. Bitwise
equality of the releases implies equality in distribution for every seed.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import make_spec
from release_data import make_records, public_groups, write_csv, write_parquet

import dpopt
from dpopt.errors import DataError
from dpopt.release import release_groups, sources
from dpopt.release.distributed import group_answers_dask

distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
    )
    with distributed.Client(cluster) as c:
        yield c
    cluster.close()


@pytest.fixture(scope="module")
def records():
    return make_records(n=4000, seed=21, groups=300)


@pytest.fixture(scope="module")
def files(records, tmp_path_factory):
    folder = tmp_path_factory.mktemp("dask")
    return {
        "csv": write_csv(folder / "records.csv", records),
        "parquet": write_parquet(folder / "records.parquet", records, row_group_size=500),
    }


TABLE = {"kind": "contingency_table", "attributes": ["race", "sex"]}


@pytest.mark.parametrize(
    "fmt,query",
    [
        ("csv", TABLE),
        ("parquet", TABLE),
        ("parquet", {"kind": "marginals", "attributes": [["sex"], ["race", "sex"]]}),
        ("csv", {"kind": "count"}),
    ],
    ids=["csv-table", "parquet-table", "parquet-marginals", "csv-count"],
)
def test_dask_counts_equal_duckdb_counts(fmt, query, files, client):
    spec = dpopt.load_spec(make_spec(query=query, adjacency={"kind": "add_remove"}))
    local = sources.group_answers(sources.connect(), sources.open_source(files[fmt]), spec, "block")
    remote = group_answers_dask(sources.open_source(files[fmt]), spec, "block", client=client, block=64)
    assert np.array_equal(local.keys, remote.keys)
    assert np.array_equal(local.values, remote.values) and local.records == remote.records == 4000


@pytest.mark.parametrize(
    "fmt,spec",
    [
        ("csv", make_spec(mechanism="projected_gaussian")),  # floating point
        ("parquet", make_spec(mechanism="projected_gaussian")),
        (
            "parquet",
            make_spec(
                adjacency={"kind": "add_remove"},
                privacy={"zcdp": {"rho": 0.5}},
                mechanism="discrete_gaussian",
            ),
        ),  # integers
        (
            "parquet",
            make_spec(
                query={"kind": "kronecker", "terms": [{"race": "prefix", "sex": "identity"}, {"race": {"ranges": 2}}]},
                mechanism="kronecker_gaussian",
            ),
        ),  # the exact lattice measurement of a Kronecker strategy, from each group's answers
    ],
    ids=["csv-projected_gaussian", "parquet-projected_gaussian", "parquet-discrete_gaussian",
         "parquet-kronecker_gaussian"],
)
def test_dask_release_is_bitwise_the_single_machine_release(fmt, spec, files, client):
    kwargs = {"seed": 11, "insecure_seed": True, "block": 64, "groups": public_groups(300, text=fmt == "csv")}
    local = release_groups(spec, files[fmt], ["block", "tract"], **kwargs)
    remote = release_groups(spec, files[fmt], ["block", "tract"], engine="dask", client=client, **kwargs)
    for column in ("block", "tract"):
        a, b = local.level(column), remote.level(column)
        assert np.array_equal(a.keys, b.keys)
        assert a.values.dtype == b.values.dtype and np.array_equal(a.values, b.values)
    assert local.certificate.data == remote.certificate.data


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_dask_releases_public_groups_without_records(fmt, files, client):
    keys = range(500) if fmt == "parquet" else [str(i) for i in range(500)]  # CSV columns are text
    kwargs = {"groups": {"block": keys}, "seed": 12, "insecure_seed": True, "block": 64}
    spec = make_spec(adjacency={"kind": "add_remove"}, mechanism="gaussian")
    local = release_groups(spec, files[fmt], "block", **kwargs).level("block")
    remote = release_groups(spec, files[fmt], "block", engine="dask", client=client, **kwargs).level("block")
    assert local.values.shape == (500, 6) and np.array_equal(local.values, remote.values)


def test_dask_names_an_offending_value(tmp_path, records, client):
    rows = [dict(r) for r in records[:300]]
    rows[123]["sex"] = "unknown"
    data = write_parquet(tmp_path / "bad.parquet", rows, row_group_size=100)
    with pytest.raises(DataError, match=r"column sex: 'unknown' is not a level \(f, m\)"):
        release_groups(
            make_spec(mechanism="gaussian"),
            data,
            "block",
            groups=public_groups(300),
            engine="dask",
            client=client,
            seed=1,
            insecure_seed=True,
        )
