"""Sensitivity spaces: derivation (closed forms), enumeration (brute force), subspaces.

The names below are imported on first use (PEP 562), so that a command imports only the
modules it uses (e.g. ``dpopt verify`` of a Gaussian certificate).
"""

from __future__ import annotations

from dpopt._lazy import lazy_exports

__all__ = lazy_exports(__name__, {
    "DenseSubspace": "dpopt.sensitivity.subspace",
    "FullSpace": "dpopt.sensitivity.subspace",
    "SensitivitySpace": "dpopt.sensitivity.space",
    "Subspace": "dpopt.sensitivity.subspace",
    "SumZeroSpace": "dpopt.sensitivity.subspace",
    "derive": "dpopt.sensitivity.derive",
    "enumerate_space": "dpopt.sensitivity.enumerate",
    "span_of": "dpopt.sensitivity.subspace",
})
