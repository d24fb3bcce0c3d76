"""Gaussian noise on bounded sums and means measured on the sum's dyadic lattice, beyond `gaussian` under ρ-zCDP,
μ-GDP and (ε, δ) (tests/test_exact_sums.py): `gaussian_optimal` routed to that lattice
(dpopt.mechanisms.gaussian_optimal.OptimalSumGaussian), and `gaussian` under (ε, δ)-pDP
(dpopt.privacy.discrete_gaussian_pdp.shift_range_level, dpopt.mechanisms.lattice_pdp.sum_pdp_variance).

Expected values: the one-variable convex program solved by hand (Σ = Δ²/μ²); pDP levels of every integer move
by a direct 40-digit mpmath sum of the discrete Gaussian's pmf over the outputs whose loss, computed from its
definition ((η + v)² − η²)/(2σ²) in exact rationals, exceeds ε (independent of the thresholds and of the arb
box sums); the certified lattice variance's level re-summed in double precision from the pmf."""

from __future__ import annotations

import copy
import json
import math
import subprocess
import sys
from fractions import Fraction

import mpmath
import numpy as np
import pytest

import dpopt
from dpopt.mechanisms.base import IDEALIZED_NUMERICS
from dpopt.mechanisms.exact_sum import LatticeSumGaussian
from dpopt.mechanisms.gaussian_optimal import GaussianOptimalMechanism, OptimalSumGaussian
from dpopt.mechanisms.lattice import discrete_variance
from dpopt.noise.discrete_gaussian import sample_discrete_gaussian
from dpopt.privacy.discrete_gaussian_pdp import shift_range_level
from dpopt.privacy.pdp import gaussian_pdp_sigma, gaussian_pdp_sigma_exact


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


@pytest.mark.slow  # 5–6 s; the pDP sum's CLI run stays in the default run
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


def _mp_move_levels(sigma2: Fraction, shift: int, eps: Fraction) -> list[float]:
    """δ(v) = P[|(η + v)² − η²| > 2εσ²] for v = 1 .. shift, η ~ N_ℤ(0, σ²), by a direct 40-digit sum over
    |η| ≤ 12σ + 8 + shift (the rest below e^{-72})."""
    mpmath.mp.dps = 40
    s2 = mpmath.mpf(sigma2.numerator) / sigma2.denominator
    top = int(12 * math.sqrt(sigma2)) + 8 + shift
    w = {k: mpmath.exp(-mpmath.mpf(k * k) / (2 * s2)) for k in range(-top, top + 1)}
    z = mpmath.fsum(w.values())
    return [float(mpmath.fsum(w[k] for k in w if abs(Fraction((k + v) ** 2 - k * k)) > 2 * eps * sigma2) / z)
            for v in range(1, shift + 1)]


@pytest.mark.parametrize("sigma2, eps", [(Fraction(7, 2), Fraction(1)), (Fraction(5), Fraction(1, 2)),
                                         (Fraction(12), Fraction(1)), (Fraction(81, 4), Fraction(3, 10)),
                                         (Fraction(50), Fraction(2))])
def test_the_largest_shift_bounds_every_move_up_to_it_by_brute_force(sigma2, eps):
    shift_max = 12
    levels = _mp_move_levels(sigma2, shift_max, eps)
    for shift in range(1, shift_max + 1):
        bound = shift_range_level(sigma2, shift, eps)
        if shift * shift <= 2 * eps * sigma2:
            # nested intervals: δ(v) grows up to Δ_u, and the bound is δ(Δ_u) itself (the arb sum's upper end)
            assert all(a <= b + 1e-30 for a, b in zip(levels[:shift], levels[1:shift]))
            assert max(levels[:shift]) <= float(bound) <= max(levels[:shift]) + 1e-25
        else:
            assert bound == 1  # beyond √(2εσ²) only the trivial bound is claimed
            assert levels[shift - 1] > 0.5  # and δ(Δ_u) ≥ P[η ≥ 0] > ½ there: no target δ < ½ is lost


def test_beyond_the_nested_range_the_discrete_level_is_not_monotone():
    # why the bound stops at Δ_u² ≤ 2εσ²: at σ² = 12, ε = 1 (√(2εσ²) ≈ 4.9) some larger move has a smaller level
    levels = _mp_move_levels(Fraction(12), 12, Fraction(1))
    assert any(b < a for a, b in zip(levels[4:], levels[5:]))


PDP = {"pdp": {"epsilon": 1.0, "delta": 1e-3}}


def _level_float(sigma2: float, shift: int, eps: float) -> float:
    """δ(Δ_u) of N_ℤ(0, σ²) in double precision from the pmf over |k| ≤ 13σ (the rest below e^-84)."""
    top = int(13 * math.sqrt(sigma2)) + 2
    k = np.arange(-top, top + 1, dtype=float)
    pmf = np.exp(-k * k / (2 * sigma2))
    pmf /= pmf.sum()
    loss = np.abs((k + shift) ** 2 - k * k) / (2 * sigma2)
    return float(pmf[loss > eps].sum())


@pytest.mark.parametrize("query, adjacency, n, upper, metric", [
    ("sum", "add_remove", None, 1000, "l2"),
    ("sum", "replace_one", 100, 1000, "ci_volume"),
    ("mean", "replace_one", 500, 1000, "max_variance"),
    ("sum", "add_remove", None, 7.7, "l1"),  # bounds off the lattice: Δ_u = ⌈7.7/g⌉
])
def test_gaussian_on_a_sum_under_pdp_measures_exactly_and_verifies(query, adjacency, n, upper, metric):
    solution = dpopt.solve(_spec(query, adjacency, PDP, mechanism="gaussian", upper=upper, n=n, metric=metric))
    cert, mech = solution.certificate, solution.mechanism
    assert isinstance(mech, LatticeSumGaussian) and mech.exact_noise and mech.target == "pdp"
    assert IDEALIZED_NUMERICS not in json.dumps(cert.data, default=str)
    assert dpopt.verify(cert).passed
    s2, shift = float(mech.lattice_sigma2), mech.lattice.shift
    assert shift * shift <= 2 * s2  # the range where Δ_u is the worst move (ε = 1)
    # the certified level re-summed from the pmf: within δ, and σ_ℤ² 0.1% lower fails (near the smallest: one
    # point mass of η at 3.3σ_ℤ is about 10⁻⁷, the level's change over 0.1% of σ² about 5·10⁻⁶)
    assert _level_float(s2, shift, 1.0) <= 1e-3
    assert _level_float(s2 * (1 - 1e-3), shift, 1.0) > 1e-3
    # the exact level is below Lemma 10's bound, so the variance is below the continuous design's: the continuous
    # Gaussian's exact pDP σ over Lemma 10's (erfc closed forms, dpopt.privacy.pdp) squared, times the rounding's
    # (Δ_u g/Δ)²; the discrete level differs from the continuous one by a few point masses of η (about 10⁻⁷ each at
    # σ_ℤ ≈ 1.3·10⁴) against a slope dδ/d ln σ² of about 5δ, so σ_ℤ² agrees to far better than the 10⁻³ allowed
    continuous = (gaussian_pdp_sigma_exact(1.0, 1e-3, 1.0) / gaussian_pdp_sigma(1.0, 1e-3, 1.0)) ** 2
    rounding = float(shift * mech.lattice.granularity / Fraction(upper)) ** 2  # Δ = U − 0 (sum units) either way
    ratio = cert["mechanism"]["parameters"]["exact_cost"]["ratio"]
    assert ratio == pytest.approx(continuous * rounding, rel=1e-3)


def test_the_sampled_loss_of_exact_draws_matches_the_certified_level():
    # 200,000 draws of the exact sampler at the certified σ_ℤ², the loss of the worst move Δ_u from its definition
    # ((η + Δ_u)² − η²)/(2σ_ℤ²) in exact integers: the share beyond ε within 4 standard errors √(δ(1 − δ)/n) of the
    # certified level (the level is a tight upper bound: within 10⁻²⁵ of the exact one, brute-force test above)
    mech = dpopt.solve(_spec(privacy=PDP, mechanism="gaussian", upper=7.7)).mechanism
    s2, shift = mech.lattice_sigma2, mech.lattice.shift
    eta = sample_discrete_gaussian(np.random.default_rng(11), s2.numerator, s2.denominator, 200_000)
    change = np.abs(2 * shift * eta.astype(object) + shift * shift) * s2.denominator
    share = float(np.mean(change > 2 * s2.numerator))  # |L| > ε = 1
    level = float(shift_range_level(s2, shift, Fraction(1)))
    assert abs(share - level) <= 4 * math.sqrt(level * (1 - level) / 200_000)


@pytest.mark.parametrize("change", ["sigma2", "shift"])
def test_a_forged_pdp_lattice_parameter_fails_verify(change):
    cert = dpopt.solve(_spec(privacy=PDP, mechanism="gaussian", upper=10.3)).certificate.data
    forged = copy.deepcopy(cert)
    parameters = forged["mechanism"]["parameters"]
    if change == "sigma2":
        parameters["lattice_sigma2"] = str(Fraction(parameters["lattice_sigma2"]) * Fraction(9, 10))
    else:
        parameters["sum_lattice"]["shift"] -= 1
    failed = {c.claim for c in dpopt.verify(forged).failed}
    assert ("privacy" if change == "sigma2" else "mechanism.lattice") in failed


def test_cli_solve_and_verify_a_pdp_sum(tmp_path):
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(_spec(privacy=PDP, mechanism="gaussian", upper=7.7)))
    run = lambda *args: subprocess.run([sys.executable, "-m", "dpopt.cli", *args], capture_output=True, text=True)
    solved = run("solve", str(path), "--out", str(tmp_path / "out"))
    assert solved.returncode == 0, solved.stderr
    assert run("verify", str(tmp_path / "out" / "certificate.json")).returncode == 0
    certificate = json.loads((tmp_path / "out" / "certificate.json").read_text())
    assert certificate["mechanism"]["parameters"]["lattice_privacy"] == "pdp"
    assert "idealized" not in json.dumps(certificate)
