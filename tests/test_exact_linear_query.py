"""A ``linear`` query with whole-number matrix entries is a counting query for the exact lattice (its answers are
sums of whole multiples of counts, and neighbours move them by integer vectors); a fractional entry keeps the
floating-point sampler and says why unless its decimals lie on a lattice of bounded denominator
(tests/test_decimal_linear_query.py)."""

from __future__ import annotations

import copy

import numpy as np

import dpopt
from dpopt.mechanisms.base import IDEALIZED_NUMERICS

PREFIX = {"dpopt": 1, "name": "prefix sums",
          "data": {"attributes": {"g": ["a", "b", "c", "d"]}},
          "query": {"kind": "linear", "attribute": "g", "matrix": np.tril(np.ones((4, 4), dtype=int)).tolist()},
          "adjacency": {"kind": "add_remove"}, "privacy": {"zcdp": {"rho": 0.5}}, "mechanism": "gaussian",
          "utility": "l2"}


def test_an_integer_linear_query_is_measured_on_the_lattice_and_verifies():
    solution = dpopt.solve(PREFIX)
    assert solution.mechanism.sampler == "exact"
    assert IDEALIZED_NUMERICS not in " ".join(solution.mechanism.notes())
    assert dpopt.verify(solution.certificate).passed
    draws = solution.mechanism.sample(50, np.random.default_rng(0))
    assert np.all(draws == np.round(draws))  # discrete Gaussian noise on integer answers


def test_a_fractional_linear_query_off_the_decimal_lattice_keeps_the_floating_point_sampler():
    spec = copy.deepcopy(PREFIX)
    spec["query"]["matrix"][0][0] = 1 / 3  # 0.3333333333333333: its denominator 10^16 exceeds the bound 2^20
    mechanism = dpopt.solve(spec).mechanism
    assert mechanism.sampler == "floating_point"
    assert "not integer counts" in mechanism.refusal and "2^20" in mechanism.refusal
