"""The second-moment floor of i.i.d. symmetric noise under ρ-zCDP / μ-GDP, and the staircase's utility bound on it.

Oracles: Mironov's closed-form Rényi divergence of Laplace noise at α = 2 (Mironov 2017, Table II:
D₂ = log((2/3)e^{t/b} + (1/3)e^{−2t/b}), E X² = 2b²); χ² and E X² of the discrete staircase (the pmf b^{L(k)}/Z with
the level L(k) = ⌊(|k| + m − r)/m⌋ its module states) and of a one-sided geometric law, by direct summation in mpmath
at 40 digits; the Gaussian's D₂ = t²/σ²; the floor's root solved by hand (one coordinate: ψ(t²/s) = 2ρ; the move
(2, 7): (98/s)(1 + 4/s) = e, a quadratic); the staircase's and R²DP's own designs (their bounds must not beat them);
``auto``'s rows.
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from conftest import ROOT, make_spec
from test_person_linear_pdp import SMALL_UNIT
from test_person_linear_pdp import spec as person_spec

import dpopt
from dpopt.design.select import design_candidates
from dpopt.mechanisms import registry
from dpopt.mechanisms.iid_floor import symmetric_iid_bound
from dpopt.privacy.iid_variance_floor import budget, d2_floor, second_moment_floor
from dpopt.sensitivity.patterns import ShiftPattern, shift_pattern

mpmath.mp.dps = 40


def _psi(a: float) -> float:
    """log max(1 + a, 2a), written out."""
    return math.log(max(1.0 + a, 2.0 * a))


# ------------------------------------------------------------------ the inequality on known laws
@pytest.mark.parametrize("ratio", [0.05, 0.3, 1.0, 1.5, 3.0, 8.0])
def test_laplace_d2_is_above_the_floor(ratio):
    # t/b = ratio; a = t²/E X² = ratio²/2; the second branch is active from ratio = √2 on
    d2 = math.log(2 / 3 * math.exp(ratio) + 1 / 3 * math.exp(-2 * ratio))
    assert d2 >= _psi(ratio**2 / 2) > 0


def _sum_law(pmf, shift: int, width: int) -> tuple[mpmath.mpf, mpmath.mpf]:
    """(1 + χ²(P_t ‖ P), E X²) by summation over |k| ≤ width (the terms beyond below 10⁻³⁰ in these tests)."""
    ks = range(-width, width + 1)
    ratio = mpmath.fsum(pmf(k - shift) ** 2 / pmf(k) for k in ks if pmf(k) > 0)
    return ratio, mpmath.fsum(k * k * pmf(k) for k in ks)


@pytest.mark.parametrize("epsilon, m, r, shift", [(Fraction(1, 2), 1, 1, 1), (Fraction(1, 5), 3, 2, 7),
                                                  (Fraction(3, 2), 4, 1, 9), (Fraction(2), 2, 2, 5)])
def test_discrete_staircase_d2_is_above_the_floor(epsilon, m, r, shift):
    b = mpmath.exp(-mpmath.mpf(epsilon.numerator) / epsilon.denominator)

    def level(k):
        return (abs(k) + m - r) // m

    width = int(80 * m / float(epsilon)) + shift  # b^{|k|/m} < e^{−80} beyond
    z = mpmath.fsum(b ** level(k) for k in range(-width, width + 1))
    ratio, second = _sum_law(lambda k: b ** level(k) / z, shift, width)
    a = shift**2 / second
    assert ratio >= max(1 + a, 2 * a)
    assert float(mpmath.log(ratio)) >= float(d2_floor(float(a))) * (1 - 1e-12)


def test_the_two_sided_branch_needs_a_symmetric_law():
    # one-sided geometric p(k) = (1 − q)q^k, k ≥ 0: 1 + χ²(P_1 ‖ P) = 1/q while 2/E X² = 2(1 − q)²/(q(1 + q)), above
    # it for small q; Hammersley–Chapman–Robbins (1 + 1/E X²) still holds
    q = mpmath.mpf("0.05")
    ratio, second = _sum_law(lambda k: (1 - q) * q**k if k >= 0 else mpmath.mpf(0), 1, 60)
    assert ratio == pytest.approx(1 / q, rel=1e-30)
    assert ratio < 2 / second and ratio >= 1 + 1 / second


@pytest.mark.parametrize("a", [0.01, 0.5, 1.0, 2.0, 10.0])
def test_the_gaussian_needs_more_than_the_floor(a):
    # N(0, σ²): D₂ = t²/σ² = a, strictly above ψ(a) (e^a > 1 + a and e^a > 2a): the floor never reaches the Gaussian
    assert float(d2_floor(a)) < a


# ------------------------------------------------------------------ the floor's root
@pytest.mark.parametrize("rho", [0.01, 0.2, 0.5, 2.0])
def test_one_coordinate_floor_in_closed_form(rho):
    # ψ(9/s) = 2ρ: s = 9/(e^{2ρ} − 1) while 9/s ≤ 1 (e^{2ρ} ≤ 2), else s = 18/e^{2ρ}; the Gaussian needs 9/(2ρ)
    pattern = ShiftPattern((Fraction(3),), np.array([[1]]))
    exact = 9 / math.expm1(2 * rho) if math.exp(2 * rho) <= 2 else 18 / math.exp(2 * rho)
    floor = second_moment_floor(pattern, budget("zcdp", {"rho": rho}))
    assert exact * (1 - 1e-8) <= floor <= exact
    assert floor < 9 / (2 * rho)


def test_gdp_budget_is_mu_squared():
    assert budget("gdp", {"mu": 1.5}) == pytest.approx(2.25, rel=1e-15) and budget("gdp", {"mu": 1.5}) >= 2.25
    with pytest.raises(ValueError, match="approx"):
        budget("approx", {"epsilon": 1, "delta": 1e-6})


def test_person_level_floor_is_the_root_of_its_largest_move():
    # the move A v = (2, 7) (v = (0, 1, 2): tests/test_person_linear_pdp.py's brute force) binds:
    # log(98/s) + log(1 + 4/s) = 1 ⇔ e s² − 98 s − 392 = 0 (49/s > 1 ≥ 4/s at the root)
    problem = dpopt.compile(person_spec("add_remove", "staircase", privacy={"zcdp": {"rho": 0.5}}))
    root = (98 + math.sqrt(98**2 + 4 * math.e * 392)) / (2 * math.e)
    floor = second_moment_floor(shift_pattern(problem.space), 1.0)
    assert root * (1 - 1e-8) <= floor <= root
    assert registry()["staircase"].utility_bound(problem) == pytest.approx(2 * root, rel=1e-8)


# ------------------------------------------------------------------ the staircase's bound
COUNT = {"dpopt": 1, "name": "count", "data": {"attributes": {"a": ["x"]}}, "query": {"kind": "count"},
         "adjacency": "add_remove"}
HISTOGRAM = make_spec(query={"kind": "histogram", "attribute": "race"}, adjacency={"kind": "add_remove"})
TABLE = make_spec()  # 3 × 2 table, replace-one
BOUNDED = [
    {**COUNT, "privacy": {"zcdp": {"rho": 0.5}}, "utility": {"metric": "l2"}},
    {**HISTOGRAM, "privacy": {"zcdp": {"rho": 0.5}}, "utility": {"metric": "l2"}},
    {**HISTOGRAM, "privacy": {"gdp": {"mu": 1.0}}, "utility": {"metric": "max_variance"}},
    {**TABLE, "privacy": {"zcdp": {"rho": 2.0}}, "utility": {"metric": "l2"}},
    {**TABLE, "privacy": {"zcdp": {"rho": 0.1}}, "utility": {"metric": "l2"}, "sampler": "floating_point"},
    person_spec("add_remove", "staircase", SMALL_UNIT, {"zcdp": {"rho": 0.5}}),
    person_spec("replace_one", "staircase", SMALL_UNIT, {"zcdp": {"rho": 0.5}}),
]
BOUNDED_IDS = ["count-zcdp", "histogram-zcdp", "histogram-gdp-max-variance", "table-replace-zcdp",
               "table-replace-zcdp-continuous", "person-add-remove-zcdp", "person-replace-zcdp"]


@pytest.mark.parametrize("family", ["staircase", "r2dp"])
@pytest.mark.parametrize("document", BOUNDED, ids=BOUNDED_IDS)
def test_the_bound_never_beats_the_design(document, family):
    problem = dpopt.compile({**document, "mechanism": family})
    cls = registry()[family]
    bound = cls.utility_bound(problem)
    assert bound is not None and bound >= symmetric_iid_bound(problem) > 0
    assert cls.design(problem).expected_utility(problem.spec.utility).value >= bound


@pytest.mark.parametrize("document", [
    {**COUNT, "privacy": {"approx": {"epsilon": 1, "delta": 1e-6}}, "utility": {"metric": "l2"}},
    {**COUNT, "privacy": {"zcdp": {"rho": 0.5}}, "utility": {"metric": "l1"}},
    {**HISTOGRAM, "privacy": {"zcdp": {"rho": 0.5}}, "utility": {"metric": "l2", "weights": [1, 2, 3]}},
], ids=["approx", "l1", "weights"])
def test_the_floor_is_none_where_it_is_not_proven(document):
    problem = dpopt.compile({**document, "mechanism": "staircase"})
    assert symmetric_iid_bound(problem) is None and registry()["staircase"].utility_bound(problem) is None


def test_auto_skips_the_staircase_and_r2dp_on_the_person_level_query_under_zcdp():
    # bound 2·39.686 = 79.37 against gaussian_optimal's 74.26 (closed form, floating point: beaten by more than 0.1%)
    rows = {c.family: c for c in design_candidates(dpopt.compile(person_spec("add_remove", "auto",
                                                                             privacy={"zcdp": {"rho": 0.5}})))}
    for family in ("staircase", "r2dp"):
        row = rows[family]
        assert row.skipped == "utility bound" and row.beaten_by == "gaussian_optimal", row.reason
    assert rows["gaussian_optimal"].utility.value < 79.37 / 1.001


def test_auto_still_designs_and_selects_the_staircase_under_approx():
    # specs/mean_income_approx.yaml: (ε, δ), where the staircase wins; no floor is stated there, so it is designed
    solution = dpopt.solve(ROOT / "specs" / "mean_income_approx.yaml")
    staircase = next(c for c in solution.candidates if c.family == "staircase")
    assert staircase.feasible and staircase.skipped is None
    assert solution.mechanism.family == "staircase"
