"""Benchmark: the exact lattice measurement against the floating-point sampler, in the same run (issue 39).

Two releases, each designed once and released by both samplers from the same certificate parameters
(``sampler`` switched with ``from_parameters``):

* **marginals**: all 2-way marginals of ATTRIBUTES attributes of LEVELS levels (36 × 40 by default: 1,008,000
  released cells; the certificate's sampler check takes at least 20 draws in batches of 2·10⁷ entries, so its
  memory does not grow with the cells), zCDP ρ = 1, add/remove — ``marginal_gaussian``. Levels are kept at 40:
  the integer map ⊗(n_k I − J) of a 2-way component has L_T = n_a n_b, and L_T² s_T² must stay below the
  sampler's 2^30;
* **James–Stein**: ``specs/table_age_sex_gdp.yaml`` (18 cells, μ = 0.1, rotated James–Stein), RELEASES independent
  releases of one table by both samplers, and the certified worst-case error;
* **TopDown**: ``specs/hierarchy_topdown_zcdp.yaml`` on ``specs/data/hierarchy.csv`` — ``gaussian`` per level,
  the whole release (noise and post-processing) through ``release_hierarchy`` with and without
  ``sampler: floating_point``;
* **examples**: the example specs whose design this round's exact measurements changed (projected Gaussian on
  the lattice, ``gaussian_optimal`` by an integer strategy), each solved by default (exact where it can) and with
  ``sampler: floating_point``: the chosen family and sampler and the certified utility of each, and their ratio;
* **pure ε**: ``specs/marginals_5attr_2way_pure.yaml`` (``marginal_laplace``, RELEASES/10 releases) and
  ``specs/range_marginals_age_prefix_pure.yaml`` (``kronecker_laplace``, 1,000 releases) at the answers of 5,000
  random records, by the exact (discrete Laplace on integer measurements) and floating-point samplers from the same
  strategy and scale: CPU times, the certified E‖Z‖² of each and the measured one;
* **counts**: ``laplace`` on a count (add/remove) and on a 3-cell histogram (replace-one) under pure ε = 1,
  (1, 10⁻⁶), ρ = 0.5 and μ = 1, solved by default (exact: discrete Laplace of a dyadic scale t ≥ b) and with
  ``sampler: floating_point``: both scales, the certified E‖Z‖² of each and their ratio, and the CPU time of
  RELEASES releases of each; and ``query_scaling`` (``l2`` with a workload) on a 3-cell histogram under the
  Gaussian targets, the certified error of each sampler;
* **draws**: CELLS (10⁶) noise draws alone, exact N_ℤ(0, σ²) and discrete Laplace of scale σ against numpy's
  floating-point normal and Laplace, at σ = 1, 10, 1000, 2¹⁵, 2²⁰ and 2³⁰ (σ² up to 2⁶⁰, the sampler's
  largest) (CPU times; AES-CTR generator).

Printed: the load average; CPU time of the release (median of REPEATS), the ratio exact / floating point (target
≤ 3), and the error ratio: the certified expected squared error (closed form) and the measured one; for the marginals
also the noise stage alone (issue 39's target ≤ 3): the exact path's lattice draws (``_lattice_noise``) against the
floating-point path's normals for the same tables.

Run ``python benchmarks/bench_exact_noise.py [--attributes N] [--levels L]
[--only examples|laplace|counts|draws|marginals|topdown]``.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import time
from pathlib import Path

import numpy as np

import dpopt
from dpopt.mechanisms import registry
from dpopt.noise.discrete_gaussian import sample_discrete_gaussian
from dpopt.noise.discrete_laplace import sample_discrete_laplace
from dpopt.release.hierarchy import release_hierarchy
from dpopt.rng import random_source
from dpopt.spec.load import load_spec

ROOT = Path(__file__).resolve().parents[1]
REPEATS = 3


def cpu(f) -> tuple[float, object]:
    times, out = [], None
    for _ in range(REPEATS):
        start = time.process_time()
        out = f()
        times.append(time.process_time() - start)
    return statistics.median(times), out


def marginals(attributes: int, levels: int, records: int) -> None:
    names = [f"a{i}" for i in range(attributes)]
    spec = {"dpopt": 1, "name": "bench exact", "data": {"attributes": {n: [str(v) for v in range(levels)]
                                                                      for n in names}},
            "query": {"kind": "marginals", "all_of_size": 2}, "adjacency": "add_remove",
            "privacy": {"zcdp": {"rho": 1.0}}, "mechanism": "marginal_gaussian", "utility": "l2"}
    start = time.process_time()
    solution = dpopt.solve(spec)
    design_time = time.process_time() - start
    exact = solution.mechanism
    print(f"marginals: {attributes} attributes x {levels} levels, all 2-way: {exact.dimension:,} cells; "
          f"design and certificate {design_time:.1f} s CPU; sampler {exact.sampler}; peak memory "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")
    if exact.sampler != "exact":
        print(f"  no exact measurement: {exact.design_info['sampler']}")
        return
    space = dpopt.derive(dpopt.load_spec(spec))
    floating = registry()["marginal_gaussian"].from_parameters(dict(exact.parameters, sampler="floating_point"), space)
    rng = np.random.default_rng(0)
    data = rng.integers(0, levels, size=(records, attributes))
    truth = np.concatenate([np.bincount(data[:, i] * levels + data[:, j], minlength=levels * levels)
                            for i in range(attributes) for j in range(i + 1, attributes)]).astype(float)
    t_exact, y_exact = cpu(lambda: exact.release(truth, np.random.default_rng(1)))
    t_float, y_float = cpu(lambda: floating.release(truth, np.random.default_rng(1)))
    print(f"  release CPU: exact {t_exact:.2f} s, floating point {t_float:.2f} s, ratio {t_exact / t_float:.2f} "
          f"(target <= 3)")
    alg = exact.workload.algebra
    n_exact = sum(alg.size(t) for t in exact.lattice)
    n_float = sum(alg.size(t) for t in floating.coefficients)
    stage_exact, _ = cpu(lambda: exact._lattice_noise(np.random.default_rng(1), 1))
    stage_float, _ = cpu(lambda: {t: s * np.random.default_rng(1).standard_normal((1,) + alg.table_shape(t))
                                  for t, s in floating._scales().items()})
    print(f"  noise stage CPU (the draws alone): exact {stage_exact * 1e3:.1f} ms ({n_exact:,} N_Z variates in "
          f"{len(set(exact.lattice.values()))} calls), floating point {stage_float * 1e3:.1f} ms ({n_float:,} normals), "
          f"ratio {stage_exact / stage_float:.2f} (target <= 3)")
    e_exact, e_float = exact._expected_l2(None), floating._expected_l2(None)
    print(f"  certified E||Z||^2: exact {e_exact:.6g}, floating point {e_float:.6g}, ratio {e_exact / e_float:.8f}")
    print(f"  measured ||Z||^2 (one release): exact {np.sum((y_exact - truth) ** 2):.6g}, "
          f"floating point {np.sum((y_float - truth) ** 2):.6g}")


RELEASES = 100_000
"""Independent releases of the James–Stein table per timing."""


def james_stein() -> None:
    path = ROOT / "specs" / "table_age_sex_gdp.yaml"
    solution = dpopt.solve(path)
    exact = solution.mechanism
    parameters = {k: v for k, v in exact.parameters.items() if k != "lattice_privacy"}
    floating = registry()["james_stein"].from_parameters(dict(parameters, sampler="floating_point"), solution.space)
    truth = np.tile(exact.worst_case_answer(), (RELEASES, 1))
    t_exact, y_exact = cpu(lambda: exact.release(truth, np.random.default_rng(1)))
    t_float, y_float = cpu(lambda: floating.release(truth, np.random.default_rng(1)))
    print(f"James-Stein ({path.name}, {exact.variant}, sampler {exact.sampler}): {RELEASES:,} releases CPU exact "
          f"{t_exact:.2f} s, floating point {t_float:.2f} s, ratio {t_exact / t_float:.2f} (target <= 3)")
    e_exact, e_float = exact._expected_l2(None), floating._expected_l2(None)
    print(f"  certified worst-case E||error||^2: exact {e_exact:.6g}, floating point {e_float:.6g}, ratio "
          f"{e_exact / e_float:.6f}; measured at the worst case: exact "
          f"{np.mean(np.sum((y_exact - truth) ** 2, axis=1)):.6g}, floating point "
          f"{np.mean(np.sum((y_float - truth) ** 2, axis=1)):.6g}")


def pure_strategies() -> None:
    """The two pure-ε strategies (marginal_laplace, kronecker_laplace) on their examples, each released by both
    samplers from the same weights, factors and scale, at the answers of a table of counts."""
    for name, releases in (("marginals_5attr_2way_pure", RELEASES // 10), ("range_marginals_age_prefix_pure", 1000)):
        path = ROOT / "specs" / f"{name}.yaml"
        solution = dpopt.solve(path)
        exact = solution.mechanism
        parameters = {k: v for k, v in exact.parameters.items() if k != "lattice"}
        floating = registry()[exact.family].from_parameters(dict(parameters, sampler="floating_point"), solution.space)
        spec = load_spec(path)
        draw = np.random.default_rng(0)
        records = [{a: levels[draw.integers(len(levels))] for a, levels in spec.data.attributes.items()}
                   for _ in range(5000)]  # 5,000 records, each attribute's level uniform
        truth = np.tile(solution.problem.query.evaluate(records), (releases, 1))
        t_exact, y_exact = cpu(lambda: exact.release(truth, np.random.default_rng(1)))
        t_float, y_float = cpu(lambda: floating.release(truth, np.random.default_rng(1)))
        print(f"{exact.family} ({path.name}, {exact.dimension} answers): {releases:,} releases CPU exact "
              f"{t_exact:.2f} s, floating point {t_float:.2f} s, ratio {t_exact / t_float:.2f} (target <= 3)")
        e_exact, e_float = exact._expected_l2(None), floating._expected_l2(None)
        print(f"  certified E||error||^2: exact {e_exact:.8g}, floating point {e_float:.8g}, ratio "
              f"{e_exact / e_float:.6f}; measured: exact {np.mean(np.sum((y_exact - truth) ** 2, axis=1)):.6g}, "
              f"floating point {np.mean(np.sum((y_float - truth) ** 2, axis=1)):.6g}")
    e_exact, e_float = exact._expected_l2(None), floating._expected_l2(None)
    print(f"  certified E||error||^2: exact {e_exact:.8g}, floating point {e_float:.8g}, ratio {e_exact / e_float:.6f}; "
          f"measured: exact {np.mean(np.sum((y_exact - truth) ** 2, axis=1)):.6g}, floating point "
          f"{np.mean(np.sum((y_float - truth) ** 2, axis=1)):.6g}")


def topdown() -> None:
    path = ROOT / "specs" / "hierarchy_topdown_zcdp.yaml"
    data = ROOT / "specs" / "data" / "hierarchy.csv"
    spec = load_spec(path).model_dump(mode="json", exclude_none=True)
    runs = {}
    for sampler in ("exact", "floating_point"):
        document = dict(spec, sampler=sampler)
        runs[sampler] = cpu(lambda d=document: release_hierarchy(d, data, seed=4, insecure_seed=True))
    t_exact, t_float = runs["exact"][0], runs["floating_point"][0]
    print(f"TopDown ({path.name}): release CPU exact {t_exact:.2f} s, floating point {t_float:.2f} s, "
          f"ratio {t_exact / t_float:.2f} (target <= 3)")
    utilities = {s: runs[s][1].certificate["levels"]["county"]["utility"]["value"] for s in runs}
    print(f"  county level certified error: exact {utilities['exact']:.8g}, floating point "
          f"{utilities['floating_point']:.8g}, ratio {utilities['exact'] / utilities['floating_point']:.8f}")


EXAMPLES = ("census_2020_states", "census_part1_table_gdp", "sparse_histogram_intervals_zcdp", "table_2x2_margins_gdp",
            "table_3x3_margins_gdp", "table_race_sex_postprocess_gdp", "table_replace_gdp", "visits_person_level",
            "age_cumulative_optimal_gdp", "marginals_5attr_2way_pure")


def examples() -> None:
    """Each example solved exact-by-default and floating point: family, sampler, certified utility, ratio."""
    import yaml

    for name in EXAMPLES:
        document = yaml.safe_load((ROOT / "specs" / f"{name}.yaml").read_text())
        rows = []
        for sampler in (None, "floating_point"):
            sol = dpopt.solve({**document, "sampler": sampler} if sampler else document)
            mech = sol.mechanism
            rows.append((mech.family, getattr(mech, "sampler", "?"), sol.certificate["utility"]["value"],
                         getattr(mech, "refusal", None)))
        (fam, smp, value, why), (ffam, _, fvalue, _) = rows
        print(f"{name}: default {fam} ({smp}) {value:.8g}; floating point {ffam} {fvalue:.8g}; ratio "
              f"{value / fvalue:.6f}" + (f"; kept floating point: {why}" if smp != "exact" and why else ""))


COUNT_TARGETS = ({"pure": {"epsilon": 1}}, {"approx": {"epsilon": 1, "delta": 1e-6}}, {"zcdp": {"rho": 0.5}},
                 {"gdp": {"mu": 1}})
COUNT_QUERIES = (("count", {"kind": "count"}, "add_remove"),
                 ("3-cell histogram", {"kind": "histogram", "attribute": "a"}, "replace_one"))


def laplace_counts() -> None:
    """``laplace`` on counts: exact by default against ``sampler: floating_point``, certified error and CPU time."""
    releases = RELEASES
    for label, query, adjacency in COUNT_QUERIES:
        for privacy in COUNT_TARGETS:
            spec = {"dpopt": 1, "name": label, "data": {"attributes": {"a": ["x", "y", "z"]}, "n": 100},
                    "query": query, "adjacency": adjacency, "privacy": privacy, "mechanism": "laplace",
                    "utility": {"metric": "l2"}}
            out = {}
            for sampler in ("exact", "floating_point"):
                sol = dpopt.solve({**spec, "sampler": sampler})
                answer = np.full((releases, sol.mechanism.dimension), 7.0)
                seconds, _ = cpu(lambda: sol.mechanism.release(answer, np.random.default_rng(1)))
                out[sampler] = (sol.mechanism.scale, sol.certificate["utility"]["value"], seconds,
                                sol.mechanism.exact_noise)
            (te, ve, se, exact), (bf, vf, sf, _) = out["exact"], out["floating_point"]
            assert exact, (label, privacy)
            print(f"laplace, {label}, {next(iter(privacy))}: scale t = {te:.9g} (exact) vs b = {bf:.9g}; "
                  f"certified E‖Z‖² {ve:.9g} / {vf:.9g} = {ve / vf:.6f}; {releases:,} releases "
                  f"{se:.3f} s / {sf:.3f} s CPU ({se / sf:.1f}x)")
    for privacy in COUNT_TARGETS[1:]:  # query_scaling: Gaussian targets, a 3-cell histogram with a workload
        spec = {"dpopt": 1, "name": "query scaling", "data": {"attributes": {"a": ["x", "y", "z"]}},
                "query": {"kind": "histogram", "attribute": "a"}, "adjacency": "add_remove", "privacy": privacy,
                "mechanism": "query_scaling", "utility": {"metric": "l2", "workload": [[1, 0, 0], [0, 2, 0], [0, 0, 3]]}}
        values = [dpopt.solve({**spec, "sampler": s}).certificate["utility"]["value"] for s in ("exact", "floating_point")]
        print(f"query_scaling, 3-cell histogram, {next(iter(privacy))}: certified E‖WZ‖² {values[0]:.9g} / "
              f"{values[1]:.9g} = {values[0] / values[1]:.6f}")


def draws(cells: int) -> None:
    stream = random_source().stream(0)
    for sigma in (1, 10, 1000, 2**15, 2**20, 2**30):
        sample_discrete_gaussian(stream, sigma * sigma, 1, 10)  # the sampler's tables for this σ, built once
        times = {name: cpu(f)[0] for name, f in (
            ("gauss_exact", lambda: sample_discrete_gaussian(stream, sigma * sigma, 1, cells)),
            ("gauss_float", lambda: sigma * stream.standard_normal(cells)),
            ("laplace_exact", lambda: sample_discrete_laplace(stream, sigma, 1, cells)),
            ("laplace_float", lambda: stream.laplace(0.0, sigma, cells)))}
        rate = {name: cells / t / 1e6 for name, t in times.items()}
        print(f"draws of {cells:,} cells, sigma = {sigma}: discrete Gaussian {rate['gauss_exact']:.1f} M/s vs normal "
              f"{rate['gauss_float']:.1f} M/s, ratio {times['gauss_exact'] / times['gauss_float']:.1f}; discrete "
              f"Laplace {rate['laplace_exact']:.1f} M/s vs Laplace {rate['laplace_float']:.1f} M/s, ratio "
              f"{times['laplace_exact'] / times['laplace_float']:.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attributes", type=int, default=36)
    parser.add_argument("--levels", type=int, default=40)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--cells", type=int, default=1_000_000)
    parser.add_argument("--only", choices=("examples", "laplace", "counts", "draws", "marginals", "topdown"),
                        default=None, help="run one part only")
    args = parser.parse_args()
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.only == "marginals":
        marginals(args.attributes, args.levels, args.records)
        return
    if args.only == "topdown":
        topdown()
        return
    if args.only == "laplace":
        pure_strategies()
        return
    if args.only == "draws":
        draws(args.cells)
        return
    if args.only == "counts":
        laplace_counts()
        return
    examples()
    if args.only == "examples":
        return
    marginals(args.attributes, args.levels, args.records)
    james_stein()
    pure_strategies()
    laplace_counts()
    topdown()
    draws(args.cells)


if __name__ == "__main__":
    main()
