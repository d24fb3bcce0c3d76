r"""The utility floor of every i.i.d. symmetric additive noise under ρ-zCDP or μ-GDP, for a family's utility bound.

A family whose every design adds noise with d i.i.d. coordinates, each symmetric about 0 (continuous, or on a lattice
such as ℤ or (1/D)ℤ in answer units), has l2 = d·E X² (no workload or weights; the coordinates are centred and
uncorrelated) and max_variance = E X². Under ρ-zCDP (μ-GDP: ρ = μ²/2) and with every move listed, E X² is at least
:func:`~dpopt.privacy.iid_variance_floor.second_moment_floor` (Hammersley–Chapman–Robbins and its two-sided form on
D₂ ≤ 2ρ, summed over each move's coordinates), so no design meeting the target does better than
:func:`symmetric_iid_bound`. The staircase and R²DP state it (:meth:`StaircaseMechanism.utility_bound
<dpopt.mechanisms.staircase.StaircaseMechanism.utility_bound>`, :meth:`R2DPOnCounts.utility_bound
<dpopt.mechanisms.r2dp_counts.R2DPOnCounts.utility_bound>`).
"""

from __future__ import annotations

import math

from dpopt.privacy.iid_variance_floor import FLOOR_TARGETS, budget, second_moment_floor
from dpopt.problem import Problem
from dpopt.sensitivity.patterns import move_multisets, shift_pattern

MAX_PATTERNS = 4096
"""Distinct move multisets above which no floor is stated (each is one bisection of a vector of that many sums)."""


def symmetric_iid_bound(problem: Problem) -> float | None:
    """scale·floor·(1 − 10⁻⁹) (module docstring), scale d for ``l2`` without a workload or weights and 1 for
    ``max_variance``; None for other targets and metrics, or when the space does not list every move (a sum's or a
    mean's extremes only, a hull's generators) or lists more than :data:`MAX_PATTERNS` distinct multisets."""
    spec, space = problem.spec, problem.space
    scale = problem.iid_metric_scale
    if scale is None or spec.privacy.definition not in FLOOR_TARGETS or move_multisets(space, MAX_PATTERNS) is None:
        return None
    floor = second_moment_floor(shift_pattern(space), budget(spec.privacy.definition, spec.privacy.parameters))
    value = scale * floor * (1 - 1e-9)
    return value if math.isfinite(value) and value > 0 else None
