"""Every Python and bash snippet of README.md runs as written.

Each snippet runs in a fresh process, in a scratch folder where ``specs/`` and ``notebooks/`` are
the repository's (so relative paths resolve as in a checkout), with this tree first on
``PYTHONPATH``. A bash block runs line by line (backslash continuations joined); a Python block runs whole. The
commands in :data:`SKIPPED` are not run here, each for the stated reason; those in
:data:`SLOW`, and the bash lines outside the Quickstart (each solves, verifies or releases
another example spec, 10–45 s on two shared cores; tests/test_specs.py solves and verifies
every spec by default), run under ``-m slow`` only.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")
BLOCK = re.compile(r"```(bash|python)\n(.*?)```", re.S)

SKIPPED = {
    'python3 -m pip install -e ".[dev]"': "installs the package: the tests run on this tree already",
    "python -m pytest -q": "runs the whole test suite, this file included",
}
SLOW = {
    "bootstrap_gof(noisy, pi0, release, replicates=1000": "1000 bootstrap replicates of a private χ² test",
    "write_report(build_report(sol.certificate)": "a full report with a 50,000-draw empirical audit",
    "dpopt audit out/certificate.json": "200,000 draws per dataset and pair",
    "dpopt report out/certificate.json --out report.html": "a full report with a 50,000-draw empirical audit",
}


def _snippets() -> list[tuple[str, str, int]]:
    """(language, source, line) for every bash line and every Python block of the README."""
    out = []
    for match in BLOCK.finditer(README):
        language, body = match.groups()
        line = README[: match.start()].count("\n") + 2
        if language == "python":
            out.append((language, body, line))
            continue
        for k, command in enumerate(body.replace("\\\n", " ").splitlines()):
            if command.strip():
                out.append((language, command, line + k))
    return out


QUICKSTART = (README.index("## Quickstart"), README.index("\n## ", README.index("## Quickstart") + 1))


def _params(slow: bool):
    start, end = (README[: i].count("\n") + 1 for i in QUICKSTART)
    for language, source, line in _snippets():
        if any(key in source for key in SKIPPED):
            continue
        outside = language == "bash" and not start <= line <= end
        if (outside or any(key in source for key in SLOW)) == slow:
            yield pytest.param(language, source, id=f"README.md:{line}:{language}")


@pytest.fixture(scope="session")
def scratch(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("readme")
    (folder / "specs").symlink_to(ROOT / "specs")
    (folder / "notebooks").symlink_to(ROOT / "notebooks")
    return folder


def _run(language: str, source: str, folder: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", "MPLBACKEND": "Agg"}
    command = [sys.executable, "-c", source] if language == "python" else ["bash", "-euo", "pipefail", "-c", source]
    return subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=600, check=False)


def _quickstart_output(scratch: Path) -> None:
    """``out/`` as the Quickstart's first command writes it, whichever snippet runs first (under xdist the
    order of a worker's tests is not the README's)."""
    if not (scratch / "out" / "certificate.json").exists():
        assert _run("bash", "dpopt solve specs/table_replace_gdp.yaml --out out/", scratch).returncode == 0


@pytest.mark.parametrize(("language", "source"), list(_params(slow=False)))
def test_readme_snippet_runs(language, source, scratch):
    _quickstart_output(scratch)
    result = _run(language, source, scratch)
    assert result.returncode == 0, f"{source}\n--- stderr:\n{result.stderr[-3000:]}"


@pytest.mark.slow
@pytest.mark.parametrize(("language", "source"), list(_params(slow=True)))
def test_readme_slow_snippet_runs(language, source, scratch):
    _quickstart_output(scratch)
    result = _run(language, source, scratch)
    assert result.returncode == 0, f"{source}\n--- stderr:\n{result.stderr[-3000:]}"


def test_every_skipped_or_slow_command_is_still_in_the_readme():
    assert all(key in README for key in (*SKIPPED, *SLOW))
