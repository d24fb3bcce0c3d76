"""The r2dp family through the pipeline: design, certificate, verify, release, errors."""

from __future__ import annotations

import copy
import json
import math

import numpy as np
import pytest

import dpopt
from dpopt.cli import main
from dpopt.noise.second_folds import fold_from_parameters
from dpopt.privacy.r2dp import r2dp_epsilon_mp


def _spec(**overrides):
    spec = {"dpopt": 1, "name": "r2dp test",
            "data": {"attributes": {"age": ["0-17", "18-64", "65+"], "disability": ["yes", "no"]}, "n": 500},
            "query": {"kind": "count"}, "adjacency": "add_remove",
            "privacy": {"pure": {"epsilon": 5.0}}, "mechanism": "r2dp",
            "utility": {"metric": "usefulness", "gamma": 0.1},
            # the continuous design (digest T13); on counts the default is the exact mixture on ℤ
            # (tests/test_r2dp_counts.py)
            "sampler": "floating_point"}
    spec.update(overrides)
    return spec


@pytest.fixture(scope="module")
def scalar():
    return dpopt.solve(_spec())


def test_scalar_design_is_the_global_optimum(scalar):
    # digest T13: 0.660051 with atoms ≈ {1.1625, 22.61}
    cert = scalar.certificate
    assert scalar.mechanism.family == "r2dp"
    assert cert["utility"]["value"] == pytest.approx(0.660051, abs=1e-5)
    fold = fold_from_parameters(cert["mechanism"]["parameters"]["second_fold"])
    assert float(r2dp_epsilon_mp(fold, 1.0)) <= 5.0
    design = cert["mechanism"]["parameters"]["design"]
    assert design["baselines"]["laplace"]["value"] == pytest.approx(-math.expm1(-0.5), rel=1e-12)
    assert design["baselines"]["staircase"]["value"] == pytest.approx(0.936473, abs=1e-6)
    claims = {c["claim"]: c for c in cert["checks"]}
    assert claims["privacy"]["passed"] and "Thm 4.1" in claims["privacy"]["method"]
    assert claims["privacy.density_ratio"]["passed"]
    assert claims["utility.sampler"]["passed"]  # closed form 1 − M(−γ) vs the sampler
    assert "best: staircase" in claims["r2dp.comparison"]["detail"]
    assert dpopt.verify(cert).passed


def test_design_value_is_the_design_s_utility(scalar):
    # the report's utility curve asks design_value: the same number as design() then expected_utility (digest T13:
    # 0.660051), without the baselines' staircase design
    from dpopt.mechanisms.r2dp import R2DPMechanism

    assert R2DPMechanism.design_value(scalar.problem) == scalar.certificate["utility"]["value"]
    assert scalar.certificate["utility"]["value"] == pytest.approx(0.660051, abs=1e-5)


def test_certificate_holds_the_law_not_a_realised_scale(scalar):
    # digest P10 / T22: only the second fold's law is recorded; a release discloses nothing else
    mech = scalar.mechanism
    state = copy.deepcopy(vars(mech))
    out = mech.release([42.0], rng=np.random.default_rng(3))
    assert out.shape == (1,)
    assert vars(mech).keys() == state.keys()
    assert mech.fold.parameters == state["fold"].parameters
    assert set(mech.parameters) == {"second_fold", "coupling", "design"}
    assert any("never disclosed" in note for note in scalar.certificate["mechanism"]["notes"])


def test_laplace_optimal_case_returns_laplace():
    # ℓ1 at ε = 1: Laplace is the optimum among all R²DP mechanisms — no fake gain
    sol = dpopt.solve(_spec(privacy={"pure": {"epsilon": 1.0}}, utility={"metric": "l1"}))
    fold = sol.mechanism.parameters["second_fold"]
    assert fold["atoms"] == [1.0] and fold["weights"] == [1.0]
    design = sol.mechanism.parameters["design"]
    assert design["laplace_optimal_among_r2dp"] is True
    assert sol.certificate["utility"]["value"] == design["baselines"]["laplace"]["value"] == 1.0
    assert any("R²DP = Laplace" in n for n in sol.certificate["mechanism"]["notes"])


def test_vector_histogram_uses_the_per_cell_budget():
    spec = _spec(query={"kind": "histogram", "attribute": "age"}, adjacency="replace_one",
                 privacy={"pure": {"epsilon": 10.0}})
    sol = dpopt.solve(spec)
    design = sol.mechanism.parameters["design"]["per_coordinate"]
    assert design == {"epsilon": 5.0, "shift": 1.0, "coordinates_moved": 2, "exact": True}
    # 2 ε(1) = ε: the same per-cell law as the scalar count at ε = 5
    assert sol.certificate["utility"]["value"] == pytest.approx(0.660051, abs=1e-5)
    fold = fold_from_parameters(sol.mechanism.parameters["second_fold"])
    assert 2 * float(r2dp_epsilon_mp(fold, 1.0)) <= 10.0
    assert sol.mechanism.sample(5, np.random.default_rng(0)).shape == (5, 3)
    assert dpopt.verify(sol.certificate).passed


def test_unequal_shifts_fill_the_budget_exactly():
    # linear query, columns (1, 0), (0.5, 1), (0, 2): the design bound 2 ε(2) ≤ ε is loose;
    # the fold is scaled up until max(ε(1), ε(0.5) + ε(1), ε(2)) = ε exactly
    spec = _spec(data={"attributes": {"a": ["x", "y", "z"]}},
                 query={"kind": "linear", "attribute": "a", "matrix": [[1, 0.5, 0], [0, 1, 2]]},
                 privacy={"pure": {"epsilon": 6.0}}, utility={"metric": "l2"})
    sol = dpopt.solve(spec)
    fold = fold_from_parameters(sol.mechanism.parameters["second_fold"])
    assert fold.atoms.tolist() == pytest.approx([3.0], rel=1e-14)  # = Laplace with scale Δ₁/ε = 1/3
    eps = max(float(r2dp_epsilon_mp(fold, 1)), float(r2dp_epsilon_mp(fold, 0.5)) + float(r2dp_epsilon_mp(fold, 1)),
              float(r2dp_epsilon_mp(fold, 2)))
    assert eps == pytest.approx(6.0, rel=1e-14) and eps <= 6.0


def test_prior_metric_spec_verifies():
    spec = _spec(query={"kind": "histogram", "attribute": "age"}, adjacency="replace_one",
                 privacy={"pure": {"epsilon": 14.0}}, utility={"metric": "kl", "prior": [120, 300, 80], "floor": 0.5})
    sol = dpopt.solve(spec)
    assert sol.certificate["utility"]["method"].startswith("quadrature")
    design = sol.mechanism.parameters["design"]
    assert sol.certificate["utility"]["value"] <= design["baselines"]["laplace"]["value"]
    assert dpopt.verify(sol.certificate).passed


def test_tampered_weights_fail_verification(scalar):
    data = copy.deepcopy(scalar.certificate.data)
    fold = data["mechanism"]["parameters"]["second_fold"]
    fold["atoms"] = [a * 1.01 for a in fold["atoms"]]  # less noise: ε > 5
    result = dpopt.verify(data)
    assert not result.passed
    assert {"privacy", "r2dp.comparison"} <= {c.claim for c in result.failed}


def test_auto_compares_honestly():
    # pure ε, usefulness, a bounded sum: the staircase (optimal ε-DP noise) beats R²DP, which
    # beats Laplace; the comparison keeps the staircase and lists R²DP with its value
    # (a list of families is compared in full; auto would not design R²DP, see test_select_pruning)
    spec = _spec(data={"attributes": {"income": {"min": 0, "max": 10}}}, query={"kind": "sum", "attribute": "income"},
                 mechanism=["staircase", "r2dp", "laplace"], utility={"metric": "usefulness", "gamma": 1.0})
    sol = dpopt.solve(spec)
    values = {c.family: c.utility.value for c in sol.candidates if c.feasible}
    assert values["staircase"] > values["r2dp"] > values["laplace"]
    assert sol.mechanism.family not in ("r2dp", "laplace")


@pytest.mark.parametrize("overrides, message", [
    ({"adjacency": {"kind": "hamming", "distance": 2}, "query": {"kind": "histogram", "attribute": "age"}},
     "generators of its hull"),
    ({"utility": {"metric": "kl", "prior": [1.0, 2.0], "floor": 0.5}}, "utility.prior: has 2 entries"),
])
def test_unsupported_or_bad_specs(overrides, message):
    with pytest.raises(dpopt.DpoptError, match=message):
        dpopt.solve(_spec(**overrides))


@pytest.mark.parametrize("utility, message", [
    ({"metric": "kl", "prior": [1.0]}, "needs floor"),
    ({"metric": "renyi", "prior": [1.0], "floor": 0.5, "order": 1.0}, "order > 0 and ≠ 1"),
    ({"metric": "mallows", "prior": [1.0], "order": 0.5}, "order ≥ 1"),
    ({"metric": "l1", "prior": [1.0]}, "go with metrics"),
    ({"metric": "kl", "prior": [-1.0, 2.0], "floor": 0.5}, "non-negative"),
])
def test_prior_fields_are_validated(utility, message):
    with pytest.raises(dpopt.SpecError, match=message):
        dpopt.load_spec(_spec(utility=utility))


def test_cli_bad_prior_exits_2(tmp_path, capsys):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(_spec(utility={"metric": "kl", "prior": [1.0, 2.0], "floor": 0.5})))
    assert main(["solve", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "utility.prior" in err
