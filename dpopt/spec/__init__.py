"""Spec models and loading."""

from dpopt.spec.load import canonical_json, load_spec, spec_document, spec_sha256
from dpopt.spec.models import PRIVACY_DEFINITIONS, Spec

__all__ = [
    "PRIVACY_DEFINITIONS",
    "Spec",
    "canonical_json",
    "load_spec",
    "spec_document",
    "spec_sha256",
]
