"""Person-level, grouped and planned sums measured exactly on a dyadic lattice, and Gaussian sums under μ-GDP and
(ε, δ) with bounds off the lattice (dpopt/mechanisms/real_lattice.py, exact_sum.py, certificate/composition.py).

Expected values come from brute force: every set of a person's rows (values on and off the lattice, each rounded
half up by the definition ⌊x/g + ½⌋, independently of the code), every neighbouring answer pair on a grid, every
count vector a person may keep over the groups (tests/test_person_level.contributions); from the Rényi divergence
of two shifted discrete Gaussians summed directly (float64 log-sum-exp over ±40σ, against αΔ²/(2σ²) of Canonne,
Kamath & Steinke 2020, Thm 14); and from the slope bound (σm)² ≤ (1 + 10⁻⁴)²(1 + 1/(12σ²)) stated in
docs/concepts/exact-noise.md.
"""

from __future__ import annotations

import copy
import csv
import itertools
import json
import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import yaml
from scipy import stats

import dpopt
from dpopt.cli import main
from dpopt.mechanisms.base import IDEALIZED_NUMERICS
from dpopt.mechanisms.exact_sum import LatticeSumGaussian, LatticeSumLaplace
from dpopt.mechanisms.real_lattice import RealLattice, real_lattice
from dpopt.release import batch
from dpopt.rng import aes_generator, random_source
from dpopt.sensitivity.person import grouped_norms
from test_person_level import contributions

ROOT = Path(__file__).resolve().parents[1]

# values on and off the lattice g = 1/4, ties (0.125 = g/2), negatives, the bounds [−1, 1.3] themselves
VALUES = [Fraction(v) for v in (-1, -0.875, -0.3, -0.125, 0, 0.125, 0.3, 0.7, 1.1, 1.2, 1.3)]


def _spec(unit: dict, adjacency: str = "add_remove", lower=-1, upper=1.3, privacy=None, mechanism="gaussian",
          groups: list | None = None) -> dict:
    attributes = {"x": {"min": lower, "max": upper}}
    if groups:
        attributes["clinic"] = groups
    return {"dpopt": 1, "name": "person sums", "adjacency": adjacency, "query": {"kind": "sum", "attribute": "x"},
            "data": {"attributes": attributes, "privacy_unit": {"id": "pid", **unit}},
            "privacy": privacy or {"zcdp": {"rho": 0.5}}, "mechanism": mechanism, "utility": {"metric": "l2"}}


def _rounded(g: Fraction, x: Fraction) -> int:
    """⌊x/g + ½⌋ by the definition."""
    q = x / g + Fraction(1, 2)
    return q.numerator // q.denominator


@pytest.mark.parametrize("adjacency", ["add_remove", "replace_one"])
@pytest.mark.parametrize("upper", [Fraction(3, 2), Fraction(13, 10)])
def test_the_person_lattice_sensitivity_covers_every_person_move_found_by_brute_force(adjacency, upper):
    # ≤ 2 rows per person (max_rows 2), each rounded on its own to g = 1/4: a person moves N by the sum of their
    # rounded rows (add/remove) or the difference of two persons' sums (replace, either possibly fewer rows)
    problem = dpopt.compile(_spec({"max_rows": 2}, adjacency, upper=float(upper)))
    lattice = real_lattice(problem, -2)
    g = lattice.granularity
    values = [v for v in VALUES if v <= upper] + [upper]
    persons = [rows for r in range(3) for rows in itertools.combinations_with_replacement(values, r)]
    totals = {sum(_rounded(g, x) for x in rows) for rows in persons}
    moves = [abs(t) for t in totals] if adjacency == "add_remove" else [abs(a - b) for a in totals for b in totals]
    assert lattice.rows == 2 and max(moves) <= lattice.shift
    if upper == Fraction(3, 2):  # bounds on the lattice: attained (2·6 units; replace 2·6 + 2·4)
        assert max(moves) == lattice.shift == (12 if adjacency == "add_remove" else 20)
    # an answer rounded as a whole (Mechanism.release): neighbouring answers at most Δ apart (the real person-level
    # sensitivity, 2 rows × 1.5 or 2 × (U + 1)) move N by at most Δ_u
    delta = Fraction(problem.space.l1)
    grid = [Fraction(k, 16) for k in range(-48, 49)]
    worst = max(abs(_rounded(g, a) - _rounded(g, b)) for a in grid for b in grid if abs(a - b) <= delta)
    assert worst <= lattice.shift


def test_the_stacked_group_sums_move_within_the_joint_units_found_by_brute_force():
    # ≤ 3 rows per clinic, ≤ 2 clinics, ≤ 4 rows; 3 clinics; values in [0, 1.3] on g = 2^-3 (1.3 is off it):
    # every count vector v over the clinics, each row at a value of the grid, the stacked N_j = Σ r(x)
    spec = dpopt.load_spec(_spec({"max_rows": 4, "max_groups": 2, "max_rows_per_group": 3}, lower=0,
                                 groups=["a", "b", "c"]))
    problem = dpopt.compile(spec)
    lattice = real_lattice(problem, -3)
    g = lattice.granularity
    units = sorted({_rounded(g, Fraction(k, 20)) for k in range(27)} | {_rounded(g, Fraction(13, 10))})
    best = 0
    for v in contributions(3, 4, 2, 3).astype(int):  # the most a group moves: v_j rows at the largest unit
        best = max(best, sum((n * max(abs(u) for u in units)) ** 2 for n in v))
    l1, l2sq, linf, _ = grouped_norms(spec, problem.query, 3, per_row=Fraction(lattice.row_shift))
    assert best <= l2sq == lattice.row_shift**2 * 10  # 3² + 1²: the histogram's person-level l2²
    # u = ⌈1.3/g⌉ = 11 covers an answer rounded as a whole too; rounded row by row, 1.3 → ⌊10.4 + ½⌋ = 10 units
    assert lattice.row_shift == math.ceil(Fraction(13, 10) / g) == 11 and best == 10 * 10**2


def _write(path, rows) -> None:
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["pid", "clinic", "x"])
        writer.writerows(rows)


BASE = [("p1", "a", 0.3), ("p1", "a", 1.25), ("p2", "b", 0.7), ("p3", "a", 1.3), ("p3", "c", 0.0625),
        ("p4", "c", 1.1)]
NEIGHBOUR = [("p9", "a", 1.3), ("p9", "a", 1.3), ("p9", "a", 1.3)]  # a person at the top of the bounds, 3 rows


def _renyi(sigma2: Fraction, shift: int, alpha: float) -> float:
    """D_α(N_ℤ(0, σ²) ‖ N_ℤ(shift, σ²)) by direct summation over ±40σ (log-sum-exp in float64)."""
    s2 = float(sigma2)
    width = int(40 * math.sqrt(s2)) + abs(shift)
    k = np.arange(-width, width + 1, dtype=float)
    log_p = -k**2 / (2 * s2)
    log_q = -(k - shift) ** 2 / (2 * s2)
    log_z = np.logaddexp.reduce(log_p)  # the same normaliser for both (a shift by an integer)
    log_sum = np.logaddexp.reduce(alpha * log_p + (1 - alpha) * log_q) - log_z
    return float(log_sum / (alpha - 1))


def test_neighbouring_datasets_move_the_released_integer_within_the_certified_renyi_bound(tmp_path, monkeypatch):
    # dpopt release of the same spec on D and on D plus one person (3 rows at the top, 1.3, off the lattice): the
    # integer N the release adds noise to, recounted on the lattice, moves by at most Δ_u, and the implemented
    # law N + N_ℤ(0, σ_ℤ²) on the two has Rényi divergence at most αρ (ρ the certified one) at every order
    seen = []
    monkeypatch.setattr(batch, "lattice_answer", lambda *a, _f=batch.lattice_answer: seen.append(_f(*a)) or seen[-1])
    spec = _spec({"max_rows": 3}, lower=0, privacy={"zcdp": {"rho": 0.5}})
    for name, rows in (("d.csv", BASE), ("d1.csv", BASE + NEIGHBOUR)):
        _write(tmp_path / name, rows)
        solution, _, _, _ = batch.release_once(spec, tmp_path / name, random_source(7, insecure_seed=True))
    mech = solution.mechanism
    assert isinstance(mech, LatticeSumGaussian) and IDEALIZED_NUMERICS not in solution.certificate["mechanism"]["notes"]
    lattice = mech.lattice
    n0, n1 = (int(lattice.units(v)[0]) for v in seen)
    g = lattice.granularity
    expected = [sum(_rounded(g, Fraction(x)) for _, _, x in rows) for rows in (BASE, BASE + NEIGHBOUR)]
    assert [n0, n1] == expected  # each row rounded on its own, summed exactly
    assert 0 < n1 - n0 <= lattice.shift
    rho = Fraction(solution.certificate["mechanism"]["privacy"]["rho_exact"])
    for alpha in (1.5, 2.0, 8.0, 64.0):
        assert _renyi(mech.lattice_sigma2, n1 - n0, alpha) <= alpha * float(rho) * (1 + 1e-9)
        assert _renyi(mech.lattice_sigma2, lattice.shift, alpha) <= alpha * float(rho) * (1 + 1e-9)


def test_visits_sums_by_clinic_releases_exactly_per_clinic_and_verify_rederives_it(tmp_path):
    out = tmp_path / "out"
    assert main(["release", str(ROOT / "specs" / "visits_sums_by_clinic.yaml"), "--data",
                 str(ROOT / "specs" / "data" / "visits.csv"), "--group-by", "clinic", "--seed", "3",
                 "--insecure-seed", "--out", str(out)]) == 0
    text = (out / "certificate.json").read_text()
    assert "idealized" not in text.lower() and "idealized" not in (out / "release.json").read_text().lower()
    assert main(["verify", str(out)]) == 0
    certificate = json.loads(text)
    lattice = certificate["mechanism"]["parameters"]["sum_lattice"]
    # durations in [0, 120], ≤ 3 rows per clinic: g = 2^-6 (σ = 360, σ_ℤ = 23040 = 360·2^6), u = 120·2^6 = 7680
    assert (lattice["exponent"], lattice["rows_per_person"], lattice["shift"]) == (-6, 3, 3 * 7680)
    # the whole release: ρ = 0.5 · (3² + 1²)/3² = 5/9 on the stacked integers
    assert certificate["groups"]["composition"]["rho"] == pytest.approx(5 / 9, rel=1e-15)
    joint = [c for c in certificate["checks"] if c["claim"] == "groups.joint"]
    assert joint and joint[0]["passed"] and f"l2² = {10 * 7680**2}" in joint[0]["detail"]


@pytest.mark.parametrize("tamper", [
    lambda p: p["sum_lattice"].update(rows_per_person=1, shift=7680),  # a person of one row
    lambda p: p["sum_lattice"].update(shift=3 * 7680 // 2),  # half the person's move
    lambda p: p.update(lattice_sigma2=str(Fraction(p["lattice_sigma2"]) / 2)),  # half the noise
])
def test_verify_rejects_a_forged_person_lattice_or_variance(tmp_path, tamper):
    certificate = dpopt.solve(ROOT / "specs" / "visits_sums_by_clinic.yaml").certificate.data
    assert dpopt.verify(certificate).passed
    forged = copy.deepcopy(certificate)
    tamper(forged["mechanism"]["parameters"])
    assert not dpopt.verify(forged).passed


def test_survey_plan_total_income_is_exact_and_released_on_its_lattice(tmp_path):
    """The example plan with each query naming the family ``auto`` chooses for it (gaussian for the sums,
    gaussian_optimal for the tables): the lattice, the exact measurement and verify are checked, not the
    selection (tests/test_plan_cli.py releases the plan as written)."""
    plan = yaml.safe_load((ROOT / "specs" / "survey_plan_zcdp.yaml").read_text(encoding="utf-8"))
    for query in plan["queries"]:
        query["mechanism"] = "gaussian" if query["query"]["kind"] in ("sum", "mean") else "gaussian_optimal"
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    out = tmp_path / "out"
    assert main(["release", str(tmp_path / "plan.json"), "--data",
                 str(ROOT / "specs" / "data" / "survey.csv"), "--seed", "3", "--insecure-seed", "--out", str(out)]) == 0
    assert "idealized" not in (out / "certificate.json").read_text().lower()
    assert main(["verify", str(out)]) == 0
    document = json.loads((out / "release.json").read_text())
    total = next(t for t in document["tables"] if t["name"] == "total income")
    g = Fraction(2) ** total["mechanism"]["parameters"]["sum_lattice"]["exponent"]
    value = Fraction(total["release"]["value"])
    assert value / g == int(value / g)  # a lattice point


def test_a_person_level_sum_in_a_plan_is_measured_on_the_lattice(tmp_path):
    """The sum's lattice and the release's verification are checked, not the selection: each query names the
    family ``auto`` chooses (gaussian for the sum, gaussian_optimal for the histogram) rather than designing
    every family twice for the allocation."""
    plan = {"dpopt": 1, "name": "visits plan",
            "data": {"attributes": {"clinic": ["north", "south", "east", "west", "central"],
                                    "age_group": ["0-17", "18-39", "40-64", "65+"],
                                    "duration": {"min": 0, "max": 120}},
                     "privacy_unit": {"id": "person_id", "max_rows": 4, "max_groups": 2, "max_rows_per_group": 3}},
            "queries": [{"name": "minutes", "query": {"kind": "sum", "attribute": "duration"}, "mechanism": "gaussian"},
                        {"name": "clinics", "query": {"kind": "histogram", "attribute": "clinic"},
                         "mechanism": "gaussian_optimal"}],
            "adjacency": "add_remove", "privacy": {"zcdp": {"rho": 0.5}},
            "utility": {"metric": "l2"}}
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    out = tmp_path / "out"
    assert main(["release", str(path), "--data", str(ROOT / "specs" / "data" / "visits.csv"), "--seed", "3",
                 "--insecure-seed", "--out", str(out)]) == 0
    document = json.loads((out / "release.json").read_text())
    minutes = document["tables"][0]
    lattice = minutes["mechanism"]["parameters"]["sum_lattice"]
    # the plan bounds once over every (clinic, age group) cell: a person keeps ≤ 4 rows in the sum's one cell
    assert lattice["rows_per_person"] == 4 and lattice["shift"] == 4 * 120 * 2 ** -lattice["exponent"]
    value = Fraction(minutes["release"]["value"]) * 2 ** -lattice["exponent"]
    assert value == int(value)
    assert main(["verify", str(out)]) == 0


@pytest.mark.parametrize("privacy", [{"gdp": {"mu": 0.3}}, {"approx": {"epsilon": 1.0, "delta": 1e-6}}])
def test_a_gaussian_sum_with_bounds_aligned_to_a_fine_lattice_costs_only_the_slope(privacy):
    # [0, 200000] under μ = 0.3 (σ = Δ/μ) or (1, 10⁻⁶): g ≈ 2^-13 σ is 2^6 (or 2^7 at the coarser tries), and
    # 200000 = 3125·2^6, so the rounding adds nothing; the cost is the slope's (σm)² ≤ (1 + 10⁻⁴)²(1 + 1/(12σ_ℤ²))
    # (was refused at 1.0021 on g ≤ 2^-10 σ: 200000/2^7 = 1562.5 → 1563 units)
    mech = dpopt.solve({**_spec({"max_rows": 1}, lower=0, upper=200000, privacy=privacy),
                        "data": {"attributes": {"x": {"min": 0, "max": 200000}}}}).mechanism
    assert isinstance(mech, LatticeSumGaussian)
    assert mech.lattice.shift * mech.lattice.granularity == 200000
    assert 1 <= mech.cost_ratio <= (1 + 1e-4) ** 2 * (1 + 1 / (12 * float(mech.lattice_sigma2))) * (1 + 2**-19)


@pytest.mark.parametrize("mu", [0.31, 1.0, 3.0])
def test_under_gdp_a_bound_off_every_lattice_costs_at_most_two_to_the_minus_twelve_over_mu(mu):
    # 0.3 and 7.7 are not multiples of any g the design tries: the unit the rounding adds costs 2/Δ_u in variance,
    # Δ_u ≥ μ·2^13 on the finest lattice, plus the slope's (1 + 10⁻⁴)² (1 + 1/(12σ_ℤ²)) and the dyadic rounding
    for upper in (0.3, 7.7):
        mech = dpopt.solve({**_spec({"max_rows": 1}, lower=0, upper=upper, privacy={"gdp": {"mu": mu}}),
                            "data": {"attributes": {"x": {"min": 0, "max": upper}}}}).mechanism
        assert isinstance(mech, LatticeSumGaussian)
        assert mech.cost_ratio <= (1 + 2**-12 / mu) * (1 + 1e-4) ** 2 * (1 + 1e-6) <= 1.001


def test_support_attack_learns_nothing_from_the_exact_person_level_sums():
    """Mironov's support attack (tests/test_float_attack.py) on person-level sums of values in [0, 1] (≤ 3 rows a
    person) at neighbouring sums 0 and 1 (a person with one row at 1 added): the floating-point Laplace release is
    flagged only at 1; the exact Laplace and μ-GDP Gaussian releases on the lattice obey the DP and GDP bounds on
    the same event, within Clopper–Pearson limits (level 1e-4 each)."""
    from test_float_attack import EPSILON, RELEASES, clopper_pearson, event_rates

    laplace = _spec({"max_rows": 3}, lower=0, upper=1, privacy={"pure": {"epsilon": EPSILON}}, mechanism="laplace")
    floating = dpopt.solve({**laplace, "sampler": "floating_point"}).mechanism
    exact = dpopt.solve(laplace).mechanism
    assert isinstance(exact, LatticeSumLaplace) and exact.lattice.rows == 3 and not floating.exact_noise
    e0, e1 = event_rates(floating, floating.scale, lambda i: np.random.default_rng(600 + i))
    assert e0 == 0 and clopper_pearson(e1, RELEASES, upper=False) > 0.1
    f0, f1 = event_rates(exact, floating.scale, lambda i: aes_generator(700 + i))
    for a, b in ((f0, f1), (f1, f0)):
        assert clopper_pearson(a, RELEASES, upper=False) <= math.exp(EPSILON) * clopper_pearson(b, RELEASES, upper=True)
    gaussian = dpopt.solve(_spec({"max_rows": 3}, lower=0, upper=1, privacy={"gdp": {"mu": EPSILON}})).mechanism
    assert isinstance(gaussian, LatticeSumGaussian)
    f0, f1 = event_rates(gaussian, 1.0, lambda i: aes_generator(800 + i))
    for a, b in ((f0, f1), (f1, f0)):
        bound = stats.norm.cdf(stats.norm.ppf(clopper_pearson(b, RELEASES, upper=True)) + EPSILON)
        assert clopper_pearson(a, RELEASES, upper=False) <= bound


def test_a_record_level_lattice_records_no_rows():
    lattice = RealLattice(-2, Fraction(0), Fraction(1), 1, 4)
    assert "rows_per_person" not in lattice.to_dict() and RealLattice.from_dict(lattice.to_dict()) == lattice
    person = RealLattice(-2, Fraction(0), Fraction(1), 1, 12, 3)
    assert person.to_dict()["rows_per_person"] == 3 and RealLattice.from_dict(person.to_dict()) == person
    assert person.row_shift == 4 and person.shift_text == "12 = 3 rows × 4"


def test_replacing_a_person_moves_the_laplace_release_within_the_certified_epsilon():
    # Replace one person's ≤ 2 rows (values in [−1, 1.3], off the lattice at 1.3 and 0.3) by another's, either
    # possibly fewer: the released law at y is the discrete Laplace pmf of y − N, so the log-ratio of the two
    # datasets' laws at y is (|y − N′| − |y − N|)/t, an exact rational, over a window of y around both
    solution = dpopt.solve(_spec({"max_rows": 2}, "replace_one", privacy={"pure": {"epsilon": 1}},
                                 mechanism="laplace"))
    mech = solution.mechanism
    assert isinstance(mech, LatticeSumLaplace) and mech.lattice.rows == 2
    lattice, t = mech.lattice, mech.units_scale
    others = [0.7, -0.3, 1.3]  # the rest of the data set, unchanged
    persons = [rows for r in range(3) for rows in itertools.combinations_with_replacement(VALUES[::2], r)]
    sums = {rows: int(lattice.units(np.array([lattice.lattice_sum(others + [float(x) for x in rows])]))[0])
            for rows in persons}
    worst = Fraction(0)
    for a, b in itertools.product(sums.values(), repeat=2):
        for y in range(min(a, b) - lattice.shift, max(a, b) + lattice.shift + 1, max(1, lattice.shift // 50)):
            worst = max(worst, Fraction(abs(y - b) - abs(y - a)) / t)
    assert 0 < worst <= Fraction(lattice.shift) / t <= 1
