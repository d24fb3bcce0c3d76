"""``kronecker_gaussian`` measured exactly on a lattice (:mod:`dpopt.mechanisms.kronecker_lattice`).

Sources of the expected values:

* the privacy: μ² = max over neighbouring cell vectors δ of Σ_T g_T² ‖M_T δ‖² / v_T, recomputed here densely in floats
  from the certificate's record alone (M_T = ⊗_k (the recorded integer factor if k ∈ T — divided by the block's
  divisor and rounded half up for a rounded attribute — else a row of ones), the blocks' σ_T² and gains), by
  enumerating every cell (add/remove) or pair of cells (replace-one) — not by the
  module's integer Kronecker search; v_T = σ_T² under ρ-zCDP (Canonne, Kamath & Steinke 2020, Theorem 14);
* the release: unbiased (mean of the errors 0) with the certified per-cell variances, checked by Monte Carlo of
  the public release path with a tolerance of 5 standard errors (derived in the test); neighbouring datasets
  released with one random stream differ by exactly W·δ (the noise is drawn before the data is read);
* the continuous design's covariance s² W (AᵀA)⁻¹ Wᵀ from the recorded float factors (as test_kronecker_workloads),
  for the cost of the lattice.
"""

from __future__ import annotations

import copy
import itertools
import json
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

import dpopt
from dpopt.errors import DataError
from dpopt.mechanisms.base import IDEALIZED_NUMERICS
from dpopt.mechanisms.lattice import EXACT_MEASUREMENT_NOTE
from dpopt.release import release_groups

ROOT = Path(__file__).resolve().parents[1]
LEVELS = {"age": ["a", "b", "c", "d"], "sex": ["f", "m"], "r": ["x", "y", "z"]}
TERMS = [{"age": {"ranges": 2}, "sex": "identity"}, {"age": "prefix", "r": "identity"}]


def spec(adjacency="replace_one", privacy=None, **extra) -> dict:
    data = {"attributes": LEVELS} | ({"n": 30} if adjacency != "add_remove" else {})
    return {"dpopt": 1, "name": "exact kronecker", "data": data, "query": {"kind": "kronecker", "terms": TERMS},
            "adjacency": adjacency, "privacy": privacy or {"zcdp": {"rho": 0.5}}, "mechanism": "kronecker_gaussian",
            **extra}


def dense_terms() -> np.ndarray:
    """W written independently: ranges of width ≤ 2 over 4 levels ⊗ I₂ ⊗ 1ᵀ₃, prefix(4) ⊗ 1ᵀ₂ ⊗ I₃."""
    ranges = np.array([[1 if i <= k <= j else 0 for k in range(4)] for i in range(4) for j in range(i, min(i + 2, 4))])
    prefix = np.tril(np.ones((4, 4)))
    return np.vstack([np.kron(np.kron(ranges, np.eye(2)), np.ones((1, 3))),
                      np.kron(np.kron(prefix, np.ones((1, 2))), np.eye(3))])


def dense_mu_squared(parameters: dict, replace: bool) -> float:
    """max_δ Σ_T g_T² ‖M_T δ‖²/σ_T² from the record (module docstring), densely."""
    lattice, names = parameters["lattice"], parameters["attributes"]
    factors = {f["attribute"]: np.array(f["matrix"], dtype=float) for f in lattice["factors"]}
    sizes = [len(LEVELS[a]) for a in names]
    blocks = []
    for b in lattice["blocks"]:
        m = np.ones((1, 1))
        for a, n in zip(names, sizes):
            f = factors[a]
            if a in lattice["rounded"] and b["divisor"] > 1:  # P̃/d rounded half up: ⌊P̃/d + 1/2⌋
                f = np.floor(f / b["divisor"] + 0.5)
            m = np.kron(m, f if a in b["attributes"] else np.ones((1, n)))
        blocks.append((m, b["gain"] ** 2 / float(Fraction(b["sigma2"]))))
    cells = int(np.prod(sizes))
    eye = np.eye(cells)
    moves = ([eye[i] - eye[j] for i, j in itertools.permutations(range(cells), 2)] if replace else list(eye))
    return max(sum(w * float(np.sum((m @ d) ** 2)) for m, w in blocks) for d in moves)


@pytest.fixture(scope="module")
def solved():
    return {adjacency: dpopt.solve(spec(adjacency)) for adjacency in ("replace_one", "add_remove")}


@pytest.mark.parametrize("adjacency", ["replace_one", "add_remove"])
def test_privacy_equals_the_dense_enumeration(solved, adjacency):
    """ρ = μ²/2 of the summary (exact integers, Kronecker search) equals the dense enumeration, and meets ρ = 0.5;
    add/remove has plain attributes (sex, r), so its strategy is the ANOVA form."""
    solution = solved[adjacency]
    mechanism = solution.mechanism
    assert mechanism.sampler == "exact" and (mechanism.coefficients is not None) == (adjacency == "add_remove")
    dense = dense_mu_squared(mechanism.parameters, adjacency == "replace_one")
    rho = mechanism.privacy_summary(solution.space)["rho"]
    assert 2 * rho == pytest.approx(dense, rel=1e-12)
    assert rho <= 0.5
    notes = solution.certificate["mechanism"]["notes"]
    assert EXACT_MEASUREMENT_NOTE in notes and IDEALIZED_NUMERICS not in notes
    assert all(c.passed for c in dpopt.verify(json.loads(solution.certificate.to_json())).checks)


@pytest.mark.parametrize("adjacency", ["replace_one", "add_remove"])
def test_release_is_unbiased_with_the_certified_variances(solved, adjacency):
    """40,000 releases at one table through Mechanism.release: per cell, the mean error within 5 SE of 0 (SE =
    √(v/n)) and the sample variance within 5 SE of v (SE ≈ v√(2/(n − 1)): each error sums many independent
    discrete Gaussians of σ ≥ 8, near-normal), over 2 × 40 cells; the total E‖Z‖² is the certified utility."""
    solution = solved[adjacency]
    mechanism = solution.mechanism
    counts = np.random.default_rng(4).integers(0, 6, size=24)
    truth = dense_terms() @ counts
    n = 40_000
    errors = mechanism.release(np.tile(truth, (n, 1)), np.random.default_rng(9)) - truth
    v = mechanism.cell_variances()
    assert np.all(np.abs(errors.mean(axis=0)) <= 5 * np.sqrt(v / n))
    assert np.all(np.abs(errors.var(axis=0, ddof=1) - v) <= 5 * v * np.sqrt(2 / (n - 1)))
    assert solution.certificate["utility"]["value"] == pytest.approx(v.sum(), rel=1e-12)


def test_the_release_depends_on_the_data_only_through_the_integer_measurements(solved):
    mechanism = solved["replace_one"].mechanism
    counts = np.random.default_rng(2).integers(0, 6, size=24)
    moved = counts.copy()
    moved[5], moved[17] = moved[5] + 1, moved[17] - 1 if moved[17] else moved[17] + 1
    w = dense_terms()
    a = mechanism.release(w @ counts, np.random.default_rng(8))
    b = mechanism.release(w @ moved, np.random.default_rng(8))
    np.testing.assert_allclose(b - a, w @ (moved - counts), atol=1e-9)


def test_the_lattice_cost_is_recorded_against_the_continuous_design(solved):
    """The design record's continuous E‖Z‖² is s² tr(W (AᵀA)⁻¹ Wᵀ) at the recorded float factors (replace-one,
    product strategy); the ratio the note states is the certified error over it."""
    mechanism = solved["replace_one"].mechanism
    p = mechanism.parameters
    a = np.ones((1, 1))
    for f in p["strategy"]:
        a = np.kron(a, np.array(f["matrix"]))
    w = dense_terms()
    continuous = p["sigma"] ** 2 * np.trace(w @ np.linalg.inv(a.T @ a) @ w.T)
    design = p["design"]
    assert design["continuous_expected_l2"] == pytest.approx(continuous, rel=1e-9)
    assert design["lattice_error_ratio"] == pytest.approx(design["expected_l2"] / continuous, rel=1e-9)


@pytest.mark.parametrize("edit", ["factor", "sigma2", "gain", "divisor"])
def test_verify_refuses_a_forged_lattice(solved, edit):
    """A doubled integer factor (Δ doubled), a halved block variance, a doubled gain, or the largest divisor halved
    in every block that has it (a finer factor: Δ about doubled there): the recorded σ_T² no longer meet ρ, and
    `dpopt verify` says which claim failed."""
    document = json.loads(solved["add_remove" if edit == "divisor" else "replace_one"].certificate.to_json())
    forged = copy.deepcopy(document)
    lattice = forged["mechanism"]["parameters"]["lattice"]
    if edit == "divisor":
        largest = max(b["divisor"] for b in lattice["blocks"])
        assert largest > 1
        for b in lattice["blocks"]:
            b["divisor"] //= 2 if b["divisor"] == largest else 1
    elif edit == "factor":
        lattice["factors"][0]["matrix"] = [[2 * v for v in row] for row in lattice["factors"][0]["matrix"]]
    else:
        block = max(lattice["blocks"], key=lambda b: Fraction(b["sigma2"]))
        if edit == "sigma2":
            block["sigma2"] = str(Fraction(block["sigma2"]) / 2)
        else:
            block["gain"] *= 2
    failed = {c.claim for c in dpopt.verify(forged).checks if not c.passed}
    assert "privacy" in failed


def test_answers_that_are_not_counts_are_refused(solved):
    """Fractional answers, and integer answers of the ranges term that no integer cells reproduce (a range count
    raised by one: the width-2 range no longer equals the sum of its single levels)."""
    mechanism = solved["replace_one"].mechanism
    truth = dense_terms() @ np.random.default_rng(3).integers(0, 6, size=24)
    with pytest.raises(DataError, match="whole-number"):
        mechanism.release(truth + 0.5, np.random.default_rng(0))
    broken = truth.copy()
    broken[2] += 1  # the range [a, b] of sex f
    with pytest.raises(DataError, match="counts of records"):
        mechanism.release(broken, np.random.default_rng(0))


def test_floating_point_keeps_the_note():
    solution = dpopt.solve(spec(sampler="floating_point"))
    assert solution.mechanism.parameters["sampler"] == "floating_point"
    notes = solution.certificate["mechanism"]["notes"]
    assert IDEALIZED_NUMERICS in notes and any(n.startswith("no exact lattice measurement") for n in notes)


def test_grouped_release_measures_each_group_on_the_lattice(tmp_path):
    """The grouped path hands every group's answers to the one release: the certificate is the lattice's and every
    group gets its answers (the public, empty group too)."""
    records = tmp_path / "records.csv"
    rows = ["g,age,sex,r"] + [f"{'AB'[i % 2]},{'abcd'[i % 4]},{'fm'[i % 3 % 2]},{'xyz'[i % 3]}" for i in range(40)]
    records.write_text("\n".join(rows) + "\n")
    grouped = {**spec("add_remove")}
    release = release_groups(grouped, records, "g", groups={"g": ["A", "B", "C"]}, seed=5, insecure_seed=True)
    assert release.mechanism.sampler == "exact"
    level = release.level("g")
    assert list(level.keys) == ["A", "B", "C"] and level.values.shape == (3, dense_terms().shape[0])


def test_plan_releases_the_kronecker_query_on_the_lattice(tmp_path):
    """A release plan designs the Kronecker query at its share on the lattice, releases it through the plan's
    one-pass path, and its certificate holds."""
    from dpopt.plan.release import release_plan
    from dpopt.rng import random_source

    plan = {"dpopt": 1, "name": "plan", "data": {"attributes": LEVELS, "n": 30}, "adjacency": "replace_one",
            "privacy": {"zcdp": {"rho": 1}}, "utility": "l2",
            "queries": [{"name": "kron", "mechanism": "kronecker_gaussian", "query": {"kind": "kronecker", "terms": TERMS}},
                        {"name": "sex", "query": {"kind": "histogram", "attribute": "sex"}}]}
    records = tmp_path / "records.csv"
    records.write_text("age,sex,r\n" + "".join(f"{'abcd'[i % 4]},{'fm'[i % 2]},{'xyz'[i % 3]}\n" for i in range(30)))
    solution, document, _ = release_plan(plan, records, random_source(3, insecure_seed=True))
    certificate = json.loads(solution.certificate.to_json())
    kron = next(q for q in certificate["queries"] if q["name"] == "kron")
    assert kron["family"] == "kronecker_gaussian" and kron["parameters"]["sampler"] == "exact"
    assert dpopt.plan.verify_plan(certificate).passed
    table = next(t for t in document["tables"] if t["name"] == "kron")
    assert len(table["release"]) == dense_terms().shape[0]


@pytest.mark.parametrize("adjacency", ["replace_one", "add_remove"])
def test_total_variance_is_the_sum_of_the_cell_variances(solved, adjacency):
    """The scale search's Σ over answers (product of each factor's sum) against the sum of the per-answer variances
    (Kronecker products formed, summed): equal up to float rounding (1e-12 relative: a few hundred terms of
    double-precision products, each off by a few units in the last place)."""
    lattice = solved[adjacency].mechanism.lattice
    variances = {t: float(v) for t, v in lattice.variances.items()}
    total = lattice.total_variance(variances)
    assert total == pytest.approx(float(lattice.cell_variances(variances).sum()), rel=1e-12)
