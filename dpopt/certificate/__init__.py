"""Certificates: assembly and independent verification (reports: :mod:`dpopt.report`).

The names below are imported on first use (PEP 562). A certificate's
:class:`~dpopt.core.checks.Check` lives in the bottom layer :mod:`dpopt.core`.
"""

from __future__ import annotations

from dpopt._lazy import lazy_exports

__all__ = lazy_exports(__name__, {
    "Certificate": "dpopt.certificate.model",
    "Verification": "dpopt.certificate.verify",
    "certify": "dpopt.certificate.build",
    "verify": "dpopt.certificate.verify",
    "write_atomic": "dpopt.certificate.model",
})
