r"""Error before and after post-processing, by Monte Carlo over releases.

For a true table h (per level of a hierarchy), draw R releases through the mechanism's
public ``release``, post-process each, and report per level

* RMSE = √(mean over releases and cells of (ĥ − h)²), raw and post-processed;
* bias = mean of (ĥ − h), overall and on the **small** cells (h ≤ :data:`SMALL_COUNT`) and the
  others: non-negativity pushes small counts up and, the sums being fixed, larger ones down
  (the known bias of TopDown for small counts, Abowd et al. 2022, §9) — shown, not averaged away.

Monte Carlo standard errors: each figure is a mean over R independent releases, so its
standard error is the sample s.d. over releases / √R (reported for the RMSE² and bias).

When the truth is confidential (``dpopt release``) the simulation is run at the *published*
table (a parametric bootstrap: the post-processed release plays the truth), which is itself
post-processing and publishes nothing new about the data.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from dpopt.postprocess.hierarchy import topdown
from dpopt.postprocess.structure import Structure
from dpopt.postprocess.table import consistent_table
from dpopt.spec.models import Postprocess

SMALL_COUNT = 2
"""Cells whose true count is at most this are 'small' in the bias split."""


def release_units(mechanism, tables: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One release of every unit's table through ``mechanism.release`` (the one release path)."""
    return np.vstack([mechanism.release(row, rng) for row in np.asarray(tables, dtype=float)])


def _row(name: str, truth: np.ndarray, raw: list[np.ndarray], post: list[np.ndarray]) -> dict:
    t = np.asarray(truth, dtype=float)
    r = np.stack(raw) - t
    p = np.stack(post) - t
    small = t <= SMALL_COUNT

    def summary(err: np.ndarray) -> dict:
        per_release_sq = (err**2).reshape(err.shape[0], -1).mean(axis=1)
        per_release_bias = err.reshape(err.shape[0], -1).mean(axis=1)
        n = err.shape[0]
        se = (lambda v: float(v.std(ddof=1) / math.sqrt(n)) if n > 1 else float("nan"))
        return {
            "rmse": float(math.sqrt(per_release_sq.mean())),
            "mse_se": se(per_release_sq),
            "bias": float(per_release_bias.mean()),
            "bias_se": se(per_release_bias),
            "bias_small": float(err[:, small].mean()) if small.any() else None,
            "bias_other": float(err[:, ~small].mean()) if (~small).any() else None,
        }

    return {
        "level": name,
        "cells": int(t.size),
        "small_cells": int(small.sum()),
        "raw": summary(r),
        "postprocessed": summary(p),
    }


def hierarchy_errors(
    truth: list[np.ndarray],
    parents: list[np.ndarray],
    mechanisms: list,
    structure: Structure,
    names: list[str],
    draws: int,
    rng: np.random.Generator,
    nation_values=None,
    covariances=None,
    options: Postprocess = Postprocess(),
    unit_totals: list[np.ndarray] | None = None,
) -> list[dict]:
    """Per-level bias and RMSE of the raw and the TopDown tables over ``draws`` releases."""
    raw = [[] for _ in truth]
    post = [[] for _ in truth]
    for _ in range(draws):
        noisy = [release_units(mech, level, rng) for mech, level in zip(mechanisms, truth)]
        result = topdown(noisy, parents, structure, nation_values, covariances, options=options,
                         unit_totals=unit_totals)
        for level, (y, out) in enumerate(zip(noisy, result.tables)):
            raw[level].append(y)
            post[level].append(out)
    return [_row(name, t, r, p) for name, t, r, p in zip(names, truth, raw, post)]


def table_errors(
    truth: np.ndarray,
    mechanism,
    structure: Structure,
    values,
    draws: int,
    rng: np.random.Generator,
    covariance=None,
    options: Postprocess = Postprocess(),
) -> list[dict]:
    """Bias and RMSE of the raw release and the post-processed answers of one table."""
    truth = np.asarray(truth, dtype=float)
    answers = structure.queries @ truth
    raw, post = [], []
    for _ in range(draws):
        y = mechanism.release(answers, rng)
        raw.append(y)
        post.append(consistent_table(y, structure, values, covariance, options=options).answers)
    return [_row("table", answers, raw, post)]


def error_rows(errors: list[dict]) -> tuple[list[str], list[list[str]]]:
    """A table for the report: header and one row per level (see module for the columns)."""
    header = ["level", "cells", "small cells", "RMSE raw", "RMSE post", "bias raw", "bias post",
              f"bias post (≤{SMALL_COUNT})", f"bias post (>{SMALL_COUNT})"]

    def fmt(x) -> str:
        return "—" if x is None else f"{x:.3g}"

    rows = [
        [e["level"], str(e["cells"]), str(e["small_cells"]), fmt(e["raw"]["rmse"]), fmt(e["postprocessed"]["rmse"]),
         fmt(e["raw"]["bias"]), fmt(e["postprocessed"]["bias"]), fmt(e["postprocessed"]["bias_small"]),
         fmt(e["postprocessed"]["bias_other"])]
        for e in errors
    ]
    return header, rows


def _words(values: dict) -> str:
    """``{"zcdp": {"rho": 0.29}}`` or ``{"sigma": 1.3}`` as ``zcdp rho = 0.29``, ``sigma = 1.3`` (6 digits)."""
    def one(v) -> str:
        return f"{v:.6g}" if isinstance(v, float) else _words(v) if isinstance(v, dict) else str(v)

    return ", ".join(f"{k} {one(v)}" if isinstance(v, dict) else f"{k} = {one(v)}" for k, v in values.items())


def report_blocks(certificate: dict) -> list:
    """The report's post-processing section as blocks (paragraphs, and a table as [header, *rows]).

    Empty when the certificate has no ``postprocess`` block; the report renders it under its
    own heading.
    """
    block = certificate.get("postprocess")
    if not block:
        return []
    method = block["method"]
    steps = method.get("steps") or method.get("levels") or []
    theorem = method["preserves_guarantee"]
    out: list = [f"The published table is post-processed ({'; '.join(steps)}); the guarantee is "
                 f"{block['guarantee']}. {theorem[0].upper()}{theorem[1:]}"]
    hierarchy = certificate.get("hierarchy")
    if hierarchy:
        whole = hierarchy["composition"]
        budget = ", ".join(f"{k} = {v}" for k, v in whole.items() if k not in ("definition", "method"))
        levels = [["level", "units", "share of the budget", "privacy", "mechanism", "certificate"]] + [
            [lv["level"], lv["units"], f"{float(Fraction(lv['share'])):.4f}", _words(lv["privacy"]),
             f"{lv['mechanism']['family']} ({_words(lv['mechanism']['parameters'])})", lv["certificate"]]
            for lv in hierarchy["levels"]
        ]
        out += [f"Geographic hierarchy ({hierarchy['shares']}); {hierarchy['adjacency']}.", levels,
                f"The whole release: {whole['definition']} with {budget} ({whole['method']}); its ε per δ and "
                "every level: `certificate.json` of the release (`dpopt report certificate.json`)."]
    errors = block.get("error")
    if errors:
        header, rows = error_rows(errors["levels"])
        out += [f"Error before and after post-processing ({errors['method']}):", [header, *rows]]
    return out
