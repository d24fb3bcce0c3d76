"""The pipeline: spec → compiled problem → candidates → mechanism → certificate.

Each stage takes the previous stage's output: :func:`dpopt.compile` the spec into a
:class:`~dpopt.problem.Problem` (query, invariant domain, sensitivity space), design every
family on it, select, certify from its records.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from dpopt.certificate.build import certify
from dpopt.certificate.model import Certificate
from dpopt.core.blas import one_blas_thread
from dpopt.design.select import Candidate, design_candidates, failure_reason, redesign_beaten, select
from dpopt.errors import UnsupportedSpecError
from dpopt.mechanisms import Mechanism
from dpopt.problem import OnProblem, Problem, compile
from dpopt.spec.models import Spec


@dataclass(frozen=True)
class Solution(OnProblem):
    """What :func:`solve` returns.

    Attributes
    ----------
    problem : Problem
        The compiled spec (:func:`dpopt.compile`); ``spec`` and ``space`` are its own.
    mechanism : Mechanism
        The selected, certified mechanism.
    candidates : list of Candidate
        Every family considered, with its predicted utility or the reason it was excluded.
    certificate : Certificate
    """

    problem: Problem
    mechanism: Mechanism
    candidates: list[Candidate]
    certificate: Certificate

    def mechanism_document(self) -> dict:
        """The ``mechanism.json`` of ``dpopt solve --out``: family, parameters, dimension, the
        label of each released coordinate, the spec's SHA-256 and each cell's error."""
        return {
            "family": self.mechanism.family,
            "parameters": self.mechanism.parameters,
            "dimension": self.mechanism.dimension,
            "labels": list(self.problem.labels),
            "spec_sha256": self.certificate["spec_sha256"],
            "per_cell": self.certificate["utility"].get("per_cell"),
        }


def solve(spec: Problem | Spec | str | Path | Mapping[str, Any]) -> Solution:
    """Compile, design, select and certify.

    Parameters
    ----------
    spec : Problem, Spec, path or dict
        A compiled spec (:func:`dpopt.compile`, e.g. restated for another target), used as
        it is; or anything :func:`dpopt.load_spec` accepts, compiled here.

    Returns
    -------
    Solution

    Raises
    ------
    SpecError, UnsupportedSpecError
        Malformed or unsupported spec; a spec with ``geography`` (its whole hierarchical release is
        designed by :func:`dpopt.release.solve_hierarchy`).
    CalibrationError
        No family meets the target, or none of those that do could be certified (a
        candidate whose certificate cannot be built gives way to the next best, its row
        saying why).

    Examples
    --------
    >>> import numpy as np, dpopt
    >>> sol = dpopt.solve({"dpopt": 1, "name": "count", "data": {"attributes": {"a": ["x"]}},
    ...                    "query": {"kind": "count"}, "adjacency": "add_remove",
    ...                    "privacy": {"gdp": {"mu": 1.0}}})
    >>> sol.mechanism.family, sol.mechanism.parameters["sigma"]
    ('gaussian', 1.0)
    >>> sol.mechanism.release([42.0], rng=np.random.default_rng(0)).shape
    (1,)
    """
    with one_blas_thread():  # spinning BLAS threads on a busy machine cost 10x the CPU (dpopt.core.blas)
        problem = spec if isinstance(spec, Problem) else compile(spec)
        if problem.spec.geography is not None:  # what solve certifies must be what release does
            raise UnsupportedSpecError(
                "geography",
                "a spec with geography is a hierarchical release (one design per level, composed): "
                "design it with dpopt.release.solve_hierarchy, or `dpopt solve`")
        candidates = design_candidates(problem)
        while True:  # a candidate whose certificate cannot be built gives way to the next best
            chosen = select(candidates, problem.spec.utility.metric)
            try:
                certificate = certify(problem, chosen.mechanism, chosen.utility, candidates)
            except Exception as exc:  # noqa: BLE001 - the row says why (failure_reason re-raises MemoryError)
                reason = f"its certificate could not be built: {failure_reason(exc)}"
                candidates = [Candidate(c.family, reason=reason) if c is chosen else c for c in candidates]
                candidates = redesign_beaten(problem, candidates, chosen.family)
                continue
            return Solution(problem, chosen.mechanism, candidates, certificate)
