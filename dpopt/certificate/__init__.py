"""Certificates: assembly, independent verification, reports."""

from dpopt.certificate.build import certify
from dpopt.certificate.checks import Check
from dpopt.certificate.model import Certificate, write_atomic
from dpopt.certificate.report import render_html, render_markdown
from dpopt.certificate.verify import Verification, verify

__all__ = [
    "Certificate",
    "Check",
    "Verification",
    "certify",
    "render_html",
    "render_markdown",
    "verify",
    "write_atomic",
]
