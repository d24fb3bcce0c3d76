"""What marks a certificate of :mod:`dpopt.selection` (light: the CLI asks it of every certificate it verifies)."""

from __future__ import annotations

from typing import Any

KIND = "selection"
"""The ``kind`` of a certificate of :mod:`dpopt.selection.design`."""


def is_selection_certificate(data: Any) -> bool:
    """True for the JSON of a certificate of :mod:`dpopt.selection.design`."""
    return isinstance(data, dict) and data.get("kind") == KIND and "spec_sha256" in data
