"""``kronecker_laplace`` on the lattice (the default where it applies): discrete Laplace on integer factors.

Expected values are computed here with dense matrices from the recorded parameters: the integer strategy
Ã_age ⊗ M_S per measured marginal S, its l1 shifts by enumeration of cells (pairs of cells under replace-one) in
exact rationals, the least squares W (AᵀA)⁻¹Aᵀ of the weighted measurements, and the error
tr(W (AᵀA)⁻¹ Aᵀ D A (AᵀA)⁻¹ Wᵀ) with D the weighted noise's variances θ_S² Var η_S, the discrete Laplace variance
written 1/(2 sinh²(1/(2t))).
"""

from __future__ import annotations

import copy
import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

import dpopt
from dpopt.mechanisms.base import IDEALIZED_NUMERICS
from dpopt.mechanisms.laplace_lattice import EXACT_LAPLACE_NOTE
from test_kronecker_laplace import dense_workload, small_spec

MARGINAL = {(): np.ones((1, 6)), ("sex",): np.kron(np.eye(2), np.ones((1, 3))),
            ("region",): np.kron(np.ones((1, 2)), np.eye(3)), ("sex", "region"): np.eye(6)}
"""M_S on the (sex, region) cells, row-major."""


def exact_spec(size: int = 1, adjacency: str = "add_remove") -> dict:
    return {k: v for k, v in small_spec(size, adjacency).items() if k != "sampler"}


@pytest.fixture(scope="module")
def solved():
    return {key: dpopt.solve(exact_spec(*key)) for key in ((1, "add_remove"), (2, "add_remove"), (1, "replace_one"))}


def blocks(parameters: dict) -> list[tuple[np.ndarray, float, Fraction]]:
    """(Ã_age ⊗ M_S, θ_S, t_S) per measured marginal, densely from the record."""
    (age,) = parameters["lattice"]["factors"]
    integer = np.array(age["matrix"], dtype=np.int64)
    assert np.all(integer == np.array(age["matrix"], dtype=float))
    scales = {tuple(s["marginal"]): Fraction(s["scale"]) for s in parameters["lattice"]["scales"]}
    return [(np.kron(integer, MARGINAL[tuple(s["marginal"])]), s["weight"], scales[tuple(s["marginal"])])
            for s in parameters["strategy"]["marginals"]]


@pytest.mark.parametrize("key", [(1, "add_remove"), (2, "add_remove"), (1, "replace_one")])
def test_epsilon_by_enumerating_neighbouring_cells(solved, key):
    """ε = max over neighbours of Σ_S ‖(Ã ⊗ M_S) δ‖₁/t_S (the pmf ratio of independent discrete Laplace blocks
    under an integer shift), δ = e_j (add/remove: exactly the certified ε) or e_i − e_j (replace-one: at most the
    certified ε, which doubles the add/remove shift), in rationals; and ≤ the target 1."""
    solution = solved[key]
    parameters = solution.certificate["mechanism"]["parameters"]
    assert parameters["sampler"] == "exact"
    found = blocks(parameters)
    cells = found[0][0].shape[1]
    eye = np.eye(cells, dtype=np.int64)
    shifts = ([eye[j] for j in range(cells)] if key[1] == "add_remove" else
              [eye[i] - eye[j] for i, j in itertools.combinations(range(cells), 2)])
    worst = max(sum((Fraction(int(np.abs(a @ d).sum())) / t for a, _, t in found), Fraction(0)) for d in shifts)
    certified = Fraction(solution.certificate["mechanism"]["privacy"]["epsilon_exact"])
    assert worst == certified if key[1] == "add_remove" else worst <= certified
    assert certified <= 1


def test_release_is_the_least_squares_of_the_integer_measurements(solved):
    """The release from the mechanism's draws η_S equals W (AᵀA)⁻¹Aᵀ[θ_S ((Ã ⊗ M_S)x + η_S)] built densely (the
    same generator state: release draws η first)."""
    mechanism = solved[(2, "add_remove")].mechanism
    parameters = mechanism.parameters
    w = dense_workload(2)
    x = np.random.default_rng(3).integers(0, 40, w.shape[1])
    eta = mechanism._lattice_noise(np.random.default_rng(9), 1)
    plain = ("sex", "region")
    rows, measured = [], []
    for (a, theta, _), entry in zip(blocks(parameters), parameters["strategy"]["marginals"]):
        s = tuple(plain.index(n) for n in entry["marginal"])
        rows.append(theta * a)
        measured.append(theta * (a @ x + eta[s].reshape(-1)))
    a = np.vstack(rows).astype(float)
    expected = w @ np.linalg.solve(a.T @ a, a.T @ np.concatenate(measured))
    got = mechanism.release(w @ x, np.random.default_rng(9))
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-7)


def test_error_and_cell_variances_against_dense_matrices(solved):
    solution = solved[(1, "add_remove")]
    mechanism = solution.mechanism
    w = dense_workload(1)
    found = blocks(mechanism.parameters)
    a = np.vstack([theta * m for m, theta, _ in found]).astype(float)
    d = np.concatenate([np.full(m.shape[0], theta**2 / (2.0 * math.sinh(1.0 / (2.0 * float(t))) ** 2))
                        for m, theta, t in found])
    g = np.linalg.inv(a.T @ a)
    covariance = w @ g @ a.T @ (d[:, None] * a) @ g @ w.T
    assert solution.certificate["utility"]["value"] == pytest.approx(np.trace(covariance), rel=1e-9)
    se = np.array([c["standard_error"] for c in solution.certificate["utility"]["per_cell"]["cells"]])
    np.testing.assert_allclose(se, np.sqrt(np.diag(covariance)), rtol=1e-9)
    assert mechanism.design_info["lattice_error_ratio"] == pytest.approx(
        np.trace(covariance) / mechanism._continuous_l2(), rel=1e-9)


def test_verify_rejects_a_forged_factor_or_scale_and_passes_the_real_one(solved):
    cert = solved[(1, "replace_one")].certificate
    assert dpopt.verify(cert).passed
    assert EXACT_LAPLACE_NOTE in cert["mechanism"]["notes"] and IDEALIZED_NUMERICS not in cert["mechanism"]["notes"]
    for forge in ("factor", "scale"):
        forged = copy.deepcopy(cert.data)
        lattice = forged["mechanism"]["parameters"]["lattice"]
        if forge == "factor":  # one column's entries doubled: its l1 norm, the sensitivity, doubles
            matrix = np.array(lattice["factors"][0]["matrix"])
            matrix[:, 0] *= 2
            lattice["factors"][0]["matrix"] = matrix.tolist()
        else:
            lattice["scales"][0]["scale"] = str(Fraction(lattice["scales"][0]["scale"]) / 2)
        assert "privacy" in {c.claim for c in dpopt.verify(forged).failed}, forge


def test_floating_point_keeps_the_note_and_a_summed_ordered_attribute_is_exact():
    """sampler: floating_point keeps the continuous path; a term that sums over the ordered attribute (age) is
    measured exactly in blocks (tests/test_kronecker_laplace_blocks.py checks that design)."""
    floating = dpopt.solve(small_spec(1)).certificate
    assert floating["mechanism"]["parameters"]["sampler"] == "floating_point"
    assert IDEALIZED_NUMERICS in floating["mechanism"]["notes"]
    summed = {**exact_spec(1), "query": {"kind": "kronecker", "terms": [{"age": "prefix", "sex": "identity"},
                                                                          {"region": "identity"}]}}
    cert = dpopt.solve(summed).certificate
    assert cert["mechanism"]["parameters"]["sampler"] == "exact"
    assert "blocks" in cert["mechanism"]["parameters"]["lattice"]
    assert IDEALIZED_NUMERICS not in cert["mechanism"]["notes"]
    assert dpopt.verify(cert).passed
