"""Person-level contribution bounding in DuckDB: rows cut per person before counting.

Synthetic visits (persons with a geometric number of visits, mean 3.3, over the 4 × 5 age group ×
clinic table of ``specs/visits_person_level.yaml``; seed fixed) are written to Parquet; for each
size the script prints the time of :func:`dpopt.release.bounding.bound_contributions` (validation,
the three window functions keyed by SHA-256, the truncation counts), of the count over the kept
rows, and of the plain count of the raw file for comparison, in the same run. With ``--dask`` it also
times the same bounding on Dask (:func:`dpopt.release.distributed_bounding.bound_contributions_dask`, dask's
local scheduler, the file's row groups as partitions) and checks it keeps as many rows.

Run: python benchmarks/bench_person_bounding.py [--rows 1000000 5000000] [--dask]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import dpopt
from dpopt.domain.queries import compile_query
from dpopt.release import sources
from dpopt.release.bounding import bound_contributions
from dpopt.rng import random_source

SPEC = Path(__file__).resolve().parents[1] / "specs" / "visits_person_level.yaml"


def write(path: Path, rows: int, seed: int = 28) -> None:
    rng = np.random.default_rng(seed)
    visits = np.minimum(rng.geometric(0.3, size=rows), 12)
    person = np.repeat(np.arange(len(visits)), visits)[:rows]
    spec = dpopt.load_spec(SPEC)
    ages, clinics = spec.data.attributes["age_group"], spec.data.attributes["clinic"]
    table = pa.table({
        "person_id": pa.array(person.astype(str)),
        "age_group": pa.array(np.asarray(ages)[rng.integers(0, len(ages), rows)]),
        "clinic": pa.array(np.asarray(clinics)[rng.integers(0, len(clinics), rows)]),
        "duration": pa.array(rng.integers(5, 121, rows).astype(float)),
    })
    pq.write_table(table, path)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000_000])
    parser.add_argument("--dask", action="store_true", help="also time the bounding on Dask")
    args = parser.parse_args()
    spec = dpopt.load_spec(SPEC)
    query = compile_query(spec)
    with tempfile.TemporaryDirectory() as tmp:
        for rows in args.rows:
            path = Path(tmp) / f"visits_{rows}.parquet"
            write(path, rows)
            con, source = sources.connect(), sources.open_source(path)
            start = time.perf_counter()
            sources.answer(con, source, spec, query=query)
            raw = time.perf_counter() - start
            start = time.perf_counter()
            bounded, report = bound_contributions(con, source, spec, query, random_source(1, True))
            bounding = time.perf_counter() - start
            start = time.perf_counter()
            sources.answer(con, bounded, spec, query=query)
            counted = time.perf_counter() - start
            print(f"{rows:>10,} rows, {report['persons']:,} persons: bounding {bounding:.2f} s "
                  f"({report['rows_dropped']:,} rows dropped), count of kept rows {counted:.2f} s; "
                  f"count of the raw file {raw:.2f} s")
            if args.dask:
                from dpopt.release.distributed_bounding import bound_contributions_dask

                start = time.perf_counter()
                kept, on_dask = bound_contributions_dask(source, spec, query, random_source(1, True))
                kept_rows = len(kept.compute())
                print(f"{'':>10}  Dask: bounding and counting the kept rows {time.perf_counter() - start:.2f} s "
                      f"({kept_rows:,} rows kept, DuckDB {report['rows_kept']:,})")


if __name__ == "__main__":
    main()
