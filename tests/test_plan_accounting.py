"""The composed (ε, δ) guarantee of a plan against Google's dp_accounting PLD accountant.

Reference: dp-accounting 0.6.0 (``dp_accounting.pld.privacy_loss_distribution``, connect-the-dots
discretisation, add/remove relation), composing the same noise laws at the same
sensitivities as the plan's mechanisms (the discrete Gaussian's where they measure on the lattice).
"""

from __future__ import annotations

import math
from fractions import Fraction
from types import SimpleNamespace

import pytest

from dpopt.mechanisms.gaussian import GaussianMechanism
from dpopt.plan import solve_plan
from dpopt.plan.compose import composed_epsilon, dominating_pair

pytest.importorskip("dp_accounting")
from dp_accounting.pld import privacy_loss_distribution as pld  # noqa: E402

DELTA = 1e-6


def _plan(queries: list[dict]) -> dict:
    return {"dpopt": 1, "name": "approx plan",
            "data": {"attributes": {"a": ["x", "y", "z"], "b": ["u", "v"], "c": ["p", "q", "r", "s"]}},
            "queries": queries, "adjacency": "add_remove", "privacy": {"approx": {"epsilon": 1.0, "delta": DELTA}}}


def _reference_epsilon(sol, interval: float) -> float:
    """dp_accounting's ε(δ) for the plan's mechanisms, composed PLD by PLD (connect-the-dots): Gaussian σ/Δ₂,
    Laplace b/Δ₁ (noise multipliers), and on the lattice the discrete Gaussian N_ℤ(0, σ_ℤ²) with its integer
    shift (``from_discrete_gaussian_mechanism``) and the discrete Laplace of parameter 1/t
    (``from_discrete_laplace_mechanism``; each query here moves one cell by 1 under add/remove, so the
    product of discrete Gaussians is the one-dimensional one at shift 1)."""
    total = None
    for d in sol.designs:
        family, p, mechanism = d.mechanism.family, d.mechanism.parameters, d.mechanism
        if family == "gaussian" and p.get("sampler") == "exact":
            assert d.space.l1 == 1 and d.space.l2 == 1  # one cell, by one
            one = pld.from_discrete_gaussian_mechanism(math.sqrt(mechanism.lattice_sigma2), 1,
                                                       value_discretization_interval=interval, use_connect_dots=True)
        elif family == "gaussian":
            one = pld.from_gaussian_mechanism(p["sigma"] / d.space.l2, value_discretization_interval=interval)
        elif family == "laplace" and p.get("sampler") == "exact":  # discrete Laplace of parameter 1/t on counts
            assert d.space.l1 == 1  # one cell, by one
            one = pld.from_discrete_laplace_mechanism(1 / float(Fraction(p["scale_exact"])), 1,
                                                      value_discretization_interval=interval, use_connect_dots=True)
        elif family == "laplace":
            one = pld.from_laplace_mechanism(p["scale"] / d.space.l1, value_discretization_interval=interval)
        else:  # pragma: no cover - the plans below fix the families
            raise AssertionError(family)
        total = one if total is None else total.compose(one)
    return total.get_epsilon_for_delta(DELTA)


@pytest.fixture(scope="module")
def gaussian_plan():
    return solve_plan(_plan([
        {"name": "total", "query": {"kind": "count"}, "mechanism": "gaussian"},
        {"name": "a", "query": {"kind": "histogram", "attribute": "a"}, "mechanism": "gaussian"},
        {"name": "a x c", "query": {"kind": "contingency_table", "attributes": ["a", "c"]}, "mechanism": "gaussian",
         "weight": 2},
    ]))


def test_gaussian_plan_matches_dp_accounting_within_1e6(gaussian_plan):
    """The plan's designs with continuous Gaussian noise at their σ: our composition is exact (closed form),
    dp_accounting's PLD is tight to its discretisation (10⁻⁵ nats, connect-the-dots): they must agree to 10⁻⁶
    in ε. (Their ε is not the plan's: the plan's shares are certified on the discrete Gaussians released.)"""
    continuous = [GaussianMechanism(d.mechanism.sigma, d.space.dimension) for d in gaussian_plan.designs]
    lo, hi, method = composed_epsilon([dominating_pair(m, d.space) for m, d in zip(continuous, gaussian_plan.designs)],
                                      DELTA)
    assert lo == hi and method.startswith("exact")
    reference = _reference_epsilon(SimpleNamespace(designs=[SimpleNamespace(mechanism=m, space=d.space)
                                                            for m, d in zip(continuous, gaussian_plan.designs)]), 1e-5)
    assert abs(lo - reference) <= 1e-6


def test_lattice_gaussian_plan_brackets_dp_accounting(gaussian_plan):
    """The same plan as released (exact discrete Gaussian noise on the lattice): dp_accounting's discrete-Gaussian
    PLD ε lies inside our rigorous [optimistic, pessimistic] bracket (to its discretisation, 10⁻⁶), the bracket is
    narrower than 2·10⁻³ (grid 10⁻⁴ nats) and its pessimistic side meets the target."""
    assert all(d.mechanism.parameters["sampler"] == "exact" for d in gaussian_plan.designs)
    lo, hi, _ = composed_epsilon([dominating_pair(d.mechanism, d.space) for d in gaussian_plan.designs], DELTA)
    reference = _reference_epsilon(gaussian_plan, 1e-5)
    assert lo - 1e-6 <= reference <= hi + 1e-6
    assert hi - lo < 2e-3 and hi <= 1.0


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
