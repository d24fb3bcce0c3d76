"""``dpopt.synthesize``: the Python entry to :mod:`dpopt.synthesis.pipeline`, light to resolve.

The pipeline loads DuckDB, the certified designs and the synthesizer; it is imported when
:func:`synthesize` is first called, so that ``import dpopt`` and resolving its flat namespace stay light
(tests/test_imports.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any


def synthesize(spec: str | Path | Mapping[str, Any], data: str | Path, *, out: str | Path | None = None,
               seed: int | None = None, insecure_seed: bool = False,
               progress: Callable[[str], None] | None = None):
    """Synthetic records from certified marginals: measure (or select and measure), synthesize, certify.

    Parameters
    ----------
    spec : path or mapping
        A spec with a ``synthesize`` block (:mod:`dpopt.spec.synthesis`).
    data : path
        CSV or Parquet records, one column per attribute.
    out : path, optional
        Also write the folder (``synthetic.csv``, ``synthetic.parquet``, ``marginals.json``,
        ``certificate.json``, ``report.md``, ``residual.png``, ``report.html``), whole or not at all.
    seed, insecure_seed
        Seeded (predictable) noise for tests only: refused unless ``insecure_seed`` (:func:`dpopt.rng.random_source`).
    progress : callable, optional
        Called with a short text at each step.

    Returns
    -------
    SynthesisRelease
        ``records`` (level indices), ``labels()``, ``tables``, ``residual``, ``certificate``.

    Examples
    --------
    >>> rel = dpopt.synthesize("specs/synthesize_survey.yaml", "specs/data/survey.csv")  # doctest: +SKIP
    >>> dpopt.synthesis.verify_synthesis(rel.certificate).passed                           # doctest: +SKIP
    True
    """
    from dpopt.rng import random_source
    from dpopt.synthesis.pipeline import synthesize as run

    release = run(spec, data, randomness=random_source(seed, insecure_seed), progress=progress)
    if out is not None:
        release.write(out)
    return release
