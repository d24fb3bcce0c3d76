"""``dpopt synthesize`` and :func:`dpopt.synthesize`: certified marginals, then records that agree with them.

1. the data file is checked (columns, every value a level, not empty: one line naming the column and the value)
   before anything is designed;
2. ``fixed``: the spec's marginals are measured (:func:`dpopt.synthesis.measure.measure`);
   ``adaptive``: the one-way marginals are measured, ``rounds`` pairs selected
   (:func:`dpopt.synthesis.adaptive.select`) and measured;
3. :func:`dpopt.synth.synthesize_records` fits records to the measurements' noisy tables shrunk toward
   independence (:func:`dpopt.synth.denoise.shrink`; post-processing; each table weighted by the inverse of its
   noise per cell). With ``exact: true`` (the default) the published tables are then the records' own tabulations
   (:func:`dpopt.synth.tables.tabulations`: the marginals of that one fitted model, consistent, non-negative and
   whole by construction, matched exactly); with ``exact: false`` they are the measurements' post-processed tables,
   matched by none; with a list, the records are repaired to match those of the measurements' tables exactly;
4. the certificate (:mod:`dpopt.synthesis.certificate`) and the report (:mod:`dpopt.synthesis.report`);
5. :meth:`SynthesisRelease.write`: ``synthetic.csv`` (and ``synthetic.parquet``), ``marginals.json``,
   ``certificate.json``, ``report.md`` with ``residual.png``, ``report.html``: the folder whole or nothing.

Randomness: one :class:`~dpopt.rng.RandomSource`, an independent stream per step (0: the first measurement,
1: the selection, 2: the selected marginals, 3: the synthesis).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import dpopt.synth as synth
from dpopt.certificate.model import Certificate, write_atomic
from dpopt.core.output import OUTPUT_NAMES, output_folder
from dpopt.domain.queries import compile_query
from dpopt.errors import DataError
from dpopt.release import sources
from dpopt.release.bind import sha256_bytes
from dpopt.rng import RandomSource, random_source
from dpopt.spec.load import load_spec
from dpopt.spec.synthesis import SynthesisSpec, load_synthesis_spec
from dpopt.synth.denoise import shrink
from dpopt.synth.tables import layout, residuals, tabulations
from dpopt.synthesis.adaptive import SCORE_SENSITIVITY, SELECTION_METHOD, candidates, select
from dpopt.synthesis.budget import budget_parts, em_epsilon
from dpopt.synthesis.certificate import certify, post_processing, published_tables, records_from, synthesis_sha256
from dpopt.synthesis.measure import (
    Measurement,
    domain_order_tables,
    first_measurement_spec,
    measure,
    measurement_spec,
    tabulated,
)
from dpopt.synthesis.report import FIGURE, residual_figure, synthesis_html, synthesis_markdown

OWNED = (*OUTPUT_NAMES, "synthetic.csv", "synthetic.parquet", "marginals.json", "report.html", "release.sig.json")
"""The files a synthesis writes, and the signature ``dpopt sign`` adds (an existing ``--out`` folder holding anything
else is not replaced; a new synthesis replaces the folder whole, its old signature with it)."""

Progress = Callable[[str], None]

ROWS = 100_000
"""Records written to ``synthetic.csv`` at a time (the labels of one block are held, not the file's)."""


@dataclass(frozen=True)
class SynthesisRelease:
    """Synthetic records with the published tables, the certificate and the report.

    Attributes
    ----------
    spec : SynthesisSpec
    records : ndarray (n, attributes) of int32
        Level indices, columns in domain order.
    tables : dict
        Attribute names → the published table.
    residual : dict
        ``a×b`` → L1 gap between the records' tabulation and the published table.
    method : str
        How the records were made (the synthesizer's sentence).
    certificate : Certificate
    """

    spec: SynthesisSpec
    records: np.ndarray
    tables: dict[tuple[str, ...], np.ndarray]
    residual: dict[str, float]
    method: str
    certificate: Certificate

    def labels(self) -> dict[str, np.ndarray]:
        """Each column's level labels (text), in domain order."""
        return {a: np.asarray(levels, dtype=object)[self.records[:, j]]
                for j, (a, levels) in enumerate(self.spec.data.attributes.items())}

    def csv(self) -> str:
        """``synthetic.csv``: a header of the attribute names, one record a line, level labels."""
        buffer = io.StringIO()
        self._write_csv(buffer)
        return buffer.getvalue()

    def _write_csv(self, stream) -> None:
        """:meth:`csv` written to ``stream`` :data:`ROWS` records at a time (never every label at once)."""
        writer = csv.writer(stream, lineterminator="\n")
        writer.writerow(self.spec.attributes)
        levels = [np.asarray(v, dtype=object) for v in self.spec.data.attributes.values()]
        for start in range(0, self.records.shape[0], ROWS):
            block = self.records[start:start + ROWS]
            writer.writerows(zip(*(lv[block[:, j]] for j, lv in enumerate(levels))))

    def _write_parquet(self, path: Path) -> None:
        """``synthetic.parquet``: the rows of :meth:`csv` (text labels), mapped from the level codes in SQL; one
        DuckDB thread keeps the rows' order without buffering them (two held ~250 MB more at 3·10⁶ × 14)."""
        con = sources.connect()
        con.execute("SET threads = 1")
        con.register("synthetic", {f"c{j}": np.ascontiguousarray(self.records[:, j])
                                   for j in range(self.records.shape[1])})
        labels = ", ".join(f"[{', '.join(sources.quote_literal(str(v)) for v in levels)}][c{j} + 1] AS "
                           f"{sources.quote_identifier(a)}"
                           for j, (a, levels) in enumerate(self.spec.data.attributes.items()))
        con.execute(f"COPY (SELECT {labels} FROM synthetic) TO {sources.quote_literal(str(path))} (FORMAT parquet)")
        con.close()

    def marginals_document(self) -> dict:
        """``marginals.json``: every published table (attributes, their levels, the counts), the records' residual."""
        levels = self.spec.data.attributes
        return {
            "name": self.spec.name, "spec_sha256": synthesis_sha256(self.spec),
            "certificate_sha256": sha256_bytes(self.certificate.to_json().encode("utf-8")),
            "tables": [{"attributes": list(k), "levels": [levels[a] for a in k], "counts": _numbers(t)}
                       for k, t in self.tables.items()],
            "records": int(self.records.shape[0]),
            "residual_l1": self.residual,
        }

    def report_markdown(self, figure=None) -> str:
        return synthesis_markdown(self.certificate, self.residual, int(self.records.shape[0]), figure)

    def write(self, out: str | Path) -> list[Path]:
        """Write the folder ``out`` whole or not at all (module docstring); returns the files written."""
        figure = residual_figure(self.residual, int(self.records.shape[0]))
        with output_folder(out, OWNED) as staging:
            with open(staging / "synthetic.csv", "w", encoding="utf-8", newline="") as stream:  # the folder is atomic
                self._write_csv(stream)
            self._write_parquet(staging / "synthetic.parquet")
            write_atomic(staging / "marginals.json", json.dumps(self.marginals_document(), indent=2,
                                                                ensure_ascii=False) + "\n")
            self.certificate.write(staging / "certificate.json")
            write_atomic(staging / "report.md", self.report_markdown(figure))
            write_atomic(staging / f"{FIGURE}.png", figure.png)
            write_atomic(staging / "report.html", synthesis_html(self.certificate, self.residual,
                                                                 int(self.records.shape[0]), figure))
            names = sorted(p.name for p in staging.iterdir())
        return [Path(out) / n for n in names]


def _numbers(table: np.ndarray) -> Any:
    """A table as nested lists, whole numbers as ints."""
    t = np.asarray(table)
    return (np.rint(t).astype(np.int64) if np.all(t == np.rint(t)) else t).tolist()


def check_data(spec: SynthesisSpec, data: str | Path) -> None:
    """Columns present, every value a level, at least one record: one line (DataError) before any design."""
    con, source = sources.connect(), sources.open_source(data)
    sources.validate(con, source, spec)  # reads spec.data.attributes only
    count = con.execute(f"SELECT count(*) FROM {source.sql}").fetchone()[0]
    if count == 0:
        raise DataError(f"{source}: has no records")


def _privacy(part: dict) -> dict:
    return {part["definition"]: {k: float(v) for k, v in part.items() if k not in ("part", "definition")}}


def _row(m: Measurement, groups: list[list[str]]) -> dict:
    return {"part": m.part, "marginals": groups, "certificate": m.certificate.data}


def synthesize(spec: SynthesisSpec | str | Path | Mapping[str, Any], data: str | Path, *,
               randomness: RandomSource | None = None, progress: Progress | None = None) -> SynthesisRelease:
    """Measure, select (adaptive), synthesize and certify (module docstring).

    Parameters
    ----------
    spec : SynthesisSpec, path or mapping
        A spec with a ``synthesize`` block (:mod:`dpopt.spec.synthesis`).
    data : path
        CSV or Parquet records, one column per attribute, values among the levels.
    randomness : RandomSource, optional
        Default: OS-entropy CSPRNG streams (:func:`dpopt.rng.random_source`).
    progress : callable, optional
        Called with a short text at each step.

    Raises
    ------
    SpecError, DataError
        One line naming the field, or the column and the value.
    """
    say = progress or (lambda text: None)
    spec = load_synthesis_spec(spec)
    randomness = randomness or random_source()
    say("checking the data")
    check_data(spec, data)
    parts = {p["part"]: p for p in budget_parts(spec)}
    selection = None
    if spec.synthesize.selection == "fixed":
        groups = [sorted(g, key=spec.attributes.index) for g in spec.groups()]
        say(f"measuring {len(groups)} marginals (design, count, release"
            + (")" if tabulated(spec) else ", post-process)"))
        measured = [(measure(spec, "measurement", first_measurement_spec(spec), data, randomness.stream(0),
                             randomness.seeded), groups)]
    else:
        one_way = [[a] for a in spec.attributes]
        say(f"measuring {len(one_way)} one-way marginals")
        first = measure(spec, "one_way", first_measurement_spec(spec), data, randomness.stream(0), randomness.seeded)
        say(f"selecting {spec.rounds} two-way marginals (exponential mechanism)")
        selection, pairs = _select(spec, data, first, parts, randomness)
        say(f"measuring the {len(pairs)} selected two-way marginals")
        second = measure(spec, "selected", measurement_spec(spec, "selected", pairs, _privacy(parts["selected"])),
                         data, randomness.stream(2), randomness.seeded)
        measured = [(first, one_way), (second, pairs)]
    sds = {k: sd for m, _ in measured for k, sd in m.table_sd().items()}
    weights = {k: 1.0 / max(sd, 1e-12) for k, sd in sds.items()}
    held = spec.synthesize.exact
    estimate = measured[-1][0].released_total
    n = (spec.synthesize.records or spec.data.n or
         max(int(round(measured[-1][0].total if isinstance(held, list) else estimate)), 1))
    # post-processing of the noisy tables: each shrunk toward independence, total the estimate
    targets = {k: shrink(t, sds[k], max(m.released_total, 1.0)) for m, _ in measured for k, t in m.released.items()}
    # the tables given to the synthesizer (its residuals): the measurements' post-processed ones where they are
    # published (exact: false, a list), else the targets themselves (the published tables are the tabulations)
    tables = targets if tabulated(spec) else {k: t for m, _ in measured for k, t in m.tables.items()}
    exact = [tuple(sorted(g, key=spec.attributes.index)) for g in held] if isinstance(held, list) else False
    say(f"synthesizing {n} records from {len(tables)} tables")
    domain = {a: len(v) for a, v in spec.data.attributes.items()}
    result = synth.synthesize_records(domain, tables, n, randomness.stream(3), weights=weights, progress=progress,
                                      exact=exact, targets=targets)
    method, residual = result.method, result.residual
    if tabulated(spec):  # the published tables: the fitted records' own, consistent, whole and matched exactly
        tables = tabulations(domain, list(tables), result.records)
        residual = residuals(layout(domain, tables, n, None)[1], result.records)
        method += ("; the published tables are then the records' own tabulations on every measured marginal, "
                   "matched exactly")
        say(f"synthesis: publishing the records' tabulations: {sum(1 for v in residual.values() if v == 0)} of "
            f"{len(residual)} tables matched exactly")
    say("certifying (every claim re-derived, the measurements' certificates verified)")
    certificate = certify(spec, [_row(m, g) for m, g in measured], selection,
                          {"post_processing": post_processing(spec), "published_tables": published_tables(spec),
                           "method": method, "records": n, "records_from": records_from(spec)}, randomness.seeded)
    residual = {"×".join(k): float(v) for k, v in residual.items()}
    return SynthesisRelease(spec, np.asarray(result.records, dtype=np.int32), tables, residual, method, certificate)


def _select(spec: SynthesisSpec, data, first: Measurement, parts: dict, randomness: RandomSource
            ) -> tuple[dict, list[list[str]]]:
    """The adaptive rounds: the true two-way tables of the candidates (counted in SQL, never published), scored
    against the published one-way tables, one pair drawn per round; the selection block and the pairs."""
    pairs = [tuple(sorted(g, key=spec.attributes.index)) for g in spec.groups()]
    document = measurement_spec(spec, "candidates", [list(p) for p in pairs], {"zcdp": {"rho": 1.0}})
    counting = load_spec(document)
    query = compile_query(counting)
    value, _ = sources.answer(sources.connect(), sources.open_source(data), counting, query=query)
    truth = domain_order_tables(spec, query, value)
    one_way = {k[0]: t for k, t in first.tables.items()}
    rhos = [parts[f"selection_round_{i + 1}"]["rho"] for i in range(spec.rounds)]
    delta = SCORE_SENSITIVITY[spec.adjacency.kind]
    chosen = select(spec.attributes, pairs, truth, one_way, [em_epsilon(r) for r in rhos], delta, randomness.stream(1))
    steps = []
    for i, pair in enumerate(chosen):
        steps.append({"round": i + 1, "rho": rhos[i], "epsilon": em_epsilon(rhos[i]), "sensitivity": delta,
                      "candidates": len(candidates(spec.attributes, pairs, chosen[:i])), "selected": list(pair)})
    return {"method": SELECTION_METHOD, "steps": steps}, [list(p) for p in chosen]
