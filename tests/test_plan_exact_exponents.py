"""A plan allocates the exact Kronecker and integer-strategy designs with the continuous Gaussian's exponent p = 1.

Source of the expected values: the allocation minimises Σ_i w_i a_i/s_i subject to Σ s_i = 1 (cost a_i/s_i, p = 1);
by Cauchy–Schwarz the optimum is s_i ∝ √(w_i a_i), i.e. w_i·cost_i(s_i)/s_i is the same for every query (a_i =
cost_i(s)·s). The exact designs' cost·share varies with the share only by their lattice rounding (recorded
``lattice_rounding_ratio`` / ``lattice_cost_ratio``, within 10⁻³ of 1 here), so the equality holds to 3·10⁻³.
"""

from __future__ import annotations

import numpy as np
import pytest

from dpopt.plan import solve_plan

LEVELS = {"age": ["a", "b", "c", "d"], "sex": ["f", "m"], "r": ["x", "y", "z"]}
TERMS = [{"age": {"ranges": 2}, "sex": "identity"}, {"age": "prefix", "r": "identity"}]


def test_exact_kronecker_and_integer_strategy_use_the_known_exponent():
    prefix = np.tril(np.ones((4, 4))).astype(int).tolist()
    plan = {"dpopt": 1, "name": "plan", "data": {"attributes": LEVELS, "n": 30}, "adjacency": "replace_one",
            "privacy": {"zcdp": {"rho": 1}}, "utility": "l2",
            "queries": [{"name": "kron", "mechanism": "kronecker_gaussian",
                         "query": {"kind": "kronecker", "terms": TERMS}},
                        {"name": "cumulative", "mechanism": "gaussian_optimal", "weight": 3,
                         "query": {"kind": "histogram", "attribute": "age"},
                         "utility": {"metric": "l2", "workload": prefix}}]}
    solution = solve_plan(plan)
    samplers = [d.mechanism.parameters.get("sampler") for d in solution.designs]
    assert samplers == ["exact", "exact"]
    assert solution.comparison["exponents"] == [1.0, 1.0]  # not fitted from a design at half the share
    ratios = [d.weight * d.utility.value / d.share for d in solution.designs]
    assert ratios[0] == pytest.approx(ratios[1], rel=3e-3)
