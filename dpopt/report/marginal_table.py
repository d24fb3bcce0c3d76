"""The report's per-marginal error table of a ``marginal_gaussian`` certificate.

Rebuilt from the certificate alone (the recorded workload and coefficients, the spec's target,
the sensitivity's exact l2²) by :func:`dpopt.mechanisms.marginal_errors.per_marginal_errors`:
for each workload table, the expected squared error of the certified design against direct
measurement of every table with the same budget followed by least squares, and against that
table measured alone. With table goals (``utility.tables``, ``utility.objective``; both marginal families),
:func:`table_goal_block` lists each table's error against its weight and target.
"""

from __future__ import annotations

import math
from fractions import Fraction

from dpopt.domain.marginal_algebra import MarginalAlgebra, MarginalWorkload
from dpopt.mechanisms.marginal_errors import per_marginal_errors
from dpopt.mechanisms.marginal_gaussian import positive_by_set, target_mu, variance_coefficients
from dpopt.spec.load import load_spec

MAX_MARGINAL_ROWS = 60
"""Tables listed in the report (the rest are summarised)."""


def marginal_error_rows(d: dict) -> list[dict] | None:
    """The rows of :func:`~dpopt.mechanisms.marginal_errors.per_marginal_errors` for a certificate of the
    ``marginal_gaussian`` family with two tables or more, else None."""
    m = d.get("mechanism", {})
    if m.get("family") != "marginal_gaussian" or "spec" not in d:
        return None
    p = m["parameters"]
    names = tuple(p["attributes"])
    workload = MarginalWorkload(MarginalAlgebra(tuple(int(n) for n in p["levels"])),
                                tuple(tuple(names.index(a) for a in block) for block in p["blocks"]))
    if len(workload.blocks) < 2:
        return None
    coefficients = variance_coefficients(workload, positive_by_set(names, p["coefficients"], "component", "a"),
                                         p.get("sampler", "floating_point"), p.get("lattice_privacy", "zcdp"))
    l2 = math.sqrt(float(Fraction(d["sensitivity"]["l2_squared_exact"])))
    mu = target_mu(load_spec(d["spec"]).privacy)
    return per_marginal_errors(workload, coefficients, mu, l2, p["adjacency"] != "add_remove",
                               int(p["multiplier"]), names)


def marginal_error_block(d: dict) -> list:
    """The report's blocks: an explanation and the table (empty for other certificates)."""
    rows = marginal_error_rows(d)
    if rows is None:
        return []
    header = ["table", "cells", "certified E(err²) per cell", "per table", "direct + least squares per cell",
              "per table", "ratio (certified / direct)", "this table alone, per table"]
    body = [[r["table"], r["cells"], f"{r['certified_cell']:.4g}", f"{r['certified_table']:.4g}",
             f"{r['direct_ls_cell']:.4g}", f"{r['direct_ls_table']:.4g}",
             "—" if r["ratio"] is None else f"{r['ratio']:.3f}", f"{r['alone_table']:.4g}"]
            for r in rows[:MAX_MARGINAL_ROWS]]
    total = sum(r["certified_table"] for r in rows)
    direct = sum(r["direct_ls_table"] for r in rows)
    out: list = [
        "Expected squared error of each released table, in closed form from the certified design (the ANOVA "
        "algebra). **Direct + least squares**: every table measured with independent Gaussian noise at the same "
        "budget (σ = Δ₂/μ), then made consistent by least squares. **Alone**: the table measured by itself with the "
        "whole budget (what it would cost were it the only table published). "
        f"All tables: certified {total:.6g} against {direct:.6g} direct + least squares "
        f"({total / direct:.3f}×).",
        [header, *body],
    ]
    if len(rows) > MAX_MARGINAL_ROWS:
        out.append(f"The other {len(rows) - MAX_MARGINAL_ROWS} tables: `dpopt.mechanisms.marginal_errors`.")
    return out


def table_goal_block(d: dict) -> list:
    """The report's blocks for the recorded table goals (``design.tables``, re-derived by the ``utility.tables``
    claim): each table's error per table and per cell, its weight, its target and the ratio; the objective and
    its lower bound (empty without goals)."""
    record = d.get("mechanism", {}).get("parameters", {}).get("design", {}).get("tables")
    if not isinstance(record, dict):
        return []
    levels = dict(zip(d["mechanism"]["parameters"]["attributes"], d["mechanism"]["parameters"]["levels"]))
    header = ["table", "cells", "E(err²) per table", "per cell", "weight", "target", "error / target"]
    body = []
    for r in record["tables"][:MAX_MARGINAL_ROWS]:
        cells = math.prod(int(levels[a]) for a in r["table"])
        body.append([" × ".join(r["table"]), cells, f"{r['error']:.4g}", f"{r['error'] / cells:.4g}",
                     f"{r['weight']:g}", "—" if r["target"] is None else f"{r['target']:.4g}",
                     "—" if r["target"] is None else f"{r['error'] / r['target']:.3f}"])
    what = {"total": "the weighted total Σ w_S E‖noise_S‖²", "max": "the largest weighted table error"}
    bound = record.get("lower_bound")
    return [
        f"The design minimises {what[record['objective']]}"
        + (" subject to the tables' targets" if any(r["target"] is not None for r in record["tables"]) else "")
        + f": {record['value']:.6g}"
        + (f" (no design meeting the same privacy target does better than {bound:.6g})" if bound is not None else "")
        + ". `dpopt verify` recomputes every table's error from the released noise's coefficients (claim "
          "`utility.tables`).",
        [header, *body],
    ]
