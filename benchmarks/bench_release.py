"""Release at scale: a 6x2 table for each of 1,000,000 groups from 10 million Parquet records.

Prints, each against a baseline measured in the same run:

* end to end (the ``dpopt release --group-by`` command, and in-process: solve, SQL counts,
  noise, certificate, Parquet output) vs DuckDB's own group-by count of the same file
  (target: under 60 s and within 3x);
* noise generation (ChaCha20 CSPRNG, block streams) vs numpy's raw normal rate (PCG64,
  ``standard_normal``) for the same number of draws (target: within 2x); the exact
  discrete Gaussian sampler's rate for information;
* the Dask path on a local 2-worker cluster: the same counts as DuckDB, and for a fixed
  seed the same release bit for bit.

Run: python benchmarks/bench_release.py [--records 10000000] [--groups 1000000] [--no-dask]
"""

from __future__ import annotations

import argparse
import json
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from randomgen import ChaCha

import dpopt
from dpopt.noise.discrete_gaussian import sample_discrete_gaussian
from dpopt.release import random_source, release_groups, sources
from dpopt.release.batch import BLOCK_GROUPS, add_noise

RACES = ["r0", "r1", "r2", "r3", "r4", "r5"]
SPEC = {
    "dpopt": 1,
    "name": "6x2 table per block",
    "data": {"attributes": {"race": RACES, "sex": ["f", "m"]}},
    "query": {"kind": "contingency_table", "attributes": ["race", "sex"]},
    "adjacency": {"kind": "add_remove"},
    "privacy": {"gdp": {"mu": 1.0}},
}


def generate(path: Path, records: int, groups: int) -> float:
    start = time.perf_counter()
    rng = np.random.default_rng(20261122)
    table = pa.table(
        {
            "block": rng.integers(0, groups, records, dtype=np.int64),
            "race": pa.DictionaryArray.from_arrays(rng.integers(0, 6, records).astype(np.int8), RACES),
            "sex": pa.DictionaryArray.from_arrays(rng.integers(0, 2, records).astype(np.int8), ["f", "m"]),
        }
    )
    pq.write_table(table, path, row_group_size=1_000_000)
    return time.perf_counter() - start


def sample_blocks(mechanism, groups: int, randomness) -> None:
    """The noise of a grouped release without the counts: one ``sample`` per block, each from its stream."""
    for b, start in enumerate(range(0, groups, BLOCK_GROUPS)):
        mechanism.sample(min(BLOCK_GROUPS, groups - start), randomness.stream(0, b))


def best(fn, repeat: int = 2) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return min(times), result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=10_000_000)
    parser.add_argument("--groups", type=int, default=1_000_000)
    parser.add_argument("--no-dask", action="store_true")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="dpopt_bench_release_"))
    data = folder / "records.parquet"
    spec_path = folder / "spec.json"
    spec_path.write_text(json.dumps(SPEC))
    public = folder / "blocks.parquet"  # the public list of blocks (a grouped release declares its groups)
    pq.write_table(pa.table({"block": np.arange(args.groups, dtype=np.int64)}), public)
    print(
        f"generated {args.records:,} records in {args.groups:,} groups: {generate(data, args.records, args.groups):.1f} s"
        f" ({data.stat().st_size / 1e6:.0f} MB Parquet)"
    )

    con = duckdb.connect()
    baseline, _ = best(
        lambda: con.execute(
            f"CREATE OR REPLACE TEMP TABLE baseline AS SELECT block, race, sex, count(*) AS n "
            f"FROM read_parquet('{data}') GROUP BY ALL"
        )
    )
    print(f"DuckDB alone, GROUP BY block, race, sex count(*) (materialised): {baseline:.2f} s")

    out = folder / "out"
    start = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "dpopt.cli",
            "release",
            str(spec_path),
            "--data",
            str(data),
            "--group-by",
            "block",
            "--groups",
            str(public),
            "--out",
            str(out),
        ],
        check=True,
    )
    command = time.perf_counter() - start
    print(
        f"end to end, `dpopt release --group-by block --out` (new process, CSPRNG): {command:.2f} s "
        f"= {command / baseline:.2f}x DuckDB (target < 60 s and <= 3x)"
    )

    spec = dpopt.load_spec(SPEC)
    t_solve, solution = best(lambda: dpopt.solve(spec), 1)
    t_counts, answers = best(
        lambda: sources.group_answers(sources.connect(), sources.open_source(data), spec, "block"), 1
    )
    t_noise, _ = best(lambda: add_noise(solution.mechanism, answers.values, random_source(), 0), 2)
    t_release, rel = best(lambda: release_groups(spec, data, "block", groups={"block": public}), 1)
    t_write, _ = best(lambda: rel.write(folder / "out2"), 1)
    print(
        f"in process: solve {t_solve:.2f} s, SQL counts + layout {t_counts:.2f} s "
        f"({t_counts / baseline:.2f}x DuckDB), noise {t_noise:.2f} s; release_groups {t_release:.2f} s "
        f"+ write {t_write:.2f} s = {t_release + t_write:.2f} s ({(t_release + t_write) / baseline:.2f}x DuckDB)"
    )
    groups, d = answers.values.shape
    print(
        f"  {groups:,} groups x {d} cells, mechanism {solution.mechanism.family} {solution.mechanism.parameters}"
    )

    draws = groups * d
    t_numpy, _ = best(lambda: np.random.default_rng().standard_normal(draws), 3)
    t_aes, _ = best(lambda: random_source().stream(0, 0).standard_normal(draws), 3)
    t_chacha, _ = best(
        lambda: np.random.Generator(ChaCha(key=secrets.randbits(256), rounds=20)).standard_normal(draws), 3
    )
    t_sample, _ = best(lambda: sample_blocks(solution.mechanism, groups, random_source()), 3)
    print(
        f"noise, {draws:,} draws: numpy PCG64 standard_normal {draws / t_numpy / 1e6:.1f} M/s; "
        f"AES-128-CTR (the CSPRNG used) {draws / t_aes / 1e6:.1f} M/s; ChaCha20 {draws / t_chacha / 1e6:.1f} M/s"
    )
    print(
        f"  release noise generation (mechanism.sample per block of {BLOCK_GROUPS:,} groups, own stream each): "
        f"{t_sample:.2f} s = {t_sample / t_numpy:.2f}x numpy's raw normal time (target <= 2x); "
        f"adding it to the counts: {t_noise:.2f} s in all"
    )
    n_dg = 1_200_000
    t_dg, _ = best(lambda: sample_discrete_gaussian(random_source().stream(0, 0), 1, 1, n_dg), 1)
    print(f"exact discrete Gaussian sampler (sigma^2 = 1, CSPRNG): {n_dg / t_dg / 1e6:.2f} M draws/s")

    if args.no_dask:
        return
    from distributed import Client, LocalCluster

    from dpopt.release.distributed import group_answers_dask

    with (
        LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster,
        Client(cluster) as client,
    ):
        t_dask, remote = best(
            lambda: group_answers_dask(sources.open_source(data), spec, "block", client=client), 1
        )
        same = np.array_equal(remote.keys, answers.keys) and np.array_equal(remote.values, answers.values)
        print(
            f"Dask, local cluster of 2 workers: counts in {t_dask:.1f} s; same counts as DuckDB: {same} "
            f"({remote.records:,} records, {len(remote.keys):,} groups)"
        )
        kwargs = {"seed": 2026, "insecure_seed": True, "groups": {"block": public}}
        t_dask_release, dask_rel = best(
            lambda: release_groups(spec, data, "block", engine="dask", client=client, **kwargs), 1
        )
        local_rel = release_groups(spec, data, "block", **kwargs)
        identical = np.array_equal(dask_rel.level("block").values, local_rel.level("block").values)
        print(
            f"Dask release (fixed seed) in {t_dask_release:.1f} s; bitwise identical to DuckDB's: {identical}"
        )


if __name__ == "__main__":
    main()
