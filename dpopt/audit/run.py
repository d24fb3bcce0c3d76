"""Audit entry point for a solution, a certificate or a spec."""

from __future__ import annotations

from pathlib import Path

from dpopt.audit.empirical import AUDIT_DRAWS, AUDIT_SEED, AuditResult, audit_answer, audit_mechanism
from dpopt.certificate.model import Certificate
from dpopt.certificate.verify import rebuild_mechanism
from dpopt.sensitivity.derive import derive
from dpopt.solve import Solution, solve
from dpopt.spec.load import load_spec, read_document


def audit(source: Solution | Certificate | str | Path, draws: int = AUDIT_DRAWS, seed: int = AUDIT_SEED) -> AuditResult:
    """Empirically audit the mechanism of a solution, a certificate file or a spec.

    A certificate is audited as written: its spec is re-derived and its mechanism rebuilt
    from the recorded parameters (so an edited certificate is audited as edited).
    """
    if isinstance(source, Solution):
        spec, space, mechanism = source.spec, source.space, source.mechanism
    else:
        if isinstance(source, Certificate):
            cert = source
        else:
            cert = Certificate.from_document(read_document(source, max_bytes=None), str(source))
            if cert is None:
                return audit(solve(source), draws=draws, seed=seed)
        spec = load_spec(cert["spec"])
        space = derive(spec)
        mechanism = rebuild_mechanism(cert.data, space)
    return audit_mechanism(mechanism, space, spec.privacy, draws=draws, seed=seed, answer=audit_answer(spec, mechanism.needs_integer_answers))
