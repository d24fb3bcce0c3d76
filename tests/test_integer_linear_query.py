"""A ``linear`` query with whole weights is a counting query for the discrete families and ``laplace``.

Its answers Mx are integers on whole counts and neighbouring answers differ by the integer vectors MΔ, so the
discrete Laplace (and Gaussian) measure it exactly. Expected values: the l1 sensitivity by brute force over the
neighbours' count changes (a record: ±e_j; a person: every allowed v), ε = Δ₁/t of the discrete Laplace (Canonne,
Kamath & Steinke 2020: a shift by Δ changes the log-pmf by at most ‖Δ‖₁/t).
"""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

import dpopt

MATRIX = [[1, 2, 0], [0, 1, 3]]
UNIT = {"id": "pid", "max_rows": 3, "max_groups": 2, "max_rows_per_group": 2}


def spec(mechanism: str, privacy: dict, unit: bool = False, matrix=MATRIX) -> dict:
    data = {"attributes": {"a": ["x", "y", "z"]}} | ({"privacy_unit": UNIT} if unit else {})
    return {"dpopt": 1, "name": "whole weights", "data": data,
            "query": {"kind": "linear", "attribute": "a", "matrix": matrix}, "adjacency": {"kind": "add_remove"},
            "privacy": privacy, "mechanism": mechanism, "utility": {"metric": "l2"}}


def brute_force_l1(unit: bool) -> int:
    """max ‖Mv‖₁ over a record (v = e_j) or a person's allowed rows (≤ 2 per level, ≤ 2 levels, ≤ 3 rows)."""
    if unit:
        moves = [v for v in itertools.product(range(3), repeat=3) if sum(v) <= 3 and sum(1 for c in v if c) <= 2]
    else:
        moves = [tuple(int(i == j) for i in range(3)) for j in range(3)]
    return max(sum(abs(sum(m * c for m, c in zip(row, v))) for row in MATRIX) for v in moves)


@pytest.mark.parametrize("unit", [False, True])
def test_laplace_measures_whole_weights_exactly_at_the_brute_force_sensitivity(unit):
    l1 = brute_force_l1(unit)
    assert l1 == (9 if unit else 3)  # by hand: columns (1, 0), (2, 1), (0, 3); a person 2·(2, 1) + (0, 3) = (4, 5)
    solution = dpopt.solve(spec("laplace", {"pure": {"epsilon": 1}}, unit))
    certificate = json.loads(solution.certificate.to_json())
    assert "idealized" not in json.dumps(certificate)
    assert certificate["mechanism"]["parameters"]["scale_exact"] == str(l1)  # ε = Δ₁/t = 1 at t = Δ₁
    assert dpopt.verify(certificate).passed
    released = solution.mechanism.release(np.array([7.0, 12.0]), rng=np.random.default_rng(3))
    assert np.all(released == np.round(released))


@pytest.mark.parametrize("mechanism, privacy", [("discrete_laplace", {"pure": {"epsilon": 1}}),
                                                ("discrete_gaussian", {"zcdp": {"rho": 0.5}})])
def test_the_discrete_families_serve_whole_weights(mechanism, privacy):
    certificate = json.loads(dpopt.solve(spec(mechanism, privacy)).certificate.to_json())
    assert certificate["mechanism"]["family"] == mechanism
    assert dpopt.verify(certificate).passed


def test_fractional_weights_are_refused_by_the_discrete_families_with_the_reason():
    with pytest.raises(dpopt.errors.CalibrationError, match="whole weights"):
        dpopt.solve(spec("discrete_laplace", {"pure": {"epsilon": 1}}, matrix=[[0.5, 2, 0], [0, 1, 3]]))
