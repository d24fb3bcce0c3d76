"""Shared fixtures: spec builders and the example specs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS")
if os.environ.get("PYTEST_XDIST_WORKER"):
    # Each xdist worker (two on two cores, the default run) and what it starts use one BLAS thread: OpenBLAS's
    # default, a thread per core, lets idle threads spin, and two workers' spinning threads took the cores
    # from the computing ones (tests/test_lattice_inference.py's d = 4 regions: 0.3 s of CPU each with one
    # thread, 2.6-22.6 s with two at load 5; dpopt.core.blas limits only solve, verify and report). Read when
    # a BLAS library loads: set before any test imports numpy. A variable already set is kept.
    for name in BLAS_THREADS:
        os.environ.setdefault(name, "1")

ROOT = Path(__file__).resolve().parents[1]
SPECS = sorted(p for p in (ROOT / "specs").glob("*.yaml")  # plans: tests/test_plan*.py; releases:
               if "_plan" not in p.stem and "\nreleases:" not in p.read_text(encoding="utf-8")
               and "\nsynthesize:" not in p.read_text(encoding="utf-8"))  # test_selection.py; synthesize:
# tests/test_synthesize_cli.py
SLOW_SPECS = {
    "table_4x4_margins_pure": "the hull of a 9-dimensional sensitivity space (built up to its symmetry group, "
                              "a few seconds) and its certificate checks: 10–20 s per solve on 2 shared cores",
    "census_part2_age_ranges_gdp": "gaussian_optimal's semidefinite program for 15 age ranges under the margins: "
                                   "3.7 s of CPU per solve from Python, 4.9 s with the report, 2.5 s per verify "
                                   "(2026-12-07, load 9 on 2 cores: 20-35 s of wall time)",
    "marginals_10attr_2way_zcdp": "4,114 released counts over a 1.47e9-cell domain: the second route, the report's "
                                  "noise draws and the audit work on d = 4,114 coordinates (~20 s per solve, "
                                  "~60 s with the report)",
    "marginals_8attr_3way_invariants": "10,325 released counts, Semi-DP span of rank 6,300: the GDP slopes of 91 "
                                       "lattice variances, the per-cell Monte Carlo draws and the audit (4.6 s of "
                                       "CPU per CLI solve with the report, 2.2 s per verify; 2026-12-07, load 10)",
    "marginals_24attr_2way_replace": "2,728 released counts over a 6.9e10-cell domain, replace-one: the design "
                                     "over 2,911 reduced patterns, the report's draws (~8 s per solve, ~20 s with "
                                     "the report)",
    "range_marginals_age_prefix_zcdp": "175,270 released counts over a 7.7e8-cell domain: ~4 s per solve and per "
                                       "verify, ~10 s with the report (two 30 MB JSON documents)",
}
"""Example specs whose solve is too slow for the default run: every test parametrized by one of them is
marked ``slow``."""


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if any(getattr(v, "stem", v) in SLOW_SPECS for v in params.values() if isinstance(v, (str, Path))):
            item.add_marker(pytest.mark.slow)


SHARED_STATE = ('scope="module"', 'scope="session"', "@cache", "@lru_cache", "solved_specs")
"""What marks a test module whose tests share results computed once per test process: a module- or
session-scoped fixture, a functools cache, the example specs solved once (tests/solved_specs.py)."""


def _keeps_shared_state(module: Path) -> bool:
    text = module.read_text(encoding="utf-8")
    return any(key in text for key in SHARED_STATE)


def pytest_xdist_make_scheduler(config, log):
    """Under ``--dist load`` (the default run's), the tests of a module that keeps shared state
    (:data:`SHARED_STATE`) go to one xdist worker as one unit, the other tests one by one: with tests dealt
    out singly, both workers built each module's fixtures (the report fixtures' audits, a solved design).
    Units are dealt largest first (xdist's loadscope order), so the big modules do not end the run."""
    if config.getoption("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    shared = {module.relative_to(config.rootpath).as_posix()
              for module in (ROOT / "tests").glob("test_*.py") if _keeps_shared_state(module)}

    class SharedStateScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return module if module in shared else nodeid

    return SharedStateScheduling(config, log)


def cli_runner(capsys):
    """``run(*args)``: the ``dpopt`` command ``args`` run by :func:`dpopt.cli.main` in this process, as a
    ``subprocess.CompletedProcess`` (its exit code, standard output and error); for tests of the commands'
    results, not of the console process (tests/test_cli.py starts that), without a new interpreter's imports
    (1–2 s of CPU per command)."""
    import subprocess

    from dpopt.cli import main

    def run(*args: str) -> subprocess.CompletedProcess:
        capsys.readouterr()
        code = main(list(args))
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(list(args), code, out, err)

    return run


def make_spec(**overrides) -> dict:
    """A valid spec dict (3×2 table, replace-one, μ = 1) with fields overridden."""
    spec = {
        "dpopt": 1,
        "name": "test",
        "data": {"attributes": {"race": ["white", "black", "other"], "sex": ["f", "m"],
                                "income": {"min": 0, "max": 100}}},
        "query": {"kind": "contingency_table", "attributes": ["race", "sex"]},
        "adjacency": {"kind": "replace_one"},
        "privacy": {"gdp": {"mu": 1.0}},
    }
    spec.update(overrides)
    return spec


@pytest.fixture
def spec_dict():
    return make_spec()


def edited(value):
    """Another value of the same kind, for the tamper batteries: numbers halved (or 1 from 0), integers to −5
    (or 3), strings renamed, booleans negated, anything else (null) to a string."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return -5 if value != -5 else 3
    if isinstance(value, float):
        return value * 0.5 if value else 1.0
    if isinstance(value, str):
        return "nonsense_" + value[:12]
    return "nonsense"


def execute_notebook(name: str):
    """Execute ``notebooks/<name>.ipynb`` with nbclient (kernel python3, in its own folder).

    Returns
    -------
    notebook, text
        The executed notebook and the concatenated text of all its code-cell outputs.
    """
    import nbformat
    from nbclient import NotebookClient

    path = ROOT / "notebooks" / f"{name}.ipynb"
    notebook = nbformat.read(path, as_version=4)
    NotebookClient(
        notebook, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    ).execute()
    text = "".join(
        o.get("text", "") for c in notebook.cells if c.cell_type == "code" for o in c.get("outputs", [])
    )
    return notebook, text


def pooled_chi_square(counts, p, draws: int) -> tuple[float, float]:
    """Pearson's statistic of ``counts`` (``draws`` draws over the cells of the pmf ``p``), the cells expected
    fewer than 5 times pooled into one, and its 1 − 10⁻³ critical value (χ² with cells − 1 degrees of freedom)."""
    import numpy as np
    from scipy import stats

    big = draws * p >= 5
    observed = np.append(counts[big], counts[~big].sum())
    expected = draws * np.append(p[big], p[~big].sum())
    statistic = float(np.sum((observed - expected) ** 2 / expected))
    return statistic, float(stats.chi2.ppf(1 - 1e-3, len(observed) - 1))
