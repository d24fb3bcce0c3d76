"""Every example spec in specs/ solves, writes its files, and verifies through the CLI."""

from __future__ import annotations

import json

import pytest

from conftest import SPECS
from dpopt.cli import main


@pytest.mark.parametrize("path", SPECS, ids=[p.stem for p in SPECS])
def test_example_spec_solves_and_verifies(path, tmp_path, capsys):
    out = tmp_path / path.stem
    assert main(["solve", str(path), "--out", str(out), "--quiet"]) == 0
    for name in ("mechanism.json", "certificate.json", "report.md"):
        assert (out / name).is_file()
    cert = json.loads((out / "certificate.json").read_text())
    assert all(check["passed"] for check in cert["checks"])
    capsys.readouterr()
    assert main(["verify", str(out / "certificate.json")]) == 0
    assert "certificate holds" in capsys.readouterr().out
