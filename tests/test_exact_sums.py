"""Bounded sums and means measured exactly on a dyadic lattice (dpopt/mechanisms/real_lattice.py, exact_sum.py).

Expected values come from brute force over small record sets (the lattice sensitivity, the privacy loss of the
released law, by exact rationals), from the discrete Laplace pmf (1 − r)/(1 + r)·r^|k| (Canonne, Kamath & Steinke
2020, Def. 28) and from Laplace's closed form E Z² = 2b² (Dwork et al. 2006).
"""

from __future__ import annotations

import copy
import csv
import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

import dpopt
from dpopt.mechanisms.base import IDEALIZED_NUMERICS
from dpopt.mechanisms.exact_sum import LatticeSumGaussian, LatticeSumLaplace
from dpopt.mechanisms.real_lattice import RealLattice


def _spec(query="sum", adjacency="add_remove", privacy=None, mechanism="laplace", lower=0, upper=10, n=None,
          metric="l2"):
    data = {"attributes": {"x": {"min": lower, "max": upper}}}
    if n is not None:
        data["n"] = n
    return {"dpopt": 1, "name": "t", "data": data, "query": {"kind": query, "attribute": "x"},
            "adjacency": adjacency, "privacy": privacy or {"pure": {"epsilon": 1}}, "mechanism": mechanism,
            "utility": {"metric": metric}}


# values on and off a coarse lattice g = 1/4, ties (0.125 = g/2), negatives, the bounds themselves
VALUES = [Fraction(v) for v in (-1, -0.875, -0.3, -0.125, 0, 0.1, 0.125, 0.3, 0.375, 0.7, 1.1, 1.5)]


def _rounded(lattice: RealLattice, x: Fraction) -> int:
    """⌊x/g + ½⌋ by the definition, independently of RealLattice.round_value."""
    q = x / lattice.granularity
    return q.numerator // q.denominator + (1 if q - q.numerator // q.denominator >= Fraction(1, 2) else 0)


@pytest.mark.parametrize("adjacency", ["add_remove", "replace_one"])
def test_the_lattice_sensitivity_covers_every_record_move_found_by_brute_force(adjacency):
    problem = dpopt.compile(_spec(adjacency=adjacency, lower=-1, upper=1.5, n=None if adjacency == "add_remove" else 3))
    from dpopt.mechanisms.real_lattice import real_lattice

    lattice = real_lattice(problem, -2)  # g = 1/4
    rounded = [_rounded(lattice, x) for x in VALUES]
    if adjacency == "add_remove":
        moves = [abs(r) for r in rounded]  # a record added or removed moves N by r(x)
    else:
        moves = [abs(a - b) for a, b in itertools.product(rounded, rounded)]
    assert max(moves) <= lattice.shift
    # tight: the bounds are lattice points here, so the largest move is attained (−1 → −4, 1.5 → 6 units)
    assert max(moves) == lattice.shift == (6 if adjacency == "add_remove" else 10)
    # an answer rounded as a whole: neighbours at most Δ = 2.5 (replace) apart move N by at most ⌈Δ/g⌉ = 10
    if adjacency == "replace_one":
        grid = [Fraction(k, 16) for k in range(-40, 41)]
        worst = max(abs(_rounded(lattice, a) - _rounded(lattice, b)) for a in grid for b in grid
                    if abs(a - b) <= Fraction(5, 2))
        assert worst <= lattice.shift


def test_the_sql_sum_equals_the_exact_rational_sum(tmp_path):
    from dpopt.release import sources
    from dpopt.release.lattice_sums import lattice_answer

    values = [float(v) for v in VALUES] + [0.1 + 0.2, 1e-300, 2.0, -5.0]  # the last two are clamped
    path = tmp_path / "x.csv"
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["x"])
        writer.writerows([[repr(v)] for v in values])
    lattice = RealLattice(-2, Fraction(-1), Fraction(3, 2), 1, 10)
    expected = sum(_rounded(lattice, min(max(Fraction(v), Fraction(-1)), Fraction(3, 2))) for v in values)
    assert lattice.lattice_sum(values) == float(expected * lattice.granularity)
    con = sources.connect()
    got = lattice_answer(con, sources.open_source(path), dpopt.compile(_spec(lower=-1, upper=1.5)).query, lattice)
    assert got.tolist() == [float(expected * lattice.granularity)]


def test_the_released_noise_has_the_discrete_laplace_pmf():
    # t = 2 units, g/n = 1/8: k = 8·(release − answer) must be discrete Laplace of scale 2. 40,000 draws; the
    # chi-square statistic over |k| ≤ 6 and the two tails (15 cells, 14 degrees of freedom) exceeds 45 with
    # probability 4·10⁻⁵ under the stated law; a law of scale 2.2 gives a statistic near 300.
    lattice = RealLattice(-3, Fraction(0), Fraction(1), 1, 8)
    mech = LatticeSumLaplace(16.0, lattice, Fraction(2))
    answer = 3.375  # 27 units
    out = mech.release(np.full((40_000, 1), answer), np.random.default_rng(7))[:, 0]
    k = np.array([int(Fraction(float(v)) * 8) - 27 for v in out])
    assert all(Fraction(float(v)) * 8 == int(Fraction(float(v)) * 8) for v in out[:1000])  # lattice points
    r = math.exp(-1 / 2)
    pmf = {j: (1 - r) / (1 + r) * r ** abs(j) for j in range(-6, 7)}
    tail = (1 - sum(pmf.values())) / 2
    observed = [np.sum(k == j) for j in range(-6, 7)] + [np.sum(k < -6), np.sum(k > 6)]
    expected = [40_000 * pmf[j] for j in range(-6, 7)] + [40_000 * tail] * 2
    chi2 = sum((o - e) ** 2 / e for o, e in zip(observed, expected))
    assert chi2 < 45


def test_the_implemented_privacy_loss_stays_within_the_certified_epsilon():
    # Replace-one over three records with values in VALUES (bounds [−1, 1.5], g = 1/4): the released law at y is
    # pmf(y·n/g − N), so the log-ratio of neighbours at y is (|k'| − |k|)/t, exact rationals over a window of y.
    solution = dpopt.solve(_spec(adjacency="replace_one", lower=-1, upper=1.5, n=3, query="mean",
                                 privacy={"pure": {"epsilon": 1}}))
    mech = solution.mechanism
    assert isinstance(mech, LatticeSumLaplace)
    lattice, t = mech.lattice, mech.units_scale
    worst = Fraction(0)
    for rows in itertools.combinations_with_replacement(VALUES[::3], 3):
        n_x = lattice.units(np.array([lattice.lattice_sum(rows)]))[0]
        for i, new in itertools.product(range(3), VALUES):
            other = list(rows)
            other[i] = new
            n_y = lattice.units(np.array([lattice.lattice_sum(other)]))[0]
            for y in range(int(n_x) - 3 * lattice.shift, int(n_x) + 3 * lattice.shift, max(1, lattice.shift // 7)):
                worst = max(worst, Fraction(abs(y - int(n_y)) - abs(y - int(n_x))) / t)
    assert 0 < worst <= Fraction(lattice.shift) / t <= 1


def test_a_laplace_sum_is_exact_by_default_and_costs_under_a_thousandth():
    solution = dpopt.solve(_spec(privacy={"pure": {"epsilon": 0.5}}))
    mech = solution.mechanism
    assert isinstance(mech, LatticeSumLaplace) and mech.exact_noise
    notes = solution.certificate["mechanism"]["notes"]
    assert not any(IDEALIZED_NUMERICS in note for note in notes)
    # the timing sentence: what is and is not covered
    assert any("Timing:" in note and "not covered: the running time's dependence on the noise drawn" in note
               for note in notes)
    # Laplace's E Z² = 2b², b = Δ/ε = 20: the exact measurement within 0.1% of 800
    assert solution.certificate["utility"]["value"] == pytest.approx(800, rel=1e-3)
    assert 1 - 1e-6 <= mech.parameters["lattice_cost_ratio"] <= 1.001
    floating = dpopt.solve({**_spec(privacy={"pure": {"epsilon": 0.5}}), "sampler": "floating_point"})
    assert not floating.mechanism.exact_noise
    assert any(IDEALIZED_NUMERICS in note for note in floating.certificate["mechanism"]["notes"])


def test_a_gaussian_sum_is_exact_under_zcdp_and_states_its_lattice():
    solution = dpopt.solve(_spec(mechanism="gaussian", privacy={"zcdp": {"rho": 0.5}}))
    mech = solution.mechanism
    assert isinstance(mech, LatticeSumGaussian) and mech.exact_noise
    assert any("Timing:" in note for note in solution.certificate["mechanism"]["notes"])
    # σ = Δ/√(2ρ) = 10; the bounds are lattice points, so E Z² = 100 up to the dyadic rounding of σ_ℤ²
    assert solution.certificate["utility"]["value"] == pytest.approx(100, rel=1e-5)


@pytest.mark.parametrize("query, n, privacy", [
    ("sum", None, {"zcdp": {"rho": 0.5}}),
    ("mean", 500, {"gdp": {"mu": 1.0}}),
    ("sum", None, {"approx": {"epsilon": 1.0, "delta": 1e-6}}),
])
def test_a_gaussian_sum_states_the_discrete_laws_interval_under_ci_volume(query, n, privacy):
    adjacency = "replace_one" if n else "add_remove"
    spec = _spec(query=query, adjacency=adjacency, privacy=privacy, mechanism="gaussian", upper=1000, n=n,
                 metric="ci_volume")
    solution = dpopt.solve(spec)
    cert = solution.certificate
    assert isinstance(solution.mechanism, LatticeSumGaussian) and solution.mechanism.exact_noise
    assert IDEALIZED_NUMERICS not in str(cert.data)
    assert dpopt.verify(cert).passed
    params = cert["mechanism"]["parameters"]
    s2 = float(Fraction(params["lattice_sigma2"]))
    lattice = RealLattice.from_dict(params["sum_lattice"])
    half = cert["utility"]["value"] / (2 * float(lattice.unit))  # m = σ_ℤ√r, the half-length in units
    # The coverage P(|η| ≤ m) of N_ℤ(0, σ_ℤ²), summed from its pmf over |k| ≤ 12σ_ℤ (the rest below e^{-72}): at
    # least 1 − α, and not much more: the radius grid's step (r/4096 at most) moves m by m/8192 ≈ 2.4·10⁻⁴σ_ℤ, whose
    # mass 2·φ(1.96)·2.4·10⁻⁴ ≈ 3·10⁻⁵ (plus one lattice point's 2·0.058/σ_ℤ) stays below 5·10⁻⁴
    top = int(12 * math.sqrt(s2)) + 2
    k = np.arange(-top, top + 1)
    pmf = np.exp(-(k.astype(float) ** 2) / (2 * s2))
    pmf /= pmf.sum()
    assert 0.95 <= pmf[np.abs(k) <= half].sum() < 0.95 + 5e-4
    # against the continuous interval 2σ·z_{0.975} (σ the continuous design's, in answer units): the lattice's
    # variance rounding (≤ 2^-20), the certified GDP slope (≤ 2·10⁻⁴ in variance) and the grid (≤ 1/8192 in
    # length) keep the ratio within 1.0004
    continuous = 2 * params["sigma"] * 1.959963984540054
    assert 1.0 < cert["utility"]["value"] / continuous < 1.0004
    forged = copy.deepcopy(cert.data)
    forged["utility"]["value"] *= 0.99
    assert "utility" in {c.claim for c in dpopt.verify(forged).failed}


def test_verify_rejects_a_forged_lattice_or_scale():
    cert = dpopt.solve(_spec(privacy={"pure": {"epsilon": 1}}, lower=0, upper=10.3)).certificate.data
    assert dpopt.verify(cert).passed
    forged = copy.deepcopy(cert)
    forged["mechanism"]["parameters"]["lattice_scale"] = str(Fraction(cert["mechanism"]["parameters"]["lattice_scale"]) / 2)
    assert not dpopt.verify(forged).passed  # ε = Δ_u/t doubled
    forged = copy.deepcopy(cert)
    forged["mechanism"]["parameters"]["sum_lattice"]["shift"] //= 2  # a smaller Δ_u than the bounds give
    assert not dpopt.verify(forged).passed
    forged = copy.deepcopy(cert)
    forged["mechanism"]["parameters"]["sum_lattice"]["exponent"] += 1  # a coarser lattice at the same Δ_u
    forged["mechanism"]["parameters"]["sum_lattice"]["granularity"] = f"2^{forged['mechanism']['parameters']['sum_lattice']['exponent']}"
    assert not dpopt.verify(forged).passed


def test_auto_takes_the_exact_staircase_on_a_sum():
    # ε = 0.1, l2: the staircase's E Z² is below Laplace's 2(10/0.1)² = 20,000 (Geng & Viswanath: the gain vanishes
    # as ε → 0; 0.042% here, 0.17% at ε = 0.2); both are measured exactly on the lattice, so auto takes the staircase
    for epsilon in (0.1, 0.2):
        solution = dpopt.solve(_spec(mechanism="auto", privacy={"pure": {"epsilon": epsilon}}))
        assert solution.mechanism.family == "staircase" and solution.mechanism.exact_noise
        assert solution.certificate["utility"]["value"] < 2 * (10 / epsilon) ** 2


def test_an_answer_from_python_is_rounded_to_the_lattice():
    mech = dpopt.solve(_spec(privacy={"pure": {"epsilon": 1}})).mechanism
    g = mech.lattice.granularity
    out = mech.release(np.array([3.3]), np.random.default_rng(1))
    assert Fraction(float(out[0])) / g == int(Fraction(float(out[0])) / g)


@pytest.mark.parametrize("divisor", [1, 3])
def test_the_units_of_an_answer_are_the_exact_half_up_rounding(divisor):
    lattice = RealLattice(-2, Fraction(-1), Fraction(3, 2), divisor, 10)
    answers = np.array([0.125, -0.125, 0.375, -0.375, 0.1 + 0.2, -7.3, 1e-300, 2.0**40 + 0.125])
    expected = [_rounded(lattice, Fraction(float(a)) * divisor) for a in answers]
    assert lattice.units(answers).tolist() == expected
    # and back: g·N/n is the nearest double of the exact rational
    assert lattice.answers(np.array(expected)).tolist() == [float(Fraction(u, 4 * divisor)) for u in expected]


def test_dpopt_release_counts_the_sum_on_the_lattice_grouped_and_ungrouped(tmp_path, monkeypatch):
    from dpopt.release import batch
    from dpopt.rng import random_source

    seen = []  # the answers the release hands the mechanism, recounted on its lattice
    for name in ("lattice_answer", "lattice_group_answers"):
        original = getattr(batch, name)
        monkeypatch.setattr(batch, name, lambda *a, _f=original: seen.append(_f(*a)) or seen[-1])
    path = tmp_path / "g.csv"
    rows = [("a", 0.1), ("a", 0.3), ("b", 9.99), ("b", 0.0625), ("c", 10.0)]
    path.write_text("clinic,x\n" + "".join(f"{c},{x!r}\n" for c, x in rows))
    spec = _spec()
    spec["data"]["attributes"]["clinic"] = ["a", "b", "c"]
    grouped = batch.release_groups(spec, path, "clinic", seed=5, insecure_seed=True)
    lattice = grouped.mechanism.lattice
    g = lattice.granularity
    exact = {c: sum(_rounded(lattice, Fraction(x)) for k, x in rows if k == c) * g for c in "abc"}
    assert seen[0].values[:, 0].tolist() == [float(exact[c]) for c in "abc"]
    values = grouped.levels[0].values[:, 0]
    assert all(Fraction(float(v)) / g == int(Fraction(float(v)) / g) for v in values)  # lattice points
    batch.release_once(spec, path, random_source(5, insecure_seed=True))
    assert seen[1].tolist() == [float(sum(exact.values()))]


def test_support_attack_breaks_the_floating_point_sum_and_not_the_exact_one():
    """Mironov's support attack (tests/test_float_attack.py) on a sum of values in [0, 1] at neighbouring sums 0 and
    1 (one record of value 1 added), ε = 0.5: the floating-point Laplace release is flagged only at 1 (no ε holds);
    the exact release's flag rates obey P(E | one) ≤ e^ε P(E | other) within Clopper–Pearson limits."""
    from test_float_attack import EPSILON, RELEASES, clopper_pearson, event_rates

    spec = _spec(privacy={"pure": {"epsilon": EPSILON}}, upper=1)
    floating = dpopt.solve({**spec, "sampler": "floating_point"}).mechanism
    exact = dpopt.solve(spec).mechanism
    assert isinstance(exact, LatticeSumLaplace) and not floating.exact_noise
    e0, e1 = event_rates(floating, floating.scale, lambda i: np.random.default_rng(400 + i))
    assert e0 == 0 and clopper_pearson(e1, RELEASES, upper=False) > 0.1
    f0, f1 = event_rates(exact, floating.scale, lambda i: np.random.default_rng(500 + i))
    for a, b in ((f0, f1), (f1, f0)):
        assert clopper_pearson(a, RELEASES, upper=False) <= math.exp(EPSILON) * clopper_pearson(b, RELEASES, upper=True)


def test_on_counts_the_exact_unit_step_staircase_is_the_geometric_law():
    # the unit-step discrete staircase is the geometric law: E Z² = 2r/(1 − r)² per cell, r = e^{−ε} (CKS 2020,
    # Def. 28), 3 cells at ε = 1: 5.524, below the continuous staircase's (5.75); the exact staircase and the discrete
    # Laplace are the same law, so the tie goes to the family listed first
    spec = {"dpopt": 1, "name": "c", "data": {"attributes": {"a": ["x", "y", "z"]}},
            "query": {"kind": "histogram", "attribute": "a"}, "adjacency": "add_remove",
            "privacy": {"pure": {"epsilon": 1}}, "mechanism": ["discrete_laplace", "staircase"],
            "utility": {"metric": "l2"}}
    solution = dpopt.solve(spec)
    r = math.exp(-1)
    assert solution.mechanism.family == "discrete_laplace"
    assert solution.certificate["utility"]["value"] == pytest.approx(3 * 2 * r / (1 - r) ** 2, rel=1e-5)
    staircase = next(c for c in solution.candidates if c.family == "staircase")
    assert staircase.mechanism.exact_noise
    assert staircase.utility.value == pytest.approx(solution.certificate["utility"]["value"], rel=1e-12)
    floating = dpopt.solve({**spec, "mechanism": "staircase", "sampler": "floating_point"})
    assert floating.certificate["utility"]["value"] > solution.certificate["utility"]["value"]


def test_a_grouped_release_plan_counts_each_groups_sum_on_the_lattice(tmp_path, monkeypatch):
    from dpopt.plan import release as plan_release
    from dpopt.rng import random_source

    seen = []
    original = plan_release._lattice_group_units
    monkeypatch.setattr(plan_release, "_lattice_group_units", lambda *a: seen.append(original(*a)) or seen[-1])
    path = tmp_path / "g.csv"
    rows = [("a", 0.1), ("a", 0.3), ("b", 9.99), ("b", 0.0625)]
    path.write_text("clinic,x\n" + "".join(f"{c},{x!r}\n" for c, x in rows))
    plan = {"dpopt": 1, "name": "p", "data": {"attributes": {"clinic": ["a", "b"], "x": {"min": 0, "max": 10}}},
            "queries": [{"name": "total", "query": {"kind": "sum", "attribute": "x"}},
                        {"name": "clinics", "query": {"kind": "histogram", "attribute": "clinic"}}],
            "adjacency": "add_remove", "privacy": {"zcdp": {"rho": 0.5}}, "mechanism": "auto",
            "utility": {"metric": "l2"}}
    solution, _, _ = plan_release.release_plan_groups(plan, path, ["clinic"], random_source(3, insecure_seed=True))
    lattice = solution.designs[0].mechanism.lattice
    assert seen == [{0: {c: sum(_rounded(lattice, Fraction(x)) for k, x in rows if k == c) for c in "ab"}}]


def test_verify_rejects_a_halved_lattice_variance_of_a_gaussian_sum():
    cert = dpopt.solve(_spec(mechanism="gaussian", privacy={"zcdp": {"rho": 0.5}}, lower=0, upper=10.3)).certificate.data
    assert dpopt.verify(cert).passed
    forged = copy.deepcopy(cert)
    parameters = forged["mechanism"]["parameters"]
    parameters["lattice_sigma2"] = str(Fraction(parameters["lattice_sigma2"]) / 2)  # ρ = Δ_u²/(2σ_ℤ²) doubled
    assert not dpopt.verify(forged).passed


@pytest.mark.parametrize("divisor", [1, 7, 12345])
def test_the_vectorised_units_agree_with_exact_rounding_and_invert_the_published_value(divisor):
    rng = np.random.default_rng(divisor)
    lattice = RealLattice(-3, Fraction(0), Fraction(1), divisor, 1)
    units = rng.integers(-2**40, 2**40, size=2000)
    values = np.concatenate([lattice.answers(units), rng.normal(0, 1e6, 2000), lattice.answers(units) * (1 + 1e-16)])
    expected = [math.floor(Fraction(float(v)) * 8 * divisor + Fraction(1, 2)) for v in values]
    assert lattice.units(values).tolist() == expected
    assert lattice.units(lattice.answers(units)).tolist() == units.tolist()


@pytest.mark.parametrize("mechanism", ["laplace", "gaussian", "staircase"])
def test_dpopt_release_publishes_the_lattice_mean_unrounded(tmp_path, mechanism):
    """`dpopt release` of a bounded mean publishes the mechanism's own release g(N + η)/n, a real lattice point:
    the integer noise on N must not make the release path round the mean to an integer (it published 11, 5, 9
    for a committee's mean score in [0, 10] before)."""
    from dpopt.release import batch
    from dpopt.rng import random_source

    privacy = {"zcdp": {"rho": 0.5}} if mechanism == "gaussian" else {"pure": {"epsilon": 1}}
    spec = _spec(query="mean", adjacency="replace_one", privacy=privacy, mechanism=mechanism, n=5)
    path = tmp_path / "m.csv"
    path.write_text("x\n7\n9\n6\n8\n7.5\n")
    published = []
    for seed in range(6):
        solution, value, _, _ = batch.release_once(spec, path, random_source(seed, insecure_seed=True))
        assert solution.mechanism.exact_noise and not solution.mechanism.integer_release
        step = solution.mechanism.lattice.unit  # g/n: every release is the nearest double of a multiple of it
        assert float(round(Fraction(float(value[0])) / step) * step) == float(value[0])
        published.append(float(value[0]))
    # the noise is continuous-scale (about 2 or more at these targets on a mean of 5 scores in [0, 10]) and on a
    # lattice of step g/n ≤ 2⁻²⁰: six draws that were all whole numbers would be the rounding this test guards
    assert any(v != round(v) for v in published)
