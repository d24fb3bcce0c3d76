"""``dpopt synthesize`` end to end at scale: 14–30 attributes, 10⁵–10⁷ records (issue 38).

For each size ``ATTRIBUTES×RECORDS`` it

1. writes a seeded data file with a correlated structure: a random tree-shaped Bayesian network of
   categorical attributes (attribute j > 0 has a parent drawn uniformly among 0 … j − 1; 2–10 levels each,
   uniform; the root's law and each row of each conditional table drawn from a Dirichlet(0.5, …) law, so
   pairs range from nearly independent to strongly dependent), sampled by inverse CDF in chunks of 10⁶
   records, written as Parquet (DuckDB ``COPY``; the CLI reads Parquet);
2. writes a spec: those attributes, add/remove, zCDP ρ = 1, ``marginal_gaussian``,
   ``synthesize: all_of_size: 2`` (every two-way marginal; the default ``exact: true``);
3. runs ``dpopt synthesize SPEC --data FILE --out DIR --seed 0 --insecure-seed`` under ``nice`` and
   ``/usr/bin/time -v`` (peak resident memory, user and system CPU, wall time; every progress line
   timestamped),
4. reads ``synthetic.parquet`` back and prints the average total variation distance (TVD) between the
   synthetic records' and the data's two-way tables over all pairs, TVD = ½ Σ |p − q| of the normalised
   tables.

It prints one row per size: records, attributes, two-way tables, CPU (user + system), wall, peak memory, 2-way
TVD; with ``--steps`` also the wall time of each progress step (where a run spends its time).

Run: python benchmarks/bench_synthesize_scale.py [--sizes 30x100000 30x1000000 14x10000000]
[--work /tmp/synthscale] [--steps]
"""

from __future__ import annotations

import argparse
import itertools
import re
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import numpy as np

CHUNK = 1_000_000
"""Records sampled at a time (the inverse-CDF step forms a chunk × levels array)."""


def network(d: int, rng: np.random.Generator) -> tuple[list[int], list[int], list[np.ndarray]]:
    """A random tree Bayesian network: levels (2–10), parents (−1 for the root) and each attribute's
    conditional table, rows P(child | parent level) (the root: one row)."""
    levels = [int(k) for k in rng.integers(2, 11, size=d)]
    parents = [-1] + [int(rng.integers(0, j)) for j in range(1, d)]
    tables = [rng.dirichlet(np.full(levels[j], 0.5), size=1 if parents[j] < 0 else levels[parents[j]])
              for j in range(d)]
    return levels, parents, tables


def sample(d: int, n: int, seed: int) -> tuple[list[int], np.ndarray]:
    """``n`` records of the network drawn with ``seed``: levels and an (n, d) int8 array of level indices."""
    rng = np.random.default_rng(seed)
    levels, parents, tables = network(d, rng)
    data = np.empty((n, d), dtype=np.int8)
    for start in range(0, n, CHUNK):
        stop = min(n, start + CHUNK)
        for j in range(d):
            cdf = np.cumsum(tables[j], axis=1)
            cdf[:, -1] = 1.0
            rows = cdf[0 if parents[j] < 0 else data[start:stop, parents[j]].astype(np.intp)]
            u = rng.random(stop - start)
            data[start:stop, j] = (u[:, None] >= rows).sum(axis=1) if parents[j] >= 0 else \
                np.searchsorted(cdf[0], u, side="right")
    return levels, data


def write_inputs(d: int, n: int, seed: int, work: Path) -> tuple[Path, Path, list[int], np.ndarray]:
    """The Parquet data file and the spec of one size."""
    levels, data = sample(d, n, seed)
    names = [f"a{j:02d}" for j in range(d)]
    parquet = work / f"data_{d}x{n}.parquet"
    con = duckdb.connect()
    con.register("records", {a: data[:, j] for j, a in enumerate(names)})
    con.execute(f"COPY (SELECT * FROM records) TO '{parquet}' (FORMAT parquet)")
    con.close()
    lines = ["dpopt: 1", f"name: Synthetic records of a random tree network ({d} attributes, {n} records)",
             "data:", "  attributes:"]
    lines += [f"    {a}: [{', '.join(str(v) for v in range(k))}]" for a, k in zip(names, levels)]
    lines += ["adjacency: add_remove", "privacy: {zcdp: {rho: 1.0}}", "mechanism: marginal_gaussian",
              "synthesize:", "  all_of_size: 2", ""]
    spec = work / f"spec_{d}x{n}.yaml"
    spec.write_text("\n".join(lines))
    return parquet, spec, levels, data


def tvd2(levels: list[int], data: np.ndarray, synthetic: np.ndarray) -> float:
    """Average over all pairs of the TVD between the two files' normalised two-way tables."""
    out = []
    for a, b in itertools.combinations(range(len(levels)), 2):
        size = levels[a] * levels[b]
        p = np.bincount(data[:, a].astype(np.intp) * levels[b] + data[:, b], minlength=size) / len(data)
        q = np.bincount(synthetic[:, a].astype(np.intp) * levels[b] + synthetic[:, b], minlength=size)
        q = q / len(synthetic)
        out.append(0.5 * np.abs(p - q).sum())
    return float(np.mean(out))


def run(d: int, n: int, seed: int, work: Path, dpopt: str, steps: bool) -> None:
    parquet, spec, levels, data = write_inputs(d, n, seed, work)
    out = work / f"out_{d}x{n}"
    command = ["nice", "/usr/bin/time", "-v", dpopt, "synthesize", str(spec), "--data", str(parquet),
               "--out", str(out), "--seed", str(seed), "--insecure-seed"]
    start = time.monotonic()
    process = subprocess.Popen(command, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    lines = []
    for line in process.stderr:
        lines.append((time.monotonic() - start, line.rstrip("\n")))
        if steps and line.startswith("dpopt synthesize:"):
            print(f"  {lines[-1][0]:8.1f} s  {line.rstrip()}", flush=True)
    if process.wait() != 0:
        sys.exit("\n".join(text for _, text in lines[-20:]))
    stats = "\n".join(text for _, text in lines)
    field = lambda name: re.search(rf"{re.escape(name)}: (.*)", stats).group(1).strip()  # noqa: E731
    user, system = float(field("User time (seconds)")), float(field("System time (seconds)"))
    wall = field("Elapsed (wall clock) time (h:mm:ss or m:ss)")
    peak = int(field("Maximum resident set size (kbytes)")) / 1024
    con = duckdb.connect()
    names = [f"a{j:02d}" for j in range(d)]
    columns = con.execute(f"SELECT {', '.join(f'CAST({a} AS UTINYINT) AS {a}' for a in names)} "
                          f"FROM read_parquet('{out / 'synthetic.parquet'}')").fetchnumpy()  # labels: the codes
    con.close()
    synthetic = np.column_stack([np.asarray(columns[a]) for a in names])
    pairs = d * (d - 1) // 2
    print(f"| {d} | {n:,} | {pairs} | {len(synthetic):,} | {user:.1f} s + {system:.1f} s | {wall} | "
          f"{peak:,.0f} MiB | {tvd2(levels, data, synthetic):.5f} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=["30x100000", "30x1000000", "14x10000000"],
                        help="ATTRIBUTESxRECORDS, run in this order")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work", type=Path, default=Path("/tmp/synthscale"))
    parser.add_argument("--dpopt", default=str(Path(sys.executable).with_name("dpopt")))
    parser.add_argument("--steps", action="store_true", help="print each progress line with its wall time")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    print("| attributes | records (data) | two-way tables | synthetic records | CPU (user + system) | wall | "
          "peak memory | 2-way TVD |")
    print("|---|---|---|---|---|---|---|---|")
    for size in args.sizes:
        d, n = (int(x) for x in size.split("x"))
        run(d, n, args.seed, args.work, args.dpopt, args.steps)


if __name__ == "__main__":
    main()
