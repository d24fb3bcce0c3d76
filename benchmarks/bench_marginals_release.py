"""Release of all two-way marginals of a 10-attribute person table from 1 M and 10 M Parquet records.

The spec is ``specs/marginals_10attr_2way_zcdp.yaml`` (45 tables, 4,114 counts, a domain of
1.47·10⁹ cells that is never formed). Synthetic records (independent uniform levels, seed
fixed) are written to Parquet; the script prints, for each size:

* the SQL count of every marginal table (:func:`dpopt.release.sources.answer`: one
  ``GROUP BY GROUPING SETS`` scan, never the histogram) against DuckDB's plain
  ``GROUP BY`` of one two-way table of the same file, in the same run;
* the whole ``dpopt release SPEC --data FILE`` command (solve, counts, noise, certificate)
  and its peak memory (target: under 60 s on 2 cores).

Run: python benchmarks/bench_marginals_release.py [--records 1000000 10000000]
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import dpopt
from dpopt.release import sources

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "specs" / "marginals_10attr_2way_zcdp.yaml"


def generate(path: Path, records: int, spec: dpopt.Spec) -> float:
    """Uniform synthetic records over the spec's attributes, dictionary-encoded, in Parquet."""
    start = time.perf_counter()
    rng = np.random.default_rng(20261127)
    columns = {}
    for name, levels in spec.data.attributes.items():
        codes = rng.integers(0, len(levels), records).astype(np.int8)
        columns[name] = pa.DictionaryArray.from_arrays(codes, list(levels))
    pq.write_table(pa.table(columns), path, row_group_size=1_000_000)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, nargs="+", default=[1_000_000, 10_000_000])
    args = parser.parse_args()
    spec = dpopt.load_spec(SPEC)
    problem = dpopt.compile(spec)
    print(f"{spec.name}: {problem.query.dimension} released counts, domain {problem.query.cells:.3g} cells")
    with tempfile.TemporaryDirectory() as tmp:
        for records in args.records:
            path = Path(tmp) / f"people_{records}.parquet"
            made = generate(path, records, spec)
            con = duckdb.connect(":memory:")
            start = time.perf_counter()
            first, second = list(spec.data.attributes)[:2]
            table = f"SELECT {first}, {second}, count(*) FROM read_parquet('{path}') GROUP BY ALL"
            con.execute(table).fetchall()
            scan = time.perf_counter() - start
            start = time.perf_counter()
            source = sources.open_source(path)
            values, counted = sources.answer(sources.connect(), source, spec, query=problem.query)
            sql = time.perf_counter() - start
            assert counted == records and values.sum() == records * len(problem.query.groups)
            start = time.perf_counter()
            command = [sys.executable, "-m", "dpopt.cli", "release", str(SPEC), "--data", str(path),
                       "--seed", "1", "--insecure-seed"]
            done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
            whole = time.perf_counter() - start
            peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
            status = "ok" if done.returncode == 0 else f"exit {done.returncode}: {done.stderr.strip()[-200:]}"
            print(f"{records:>11,} records (written in {made:.1f} s): marginal counts in SQL {sql:.2f} s "
                  f"(DuckDB's GROUP BY of one table {scan:.2f} s); `dpopt release` {whole:.1f} s, "
                  f"peak {peak:.0f} MB "
                  f"(largest child so far) [{status}]")


if __name__ == "__main__":
    main()
