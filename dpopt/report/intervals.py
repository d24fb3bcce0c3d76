"""The report's intervals for true values: the method the certificate names, and its coverage in simulation.

A design's report has no data: it measures the intervals on a **synthetic sparse table** (a few occupied cells,
most cells 0; summing to ``data.n`` when the number of records is public), as a user would meet them after
post-processing. :func:`simulate` draws :func:`releases` independent releases through the mechanism, each
post-processed as the spec says (:func:`dpopt.report.coverage.table_coverage`), and keeps one release to draw
(intervals against the truth). :func:`interval_blocks` is the section: the method, the per-cell table (synthetic
truth, one release's published value and interval, the coverage of each cell over the releases) and the
overall coverage against the naive interval (published value ± margin of error).
"""

from __future__ import annotations

import numpy as np

from dpopt.postprocess import spec_structure
from dpopt.postprocess.marginals import uses_marginal_space
from dpopt.report.coverage import table_coverage
from dpopt.solve import Solution

SEED = 20261206
"""Seed of the synthetic table and of the simulated releases (a simulation, not a release)."""
MAX_CELLS = 200
"""Tables with more cells are not simulated in a report (each release is post-processed)."""
TABLES = ("count", "histogram", "contingency_table", "marginals")
"""Queries whose synthetic truth is a histogram of counts (a linear query's answers are not simulated)."""
SHOWN = 24
"""Rows of the per-cell table shown (the occupied cells first)."""


def releases(cells: int) -> int:
    """Releases simulated: 100 for up to 50 cells, 30 above (each is post-processed: about 10 ms for 20 cells)."""
    return 100 if cells <= 50 else 30


def synthetic_table(cells: int, n: int | None, rng: np.random.Generator) -> np.ndarray:
    """A sparse table: ⌈cells/6⌉ occupied cells, the others 0; ``n`` records when public (else 10 per
    occupied cell on average), spread by a multinomial draw over the occupied cells."""
    occupied = rng.choice(cells, max(1, -(-cells // 6)), replace=False)
    total = n if n is not None else 10 * len(occupied)
    table = np.zeros(cells)
    table[occupied] = rng.multinomial(total, np.full(len(occupied), 1 / len(occupied)))
    return table


def simulate(solution: Solution) -> dict | None:
    """Coverage of the certificate's intervals on a synthetic sparse table, or None where not simulated (no
    interval, a query that is not a table of counts (:data:`TABLES`), a table larger than :data:`MAX_CELLS`, marginals
    post-processed in marginal space, Monte Carlo intervals, which simulate releases themselves)."""
    block = solution.certificate["utility"]["per_cell"].get("intervals")
    if not block or block["half_widths"] is None or block["range"]["lower"] != 0.0 or "monte_carlo" in block:
        return None
    if solution.spec.query.kind not in TABLES or uses_marginal_space(solution.problem.query):
        return None
    structure = spec_structure(solution.problem)
    if structure.cells > MAX_CELLS or structure.queries.shape[0] > MAX_CELLS:
        return None
    rng = np.random.default_rng(SEED)
    table = synthetic_table(structure.cells, solution.spec.data.n, rng)
    count = releases(structure.cells)
    result = table_coverage(solution, table, count, rng)
    return {"result": result, "labels": list(solution.problem.labels), "releases": count}


def interval_blocks(per_cell: dict, simulated: dict | None, figure=None) -> list:
    """The section's blocks: the method paragraph, then (when simulated) a table and the figure."""
    block = per_cell.get("intervals")
    if not block:
        return []
    out: list = [
        f"Beside every released value, the release gives an interval for the true value (columns "
        f"`{block['columns'][0]}`, `{block['columns'][1]}`) at level {block['level']:g}"
        + (" (simultaneous over the table)" if block["simultaneous"] else " (per cell)")
        + f". Method: {block['method']}. Known without the data: {block['range']['reason']}. Budget: "
        f"{block['budget']}. The published (post-processed) value may lie outside its interval: the interval is for "
        "the truth."]
    if simulated is None and "monte_carlo" in block:
        return out + ["Coverage was not simulated in this report: each simulated release would itself simulate "
                      f"{block['monte_carlo']['draws']} post-processed releases. The Monte Carlo interval's coverage "
                      "is approximate and differs from cell to cell: `benchmarks/bench_intervals.py` measures it per "
                      "cell on a sparse table, where the plug-in is furthest from the truth (there the worst cells are "
                      "the large ones whose downward bias the plug-in underestimates, and small counts published as "
                      "0); the default noise_stage interval's coverage is proven for every cell."]
    if simulated is None:
        return out + ["Coverage was not simulated in this report (a table of more than "
                      f"{MAX_CELLS} cells, a query that is not a table of counts, or marginals post-processed in "
                      "marginal space: `benchmarks/bench_intervals.py` measures those)."]
    result, labels = simulated["result"], simulated["labels"]
    s = result.summary()
    out.append(
        f"Coverage measured in simulation on a synthetic sparse table ({simulated['releases']} independent "
        f"releases, each post-processed as the spec says; seed {SEED}): {s['coverage']:.3f} ± {s['coverage_se']:.3f} "
        f"of {s['cell_releases']} cell-releases covered, worst cell {s['worst_cell_coverage']:.3f}; mean width "
        f"{s['mean_width']:.3g} against {s['noise_stage_width']:.3g} for the noise-stage interval. The naive interval "
        f"(published value ± margin of error) covers {s['naive_coverage']:.3f}, worst cell "
        f"{s['naive_worst_cell_coverage']:.3f}.")
    truth = result.truth[0]
    order = sorted(range(len(truth)), key=lambda i: (truth[i] == 0, i))[:SHOWN]
    per = result.per_cell[0]
    rows = [["cell", "true value (synthetic)", "published (release 1)", "interval (release 1)",
             f"coverage over {simulated['releases']}", "naive coverage"]]
    naive = result.naive_covered.mean(axis=0)[0]
    for i in order:
        rows.append([labels[i], f"{truth[i]:g}", f"{result.published[0, 0, i]:g}",
                     f"[{result.low[0, 0, i]:g}, {result.high[0, 0, i]:g}]", f"{per[i]:.3f}", f"{naive[i]:.3f}"])
    out.append(rows)
    if figure is not None:
        out.append(figure)
    return out
