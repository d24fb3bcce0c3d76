"""Sphinx configuration of the dpopt documentation (MyST Markdown pages, furo theme).

Build: ``python -m sphinx -W --keep-going -b html docs docs/_build/html`` (the ``docs`` extra). The paper
notebooks in ``notebooks/`` are rendered with their figures by myst-nb, which executes them at build time
(``nb_execution_mode = "cache"``: once, then from ``docs/_build/.jupyter_cache``); ``-D
nb_execution_mode=off`` renders them without outputs, as the quick build of ``tests/test_docs.py`` does.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))
sys.path.insert(0, str(HERE.parent))

project = "dpopt"
author = "the dpopt authors"
copyright = "the dpopt authors"  # noqa: A001 (Sphinx's name)

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "spec_schema",
    "cli_reference",
]

exclude_patterns = ["_build", "papers/notebooks/*.py", "papers/notebooks/.ipynb_checkpoints", "papers/notebooks/__pycache__"]
myst_enable_extensions = ["dollarmath", "colon_fence", "deflist"]
myst_heading_anchors = 3

nb_execution_mode = "cache"
nb_execution_cache_path = str(HERE / "_build" / ".jupyter_cache")
nb_execution_timeout = 600
nb_execution_raise_on_error = True
nb_render_markdown_format = "myst"  # a notebook's display(Markdown(...)) tables render as tables, not pipe text

html_static_path = ["_static"]
html_css_files = ["dpopt.css"]  # wide code blocks wrap instead of being clipped

napoleon_google_docstring = False
napoleon_numpy_docstring = True
autodoc_member_order = "bysource"
autodoc_typehints = "description"

html_theme = "furo"
html_title = "dpopt"
smartquotes = False
