"""The documentation site builds clean, its references are generated from the code, and a browser shows it.

The site is built once per test run (shared by the xdist workers through a lock file) with warnings as
errors (``sphinx-build -W --keep-going``): a page outside every toctree, a broken cross-reference between
pages (MyST resolves ``[text](page.md)`` and ``page.md#anchor`` links and warns when the target is
missing) or a docstring autodoc cannot read fails it. The notebooks are rendered without executing them
here (``-D nb_execution_mode=off``; tests/test_notebooks.py executes them); the slow test builds the full
site, notebooks executed, and counts their figures. The snippets of the pages are run by
tests/test_snippets.py. Skipped where the ``docs`` extra is not installed.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import ROOT

pytest.importorskip("sphinx")
pytest.importorskip("myst_nb")
pytest.importorskip("furo")

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
BROWSER = next((shutil.which(b) for b in BROWSERS if shutil.which(b)), None)
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars"]


def build(target: Path, *options: str, source: Path = ROOT / "docs") -> subprocess.CompletedProcess:
    """``sphinx-build -W --keep-going -b html`` of ``source`` into ``target`` (a fresh environment)."""
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "MPLBACKEND": "Agg"}
    command = [sys.executable, "-m", "sphinx", "-E", "-W", "--keep-going", "-q", "-b", "html", *options,
               str(source), str(target)]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=900, check=False)


@pytest.fixture(scope="session")
def site(tmp_path_factory) -> Path:
    """The quick build (notebooks not executed), made by whichever worker asks first."""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    shared = tmp_path_factory.getbasetemp().parent / f"docs-{run}" if run else tmp_path_factory.mktemp("docs")
    shared.mkdir(exist_ok=True)
    with open(shared / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (shared / "stderr.txt").exists():
            result = build(shared / "html", "-D", "nb_execution_mode=off")
            (shared / "returncode.txt").write_text(str(result.returncode))
            (shared / "stderr.txt").write_text(result.stderr)
    return shared


def _text(page: Path) -> str:
    """The visible text of an HTML page, whitespace collapsed."""
    import html

    body = re.sub(r"<script.*?</script>|<style.*?</style>", " ", page.read_text(encoding="utf-8"), flags=re.S)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", body)).split())


def test_docs_build_without_a_warning(site):
    stderr = (site / "stderr.txt").read_text()
    assert (site / "returncode.txt").read_text() == "0" and "WARNING" not in stderr and "ERROR" not in stderr, \
        stderr[-5000:]
    for page in ("index", "getting-started", "howto/index", "howto/table-with-invariants", "reference/spec",
                 "reference/cli", "reference/api", "papers/semi-dp", "papers/notebooks/semi_dp", "performance"):
        assert (site / "html" / f"{page}.html").is_file(), page


def test_every_howto_page_is_in_the_howto_index(site):
    # the how-to toctree is a glob: a page another author adds appears without editing the index
    index = (site / "html" / "howto" / "index.html").read_text(encoding="utf-8")
    for page in (ROOT / "docs" / "howto").glob("*.md"):
        if page.stem != "index":
            assert f'href="{page.stem}.html"' in index, page.name


def test_spec_reference_lists_every_key_of_the_models(site):
    from dpopt.spec.models import Plan, Spec

    text = _text(site / "html" / "reference" / "spec.html")
    assert "Spec: top-level keys" in text and "Plan: top-level keys" in text
    for model in (Spec, Plan):
        for key in model.model_fields:
            assert f" {key} " in text, key
    for kind in ("count", "histogram", "contingency_table", "marginals", "linear", "sum", "mean"):
        assert f"query (kind: {kind})" in text
    assert "# from specs/" in text  # the examples are quoted from the example specs


def test_cli_reference_lists_every_command_and_option(site):
    import argparse

    from dpopt.cli import build_parser

    text = _text(site / "html" / "reference" / "cli.html")

    def walk(parser: argparse.ArgumentParser, name: str):
        yield name, parser
        for action in parser._actions:  # noqa: SLF001
            if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
                for sub, subparser in action.choices.items():
                    yield from walk(subparser, f"{name} {sub}")

    commands = list(walk(build_parser(), "dpopt"))
    assert {"dpopt solve", "dpopt verify", "dpopt release", "dpopt report", "dpopt ledger init"} <= dict(commands).keys()
    for name, parser in commands:
        assert f"usage: {name}" in text, name
        for action in parser._actions:  # noqa: SLF001
            if not isinstance(action, argparse._HelpAction):  # noqa: SLF001
                assert all(option in text for option in action.option_strings), (name, action.option_strings)


PROBE_MODELS = '''
from pydantic import Field
from dpopt.spec.models import Spec
from dpopt.cli import build_parser


class ProbeSpec(Spec):
    """A spec with one key more."""

    survey_wave: int = Field(default=3, description="the wave of the survey the records come from")


def probe_parser():
    parser = build_parser()
    parser.add_argument("--probe-flag", help="an option added after the page was written")
    return parser
'''


def test_a_key_added_to_the_model_appears_in_the_reference(tmp_path):
    # a model with one field more, and a parser with one option more, rendered by the same directives as
    # docs/reference/*.md, on a page that names neither
    (tmp_path / "probe_models.py").write_text(PROBE_MODELS)
    (tmp_path / "conf.py").write_text(
        "import sys\n"
        f"sys.path[:0] = [{str(ROOT / 'docs' / '_ext')!r}, {str(tmp_path)!r}]\n"
        "extensions = ['spec_schema', 'cli_reference']\n")
    (tmp_path / "index.rst").write_text("Probe\n=====\n\n.. spec-schema:: probe_models.ProbeSpec\n   :sections: (top level)\n\n"
                                        ".. cli-reference:: probe_models.probe_parser\n")
    result = build(tmp_path / "html", source=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    text = _text(tmp_path / "html" / "index.html")
    assert "survey_wave integer 3" in text and "the wave of the survey the records come from" in text
    assert "--probe-flag" in text and "an option added after the page was written" in text


def _screenshot(page: Path, shot: Path, profile: Path) -> np.ndarray:
    from matplotlib.image import imread

    subprocess.run([BROWSER, *FLAGS, f"--user-data-dir={profile}", "--window-size=1280,1600",
                    f"--screenshot={shot}", page.as_uri()], capture_output=True, text=True, timeout=180, check=False)
    assert shot.is_file() and shot.stat().st_size > 20_000, shot
    return imread(shot)


@pytest.mark.skipif(BROWSER is None, reason="no Chromium or Chrome on PATH (Debian: apt-get install chromium)")
@pytest.mark.parametrize("page", ["index", "howto/table-with-invariants"])
def test_browser_screenshot_of_the_site(site, page, tmp_path):
    """Headless Chromium renders the page: a PNG of the window, with the theme's layout (a sidebar and a
    body of text: many distinct colours, mostly light background) rather than a blank or error page."""
    shot = tmp_path / f"{page.replace('/', '_')}.png"
    pixels = _screenshot(site / "html" / f"{page}.html", shot, tmp_path / "profile")
    assert pixels.shape[:2] == (1600, 1280)
    rgb = (pixels[..., :3] * 255).astype(np.uint8).reshape(-1, 3)
    colours = len(np.unique(rgb, axis=0))
    dark = float((rgb.mean(axis=1) < 100).mean())  # text
    assert colours > 50 and 0.002 < dark < 0.3, (colours, dark)
    keep = os.environ.get("DPOPT_DOCS_SCREENSHOTS")
    if keep:
        shutil.copy(shot, Path(keep) / shot.name)


@pytest.mark.slow
def test_full_build_renders_the_notebooks_with_their_figures(tmp_path):
    """The documented build (notebooks executed by myst-nb) is clean and shows every notebook's figures."""
    result = build(tmp_path / "html", "-D", f"nb_execution_cache_path={tmp_path / 'cache'}")
    assert result.returncode == 0, result.stderr[-5000:]
    for notebook in (ROOT / "notebooks").glob("*.ipynb"):
        page = (tmp_path / "html" / "papers" / "notebooks" / f"{notebook.stem}.html").read_text(encoding="utf-8")
        assert page.count("<img") >= 1, notebook.stem
    # issue 37: the "paper vs dpopt" tables (display(Markdown(...)) in every notebook) were raw pipe text
    tables = {nb.stem: (tmp_path / "html" / "papers" / "notebooks" / f"{nb.stem}.html").read_text(encoding="utf-8")
              for nb in (ROOT / "notebooks").glob("*.ipynb")}
    assert tables and all("<table" in page and "<th class=\"head\"><p>quantity</p></th>" in page
                          for page in tables.values()), \
        [k for k, page in tables.items() if "<table" not in page]
