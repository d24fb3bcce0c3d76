"""``dpopt verify``: re-derive every claim of a certificate from the spec it embeds.

Nothing computed when the certificate was issued is trusted: the spec is re-validated,
re-hashed and compiled here (:func:`dpopt.compile`, once: its query, invariant domain and
sensitivity space serve every re-check), the sensitivity re-enumerated where small, the
mechanism rebuilt from its recorded parameters and its privacy re-evaluated against the
spec's target (exact or 60-digit arithmetic), and the predicted utility recomputed. Every
number the certificate records is then compared with its recomputation, and every key it
holds must be known (:mod:`dpopt.certificate.recorded`): what ``dpopt report`` prints and
``dpopt release`` uses is what was verified.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from dpopt.certificate.build import guarantee_block, output_block
from dpopt.certificate.claims import all_claims
from dpopt.certificate.composition import composition_checks, groups_record_check, joint_block
from dpopt.certificate.hierarchy_budget import verify_hierarchy
from dpopt.certificate.model import Certificate
from dpopt.certificate.intervals import certified_per_cell
from dpopt.certificate.recorded import certificate_schema, compare, difference, recorded_check_claims, same_text
from dpopt.core.blas import one_blas_thread
from dpopt.core.checks import Check
from dpopt.errors import CertificateError, DpoptError
from dpopt.mechanisms import Mechanism, registry
from dpopt.privacy.gaussian import uncertified_epsilon
from dpopt.problem import Problem, compile
from dpopt.sensitivity.space import SensitivitySpace
from dpopt.spec.load import load_spec, spec_sha256

_HOSTILE = (DpoptError, ArithmeticError, ValueError, TypeError, KeyError, AttributeError, IndexError)
"""What evaluating a hostile certificate's numbers may raise; verify turns it into a failed claim."""

STRUCTURAL_CLAIMS = ("schema", "spec_sha256", "guarantee", "sensitivity", "mechanism.parameters", "mechanism.privacy",
                     "mechanism.title", "utility", "utility.per_cell", "candidates.chosen")
"""The claims :func:`verify` re-derives besides the certificate's recorded checks."""


def output_claims(data: dict) -> int:
    """1 when :func:`verify` re-derives the ``output`` claim (the certificate or its spec states a rounding), else 0:
    a claim besides :data:`STRUCTURAL_CLAIMS`."""
    spec = data.get("spec")
    return int("output" in data or isinstance(spec, dict) and spec.get("output") is not None)


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
    """Re-check every claim of a certificate, and every number it records.

    Parameters
    ----------
    certificate : Certificate, dict or path

    Returns
    -------
    Verification
        ``passed`` is True only when every claim holds; failed claims are named. A block
        holding a key verify does not know fails the claim ``schema``
        (:mod:`dpopt.certificate.recorded`); recorded parameters, privacy summary, utility,
        per-cell errors and composition blocks that differ from their recomputation fail
        their own claims.

    Raises
    ------
    CertificateError
        The file is not a dpopt certificate at all, or is a plan's (:func:`dpopt.plan.verify_plan`).
    """
    with one_blas_thread():  # as the solve (dpopt.core.blas)
        return _verify(certificate)


def _verify(certificate: Certificate | dict | str | Path) -> Verification:
    """:func:`verify`, its BLAS limited by the caller."""
    cert = Certificate.read(certificate)
    data = cert.data
    if data.get("kind") == "plan":  # the plan layer sits above this one: it verifies its own certificates
        raise CertificateError("this is a release plan's certificate: verify it with dpopt.plan.verify_plan "
                               "(or `dpopt verify`)")
    if data.get("kind") == "synthesis":  # the synthesis layer sits above this one: it verifies its measurements
        raise CertificateError("this is a synthesis certificate: verify it with dpopt.synthesis.verify_synthesis "
                               "(or `dpopt verify`)")
    if data.get("kind") == "hierarchy":  # the whole of a hierarchical release: its levels are verified one by one
        raise CertificateError("this is a hierarchical release's certificate: verify it with "
                               "dpopt.verify_hierarchy_release (or `dpopt verify`)")
    schema = certificate_schema(data)
    if not all(isinstance(data.get(k), dict) for k in ("spec", "guarantee", "sensitivity", "mechanism", "utility")) \
            or not isinstance(data.get("checks"), list) \
            or any(k in data and not isinstance(data[k], dict) for k in ("groups", "hierarchy", "postprocess")):
        return Verification([schema])  # a block is not even an object: nothing else can be read
    checks: list[Check] = [schema]
    try:
        spec = load_spec(data["spec"])
    except DpoptError as exc:
        return Verification(checks + [Check("spec", "re-validate the embedded spec", False, str(exc))])
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
    if output_claims(data):
        recorded = output_block(spec)
        checks.append(Check("output", "the rounding of the published numbers is the spec's (output.decimals), stated "
                            "as post-processing", data.get("output") == recorded,
                            f"{spec.output.decimals} decimals" if spec.output is not None else "the spec states none"))
    checks.append(
        Check("sensitivity", "re-derived from the spec (structural closed forms)",
              data["sensitivity"] == space.summary(),
              f"l1={space.l1}, l2²={space.l2_squared}, linf={space.linf}, rank={space.rank}")
    )
    try:
        mechanism = rebuild_mechanism(data, space)
        recomputed = all_claims(problem, mechanism)
        checks.extend(record_checks(data, problem, mechanism))
    except CertificateError as exc:
        return Verification(checks + [Check("mechanism", "rebuild from family and parameters", False, str(exc))],
                            problem)
    except _HOSTILE as exc:  # a hostile certificate (σ = 0, NaN, a list for a number) breaks an evaluation
        return Verification(checks + [Check("mechanism", "evaluate the recorded mechanism", False,
                                            f"{type(exc).__name__}: {exc}")], problem)
    try:
        if "groups" in data:  # a grouped release (dpopt release --group-by): its composed guarantee
            block = data["groups"]
            joint, joint_checks = joint_block(spec, problem.query, space, mechanism,
                                              [row.get("groups") for row in block.get("levels") or []])
            recomputed += ([groups_record_check(spec, block, joint=joint)] + joint_checks
                           + composition_checks(spec, block, joint))
        if "hierarchy" in data:  # one level of a hierarchical release: the levels' budgets and composition
            checks.extend(verify_hierarchy(spec, data["hierarchy"], data))
    except _HOSTILE as exc:
        checks.append(Check("composition", "evaluate the recorded composition block", False,
                            f"{type(exc).__name__}: {exc}"))
    checks.extend(recomputed)
    checks.extend(recorded_check_claims(data["checks"], recomputed))
    return Verification(checks, problem)


def record_checks(data: dict, problem: Problem, mechanism: Mechanism) -> list[Check]:
    """Every number the certificate records about its mechanism, recomputed and compared
    (:func:`dpopt.certificate.recorded.compare`): the parameters (derived fields such as a span,
    its rank or a K-norm ball's volume included), the privacy summary (μ, ρ, ε at each δ), the
    title and caveats, the predicted utility and its per-cell errors, and the chosen candidate."""
    record = data["mechanism"]
    space, spec = problem.space, problem.spec
    predicted = mechanism.expected_utility(spec.utility)
    utility = {k: v for k, v in data["utility"].items() if k != "per_cell"}
    notes = record.get("notes")
    missing = [n for n in mechanism.notes() if not isinstance(notes, list) or n not in notes]
    chosen = [row for row in data.get("candidates") or [] if isinstance(row, dict)
              and row.get("family") == mechanism.family and "parameters" in row]
    expected_row = {"family": mechanism.family, "parameters": _json(mechanism.parameters),
                    "utility": _json(predicted.to_dict())}
    off = difference(chosen[0], expected_row) if len(chosen) == 1 else f"{len(chosen)} rows for {mechanism.family}"
    return [
        *mechanism_record_checks(record, space, mechanism),
        Check("mechanism.title", "the recorded title and caveats are the family's",
              record.get("title") == mechanism.title and not missing
              and all(isinstance(n, str) for n in notes or []),
              "equal" if not missing else f"caveat missing: {missing[0][:80]}"),
        compare("utility", f"predicted utility E[{predicted.metric}] ({predicted.method})", utility,
                _json(predicted.to_dict())),
        compare("utility.per_cell", "per-cell standard errors, margins and interval half-widths (method, level)",
                data["utility"].get("per_cell"), _json(certified_per_cell(mechanism, problem))),
        Check("candidates.chosen", "the comparison's row of the chosen family is the certified mechanism",
              off is None, off or f"the row of {mechanism.family} equals the mechanism and its utility"),
    ]


def mechanism_record_checks(record: dict, space: SensitivitySpace, mechanism: Mechanism) -> list[Check]:
    """The recorded ``parameters`` and ``privacy`` of a certificate's mechanism block against the
    rebuilt mechanism's (what ``dpopt report`` prints as the headline). The ε displayed at each δ
    is recomputed in double precision (:func:`dpopt.privacy.gaussian.uncertified_epsilon`): the
    comparison's tolerance is 10⁻⁹, the guarantee itself is checked by the privacy claims."""
    with uncertified_epsilon():
        summary = mechanism.privacy_summary(space)
    return [
        compare("mechanism.parameters", "mechanism parameters (rebuilt from the spec's sensitivity space)",
                record.get("parameters"), _json(mechanism.parameters)),
        compare("mechanism.privacy", "privacy summary (μ, ρ, ε at each δ)", record.get("privacy"),
                _json(summary)),
    ]


_SCALARS = frozenset({str, int, float, bool, type(None)})
_CONTAINERS = frozenset({dict, list})


def _json(value):
    """``value`` as the certificate's JSON would hold it: ``value`` itself when it holds only dicts with string keys,
    lists, str, int, float, bool and None (exactly these types, which a dump and a parse give back equal: floats
    by their shortest repr, NaN and ±inf as written), else a dump and a parse (tuples, numpy scalars, ...). The
    175,270 per-cell records of the range example cost 0.5 s to dump and parse, 0.1 s to check."""
    return value if _plain_json(value) else json.loads(json.dumps(value))


def _plain_json(value) -> bool:
    """``value`` is made of the types :func:`_json` returns as they are (each container's item types tested once)."""
    stack = [value]
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind in _SCALARS:
            continue
        if kind is dict:
            if set(map(type, node)) - {str}:
                return False
            children = node.values()
        elif kind is list:
            children = node
        else:
            return False
        types = set(map(type, children))
        if types - _SCALARS - _CONTAINERS:
            return False
        if types & _CONTAINERS:
            stack.extend(c for c in children if type(c) in _CONTAINERS)
    return True


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
