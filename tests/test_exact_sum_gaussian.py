"""Gaussian noise on bounded sums and means beyond ρ-zCDP, μ-GDP, (ε, δ) of `gaussian`: `gaussian_optimal` routed
to the sum's lattice (dpopt.mechanisms.gaussian_optimal.OptimalSumGaussian)."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from fractions import Fraction

import pytest

import dpopt
from dpopt.mechanisms.base import IDEALIZED_NUMERICS
from dpopt.mechanisms.exact_sum import LatticeSumGaussian
from dpopt.mechanisms.gaussian_optimal import GaussianOptimalMechanism, OptimalSumGaussian
from dpopt.mechanisms.lattice import discrete_variance


def _spec(query="sum", adjacency="add_remove", privacy=None, mechanism="gaussian_optimal", lower=0, upper=1000,
          n=None, metric="l2", sampler=None):
    data = {"attributes": {"x": {"min": lower, "max": upper}}}
    if n is not None:
        data["n"] = n
    spec = {"dpopt": 1, "name": "t", "data": data, "query": {"kind": query, "attribute": "x"},
            "adjacency": adjacency, "privacy": privacy or {"zcdp": {"rho": 0.5}}, "mechanism": mechanism,
            "utility": {"metric": metric}}
    if sampler is not None:
        spec["sampler"] = sampler
    return spec


TARGETS = [{"zcdp": {"rho": 0.5}}, {"gdp": {"mu": 1.0}}, {"approx": {"epsilon": 1.0, "delta": 1e-6}}]


@pytest.mark.parametrize("query, adjacency, n", [("sum", "add_remove", None), ("sum", "replace_one", 100),
                                                 ("mean", "replace_one", 500)])
@pytest.mark.parametrize("privacy", TARGETS, ids=["zcdp", "gdp", "approx"])
@pytest.mark.parametrize("metric", ["l2", "max_variance", "ci_volume"])
def test_gaussian_optimal_on_a_sum_measures_on_the_lattice_and_verifies(query, adjacency, n, privacy, metric):
    solution = dpopt.solve(_spec(query, adjacency, privacy, n=n, metric=metric))
    cert = solution.certificate
    mech = solution.mechanism
    assert isinstance(mech, OptimalSumGaussian) and mech.exact_noise
    assert cert["mechanism"]["family"] == "gaussian_optimal"
    assert IDEALIZED_NUMERICS not in json.dumps(cert.data, default=str)
    assert dpopt.verify(cert).passed
    # one dimension: the isotropic Gaussian's design (same lattice, same σ_ℤ²) under the other family's name
    isotropic = dpopt.solve(_spec(query, adjacency, privacy, mechanism="gaussian", n=n, metric=metric)).mechanism
    assert isinstance(isotropic, LatticeSumGaussian)
    assert (mech.lattice, mech.lattice_sigma2) == (isotropic.lattice, isotropic.lattice_sigma2)


def test_the_one_dimensional_optimum_is_the_isotropic_variance():
    # the convex program in one variable: min s² subject to Δ²/s² ≤ μ², so Σ = Δ²/μ² = Δ²/(2ρ) = 1000² at ρ = 0.5
    # (add/remove, [0, 1000]: Δ = 1000); the floating-point design's solver finds it
    mech = dpopt.solve(_spec(sampler="floating_point")).mechanism
    assert type(mech) is GaussianOptimalMechanism and mech.sampler == "floating_point"
    assert mech.covariance[0, 0] == pytest.approx(1000.0**2, rel=1e-6)
    assert "on the sum's lattice: the spec asks for sampler: floating_point" in " ".join(mech.notes())


def test_the_lattice_variance_is_the_continuous_one_under_zcdp():
    # ρ = Δ_u²/(2σ_ℤ²) with [0, 1000] a multiple of g: Δ_u = 1000/g and σ_ℤ² = (σ/g)² = 1000²/g² exactly (a dyadic
    # number), so the released variance g²·Var N_ℤ(0, σ_ℤ²) is σ² = 10⁶ up to Var N_ℤ's deficit (below e^-300 at
    # these σ_ℤ²)
    mech = dpopt.solve(_spec()).mechanism
    g = mech.lattice.granularity
    assert mech.lattice.shift == 1000 / g and mech.lattice_sigma2 == Fraction(1000) ** 2 / g**2
    assert discrete_variance(mech.lattice_sigma2) * float(g) ** 2 == pytest.approx(1e6, rel=1e-12)


@pytest.mark.parametrize("change", ["sigma2", "shift", "exponent"])
def test_a_forged_lattice_parameter_fails_verify(change):
    cert = dpopt.solve(_spec(privacy={"gdp": {"mu": 1.0}}, upper=10.3)).certificate.data
    forged = copy.deepcopy(cert)
    parameters = forged["mechanism"]["parameters"]
    if change == "sigma2":
        parameters["lattice_sigma2"] = str(Fraction(parameters["lattice_sigma2"]) / 2)  # μ grows by √2
    elif change == "shift":
        parameters["sum_lattice"]["shift"] //= 2  # a smaller Δ_u than the bounds give
    else:
        parameters["sum_lattice"]["exponent"] += 1  # a coarser lattice at the same Δ_u
        parameters["sum_lattice"]["granularity"] = f"2^{parameters['sum_lattice']['exponent']}"
    assert not dpopt.verify(forged).passed


def test_cli_solve_and_verify_gaussian_optimal_on_a_mean(tmp_path):
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(_spec("mean", "replace_one", {"approx": {"epsilon": 1.0, "delta": 1e-6}}, n=500,
                                     metric="ci_volume")))
    run = lambda *args: subprocess.run([sys.executable, "-m", "dpopt.cli", *args], capture_output=True, text=True)
    solved = run("solve", str(path), "--out", str(tmp_path / "out"))
    assert solved.returncode == 0, solved.stderr
    assert run("verify", str(tmp_path / "out" / "certificate.json")).returncode == 0
    certificate = json.loads((tmp_path / "out" / "certificate.json").read_text())
    assert certificate["mechanism"]["family"] == "gaussian_optimal"
    assert "idealized" not in json.dumps(certificate)
    forged = copy.deepcopy(certificate)
    forged["mechanism"]["parameters"]["lattice_sigma2"] = str(
        Fraction(forged["mechanism"]["parameters"]["lattice_sigma2"]) / 2)
    (tmp_path / "forged.json").write_text(json.dumps(forged))
    assert run("verify", str(tmp_path / "forged.json")).returncode != 0
