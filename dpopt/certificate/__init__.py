"""Certificates: assembly, independent verification, reports.

The names below are imported on first use (PEP 562): :class:`Check` is used by the
mechanism layer below, which must be able to import it without loading the certificate
stages that build on the mechanisms.
"""

from __future__ import annotations

from dpopt._lazy import lazy_exports

__all__ = lazy_exports(__name__, {
    "Certificate": "dpopt.certificate.model",
    "Check": "dpopt.certificate.checks",
    "Verification": "dpopt.certificate.verify",
    "certify": "dpopt.certificate.build",
    "render_html": "dpopt.certificate.report",
    "render_markdown": "dpopt.certificate.report",
    "verify": "dpopt.certificate.verify",
    "write_atomic": "dpopt.certificate.model",
})
