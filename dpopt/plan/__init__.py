"""Release plans: many queries of the same records under one privacy target.

A plan (:class:`dpopt.spec.models.Plan`) is designed query by query under budget shares
that minimise the weighted total of the per-query utilities (:mod:`dpopt.plan.allocate`),
composed exactly under the plan's target (:mod:`dpopt.plan.compose`), certified as one
document (:mod:`dpopt.plan.certificate`) and released in one pass (:mod:`dpopt.plan.release`).
"""

from dpopt.plan.certificate import verify_plan
from dpopt.plan.solve import PlanSolution, solve_plan
from dpopt.plan.spec import is_plan_document, load_plan

__all__ = ["PlanSolution", "is_plan_document", "load_plan", "solve_plan", "verify_plan"]
