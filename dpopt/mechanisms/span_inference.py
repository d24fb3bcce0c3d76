"""``ci_volume`` of an exact Gaussian measurement on a proper sensitivity span, and its stated cost.

The regions are those of :mod:`dpopt.stats.lattice_span_regions` (coverage proven from the full-d region of
:func:`~dpopt.mechanisms.lattice.lattice_inference`); this module picks the one a release supports (the full
release y for ``gaussian``, the projected release for ``projected_gaussian``), caches it, and states and re-checks
the cost of exactness against the continuous region on the span (:func:`~dpopt.mechanisms.exact_cost.exact_cost`,
claim :data:`~dpopt.mechanisms.exact_cost.EXACT_COST_CLAIM`: the metric, both values and the ratio recomputed).
"""

from __future__ import annotations

from fractions import Fraction
from functools import lru_cache

from dpopt.core.checks import Check
from dpopt.mechanisms.exact_cost import EXACT_COST_CLAIM, same_cost
from dpopt.mechanisms.lattice import discrete_variance, lattice_inference
from dpopt.sensitivity.subspace import Subspace, SumZeroSpace
from dpopt.stats.lattice_span_regions import ProjectedRegion, SpanRegion, projected_region, span_region


@lru_cache(maxsize=32)
def _region(sigma2: Fraction, dimension: int, rank: int, sum_zero: bool, alpha: float,
            full_release: bool) -> SpanRegion | ProjectedRegion | str:
    """:func:`span_inference` on hashable arguments (the cache's key)."""
    if rank < 1:
        return "the sensitivity span has rank 0: there is no region of positive dimension to measure"
    full = lattice_inference("ci_volume", (sigma2,) * dimension, alpha)
    if isinstance(full, str):
        return full
    projected = projected_region(full, rank, discrete_variance(sigma2), sum_zero)
    if not full_release:
        return projected
    found = span_region(full, rank, sum_zero)
    if projected.statistic is not None and found.log_volume is not None and projected.log_volume < found.log_volume:
        return projected  # the full release computes the projected one: the smaller of the two regions
    return found


def span_inference(sigma2: Fraction, span: Subspace, alpha: float, full_release: bool
                   ) -> SpanRegion | ProjectedRegion | str:
    """The ``ci_volume`` region of i.i.d. N_ℤ(0, σ²) noise measured on all d answers, on the proper ``span``:
    of the projected release x_⊥ + P_V y, or of the full release y (``full_release``: its own region, or the
    projected release's when that one's exact-law ball is the smaller, y giving x_⊥ + P_V y); or why it cannot be derived
    (a string: the full-d region's convolution budget, a region that is a point, a span of rank 0). Cached: a
    design, its certificate and ``dpopt verify`` ask for the same."""
    return _region(Fraction(sigma2), int(span.ambient), int(span.rank), isinstance(span, SumZeroSpace),
                   float(alpha), bool(full_release))


def span_cost_check(stated: dict | None, expected: dict | None) -> Check:
    """``dpopt verify``'s check of the stated cost of a span region: present exactly when the spec's metric is
    ``ci_volume`` on a proper span of an exact measurement, and then equal to its recomputation (metric, the
    exact value (this mechanism's prediction), the continuous region's volume and the ratio, 10⁻⁹ relative)."""
    holds = (stated is None) == (expected is None) and (expected is None or same_cost(stated, expected))
    detail = ("none stated, none due" if stated is None and expected is None else
              f"stated {stated!r}, recomputed {expected!r}")
    return Check(EXACT_COST_CLAIM, "the stated cost of exactness of the span region: the spec's ci_volume, this "
                 "mechanism's predicted value, the continuous region's volume on the span and their ratio, all "
                 "recomputed", bool(holds), detail)
