"""Generate ``visits_clinics.csv``: clinic visits, several rows per person, clinics not known in advance.

Run from the repository root: ``python specs/data/make_visits_clinics.py``. Each of 600 persons has an
age group and a home clinic: one of five large clinics (90% of persons) or one of 40 small ones
(``clinic-01`` … ``clinic-40``, a handful of persons each); they make 1 to 12 visits (a geometric
number, capped), 80% of them to the home clinic and the rest to a large clinic at random; a visit
lasts 5 to 120 minutes, longer on average for older persons. The file is fixed by the seed, so
re-running the script reproduces it byte for byte.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from make_visits import AGES, write_visits

LARGE = ["north", "south", "east", "west", "central"]
SMALL = [f"clinic-{i:02d}" for i in range(1, 41)]


def main(path: Path = Path(__file__).with_name("visits_clinics.csv"), persons: int = 600, seed: int = 2028) -> None:
    rng = np.random.default_rng(seed)
    rows = []
    for p in range(persons):
        a = int(rng.integers(len(AGES)))
        home = rng.choice(LARGE) if rng.random() < 0.9 else rng.choice(SMALL)
        for _ in range(min(int(rng.geometric(0.3)), 12)):
            clinic = home if rng.random() < 0.8 else rng.choice(LARGE)
            duration = int(np.clip(rng.normal(30 + 15 * a, 20), 5, 120))
            rows.append((f"P{p:04d}", AGES[a], clinic, duration))
    write_visits(path, rows, rng)


if __name__ == "__main__":
    main()
