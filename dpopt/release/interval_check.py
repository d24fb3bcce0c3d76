r"""``dpopt verify DIR`` re-derives the interval ends of a release whose certificate names ``intervals: {method:
monte_carlo}`` (:mod:`dpopt.postprocess.monte_carlo`).

Those ends are not a function of the certificate alone: they are computed from the published (post-processed)
values by a simulation. The simulation is seeded (the certificate's ``utility.per_cell.intervals.monte_carlo``:
draws and seed), and reads only public inputs, so it is deterministic given the release document:

* the published values p: the ``postprocessed`` column of ``release.json``'s ``cells`` rows;
* the invariants' values t: exact in every published table (the post-processing meets C·p = t in integers), so
  t = C·p is recomputed from p;
* the mechanism: rebuilt from the certificate (which ``dpopt verify`` checks first).

The check recomputes :func:`~dpopt.postprocess.monte_carlo.monte_carlo_bounds` and compares every end with the
document's (whole numbers when the answers are counts: exactly; otherwise to 1e-9 relative). What it cannot
re-derive it says: published values rounded to fewer places than the post-processing produced (``output:
{decimals}`` on answers that are not whole numbers) lose the values the ends were computed from. The simulated
releases use numpy's generator and the post-processing's solver: another numpy release or solver may draw or
round differently, which this check would report as a difference (the figures are reproducible on one
installation).
"""

from __future__ import annotations

import numpy as np

from dpopt.certificate.model import Certificate
from dpopt.certificate.verify import rebuild_mechanism
from dpopt.postprocess import spec_structure
from dpopt.postprocess.marginals import uses_marginal_space
from dpopt.postprocess.monte_carlo import monte_carlo_bounds
from dpopt.problem import Problem
from dpopt.release.rounded import column_mode, round_number
from dpopt.solve import Solution

CLAIM = "monte_carlo intervals"
"""The name of the line :func:`dpopt.release.bind.verify_folder` prints."""


def monte_carlo_line(document: dict, certificate: Certificate, problem: Problem | None) -> tuple[bool, str] | None:
    """(holds, detail) of the module's check for one release folder, or None when the certificate's intervals are
    not Monte Carlo ones."""
    utility = certificate.data.get("utility")
    per_cell = utility.get("per_cell") if isinstance(utility, dict) else None
    block = per_cell.get("intervals") if isinstance(per_cell, dict) else None
    if not isinstance(block, dict) or "monte_carlo" not in block:
        return None
    if problem is None:
        return False, "not re-derived: the certificate's spec did not compile"
    cells = document.get("cells")
    rows = cells.get("rows") if isinstance(cells, dict) else None
    low_name, high_name = block["columns"]
    if not isinstance(rows, list) or not all(isinstance(r, dict) and {"postprocessed", low_name, high_name} <= set(r)
                                             for r in rows):
        return False, f"release.json's cells rows do not all hold postprocessed, {low_name} and {high_name}"
    published = np.array([r["postprocessed"] for r in rows], dtype=float)
    whole = bool(block["range"]["integer"])
    decimals = (certificate.data.get("output") or {}).get("decimals")
    if decimals is not None and not np.array_equal(published, np.round(published)):
        return True, ("not re-derived: the published values are rounded (output.decimals) and the intervals were "
                      "computed from the unrounded ones, which the release does not publish")
    try:
        solution = Solution(problem, rebuild_mechanism(certificate.data, problem.space), [], certificate)
        values = None
        if problem.spec.invariants and not uses_marginal_space(problem.query):
            values = spec_structure(problem).invariant_values(published)  # t = C·p (module docstring)
        low, high = monte_carlo_bounds(solution, published, values)
    except (ValueError, ArithmeticError) as exc:
        return False, f"not re-derived: {exc}"
    if decimals is not None:
        low = np.array([round_number(float(x), decimals, column_mode(low_name)) for x in low], dtype=float)
        high = np.array([round_number(float(x), decimals, column_mode(high_name)) for x in high], dtype=float)
    recorded = np.array([[r[low_name], r[high_name]] for r in rows], dtype=float)
    derived = np.column_stack([low, high])
    same = np.array_equal(recorded, derived) if whole else np.allclose(recorded, derived, rtol=1e-9, atol=0.0)
    draws, seed = block["monte_carlo"]["draws"], block["monte_carlo"]["seed"]
    if same:
        return True, f"{len(rows)} cells' interval ends re-derived ({draws} simulated releases, seed {seed})"
    bad = int(np.sum(np.any(recorded != derived if whole else ~np.isclose(recorded, derived, rtol=1e-9), axis=1)))
    return False, f"{bad} of {len(rows)} cells' interval ends differ from the re-derived ones ({draws} draws, seed {seed})"


__all__ = ["CLAIM", "monte_carlo_line"]
