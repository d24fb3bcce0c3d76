"""Structural sensitivity (closed forms) against brute-force enumeration of neighbours.

The expected values come from the enumeration of every pair of neighbouring datasets
of up to three records (dpopt.sensitivity.enumerate), which evaluates the query record by
record and shares no code with the closed forms.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import dpopt
from conftest import make_spec
from dpopt.errors import UnsupportedSpecError
from dpopt.sensitivity import enumerate_space

QUERIES = {
    "count": {"kind": "count"},
    "histogram": {"kind": "histogram", "attribute": "race"},
    "table": {"kind": "contingency_table", "attributes": ["race", "sex"]},
    "table3": {"kind": "contingency_table", "attributes": ["sex", "race", "edu"]},
    "marginals": {"kind": "marginals", "attributes": [["race"], ["sex"]]},
    "marginals_overlap": {"kind": "marginals", "attributes": [["race"], ["race", "sex"]]},
    "linear": {"kind": "linear", "attribute": "race", "matrix": [[1, 1, 0], [0, 0.5, -1.5]]},
    "sum": {"kind": "sum", "attribute": "income"},
    "sum_signed": {"kind": "sum", "attribute": "balance"},
    "mean": {"kind": "mean", "attribute": "income"},
}
ADJACENCIES = {"add_remove": "add_remove", "replace_one": "replace_one",
               "hamming2": {"kind": "hamming", "distance": 2}}
ATTRIBUTES = {"race": ["a", "b", "c"], "sex": ["f", "m"], "edu": ["lo", "hi"],
              "income": {"min": 0, "max": 100}, "balance": {"min": -30, "max": 70}}


def _spec(query: dict, adjacency) -> dpopt.Spec:
    data = {"attributes": ATTRIBUTES}
    if query["kind"] == "mean":
        data["n"] = 3
    return dpopt.load_spec(make_spec(query=query, adjacency=adjacency, data=data))


def _support(vectors: np.ndarray, directions: np.ndarray) -> np.ndarray:
    """Support function h(u) = max_v <u, v>: equal on all directions iff equal convex hulls."""
    return (directions @ vectors.T).max(axis=1)


CASES = [(q, a) for q in QUERIES for a in ADJACENCIES]


@pytest.mark.parametrize("qname, aname", CASES, ids=[f"{q}-{a}" for q, a in CASES])
def test_structural_equals_brute_force(qname, aname):
    spec = _spec(QUERIES[qname], ADJACENCIES[aname])
    try:
        space = dpopt.derive(spec)
    except UnsupportedSpecError:
        # A count under replace-one has no sensitivity; a mean under add/remove none bounded.
        assert (qname, aname) in {("count", "replace_one"), ("count", "hamming2"), ("mean", "add_remove")}
        return
    k = 2 if aname == "hamming2" else 1
    brute = enumerate_space(spec, max_records=3 if QUERIES[qname]["kind"] != "contingency_table" else 2 + k - 1)
    # Exact for counting queries; a mean divides by n in floating point when enumerated.
    for exact, enumerated in [(space.l1, brute.l1), (space.l2_squared, brute.l2_squared), (space.linf, brute.linf)]:
        assert float(exact) == pytest.approx(float(enumerated), rel=1e-14)
        if QUERIES[qname]["kind"] != "mean":
            assert exact == enumerated
    assert space.rank == brute.rank
    assert space.span.contains(brute.vectors())
    listed = space.vectors()
    if space.complete and brute.complete:
        assert {tuple(v) for v in listed} == {tuple(v) for v in brute.vectors()}
    else:
        directions = np.random.default_rng(7).normal(size=(300, space.dimension))
        np.testing.assert_allclose(_support(listed, directions), _support(brute.vectors(), directions), atol=1e-9)


def test_table_closed_form_values():
    # Replacing one record moves one unit from a cell to another: v = e_i - e_j,
    # so ||v||_1 = 2, ||v||_2^2 = 2, ||v||_inf = 1, and the span is {x : sum x = 0}.
    space = dpopt.derive(_spec(QUERIES["table"], "replace_one"))
    assert (space.l1, space.l2_squared, space.linf, space.rank) == (2, 2, 1, 5)
    assert space.span.contains(np.array([[1, -1, 0, 0, 0, 0]])) and not space.span.contains(np.ones((1, 6)))


def test_hamming_scales_by_public_n():
    # With n = 1 only one record can differ, whatever the Hamming distance.
    spec = dpopt.load_spec(make_spec(adjacency={"kind": "hamming", "distance": 5},
                                     data={"attributes": ATTRIBUTES, "n": 1}))
    assert dpopt.derive(spec).l1 == 2


def test_mean_sensitivity_is_width_over_n():
    spec = dpopt.load_spec(make_spec(query=QUERIES["mean"], data={"attributes": ATTRIBUTES, "n": 250}))
    assert dpopt.derive(spec).l1 == Fraction(100, 250)


def test_large_table_does_not_list_vectors():
    levels = [str(i) for i in range(60)]
    spec = dpopt.load_spec(make_spec(data={"attributes": {"a": levels, "b": levels}},
                                     query={"kind": "contingency_table", "attributes": ["a", "b"]}))
    space = dpopt.derive(spec)
    assert (space.dimension, space.rank, space.l2_squared) == (3600, 3599, 2)
    with pytest.raises(ValueError):
        space.vectors()
