"""``dpopt verify`` of a certificate of :mod:`dpopt.selection.design`: every claim re-derived from its spec."""

from __future__ import annotations

from dataclasses import dataclass

from dpopt.certificate.model import Certificate
from dpopt.core.checks import Check
from dpopt.errors import DpoptError
from dpopt.selection.design import certificate_body, release_checks, spec_sha256
from dpopt.spec.selection import load_selection_spec

KEYS = frozenset({"kind", "dpopt_version", "spec_sha256", "spec", "guarantee", "sensitivity", "mechanism", "utility",
                  "releases", "numerics", "checks", "test_release"})
"""Every key such a certificate may hold; any other is refused."""


@dataclass(frozen=True)
class Verification:
    """The checks of a verification, each re-derived."""

    checks: tuple[Check, ...]

    @property
    def failed(self) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if not c.passed)

    @property
    def passed(self) -> bool:
        return not self.failed


def verify_selection(certificate: Certificate) -> Verification:
    """Re-derive every claim: the spec's hash, every recorded number (a fresh design from the recorded spec
    must equal it), and the independent checks of each release's guarantee on the *recorded* numbers."""
    data = certificate.data
    unknown = sorted(set(data) - KEYS)
    checks = [Check("keys", "only the keys such a certificate holds", not unknown,
                    f"unknown: {', '.join(unknown)}" if unknown else "none unknown")]
    try:
        spec = load_selection_spec(data["spec"])
    except DpoptError as exc:
        return Verification((*checks, Check("spec", "the recorded spec loads", False, str(exc))))
    digest = spec_sha256(spec)
    checks.append(Check("spec_sha256", "SHA-256 of the canonical JSON of the recorded spec",
                        digest == data["spec_sha256"], digest))
    fresh = certificate_body(spec)
    differing = [k for k in fresh if k not in ("dpopt_version",) and fresh[k] != data.get(k)]
    checks.append(Check("recorded", "every recorded number equals its re-derivation from the spec", not differing,
                        f"differ: {', '.join(differing)}" if differing else "all equal"))
    try:
        checks += release_checks(spec, list(data["releases"]))
    except (KeyError, TypeError, ValueError, ZeroDivisionError) as exc:
        checks.append(Check("releases", "the recorded releases can be read", False, f"{type(exc).__name__}: {exc}"))
    return Verification(tuple(checks))
