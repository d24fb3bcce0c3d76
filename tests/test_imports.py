"""Start-up: heavy libraries are imported by the stages that use them, not by ``import dpopt``.

Each check runs in a fresh interpreter (a subprocess), since this test session has
already imported everything.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dpopt.core.families import FAMILY_MODULES
from dpopt.mechanisms import registry

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("cvxpy", "matplotlib", "duckdb", "dask")
VERIFY_NEEDS_NONE_OF = HEAVY + ("scipy", "networkx", "sympy", "randomgen", "yaml", "mpmath")
"""Not imported by ``dpopt verify`` of a μ-GDP Gaussian certificate: no part of scipy (its array-API layer
alone costs 1.5–2.5 numpy imports; Φ, log Φ and Φ⁻¹ come from :mod:`dpopt.core.normal`, query matrices are
built when used), nor networkx, sympy, randomgen, PyYAML (a JSON certificate) or mpmath (its
privacy check is exact rational arithmetic; the second route's window end and μ bracket are
double-precision roots). python-flint (about 40 ms) is allowed: the count is measured on the lattice, and the
sampler claim draws exact discrete Gaussian noise, whose inversion thresholds are Arb evaluations
(:mod:`dpopt.noise.exp_inversion`)."""
GAUSSIAN_COUNT = {"dpopt": 1, "name": "count", "data": {"attributes": {"a": ["x"]}}, "query": {"kind": "count"},
                  "adjacency": "add_remove", "privacy": {"gdp": {"mu": 1.0}}, "mechanism": "gaussian"}


def _loaded_after(code: str, libraries: tuple[str, ...] = HEAVY) -> set[str]:
    """The ``libraries`` present in ``sys.modules`` after running ``code`` in a fresh interpreter."""
    probe = code + f"\nimport sys\nprint(' '.join(m for m in {libraries!r} if m in sys.modules))"
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, cwd=ROOT,
                         check=True)
    return set(out.stdout.split())


def test_import_dpopt_loads_no_heavy_library():
    assert _loaded_after("import dpopt") == set()


def test_the_public_names_load_no_heavy_library():
    # every name of the flat namespace (solve, verify, render_html, registry, ...) resolved
    assert _loaded_after("import dpopt\nfor n in dpopt.__all__: getattr(dpopt, n)") == set()


def test_the_cli_module_loads_no_heavy_library():
    assert _loaded_after("import dpopt.cli\ndpopt.cli.build_parser()") == set()


def test_a_gaussian_solve_loads_no_heavy_library():
    code = ("import dpopt\ndpopt.solve({'dpopt': 1, 'name': 'count', 'data': {'attributes': {'a': ['x']}},"
            "'query': {'kind': 'count'}, 'adjacency': 'add_remove', 'privacy': {'gdp': {'mu': 1.0}},"
            "'mechanism': 'gaussian'})")
    assert _loaded_after(code) == set()


def test_an_auto_solve_with_its_report_loads_neither_scipy_stats_nor_cvxpy(tmp_path):
    # every family is looked up (auto), the report drawn: scipy.stats (~0.7 s) is imported only to sample
    # a truncated normal, cvxpy only to solve a convex program, and this spec needs neither
    args = ["solve", "specs/count_add_remove.yaml", "--out", str(tmp_path / "out")]
    code = ("import contextlib, io\nimport dpopt.cli\nwith contextlib.redirect_stdout(io.StringIO()):\n"
            f"    assert dpopt.cli.main({args!r}) == 0")
    assert _loaded_after(code, ("scipy.stats", "cvxpy")) == set()


@pytest.mark.parametrize("utility", [{"metric": "l2"}, {"metric": "l1"}, {"metric": "usefulness", "gamma": 1.0}])
def test_verify_of_a_gaussian_certificate_loads_none_of_the_slow_libraries(tmp_path, utility):
    import dpopt

    path = tmp_path / "certificate.json"
    dpopt.solve(dict(GAUSSIAN_COUNT, utility=utility)).certificate.write(path)
    code = ("import contextlib, io\nimport dpopt.cli\nwith contextlib.redirect_stdout(io.StringIO()):\n"
            f"    assert dpopt.cli.main(['verify', {str(path)!r}]) == 0")
    assert _loaded_after(code, VERIFY_NEEDS_NONE_OF) == set()


def test_a_submodule_import_does_not_hide_the_function_of_the_same_name():
    import dpopt
    import dpopt.solve  # noqa: F401  (binds the submodule on the package)

    assert callable(dpopt.solve)


@pytest.mark.parametrize("family", sorted(FAMILY_MODULES))
def test_every_declared_family_is_defined_in_its_declared_module(family):
    cls = registry()[family]
    assert cls.family == family and cls.__module__ == FAMILY_MODULES[family]


def test_the_registry_lists_the_declared_families():
    assert list(registry()) == list(FAMILY_MODULES)
