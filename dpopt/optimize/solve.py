"""The one way dpopt solves a convex program (cvxpy): solver order, accepted statuses, quiet.

Policy: the solvers are tried in the order given; the first whose status is accepted
(``optimal``, and ``optimal_inaccurate`` unless the program asks for exactness) is kept. A
solver that raises, or ends with another status, hands over to the next; when every solver
raised, :class:`~dpopt.errors.SolverError` names each failure, otherwise the last attempt
is returned and the program reports its own status. Whatever a solver prints (HiGHS prints
a banner on file descriptor 1 even when ``verbose=False``) goes to stderr, so stdout
carries only machine output. A solver's status is never proof: every program re-checks what
it certifies (dual bounds, exact feasibility, KKT conditions).

cvxpy is imported when a program is solved (``import dpopt`` does not load it).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata

from dpopt.core.output import stdout_to_stderr
from dpopt.errors import SolverError

ACCEPTED = ("optimal", "optimal_inaccurate")
"""Statuses a program accepts by default (its own checks then certify the solution)."""
_PACKAGES = {"HIGHS": "highspy"}
"""Python package of a solver whose name differs from its cvxpy name."""


@dataclass(frozen=True)
class ConvexSolution:
    """What a convex program's solve returned and with what.

    Attributes
    ----------
    status : str
        cvxpy's status (``"optimal"``, ``"optimal_inaccurate"``, ``"infeasible"``, ...).
    value : float or None
        The objective value at the solution.
    gap : float or None
        The duality gap the solver reports (SCS: ``info["gap"]``); None when its cvxpy
        interface reports none (Clarabel, HiGHS).
    solver : str
        The solver's cvxpy name (``"CLARABEL"``, ``"SCS"``, ``"HIGHS"``).
    version : str
        The solver package's version.
    cvxpy_version : str
    """

    status: str
    value: float | None
    gap: float | None
    solver: str
    version: str
    cvxpy_version: str

    @property
    def accurate(self) -> bool:
        return self.status == "optimal"


def solve_convex(
    problem,
    solvers: Sequence[str] = ("CLARABEL",),
    *,
    program: str,
    options: Mapping[str, Mapping] | None = None,
    accept: Sequence[str] = ACCEPTED,
) -> ConvexSolution:
    """Solve a ``cvxpy.Problem`` under the policy of the module docstring.

    Parameters
    ----------
    problem : cvxpy.Problem
    solvers : sequence of str
        cvxpy solver names, in the order tried.
    program : str
        The program's name in error messages.
    options : mapping, optional
        Keyword options per solver name (e.g. SCS tolerances).
    accept : sequence of str
        The statuses that stop the search.

    Raises
    ------
    SolverError
        When every solver raised.
    """
    import cvxpy as cp

    errors = []
    last = None
    for name in solvers:
        try:
            with warnings.catch_warnings(), stdout_to_stderr():  # an inaccurate solution is returned, then checked
                warnings.simplefilter("ignore", UserWarning)
                problem.solve(solver=name, verbose=False, **(options or {}).get(name, {}))
        except (cp.error.SolverError, ValueError) as exc:  # ValueError: cvxpy cannot unpack a failed solve
            errors.append(f"{name}: {exc}")
            continue
        last = ConvexSolution(problem.status, problem.value, _gap(problem), name,
                              metadata.version(_PACKAGES.get(name, name.lower())), cp.__version__)
        if problem.status in accept:
            return last
    if last is None:
        raise SolverError(f"{program}: " + "; ".join(errors))
    return last


def _gap(problem) -> float | None:
    stats = problem.solver_stats.extra_stats
    info = stats.get("info") if isinstance(stats, dict) else None
    return float(info["gap"]) if isinstance(info, dict) and "gap" in info else None
