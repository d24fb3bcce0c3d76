"""Sensitivity spaces: derivation (closed forms), enumeration (brute force), subspaces."""

from dpopt.sensitivity.derive import derive
from dpopt.sensitivity.enumerate import enumerate_space
from dpopt.sensitivity.space import SensitivitySpace
from dpopt.sensitivity.subspace import DenseSubspace, FullSpace, Subspace, SumZeroSpace, span_of

__all__ = [
    "DenseSubspace",
    "FullSpace",
    "SensitivitySpace",
    "Subspace",
    "SumZeroSpace",
    "derive",
    "enumerate_space",
    "span_of",
]
