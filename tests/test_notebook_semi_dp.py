"""Execute notebooks/semi_dp.ipynb: its cells assert the paper's and the digest's values
(Cho & Awan, invariants and Semi-DP)."""

from __future__ import annotations

import nbformat
from conftest import ROOT
from nbclient import NotebookClient


def test_semi_dp_notebook_runs():
    path = ROOT / "notebooks" / "semi_dp.ipynb"
    notebook = nbformat.read(path, as_version=4)
    NotebookClient(
        notebook, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    ).execute()
    outputs = "".join(
        o.get("text", "") for c in notebook.cells if c.cell_type == "code" for o in c.get("outputs", [])
    )
    assert "verified: True" in outputs
