"""Empirical privacy audits: Monte Carlo attempts to refute a certificate."""

from dpopt.audit.empirical import AuditResult, audit_answer, audit_mechanism
from dpopt.audit.run import audit

__all__ = ["AuditResult", "audit", "audit_answer", "audit_mechanism"]
