"""The truncated discrete generalized Gaussian on the lattice box of a bounded mean
(dpopt.privacy.discrete_truncated_gg, the generalized_gaussian family's ``lattice_box`` calibration).

Expected values: brute-force maxima of the privacy loss over every (N, N', y) in mpmath (no monotonicity argument
used), mpmath sums of the truncated law's moments, the continuous design's certificate (the 0.1% cost margin);
statistical tolerances 4 standard errors, derived where used.
"""

from __future__ import annotations

import json
import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
import yaml
from conftest import ROOT

import dpopt
from dpopt.cli import main
from dpopt.errors import DataError
from dpopt.privacy.discrete_truncated_gg import truncated_loss_bound

COMMITTEE = ROOT / "specs" / "committee_mean_truncated_gg.yaml"


def _mp_log_pmf_table(p: int, s: Fraction, points: int):
    """log P[Y = y | N] for every N, y in {0..M}, mpmath at 30 digits."""
    mpmath.mp.dps = 30
    sm = mpmath.mpf(s.numerator) / s.denominator
    log_w = {k: -((abs(k) / sm) ** p) for k in range(-points, points + 1)}
    table = []
    for n in range(points):
        log_z = mpmath.log(mpmath.fsum(mpmath.exp(log_w[y - n]) for y in range(points)))
        table.append([log_w[y - n] - log_z for y in range(points)])
    return table


@pytest.mark.parametrize("p, s, points, shift", [(1, Fraction(9, 2), 31, 5), (2, Fraction(20), 41, 8),
                                                 (3, Fraction(25, 2), 33, 4)])
def test_loss_bound_matches_a_brute_force_maximum(p, s, points, shift):
    table = _mp_log_pmf_table(p, s, points)
    worst = max(abs(table[n][y] - table[m][y]) for n in range(points) for m in range(points)
                if abs(n - m) <= shift for y in range(points))
    bound = truncated_loss_bound(p, s, points, shift)
    assert float(worst) <= bound <= float(worst) + 2e-9


def _committee(**changes):
    return {**yaml.safe_load(COMMITTEE.read_text()), **changes}


@pytest.fixture(scope="module")
def committee():
    return dpopt.solve(COMMITTEE)


def test_committee_is_exact_and_within_the_cost_margin(committee):
    mech = committee.mechanism
    assert (mech.variant, mech.p, mech.calibration, mech.exact_noise) == ("truncated", 2, "lattice_box", True)
    assert mech.sum_lattice.granularity == Fraction(1, 32) and mech.sum_lattice.shift == 320  # ⌈10/g⌉
    assert not any("idealized" in note for note in committee.certificate["mechanism"]["notes"])
    continuous = dpopt.solve(_committee(sampler="floating_point")).certificate["utility"]["value"]
    assert committee.certificate["utility"]["value"] <= continuous * 1.001
    assert dpopt.verify(committee.certificate).passed


def _mp_square(s: Fraction, n: int, points: int) -> float:
    """E(Y − N)² of the truncated law at the answer N (mpmath)."""
    mpmath.mp.dps = 30
    sm = mpmath.mpf(s.numerator) / s.denominator
    w = [mpmath.exp(-(((y - n) / sm) ** 2)) for y in range(points)]
    return float(mpmath.fsum((y - n) ** 2 * wy for y, wy in zip(range(points), w)) / mpmath.fsum(w))


def test_committee_prediction_is_the_worst_lattice_answer(committee):
    # E(g(Y − N)/5)² at answers N = 0, 100, …, 1600 by mpmath: the prediction is their maximum (reached at the box's
    # ends, where the truncated noise is one-sided) and no sampled answer exceeds it
    mech = committee.mechanism
    unit2 = float(mech.sum_lattice.unit) ** 2
    values = [_mp_square(mech.lattice_scale, n, 1601) * unit2 for n in range(0, 1601, 100)]
    assert committee.certificate["utility"]["value"] == pytest.approx(max(values), rel=1e-10)


def test_release_stays_on_the_lattice_in_the_box(committee):
    # 4000 releases at the true mean 1.0 (N = 160 units): E(out − 1)² vs the mpmath moment at N = 160; the per-draw
    # square has SD below its mean·2 here, so 4 SE ≈ 4·2·m/√4000 ≈ 0.13·m: tolerance 0.15·m
    mech = committee.mechanism
    rng = np.random.default_rng(5)
    out = mech.release(np.full((4000, 1), 1.0), rng)[:, 0]
    assert out.min() >= 0.0 and out.max() <= 10.0
    units = out * 5 * 32
    assert np.all(units == np.round(units))
    expected = _mp_square(mech.lattice_scale, 160, 1601) * float(mech.sum_lattice.unit) ** 2
    assert abs(np.mean((out - 1.0) ** 2) - expected) < 0.15 * expected
    with pytest.raises(DataError, match="outside the public box"):
        mech.release([10.5], rng)


def test_forged_box_parameters_are_refused(committee):
    data = committee.certificate.data
    params = data["mechanism"]["parameters"]

    def forged(**changes):
        return {**data, "mechanism": {**data["mechanism"], "parameters": {**params, **changes}}}

    s = Fraction(params["scale_exact"]) * Fraction(4, 5)
    smaller = forged(scale_exact=str(s), scale=float(s / 160))
    assert "privacy" in {c.claim for c in dpopt.verify(smaller).failed}
    lattice = {**params["sum_lattice"], "shift": 160}
    assert "mechanism.lattice" in {c.claim for c in dpopt.verify(forged(sum_lattice=lattice)).failed}


def test_bounds_off_the_lattice_keep_the_continuous_design():
    # [0, 10.3]: 10.3 is no multiple of a power of two, so no lattice box; the continuous truncated GG stays
    spec = _committee(data={"attributes": {"score": {"min": 0, "max": 10.3}}, "n": 5})
    sol = dpopt.solve(spec)
    assert sol.mechanism.sum_lattice is None
    assert any("not multiples" in note for note in sol.certificate["mechanism"]["notes"])
    assert math.isfinite(sol.certificate["utility"]["value"])


def test_cli_release_recounts_the_records_on_the_lattice(tmp_path, capsys):
    # dpopt release rounds each record to g = 2^-5 (the ratings are whole numbers: exact) and publishes g(N + K)/5,
    # a multiple of 1/160 in [0, 10], not rounded to an integer
    data = ROOT / "specs" / "data" / "committee.csv"
    args = ["release", str(COMMITTEE), "--data", str(data), "--seed", "3", "--insecure-seed", "--out", str(tmp_path)]
    assert main(args) == 0
    value = json.loads((tmp_path / "release.json").read_text())["release"]["value"]
    assert 0.0 <= value <= 10.0 and (value * 160).is_integer()
    capsys.readouterr()
    assert main(["verify", str(tmp_path / "certificate.json")]) == 0
