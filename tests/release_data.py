"""Synthetic record files for the release tests (CSV and Parquet), with their generator kept here."""

from __future__ import annotations

import csv

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

RACES, SEXES = ["white", "black", "other"], ["f", "m"]


def make_records(n: int = 3000, seed: int = 3, groups: int = 40) -> list[dict]:
    """Records with a block (int), a tract (block // 10, as text), race, sex and income in [0, 100]."""
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(n):
        block = int(rng.integers(0, groups))
        rows.append(
            {
                "block": block,
                "tract": f"t{block // 10}",
                "race": RACES[rng.integers(0, 3)],
                "sex": SEXES[rng.integers(0, 2)],
                "income": int(rng.integers(0, 101)),
            }
        )
    return rows


def public_groups(groups: int = 40, text: bool = False) -> dict[str, list]:
    """The public lists of the grouping columns of :func:`make_records` with ``groups`` blocks: every block
    (as text with ``text``, as a CSV file holds it) and tract it can draw (a grouped release needs its groups
    declared, issue 35)."""
    blocks = [str(b) if text else b for b in range(groups)]
    return {"block": blocks, "tract": sorted({f"t{b // 10}" for b in range(groups)})}


def write_csv(path, rows, header=("block", "tract", "race", "sex", "income")):
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows([[row.get(h, "") for h in header] for row in rows])
    return path


def write_parquet(path, rows, row_group_size: int = 700):
    columns = {k: [row[k] for row in rows] for k in rows[0]}
    pq.write_table(pa.table(columns), path, row_group_size=row_group_size)
    return path
