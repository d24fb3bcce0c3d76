"""Every move of a person under a ``linear`` query listed, so that pDP measures exactly with a privacy unit.

A person adds (add/remove) or changes (replace) a count vector v over the attribute's levels with at most
``max_rows_per_group`` rows per level, ``max_groups`` levels and ``max_rows`` rows in all
(:mod:`dpopt.sensitivity.person`); the answers move by A v or A(v − v′). The pDP level is summed per move, so every
move must be listed, not only the images of the contribution polytope's vertices. Expected values: the allowed
contributions and moves by brute force over every vector in {0, …, c}^m; their norms as exact Fractions of those
integer vectors; the discrete Gaussian's pDP level δ(v) = P[|L| > ε], L = Σ_i (2η_i v_i + v_i²)/(2σ²)
(Canonne, Kamath & Steinke 2020: integer shifts, no normaliser term), summed over the support of
N_ℤ(0, σ²)² with mpmath at 40 digits, the box |η_i| ≤ 20σ (its outside mass below e^{−200}). ``auto``'s choice
against the full comparison (every family listed, so none is skipped), and the GG's bound against its design.
"""

from __future__ import annotations

import itertools
import json
import math
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import mpmath
import numpy as np
import pytest

import dpopt
from dpopt.core.families import family_names
from dpopt.design.select import design_candidates
from dpopt.mechanisms import registry
from dpopt.sensitivity import person
from dpopt.sensitivity.person import contributions, count_contributions
from dpopt.spec.models import PrivacyUnit

UNIT = {"id": "pid", "max_rows": 3, "max_groups": 2, "max_rows_per_group": 2}
MATRIX = [[1, 2, 0], [0, 1, 3]]
WEIGHTS = [["0.5", "1", "0", "0", "0.25"], ["0", "0.25", "1.5", "1", "0"]]
"""Decimal weights on the five clinics of specs/data/visits.csv (as tests/test_decimal_privacy_unit.py)."""
VISITS = Path(__file__).resolve().parents[1] / "specs" / "data" / "visits.csv"
PDP = {"pdp": {"epsilon": 1, "delta": 1e-3}}


def spec(adjacency: str = "add_remove", mechanism: str | list[str] = "gaussian", unit: dict | None = None,
         privacy: dict | None = None) -> dict:
    return {"dpopt": 1, "name": "weighted levels, person level",
            "data": {"attributes": {"a": ["x", "y", "z"]}, "privacy_unit": unit or UNIT},
            "query": {"kind": "linear", "attribute": "a", "matrix": MATRIX}, "adjacency": {"kind": adjacency},
            "privacy": privacy or PDP, "mechanism": mechanism, "utility": {"metric": "l2"}}


def decimal_spec(adjacency: str = "add_remove", unit: dict | None = None) -> dict:
    data = {"attributes": {"age_group": ["0-17", "18-39", "40-64", "65+"],
                           "clinic": ["north", "south", "east", "west", "central"]},
            "privacy_unit": unit or {"id": "person_id", "max_rows": 4, "max_groups": 2, "max_rows_per_group": 3}}
    return {"dpopt": 1, "name": "weighted visits, person level, pDP", "data": data,
            "query": {"kind": "linear", "attribute": "clinic",
                      "matrix": [[float(w) for w in row] for row in WEIGHTS]},
            "adjacency": {"kind": adjacency}, "privacy": PDP, "mechanism": "gaussian", "utility": {"metric": "l2"}}


def allowed(unit: dict, cells: int) -> list[tuple[int, ...]]:
    """Every v in {0, …, c}^m with Σv ≤ k and at most g non-zero entries (brute force)."""
    k, g, c = unit["max_rows"], unit["max_groups"], unit["max_rows_per_group"]
    c = k if c is None else c
    return [v for v in itertools.product(range(c + 1), repeat=cells)
            if sum(v) <= k and (g is None or sum(1 for x in v if x) <= g)]


def brute_moves(matrix: list[list[Fraction]], unit: dict, replace: bool) -> set[tuple[Fraction, ...]]:
    """The non-zero A v (±) or A(v − v′) over every allowed v, v′, in Fractions."""
    images = {tuple(sum((w * x for w, x in zip(row, v)), Fraction(0)) for row in matrix)
              for v in allowed(unit, len(matrix[0]))}
    if replace:
        moves = {tuple(a - b for a, b in zip(u, w)) for u in images for w in images}
    else:
        moves = images | {tuple(-a for a in u) for u in images}
    return moves - {tuple(Fraction(0) for _ in matrix)}


def as_fractions(vectors: np.ndarray) -> set[tuple[Fraction, ...]]:
    return {tuple(Fraction(float(x)) for x in row) for row in vectors}


@pytest.mark.parametrize("unit", [UNIT, {"max_rows": 5, "max_groups": None, "max_rows_per_group": None},
                                  {"max_rows": 4, "max_groups": 2, "max_rows_per_group": 3},
                                  {"max_rows": 6, "max_groups": 3, "max_rows_per_group": 2}])
@pytest.mark.parametrize("cells", [3, 4])
def test_contributions_and_their_count_are_the_brute_force_ones(unit, cells):
    model = PrivacyUnit(id="pid", max_rows=unit["max_rows"], max_groups=unit["max_groups"],
                        max_rows_per_group=unit["max_rows_per_group"])
    listed = list(contributions(model, cells, 10**6))
    expected = allowed(unit, cells)
    assert sorted(listed) == sorted(expected) and len(set(listed)) == len(listed)
    assert count_contributions(model, cells) == len(expected)
    supports = [sum(1 for x in v if x) for v in listed]
    assert listed[0] == (0,) * cells and supports == sorted(supports)  # by support size, v = 0 first


@pytest.mark.parametrize("adjacency", ["add_remove", "replace_one"])
def test_every_move_is_listed_and_the_norms_stay_those_of_the_vertices(adjacency):
    replace = adjacency == "replace_one"
    space = dpopt.derive(dpopt.load_spec(spec(adjacency)))
    moves = brute_moves([[Fraction(w) for w in row] for row in MATRIX], UNIT, replace)
    assert space.complete and as_fractions(space.listed()) == moves and len(space.listed()) == len(moves)
    # the norms: exact maxima over every brute-force move (a convex norm's supremum is at the hull's vertices)
    assert space.l1 == max(sum(abs(x) for x in v) for v in moves)
    assert space.l2_squared == max(sum(x * x for x in v) for v in moves)
    assert space.linf == max(max(abs(x) for x in v) for v in moves)
    # the hull-based families read the vertices' images: fewer, every one a move, with the same norms
    hull = space.hull_vectors()
    assert as_fractions(hull) <= moves and len(hull) < len(moves)
    assert max(np.abs(hull).sum(axis=1)) == space.l1 and max((hull**2).sum(axis=1)) == space.l2_squared
    assert np.abs(hull).max() == space.linf


def test_a_unit_beyond_the_listing_budget_keeps_the_vertices_and_the_refusal(monkeypatch):
    # 16 contributions, 16² · 2 = 512 numbers before deduplication under replace: a budget of 511 refuses
    monkeypatch.setattr(person, "MAX_LISTED_ENTRIES", 511)
    space = dpopt.derive(dpopt.load_spec(spec("replace_one")))
    assert not space.complete and "every move listed" not in space.method
    listed = dpopt.derive(dpopt.load_spec(spec("add_remove")))  # 16 · 3 numbers: listed
    assert listed.complete


def discrete_gaussian_level(sigma2: Fraction, move: tuple[int, int], epsilon: Fraction) -> mpmath.mpf:
    """δ(v) = P[|Σ_i (2η_i v_i + v_i²)| > 2εσ²] for η i.i.d. N_ℤ(0, σ²) on two coordinates, by summation
    over the support (module docstring). η_i ↦ −η_i leaves the law unchanged, so v_i ↦ |v_i| too; with
    a_2 = |v_2| > 0 (the coordinates swapped if needed) and c = 2η_1 a_1 + a_1² + a_2², the event is
    η_2 < (−2εσ² − c)/(2a_2) or η_2 > (2εσ² − c)/(2a_2), two tails of the cumulative sums."""
    a1, a2 = sorted(abs(int(x)) for x in move)
    with mpmath.workdps(40):
        s2 = mpmath.mpf(sigma2.numerator) / sigma2.denominator
        box = int(20 * math.sqrt(float(sigma2))) + 1
        weights = [mpmath.exp(-mpmath.mpf(k * k) / (2 * s2)) for k in range(-box, box + 1)]
        total = mpmath.fsum(weights)
        pmf = [w / total for w in weights]
        cumulative = list(itertools.accumulate(pmf))  # cumulative[k + box] = P[η ≤ k]

        def at_most(k: int) -> mpmath.mpf:
            """P[η ≤ k] for an integer k."""
            return mpmath.mpf(0) if k < -box else (mpmath.mpf(1) if k >= box else cumulative[k + box])

        bound = 2 * Fraction(epsilon) * sigma2
        level = mpmath.mpf(0)
        for k1, p1 in zip(range(-box, box + 1), pmf):
            c = 2 * k1 * a1 + a1 * a1 + a2 * a2
            low, high = (-bound - c) / (2 * a2), (bound - c) / (2 * a2)
            level += p1 * (at_most(math.ceil(low) - 1) + 1 - at_most(math.floor(high)))
        return level


@pytest.mark.parametrize("adjacency", ["add_remove", "replace_one"])
def test_the_stated_pdp_level_is_the_independent_worst_move_level(adjacency):
    solution = dpopt.solve(spec(adjacency))
    certificate = json.loads(solution.certificate.to_json())
    assert "idealized" not in json.dumps(certificate)
    assert dpopt.verify(certificate).passed
    sigma2 = Fraction(certificate["mechanism"]["parameters"]["lattice_sigma2"])
    (check,) = [c for c in certificate["checks"] if c["claim"] == "privacy"]
    stated = float(check["detail"].split("δ(v) ≤ ")[1].split(" ")[0])
    moves = brute_moves([[Fraction(w) for w in row] for row in MATRIX], UNIT, adjacency == "replace_one")
    patterns = {tuple(sorted(abs(int(x)) for x in v)) for v in moves}  # δ(v) depends on these only
    worst = max(discrete_gaussian_level(sigma2, pattern, Fraction(1)) for pattern in patterns)
    # the stated level is an upper bound exact up to a tail below 2^-79, printed to 12 significant digits
    assert stated == pytest.approx(float(worst), rel=1e-10)
    assert worst <= mpmath.mpf("0.001")


@pytest.mark.parametrize("adjacency", ["add_remove", pytest.param("replace_one", marks=pytest.mark.slow)])
def test_decimal_weights_measure_exactly_under_pdp_with_a_privacy_unit(adjacency):
    # replace: 1.5 min at load 2 (hundreds of integer move patterns of D·W(v − v′), an arb level each)
    solution = dpopt.solve(decimal_spec(adjacency))
    certificate = json.loads(solution.certificate.to_json())
    assert "idealized" not in json.dumps(certificate)
    assert certificate["mechanism"]["parameters"]["lattice_scale"] == 4
    assert dpopt.verify(certificate).passed


def test_decimal_weights_beyond_the_listing_budget_keep_floating_point_with_the_reason():
    # 5 clinics, ≤ 8 rows anywhere: C(13, 5) = 1,287 contributions, 1,287² · 2 > 2·10⁶ numbers under replace
    unit = {"id": "person_id", "max_rows": 8, "max_groups": 5, "max_rows_per_group": 8}
    solution = dpopt.solve(decimal_spec("replace_one", unit))
    text = json.dumps(solution.certificate.data, default=str)
    assert "idealized" in text and "not all listed" in text
    assert dpopt.verify(json.loads(solution.certificate.to_json())).passed


def _whole_spec() -> dict:
    whole = decimal_spec()
    whole["query"]["matrix"] = [[1, 2, 0, 0, 1], [0, 1, 3, 1, 0]]
    return whole


@pytest.mark.parametrize("build", [pytest.param(_whole_spec, id="whole"),
                                   pytest.param(decimal_spec, id="decimal", marks=pytest.mark.slow)])
def test_cli_solve_release_verify_under_pdp(build, tmp_path):
    """Whole weights in the default run; decimal weights (about a minute: three CLI designs of the listed moves' pDP
    level) under -m slow, their Python path tested above."""
    run = lambda *args: subprocess.run([sys.executable, "-m", "dpopt.cli", *args], capture_output=True, text=True)
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(build()))
    solved = run("solve", str(path), "--out", str(tmp_path / "solve"))
    assert solved.returncode == 0, solved.stderr
    released = run("release", str(path), "--data", str(VISITS), "--out", str(tmp_path / "release"))
    assert released.returncode == 0, released.stderr
    checked = run("verify", str(tmp_path / "release"))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "idealized" not in (tmp_path / "release" / "release.json").read_text()


# ---------------------------------------------------------------- auto prunes the generalized Gaussian
SMALL_UNIT = {"id": "pid", "max_rows": 2, "max_groups": 2, "max_rows_per_group": 1}
ZCDP = {"zcdp": {"rho": 0.5}}


@pytest.mark.parametrize("adjacency, privacy, winner", [("add_remove", None, "k_norm"),
                                                        ("replace_one", None, "k_norm"),
                                                        ("add_remove", ZCDP, "gaussian_optimal")])
def test_auto_skips_the_generalized_gaussian_by_its_utility_bound(adjacency, privacy, winner):
    # every move listed makes the GG's multi-coordinate convolutions its cost; its bound (the p = 1 option under
    # pDP, the discrete Gaussian at the Rényi limit under zCDP) is already beaten, by k_norm's whole 95% interval
    rows = {c.family: c for c in design_candidates(dpopt.compile(spec(adjacency, "auto", SMALL_UNIT, privacy)))}
    gg = rows["generalized_gaussian"]
    assert gg.skipped == "utility bound" and gg.beaten_by == winner, gg.reason
    assert gg.reason.startswith("not designed: its utility bound")


@pytest.mark.parametrize("privacy", [None, ZCDP])
def test_the_person_level_gg_bound_never_beats_its_design(privacy):
    problem = dpopt.compile(spec("add_remove", "generalized_gaussian", SMALL_UNIT, privacy))
    cls = registry()["generalized_gaussian"]
    assert cls.utility_bound(problem) <= cls.design(problem).expected_utility(problem.spec.utility).value


@pytest.mark.slow
@pytest.mark.parametrize("adjacency, privacy", [("add_remove", None), ("replace_one", None), ("add_remove", ZCDP)])
def test_auto_chooses_what_the_full_comparison_chooses_on_the_person_level_linear_query(adjacency, privacy):
    # 20–40 s: the full comparison designs the GG (its multi-coordinate pDP convolutions); the fast neighbours above
    auto = dpopt.solve(spec(adjacency, "auto", privacy=privacy))
    gg = next(c for c in auto.candidates if c.family == "generalized_gaussian")
    assert gg.skipped == "utility bound"
    full = dpopt.solve(spec(adjacency, [f for f in family_names() if f in registry()], privacy=privacy))
    designed = next(c for c in full.candidates if c.family == "generalized_gaussian")
    bound = registry()["generalized_gaussian"].utility_bound(dpopt.compile(spec(adjacency, "auto", privacy=privacy)))
    assert designed.feasible and designed.utility.value >= bound
    assert auto.mechanism.family == full.mechanism.family
    assert auto.mechanism.parameters == full.mechanism.parameters
