"""Generate ``visits.csv``: a small synthetic table of clinic visits, several rows per person.

Run from the repository root: ``python specs/data/make_visits.py``. Each of 300 persons has an
age group and a home clinic; they make 1 to 12 visits (a geometric number, capped), 80% of them
to the home clinic and the rest to another clinic at random; a visit lasts 5 to 120 minutes.
The file is fixed by the seed, so re-running the script reproduces it byte for byte.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

AGES = ["0-17", "18-39", "40-64", "65+"]
CLINICS = ["north", "south", "east", "west", "central"]


def main(path: Path = Path(__file__).with_name("visits.csv"), persons: int = 300, seed: int = 28) -> None:
    rng = np.random.default_rng(seed)
    rows = []
    for p in range(persons):
        age, home = rng.choice(AGES), rng.choice(CLINICS)
        for _ in range(min(int(rng.geometric(0.3)), 12)):
            clinic = home if rng.random() < 0.8 else rng.choice(CLINICS)
            rows.append((f"P{p:04d}", age, clinic, int(rng.integers(5, 121))))
    write_visits(path, rows, rng)


def write_visits(path: Path, rows: list[tuple], rng: np.random.Generator) -> None:
    """Write (person_id, age_group, clinic, duration) rows in a random order: visits in time order, not
    grouped by person."""
    order = rng.permutation(len(rows))
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["person_id", "age_group", "clinic", "duration"])
        writer.writerows(rows[i] for i in order)


if __name__ == "__main__":
    main()
