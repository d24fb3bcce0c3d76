"""A solve, a verification and a report run with one BLAS thread (:mod:`dpopt.core.blas`), and the
caller's limits are restored afterwards (threadpoolctl reports each loaded BLAS library's threads)."""

from __future__ import annotations

import importlib

import numpy as np  # noqa: F401 - loads numpy's OpenBLAS, which the limit applies to
from threadpoolctl import threadpool_info

import dpopt

COUNT = {"dpopt": 1, "name": "count", "data": {"attributes": {"a": ["x"]}}, "query": {"kind": "count"},
         "adjacency": "add_remove", "privacy": {"gdp": {"mu": 1.0}}, "mechanism": "gaussian"}


def _blas_threads() -> set[int]:
    return {lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"}


def test_solve_and_verify_run_with_one_blas_thread(monkeypatch):
    solve_module = importlib.import_module("dpopt.solve")  # the package re-exports the function
    verify_module = importlib.import_module("dpopt.certificate.verify")
    before = _blas_threads()
    seen = {}
    design, certificate_schema = solve_module.design_candidates, verify_module.certificate_schema

    def spying_design(problem):
        seen["solve"] = _blas_threads()
        return design(problem)

    def spying_schema(data, *args, **kwargs):
        seen["verify"] = _blas_threads()
        return certificate_schema(data, *args, **kwargs)

    monkeypatch.setattr(solve_module, "design_candidates", spying_design)
    monkeypatch.setattr(verify_module, "certificate_schema", spying_schema)
    solution = dpopt.solve(COUNT)
    assert dpopt.verify(solution.certificate).passed
    assert seen == {"solve": {1}, "verify": {1}}
    assert _blas_threads() == before  # restored
