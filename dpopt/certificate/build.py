"""Assembling the certificate from the records of each pipeline stage."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dpopt._version import __version__
from dpopt.certificate.claims import all_claims
from dpopt.certificate.model import Certificate
from dpopt.certificate.intervals import certified_per_cell
from dpopt.core.checks import Check
from dpopt.errors import CalibrationError
from dpopt.mechanisms import Mechanism, UtilityValue
from dpopt.privacy.pdp import PDP_CAVEAT
from dpopt.privacy.semi_dp import semi_dp_block
from dpopt.problem import Problem
from dpopt.sensitivity.space import SensitivitySpace
from dpopt.spec.load import spec_document, spec_sha256
from dpopt.spec.models import Spec

if TYPE_CHECKING:  # verify reads certificates without the design stage
    from dpopt.design.select import Candidate


def guarantee_block(spec: Spec, space: SensitivitySpace) -> dict:
    """The certificate's ``guarantee``: the definition, its parameters and its scope.

    Under invariants the scope also carries the Semi-DP statement (reading of a(t), what
    is protected from what, and the guarantee), :func:`dpopt.privacy.semi_dp.semi_dp_block`.
    A pdp target carries a ``note`` saying that probabilistic DP is not (ε, δ)-DP. With a
    ``data.privacy_unit`` the scope carries it (the adjacency is then person-level).
    """
    block = {
        "definition": spec.privacy.definition,
        **spec.privacy.parameters,
        "scope": {
            "adjacency": spec.adjacency.model_dump(),
            "adjacency_description": space.adjacency,
            "invariants": [inv.model_dump() for inv in spec.invariants],
            "semi_adjacent_parameter": space.semi_adjacent_parameter,
        },
    }
    if spec.invariants:
        block["scope"]["semi_dp"] = semi_dp_block(spec, space)
    if spec.data.privacy_unit is not None:  # the protected unit is a person: their id column and row bounds
        block["scope"]["privacy_unit"] = spec.data.privacy_unit.model_dump(exclude_none=True)
    if spec.privacy.definition == "pdp":
        block["note"] = PDP_CAVEAT
    return block


ROUNDING = ("post-processing of the released values (no privacy cost): each value and standard error rounded half to "
            "even to {n} decimal places, each margin of error and upper interval end rounded up and each lower "
            "interval end rounded down (the stated coverage kept)")
"""The method of the ``output`` block (:func:`output_block`), ``{n}`` the decimals."""


def output_block(spec) -> dict | None:
    """The certificate's ``output`` block: the rounding of the published numbers the spec asks for
    (``output: {decimals: N}``; a :class:`Spec` or a private-key spec), or None without one (no block: every
    value is written in full)."""
    if spec.output is None:
        return None
    return {"decimals": spec.output.decimals, "method": ROUNDING.format(n=spec.output.decimals)}


def certify(
    problem: Problem,
    mechanism: Mechanism,
    utility: UtilityValue,
    candidates: list[Candidate],
    second_route: bool = True,
) -> Certificate:
    """Evaluate every claim independently and assemble the certificate (``second_route=False``
    leaves the second route to ``dpopt verify``, which always runs it).

    The certificate is assembled from the records of the compiled problem (the spec, its
    guarantee and sensitivity space, the labels of the compiled query) and of the design.

    Raises
    ------
    CalibrationError
        If any claim fails: a certificate is never issued for a guarantee that does not hold.
    """
    spec, space = problem.spec, problem.space
    checks: list[Check] = all_claims(problem, mechanism, second_route)
    failed = [c for c in checks if not c.passed]
    if failed:
        raise CalibrationError(
            "certification failed: " + "; ".join(f"{c.claim} ({c.detail})" for c in failed)
        )
    data = {
        "dpopt_version": __version__,
        "spec_sha256": spec_sha256(spec),
        "spec": spec_document(spec),
        "guarantee": guarantee_block(spec, space),
        "sensitivity": space.summary(),
        "mechanism": {
            "family": mechanism.family,
            "title": mechanism.title,
            "parameters": mechanism.parameters,
            "privacy": mechanism.privacy_summary(space),
            "notes": mechanism.notes(),
        },
        "utility": {**utility.to_dict(), "per_cell": certified_per_cell(mechanism, problem)},
        "candidates": [c.to_dict() for c in candidates],
        "checks": [c.to_dict() for c in checks],
        "whole_release": None,
    }
    if spec.output is not None:
        data["output"] = output_block(spec)
    return Certificate(data)
