"""Pruning in ``auto``: a family whose proven utility bound a calibrated candidate beats is
not designed, and the selection is the one the full comparison makes.

Oracles: the R²DP family's own LP design (the bound must not beat it; Geng & Viswanath 2016
is the theorem behind the bound), and the full comparison (the spec's families listed
explicitly, which are all designed). Which designed value may beat a bound: stated rows (a
closed form; an estimate by the worse end of its interval; the exact margin of ``select``).
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

import dpopt
from dpopt.design.select import EXACT_MARGIN, Candidate, _beats
from dpopt.mechanisms import registry
from dpopt.mechanisms.base import UtilityValue, better
from dpopt.spec.load import load_spec
from dpopt.core.families import family_names

from conftest import ROOT, make_spec

COUNT = {"dpopt": 1, "name": "count", "data": {"attributes": {"a": ["x"]}}, "query": {"kind": "count"},
         "adjacency": "add_remove", "privacy": {"pure": {"epsilon": 0.5}}}
HISTOGRAM = make_spec(query={"kind": "histogram", "attribute": "race"}, privacy={"pure": {"epsilon": 1.0}})
SUM = make_spec(data={"attributes": {"income": {"min": 0, "max": 10}}},
                query={"kind": "sum", "attribute": "income"}, privacy={"pure": {"epsilon": 1.0}})


@pytest.mark.parametrize("spec", [
    {**COUNT, "utility": {"metric": "l1"}},
    {**COUNT, "utility": {"metric": "usefulness", "gamma": 0.5}},
    {**HISTOGRAM, "utility": {"metric": "l2"}},
    {**HISTOGRAM, "utility": {"metric": "usefulness", "gamma": 0.5}},
    {**SUM, "utility": {"metric": "l1"}},
    {**COUNT, "utility": {"metric": "usefulness", "gamma": 2.0}},
], ids=["count-l1", "count-usefulness", "histogram-l2", "histogram-usefulness", "sum-l1", "count-usefulness-wide"])
def test_the_r2dp_bound_never_beats_its_design(spec):
    problem = dpopt.compile({**spec, "mechanism": "r2dp"})
    spec = problem.spec
    cls = registry()["r2dp"]
    bound = cls.utility_bound(problem)
    design = cls.design(problem)
    if bound is None:  # a sum measured on its lattice: the staircase bound is not one for a lattice law (r2dp_sum)
        assert spec.query.kind == "sum" and "sum_lattice" in design.parameters
        return
    value = design.expected_utility(spec.utility).value
    sign = -1.0 if better(spec.utility.metric) == "higher" else 1.0
    assert sign * value >= sign * bound * (1 - 1e-12)


def test_the_r2dp_bound_is_none_where_the_theorem_does_not_apply():
    # usefulness with γ > Δ∞: the staircase's g comes from a search, not a proven optimum (the continuous design;
    # on counts the exact mixture's bound is the geometric law's, valid for every γ: tests/test_r2dp_counts.py)
    problem = dpopt.compile({**COUNT, "mechanism": "r2dp", "utility": {"metric": "usefulness", "gamma": 2.0},
                             "sampler": "floating_point"})
    assert registry()["r2dp"].utility_bound(problem) is None


@pytest.mark.parametrize("name", ["count_add_remove.yaml", "table_replace_pure.yaml"])
def test_auto_prunes_and_selects_what_the_full_comparison_selects(name):
    auto = dpopt.solve(ROOT / "specs" / name)
    row = next(c for c in auto.candidates if c.family == "r2dp")
    if row.feasible:  # on counts r2dp's bound is the exact geometric law, which laplace's dyadic scale approaches
        assert row.utility.value >= auto.certificate["utility"]["value"]
    else:
        assert row.reason.startswith("not designed: its utility bound")
    document = load_spec(ROOT / "specs" / name).model_dump(mode="json", by_alias=True, exclude_none=True)
    full = dpopt.solve({**document, "mechanism": [f for f in family_names() if f in registry()]})
    assert next(c for c in full.candidates if c.family == "r2dp").feasible
    assert auto.mechanism.family == full.mechanism.family
    assert auto.mechanism.parameters == full.mechanism.parameters


@pytest.mark.parametrize("spec", [
    {**COUNT, "privacy": {"gdp": {"mu": 0.5}}, "utility": {"metric": "l1"}},
    {**COUNT, "privacy": {"gdp": {"mu": 2.0}}, "utility": {"metric": "usefulness", "gamma": 1.0}},
    {**HISTOGRAM, "privacy": {"gdp": {"mu": 1.0}}, "utility": {"metric": "l2"}},
    make_spec(privacy={"gdp": {"mu": 0.1}}, utility={"metric": "l2"}),
], ids=["count-l1", "count-usefulness", "histogram-l2", "table-l2"])
def test_the_laplace_gdp_bound_never_beats_its_design(spec):
    problem = dpopt.compile({**spec, "mechanism": "laplace"})
    spec = problem.spec
    cls = registry()["laplace"]
    bound = cls.utility_bound(problem)
    design = cls.design(problem)
    if bound is None:  # a sum measured on its lattice: the staircase bound is not one for a lattice law (r2dp_sum)
        assert spec.query.kind == "sum" and "sum_lattice" in design.parameters
        return
    value = design.expected_utility(spec.utility).value
    sign = -1.0 if better(spec.utility.metric) == "higher" else 1.0
    assert sign * value >= sign * bound


def test_auto_prunes_laplace_under_gdp_and_selects_the_same():
    spec = make_spec(privacy={"gdp": {"mu": 0.1}}, utility={"metric": "l2"})
    auto = dpopt.solve(spec)
    assert next(c for c in auto.candidates if c.family == "laplace").reason.startswith("not designed")
    full = dpopt.solve({**spec, "mechanism": [f for f in family_names() if f in registry()]})
    assert auto.mechanism.family == full.mechanism.family
    assert auto.mechanism.parameters == full.mechanism.parameters


# ------------------------------------------------ which designed candidate beats a bound
def _row(family: str, value: float, exact: bool, method: str = "closed form", ci=None) -> Candidate:
    return Candidate(family, SimpleNamespace(exact_noise=exact), UtilityValue("l2", value, method, ci))


ORDER = ["k_norm", "generalized_gaussian", "staircase"]


@pytest.mark.parametrize("ci, beaten", [((189.6, 191.4), True), ((180.0, 330.0), False)])
def test_an_estimate_beats_a_bound_by_its_whole_interval(ci, beaten):
    # k_norm's Monte Carlo value 190.5 with its 95% interval: below the bound 323.667 only if the whole interval is
    rows = {"k_norm": _row("k_norm", 190.5, True, "Monte Carlo", ci)}
    winner = _beats(rows, ORDER, "generalized_gaussian", 323.667, "l2")
    assert (winner is not None) is beaten


def test_an_estimate_without_an_interval_beats_nothing():
    rows = {"k_norm": _row("k_norm", 1.0, True, "Monte Carlo")}
    assert _beats(rows, ORDER, "generalized_gaussian", 323.667, "l2") is None


@pytest.mark.parametrize("exact, gap, beaten", [(True, 1e-4, True), (False, 1e-4, False), (False, 2e-3, True)])
def test_a_floating_point_candidate_beats_a_bound_by_more_than_the_exact_margin(exact, gap, beaten):
    # select keeps an exact candidate within EXACT_MARGIN (0.1%) of a better floating-point one: a family whose bound
    # is within that margin of a floating-point winner could still be chosen, so it is designed
    rows = {"k_norm": _row("k_norm", 100.0, exact)}
    winner = _beats(rows, ORDER, "generalized_gaussian", 100.0 * (1 + gap), "l2")
    assert (winner is not None) is beaten
    assert EXACT_MARGIN == 1e-3
