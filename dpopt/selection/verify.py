"""``dpopt verify`` of a certificate of :mod:`dpopt.selection.design`: every claim re-derived from its spec."""

from __future__ import annotations

from dpopt.certificate.model import Certificate
from dpopt.certificate.recorded import certificate_schema, recorded_check_claims
from dpopt.certificate.recorded_spec import recorded_blocks, recorded_spec
from dpopt.certificate.verify import Verification
from dpopt.core.checks import Check
from dpopt.selection.design import certificate_body, release_checks, spec_sha256
from dpopt.spec.selection import load_selection_spec


def verify_selection(certificate: Certificate) -> Verification:
    """Re-derive every claim: the keys (:func:`dpopt.certificate.recorded.certificate_schema`), the spec's
    hash, every recorded number (a fresh design from the recorded spec must equal it), the independent
    checks of each release's guarantee on the *recorded* numbers, and the recorded checks against them
    (each one re-derived, none missing: :func:`dpopt.certificate.recorded.recorded_check_claims`)."""
    data = certificate.data
    checks, spec = recorded_spec(data, certificate_schema(data, top="selection"), load_selection_spec, spec_sha256)
    if spec is None:  # a block missing, or not of its type, or a bad spec: nothing else can be read safely
        return Verification(checks)
    fresh = certificate_body(spec)
    checks.append(recorded_blocks(fresh, data, {*fresh, "output"} - {"dpopt_version"}))
    try:
        recomputed = release_checks(spec, list(data["releases"]))
        checks += recomputed + recorded_check_claims(data["checks"], recomputed, complete=True)
    except (KeyError, TypeError, ValueError, ZeroDivisionError, AttributeError, IndexError) as exc:
        checks.append(Check("releases", "the recorded releases can be read", False, f"{type(exc).__name__}: {exc}"))
    return Verification(checks)
