"""``release.csv`` of a release with private keys and quantiles (:mod:`dpopt.selection.cells`): the count margins
against the discrete Laplace pmf summed by brute force, the means' delta-method intervals by simulation, the notes,
and the CLI writing and verifying the table."""

from __future__ import annotations

import csv
import io
import json
import math
import re
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from dpopt.cli import main
from dpopt.selection.cells import COLUMNS, KEYS, discrete_laplace_errors, mean_rows
from dpopt.selection.design import certify

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "specs" / "visits_private_clinics.yaml"
DATA = ROOT / "specs" / "data" / "visits_clinics.csv"


@pytest.mark.parametrize("scale", ["1", "5/2", "8", "40"])
def test_count_margin_is_the_least_integer_holding_95_percent(scale):
    # independent route: the pmf (1 − r)/(1 + r)·r^|y| summed term by term (Canonne, Kamath & Steinke 2020)
    r = math.exp(-1 / float(Fraction(scale)))
    pmf = lambda y: (1 - r) / (1 + r) * r ** abs(y)  # noqa: E731
    within = lambda m: sum(pmf(y) for y in range(-m, m + 1))  # noqa: E731
    se, m = discrete_laplace_errors(scale)
    assert within(m) >= 0.95 and (m == 0 or within(m - 1) < 0.95)
    second = sum(y * y * pmf(y) for y in range(-4000, 4001))
    assert se == pytest.approx(math.sqrt(second), rel=1e-9)


def test_mean_intervals_cover_by_simulation():
    # 200 rows uniform on [0, 120]; the spec's noise: discrete Laplace b_S = 7,864,320 steps of 2⁻¹⁴ (= 480) on the
    # lattice sum, discrete Laplace b_n = 8 on the count (each the difference of two geometrics of parameter 1 − r:
    # a route independent of the sampler). 4,000 releases: the binomial SE of a 95% coverage is
    # √(0.95·0.05/4000) = 0.0034; the delta method's own error is O(Var ñ/n²) = O(128/40000) here; ±0.015 (over
    # 4 SE) bounds both
    block = certify(SPEC)["releases"][2]
    rng = np.random.default_rng(20261206)
    x = rng.uniform(0, 120, 200)
    step, b_sum = Fraction(block["noise"]["centred_sum"]["step"]), Fraction(block["noise"]["centred_sum"]["scale"])
    assert float(step * b_sum) == 480.0  # R·h/(ε/2) = 4·60/0.5, h on the lattice
    truth, s, n = x.mean(), int(np.sum(np.round((x - 60) / float(step)))), len(x)
    r, r_sum = math.exp(-1 / 8), math.exp(-1 / float(b_sum))
    draws = 4000
    sums = float(step) * (s + rng.geometric(1 - r_sum, draws) - rng.geometric(1 - r_sum, draws))
    counts = n + rng.geometric(1 - r, draws) - rng.geometric(1 - r, draws)
    values = {str(i): min(120.0, max(0.0, 60 + a / c)) for i, (a, c) in enumerate(zip(sums, counts))}
    out = {"name": "m", "values": values,
           "pairs": {str(i): {"centered_sum": float(a), "count": int(c)} for i, (a, c) in enumerate(zip(sums, counts))}}
    rows = mean_rows(out, block)
    covered = np.mean([row["ci_95_low"] <= truth <= row["ci_95_high"] for row in rows])
    assert abs(covered - 0.95) <= 0.015
    assert all("approximate" in row["note"] for row in rows)


def test_a_mean_on_a_count_near_zero_rests_on_noise():
    block = certify(SPEC)["releases"][2]
    out = {"name": "m", "values": {"k": 90.0, "z": None},
           "pairs": {"k": {"centered_sum": 300.0, "count": 3}, "z": {"centered_sum": -50.0, "count": -2}}}
    for row in mean_rows(out, block):  # b_n = 8: margin 24 (the pmf test above); 3 and −2 are within it
        assert row["standard_error"] is None and (row["ci_95_low"], row["ci_95_high"]) == (0, 120)
        assert "rests on noise alone" in row["note"]


def test_release_writes_the_table_and_verifies(tmp_path, capsys):
    out = tmp_path / "rel"
    assert main(["release", str(SPEC), "--data", str(DATA), "--seed", "3", "--insecure-seed", "--out", str(out)]) == 0
    assert main(["verify", str(out)]) == 0
    rows = list(csv.DictReader((out / "release.csv").open(encoding="utf-8")))
    assert list(rows[0]) == [*KEYS, *COLUMNS]
    document = json.loads((out / "release.json").read_text())
    released = sum(len(r["values"]) if r["kind"] != "quantile" else sum(map(len, r["values"].values()))
                   for r in document["releases"])
    assert len(rows) == released
    by = {(r["release"], r["key"]): r for r in rows}
    airport = by["visits_per_clinic", "airport"]  # declared, no visits in the data (tests/test_selection.py)
    assert "within its margin of zero" in airport["note"]
    assert "rests on noise alone" in by["mean_duration_per_clinic", "airport"]["note"]
    north = by["visits_per_clinic", "north"]
    assert float(north["ci_95_high"]) - float(north["value"]) == float(north["margin_of_error_95"])
    assert all(r["standard_error"] == "" and r["label"] == "q=0.5" for r in rows if r["release"] == "median_duration")
    capsys.readouterr()
    assert main(["release", str(SPEC), "--data", str(DATA), "--seed", "3", "--insecure-seed", "--format", "csv"]) == 0
    assert list(csv.DictReader(io.StringIO(capsys.readouterr().out))) == rows


def test_solve_states_the_verifiers_claim_count(tmp_path, capsys):
    # issue 37: solve said "10 of 10 checks", verify "13 claims"; one count, the verifier's
    assert main(["solve", str(SPEC), "--out", str(tmp_path)]) == 0
    stated = re.search(r"(\d+) claims hold, as `dpopt verify` counts them", capsys.readouterr().out).group(1)
    assert main(["verify", str(tmp_path / "certificate.json")]) == 0
    assert f"certificate holds: {stated} claims re-derived" in capsys.readouterr().out
