"""Benchmark: ``kronecker_gaussian`` measured exactly on the lattice against its floating-point sampler (issue 39).

For each example spec (``specs/kronecker_age_ranges_sex_region_gdp.yaml``, μ-GDP, replace-one, 80 cells;
``specs/range_marginals_age_prefix_zcdp.yaml``, ρ-zCDP, add/remove, 771 million cells) the design is solved twice in
the same run, with ``sampler: exact`` (the default) and ``sampler: floating_point``, and printed:

* the certified expected squared error E‖Z‖² of each (closed form) and their ratio; the lattice's cost against the
  same blocks with unrounded factors and continuous noise (``lattice_rounding_ratio`` of the design record);
* the scales of the rounded factors and the largest lattice variance (the range caps: 2²² under μ-GDP, where
  the discrete Gaussian's slope is certified, 2⁴² under ρ-zCDP, served by the sampler beyond int64);
* CPU time of the solve, of ``dpopt.verify`` (the GDP slopes' cache cleared first, as in a fresh ``dpopt verify``),
  and of max(20, VALUES/d) releases of one table through ``Mechanism.release``, exact and floating point, and the
  measured mean squared error of those releases.

The truth is the answers of RECORDS random records (``KroneckerQuery.evaluate``: the supports' marginals, never the
cells). Run ``python benchmarks/bench_exact_kronecker.py``.
"""

from __future__ import annotations

import json
import time
from fractions import Fraction
from pathlib import Path

import numpy as np

import dpopt
from dpopt.domain.queries import compile_query
from dpopt.privacy.discrete_gaussian_gdp import unit_shift_gdp
from dpopt.spec.load import read_document

ROOT = Path(__file__).resolve().parents[1]
SPECS = ("kronecker_age_ranges_sex_region_gdp.yaml", "range_marginals_age_prefix_zcdp.yaml")
VALUES = 2_000_000
"""Released values per timing: max(20, VALUES // d) releases of one table, at most 20,000."""
RECORDS = 5000


def cpu(f):
    start = time.process_time()
    out = f()
    return time.process_time() - start, out


def truth_of(spec) -> np.ndarray:
    rng = np.random.default_rng(1)
    attributes = spec.data.attributes
    records = [{a: levels[rng.integers(len(levels))] for a, levels in attributes.items()} for _ in range(RECORDS)]
    return compile_query(spec).evaluate(records)


def main() -> None:
    for name in SPECS:
        document = read_document(ROOT / "specs" / name)
        solved = {}
        for sampler in ("exact", "floating_point"):
            seconds, solution = cpu(lambda: dpopt.solve({**document, "sampler": sampler}))
            solved[sampler] = (seconds, solution)
        exact, floating = solved["exact"][1], solved["floating_point"][1]
        design = exact.mechanism.parameters["design"]
        assert exact.mechanism.sampler == "exact", design.get("sampler")
        unit_shift_gdp.cache_clear()
        verify_seconds, result = cpu(lambda: dpopt.verify(json.loads(exact.certificate.to_json())))
        truth = truth_of(exact.spec)
        releases = min(20_000, max(20, VALUES // exact.mechanism.dimension))
        timings, errors = {}, {}
        for sampler, solution in (("exact", exact), ("floating_point", floating)):
            rng = np.random.default_rng(7)
            seconds, out = cpu(lambda: solution.mechanism.release(np.tile(truth, (releases, 1)), rng))
            timings[sampler], errors[sampler] = seconds, float(np.mean(np.sum((out - truth) ** 2, axis=1)))
        e_exact, e_float = exact.certificate["utility"]["value"], floating.certificate["utility"]["value"]
        largest = max(Fraction(b["sigma2"]) for b in exact.mechanism.parameters["lattice"]["blocks"])
        print(f"{name}: {exact.mechanism.dimension} answers, {exact.spec.privacy.definition}")
        print(f"  certified E‖Z‖²: exact {e_exact:.8g}, floating point {e_float:.8g}, ratio {e_exact / e_float:.6f}")
        print(f"  against the same blocks unrounded with continuous noise: {design['lattice_rounding_ratio']:.6f} "
              f"(scales {design['lattice_scales']}, largest σ_ℤ² = {float(largest):.6g})")
        print(f"  solve CPU: exact {solved['exact'][0]:.2f} s, floating point {solved['floating_point'][0]:.2f} s; "
              f"verify (exact) {verify_seconds:.2f} s, {'holds' if result.passed else 'FAILS'}")
        print(f"  {releases} releases CPU: exact {timings['exact']:.3f} s, floating point {timings['floating_point']:.3f} s "
              f"({timings['exact'] / timings['floating_point']:.2f}×); measured mean ‖error‖²: exact "
              f"{errors['exact']:.6g}, floating point {errors['floating_point']:.6g}")


if __name__ == "__main__":
    main()
