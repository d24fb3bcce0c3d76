"""Random plans of Laplace and Gaussian queries: the composed PLD bracket of their dominating pairs
(dpopt.plan.compose) against dp_accounting's own PLD composition (issue 26).

dp_accounting discretises each loss on a 1e-4 grid and composes by FFT; both brackets put each
loss within a few grid steps of the true one, so the composed δ(ε) agree to about 1e-3 (δ'(ε) ≤ 1).
"""

from __future__ import annotations

import pytest

hypothesis = pytest.importorskip("hypothesis")
dp_accounting = pytest.importorskip("dp_accounting")
from dp_accounting.pld import privacy_loss_distribution as pld  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from dpopt.noise.laplace import LaplaceMarginal  # noqa: E402
from dpopt.plan.compose import ProductPair, composed_pld  # noqa: E402

laplace_query = st.tuples(st.sampled_from([1.0, 2.0, 4.0]), st.lists(st.sampled_from([1.0, 2.0]), min_size=1,
                                                                     max_size=4))
gaussian_query = st.sampled_from([0.3, 0.7])


@settings(max_examples=8, deadline=None, derandomize=True)
@given(st.lists(laplace_query, min_size=1, max_size=3), st.lists(gaussian_query, max_size=2))
def test_composed_bracket_matches_dp_accounting(laplace, gaussian):
    pairs = [ProductPair(tuple(LaplaceMarginal(b) for _ in shifts), tuple(shifts)) for b, shifts in laplace]
    pairs += list(gaussian)
    bracket = composed_pld(pairs)
    reference = None
    for b, shifts in laplace:
        for t in shifts:
            one = pld.from_laplace_mechanism(b, sensitivity=t, value_discretization_interval=1e-4)
            reference = one if reference is None else reference.compose(one)
    for s in gaussian:  # N(0, 1) vs N(s, 1): standard deviation 1, sensitivity s
        one = pld.from_gaussian_mechanism(1.0, sensitivity=s, value_discretization_interval=1e-4)
        reference = reference.compose(one)
    for eps in (0.0, 0.5, 1.5):
        expected = reference.get_delta_for_epsilon(eps)
        lower, upper = float(bracket.lower.delta(eps)[0]), float(bracket.upper.delta(eps)[0])
        assert lower - 1e-3 <= expected <= upper + 1e-3
        assert upper - lower <= 5e-3
