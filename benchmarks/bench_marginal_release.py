"""Release of all 2-way marginals from 10 M records (issue 25): Dask against DuckDB.

Writes a Parquet file of synthetic person records for ``specs/marginals_10attr_2way_zcdp.yaml``
(each attribute's level drawn uniformly, dictionary-encoded columns, row groups of 10^6 rows),
then times the ungrouped release (count the 45 measured marginals, design, one noise draw) by
each engine, each in a fresh interpreter (peak memory its own), and checks that the two engines
counted the same marginals (the noisy releases are equal for the same seed).

Run: python benchmarks/bench_marginal_release.py [--records N] [--engine duckdb|dask]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # measure the dpopt of this tree, not an installed one
SPEC = ROOT / "specs" / "marginals_10attr_2way_zcdp.yaml"


def write_records(path: Path, n: int, seed: int = 1) -> None:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    import dpopt

    rng = np.random.default_rng(seed)
    spec = dpopt.load_spec(str(SPEC))
    columns = {}
    for name, levels in spec.data.attributes.items():
        codes = rng.integers(0, len(levels), n).astype(np.int32)
        columns[name] = pa.DictionaryArray.from_arrays(pa.array(codes), pa.array([str(v) for v in levels]))
    pq.write_table(pa.table(columns), path, row_group_size=1_000_000)


def run(engine: str, data: Path) -> dict:
    import numpy as np

    from dpopt.release import random_source
    from dpopt.release.batch import release_once

    start = time.perf_counter()
    solution, noisy, records, _ = release_once(str(SPEC), data, random_source(5, insecure_seed=True), engine=engine)
    seconds = time.perf_counter() - start
    return {"engine": engine, "seconds": seconds, "records": records, "d": int(noisy.size),
            "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
            "checksum": float(np.sum(noisy * np.arange(1, noisy.size + 1)))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000_000)
    parser.add_argument("--engine", choices=["duckdb", "dask"])
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run(args.child[0], Path(args.child[1]))))
        return
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "people.parquet"
        start = time.perf_counter()
        write_records(data, args.records)
        print(f"{args.records:,} records written in {time.perf_counter() - start:.1f} s "
              f"({data.stat().st_size / 2**20:.0f} MiB Parquet)")
        rows = []
        for engine in [args.engine] if args.engine else ["duckdb", "dask"]:
            done = subprocess.run([sys.executable, __file__, "--child", engine, str(data)], capture_output=True,
                                  text=True, env=env, check=True)
            row = json.loads(done.stdout.strip().splitlines()[-1])
            rows.append(row)
            print(f"{engine}: release of {row['d']:,} marginal cells from {row['records']:,} records in "
                  f"{row['seconds']:.1f} s, peak memory {row['peak_mb']:.0f} MB")
        if len(rows) == 2:
            print("same release (seed 5) from both engines:", rows[0]["checksum"] == rows[1]["checksum"])


if __name__ == "__main__":
    main()
