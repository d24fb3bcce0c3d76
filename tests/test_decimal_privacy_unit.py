"""A ``linear`` query with decimal weights and a privacy unit, measured exactly on the decimal lattice.

One person adds (add/remove) or changes (replace) a count vector v over the attribute's levels with at most
``max_rows_per_group`` rows per level, ``max_groups`` levels and ``max_rows`` rows in all (dpopt.sensitivity.person).
The scaled answers D·Wx then move by D·Wv or D·W(v − v′), integer vectors. Expected values: D and the integer
sensitivity max‖D·W(v − v′)‖² by brute force over every allowed v (and pair), in Fractions of the written decimals;
the lattice variance from the zCDP target by hand (Canonne, Kamath & Steinke 2020, Thm 14: ρ = Δ²/(2σ_ℤ²)).
"""

from __future__ import annotations

import copy
import itertools
import json
import math
from fractions import Fraction
from pathlib import Path

import pytest
from conftest import cli_runner

import dpopt

WEIGHTS = [["0.5", "1", "0", "0", "0.25"], ["0", "0.25", "1.5", "1", "0"]]
"""The weights as written, on the five clinics of specs/data/visits.csv."""

UNIT = {"id": "person_id", "max_rows": 4, "max_groups": 2, "max_rows_per_group": 3}
VISITS = Path(__file__).resolve().parents[1] / "specs" / "data" / "visits.csv"


def spec(adjacency: str = "add_remove", mechanism: str = "gaussian", privacy=None) -> dict:
    data = {"attributes": {"age_group": ["0-17", "18-39", "40-64", "65+"],
                           "clinic": ["north", "south", "east", "west", "central"]},
            "privacy_unit": UNIT}
    return {"dpopt": 1, "name": "weighted visits, person level", "data": data,
            "query": {"kind": "linear", "attribute": "clinic",
                      "matrix": [[float(w) for w in row] for row in WEIGHTS]},
            "adjacency": {"kind": adjacency}, "privacy": privacy or {"zcdp": {"rho": 0.5}},
            "mechanism": mechanism, "utility": {"metric": "l2"}}


def brute_force_sensitivity(adjacency: str) -> tuple[int, int]:
    """(D, max ‖D·W(v − v′)‖²) over every bounded contribution v (v′ = 0 under add/remove)."""
    d = math.lcm(*(Fraction(w).denominator for row in WEIGHTS for w in row))
    integer = [[int(Fraction(w) * d) for w in row] for row in WEIGHTS]
    allowed = [v for v in itertools.product(range(UNIT["max_rows_per_group"] + 1), repeat=5)
               if sum(v) <= UNIT["max_rows"] and sum(1 for c in v if c) <= UNIT["max_groups"]]
    others = allowed if adjacency == "replace_one" else [(0,) * 5]
    best = max(sum(sum(m * (a - b) for m, a, b in zip(row, v, w)) ** 2 for row in integer)
               for v in allowed for w in others)
    return d, best


@pytest.mark.parametrize("adjacency", ["add_remove", "replace_one"])
def test_the_scale_and_person_level_sensitivity_are_the_brute_force_ones(adjacency):
    d, sensitivity = brute_force_sensitivity(adjacency)
    # by hand, D·W has columns n (2, 0), s (4, 1), e (0, 6), w (0, 4), c (1, 0): add/remove 3e + 1w = (0, 22),
    # 484; replace 3e + 1w against 3s + 1n = (14, 3): (−14, 19), 557
    assert (d, sensitivity) == ((4, 484) if adjacency == "add_remove" else (4, 557))
    parameters = dpopt.solve(spec(adjacency)).certificate.data["mechanism"]["parameters"]
    assert parameters["lattice_scale"] == d
    assert Fraction(parameters["lattice_l2_squared"]) == sensitivity
    # ρ = Δ_D²/(2σ_ℤ²) = 0.5 at σ_ℤ² = Δ_D²: the design's σ² rounded up to a dyadic of 21 significant bits
    assert sensitivity <= Fraction(parameters["lattice_sigma2"]) <= sensitivity * (1 + Fraction(1, 2**20))


@pytest.mark.parametrize("mechanism", ["gaussian", "gaussian_optimal"])
@pytest.mark.parametrize("privacy", [{"zcdp": {"rho": 0.5}}, {"gdp": {"mu": 1}},
                                     {"approx": {"epsilon": 1, "delta": 1e-6}}])
def test_person_level_decimal_queries_measure_exactly_and_verify(mechanism, privacy):
    solution = dpopt.solve(spec("add_remove", mechanism, privacy))
    certificate = json.loads(solution.certificate.to_json())
    assert "idealized" not in json.dumps(certificate)
    assert certificate["mechanism"]["parameters"]["lattice_scale"] == 4
    assert dpopt.verify(certificate).passed


@pytest.mark.parametrize("changes", [{"lattice_l2_squared": "36"}, {"lattice_scale": 2, "lattice_l2_squared": "121"}])
def test_a_record_level_or_rescaled_sensitivity_fails_verify(changes):
    # 36 = the largest ‖D·W e_j‖² (one row: clinic east), the record-level sensitivity a forger might state
    certificate = json.loads(dpopt.solve(spec()).certificate.to_json())
    forged = copy.deepcopy(certificate)
    forged["mechanism"]["parameters"].update(changes)
    assert not dpopt.verify(forged).passed


def test_cli_release_ungrouped_and_grouped_on_the_lattice(tmp_path, capsys):
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec()))
    run = cli_runner(capsys)
    for out, extra in (("rel", []), ("grouped", ["--group-by", "age_group"])):
        released = run("release", str(path), "--data", str(VISITS), "--out", str(tmp_path / out), *extra)
        assert released.returncode == 0, released.stderr
        checked = run("verify", str(tmp_path / out))
        assert checked.returncode == 0, checked.stdout + checked.stderr
        assert "idealized" not in (tmp_path / out / "release.json").read_text()
    values = [float(row.split(",")[1]) for row in (tmp_path / "rel" / "release.csv").read_text().splitlines()[1:]]
    assert len(values) == 2 and all(v * 4 == round(v * 4) for v in values)  # (k + η)/D on (1/4)ℤ

