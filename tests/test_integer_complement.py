"""The public component of an exact release on a span V of listed integer moves: C an integer basis of V^⊥
(:mod:`dpopt.sensitivity.integer_complement`), the statistics Cy kept by every neighbour.

Sources of the expected values:

* Cδ = 0: brute force over every replace-one move e_i − e_j of the record domain (a neighbouring difference of
  the Semi-DP spaces below is a sum of at most a of them, so Cδ = 0 on each gives it for all by linearity), and
  over the listed vectors, in Python integers;
* the dimension of V^⊥: the census age ranges are A·u over the age margins u summing to zero (the total n is fixed),
  A the 15 × 5 range matrix of full column rank, so dim V = 4 and C has 15 − 4 = 11 rows; C's rows span V^⊥:
  their exact rank (sympy, in rationals) is 11;
* the public component equals (I − P_V)y with P_V = BBᵀ from the span's orthonormal basis (an independent
  float computation), to 1e-9;
* bit for bit: two neighbouring tables (one record's age replaced, the race margin kept) computed separately.
"""

from __future__ import annotations

import copy
import json
import itertools

import numpy as np
import pytest
import sympy
import yaml

import dpopt
from dpopt.problem import compile as compile_problem
from dpopt.sensitivity.integer_complement import IntegerComplementSpan, integer_complement

SMALL = {"dpopt": 1, "name": "age ranges under a race margin",
         "data": {"attributes": {"race": ["a", "b"], "age": ["0", "1", "2"]}, "n": 50},
         "query": {"kind": "linear", "attribute": "age",
                   "matrix": [[1, 0, 0], [1, 1, 0], [1, 1, 1], [0, 1, 0], [0, 1, 1], [0, 0, 1]]},
         "invariants": [{"kind": "margins", "attributes": ["race"]}], "adjacency": {"kind": "replace_one"},
         "privacy": {"gdp": {"mu": 1.0}}, "mechanism": "gaussian_optimal", "utility": {"metric": "l2"}}
"""census_part2 in small: 6 age ranges of 3 age groups, the race margin invariant (dim V = 2, C has 4 rows)."""

AGES = 3


def _age_answers(table: np.ndarray) -> np.ndarray:
    """The range answers A·(age margin) of a race × age table, in integers."""
    return np.array(SMALL["query"]["matrix"], dtype=np.int64) @ table.sum(axis=0)


@pytest.fixture(scope="module")
def small():
    return dpopt.solve(SMALL)


def space_spec_matrix() -> list[list[int]]:
    """The 15 × 5 range matrix of the census spec, as its YAML states it."""
    return yaml.safe_load(open("specs/census_part2_age_ranges_gdp.yaml"))["query"]["matrix"]


def test_census_ranges_complement_kills_every_move_by_brute_force():
    space = compile_problem("specs/census_part2_age_ranges_gdp.yaml").space
    span = space.span
    assert isinstance(span, IntegerComplementSpan)
    c = span.complement()
    assert c.shape == (11, 15)
    assert sympy.Matrix(c.tolist()).rank() == 11
    matrix = np.array(space_spec_matrix())
    for i, j in itertools.permutations(range(5), 2):  # a record's age replaced: the age margin moves by e_i − e_j
        delta = matrix[:, i] - matrix[:, j]
        assert all(sum(int(a) * int(b) for a, b in zip(row, delta)) == 0 for row in c.tolist())
    listed = space.vectors()
    assert np.array_equal(listed, np.round(listed))
    products = np.round(listed).astype(np.int64).astype(object) @ c.T.astype(object)
    assert all(x == 0 for x in products.ravel())


def test_a_generator_outside_the_integers_has_no_complement():
    assert integer_complement(np.array([[0.5, 1.0, 0.0]])) is None
    assert integer_complement(np.array([[1, -1, 0]])).tolist() == [[1, 1, 0], [0, 0, 1]]  # by hand: (1,-1,0)^⊥


def test_the_public_component_is_identical_on_neighbours_and_is_the_projection(small):
    span = small.space.span
    rng = np.random.default_rng(20261207)
    table = rng.multinomial(50, np.full(6, 1 / 6)).reshape(2, AGES)
    while table[0, 0] == 0:
        table = rng.multinomial(50, np.full(6, 1 / 6)).reshape(2, AGES)
    neighbour = table.copy()
    neighbour[0, 0] -= 1  # one record of race a aged 0 replaced by one of race a aged 2: the race margin is kept
    neighbour[0, 2] += 1
    y, y_prime = _age_answers(table), _age_answers(neighbour)
    assert not np.array_equal(y, y_prime)
    public, public_prime = span.invariant_component(y[None]), span.invariant_component(y_prime[None])
    assert public.tobytes() == public_prime.tobytes()
    basis = span.basis()
    assert np.allclose(public[0], y - basis @ (basis.T @ y), atol=1e-9, rtol=0)


def test_the_exact_release_records_c_and_verify_rejects_a_forged_one(small):
    assert small.mechanism.sampler == "exact"
    cert = small.certificate
    parameters = cert["mechanism"]["parameters"]
    assert np.array_equal(parameters["public_statistics"], small.space.span.complement())
    assert "idealized" not in json.dumps(cert.data).lower()
    assert dpopt.verify(cert).passed
    for forge in (lambda c: c[1].__setitem__(0, c[1][0] + 1),  # Cδ ≠ 0 for an age replacement
                  lambda c: c.__setitem__(0, [2 * v for v in c[0]])):  # still orthogonal, not the canonical C
        forged = copy.deepcopy(cert)
        forge(forged["mechanism"]["parameters"]["public_statistics"])
        failed = {check.claim for check in dpopt.verify(forged).failed}
        assert any("public_statistics" in name for name in failed), failed
