"""Execute notebooks/k_norm.ipynb: its cells assert the expected costs behind the K-norm part
of Cho & Awan's Figure 3 (digest §6.3) and a 30-replicate simulation of it."""

from __future__ import annotations

import nbformat
from conftest import ROOT
from nbclient import NotebookClient


def test_k_norm_notebook_runs():
    path = ROOT / "notebooks" / "k_norm.ipynb"
    notebook = nbformat.read(path, as_version=4)
    NotebookClient(
        notebook, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    ).execute()
    outputs = "".join(
        o.get("text", "") for c in notebook.cells if c.cell_type == "code" for o in c.get("outputs", [])
    )
    assert "verified: True" in outputs
