"""The composed (ε, δ) guarantee of a plan against Google's dp_accounting PLD accountant.

Reference: dp-accounting 0.6.0 (``dp_accounting.pld.PLDAccountant``, connect-the-dots
discretisation, add/remove relation), composing the same noise laws at the same
sensitivities as the plan's mechanisms.
"""

from __future__ import annotations

import pytest

from dpopt.plan import solve_plan
from dpopt.plan.compose import composed_epsilon, dominating_pair

dp_accounting = pytest.importorskip("dp_accounting")
from dp_accounting.pld import pld_privacy_accountant  # noqa: E402

DELTA = 1e-6


def _plan(queries: list[dict]) -> dict:
    return {"dpopt": 1, "name": "approx plan",
            "data": {"attributes": {"a": ["x", "y", "z"], "b": ["u", "v"], "c": ["p", "q", "r", "s"]}},
            "queries": queries, "adjacency": "add_remove", "privacy": {"approx": {"epsilon": 1.0, "delta": DELTA}}}


def _reference_epsilon(sol, interval: float) -> float:
    """dp_accounting's ε(δ) for the plan's mechanisms: Gaussian σ/Δ₂, Laplace b/Δ₁ (noise multipliers)."""
    accountant = pld_privacy_accountant.PLDAccountant(value_discretization_interval=interval)
    for d in sol.designs:
        family, p = d.mechanism.family, d.mechanism.parameters
        if family == "gaussian":
            accountant.compose(dp_accounting.GaussianDpEvent(p["sigma"] / d.space.l2))
        elif family == "laplace":
            accountant.compose(dp_accounting.LaplaceDpEvent(p["scale"] / d.space.l1))
        else:  # pragma: no cover - the plans below fix the families
            raise AssertionError(family)
    return accountant.get_epsilon(DELTA)


def test_gaussian_plan_matches_dp_accounting_within_1e6():
    """All-Gaussian plan: our composition is exact (closed form), dp_accounting's PLD is tight to
    its discretisation (10⁻⁵ nats, connect-the-dots): they must agree to 10⁻⁶ in ε."""
    sol = solve_plan(_plan([
        {"name": "total", "query": {"kind": "count"}, "mechanism": "gaussian"},
        {"name": "a", "query": {"kind": "histogram", "attribute": "a"}, "mechanism": "gaussian"},
        {"name": "a x c", "query": {"kind": "contingency_table", "attributes": ["a", "c"]}, "mechanism": "gaussian",
         "weight": 2},
    ]))
    pairs = [dominating_pair(d.mechanism, d.space) for d in sol.designs]
    lo, hi, method = composed_epsilon(pairs, DELTA)
    assert lo == hi and method.startswith("exact")
    assert lo <= 1.0 + 1e-12  # the plan's own target
    assert abs(lo - _reference_epsilon(sol, 1e-5)) <= 1e-6


def test_heterogeneous_plan_brackets_dp_accounting():
    """Gaussian table + Laplace count under (ε, δ): dp_accounting's ε lies inside our rigorous
    [optimistic, pessimistic] bracket (to its own discretisation, 10⁻⁶), and the bracket is
    narrower than 2·10⁻³ (grid 10⁻⁴ nats; the pessimistic side is what the certificate uses)."""
    sol = solve_plan(_plan([
        {"name": "table", "query": {"kind": "contingency_table", "attributes": ["a", "b"]}, "mechanism": "gaussian"},
        {"name": "count", "query": {"kind": "count"}, "mechanism": "laplace"},
    ]))
    pairs = [dominating_pair(d.mechanism, d.space) for d in sol.designs]
    lo, hi, _ = composed_epsilon(pairs, DELTA)
    reference = _reference_epsilon(sol, 1e-5)
    assert lo - 1e-6 <= reference <= hi + 1e-6
    assert hi - lo < 2e-3
    assert hi <= 1.0  # the certified plan meets its target on the pessimistic side
    check = next(c for c in sol.certificate["checks"] if c["claim"] == "composition.pld")
    assert check["passed"] and check["detail"].startswith("confirmed")
    # the certificate's ε per δ is that pessimistic side: above dp_accounting's ε, within the bracket's width
    stated = sol.certificate["guarantee"]["epsilon_at_delta"][f"{DELTA:g}"]
    assert reference - 1e-6 <= stated <= reference + 2e-3 and "upper bound" in sol.certificate["guarantee"][
        "epsilon_method"]
