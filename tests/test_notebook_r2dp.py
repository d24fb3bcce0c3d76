"""Execute notebooks/r2dp.ipynb: its cells assert the digest's values (Mohammady et al. 2020)."""

from __future__ import annotations

import nbformat
from conftest import ROOT
from nbclient import NotebookClient


def test_r2dp_notebook_runs():
    path = ROOT / "notebooks" / "r2dp.ipynb"
    notebook = nbformat.read(path, as_version=4)
    NotebookClient(
        notebook, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    ).execute()
    outputs = "".join(
        o.get("text", "") for c in notebook.cells if c.cell_type == "code" for o in c.get("outputs", [])
    )
    assert "verified: True" in outputs
    assert "Thm B.2" in outputs
