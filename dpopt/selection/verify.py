"""``dpopt verify`` of a certificate of :mod:`dpopt.selection.design`: every claim re-derived from its spec."""

from __future__ import annotations

from dpopt.certificate.model import Certificate
from dpopt.certificate.recorded import certificate_schema, recorded_check_claims
from dpopt.certificate.verify import Verification
from dpopt.core.checks import Check
from dpopt.errors import DpoptError
from dpopt.selection.design import certificate_body, release_checks, spec_sha256
from dpopt.spec.selection import load_selection_spec


def verify_selection(certificate: Certificate) -> Verification:
    """Re-derive every claim: the keys (:func:`dpopt.certificate.recorded.certificate_schema`), the spec's
    hash, every recorded number (a fresh design from the recorded spec must equal it), the independent
    checks of each release's guarantee on the *recorded* numbers, and the recorded checks against them
    (each one re-derived, none missing: :func:`dpopt.certificate.recorded.recorded_check_claims`)."""
    data = certificate.data
    checks = [certificate_schema(data, top="selection")]
    if not checks[0].passed:  # a block missing, or not of its type: nothing else can be read safely
        return Verification(checks)
    try:
        spec = load_selection_spec(data["spec"])
    except DpoptError as exc:
        return Verification([*checks, Check("spec", "the recorded spec loads", False, str(exc))])
    digest = spec_sha256(spec)
    checks.append(Check("spec_sha256", "SHA-256 of the canonical JSON of the recorded spec",
                        digest == data["spec_sha256"], digest))
    fresh = certificate_body(spec)
    differing = [k for k in {*fresh, "output"} if k not in ("dpopt_version",) and fresh.get(k) != data.get(k)]
    checks.append(Check("recorded", "every recorded number equals its re-derivation from the spec", not differing,
                        f"differ: {', '.join(differing)}" if differing else "all equal"))
    try:
        recomputed = release_checks(spec, list(data["releases"]))
        checks += recomputed + recorded_check_claims(data["checks"], recomputed, complete=True)
    except (KeyError, TypeError, ValueError, ZeroDivisionError, AttributeError, IndexError) as exc:
        checks.append(Check("releases", "the recorded releases can be read", False, f"{type(exc).__name__}: {exc}"))
    return Verification(checks)
