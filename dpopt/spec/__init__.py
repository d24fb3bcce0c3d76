"""Spec models and loading.

The names below are imported on first use (PEP 562), so that a command imports only the
modules it uses (e.g. ``dpopt verify`` of a Gaussian certificate).
"""

from __future__ import annotations

from dpopt._lazy import lazy_exports

__all__ = lazy_exports(__name__, {
    "PRIVACY_DEFINITIONS": "dpopt.spec.models",
    "Spec": "dpopt.spec.models",
    "canonical_json": "dpopt.spec.load",
    "load_spec": "dpopt.spec.load",
    "spec_document": "dpopt.spec.load",
    "spec_sha256": "dpopt.spec.load",
})
