"""Private keys and quantiles at scale: partition selection and a median per age group on 1 M rows.

Synthetic visits (persons with a geometric number of visits, mean 3.3, capped at 12; each person's
home clinic drawn from a Zipf law over 20,000 clinics, so most clinics have a handful of persons;
durations 0–120; seed fixed) are written to Parquet, then ``specs/visits_private_clinics.yaml``
(its clinic column private, three declared clinics) is released on them. The script prints the time
of the certificate (from the spec alone), of the whole release (bounding each part in DuckDB,
counting, selection, noise, the four medians' exponential mechanisms), how many clinics the data
hold and how many were released (the first number is for this benchmark only: a release never
states it).

Run: python benchmarks/bench_selection.py [--rows 1000000]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from dpopt.rng import random_source
from dpopt.selection import certify, release_selection

SPEC = Path(__file__).resolve().parents[1] / "specs" / "visits_private_clinics.yaml"
AGES = np.array(["0-17", "18-39", "40-64", "65+"])


def write(path: Path, rows: int, clinics: int = 20_000, seed: int = 28) -> int:
    """The synthetic file; returns the number of distinct clinics in it."""
    rng = np.random.default_rng(seed)
    visits = np.minimum(rng.geometric(0.3, size=rows), 12)
    person = np.repeat(np.arange(len(visits)), visits)[:rows]
    home = np.minimum(rng.zipf(1.3, size=person[-1] + 1), clinics) - 1
    names = np.array([f"c{i:05d}" for i in range(clinics)])
    clinic = names[home[person]]
    table = pa.table({
        "person_id": pa.array(person.astype(str)),
        "age_group": pa.array(AGES[rng.integers(0, 4, person[-1] + 1)][person]),
        "clinic": pa.array(clinic),
        "duration": pa.array(rng.integers(0, 121, rows).astype(str)),
    })
    pq.write_table(table, path)
    return len(np.unique(clinic))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000_000])
    args = parser.parse_args()
    start = time.perf_counter()
    certify(SPEC)
    print(f"certificate (spec only): {time.perf_counter() - start:.2f} s")
    for rows in args.rows:
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "visits.parquet"
            found = write(path, rows)
            start = time.perf_counter()
            _, document, operator = release_selection(SPEC, path, random_source())
            seconds = time.perf_counter() - start
            counts = document["releases"][0]
            print(f"{rows:,} rows, {operator['bounding'][0]['persons']:,} persons, {found:,} clinics in the data: "
                  f"release {seconds:.2f} s; {len(counts['values'])} clinics released "
                  f"({len(counts['declared'])} declared, {len(counts['selected'])} selected)")


if __name__ == "__main__":
    main()
