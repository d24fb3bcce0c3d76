"""PLD brackets composed whatever their grids (issue 26: a Laplace move over ≥ 3 coordinates).

The reference is dp_accounting's Laplace PLD (pessimistic and optimistic estimates, composed
by its own FFT code): the composed δ(ε) of k Laplace coordinates shifted by t each must lie
in dpopt's bracket, up to dp_accounting's own discretisation (loss interval 1e-4).
"""

from __future__ import annotations

import numpy as np
import pytest

import dpopt
from dpopt.certificate.verify import verify
from dpopt.noise.laplace import LaplaceMarginal
from dpopt.privacy.pld import DiscretePLD, product_pld

dp_accounting = pytest.importorskip("dp_accounting")
from dp_accounting.pld import privacy_loss_distribution  # noqa: E402


@pytest.mark.parametrize("coordinates", [3, 4, 5])
def test_laplace_product_matches_dp_accounting(coordinates):
    scale = 4.0
    bracket = product_pld([LaplaceMarginal(scale)] * coordinates, [1.0] * coordinates)
    epsilons = np.array([0.0, 0.2, 0.5])
    upper, lower = bracket.upper.delta(epsilons), bracket.lower.delta(epsilons)
    assert np.all(lower <= upper)
    for pessimistic, side in ((True, upper), (False, lower)):
        ref = privacy_loss_distribution.from_laplace_mechanism(
            scale, sensitivity=1.0, pessimistic_estimate=pessimistic, value_discretization_interval=1e-4)
        ref = ref.self_compose(coordinates)
        expected = np.array([ref.get_delta_for_epsilon(e) for e in epsilons])
        # both discretisations put each loss within k·1e-4 nats of the true one; δ'(ε) ≤ 1
        assert side == pytest.approx(expected, abs=coordinates * 2e-4)


def test_compose_brings_a_finer_grid_to_the_coarser_one():
    fine = DiscretePLD(0.5, 0, np.array([0.25, 0.25, 0.5]))  # losses 0, 0.5, 1
    coarse = DiscretePLD(1.0, 0, np.array([0.5, 0.5]))  # losses 0, 1
    up = fine.compose(coarse, up=True)
    # rounded up to the grid of step 1: fine → losses {0: 0.25, 1: 0.75}; then convolved by hand
    assert up.step == 1.0 and up.offset == 0
    assert up.masses.tolist() == pytest.approx([0.125, 0.5, 0.375])
    down = coarse.compose(fine, up=False)  # rounded down: fine → {0: 0.5, 1: 0.5}
    assert down.masses.tolist() == pytest.approx([0.25, 0.5, 0.25])
    with pytest.raises(ValueError, match="not nested"):
        fine.compose(DiscretePLD(0.75, 0, np.array([1.0])), up=True)


def test_laplace_over_four_coordinates_solves_and_verifies():
    # the reproducer: cumulative counts over five levels, replace-one, Laplace
    spec = {"dpopt": 1, "name": "cumulative", "data": {"attributes": {"d": ["a", "b", "c", "d", "e"]}},
            "query": {"kind": "linear", "attribute": "d",
                      "matrix": [[1, 0, 0, 0, 0], [1, 1, 0, 0, 0], [1, 1, 1, 0, 0], [1, 1, 1, 1, 0]]},
            "adjacency": {"kind": "replace_one"}, "privacy": {"approx": {"epsilon": 1, "delta": 1e-6}},
            "mechanism": "laplace", "utility": {"metric": "l2"}}
    cert = dpopt.solve(spec).certificate
    assert verify(cert).passed


def test_plan_holding_that_query_verifies():
    # the plan verifier composes every query's PLD: it used to stop on "PLDs on different grids"
    from dpopt.plan import solve_plan, verify_plan

    plan = {"dpopt": 1, "name": "plan", "data": {"attributes": {"d": ["a", "b", "c", "d", "e"], "s": ["f", "m"]}},
            "queries": [{"name": "cumulative", "query": {
                "kind": "linear", "attribute": "d",
                "matrix": [[1, 0, 0, 0, 0], [1, 1, 0, 0, 0], [1, 1, 1, 0, 0], [1, 1, 1, 1, 0]]}},
                {"name": "sex", "query": {"kind": "histogram", "attribute": "s"}}],
            "adjacency": {"kind": "replace_one"}, "privacy": {"approx": {"epsilon": 1, "delta": 1e-6}},
            "mechanism": "laplace", "utility": {"metric": "l2"}}
    assert verify_plan(solve_plan(plan).certificate).passed
