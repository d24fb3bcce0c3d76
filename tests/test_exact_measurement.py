"""Exact measurement on a lattice (``sampler: exact``, :mod:`dpopt.mechanisms.lattice`) for ``marginal_gaussian``.

Sources of the expected values:

* the continuous design's covariance W (Σ_T a_T E_T)⁺ Wᵀ built densely from Kronecker products of I − J/n
  and J/n (as in test_marginal_gaussian.py); the lattice variances round each part's variance up to a
  dyadic rational of 21 significant bits, so the exact noise's covariance lies between that covariance
  and (1 + 2^-20) times it, and its privacy between (1 − 2^-20) times the continuous μ² and μ²;
* the dense Mahalanobis sensitivity max_v vᵀΣ⁺v over the listed neighbouring differences;
* CKS 2020 Theorem 14 (ρ-zCDP of independent discrete Gaussians under integer shifts), which is why only
  zCDP targets are served exactly.
"""

from __future__ import annotations

import numpy as np
import pytest

import dpopt
from dpopt.errors import DataError
from dpopt.mechanisms import registry
from dpopt.mechanisms.base import IDEALIZED_NUMERICS
from dpopt.mechanisms.lattice import EXACT_MEASUREMENT_NOTE
from test_marginal_gaussian import ALL_2WAY, MIXED, dense_noise_covariance, dense_workload, spec

ROUNDING = 2.0**-20
"""Relative excess of a lattice variance over the continuous one (dyadic_ceil keeps 21 significant bits)."""


def exact_spec(query, adjacency="add_remove", privacy=None, **extra):
    out = spec(query, adjacency, privacy)
    del out["sampler"]  # the default
    return {**out, **extra}


@pytest.mark.parametrize("privacy", [None, {"gdp": {"mu": 1.0}}, {"approx": {"epsilon": 1.0, "delta": 1e-6}}])
def test_designs_measure_exactly_and_say_so(privacy):
    """zCDP by CKS Theorem 14; GDP and (ε, δ) by the certified slope (dpopt.privacy.discrete_gaussian_gdp)."""
    solution = dpopt.solve(exact_spec(ALL_2WAY, privacy=privacy))
    assert solution.mechanism.parameters["sampler"] == "exact"
    notes = solution.certificate["mechanism"]["notes"]
    assert EXACT_MEASUREMENT_NOTE in notes and IDEALIZED_NUMERICS not in notes


@pytest.mark.parametrize("privacy,extra,why", [
    ({"zcdp": {"rho": 1.0}}, {"sampler": "floating_point"}, "sampler: floating_point"),
])
def test_other_targets_keep_the_floating_point_note(privacy, extra, why):
    solution = dpopt.solve(exact_spec(ALL_2WAY, privacy=privacy, **extra))
    assert solution.mechanism.parameters["sampler"] == "floating_point", why
    assert IDEALIZED_NUMERICS in solution.mechanism.notes()
    assert any(note.startswith("no exact lattice measurement") for note in solution.mechanism.notes())


@pytest.mark.parametrize("adjacency", ["add_remove", "replace_one"])
def test_release_covariance_is_the_designs(adjacency):
    mechanism = dpopt.solve(exact_spec(MIXED, adjacency)).mechanism
    assert mechanism.sampler == "exact"
    sigma = dense_noise_covariance(mechanism)
    p = mechanism.parameters
    names, sizes = p["attributes"], p["levels"]
    rng = np.random.default_rng(5)
    counts = rng.integers(0, 50, size=int(np.prod(sizes)))
    truth = dense_workload(sizes, [[names.index(a) for a in b] for b in p["blocks"]]) @ counts
    n = 100_000
    z = mechanism.release(np.tile(truth, (n, 1)), np.random.default_rng(11)) - truth
    empirical = z.T @ z / n
    # as test_marginal_gaussian: entries of the empirical second moment have SE √((Σ_ii Σ_jj + Σ_ij²)/n) (the
    # lattice noise's fourth moments are the Gaussian's within 1e-6 at these σ ≫ 1); 5 SE per entry over 225
    # entries; the covariance itself is within 2^-20 of Σ, far below one SE (≈ 0.4% here)
    se = np.sqrt((np.outer(np.diag(sigma), np.diag(sigma)) + sigma**2) / n)
    assert np.max(np.abs(empirical - sigma) / se) < 5.0
    variances = mechanism.cell_variances()
    assert np.all(variances >= np.diag(sigma) * (1 - 1e-12))
    assert np.all(variances <= np.diag(sigma) * (1 + ROUNDING))


@pytest.mark.parametrize("adjacency", ["add_remove", "replace_one"])
def test_privacy_between_the_continuous_bound_and_its_rounding(adjacency):
    problem = dpopt.compile(exact_spec(ALL_2WAY, adjacency))
    mechanism = registry()["marginal_gaussian"].design(problem)
    assert mechanism.sampler == "exact"
    sigma = dense_noise_covariance(mechanism)
    dense = max(float(x @ np.linalg.lstsq(sigma, x, rcond=None)[0]) for x in problem.space.vectors())
    mu2 = mechanism.privacy_summary(problem.space)["mu"] ** 2
    assert dense * (1 - ROUNDING) * (1 - 1e-9) <= mu2 <= dense * (1 + 1e-9)
    assert all(c.passed for c in mechanism.privacy_checks(problem.space, problem.spec.privacy))


def test_a_zcdp_lattice_design_does_not_pass_as_gdp_at_the_same_mu():
    """ρ-zCDP carries over at σ_T² (CKS Thm 14) but μ-GDP only at the effective variances 1/m_T² < σ_T²: a design
    tight for ρ = 1/2 (μ_Σ within 1e-6 of 1 at σ_T²) checked against μ = 1 fails, whatever its parameters say."""
    problem = dpopt.compile(exact_spec(ALL_2WAY, privacy={"zcdp": {"rho": 0.5}}))
    mechanism = registry()["marginal_gaussian"].design(problem)
    gdp = dpopt.compile(exact_spec(ALL_2WAY, privacy={"gdp": {"mu": 1.0}}))
    forged = registry()["marginal_gaussian"].from_parameters(mechanism.parameters, gdp.space)
    assert not all(c.passed for c in forged.privacy_checks(gdp.space, gdp.spec.privacy))


def test_the_release_depends_on_the_data_only_through_the_integer_measurements():
    """Two answers that differ by a neighbouring move, released with the same random stream, differ by
    exactly the move's image in every noised component: the noise added is the same integer vectors."""
    mechanism = dpopt.solve(exact_spec(ALL_2WAY)).mechanism
    p = mechanism.parameters
    names, sizes = p["attributes"], p["levels"]
    w = dense_workload(sizes, [[names.index(a) for a in b] for b in p["blocks"]])
    counts = np.random.default_rng(2).integers(0, 20, size=int(np.prod(sizes)))
    moved = counts.copy()
    moved[3] += 1
    a = mechanism.release(w @ counts, np.random.default_rng(8))
    b = mechanism.release(w @ moved, np.random.default_rng(8))
    np.testing.assert_allclose(b - a, w[:, 3], atol=1e-9)


def test_fractional_answers_are_refused():
    mechanism = dpopt.solve(exact_spec(ALL_2WAY)).mechanism
    with pytest.raises(DataError, match="whole-number"):
        mechanism.release(np.full(mechanism.dimension, 0.5), np.random.default_rng(0))
