"""Geometry of norm balls: exact uniform samplers, volumes and moments.

* :mod:`dpopt.geometry.balls`: the l1, l2 and l∞ unit balls of R^s.
* :mod:`dpopt.geometry.polytope`: convex polytopes K = conv(points) with the origin inside
  (facets, the cone decomposition over the facets, an exact sampler, exact second moments).
* :mod:`dpopt.geometry.symmetric_hull`: the same built up to a symmetry group of table moves
  (facet orbits, orbit-wise exact sampling).
* :mod:`dpopt.geometry.hull_budget`: the deterministic work budget of both builders (counts, not seconds).
"""

from dpopt.geometry.balls import BALL_KINDS, LpBall
from dpopt.geometry.hull_budget import UNLIMITED, HullBudget, HullBudgetExceeded
from dpopt.geometry.polytope import Polytope
from dpopt.geometry.symmetric_hull import SymmetricPolytope, table_symmetries

__all__ = ["BALL_KINDS", "UNLIMITED", "HullBudget", "HullBudgetExceeded", "LpBall", "Polytope", "SymmetricPolytope",
           "table_symmetries"]
