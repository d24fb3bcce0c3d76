"""Write a notebook from its cells: the one place the ``build_*.py`` scripts share."""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbformat.v4 import new_notebook

KERNELSPEC = {"name": "python3", "display_name": "Python 3", "language": "python"}


def write_notebook(cells: list, name: str) -> Path:
    """Validate and write ``notebooks/<name>.ipynb`` (kernel python3) and return its path."""
    path = Path(__file__).with_name(f"{name}.ipynb")
    notebook = new_notebook(cells=cells, metadata={"kernelspec": KERNELSPEC})
    nbformat.validate(notebook)
    nbformat.write(notebook, str(path))
    return path
