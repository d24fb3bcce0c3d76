"""``auto`` never ends on one family: a family that raises is a row with its reason (issue 31).

The reproducers of the issue (a count under ``pure: {epsilon: 100000}``, ``gdp: {mu: 1e300}``,
``gdp: {mu: 1e-300}``) ended the whole design with a ZeroDivisionError or OverflowError
traceback; the crashes forced here with monkeypatch stand for any such failure.
"""

from __future__ import annotations

import pytest

import dpopt
import importlib
from dpopt.cli import main
from dpopt.errors import CalibrationError, SpecError
from dpopt.mechanisms import registry
from dpopt.privacy.pdp import gg_pdp_bound_disjoint_mp

solve_module = importlib.import_module("dpopt.solve")  # the module (dpopt.solve is also the function)

COUNT = {"dpopt": 1, "name": "count", "data": {"attributes": {"a": ["x", "y"]}}, "query": {"kind": "count"},
         "adjacency": "add_remove", "privacy": {"gdp": {"mu": 1.0}}}
BOTH = dict(COUNT, mechanism=["gaussian", "laplace"])  # a list: every family designed (auto may prune Laplace)


def _raise(exc: BaseException):
    def fail(cls, problem):
        raise exc

    return classmethod(fail)


def _rows(solution) -> dict[str, dict]:
    return {c.family: c.to_dict() for c in solution.candidates}


@pytest.mark.parametrize("exc", [ZeroDivisionError("float division by zero"), OverflowError("math range error"),
                                 FloatingPointError("overflow"), ValueError("f(a) and f(b) must have different signs")])
def test_a_family_whose_design_raises_is_a_row_and_the_others_go_on(monkeypatch, exc):
    monkeypatch.setattr(registry()["laplace"], "design", _raise(exc))
    solution = dpopt.solve(BOTH)
    assert solution.mechanism.family == "gaussian"  # μ-GDP on a count: the Gaussian, with or without Laplace
    reason = _rows(solution)["laplace"]["reason"]
    assert type(exc).__name__ in reason and str(exc) in reason


def test_a_family_whose_supports_raises_is_a_row(monkeypatch):
    monkeypatch.setattr(registry()["james_stein"], "supports", _raise(ZeroDivisionError("Fraction(1, 0)")))
    solution = dpopt.solve(COUNT)
    assert "ZeroDivisionError: Fraction(1, 0)" in _rows(solution)["james_stein"]["reason"]


@pytest.mark.parametrize("exc", [MemoryError(), KeyboardInterrupt()])
def test_memory_error_and_interrupt_end_the_design(monkeypatch, exc):
    monkeypatch.setattr(registry()["laplace"], "design", _raise(exc))
    with pytest.raises(type(exc)):
        dpopt.solve(BOTH)


def test_an_explicit_family_that_crashes_is_one_line_exit_2(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(registry()["laplace"], "design", _raise(ZeroDivisionError("float division by zero")))
    spec = tmp_path / "spec.json"
    spec.write_text('{"dpopt": 1, "name": "count", "data": {"attributes": {"a": ["x", "y"]}}, '
                    '"query": {"kind": "count"}, "adjacency": "add_remove", "privacy": {"pure": {"epsilon": 1}}, '
                    '"mechanism": "laplace"}')
    assert main(["solve", str(spec)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "laplace: failed on this spec (ZeroDivisionError: float division by zero)" in err


def test_a_candidate_whose_certificate_cannot_be_built_gives_way_to_the_next(monkeypatch):
    certify = solve_module.certify

    def certify_but_gaussian(problem, mechanism, utility, candidates):
        if mechanism.family == "gaussian":
            raise OverflowError("integer division result too large for a float")
        return certify(problem, mechanism, utility, candidates)

    monkeypatch.setattr(solve_module, "certify", certify_but_gaussian)
    # under ρ-zCDP the exact lattice Gaussian costs nothing (σ_ℤ² = σ² = 1, a dyadic), so auto tries it first;
    # under μ-GDP its certified slope costs 9% at σ = 1 and gaussian_optimal comes first
    solution = dpopt.solve(dict(COUNT, privacy={"zcdp": {"rho": 0.5}}))
    assert solution.mechanism.family != "gaussian" and solution.certificate.passed
    assert "its certificate could not be built" in _rows(solution)["gaussian"]["reason"]
    families = [row["family"] for row in solution.certificate["candidates"]]
    assert "gaussian" in families


def test_issue_reproducer_pure_epsilon_100000_on_a_count_is_designed():
    solution = dpopt.solve(dict(COUNT, privacy={"pure": {"epsilon": 100000}}))
    assert solution.certificate.passed
    assert all(c.feasible or c.reason for c in solution.candidates)


@pytest.mark.parametrize("mu", [1e300, 1e-300])
def test_issue_reproducers_extreme_mu_end_in_one_spec_error(mu):
    """Privacy parameters outside [1e-100, 1e100] are refused when the spec is read, naming the field (they
    used to reach every family's calibration and end there)."""
    with pytest.raises(SpecError, match=r"privacy\.gdp\.mu"):
        dpopt.solve(dict(COUNT, privacy={"gdp": {"mu": mu}}))


def test_pdp_at_an_extreme_epsilon_ends_instead_of_hanging():
    """ε = δ = 1e-300: the generalized Gaussian's scale is ~5e301, so Δ/b lies below 60-digit resolution
    next to u and the bracket of Corollary 8 doubled forever; it now gives up after 4096 doublings."""
    with pytest.raises(SpecError, match=r"privacy\.pdp\.epsilon"):  # refused when the spec is read
        dpopt.solve(dict(COUNT, privacy={"pdp": {"epsilon": 1e-300, "delta": 1e-300}}))
    with pytest.raises(CalibrationError, match="out of the range of 60-digit arithmetic"):
        gg_pdp_bound_disjoint_mp(5.241893992103225e301, 1e-300, 2, 1.0)
