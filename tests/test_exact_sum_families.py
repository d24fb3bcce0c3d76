"""k_norm, r2dp and generalized_gaussian on a bounded sum or mean, measured exactly on a dyadic lattice.

Expected values come from the laws' definitions, evaluated here independently of the package: the discrete Laplace
pmf ∝ e^{−|k|/t} and its variance 2r/(1 − r)², r = e^{−1/t} (Canonne, Kamath & Steinke 2020, Def. 28); a mixture's
pmf Σ_j w_j tanh(1/(2s_j)) e^{−|k|/s_j}; the discrete GG's unnormalised weight e^{−(|k|/s)^p}; and from brute force
over small record sets (the lattice sums of neighbours, the privacy loss over a window of outputs).
"""

from __future__ import annotations

import copy
import json
import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
import yaml

import dpopt
from dpopt.cli import main
from dpopt.mechanisms.base import IDEALIZED_NUMERICS

FAMILIES = ["k_norm", "r2dp", "generalized_gaussian"]


def _spec(mechanism, query="sum", adjacency="add_remove", privacy=None, lower=0, upper=10.3, n=None, metric="l2"):
    data = {"attributes": {"x": {"min": lower, "max": upper}}}
    if n is not None:
        data["n"] = n
    utility = {"metric": metric} | ({"gamma": 3} if metric == "usefulness" else {})
    return {"dpopt": 1, "name": "t", "data": data, "query": {"kind": query, "attribute": "x"},
            "adjacency": adjacency, "privacy": privacy or {"pure": {"epsilon": 1}}, "mechanism": mechanism,
            "utility": utility}


def _log_weight(mechanism, k: int) -> float:
    """log of the unnormalised pmf of the noise in units at k, from the law's definition (module docstring)."""
    params = mechanism.parameters
    if mechanism.family == "k_norm":
        return -abs(k) / float(Fraction(params["lattice_scale"]))
    if mechanism.family == "r2dp":
        mixture = params["mixture"]
        return float(mpmath.log(mpmath.fsum(
            w * mpmath.tanh(1 / (2 * mpmath.mpf(Fraction(s).numerator) / Fraction(s).denominator))
            * mpmath.exp(-abs(k) * mpmath.mpf(Fraction(s).denominator) / Fraction(s).numerator)
            for s, w in zip(mixture["scales"], mixture["weights"]))))
    if mechanism.family == "generalized_gaussian":
        return -((abs(k) / float(Fraction(params["scale_exact"]))) ** params["p"])
    raise AssertionError(mechanism.family)


def _variance_units(mechanism) -> float:
    """E η² of the noise in units, from the law's closed form (module docstring)."""
    params = mechanism.parameters
    if mechanism.family == "k_norm":
        r = math.exp(-1 / float(Fraction(params["lattice_scale"])))
        return 2 * r / (1 - r) ** 2
    if mechanism.family == "r2dp":
        mixture = params["mixture"]
        total = sum(mixture["weights"])
        return sum(w / total * 2 * math.exp(-1 / float(Fraction(s))) / (1 - math.exp(-1 / float(Fraction(s)))) ** 2
                   for s, w in zip(mixture["scales"], mixture["weights"]))
    if mechanism.family == "generalized_gaussian" and params["p"] == 1:
        r = math.exp(-1 / float(Fraction(params["scale_exact"])))
        return 2 * r / (1 - r) ** 2
    if mechanism.family == "generalized_gaussian":  # brute force: Σ k² w(k) / Σ w(k) over |k| ≤ 12s (tail < e^-144)
        s, p = float(Fraction(params["scale_exact"])), params["p"]
        k = np.arange(-math.ceil(12 * s), math.ceil(12 * s) + 1, dtype=float)
        w = np.exp(-((np.abs(k) / s) ** p))
        return float(np.sum(k**2 * w) / np.sum(w))
    raise AssertionError(mechanism.family)


@pytest.mark.parametrize(("family", "privacy"), [(family, {"pure": {"epsilon": 1}}) for family in FAMILIES] + [
    ("generalized_gaussian", {"zcdp": {"rho": 0.5}}),
    ("generalized_gaussian", {"approx": {"epsilon": 0.5, "delta": 1e-9}})])
def test_the_released_law_is_on_the_lattice_with_the_discrete_laws_variance(family, privacy):
    # 20,000 draws at a lattice answer: every release is a multiple of g/n, and the sample variance of the units'
    # noise is within 4 standard errors of the closed form; the standard error √((μ₄ − σ⁴)/N) is taken with a
    # kurtosis of 6 (Laplace's, the discrete Laplace's limit at these scales of 10⁶ units, and above every
    # mixture's or GG's used here would make it 4 SE of a larger spread): SE = σ²√(5/N).
    mechanism = dpopt.solve(_spec(family, query="mean", adjacency="replace_one", n=7, privacy=privacy)).mechanism
    lattice = mechanism.lattice
    unit = lattice.unit
    answer = float(123456 * unit)
    draws = 20_000
    out = mechanism.release(np.full((draws, 1), answer), np.random.default_rng(11))[:, 0]
    units = [round(Fraction(float(v)) / unit) for v in out]  # a mean's release is the nearest double of g·M/n
    assert all(float(m * unit) == float(v) for m, v in zip(units, out))
    k = np.array([m - 123456 for m in units], dtype=float)
    sigma2 = _variance_units(mechanism)
    assert abs(np.mean(k**2) - sigma2) <= 4 * sigma2 * math.sqrt(5 / draws)


@pytest.mark.parametrize("family", FAMILIES)
def test_the_privacy_loss_of_neighbouring_records_stays_within_the_target(family):
    # Add/remove on a sum of records in [−1, 1.5] (no public box: every family's noise is additive): a record set's
    # exact lattice sum N (rounded here from the definition ⌊x/g + ½⌋) and its neighbours' N' (one record removed or
    # one value added); the released law at output y has log-weight w(y − N), so the loss is w(y − N) − w(y − N')
    # over a window of y around N (the normaliser is common).
    values = [Fraction(v) for v in (-1, -0.3, 0, 0.125, 0.7, 1.5)]
    mechanism = dpopt.solve(_spec(family, lower=-1, upper=1.5)).mechanism
    lattice = mechanism.lattice
    g = lattice.granularity

    def units(rows):
        return sum(math.floor(x / g + Fraction(1, 2)) for x in rows)

    rows = [values[0], values[2], values[5]]
    neighbours = [rows[:i] + rows[i + 1:] for i in range(3)] + [rows + [v] for v in values]
    worst, shift = 0.0, lattice.shift
    n_x = units(rows)
    for other in neighbours:
        n_y = units(other)
        assert abs(n_x - n_y) <= shift
        for y in range(n_x - 3 * shift, n_x + 3 * shift, max(1, shift // 50)):
            worst = max(worst, _log_weight(mechanism, y - n_x) - _log_weight(mechanism, y - n_y),
                        _log_weight(mechanism, y - n_y) - _log_weight(mechanism, y - n_x))
    assert 0 < worst <= 1 + 1e-12


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("privacy", [{"pure": {"epsilon": 1}}, {"zcdp": {"rho": 0.5}},
                                     pytest.param({"approx": {"epsilon": 1, "delta": 1e-6}}, marks=pytest.mark.slow),
                                     pytest.param({"gdp": {"mu": 1}}, marks=pytest.mark.slow),
                                     pytest.param({"pdp": {"epsilon": 1, "delta": 1e-3}}, marks=pytest.mark.slow)])
def test_a_sum_is_exact_by_default_verifies_and_a_forged_lattice_fails(family, privacy):
    solution = dpopt.solve(_spec(family, privacy=privacy))
    cert = solution.certificate.data
    assert cert["mechanism"]["family"] == family and solution.mechanism.exact_noise
    assert "idealized" not in json.dumps(cert, default=str)
    assert dpopt.verify(cert).passed
    cost = solution.mechanism.parameters.get("exact_cost") or solution.mechanism.parameters["design"]["exact_cost"]
    assert cost["ratio"] < 1.001
    forged = copy.deepcopy(cert)
    forged["mechanism"]["parameters"]["sum_lattice"]["shift"] //= 2  # a smaller Δ_u than the bounds give
    assert not dpopt.verify(forged).passed


@pytest.mark.parametrize("family", FAMILIES)
def test_floating_point_on_request_keeps_the_note(family):
    solution = dpopt.solve({**_spec(family), "sampler": "floating_point"})
    assert not solution.mechanism.exact_noise
    assert any(IDEALIZED_NUMERICS in note for note in solution.certificate["mechanism"]["notes"])


@pytest.mark.parametrize("family", FAMILIES)
def test_cli_solve_and_verify_of_a_sum_spec(family, tmp_path, capsys):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(_spec(family, adjacency="replace_one", n=40)))
    assert main(["solve", str(path), "--out", str(tmp_path / "out"), "--quiet"]) == 0
    assert main(["verify", str(tmp_path / "out" / "certificate.json")]) == 0
    cert = json.loads((tmp_path / "out" / "certificate.json").read_text())
    assert "sum_lattice" in cert["mechanism"]["parameters"] and cert["mechanism"]["family"] == family


@pytest.mark.parametrize("family", FAMILIES)
def test_dpopt_release_counts_the_sum_on_the_lattice(family, tmp_path, monkeypatch):
    from dpopt.release import batch
    from dpopt.rng import random_source

    seen = []  # the answer the release hands the mechanism, recounted on its lattice
    original = batch.lattice_answer
    monkeypatch.setattr(batch, "lattice_answer", lambda *a: seen.append(original(*a)) or seen[-1])
    path = tmp_path / "x.csv"
    rows = [0.1, 0.3, 9.99, 0.0625, 10.3, 1 / 3]
    path.write_text("x\n" + "".join(f"{x!r}\n" for x in rows))
    solution, value, _, _ = batch.release_once(_spec(family), path, random_source(5, insecure_seed=True))
    lattice = solution.mechanism.lattice
    g = lattice.granularity
    exact = sum(math.floor(Fraction(x) / g + Fraction(1, 2)) for x in rows) * g
    assert seen[0].tolist() == [float(exact)]
    assert solution.mechanism.exact_noise and not solution.mechanism.integer_release
    assert (Fraction(float(value[0])) / g).denominator == 1


def test_the_generalized_gaussians_lattice_option_of_p_2_is_the_discrete_gaussian_on_the_sums_lattice():
    # Under ρ-zCDP the p = 2 option is N_ℤ(0, s²/2) on N: ρ = Δ_u²/s² (CKS 2020, Thm 14), recomputed here from the
    # certificate's s and Δ_u in exact rationals; its E Z² is within 0.1% of the continuous Gaussian's σ² = Δ²/(2ρ).
    solution = dpopt.solve(_spec("generalized_gaussian", privacy={"zcdp": {"rho": 0.5}}))
    params = solution.mechanism.parameters
    assert params["p"] == 2 and params["calibration"] == "lattice_gaussian"
    s, shift = Fraction(params["scale_exact"]), params["sum_lattice"]["shift"]
    assert Fraction(shift) ** 2 / s**2 <= Fraction(1, 2)
    assert abs(solution.certificate.data["utility"]["value"] / (10.3**2 / (2 * 0.5)) - 1) < 1e-3


@pytest.mark.parametrize("p", [2, 3])
def test_the_pdp_level_of_a_lattice_option_by_brute_force(p):
    # pDP of the discrete GG on N under the move Δ_u: δ = P[|L| > ε], L = ((|K + Δ_u|/s)^p − (|K|/s)^p) (the
    # normaliser is common), summed here over |k| ≤ 12s with numpy in double precision (its error far below the
    # margin between the certified level and δ asserted: the certificate's level is in 128-bit arb).
    from dpopt.mechanisms.generalized_gaussian_sum import LatticeSumGG

    spec = _spec("generalized_gaussian", privacy={"pdp": {"epsilon": 1, "delta": 1e-3}})
    problem = dpopt.compile(spec)
    option = LatticeSumGG.option(problem, p, {2: 48.48, 3: 89.05}[p])
    s, shift = float(option.lattice_scale), option.lattice.shift
    k = np.arange(-math.ceil(12 * s) - shift, math.ceil(12 * s) + 1, dtype=float)
    w = np.exp(-((np.abs(k) / s) ** p))
    loss = np.abs((np.abs(k + shift) / s) ** p - (np.abs(k) / s) ** p)
    level = float(np.sum(w[loss > 1]) / np.sum(w))
    assert level <= 1e-3
    assert option.privacy_checks(problem.space, problem.spec.privacy)[0].passed
    # the scale is not far above what the level needs: 2% smaller would exceed δ
    smaller = s * 0.98
    w = np.exp(-((np.abs(k) / smaller) ** p))
    loss = np.abs((np.abs(k + shift) / smaller) ** p - (np.abs(k) / smaller) ** p)
    assert float(np.sum(w[loss > 1]) / np.sum(w)) > 1e-3


@pytest.mark.parametrize("family", FAMILIES)
def test_a_halved_noise_scale_fails_verify(family):
    cert = dpopt.solve(_spec(family)).certificate.data
    forged = copy.deepcopy(cert)
    params = forged["mechanism"]["parameters"]
    if family == "k_norm":
        params["lattice_scale"] = str(Fraction(params["lattice_scale"]) / 2)
    elif family == "r2dp":
        params["mixture"]["scales"] = [str(Fraction(s) / 2) for s in params["mixture"]["scales"]]
    else:
        params["scale_exact"] = str(Fraction(params["scale_exact"]) / 2)
    assert "privacy" in {c.claim for c in dpopt.verify(forged).failed}  # ε doubled on the lattice


def test_the_p_4_option_under_approx_dp_is_on_the_finest_profile_lattice_and_meets_its_profile():
    # The one-move profile has no int64 or convolution limit, so p = 4 takes PROFILE_BITS' first lattice: g = 2^e ≤
    # 2^-10 min(b, Δ) = 2^-10 · 1000 (b ≈ 1.9·10⁴ > Δ = 1000 at ε = 1, δ = 10⁻⁶), e = −1 (2^-1 ≤ 0.977 < 2^0).
    # Its profile δ(ε) = Σ_k P[k](1 − e^{ε − L(k)})₊, L = ((|k + Δ_u|/s)^4 − (|k|/s)^4), is summed here in numpy over
    # |k| ≤ 6s (the rest below e^{-1296}); double-precision error is far below the 2% margin asserted.
    from dpopt.mechanisms.generalized_gaussian_sum import LatticeSumGG

    problem = dpopt.compile(_spec("generalized_gaussian", privacy={"approx": {"epsilon": 1, "delta": 1e-6}},
                                  upper=1000))
    option = LatticeSumGG.option(problem, 4, 19350.6)
    assert option.lattice.exponent == -1 and option.lattice.shift == 2000
    s, shift = float(option.lattice_scale), option.lattice.shift
    k = np.arange(-math.ceil(6 * s), math.ceil(6 * s) + 1, dtype=float)

    def profile(scale: float) -> float:
        w = np.exp(-((np.abs(k) / scale) ** 4))
        loss = (np.abs(k + shift) / scale) ** 4 - (np.abs(k) / scale) ** 4
        return float(np.sum(w * np.maximum(0.0, -np.expm1(1.0 - loss))) / np.sum(w))

    assert profile(s) <= 1e-6 < profile(0.98 * s)
    assert option.privacy_checks(problem.space, problem.spec.privacy)[0].passed
