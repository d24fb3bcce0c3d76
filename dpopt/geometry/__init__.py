"""Geometry of norm balls: exact uniform samplers, volumes and moments.

* :mod:`dpopt.geometry.balls`: the l1, l2 and l∞ unit balls of R^s.
* :mod:`dpopt.geometry.polytope`: convex polytopes K = conv(points) with the origin inside
  (facets, the cone decomposition over the facets, an exact sampler, exact second moments).
"""

from dpopt.geometry.balls import BALL_KINDS, LpBall
from dpopt.geometry.polytope import HullBudgetExceeded, Polytope

__all__ = ["BALL_KINDS", "HullBudgetExceeded", "LpBall", "Polytope"]
