"""What marks a certificate of :mod:`dpopt.synthesis` (light: the CLI asks it of every certificate it verifies)."""

from __future__ import annotations

from typing import Any

KIND = "synthesis"
"""The ``kind`` of a synthesis certificate (:mod:`dpopt.synthesis.certificate`)."""


def is_synthesis_certificate(data: Any) -> bool:
    """True for the JSON of a synthesis certificate."""
    return isinstance(data, dict) and data.get("kind") == KIND and "spec_sha256" in data
