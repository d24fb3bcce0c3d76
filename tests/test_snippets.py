"""Every Python and bash snippet of README.md and of the documentation pages ``docs/**/*.md`` runs as written.

Snippets run in a scratch folder per page where ``specs/`` and ``notebooks/`` are the repository's (so
relative paths resolve as in a checkout), with this tree first on ``PYTHONPATH``; each bash block in ``bash``,
each ``dpopt`` command and Python block in a process of its own, forked from a Python that imported dpopt and
its dependencies once per test process (tests/preloaded.py: 40% of a small ``dpopt solve --out`` was imports).
The bash blocks of the README and of ``docs/getting-started.md`` run line by line (backslash continuations
joined) and their Python blocks whole, each a test of the default run. Every other page runs as one test: its
blocks in the page's order (a block may read what an earlier one wrote), each bash block as one script. The
how-to pages (``docs/howto/``: what a user copies) run in the default run, without the commands of
:data:`SLOW`; the other pages (concepts, papers, reference), and the how-to pages whole, run under ``-m slow``
(each solves, verifies or releases example specs, 10–45 s on two shared cores; tests/test_specs.py solves and
verifies every spec by default). ``console`` blocks are shown, not run; the commands in :data:`SKIPPED` are
not run here, each for the stated reason."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import preloaded
from conftest import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
PAGES = [p for p in PAGES if "_build" not in p.parts]
QUICK = {ROOT / "README.md", ROOT / "docs" / "getting-started.md"}
"""Pages whose snippets run one by one in the default run: the set-up and first commands a newcomer types."""
HOWTO = ROOT / "docs" / "howto"
"""Pages run whole in the default run (without the :data:`SLOW` commands): every how-to's commands."""
BLOCK = re.compile(r"```(bash|python)\n(.*?)```", re.S)

SKIPPED = {
    'python3 -m pip install -e ".[dev,docs]"': "installs the package: the tests run on this tree already",
    "python -m pytest -q": "runs the whole test suite, this file included",
}
SLOW = {
    "bootstrap_gof(noisy, pi0, release, replicates=1000": "1000 bootstrap replicates of a private χ² test",
    "write_report(build_report(sol.certificate)": "a full report with a 50,000-draw empirical audit",
    "dpopt audit out/certificate.json": "200,000 draws per dataset and pair",
    "dpopt audit specs/survey_plan_zcdp.yaml": "the plan solved and 200,000 draws per dataset and pair "
                                              "(tests/test_plan_cli.py runs this command with 40,000 draws)",
    "dpopt report out/certificate.json --out report.html": "a full report with a 50,000-draw empirical audit",
    "dpopt.synthesize(": "measures, synthesizes, certifies and writes a folder (about 8 s; tests/test_synthesize_cli.py "
                         "covers the pipeline in the default run)",
}


def _name(page: Path) -> str:
    return str(page.relative_to(ROOT))


def snippets(text: str, by_line: bool) -> list[tuple[str, str, int]]:
    """(language, source, line) for every Python block and every bash block of a Markdown text, or every
    bash line with ``by_line``."""
    out = []
    for match in BLOCK.finditer(text):
        language, body = match.groups()
        line = text[: match.start()].count("\n") + 2
        if language == "python" or not by_line:
            out.append((language, body, line))
            continue
        for k, command in enumerate(body.replace("\\\n", " ").splitlines()):
            if command.strip():
                out.append((language, command, line + k))
    return out


def _runnable(language: str, source: str) -> str:
    """``source`` without the :data:`SKIPPED` commands (empty when nothing is left to run)."""
    lines = [c for c in source.splitlines() if not any(key in c for key in SKIPPED)]
    if not any(c.strip() for c in lines):
        return ""
    return "\n".join(lines) + "\n" if language == "bash" else source


def _params(slow: bool):
    """The snippets of the :data:`QUICK` pages, one test each."""
    for page in sorted(QUICK):
        for language, source, line in snippets(page.read_text(encoding="utf-8"), by_line=True):
            source = _runnable(language, source)
            if source and any(key in source for key in SLOW) == slow:
                yield pytest.param(language, source, _name(page), id=f"{_name(page)}:{line}:{language}")


def page_blocks(page: Path, fast: bool) -> list[tuple[str, str]]:
    """The blocks of a page in order, as (language, source); with ``fast`` the :data:`SLOW` commands are left
    out (a bash line holding one, a Python block holding one)."""
    blocks = []
    for language, source, _ in snippets(page.read_text(encoding="utf-8"), by_line=False):
        source = _runnable(language, source)
        if fast and language == "bash":
            source = _runnable(language, "\n".join(c for c in source.splitlines()
                                                    if not any(key in c for key in SLOW)))
        elif fast and any(key in source for key in SLOW):
            source = ""
        if source:
            blocks.append((language, source))
    return blocks


def _pages(slow: bool):
    for page in PAGES:
        if page in QUICK or not page_blocks(page, fast=False):
            continue
        if slow or HOWTO in page.parents:
            yield pytest.param(page, id=_name(page))


@pytest.fixture(scope="session")
def scratches() -> dict:
    """The scratch folder of each page in this test process, made by :func:`_scratch` on first use."""
    return {}


def _folder(page: str, tmp_path_factory) -> Path:
    """A new scratch folder for ``page``, with the repository's ``specs/`` and ``notebooks/``."""
    folder = tmp_path_factory.mktemp(re.sub(r"\W", "_", page))
    (folder / "specs").symlink_to(ROOT / "specs")
    (folder / "notebooks").symlink_to(ROOT / "notebooks")
    return folder


def _scratch(scratches: dict, page: str, tmp_path_factory, server: Path) -> Path:
    """The scratch folder of one :data:`QUICK` page (made once per test process), with ``out/`` as the first
    command of the getting-started page writes it, whichever snippet runs first (under xdist the order of a
    worker's tests is not the page's)."""
    if page not in scratches:
        scratches[page] = _folder(page, tmp_path_factory)
    folder = scratches[page]
    if not (folder / "out" / "certificate.json").exists():
        first = "dpopt solve specs/table_replace_gdp.yaml --out out/"
        assert _run("bash", first, folder, server).returncode == 0
    return folder


def _environment(server: Path) -> dict:
    """The snippets' environment: this tree first on ``PYTHONPATH``; on ``PATH`` the ``dpopt`` of ``server``
    (:func:`server`), then this Python's folder."""
    return {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
            "PATH": os.pathsep.join([str(server / "bin"), str(Path(sys.executable).parent),
                                     os.environ["PATH"]]),
            "MPLBACKEND": "Agg"}


@pytest.fixture(scope="session")
def server():
    """A folder with the socket of a :func:`preloaded.serve` server (one per test process) and ``bin/dpopt``,
    its client. A Unix socket's path has at most 107 bytes: the folder is a short one of the system's."""
    folder = Path(tempfile.mkdtemp(prefix="dpopt-snippets-"))
    socket_path = str(folder / "socket")
    (folder / "bin").mkdir()
    (folder / "bin" / "dpopt").write_text(preloaded.client_script(socket_path), encoding="utf-8")
    (folder / "bin" / "dpopt").chmod(0o755)
    with open(folder / "server.err", "w", encoding="utf-8") as errors:
        process = subprocess.Popen([sys.executable, "-P", preloaded.__file__, socket_path],
                                   env=_environment(folder), stdout=subprocess.PIPE, stderr=errors, text=True)
    try:
        assert process.stdout.readline() == "ready\n", (folder / "server.err").read_text(encoding="utf-8")
        yield folder
    finally:
        process.terminate()
        process.wait()
        shutil.rmtree(folder)


def _run(language: str, source: str, folder: Path, server: Path) -> subprocess.CompletedProcess:
    if language == "python":
        command = preloaded.python_command(str(server / "socket"), source)
    else:
        command = ["bash", "-euo", "pipefail", "-c", source]
    return subprocess.run(command, cwd=folder, env=_environment(server), capture_output=True, text=True,
                          timeout=600, check=False)


@pytest.mark.parametrize(("language", "source", "page"), list(_params(slow=False)))
def test_snippet_runs(language, source, page, scratches, tmp_path_factory, server):
    result = _run(language, source, _scratch(scratches, page, tmp_path_factory, server), server)
    assert result.returncode == 0, f"{page}: {source}\n--- stderr:\n{result.stderr[-3000:]}"


@pytest.mark.slow
@pytest.mark.parametrize(("language", "source", "page"), list(_params(slow=True)))
def test_slow_snippet_runs(language, source, page, scratches, tmp_path_factory, server):
    result = _run(language, source, _scratch(scratches, page, tmp_path_factory, server), server)
    assert result.returncode == 0, f"{page}: {source}\n--- stderr:\n{result.stderr[-3000:]}"


def _run_page(page: Path, fast: bool, folder: Path, server: Path) -> None:
    for language, source in page_blocks(page, fast):
        result = _run(language, source, folder, server)
        assert result.returncode == 0, f"{_name(page)}: {source}\n--- stderr:\n{result.stderr[-3000:]}"


@pytest.mark.parametrize("page", list(_pages(slow=False)))
def test_howto_page_runs(page, tmp_path_factory, server):
    _run_page(page, True, _folder(_name(page), tmp_path_factory), server)


@pytest.mark.slow
@pytest.mark.parametrize("page", list(_pages(slow=True)))
def test_page_runs_whole(page, tmp_path_factory, server):
    _run_page(page, False, _folder(_name(page), tmp_path_factory), server)


def test_a_forked_command_keeps_its_exit_code_streams_and_folder(server, tmp_path):
    """What the pages' tests rely on from tests/preloaded.py: a failing ``dpopt`` command's exit code and
    message, a Python block's exit code, output and working folder, as a new process would give them."""
    failed = _run("bash", "dpopt solve missing.yaml || test $? -eq 2", tmp_path, server)
    assert failed.returncode == 0 and "missing.yaml" in failed.stderr
    block = _run("python", "import os, sys\nprint(os.getcwd())\nsys.exit(3)\n", tmp_path, server)
    assert (block.returncode, block.stdout) == (3, f"{tmp_path}\n")


def test_every_skipped_or_slow_command_is_still_in_a_page():
    text = "".join(p.read_text(encoding="utf-8") for p in PAGES)
    assert all(key in text for key in (*SKIPPED, *SLOW))


def test_readme_is_short_and_its_links_resolve():
    """The README stays an entry point (issue 30: at most 150 lines) and every relative link in it
    names a file of the repository."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert text.count("\n") <= 150
    links = re.findall(r"\]\(([^)#:]+)\)", text)
    assert links and all((ROOT / link).is_file() for link in links), [l for l in links if not (ROOT / l).is_file()]
