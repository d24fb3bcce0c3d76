"""pDP of exact discrete Gaussian noise on counts whose move patterns are not derived: the sub-Gaussian bound at the
exact max ‖v‖² (dpopt.privacy.discrete_gaussian_pdp.norm_pdp_level, dpopt.mechanisms.lattice_pdp).

Expected values: the exact level δ(v) = P[S > εσ² − ‖v‖²/2] + P[S > εσ² + ‖v‖²/2], S = ⟨η, v⟩, η i.i.d.
N_ℤ(0, σ²) (Canonne, Kamath & Steinke 2020: integer shifts, no normaliser term), from the law of S convolved
coordinate by coordinate in mpmath at 30 digits on |η_i| ≤ B plus the mass outside the box bounded by
m·T/z (T = 2w(B+1)/(1 − e^{−(B+1)/σ²}), the geometric tail of the weights): an upper estimate of δ(v), for every
pattern (sorted non-zero |v_i|) with ‖v‖² up to n, listed by brute force; the bound's formula
e^{−a²/(2σ²n)} + e^{−b²/(2σ²n)} evaluated in mpmath; the smallest σ² meeting δ by mpmath's root finder on that
formula.
"""

from __future__ import annotations

import csv
import json
import math
import subprocess
import sys
from fractions import Fraction

import mpmath
import pytest

import dpopt
from dpopt.mechanisms.integer_noise import GRID_BITS
from dpopt.mechanisms.lattice_pdp import norm_bound
from dpopt.privacy.discrete_gaussian_pdp import norm_pdp_level
from dpopt.sensitivity import person, person_patterns
from pdp_brute import mp_level

ATTRIBUTES = {"a": ["a0", "a1", "a2"], "b": ["b0", "b1"], "c": ["c0", "c1", "c2"]}


def patterns_up_to(norm2: int, longest: int) -> list[tuple[int, ...]]:
    """Every non-increasing tuple of positive integers with Σ t² ≤ norm2 and at most ``longest`` entries."""
    out = []

    def extend(prefix: tuple[int, ...], room: int, top: int) -> None:
        if prefix:
            out.append(prefix)
        if len(prefix) == longest:
            return
        for t in range(min(top, math.isqrt(room)), 0, -1):
            extend(prefix + (t,), room - t * t, t)

    extend((), norm2, norm2)
    return out


def brute_level(sigma2: Fraction, pattern: tuple[int, ...], epsilon: Fraction) -> mpmath.mpf:
    """An upper estimate of δ(v) (module docstring): the box law of S in mpmath (:func:`pdp_brute.mp_level` on
    |η_i| ≤ 12σ + 1, normalised on the box) plus the outside mass."""
    box = math.ceil(12 * math.sqrt(sigma2)) + 1
    with mpmath.workdps(30):
        s2 = mpmath.mpf(sigma2.numerator) / sigma2.denominator
        z = mpmath.fsum(mpmath.exp(-mpmath.mpf(j * j) / (2 * s2)) for j in range(-box, box + 1))
        tail = 2 * mpmath.exp(-mpmath.mpf((box + 1) ** 2) / (2 * s2)) / (1 - mpmath.exp(-(box + 1) / s2))
        return mp_level(sigma2, pattern, epsilon, box, digits=30) + len(pattern) * tail / z


def formula(sigma2: Fraction, norm2: int, epsilon: Fraction) -> mpmath.mpf:
    """e^{−a²/(2σ²n)} + e^{−b²/(2σ²n)}, a = εσ² − n/2, b = εσ² + n/2 (1 when a < 0), in mpmath."""
    with mpmath.workdps(40):
        s2, eps = as_mpf(sigma2), as_mpf(epsilon)
        a, b = eps * s2 - mpmath.mpf(norm2) / 2, eps * s2 + mpmath.mpf(norm2) / 2
        if a < 0:
            return mpmath.mpf(1)
        return mpmath.exp(-a * a / (2 * s2 * norm2)) + mpmath.exp(-b * b / (2 * s2 * norm2))


def as_mpf(x: Fraction) -> mpmath.mpf:
    return mpmath.mpf(x.numerator) / x.denominator


@pytest.mark.parametrize("sigma2, epsilon, norm2, longest", [
    (Fraction(4), Fraction(1), 8, 8),           # n = 2εσ²: the end of the range
    (Fraction(10), Fraction(1, 2), 9, 5),
    (Fraction(25, 2), Fraction(1), 20, 3),
])
def test_the_bound_at_the_largest_norm_is_above_every_pattern_sharing_it(sigma2, epsilon, norm2, longest):
    patterns = patterns_up_to(norm2, longest)
    assert len(patterns) >= 12  # many patterns share the bound, of every norm up to n
    bound = norm_pdp_level(sigma2, norm2, epsilon)
    assert as_mpf(bound) == pytest.approx(formula(sigma2, norm2, epsilon), rel=1e-25)
    levels = {pattern: brute_level(sigma2, pattern, epsilon) for pattern in patterns}
    assert max(levels.values()) <= as_mpf(bound)
    # the value at each pattern's own norm is between its level and the bound at n (monotonicity, not the tail)
    for pattern, level in levels.items():
        own = as_mpf(norm_pdp_level(sigma2, sum(t * t for t in pattern), epsilon))
        assert level <= own <= as_mpf(bound)


@pytest.mark.parametrize("sigma2, epsilon", [(Fraction(4), Fraction(1)), (Fraction(161, 8), Fraction(3, 10))])
def test_the_bound_increases_with_the_norm_up_to_two_epsilon_sigma2_and_decreases_with_sigma2(sigma2, epsilon):
    top = math.floor(2 * epsilon * sigma2)
    values = [formula(sigma2, n, epsilon) for n in range(1, top + 1)]
    assert all(x < y for x, y in zip(values, values[1:]))  # g'(n) = h'(n) = 1/4 − (εσ²)²/n² < 0 below 2εσ²
    assert norm_pdp_level(sigma2, top + 1, epsilon) == 1  # a < 0: Chernoff says nothing
    assert all(norm_pdp_level(sigma2 * k, top, epsilon) <= norm_pdp_level(sigma2 * (k - 1 + Fraction(1, 2)), top,
                                                                         epsilon) for k in (2, 3, 5))


def spec(privacy: dict, mechanism: str, rows: int = 6) -> dict:
    return {"dpopt": 1, "name": "2-way marginals of a 3x2x3 table, one person replaced",
            "data": {"attributes": ATTRIBUTES, "privacy_unit": {"id": "person_id", "max_rows": rows}},
            "query": {"kind": "marginals", "attributes": [["a", "b"], ["a", "c"], ["b", "c"]]},
            "adjacency": {"kind": "replace_one"}, "privacy": privacy, "mechanism": mechanism,
            "utility": {"metric": "l2"}}


PDP = {"pdp": {"epsilon": 1, "delta": 1e-6}}


def smallest_sigma2(norm2: int, epsilon: float, delta: float) -> mpmath.mpf:
    """The σ² at which the bound's formula equals δ (it decreases in σ² where a ≥ 0), by mpmath's root finder."""
    with mpmath.workdps(40):
        f = lambda s2: formula(Fraction(str(s2)), norm2, Fraction(str(epsilon))) - mpmath.mpf(delta)
        return mpmath.findroot(lambda s2: f(mpmath.mpf(s2)), (norm2, 100 * norm2), solver="bisect", tol=1e-30)


@pytest.mark.parametrize("mechanism", ["gaussian", "discrete_gaussian"])
def test_marginals_beyond_the_pattern_budget_are_measured_exactly_on_the_norm_bound(mechanism):
    solution = dpopt.solve(spec(PDP, mechanism))
    certificate = json.loads(solution.certificate.to_json())
    text = json.dumps(certificate, ensure_ascii=False)
    assert "idealized" not in text and "move patterns not derived" in certificate["sensitivity"]["method"]
    # l2² = 216: a person's 6 rows in one cell, the other's in a cell differing in every attribute (3 tables × 6²,
    # twice: ‖Av − Av′‖² = ‖Av‖² + ‖Av′‖² on disjoint cells of every table)
    assert certificate["sensitivity"]["l2_squared_exact"] == "216"
    parameters = certificate["mechanism"]["parameters"]
    sigma2 = Fraction(parameters["lattice_sigma2" if mechanism == "gaussian" else "sigma_squared_exact"])
    threshold = smallest_sigma2(216, 1.0, 1e-6)
    # σ_ℤ² passes the bound and sits within the search's resolution (2^-24 of its bracket, plus one step of the
    # 21-bit grid) of the smallest σ² that does
    assert threshold <= as_mpf(sigma2) <= threshold * (1 + mpmath.mpf(2) ** -(GRID_BITS - 2))
    (check,) = [c for c in certificate["checks"] if c["claim"] == "privacy"]
    assert "the move patterns not derived" in check["method"] and check["passed"]
    assert dpopt.verify(certificate).passed
    forged = json.loads(json.dumps(certificate))
    key = "lattice_sigma2" if mechanism == "gaussian" else "sigma_squared_exact"
    smaller = sigma2 - Fraction(1, 2**8)
    assert formula(smaller, 216, Fraction(1)) > 1e-6
    forged["mechanism"]["parameters"][key] = str(smaller)
    assert "privacy" in {c.claim for c in dpopt.verify(forged).failed}
    if mechanism == "gaussian":
        # the cost against Lemma 10's continuous σ² is stated: Var N_ℤ(0, σ_ℤ²) (≈ σ_ℤ² here, σ_ℤ² ≫ 1) over σ²
        cost = parameters["exact_cost"]
        assert cost["continuous"] == pytest.approx(parameters["sigma"] ** 2)
        assert cost["ratio"] == pytest.approx(float(sigma2) / parameters["sigma"] ** 2, rel=1e-6) and cost["ratio"] > 1


def test_the_bound_is_read_only_where_the_patterns_are_not_derived(monkeypatch):
    # inside the budget the derived patterns are read (≤ 2 rows: 2,020 sequences)
    inside = dpopt.derive(dpopt.load_spec(spec(PDP, "gaussian", rows=2)))
    assert inside.stated_patterns() is not None and norm_bound(inside) is None
    beyond = dpopt.derive(dpopt.load_spec(spec(PDP, "gaussian")))
    assert norm_bound(beyond) == 216
    # a listed table space beyond the partition-pair budget whose listing is too large: the bound as well
    monkeypatch.setattr(person_patterns, "MAX_PARTITION_PAIRS", 3)
    monkeypatch.setattr(person, "MAX_LISTED_ENTRIES", 30)
    document = spec(PDP, "gaussian", rows=2) | {"query": {"kind": "histogram", "attribute": "a"}}
    table = dpopt.derive(dpopt.load_spec(document))
    assert table.complete and table.listed() is None and table.stated_patterns() is None
    assert norm_bound(table) == 8  # two rows in one cell against two in another: 2² + 2²


def test_the_bound_costs_variance_against_the_exact_levels_where_both_apply(monkeypatch):
    # ≤ 2 rows, (1, 10⁻³)-pDP: the patterns derived, then hidden; the bound's σ_ℤ² is never below the exact one's
    document = spec({"pdp": {"epsilon": 1, "delta": 1e-3}}, "discrete_gaussian", rows=2)
    exact = Fraction(dpopt.solve(document).mechanism.parameters["sigma_squared_exact"])
    monkeypatch.setattr(person_patterns, "MAX_SEQUENCES", 10)
    monkeypatch.setattr(person, "MAX_SEQUENCES", 10)
    bounded = Fraction(dpopt.solve(document).mechanism.parameters["sigma_squared_exact"])
    assert bounded >= exact
    assert formula(bounded, 24, Fraction(1)) <= 1e-3  # l2² = 24: 2² per table, 3 tables, twice


APPROX, ZCDP = {"approx": {"epsilon": 1, "delta": 1e-6}}, {"zcdp": {"rho": 0.5}}


@pytest.mark.parametrize("privacy, mechanism", [(APPROX, "gaussian"), (APPROX, "discrete_gaussian"),
                                                (ZCDP, "gaussian"), (ZCDP, "discrete_gaussian"),
                                                ({"gdp": {"mu": 1}}, "gaussian")])
def test_approx_zcdp_and_gdp_beyond_the_pattern_budget_are_already_exact(privacy, mechanism):
    # they need ‖v‖² only: the GDP slope / Δ₂²/(2σ²) (gaussian), ρ-zCDP or the CKS conversion (discrete_gaussian)
    certificate = json.loads(dpopt.solve(spec(privacy, mechanism)).certificate.to_json())
    assert "idealized" not in json.dumps(certificate) and dpopt.verify(certificate).passed
    assert "move patterns not derived" in certificate["sensitivity"]["method"]


def test_cli_solve_release_verify_beyond_the_pattern_budget(tmp_path):
    run = lambda *args: subprocess.run([sys.executable, "-m", "dpopt.cli", *args], capture_output=True, text=True)
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec(PDP, "gaussian")))
    data = tmp_path / "people.csv"
    with data.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["person_id", "a", "b", "c"])
        for i in range(60):
            for r in range(i % 8):  # up to 7 rows: bounding cuts them to 6
                writer.writerow([f"P{i}", f"a{(i + r) % 3}", f"b{r % 2}", f"c{(i * r) % 3}"])
    solved = run("solve", str(path), "--json")
    assert solved.returncode == 0, solved.stderr
    assert json.loads(solved.stdout)["mechanism"]["parameters"]["sampler"] == "exact"
    released = run("release", str(path), "--data", str(data), "--out", str(tmp_path / "release"))
    assert released.returncode == 0, released.stderr
    checked = run("verify", str(tmp_path / "release"))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    record = json.loads((tmp_path / "release" / "release.json").read_text())
    assert "idealized" not in json.dumps(record)
    assert all(isinstance(value, int) for value in record["release"].values())  # integer counts + integer noise
    certificate = json.loads((tmp_path / "release" / "certificate.json").read_text())
    (check,) = [c for c in certificate["checks"] if c["claim"] == "privacy"]
    assert "the move patterns not derived" in check["method"]


@pytest.mark.parametrize("mechanism", ["gaussian", "discrete_gaussian"])
def test_a_table_whose_moves_are_neither_listed_nor_derived_is_measured_on_the_bound(mechanism, monkeypatch):
    # a 3-cell histogram, ≤ 2 rows, replace: no partition pairs stated (budget 3 < 4²) and the listing refused (30
    # numbers), so the bound at l2² = 8 (2² + 2²). With the budgets restored verify reads the derived patterns, whose
    # exact levels the bound dominates.
    document = spec({"pdp": {"epsilon": 1, "delta": 1e-3}}, mechanism, rows=2) | {
        "query": {"kind": "histogram", "attribute": "a"}}
    with monkeypatch.context() as patched:
        patched.setattr(person_patterns, "MAX_PARTITION_PAIRS", 3)
        patched.setattr(person, "MAX_LISTED_ENTRIES", 30)
        certificate = json.loads(dpopt.solve(document).certificate.to_json())
        (check,) = [c for c in certificate["checks"] if c["claim"] == "privacy"]
        assert "the move patterns not derived" in check["method"] and "max ‖v‖² = 8" in check["detail"]
        assert "idealized" not in json.dumps(certificate) and dpopt.verify(certificate).passed
    (check,) = [c for c in dpopt.verify(certificate).checks if c.claim == "privacy"]
    assert check.passed and "max over the move patterns" in check.method
