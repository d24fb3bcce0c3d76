"""``dpopt verify``: re-derive every claim of a certificate from the spec it embeds.

Nothing computed when the certificate was issued is trusted: the spec is re-validated,
re-hashed and compiled here (:func:`dpopt.compile`, once: its query, invariant domain and
sensitivity space serve every re-check), the sensitivity re-enumerated where small, the
mechanism rebuilt from its recorded parameters and its privacy re-evaluated against the
spec's target (exact or 60-digit arithmetic), and the predicted utility recomputed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from dpopt.certificate.build import guarantee_block
from dpopt.certificate.claims import all_claims
from dpopt.certificate.composition import composition_checks
from dpopt.certificate.hierarchy_budget import verify_hierarchy
from dpopt.certificate.model import Certificate
from dpopt.core.checks import Check
from dpopt.errors import CertificateError, DpoptError
from dpopt.mechanisms import Mechanism, registry
from dpopt.problem import Problem, compile
from dpopt.sensitivity.space import SensitivitySpace
from dpopt.spec.load import load_spec, spec_sha256

STRUCTURAL_CLAIMS = ("spec_sha256", "guarantee", "sensitivity", "utility")
"""The claims :func:`verify` re-derives besides the certificate's recorded checks."""


@dataclass(frozen=True)
class Verification:
    """The outcome of :func:`verify`: one :class:`Check` per claim, and the problem the
    verifier compiled from the embedded spec (None when it could not), for a caller that
    re-checks more on the same spec (a plan's per-query certificates)."""

    checks: list[Check]
    problem: Problem | None = None

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if not c.passed]


def verify(certificate: Certificate | dict | str | Path) -> Verification:
    """Re-check every claim of a certificate.

    Parameters
    ----------
    certificate : Certificate, dict or path

    Returns
    -------
    Verification
        ``passed`` is True only when every claim holds; failed claims are named.

    Raises
    ------
    CertificateError
        The file is not a dpopt certificate at all, or is a plan's (:func:`dpopt.plan.verify_plan`).
    """
    cert = Certificate.read(certificate)
    data = cert.data
    if data.get("kind") == "plan":  # the plan layer sits above this one: it verifies its own certificates
        raise CertificateError("this is a release plan's certificate: verify it with dpopt.plan.verify_plan "
                               "(or `dpopt verify`)")
    if data.get("kind") == "hierarchy":  # the whole of a hierarchical release: its levels are verified one by one
        raise CertificateError("this is a hierarchical release's certificate: verify it with "
                               "dpopt.verify_hierarchy_release (or `dpopt verify`)")
    checks: list[Check] = []

    try:
        spec = load_spec(data["spec"])
    except DpoptError as exc:
        return Verification([Check("spec", "re-validate the embedded spec", False, str(exc))])
    digest = spec_sha256(spec)
    checks.append(
        Check("spec_sha256", "SHA-256 of the canonical JSON of the embedded spec", digest == data["spec_sha256"],
              f"recomputed {digest}")
    )
    try:
        problem = compile(spec)
    except DpoptError as exc:
        return Verification(checks + [Check("sensitivity", "re-derive from the spec", False, str(exc))])
    space = problem.space
    checks.append(
        Check("guarantee", "the guarantee and its scope equal the spec's target and adjacency",
              data["guarantee"] == guarantee_block(spec, space), f"{spec.privacy.definition} {spec.privacy.parameters}")
    )
    checks.append(
        Check("sensitivity", "re-derived from the spec (structural closed forms)",
              data["sensitivity"] == space.summary(),
              f"l1={space.l1}, l2²={space.l2_squared}, linf={space.linf}, rank={space.rank}")
    )
    try:
        mechanism = rebuild_mechanism(data, space)
    except CertificateError as exc:
        return Verification(checks + [Check("mechanism", "rebuild from family and parameters", False, str(exc))],
                            problem)
    recomputed = all_claims(problem, mechanism)
    if "groups" in data:  # a grouped release (dpopt release --group-by): its composed guarantee
        recomputed += composition_checks(spec, data["groups"])
    if "hierarchy" in data:  # one level of a hierarchical release: the levels' budgets and composition
        checks.extend(verify_hierarchy(spec, data["hierarchy"]))
    checks.extend(recomputed)
    checks.append(_utility_check(spec, mechanism, data["utility"]))
    reproduced = {c.claim for c in recomputed}
    for recorded in data["checks"]:
        claim = recorded.get("claim") if isinstance(recorded, dict) else None
        if claim not in reproduced or recorded.get("passed") is not True:
            checks.append(Check(f"recorded:{claim}", "every recorded claim is re-derived and holds", False,
                                "this claim was not reproduced by verification"))
    return Verification(checks, problem)


def rebuild_mechanism(data: dict, space: SensitivitySpace) -> Mechanism:
    """The mechanism a certificate describes, rebuilt from its family and parameters.

    Raises
    ------
    CertificateError
        Unknown family or parameters the family does not accept.
    """
    family = data["mechanism"].get("family")
    cls = registry().get(family)
    if cls is None:
        raise CertificateError(f"unknown mechanism family {family!r}")
    try:
        return cls.from_parameters(data["mechanism"]["parameters"], space)
    except (KeyError, TypeError, ValueError) as exc:
        raise CertificateError(f"bad parameters for {family}: {exc}") from None


def _utility_check(spec, mechanism, recorded: dict) -> Check:
    try:
        predicted = mechanism.expected_utility(spec.utility)
    except DpoptError as exc:
        return Check("utility", "recompute the predicted utility", False, str(exc))
    value = recorded.get("value")
    ok = (
        recorded.get("metric") == predicted.metric
        and isinstance(value, (int, float))
        and math.isclose(value, predicted.value, rel_tol=1e-9, abs_tol=1e-12)
    )
    return Check("utility", f"recompute E[{predicted.metric}] ({predicted.method})", ok,
                 f"recomputed {predicted.value:.12g}, recorded {value}")
