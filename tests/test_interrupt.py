"""Ctrl-C anywhere in the CLI is "dpopt: interrupted", exit 130 — during a DuckDB query too (issue 31).

DuckDB answers SIGINT during a query with ``duckdb.InterruptException`` (a ``duckdb.Error``),
which the data-source layer used to report as a bad data file and the CLI as a traceback.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import duckdb
import pytest

import dpopt.cli
from conftest import ROOT
from dpopt.release import sources


class _InterruptedConnection:
    def execute(self, sql):
        raise duckdb.InterruptException("INTERRUPT Error: Interrupted!")


def test_an_interrupted_query_is_an_interrupt_not_a_bad_data_file(tmp_path):
    data = tmp_path / "records.csv"
    data.write_text("a\nx\n")
    with pytest.raises(KeyboardInterrupt):
        sources.columns(_InterruptedConnection(), sources.open_source(data))


@pytest.mark.parametrize("exc", [KeyboardInterrupt(), duckdb.InterruptException("Query interrupted")])
def test_the_cli_prints_one_line_and_exits_130(monkeypatch, capsys, exc):
    def interrupted(args):
        raise exc

    monkeypatch.setattr(dpopt.cli, "_verify", interrupted)
    assert dpopt.cli.main(["verify", "certificate.json"]) == 130
    assert capsys.readouterr().err == "dpopt: interrupted\n"


def test_other_errors_are_not_taken_for_an_interrupt(monkeypatch):
    def broken(args):
        raise duckdb.IOException("disk full")

    monkeypatch.setattr(dpopt.cli, "_verify", broken)
    with pytest.raises(duckdb.IOException):
        dpopt.cli.main(["verify", "certificate.json"])


@pytest.mark.slow
def test_sigint_during_a_grouped_release_of_a_large_file(tmp_path):
    """SIGINT at several moments of a grouped release of 6 million records (DuckDB reads for
    seconds): each run ends with "dpopt: interrupted" (exit 130; a signal that lands while the
    interpreter shuts down after it is reported by the shell as 130 too) or finishes, never
    with a traceback, and the --out folder is absent or whole."""
    data = tmp_path / "big.csv"
    duckdb.sql("COPY (SELECT 'B' || (i % 5000)::VARCHAR AS block, ['white', 'black', 'other'][1 + i % 3] AS race, "
               "['female', 'male'][1 + (i // 3) % 2] AS sex FROM range(6000000) t(i)) "
               f"TO {sources.quote_literal(str(data))} (HEADER)")
    public = tmp_path / "blocks.csv"  # the public list of the 5000 blocks (a grouped release declares its groups)
    duckdb.sql("COPY (SELECT 'B' || i::VARCHAR AS block FROM range(5000) t(i)) "
               f"TO {sources.quote_literal(str(public))} (HEADER)")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    out = tmp_path / "out"
    for delay in (1.5, 2.5, 3.5, 4.5):
        process = subprocess.Popen(
            [sys.executable, "-m", "dpopt.cli", "release", str(ROOT / "specs" / "block_tables_discrete_zcdp.yaml"),
             "--data", str(data), "--group-by", "block", "--groups", str(public), "--out", str(out), "--seed", "1",
             "--insecure-seed"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        time.sleep(delay)
        process.send_signal(signal.SIGINT)
        err = process.communicate(timeout=300)[1]
        assert "Traceback" not in err and "Query interrupted" not in err, err
        assert process.returncode in (0, 130, -signal.SIGINT), (delay, process.returncode, err)
        if process.returncode != 0:
            assert err.endswith("dpopt: interrupted\n"), err
        if out.exists():
            assert sorted(p.name for p in out.iterdir()) == ["certificate.json", "release.json",
                                                              "release_block.parquet"]
