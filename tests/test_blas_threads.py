"""A solve, a verification and a report run with one BLAS thread (:mod:`dpopt.core.blas`), and the
caller's limits are restored afterwards (threadpoolctl reports each loaded BLAS library's threads)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from dpopt.core.blas import THREAD_VARIABLES

COUNT = {"dpopt": 1, "name": "count", "data": {"attributes": {"a": ["x"]}}, "query": {"kind": "count"},
         "adjacency": "add_remove", "privacy": {"gdp": {"mu": 1.0}}, "mechanism": "gaussian"}


SOLVE_AND_VERIFY = """
import importlib, json
import numpy
from threadpoolctl import threadpool_info
import dpopt

def threads():
    return sorted({lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"})

solve_module = importlib.import_module("dpopt.solve")  # the package re-exports the function
verify_module = importlib.import_module("dpopt.certificate.verify")
before, seen = threads(), {}
design, certificate_schema = solve_module.design_candidates, verify_module.certificate_schema

def spying_design(problem):
    seen["solve"] = threads()
    return design(problem)

def spying_schema(data, *args, **kwargs):
    seen["verify"] = threads()
    return certificate_schema(data, *args, **kwargs)

solve_module.design_candidates, verify_module.certificate_schema = spying_design, spying_schema
solution = dpopt.solve(%r)
seen["passed"] = dpopt.verify(solution.certificate).passed
print(json.dumps({"before": before, "after": threads(), **seen}))
""" % (COUNT,)


def test_solve_and_verify_run_with_one_blas_thread():
    """In a fresh interpreter without the thread variables (the test run's workers set them to one:
    tests/conftest.py, and a library loaded at one thread cannot be raised), so that the libraries start
    with a thread per core and restoring them is seen."""
    env = {k: v for k, v in os.environ.items() if k not in THREAD_VARIABLES}
    done = subprocess.run([sys.executable, "-c", SOLVE_AND_VERIFY], env=env, capture_output=True, text=True,
                          check=True)
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["passed"] and seen["solve"] == seen["verify"] == [1]
    assert seen["before"] != [1] and seen["after"] == seen["before"]  # restored


LATE_LOAD = """
import json, os
import numpy
from threadpoolctl import threadpool_info
from dpopt.core.blas import one_blas_thread

def threads():
    return {lib["filepath"]: lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"}

before = threads()
with one_blas_thread():
    import scipy.linalg  # scipy's own OpenBLAS loads here, inside the body
    inside = threads()
after = threads()
cores = len(os.sched_getaffinity(0))
print(json.dumps({"new": sorted(set(inside) - set(before)), "inside": sorted(set(inside.values())),
                  "restored": all(after[p] == n for p, n in before.items()),
                  "late_default": all(n == cores for p, n in after.items() if p not in before),
                  "variable": os.environ.get("OPENBLAS_NUM_THREADS")}))
"""


def test_a_blas_library_loaded_during_the_body_starts_with_one_thread():
    """scipy ships its own OpenBLAS, loaded when dpopt first imports scipy.linalg or scipy.optimize — inside a
    solve. threadpoolctl can only limit the libraries loaded when the body starts; the variable OpenBLAS reads
    at load time covers the others (in a fresh interpreter, where only numpy's library is loaded first)."""
    import json
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                                                                "BLIS_NUM_THREADS")}
    done = subprocess.run([sys.executable, "-c", LATE_LOAD], env=env, capture_output=True, text=True, check=True)
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    if not seen["new"]:
        import pytest

        pytest.skip("scipy and numpy share one BLAS library in this installation")
    assert seen["inside"] == [1]
    assert seen["restored"]
    assert seen["late_default"]  # one thread per available core, OpenBLAS's default (below its build's maximum)
    assert seen["variable"] is None  # the variable set for the body is removed
