"""The pipeline: spec → sensitivity space → candidates → mechanism → certificate."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from dpopt.certificate.build import certify
from dpopt.certificate.model import Certificate
from dpopt.design.select import Candidate, design_candidates, select
from dpopt.domain.queries import compile_query
from dpopt.mechanisms import Mechanism
from dpopt.sensitivity.derive import derive
from dpopt.sensitivity.space import SensitivitySpace
from dpopt.spec.load import load_spec
from dpopt.spec.models import Spec


@dataclass(frozen=True)
class Solution:
    """What :func:`solve` returns.

    Attributes
    ----------
    spec : Spec
    space : SensitivitySpace
    mechanism : Mechanism
        The selected, certified mechanism.
    candidates : list of Candidate
        Every family considered, with its predicted utility or the reason it was excluded.
    certificate : Certificate
    """

    spec: Spec
    space: SensitivitySpace
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
            "labels": list(compile_query(self.spec).labels),
            "spec_sha256": self.certificate["spec_sha256"],
            "per_cell": self.certificate["utility"].get("per_cell"),
        }


def solve(spec: Spec | str | Path | Mapping[str, Any]) -> Solution:
    """Derive, design, select and certify.

    Parameters
    ----------
    spec : Spec, path or dict
        Anything :func:`dpopt.load_spec` accepts.

    Returns
    -------
    Solution

    Raises
    ------
    SpecError, UnsupportedSpecError
        Malformed or unsupported spec.
    CalibrationError
        No family meets the target, or certification failed.

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
    spec = load_spec(spec)
    space = derive(spec)
    candidates = design_candidates(spec, space)
    chosen = select(candidates, spec.utility.metric)
    certificate = certify(spec, space, chosen.mechanism, chosen.utility, candidates)
    return Solution(spec, space, chosen.mechanism, candidates, certificate)
