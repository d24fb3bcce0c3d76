"""Replace-one disagreement patterns reduced by symmetry (:mod:`dpopt.optimize.marginal_patterns`).

Sources of the expected values:

* brute-force enumeration of every pattern D ⊆ {attributes with ≥ 2 levels}, with
  f_D = 2 Σ_T a_T gap_T(D) summed term by term in Fractions from
  :meth:`MarginalAlgebra.pair_gap` (the definition (E_T)_ii − (E_T)_ij, not the transform);
* the dense Mahalanobis sensitivity max_{i,j} (e_i − e_j)ᵀ G (e_i − e_j) over every pair of
  cells of a small table, G built from Kronecker products of I − J/n and J/n;
* the unreduced program (every attribute its own class) for the reduced one's optimum.
"""

from __future__ import annotations

import itertools
import math
import random
from fractions import Fraction

import numpy as np
import pytest

import dpopt
from test_marginal_gaussian import dense_noise_covariance
from dpopt.domain.marginal_algebra import MarginalAlgebra, MarginalWorkload, subsets
from dpopt.errors import CalibrationError
from dpopt.mechanisms import registry
from dpopt.optimize import marginal_covariance
from dpopt.optimize.marginal_covariance import components, exact_mahalanobis_squared, optimal_coefficients
from dpopt.optimize.marginal_patterns import MAX_PATTERNS, PatternClasses


def brute_force(sizes, coefficients) -> Fraction:
    """max over every pattern D of 2 Σ_T a_T gap_T(D), term by term."""
    alg = MarginalAlgebra(sizes)
    moving = [k for k, n in enumerate(sizes) if n >= 2]
    best = Fraction(0)
    for r in range(len(moving) + 1):
        for d in itertools.combinations(moving, r):
            value = 2 * sum((Fraction(a) * alg.pair_gap(t, d) for t, a in coefficients.items()), Fraction(0))
            best = max(best, value)
    return best


def random_coefficients(sizes, arity, rng, symmetric):
    """a_T > 0 on every T of size 1..arity; with ``symmetric``, equal on the sets of equal level counts."""
    by_levels = {}
    out = {}
    for t in subsets(tuple(range(len(sizes)))):
        if 0 < len(t) <= arity:
            key = tuple(sorted(sizes[k] for k in t))
            value = by_levels.setdefault(key, rng.uniform(0.1, 3.0)) if symmetric else rng.uniform(0.1, 3.0)
            out[t] = value
    return out


@pytest.mark.parametrize("seed", range(6))
def test_exact_maximum_equals_enumeration(seed):
    rng = random.Random(seed)
    p = rng.choice([8, 10, 12]) if seed < 3 else rng.choice([6, 8])
    sizes = tuple(rng.choice([2, 2, 3, 4]) for _ in range(p))
    symmetric = seed < 3
    coefficients = random_coefficients(sizes, rng.choice([2, 3]) if p <= 8 else 2, rng, symmetric)
    workload = MarginalWorkload(MarginalAlgebra(sizes), ((0,),))  # only the algebra is used
    got = exact_mahalanobis_squared(workload, coefficients, replace=True)
    assert got == brute_force(sizes, coefficients)
    classes = PatternClasses.of(sizes, {t: Fraction(a) for t, a in coefficients.items()})
    if symmetric:  # the level counts are the classes: ∏ (m_c + 1) count vectors
        counts = [sizes.count(n) for n in sorted(set(sizes))]
        assert classes.count == math.prod(c + 1 for c in counts)
    else:  # random coefficients have no symmetry: 2^p patterns
        assert classes.count == 2 ** p


def test_not_monotone_in_the_pattern():
    """Two binary attributes, a on T = {0, 1} only: gap_T({0}) = m_T/N (1 − (−1)) = 2/4, gap_T({0, 1}) = 0."""
    sizes, coefficients = (2, 2), {(0, 1): 1.0}
    alg = MarginalAlgebra(sizes)
    assert 2 * alg.pair_gap((0, 1), (0,)) == 1 and alg.pair_gap((0, 1), (0, 1)) == 0
    assert exact_mahalanobis_squared(MarginalWorkload(alg, ((0, 1),)), coefficients, True) == 1


def test_exact_maximum_equals_the_dense_pair_maximum():
    sizes = (2, 2, 3, 3)
    rng = random.Random(7)
    coefficients = random_coefficients(sizes, 2, rng, symmetric=True)
    n_cells = math.prod(sizes)
    g = np.zeros((n_cells, n_cells))
    for t, a in coefficients.items():
        e = np.ones((1, 1))
        for k, n in enumerate(sizes):
            e = np.kron(e, np.eye(n) - 1.0 / n if k in t else np.full((n, n), 1.0 / n))
        g += a * e
    diag = np.diag(g)
    dense = float(np.max(diag[:, None] + diag[None, :] - 2 * g))
    got = exact_mahalanobis_squared(MarginalWorkload(MarginalAlgebra(sizes), ((0,),)), coefficients, True)
    assert float(got) == pytest.approx(dense, rel=1e-12)


def test_reduced_program_equals_the_unreduced_one(monkeypatch):
    sizes = (2, 2, 2, 3, 3, 4)
    workload = MarginalWorkload(MarginalAlgebra(sizes), tuple(itertools.combinations(range(6), 2)))
    reduced = optimal_coefficients(workload, 1.0, True)
    assert "3 classes" in reduced.method
    singletons = PatternClasses(tuple((k,) for k in range(6)), sizes, (1,) * 6)
    monkeypatch.setattr(marginal_covariance, "design_classes", lambda w, ts, agree: singletons)
    full = optimal_coefficients(workload, 1.0, True)
    assert "6 classes" in full.method
    assert reduced.error == pytest.approx(full.error, rel=1e-7)
    assert reduced.gap < 1e-7 and full.gap < 1e-7
    assert float(exact_mahalanobis_squared(workload, reduced.coefficients, True)) == pytest.approx(1.0, rel=1e-9)


def test_thirty_attributes_all_two_way_are_designed_and_certified():
    sizes = (2,) * 12 + (3,) * 6 + (4,) * 4 + (5,) * 3 + (6, 7, 8, 9, 10)
    workload = MarginalWorkload(MarginalAlgebra(sizes), tuple(itertools.combinations(range(30), 2)))
    design = optimal_coefficients(workload, 1.0, True)
    assert design.gap < 1e-6  # against the Lagrange dual bound
    squared = exact_mahalanobis_squared(workload, design.coefficients, True)
    assert abs(float(squared) - 1.0) < 1e-9


def test_too_many_patterns_are_refused_with_the_count():
    sizes = tuple(range(2, 25))  # 23 attributes of distinct sizes: 2^23 patterns, no symmetry
    workload = MarginalWorkload(MarginalAlgebra(sizes), tuple(itertools.combinations(range(23), 2)))
    with pytest.raises(CalibrationError, match=f"{2 ** 23} reduced disagreement patterns.*at most {MAX_PATTERNS}"):
        optimal_coefficients(workload, 1.0, True)
    assert components(workload, True)  # the refusal is about the check, not the workload


def test_symmetric_table_equals_the_dense_sdp():
    attributes = {"a": ["1", "2"], "b": ["x", "y"], "c": ["p", "q", "r"]}
    document = {"dpopt": 1, "name": "symmetric", "data": {"attributes": attributes, "n": 10},
                "query": {"kind": "marginals", "all_of_size": 2}, "adjacency": "replace_one",
                "privacy": {"gdp": {"mu": 1.0}}, "mechanism": ["marginal_gaussian", "gaussian_optimal"],
                "utility": {"metric": "l2"}, "sampler": "floating_point"}  # the continuous designs compared
    solution = dpopt.solve(document)
    values = {c.family: c.utility.value for c in solution.candidates}
    assert values["marginal_gaussian"] == pytest.approx(values["gaussian_optimal"], rel=1e-6)
    assert "2 classes" in solution.candidates[0].mechanism.design_info["method"]
    assert dpopt.verify(solution.certificate).passed


def test_asymmetric_tampering_still_checked_exactly():
    problem = dpopt.compile({"dpopt": 1, "name": "t", "data": {"attributes": {
        "a": ["1", "2"], "b": ["x", "y"], "c": ["p", "q"]}, "n": 10},
        "query": {"kind": "marginals", "all_of_size": 2}, "adjacency": "replace_one",
        "privacy": {"gdp": {"mu": 1.0}}, "mechanism": "marginal_gaussian", "utility": {"metric": "l2"},
        "sampler": "floating_point"})  # the continuous Mahalanobis sensitivity, enumerated below
    cls = registry()["marginal_gaussian"]
    params = cls.design(problem).parameters
    params["coefficients"][0]["a"] *= 1.5  # breaks the symmetry: the check falls back to more classes
    mech = cls.from_parameters(params, problem.space)
    expected = brute_force((2, 2, 2), mech.coefficients)
    assert mech._mahalanobis_squared() == expected
    assert not all(c.passed for c in mech.privacy_checks(problem.space, problem.spec.privacy))


# ------------------------------------------------------------------ invariant margins (Semi-DP), re-paired records
@pytest.mark.parametrize("sizes,invariants", [((3, 2, 4), [["a"], ["b"]]), ((2, 3, 2), [["a"], ["c"]])])
def test_semi_dp_sensitivity_equals_enumeration(sizes, invariants):
    """The bracket [attained, certified] of μ_Σ² holds the maximum of vᵀΣ⁺v over the listed S_Semi
    (differences of conforming datasets within distance a, :mod:`dpopt.sensitivity.semi_space`'s listing,
    checked there against :mod:`dpopt.sensitivity.semi_enumerate`), Σ = W G⁺ Wᵀ built densely."""
    document = {"dpopt": 1, "name": "semi", "data": {"attributes": {
        name: [f"{name}{i}" for i in range(n)] for name, n in zip("abc", sizes)}, "n": 10},
        "query": {"kind": "marginals", "all_of_size": 2}, "adjacency": "replace_one",
        "invariants": [{"kind": "margins", "attributes": i} for i in invariants],
        "privacy": {"gdp": {"mu": 1.0}}, "mechanism": "marginal_gaussian", "utility": {"metric": "l2"}}
    problem = dpopt.compile(document)
    mechanism = registry()["marginal_gaussian"].design(problem)
    assert mechanism.agree in mechanism.fixed
    bracket = mechanism.design_info["semi_dp"]
    sigma = dense_noise_covariance(mechanism)
    v = problem.space.vectors()
    dense = float(np.max(np.sum((v @ np.linalg.pinv(sigma, rcond=1e-10, hermitian=True)) * v, axis=1)))
    attained, certified = float(Fraction(bracket["attained"])), float(Fraction(bracket["certified"]))
    assert attained * (1 - 1e-9) <= dense <= certified * (1 + 1e-9)
    assert certified <= 1.0 + 1e-12 and certified <= float(Fraction(bracket["all_pairs"]))
    assert bracket["error_lower_bound"] <= mechanism.design_info["expected_l2"] * (1 + 1e-9)
    assert all(c.passed for c in mechanism.privacy_checks(problem.space, problem.spec.privacy))


def test_re_pairing_only_on_an_invariant_margin():
    document = {"dpopt": 1, "name": "semi", "data": {"attributes": {
        name: [f"{name}{i}" for i in range(n)] for name, n in zip("abc", (2, 3, 2))}, "n": 10},
        "query": {"kind": "marginals", "all_of_size": 2}, "adjacency": "replace_one",
        "invariants": [{"kind": "margins", "attributes": ["a"]}, {"kind": "margins", "attributes": ["c"]}],
        "privacy": {"gdp": {"mu": 1.0}}, "mechanism": "marginal_gaussian", "utility": {"metric": "l2"}}
    problem = dpopt.compile(document)
    cls = registry()["marginal_gaussian"]
    params = cls.design(problem).parameters
    assert params["pairs_agree_on"] in (["a"], ["c"])
    for claimed in (["b"], []):
        changed = {**params, "pairs_agree_on": claimed}
        checks = {c.claim: c.passed for c in cls.from_parameters(changed, problem.space).privacy_checks(
            problem.space, problem.spec.privacy)}
        if claimed == ["b"]:  # b is not an invariant margin: no re-pairing on it
            assert checks == {"covariance.range": False, "privacy": False}
        else:  # no re-pairing: the maximum over every record pair exceeds μ² = 1 for this design
            assert Fraction(params["design"]["semi_dp"]["all_pairs"]) > 1
            assert checks == {"covariance.range": True, "privacy": False}


@pytest.mark.parametrize("seed", range(4))
def test_float_screen_finds_the_exact_maximum(seed, monkeypatch):
    """The screened path (forced on small pattern spaces) equals brute-force enumeration."""
    from dpopt.optimize import marginal_patterns

    monkeypatch.setattr(marginal_patterns, "EXACT_PATTERNS", 0)
    rng = random.Random(100 + seed)
    sizes = tuple(rng.choice([2, 2, 3, 5]) for _ in range(rng.choice([7, 9])))
    coefficients = random_coefficients(sizes, 2, rng, symmetric=seed % 2 == 0)
    got = exact_mahalanobis_squared(MarginalWorkload(MarginalAlgebra(sizes), ((0,),)), coefficients, True)
    assert got == brute_force(sizes, coefficients)
