"""A stand-in for :func:`dpopt.synth.synthesize_records` (same signature) for the pipeline's tests.

It samples each attribute independently from its one-way margin of the first table that holds it, and
reports the residual as the real one is specified: the L1 gap between the records' tabulation and each
given table. It is never shipped in ``dpopt/``; at merge the real synthesizer replaces it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class SynthesisResult:
    records: np.ndarray
    residual: dict
    method: str


def synthesize_records(domain, marginals, n, rng, weights=None, progress=None, *, exact=True, targets=None):
    names = list(domain)
    columns = []
    for j, a in enumerate(names):
        clique = next((k for k in marginals if a in k), None)
        if clique is None:
            p = np.full(domain[a], 1.0 / domain[a])
        else:
            t = np.asarray(marginals[clique], float)
            p = t.sum(axis=tuple(i for i in range(t.ndim) if clique[i] != a)).clip(min=0)
            p = p / p.sum() if p.sum() > 0 else np.full(domain[a], 1.0 / domain[a])
        columns.append(rng.choice(domain[a], size=n, p=p))
    records = np.stack(columns, axis=1).astype(np.int32) if n else np.zeros((0, len(names)), np.int32)
    residual = {}
    for clique, table in marginals.items():
        idx = [names.index(a) for a in clique]
        counts = np.zeros(np.shape(table))
        np.add.at(counts, tuple(records[:, i] for i in idx), 1)
        residual[clique] = float(np.abs(counts - np.asarray(table, float)).sum())
    return SynthesisResult(records, residual, "independent columns (test fake)")
