"""Release plans: many queries of the same records under one privacy target.

A plan (:class:`dpopt.spec.models.Plan`) is designed query by query under budget shares
that minimise the weighted total of the per-query utilities (:mod:`dpopt.plan.allocate`),
composed exactly under the plan's target (:mod:`dpopt.plan.compose`), certified as one
document (:mod:`dpopt.plan.certificate`) and released in one pass (:mod:`dpopt.plan.release`).
"""

from __future__ import annotations

from dpopt._lazy import lazy_exports

__all__ = lazy_exports(__name__, {
    "PlanSolution": "dpopt.plan.solve",
    "is_plan_certificate": "dpopt.plan.spec",
    "is_plan_document": "dpopt.plan.spec",
    "load_plan": "dpopt.plan.spec",
    "solve_plan": "dpopt.plan.solve",
    "verify_plan": "dpopt.plan.certificate",
})
