"""The sensitivity space of a spec: Semi-DP with invariants, the closed forms without.

:func:`derive` dispatches between :func:`dpopt.sensitivity.semi_space.derive_semi`
(invariants, Cho & Awan) and :func:`dpopt.sensitivity.plain.derive_plain` (the closed
forms of the plain adjacencies), which the Semi-DP derivation itself builds on.
"""

from __future__ import annotations

from dpopt.sensitivity.plain import derive_plain
from dpopt.sensitivity.semi_space import derive_semi
from dpopt.sensitivity.space import SensitivitySpace
from dpopt.spec.models import Spec


def derive(spec: Spec) -> SensitivitySpace:
    """Derive the sensitivity space of the spec's query under its adjacency.

    Raises
    ------
    UnsupportedSpecError
        A mean under add/remove; a query that does not change between neighbours;
        invariants the Semi-DP derivation (:func:`dpopt.sensitivity.semi_space.derive_semi`)
        cannot serve.
    """
    return derive_semi(spec) if spec.invariants else derive_plain(spec)
