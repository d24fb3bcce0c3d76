"""``dpopt verify DIR`` of a synthesis folder: the certificate, and every published file against it.

* ``certificate.json`` verifies (:func:`dpopt.synthesis.certificate.verify_synthesis`);
* ``marginals.json`` names that certificate's SHA-256 and its spec's, and holds exactly the tables the
  measurements made (their attributes and levels), each non-negative, and the certificate's number of records;
* ``synthetic.csv`` has the spec's attributes as its header and only their levels (checked in SQL), as many
  records as ``marginals.json`` states, and the residual of every table re-derived from its rows: the L1 gap
  between the records' tabulation and the published table, which is 0 for every table when the certificate says
  the published tables are the records' tabulations (``exact: true``);
* ``synthetic.parquet`` holds the same rows as ``synthetic.csv``, in the same order (compared as level codes;
  a value that is not a level differs).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import duckdb
import numpy as np

from dpopt.certificate.model import Certificate
from dpopt.errors import DataError, DpoptError
from dpopt.release import sources
from dpopt.release.bind import FileCheck, sha256_bytes
from dpopt.spec.synthesis import load_synthesis_spec
from dpopt.synthesis.certificate import verify_synthesis
from dpopt.synthesis.measure import tabulated


def is_synthesis_folder(folder: str | Path) -> bool:
    """A folder whose ``certificate.json`` is a synthesis certificate (read without verifying)."""
    path = Path(folder) / "certificate.json"
    try:
        return json.loads(path.read_text(encoding="utf-8")).get("kind") == "synthesis"
    except (OSError, ValueError, AttributeError):
        return False


def verify_synthesis_folder(folder: str | Path) -> list[FileCheck]:
    """One line per file (module docstring)."""
    folder = Path(folder)
    raw = (folder / "certificate.json").read_bytes()
    certificate = Certificate.from_dict(json.loads(raw), source=str(folder / "certificate.json"))
    result = verify_synthesis(certificate)
    failed = [c.claim for c in result.failed]
    lines = [FileCheck("certificate.json", not failed, f"{len(result.checks)} claims re-derived" if not failed
                       else f"failed: {', '.join(failed[:4])}")]
    if failed:
        return lines
    spec = load_synthesis_spec(certificate["spec"])
    try:
        document = json.loads((folder / "marginals.json").read_text(encoding="utf-8"))
        tables = {tuple(t["attributes"]): np.asarray(t["counts"], dtype=float) for t in document["tables"]}
        measured = {tuple(g) for m in certificate["measurements"] for g in m["marginals"]}
        levels_ok = all(t["levels"] == [spec.data.attributes[a] for a in t["attributes"]] for t in document["tables"])
        shapes_ok = all(tables[k].shape == tuple(len(spec.data.attributes[a]) for a in k) for k in tables)
        ok = (document["certificate_sha256"] == sha256_bytes(raw) and document["spec_sha256"] == certificate[
            "spec_sha256"] and set(tables) == measured and levels_ok and shapes_ok
              and document.get("records") == certificate["synthesis"]["records"]
              and all(np.all(t >= 0) for t in tables.values()))
        lines.append(FileCheck("marginals.json", ok, "the certificate's SHA-256 and the measured tables" if ok else
                               "does not match the certificate (its SHA-256, the tables, their levels or the number "
                               "of records)"))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return lines + [FileCheck("marginals.json", False, f"cannot be read: {type(exc).__name__}: {exc}")]
    lines += _records_checks(folder, spec, document, tables)
    return lines


def _records_checks(folder: Path, spec, document: dict, tables: dict) -> list[FileCheck]:
    con = sources.connect()
    csv_source = sources.DataSource(folder / "synthetic.csv", "csv")
    try:
        header = sources.columns(con, csv_source)
        sources.validate(con, csv_source, spec)
        records = _codes(con, csv_source, spec)  # every value is a level (validated)
    except (DataError, DpoptError, duckdb.Error) as exc:
        return [FileCheck("synthetic.csv", False, str(exc).splitlines()[0])]
    names = spec.attributes
    residual = {}
    for clique, table in tables.items():
        axes = tuple(records[:, names.index(a)].astype(np.intp) for a in clique)
        cells = np.ravel_multi_index(axes, table.shape)
        counts = np.bincount(cells, minlength=table.size).reshape(table.shape)
        residual["×".join(clique)] = float(np.abs(counts - table).sum())
    recorded = document.get("residual_l1", {})
    exact = tabulated(spec)
    same = (header == names and records.shape[0] == document.get("records") and set(recorded) == set(residual)
            and all(math.isclose(recorded[k], v, rel_tol=1e-9, abs_tol=1e-9) for k, v in residual.items())
            and not (exact and any(residual.values())))
    n = records.shape[0]
    lines = [FileCheck("synthetic.csv", same, f"{n} records, every value a level; each table's residual "
                       "re-derived from the rows" + (", 0 for every table (the published tables are the records' "
                                                     "tabulations)" if exact else "")
                       if same else "header, record count or residual differs from marginals.json"
                       + (", or a table is not the records' tabulation" if exact else ""))]
    parquet = sources.DataSource(folder / "synthetic.parquet", "parquet")
    try:
        if sources.columns(con, parquet) != names:
            raise DataError(f"its columns are not {', '.join(names)}")
        other = _codes(con, parquet, spec)
    except (DataError, duckdb.Error) as exc:  # a missing or unreadable file
        return lines + [FileCheck("synthetic.parquet", False, f"cannot be read: {str(exc).splitlines()[0]}")]
    common = min(len(records), len(other))
    differ = abs(len(records) - len(other)) + int(np.any(records[:common] != other[:common], axis=1).sum())
    lines.append(FileCheck("synthetic.parquet", differ == 0, "the rows of synthetic.csv" if differ == 0 else
                           f"{differ} rows differ from synthetic.csv"))
    return lines


def _codes(con: duckdb.DuckDBPyConnection, source: sources.DataSource, spec) -> np.ndarray:
    """The records' level codes (n, attributes) in domain order, computed in SQL (no Python object per value);
    −1 where a value is not a level."""
    names = spec.attributes
    kind = "SMALLINT" if max(len(spec.data.attributes[a]) for a in names) < 1 << 15 else "INTEGER"
    columns = ", ".join(f"CAST({sources.level_code_sql(a, spec.data.attributes[a])} AS {kind}) AS c{j}"
                        for j, a in enumerate(names))
    found = con.execute(f"SELECT {columns} FROM {source.sql}").fetchnumpy()
    return np.column_stack([np.ma.filled(np.ma.asarray(found.pop(f"c{j}")), -1) for j in range(len(names))])
