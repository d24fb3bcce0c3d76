"""OpenDP's MST (``opendp[mbi]``) on adult at ρ-zCDP, for benchmarks/bench_synthesize.py (run in its own venv).

OpenDP's mbi extra pins its own JAX, so it is not installed beside dpopt: ``bench_synthesize.py --mst-python
PYTHON`` runs this script with a Python that has ``opendp[mbi]`` and pandas, which mbi builds its records
with (e.g. ``python3 -m venv /work/mbi-venv && /work/mbi-venv/bin/pip install "opendp[mbi]" pandas``), and
reads the one JSON line it prints: the average two-way and three-way total variation distance of MST's
synthetic records from the data, the records, and the CPU and wall time of the release and the synthesis.
Every level of every column is given as a key (public: the domain), one record is the privacy unit
(add/remove), and MST's defaults are kept (90% of ρ on the measured marginals, the rest on the selection;
one-way marginals first). SEED seeds numpy's global generator (what mbi
draws records with); OpenDP's noise comes from its own CSPRNG, so two runs differ.

Records are drawn with ``synthesize(method="sample")`` (i.i.d. draws from the fitted model) by default, not
OpenDP's default ``"round"``: in mbi 1.1.0 (``MarkovRandomField.synthetic_data``) ``"round"`` gives each record of a
group of parent levels the child level at the quantile (rank + U) / count of the conditional distribution, its rank
being the record's position in the file, so every column drawn within the same groups rises with that position:
columns that should be independent given their parents come out comonotone (measured on adult at ρ = 0.1: one-way
TVD below 0.01 for every attribute, yet an average two-way TVD of 0.139, worse than independent columns' 0.0775).
METHOD ``round`` reproduces it.

Run: PYTHON benchmarks/mst_adult.py DATA_DIR RHO SEED [METHOD]
"""

from __future__ import annotations

import itertools
import json
import sys
import time
from pathlib import Path

import numpy as np


def average_tvd(records: np.ndarray, truth: np.ndarray, sizes: list[int], k: int) -> float:
    """Mean over all k-way marginals of ½‖p_records − p_truth‖₁ (as bench_synthesize.average_tvd)."""
    def table(x, axes):
        shape = [sizes[a] for a in axes]
        return np.bincount(np.ravel_multi_index([x[:, a] for a in axes], shape), minlength=int(np.prod(shape)))
    return float(np.mean([0.5 * np.abs(table(records, s) / len(records) - table(truth, s) / len(truth)).sum()
                          for s in itertools.combinations(range(len(sizes)), k)]))


def main() -> None:
    import opendp.prelude as dp
    import polars as pl

    folder, rho, seed = Path(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
    method = sys.argv[4] if len(sys.argv) > 4 else "sample"
    domain = json.loads((folder / "adult-domain.json").read_text())
    names, sizes = list(domain), list(domain.values())
    frame = pl.read_csv(folder / "adult.csv")
    truth = frame.select(names).to_numpy().astype(np.int64)
    dp.enable_features("contrib")
    np.random.seed(seed)
    cpu, wall = time.process_time(), time.perf_counter()
    context = dp.Context.compositor(data=frame.lazy(), privacy_unit=dp.unit_of(contributions=1),
                                    privacy_loss=dp.loss_of(rho=rho))
    table = (context.query(rho=rho).select(names)
             .contingency_table(keys={a: list(range(n)) for a, n in domain.items()}, algorithm=dp.mbi.MST())
             .release())
    # OpenDP adds a null level to every column's keys; a record MST draws there counts in an extra level,
    # which the data never has (mass off the domain is error)
    drawn = table.synthesize(method=method).select(names)
    off_domain = float(drawn.select(pl.any_horizontal(pl.all().is_null())).to_series().mean())
    synthetic = drawn.with_columns(pl.col(a).fill_null(n) for a, n in domain.items()).to_numpy().astype(np.int64)
    sizes = [n + 1 for n in sizes]
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    print(json.dumps({"tvd2": average_tvd(synthetic, truth, sizes, 2), "tvd3": average_tvd(synthetic, truth, sizes, 3),
                      "records": int(len(synthetic)), "off_domain": off_domain, "cpu": cpu, "wall": wall,
                      "method": method}))


if __name__ == "__main__":
    main()
