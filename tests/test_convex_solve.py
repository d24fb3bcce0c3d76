"""The one convex-solver wrapper (dpopt.optimize.solve): policy, record, quiet stdout.

Expected values are closed forms: min c·w over the probability simplex is min_i c_i
(a linear function on a simplex attains its minimum at a vertex).
"""

from __future__ import annotations

from importlib import metadata

import numpy as np
import pytest

from dpopt.errors import SolverError
from dpopt.optimize.solve import ConvexSolution, solve_convex

cp = pytest.importorskip("cvxpy")

COSTS = np.array([3.0, 1.5, 2.0])


def _simplex_lp():
    w = cp.Variable(COSTS.size, nonneg=True)
    return cp.Problem(cp.Minimize(COSTS @ w), [cp.sum(w) == 1])


def test_first_solver_that_succeeds_is_recorded():
    solution = solve_convex(_simplex_lp(), ("CLARABEL",), program="lp")
    assert isinstance(solution, ConvexSolution)
    assert solution.status == "optimal" and solution.accurate
    assert solution.value == pytest.approx(COSTS.min(), abs=1e-7)  # interior-point tolerance
    assert (solution.solver, solution.version) == ("CLARABEL", metadata.version("clarabel"))
    assert solution.cvxpy_version == cp.__version__


def test_a_solver_that_raises_hands_over_to_the_next():
    solution = solve_convex(_simplex_lp(), ("NOT_A_SOLVER", "CLARABEL"), program="lp")
    assert solution.solver == "CLARABEL"


def test_every_solver_raising_is_one_error_naming_each():
    with pytest.raises(SolverError, match=r"^lp: NOT_A_SOLVER: .*; ALSO_NOT: "):
        solve_convex(_simplex_lp(), ("NOT_A_SOLVER", "ALSO_NOT"), program="lp")


def test_a_status_not_accepted_is_returned_for_the_program_to_report():
    x = cp.Variable(nonneg=True)
    solution = solve_convex(cp.Problem(cp.Minimize(x), [x <= -1]), program="infeasible")
    assert solution.status == "infeasible"


def test_solver_output_stays_off_stdout(capfd):
    # HiGHS prints its banner on file descriptor 1 even with verbose=False.
    solution = solve_convex(_simplex_lp(), ("HIGHS",), program="lp", accept=("optimal",))
    assert solution.value == pytest.approx(COSTS.min(), rel=1e-12)  # simplex: a vertex, exactly
    assert capfd.readouterr().out == ""


def test_scs_reports_its_duality_gap():
    solution = solve_convex(_simplex_lp(), ("SCS",), program="lp",
                            options={"SCS": {"eps_abs": 1e-9, "eps_rel": 1e-9}})
    assert solution.gap is not None and 0.0 <= solution.gap < 1e-6
