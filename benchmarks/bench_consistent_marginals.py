"""Consistent non-negative marginals: least squares vs dpopt's projection vs Private-PGM (mbi).

A synthetic person table with structure (a chain: each attribute drawn given the previous one
from Dirichlet(0.3) conditionals, so many cells are small or empty) is released through
dpopt's certified ``marginal_gaussian`` design for all two-way marginals (ρ = 1, add/remove);
the same noisy tables are then estimated by

(i)   least squares in marginal space (the release itself: its noise lies in range(W));
(ii)  dpopt's projection onto non-negative tables that agree on shared attributes
      (:mod:`dpopt.postprocess.marginals`), and its consistent rounding to integers;
(iii) Private-PGM (``mbi``, McKenna et al. 2019), mirror descent with the l2 loss weighted
      by each table's noise standard deviation: exact inference (one junction-tree clique
      holding the whole domain) where the domain is small, convex generalized belief
      propagation (Relaxed Marginal Consistency, McKenna et al. 2021) otherwise.

For each it prints the l1 and l2 error against the true tables (mean per table and total),
the worst table, and the run time. mbi is not a dpopt dependency (it is not on PyPI): the
script skips it cleanly when ``import mbi`` fails.

Run: python benchmarks/bench_consistent_marginals.py [--records 20000] [--seed 1] [--mbi-iters 1000]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import dpopt
from dpopt.postprocess.marginals import consistent_rounding, nonnegative_projection

SMALL = {f"a{k}": [f"v{j}" for j in range(n)] for k, n in enumerate((4, 3, 5, 2, 6, 3, 4, 5))}
"""8 attributes, 43,200 cells: small enough for mbi's exact inference."""

LARGE_SPEC = "specs/marginals_10attr_2way_zcdp.yaml"
"""10 attributes, 1.47·10⁹ cells: mbi needs approximate inference."""


def spec_of(attributes: dict) -> dict:
    return {"dpopt": 1, "name": "all two-way marginals", "data": {"attributes": attributes},
            "query": {"kind": "marginals", "all_of_size": 2}, "adjacency": "add_remove",
            "privacy": {"zcdp": {"rho": 1}}, "mechanism": "marginal_gaussian", "utility": "l2"}


def chain_records(sizes: tuple[int, ...], records: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Level codes of ``records`` rows: a0 uniform, a_k | a_{k−1} from Dirichlet(0.3) conditionals."""
    cols = [rng.integers(0, sizes[0], records)]
    for k in range(1, len(sizes)):
        cumulative = rng.dirichlet(np.full(sizes[k], 0.3), size=sizes[k - 1]).cumsum(axis=1)
        u = rng.random(records)
        cols.append(np.minimum((u[:, None] > cumulative[cols[-1]]).sum(axis=1), sizes[k] - 1))
    return cols


def true_tables(workload, cols: list[np.ndarray]) -> list[np.ndarray]:
    alg = workload.algebra
    return [np.bincount(np.ravel_multi_index([cols[k] for k in s], alg.table_shape(s)),
                        minlength=alg.size(s)).reshape(alg.table_shape(s)) for s in workload.sets]


def errors(workload, estimate: np.ndarray, truth: np.ndarray) -> str:
    diff = estimate - truth
    per = [diff[a:b] for a, b in zip(workload.offsets[:-1], workload.offsets[1:])]
    l1 = np.array([np.abs(p).sum() for p in per])
    l2 = np.array([np.sqrt((p ** 2).sum()) for p in per])
    return (f"l1 per table {l1.mean():9.1f} (worst {l1.max():8.1f}), total {l1.sum():10.1f}; "
            f"l2 per table {l2.mean():7.2f} (worst {l2.max():7.2f}), total sq {np.sum(l2 ** 2):10.1f}")


def run_mbi(workload, names: list[str], noisy: np.ndarray, sd: np.ndarray, exact: bool, iters: int):
    """Private-PGM's estimate of every workload table (or the reason it did not run)."""
    try:
        from mbi import Domain, LinearMeasurement, approximate_oracles, estimation
    except ImportError:
        return None, "mbi not installed (fetch ryan112358/private-pgm and pip install it to compare)"
    domain = Domain(names, workload.algebra.sizes)
    tables = workload.tables(noisy)
    measurements = [LinearMeasurement(t.reshape(-1), tuple(names[k] for k in s), float(sd[workload.offsets[i]]))
                    for i, (s, t) in enumerate(zip(workload.sets, tables))]
    if exact:
        model = estimation.mirror_descent(domain, measurements, iters=iters)
    else:
        model = estimation.mirror_descent(domain, measurements, iters=iters, stateful=True, stepsize=5e-4,
                                          marginal_oracle=approximate_oracles.convex_generalized_belief_propagation)
    out = [np.asarray(model.project([names[k] for k in s]).datavector()).reshape(workload.algebra.table_shape(s))
           for s in workload.sets]
    return workload.vector(out), "exact inference" if exact else "convex generalized belief propagation"


def compare(title: str, spec: dict, records: int, seed: int, iters: int, exact_mbi: bool) -> None:
    solution = dpopt.solve(spec)
    workload = solution.problem.query.workload
    names = list(solution.problem.query.attributes)
    rng = np.random.default_rng(seed)
    truth = workload.vector(true_tables(workload, chain_records(workload.algebra.sizes, records, rng)))
    noisy = solution.mechanism.release(truth, rng=rng)
    print(f"\n{title}: {len(workload.blocks)} tables, {workload.dimension} cells, domain {workload.algebra.cells:.3g}; "
          f"{records} records, {int((truth == 0).sum())} empty cells; certified E‖noise‖² = "
          f"{solution.certificate['utility']['value']:.1f}")
    print(f"  (i)   least squares        {errors(workload, noisy, truth)}; {int((noisy < 0).sum())} negative cells")
    start = time.perf_counter()
    projected = nonnegative_projection(workload, noisy)
    middle = time.perf_counter()
    rounded, _ = consistent_rounding(workload, projected)
    end = time.perf_counter()
    print(f"  (ii)  dpopt projection     {errors(workload, projected, truth)}; {middle - start:.2f} s")
    print(f"        + consistent integers {errors(workload, rounded, truth)}; {end - middle:.2f} s more")
    sd = np.sqrt(solution.mechanism.cell_variances())
    start = time.perf_counter()
    estimate, how = run_mbi(workload, names, noisy, sd, exact_mbi, iters)
    if estimate is None:
        print(f"  (iii) mbi: skipped, {how}")
    else:
        print(f"  (iii) mbi ({how}, {iters} iterations) {errors(workload, estimate, truth)}; "
              f"{time.perf_counter() - start:.2f} s; {int((estimate < -1e-9).sum())} negative cells")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--mbi-iters", type=int, default=1000)
    args = parser.parse_args()
    compare("8 attributes", spec_of(SMALL), args.records, args.seed, args.mbi_iters, exact_mbi=True)
    large = dpopt.load_spec(LARGE_SPEC).model_dump(mode="json", exclude_none=True)
    compare("10 attributes (specs/marginals_10attr_2way_zcdp.yaml)", large, args.records, args.seed, args.mbi_iters,
            exact_mbi=False)


if __name__ == "__main__":
    main()
