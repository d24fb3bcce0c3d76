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


INLINE_FIGURES = "%matplotlib inline\n"
"""First line of a notebook's imports: figures are shown in the notebook (image/png outputs) under
Jupyter and when the tests execute it."""


def reference_cell(citation: str):
    """A markdown cell citing the reproduced paper (authors, title, venue, year)."""
    from nbformat.v4 import new_markdown_cell

    return new_markdown_cell(
        f"**Paper reproduced.** {citation}\n\n"
        "Values called *digest* below were computed independently of dpopt from the paper's own formulas (numpy, "
        "scipy) when the paper was read for this project; they are written out in the cells that use them."
    )


def comparison_cells(rows: str):
    """A heading and a code cell that shows, as a table, the numbers the paper prints next to dpopt's.

    ``rows`` is Python source assigning ``rows = [(quantity, paper's value (str), dpopt's value (str),
    agreement (str)), ...]`` from the notebook's variables.
    """
    from nbformat.v4 import new_code_cell, new_markdown_cell

    return [
        new_markdown_cell("## The paper's published numbers against dpopt"),
        new_code_cell(
            rows + "\n"
            "from IPython.display import Markdown, display\n"
            "display(Markdown('| quantity | the paper | dpopt | agreement |\\n|---|---|---|---|\\n'\n"
            "                 + '\\n'.join('| ' + ' | '.join(map(str, row)) + ' |' for row in rows)))"
        ),
    ]
