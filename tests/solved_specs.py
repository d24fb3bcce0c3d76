"""Every example spec solved once per test session (shared by the report, audit and
second-route tests, which only read the solutions)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import dpopt
from dpopt.solve import solve

ROOT = Path(__file__).resolve().parents[1]
SPECS = sorted(p for p in (ROOT / "specs").glob("*.yaml")  # plans: tests/test_plan*.py; hierarchies:
               if "_plan" not in p.stem and "\nreleases:" not in p.read_text(encoding="utf-8")
               and "\nsynthesize:" not in p.read_text(encoding="utf-8")  # releases:
               and dpopt.load_spec(p).geography is None)  # tests/test_selection.py, tests/test_hierarchy_solve.py


@cache
def solved(path: Path) -> dpopt.Solution:
    return solve(path)
