"""Output folders are written whole or not at all (issue 31).

:func:`dpopt.core.output.output_folder` is exercised in-process (replace, failure, refusal,
lock, the fallback without ``renameat2``); then the CLI is run in subprocesses that are
interrupted (SIGINT) or killed (SIGKILL) while they write into an existing ``--out``, and
the folder must afterwards hold exactly the old run's files or exactly the new run's
(byte for byte against a reference run, the outputs being deterministic), never a mixture;
grouped releases run at once into one ``--out`` (3, and 8 among the slow tests) all end, and
the folder is one of them.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from conftest import ROOT
from dpopt.core import output
from dpopt.core.output import output_folder
from dpopt.errors import OutputError
from dpopt.release import random_source, release_groups

SPECS = ROOT / "specs"
TABLE = SPECS / "table_replace_gdp.yaml"
SURVEY = SPECS / "data" / "survey.csv"
BLOCKS_SPEC = SPECS / "block_tables_discrete_zcdp.yaml"
BLOCKS = SPECS / "data" / "blocks.csv"
BLOCK_LIST = SPECS / "data" / "block_list.csv"


def _snapshot(folder: Path) -> dict[str, str]:
    """File name -> SHA-256 of every entry of ``folder``."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def _fill(folder: Path, files: dict[str, str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text)


# ------------------------------------------------------------------- in process
def test_a_new_folder_is_created_with_ordinary_permissions(tmp_path):
    target = tmp_path / "deep" / "out"
    with output_folder(target) as staging:
        assert staging.parent == target.parent and staging.name.startswith(".out.tmp-")
        (staging / "release.json").write_text("{}")
    assert _snapshot(target) == {"release.json": hashlib.sha256(b"{}").hexdigest()}
    assert target.stat().st_mode & 0o777 == 0o777 & ~output.umask()
    assert [p.name for p in target.parent.iterdir() if p.name.startswith(".out.tmp")] == []


@pytest.mark.parametrize("exchange", [True, False])
def test_an_existing_folder_is_replaced_whole(tmp_path, monkeypatch, exchange):
    if not exchange:  # the fallback where renameat2 is not offered: renamed aside, then in
        monkeypatch.setattr(output, "_exchange", lambda first, second: False)
    target = tmp_path / "out"
    _fill(target, {"release.json": "old", "certificate.json": "old", "release_block.parquet": "old"})
    with output_folder(target) as staging:
        _fill(staging, {"release.json": "new", "certificate.json": "new"})
    assert {p.name: p.read_text() for p in target.iterdir()} == {"release.json": "new", "certificate.json": "new"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # the lock file is removed by its holder


@pytest.mark.parametrize("exc", [RuntimeError("boom"), KeyboardInterrupt()])
def test_a_failure_while_writing_leaves_the_old_folder(tmp_path, exc):
    target = tmp_path / "out"
    _fill(target, {"release.json": "old"})
    with pytest.raises(type(exc)):
        with output_folder(target) as staging:
            _fill(staging, {"release.json": "half"})
            raise exc
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    assert (target / "release.json").read_text() == "old"


@pytest.mark.parametrize(("files", "message"), [
    ({"release.json": "x", "records.csv": "x"}, "holds records.csv, which dpopt did not write"),
    ({"notes": "x"}, "holds notes, which dpopt did not write"),
])
def test_a_folder_with_foreign_files_is_not_replaced(tmp_path, files, message):
    target = tmp_path / "out"
    _fill(target, files)
    with pytest.raises(OutputError, match=message):
        with output_folder(target):
            pass
    assert {p.name for p in target.iterdir()} == set(files)


def test_a_subfolder_a_file_and_the_current_folder_are_refused(tmp_path, monkeypatch):
    (tmp_path / "out" / "sub").mkdir(parents=True)
    (tmp_path / "file").write_text("x")
    monkeypatch.chdir(tmp_path / "out")
    for path, message in ((tmp_path / "out", "is the current folder"), (tmp_path, "is the current folder"),
                          (tmp_path / "file", "is not a folder")):
        with pytest.raises(OutputError, match=message):
            with output_folder(path):
                pass
    monkeypatch.chdir(tmp_path)
    with pytest.raises(OutputError, match="holds the folder sub"):
        with output_folder(tmp_path / "out"):
            pass


def test_a_symbolic_link_to_a_folder_replaces_the_folder(tmp_path):
    real = tmp_path / "real"
    _fill(real, {"release.json": "old"})
    (tmp_path / "link").symlink_to(real)
    with output_folder(tmp_path / "link") as staging:
        _fill(staging, {"release.json": "new"})
    assert (tmp_path / "link").is_symlink() and (real / "release.json").read_text() == "new"


def test_a_held_lock_makes_the_run_refuse_with_one_line(tmp_path, monkeypatch):
    import fcntl

    monkeypatch.setattr(output, "LOCK_TIMEOUT", 0.2)
    target = tmp_path / "out"
    fd = os.open(tmp_path / ".out.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        with pytest.raises(OutputError, match="another run has held .*out.lock for 0.2 s"):
            with output_folder(target) as staging:
                _fill(staging, {"release.json": "new"})
    finally:
        os.close(fd)
    assert not target.exists() and sorted(p.name for p in tmp_path.iterdir()) == [".out.lock"]


def test_staging_folders_of_killed_runs_are_removed(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = tmp_path / f".out.tmp-{int(dead.stdout)}-abcd"  # that process has exited
    live = tmp_path / f".out.tmp-{os.getpid()}-efgh"  # this one has not
    stale.mkdir()
    live.mkdir()
    with output_folder(tmp_path / "out") as staging:
        _fill(staging, {"release.json": "new"})
    assert not stale.exists() and live.exists()


def _dead_pid() -> int:
    """The id of a process that has exited."""
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(done.stdout)


def test_an_output_inside_a_folder_leaves_no_lock_and_the_folder_is_named_as_one(tmp_path):
    # a newcomer's sequence (issue 35): an output into o/a, then one into o
    with output_folder(tmp_path / "o" / "a") as staging:
        _fill(staging, {"certificate.json": "a"})
    assert sorted(p.name for p in (tmp_path / "o").iterdir()) == ["a"]
    with pytest.raises(OutputError, match=r"holds the folder a: .*nothing was written") as caught:
        with output_folder(tmp_path / "o"):
            pass
    assert "did not write" not in str(caught.value)


def test_lock_files_and_killed_runs_staging_folders_inside_a_folder_are_dpopts_own(tmp_path):
    # a lock file an earlier version kept, and the staging folder of a run killed while writing o/a
    target = tmp_path / "o"
    _fill(target, {"certificate.json": "old", ".a.lock": ""})
    (target / f".a.tmp-{_dead_pid()}-wxyz").mkdir()
    with output_folder(target) as staging:
        _fill(staging, {"certificate.json": "new"})
    assert {p.name: p.read_text() for p in target.iterdir()} == {"certificate.json": "new"}


def test_a_killed_runs_staging_folder_is_removed_by_the_next_run_before_its_work(tmp_path):
    # SIGKILL after the noise was drawn leaves .NAME.tmp-PID-XXXX with the released values; the next run
    # removes it when it checks its --out, whatever output folder it was for, and keeps a live run's folder
    stale = tmp_path / f".other.tmp-{_dead_pid()}-abcd"
    live = tmp_path / f".other.tmp-{os.getpid()}-efgh"
    for folder in (stale, live):
        _fill(folder, {"release.json": "noisy values"})
    output.check_output_folder(tmp_path / "out")
    assert not stale.exists() and live.exists()


# ------------------------------------------------------------------ subprocesses
def _cli(*args: str) -> list[str]:
    return [sys.executable, "-c", "import sys; from dpopt.cli import main; sys.exit(main())", *args]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}


def _run(*args: str) -> None:
    done = subprocess.run(_cli(*args), env=_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr


def _interrupt_while_writing(command: list[str], out: Path, how: signal.Signals, delay: float) -> int:
    """Start ``command``, wait until its staging folder beside ``out`` appears (it is writing; a
    killed run's folder stays until the next run's swap removes it, hence the process id),
    wait ``delay`` seconds more, send ``how``; the exit code."""
    process = subprocess.Popen(command, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300
    while process.poll() is None and time.monotonic() < deadline:
        if any(p.name.startswith(f".{out.name}.tmp-{process.pid}-") for p in out.parent.iterdir()):
            time.sleep(delay)
            process.send_signal(how)
            break
        time.sleep(0.001)
    process.wait(timeout=300)
    err = process.stderr.read().decode()
    process.stderr.close()
    assert "Traceback" not in err, err
    return process.returncode


def _battery(tmp_path: Path, old: list[str], new: list[str], trials: int) -> None:
    """Write ``old`` into --out, then run ``new`` into it and stop it mid-write ``trials`` times."""
    out, reference = tmp_path / "out", tmp_path / "reference"
    _run(*old, "--out", str(out))
    _run(*new, "--out", str(reference))
    before, after = _snapshot(out), _snapshot(reference)
    assert before != after
    rng = random.Random(31)
    for trial in range(trials):
        how = (signal.SIGINT, signal.SIGKILL)[trial % 2]
        code = _interrupt_while_writing(_cli(*new, "--out", str(out)), out, how, rng.uniform(0, 0.02))
        # 130: "dpopt: interrupted"; -SIGINT: the signal came after main() returned, while the interpreter
        # shut down (it restores the default handler then), the folder already whole
        assert code in (0, 130, -signal.SIGINT, -signal.SIGKILL), code
        assert _snapshot(out) in (before, after), f"trial {trial} ({how.name}, exit {code}) left a mixture"
        if _snapshot(out) == after:  # the next trial starts from the old folder again
            _run(*old, "--out", str(out))


def _solve_pair(tmp_path: Path) -> tuple[list[str], list[str]]:
    other = tmp_path / "mu2.yaml"
    other.write_text(TABLE.read_text().replace("mu: 1.0", "mu: 2.0"))
    return ["solve", str(TABLE), "--quiet"], ["solve", str(other), "--quiet"]


def _release_pair() -> tuple[list[str], list[str]]:
    return ([*("release", str(TABLE), "--data", str(SURVEY), "--insecure-seed", "--seed"), "1"],
            [*("release", str(TABLE), "--data", str(SURVEY), "--insecure-seed", "--seed"), "2"])


def test_an_interrupted_release_leaves_a_whole_folder(tmp_path):
    _battery(tmp_path, *_release_pair(), trials=1)


@pytest.mark.slow
def test_interrupted_solves_and_releases_leave_whole_folders(tmp_path):
    _battery(tmp_path / "solve", *_solve_pair(tmp_path), trials=8)
    _battery(tmp_path / "release", *_release_pair(), trials=8)


@pytest.mark.parametrize("count", [3, pytest.param(8, marks=pytest.mark.slow)])
def test_concurrent_grouped_releases_into_one_folder_end_whole(tmp_path, count):
    out = tmp_path / "out"
    runs = []
    for seed in range(1, count + 1):
        spec = tmp_path / f"spec{seed}.yaml"
        spec.write_text(BLOCKS_SPEC.read_text().replace("name: Race by sex", f"name: Run {seed} race by sex", 1))
        runs.append(subprocess.Popen(
            _cli("release", str(spec), "--data", str(BLOCKS), "--group-by", "block", "--groups", str(BLOCK_LIST),
                 "--seed", str(seed),
                 "--insecure-seed", "--out", str(out)),
            env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
    for process in runs:
        process.wait(timeout=600)
        err = process.stderr.read()
        process.stderr.close()
        assert process.returncode == 0, err
    assert sorted(p.name for p in out.iterdir()) == ["certificate.json", "release.json", "release_block.parquet"]
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".out")) == []  # no lock, no staging
    # the three files come from one run: its name in both documents, its seed's noise in the table
    name = json.loads((out / "release.json").read_text())["name"]
    seed = int(name.split()[1])
    assert json.loads((out / "certificate.json").read_text())["spec"]["name"] == name
    expected = release_groups(tmp_path / f"spec{seed}.yaml", BLOCKS, ["block"], groups={"block": BLOCK_LIST},
                              randomness=random_source(seed, True)).level("block")
    table = pq.read_table(out / "release_block.parquet").to_pydict()
    assert table["block"] == [str(k) for k in expected.keys]
    labels = [c for c in table if c != "block" and not c.endswith(("standard_error", "margin_of_error_95", "ci_95_low", "ci_95_high"))]
    assert [[table[c][i] for c in labels] for i in range(len(table["block"]))] == expected.values.tolist()


def test_the_cli_refuses_a_foreign_folder_before_the_work(tmp_path, capsys, monkeypatch):
    import dpopt.cli

    def never(args):
        raise AssertionError("the command ran")

    monkeypatch.setattr(dpopt.cli, "_solve", never)
    _fill(tmp_path / "out", {"records.csv": "a\nx\n"})
    assert dpopt.cli.main(["solve", str(TABLE), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "holds records.csv, which dpopt did not write" in err
