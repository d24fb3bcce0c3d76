"""Compile once: ``dpopt.compile(spec) -> Problem``, computed once and passed down.

Issue 17 measured that one ``solve`` of a spec with invariants entered
``invariant_domain`` seven times and ``compile_query`` four times. Here every call of the two
functions is counted at its definition (a profile hook matching their code objects, so that
a name imported elsewhere is counted as well) during one ``dpopt.solve``: each must run
exactly once, in :func:`dpopt.compile`; ``dpopt verify`` compiles the embedded spec itself,
once, and does not reuse the solver's problem.
"""

from __future__ import annotations

import dataclasses
import importlib
import sys
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

import dpopt
from dpopt.domain.queries import compile_query
from dpopt.plan import solve_plan
from dpopt.sensitivity.derive import derive_space
from dpopt.sensitivity.invariants import invariant_domain

SPECS = Path(__file__).resolve().parents[1] / "specs"
COUNTED = {f.__code__: f.__name__ for f in (compile_query, invariant_domain, derive_space)}


@contextmanager
def counting():
    """Count the calls of :data:`COUNTED` in this thread while the block runs."""
    counts: Counter = Counter()
    previous = sys.getprofile()

    def hook(frame, event, arg):
        if event == "call" and frame.f_code in COUNTED:
            counts[COUNTED[frame.f_code]] += 1

    sys.setprofile(hook)
    try:
        yield counts
    finally:
        sys.setprofile(previous)


# census_2020_states: one family; the table specs: ``mechanism: auto``, every family's
# supports/design/certificate runs (gdp and pure targets reach different families)
INVARIANT_SPECS = ["census_2020_states.yaml", "table_3x3_margins_gdp.yaml", "table_2x2_margins_pure.yaml"]


@pytest.mark.parametrize("name", INVARIANT_SPECS)
def test_one_solve_compiles_the_query_and_the_invariants_once(name):
    spec = dpopt.load_spec(SPECS / name)
    assert spec.invariants
    with counting() as counts:
        dpopt.solve(spec)
    assert counts == {"compile_query": 1, "invariant_domain": 1, "derive_space": 1}


def test_one_solve_without_invariants_compiles_the_query_once():
    spec = dpopt.load_spec(SPECS / "table_replace_gdp.yaml")
    assert not spec.invariants
    with counting() as counts:
        dpopt.solve(spec)
    assert counts == {"compile_query": 1, "derive_space": 1}


# pure ε without invariants under ``auto``: the generalized Gaussian's utility bound, its
# bounded options and its certificate's box check read the public answer box from the
# compiled query (``answer_bounds(spec, problem.query)``), never compiling it again
PURE_SPECS = ["committee_mean_truncated_gg.yaml", "table_replace_pure.yaml"]


@pytest.mark.parametrize("name", PURE_SPECS)
def test_one_auto_solve_of_a_pure_spec_without_invariants_compiles_the_query_once(name):
    document = yaml.safe_load((SPECS / name).read_text(encoding="utf-8"))
    spec = dpopt.load_spec({**document, "mechanism": "auto"})
    assert not spec.invariants and spec.privacy.definition == "pure"
    with counting() as counts:
        sol = dpopt.solve(spec)
    assert "generalized_gaussian" in {c.family for c in sol.candidates}
    assert counts == {"compile_query": 1, "derive_space": 1}


def test_verify_compiles_the_embedded_spec_itself_once():
    sol = dpopt.solve(SPECS / "table_2x2_margins_pure.yaml")
    with counting() as counts:
        result = dpopt.verify(sol.certificate.data)
    assert result.passed
    assert counts == {"compile_query": 1, "invariant_domain": 1, "derive_space": 1}
    # an independent re-check: its own problem, not the solver's, with the same sensitivity
    assert result.problem is not sol.problem
    assert result.problem.space.summary() == sol.problem.space.summary()


def test_problem_records_each_stage_and_is_frozen():
    problem = dpopt.compile(SPECS / "census_2020_states.yaml")
    assert [s.stage for s in problem.steps] == ["load", "query", "invariants", "sensitivity"]
    for step in problem.steps:  # each record names the function that ran
        module, _, function = step.function.rpartition(".")
        assert callable(getattr(importlib.import_module(module), function))
    # state totals are the one-way margin of one attribute: a(t) = 2 (Cho & Awan, Thm 16, p = 1)
    assert problem.space.semi_adjacent_parameter == 2
    assert "a = 2" in problem.steps[-1].result
    # 52 states x 2 voting-age cells, row-major (DESIGN.md: the first attribute varies slowest)
    assert len(problem.labels) == 104 and problem.labels[:2] == ("state=AL,voting_age=18_and_over",
                                                                 "state=AL,voting_age=under_18")
    assert problem.domain.shape == (52, 2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        problem.space = None
    assert problem.record()[0]["stage"] == "load"


def test_the_pipeline_hands_its_problem_down():
    sol = dpopt.solve(SPECS / "table_2x2_margins_gdp.yaml")
    assert sol.spec is sol.problem.spec and sol.space is sol.problem.space
    assert sol.mechanism_document()["labels"] == list(sol.problem.labels)


def test_derive_is_the_sensitivity_of_compile():
    spec = dpopt.load_spec(SPECS / "table_3x3_margins_gdp.yaml")
    assert dpopt.derive(spec).summary() == dpopt.compile(spec).space.summary()


def test_restating_a_problem_keeps_its_compilation_for_another_target_only():
    problem = dpopt.compile(SPECS / "table_2x2_margins_gdp.yaml")
    spec = problem.spec.model_copy(update={"privacy": dpopt.load_spec(SPECS / "table_2x2_margins_pure.yaml").privacy})
    restated = problem.restated(spec)
    assert restated.spec is spec and restated.space is problem.space and restated.query is problem.query
    assert [s.stage for s in restated.steps] == ["load", "query", "invariants", "sensitivity", "restate"]
    assert [s.stage for s in restated.restated(spec).steps] == [s.stage for s in restated.steps]
    other = problem.spec.model_copy(update={"invariants": []})
    with pytest.raises(ValueError, match="invariants"):
        problem.restated(other)


def test_solving_a_restated_problem_compiles_nothing_and_equals_solving_its_spec():
    problem = dpopt.compile(SPECS / "table_2x2_margins_gdp.yaml")
    spec = problem.spec.model_copy(update={"privacy": dpopt.load_spec(SPECS / "table_2x2_margins_pure.yaml").privacy})
    with counting() as counts:
        restated = dpopt.solve(problem.restated(spec))
    assert counts == {}
    direct = dpopt.solve(spec)
    assert restated.mechanism.family == direct.mechanism.family
    assert restated.mechanism.parameters == direct.mechanism.parameters
    assert restated.certificate["spec_sha256"] == direct.certificate["spec_sha256"]


def test_a_plan_compiles_each_query_once_for_every_budget_share():
    # two queries designed at the equal split, at half shares (Laplace: its exponent is not
    # known in advance) and at the optimal shares: three targets each, one compilation each
    plan = {"dpopt": 1, "name": "p", "data": {"attributes": {"a": ["x", "y", "z"], "b": ["u", "v"]}},
            "queries": [{"query": {"kind": "histogram", "attribute": "a"}},
                        {"query": {"kind": "histogram", "attribute": "b"}, "weight": 3}],
            "adjacency": "add_remove", "privacy": {"pure": {"epsilon": 1.0}}, "mechanism": "laplace"}
    with counting() as counts:
        sol = solve_plan(plan)
    assert [d.mechanism.family for d in sol.designs] == ["laplace", "laplace"]
    assert counts == {"compile_query": 2, "derive_space": 2}


def test_a_bad_spec_fails_in_compile_with_one_message():
    spec = dpopt.load_spec(SPECS / "table_2x2_margins_gdp.yaml").model_copy(
        update={"adjacency": dpopt.load_spec(SPECS / "count_add_remove.yaml").adjacency})
    with pytest.raises(dpopt.UnsupportedSpecError, match="replace_one"):
        dpopt.compile(spec)
