r"""``dpopt release`` of a spec with private keys and quantiles: bounding, selection, noise, in DuckDB.

For each release, in the order of the spec:

1. numbers are clamped to their bounds and counted, the records validated, and each person's rows cut
   at random to the privacy unit's bounds (:func:`dpopt.release.bounding.bound_contributions`) with the
   release's own cells: the key's text (in hexadecimal, so that the hashed text stays unambiguous) for a
   count, the level of ``by`` for a quantile (one cell without ``by``), and its own CSPRNG stream
   (:data:`BOUNDING`, i);
2. a **count** counts rows and distinct persons per key of the bounded rows, then releases every
   declared key (noisy; zero rows when the data have none) and each other key only when partition
   selection keeps it (optimal: with probability π of its users; thresholds: when its noisy count
   reaches τ, that noisy count being released); keys are handled in sorted order, and the draws and
   comparisons over whole blocks of padded slots (:mod:`dpopt.selection.timing`: their work does not
   reveal the number of keys);
3. a **quantile** draws each q of each group (levels in spec order) by the exponential mechanism;
4. a **mean** per private key sums (x − m) rounded to the lattice 2^{−k}ℤ (integers clamped to ±H) and counts
   rows per key of the bounded rows, for the keys its count release released (in that release's order, zero
   rows when absent) and no other, adds discrete Laplace noise to the integer sums and to the counts, and
   post-processes each key's mean clip(m + S̃/ñ, a, b) (null when ñ ≤ 0; :func:`dpopt.release.bounding.pair_mean`).

The document lists the released keys only: how many keys the data hold is never released (neither a
count nor the dropped keys). The bounding reports (rows and persons truncated, values clamped) are
computed without noise and are not covered by the certificate (as for every person-level release): they are
returned for the operator (:mod:`dpopt.release.operator`), and the document carries only each release's
privacy unit and method (:func:`dpopt.release.bounding.published_bounding`).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from dpopt.certificate.model import Certificate
from dpopt.domain.queries import NumericQuery
from dpopt.errors import DataError
from dpopt.noise.bernoulli import bernoulli_rational
from dpopt.noise.discrete_gaussian import sample_discrete_gaussian
from dpopt.noise.discrete_laplace import sample_discrete_laplace
from dpopt.privacy import quantile as qm
from dpopt.release.bounding import bound_contributions, pair_mean, published_bounding
from dpopt.release.operator import operator_report
from dpopt.release.rounded import rounded_document
from dpopt.release.sources import (
    DataSource,
    _run,
    connect,
    first_row_where,
    level_code_sql,
    open_source,
    quote_identifier,
    require_columns,
)
from dpopt.rng import RandomSource
from dpopt.selection.cells import selection_cells
from dpopt.selection.design import certify
from dpopt.selection.timing import padded_slots
from dpopt.spec.models import PrivacyUnit
from dpopt.spec.selection import (
    CountRelease,
    MeanRelease,
    PrivateKeys,
    QuantileRelease,
    SelectionSpec,
    load_selection_spec,
)

BOUNDING = 1 << 31
"""First element of the CSPRNG path of release i's bounding secret, (BOUNDING, i)."""
DRAWS = 1 << 30
"""First element of the CSPRNG paths of release i's draws: (DRAWS, i, 0) decisions, (DRAWS, i, 1) noise."""

KEYS_NOTE = ("keys not declared in the spec are released only when partition selection keeps them; how many keys "
             "the data hold is not released")


@dataclass(frozen=True)
class _Domain:
    attributes: dict
    privacy_unit: PrivacyUnit


@dataclass(frozen=True)
class _Records:
    """What :func:`~dpopt.release.bounding.bound_contributions` reads of a spec: the listed and numeric
    attributes (private-key columns are checked here) and the privacy unit."""

    data: _Domain


def _records(spec: SelectionSpec) -> _Records:
    listed = {n: d for n, d in spec.data.attributes.items() if not isinstance(d, PrivateKeys)}
    return _Records(_Domain(listed, spec.data.privacy_unit))


def _discrete_laplace(rng: np.random.Generator, scale: str, size: int) -> np.ndarray:
    b = Fraction(scale)
    return sample_discrete_laplace(rng, b.numerator, b.denominator, size)


def _key(con, source: DataSource, column: str) -> str:
    """The SQL of a private-key column's text, after checking that no record lacks its key."""
    by = quote_identifier(column)
    require_columns(con, source, [column])
    missing = first_row_where(con, source, f"{by} IS NULL OR trim(CAST({by} AS VARCHAR)) = ''", column)
    if missing is not None:
        raise DataError(f"{source} {source.where(missing[0])}, column {column}: missing key")
    return f"CAST({by} AS VARCHAR)"


def _count(con, source: DataSource, spec: SelectionSpec, release: CountRelease, block: dict, i: int,
           randomness: RandomSource) -> tuple[dict, dict]:
    key = _key(con, source, release.by)
    bounded, report = bound_contributions(con, source, _records(spec), None, randomness, cell=f"hex({key})",
                                          stream=(BOUNDING, i))  # hex: the hashed cell text holds no ':'
    pid = quote_identifier(spec.data.privacy_unit.id)
    found = {k: (int(rows), int(users)) for k, rows, users in _run(
        con, source, f"SELECT {key}, count(*), count(DISTINCT {pid}) FROM {bounded.sql} GROUP BY ALL").fetchall()}
    declared = block["declared"]
    public = set(declared)
    candidates = sorted(k for k in found if k not in public)
    decide, noise = randomness.stream(DRAWS, i, 0), randomness.stream(DRAWS, i, 1)
    sel, d, n = block["partition_selection"], len(declared), len(candidates)
    slots = padded_slots(n)  # the draw stage's work: whole blocks of slots, whatever n (dpopt.selection.timing)
    true = np.zeros(d + slots, dtype=np.int64)
    true[:d] = [found.get(k, (0, 0))[0] for k in declared]
    true[d:d + n] = [found[k][0] for k in candidates]
    if release.selection == "optimal":
        users = np.zeros(slots, dtype=np.int64)
        users[:n] = [found[k][1] for k in candidates]
        pis = sel["keep_probabilities"]  # doubles: exact dyadic rationals, kept with exactly that probability
        passed = bernoulli_rational(decide, pis, np.minimum(users, len(pis) - 1))
        noisy = true + _discrete_laplace(noise, block["noise"]["scale"], d + slots)
    elif release.selection == "laplace_threshold":
        noisy = true + _discrete_laplace(noise, block["noise"]["scale"], d + slots)
        passed = noisy[d:] >= sel["threshold"]
    else:
        sigma2 = Fraction(block["noise"]["sigma2"])
        noisy = true + sample_discrete_gaussian(noise, sigma2.numerator, sigma2.denominator, d + slots)
        passed = noisy[d:] >= sel["threshold"]
    chosen = np.flatnonzero(passed)
    chosen = chosen[chosen < n]  # a padded slot is never a key
    kept = [candidates[j] for j in chosen]
    keys, values = declared + kept, np.concatenate([noisy[:d], noisy[d + chosen]])
    out = {"name": release.name, "kind": "count", "by": release.by, "selection": release.selection,
           "values": {k: int(v) for k, v in zip(keys, values)},
           "declared": declared, "selected": kept, "note": KEYS_NOTE}
    return out, report


def _mean(con, source: DataSource, spec: SelectionSpec, release: MeanRelease, block: dict, i: int,
          keys: list[str], randomness: RandomSource) -> tuple[dict, dict]:
    """The noisy (centred sum, count) and the mean of each key in ``keys`` (the count release's), and the bounding
    report."""
    key = _key(con, source, release.by)
    bounded, report = bound_contributions(con, source, _records(spec), None, randomness, cell=f"hex({key})",
                                          stream=(BOUNDING, i))
    low, high = block["bounds"]
    query = NumericQuery("mean", release.attribute, low, high, None)
    x = f"CAST(trim(CAST({quote_identifier(release.attribute)} AS VARCHAR)) AS DOUBLE)"
    step, top = Fraction(block["sensitivity"]["lattice_step"]), int(block["sensitivity"]["lattice_half_width"])
    # each centred value on the lattice, in integers clamped to ±H (a deterministic map of the row: its doubles
    # need not be exact, the bound |u| ≤ H is), and summed exactly (BIGINT/HUGEINT)
    on_lattice = (f"least(greatest(CAST(round(({x} - {query.midpoint!r}) * {float(1 / step)!r}) AS BIGINT), "
                  f"{-top}), {top})")
    wanted = set(keys)
    found = {k: (int(s), int(n)) for k, s, n in _run(
        con, source, f"SELECT {key}, sum({on_lattice}), count(*) FROM {bounded.sql} GROUP BY ALL"
    ).fetchall() if k in wanted}
    lattice_sums = [found.get(k, (0, 0))[0] + int(y) for k, y in zip(keys, _discrete_laplace(
        randomness.stream(DRAWS, i, 0), block["noise"]["centred_sum"]["scale"], len(keys)))]
    sums = np.array([float(u * step) for u in lattice_sums])  # S̃ = step·(Σu + Y): post-processing of integers
    counts = np.array([found.get(k, (0, 0))[1] for k in keys]) + _discrete_laplace(
        randomness.stream(DRAWS, i, 1), block["noise"]["count"]["scale"], len(keys))
    means = {k: pair_mean(query, np.array([s, n])) for k, s, n in zip(keys, sums, counts)}
    out = {"name": release.name, "kind": "mean", "attribute": release.attribute, "by": release.by,
           "keys_from": block["keys_from"], "values": {k: m["value"] for k, m in means.items()},
           "pairs": {k: {"centered_sum": float(s), "count": int(n)} for k, s, n in zip(keys, sums, counts)},
           "method": next(iter(means.values()))["method"] if means else None, "note": KEYS_NOTE}
    return out, report


def quantile_values(con, source: DataSource, spec: SelectionSpec, release: QuantileRelease, i: int,
                    randomness: RandomSource) -> tuple[dict[str, np.ndarray], dict]:
    """The bounded values of a quantile release per group (``all`` without ``by``), and the bounding report."""
    levels = None if release.by is None else list(spec.data.attributes[release.by])
    cell = "''" if levels is None else f"CAST({level_code_sql(release.by, levels)} AS VARCHAR)"
    bounded, report = bound_contributions(con, source, _records(spec), None, randomness, cell=cell,
                                          stream=(BOUNDING, i))
    x = f"CAST(trim(CAST({quote_identifier(release.attribute)} AS VARCHAR)) AS DOUBLE)"
    group = "'all'" if levels is None else f"CAST({quote_identifier(release.by)} AS VARCHAR)"
    rows = _run(con, source, f"SELECT {group}, {x} FROM {bounded.sql}").fetchall()
    values = {g: [] for g in (levels or ["all"])}
    for g, v in rows:
        values[g].append(v)
    return {g: np.array(v, dtype=float) for g, v in values.items()}, report


def draw_quantiles(values: dict[str, np.ndarray], block: dict, rng: np.random.Generator) -> dict[str, dict[str, float]]:
    """Each q of each group drawn exactly by the exponential mechanism of the block (its integer scores and rational
    scale λ; groups in order, then q's)."""
    grid = block["grid"]
    points = (np.asarray(grid["points"]) if "points" in grid
              else qm.grid(grid["low"], grid["high"], grid["step"]))
    return {g: {repr(p["q"]): qm.sample(v, points, p["q"], Fraction(p["exact"]["scale"]), rng) for p in block["per_q"]}
            for g, v in values.items()}


def release_selection(spec_source: str | Path | dict | SelectionSpec, data: str | Path,
                      randomness: RandomSource) -> tuple[Certificate, dict[str, Any], dict]:
    """Certify the spec, then release every part on the records of ``data`` (see the module).

    Returns
    -------
    certificate : Certificate
    document : dict
        ``name``, ``spec_sha256``, ``guarantee``, ``releases`` (per release its ``values``; a count also its
        ``declared`` and ``selected`` keys; a mean its noisy ``pairs`` per key), ``cells`` (one row per released
        number with its error, interval and note: :func:`dpopt.selection.cells.selection_cells`), ``bounding`` (per release, the
        privacy unit and the method), ``randomness``.
    operator : dict
        The exact bounding report of each release, not private (:func:`dpopt.release.operator.operator_report`).

    Raises
    ------
    DataError
        A missing column, a record without an id or key, a value outside its domain (naming the row).
    """
    spec = load_selection_spec(spec_source)
    certificate = certify(spec)
    source = open_source(data)
    con = connect()
    released, bounding = [], []
    for i, (release, block) in enumerate(zip(spec.releases, certificate["releases"])):
        if isinstance(release, CountRelease):
            out, report = _count(con, source, spec, release, block, i, randomness)
        elif isinstance(release, MeanRelease):
            keys = next(r for r in released if r["name"] == block["keys_from"])["values"]
            out, report = _mean(con, source, spec, release, block, i, list(keys), randomness)
        else:
            values, report = quantile_values(con, source, spec, release, i, randomness)
            out = {"name": release.name, "kind": "quantile", "attribute": release.attribute, "by": release.by,
                   "values": draw_quantiles(values, block, randomness.stream(DRAWS, i, 0))}
        released.append(out)
        bounding.append({"release": release.name} | report)
    document = {"name": spec.name, "spec_sha256": certificate["spec_sha256"], "guarantee": certificate["guarantee"],
                "releases": released, "cells": selection_cells(released, certificate["releases"]),
                "bounding": [{"release": b["release"]} | published_bounding(b) for b in bounding],
                "randomness": randomness.describe()}
    if spec.output is not None:  # the spec's rounding (post-processing), stated in the certificate's output block
        document = rounded_document(document, spec.output.decimals)
    return certificate, document, operator_report(None, bounding)
