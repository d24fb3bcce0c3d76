"""Consistent, non-negative, integer marginal tables in marginal space (dpopt.postprocess.marginals).

References, each independent of the code under test:
* the dense workload matrix W built cell by cell by enumeration (test_marginal_gaussian.dense_workload);
* for a decomposable workload ({a,b}, {b,c}: a junction tree, where locally consistent non-negative
  tables are exactly the marginals of a non-negative table), scipy's Lawson–Hanson NNLS over the
  whole histogram, min ‖W h − y‖ over h ≥ 0;
* for a non-decomposable one (the three two-way margins of a 3-way table), Dykstra's alternating
  projections between range(W) (numpy pseudo-inverse) and the orthant, run to convergence;
* per-marginal errors against Monte Carlo over the mechanism's own sampler and over i.i.d. noise
  made consistent by a dense numpy least squares.
"""

from __future__ import annotations

import csv
import itertools
import json
import math

import numpy as np
import pytest
from scipy.optimize import nnls
from test_marginal_gaussian import dense_workload

import dpopt
from dpopt.cli import main
from dpopt.domain.marginal_algebra import MarginalAlgebra, MarginalWorkload
from dpopt.mechanisms.marginal_errors import per_marginal_errors
from dpopt.mechanisms.marginal_gaussian import target_mu, variance_coefficients
from dpopt.postprocess import marginals
from dpopt.postprocess.marginals import (
    agreement_matrix,
    consistent_rounding,
    exact_margins,
    marginal_checks,
    noise_free_sets,
    nonnegative_projection,
    postprocess_marginals,
    uses_marginal_space,
)
from dpopt.report.marginal_table import marginal_error_rows
from dpopt.spec.models import Postprocess

SIZES = (3, 2, 4)
CHAIN = ((0, 1), (2, 1))  # {a,b}, {c,b} (listed order differs from sorted order on purpose)
TRIANGLE = ((0, 1), (1, 2), (0, 2))


def noisy_release(blocks, seed, scale=3.0, records=12):
    """Marginals of a sparse random table plus i.i.d. noise (so many cells go negative)."""
    rng = np.random.default_rng(seed)
    w = dense_workload(SIZES, blocks)
    h = np.bincount(rng.integers(0, w.shape[1], records), minlength=w.shape[1]).astype(float)
    return w, h, w @ h + scale * rng.standard_normal(w.shape[0])


def dykstra(w: np.ndarray, y: np.ndarray, iterations: int = 200_000) -> np.ndarray:
    """Euclidean projection of y onto range(W) ∩ {μ ≥ 0} by Dykstra's algorithm (dense numpy)."""
    p_range = w @ np.linalg.pinv(w)
    x, p, q = y.copy(), np.zeros_like(y), np.zeros_like(y)
    for _ in range(iterations):
        z = p_range @ (x + p)
        p = x + p - z
        x_new = np.maximum(z + q, 0.0)
        q = z + q - x_new
        if np.abs(x_new - x).max() < 1e-12:
            return x_new
        x = x_new
    return x


@pytest.mark.parametrize("blocks", [CHAIN, TRIANGLE, ((0, 1, 2), (0, 1))])
def test_agreement_equations_are_exactly_the_range_of_w(blocks):
    w = dense_workload(SIZES, blocks)
    k = agreement_matrix(MarginalWorkload(MarginalAlgebra(SIZES), blocks)).toarray()
    assert np.abs(k @ w).max() == 0  # every W h agrees
    rank_w = np.linalg.matrix_rank(w)
    assert np.linalg.matrix_rank(k) == w.shape[0] - rank_w  # and nothing else does


@pytest.mark.parametrize("seed", range(4))
def test_projection_on_a_junction_tree_equals_nnls_over_the_histogram(seed):
    w, _, y = noisy_release(CHAIN, seed)
    mu = nonnegative_projection(MarginalWorkload(MarginalAlgebra(SIZES), CHAIN), y)
    h, _ = nnls(w, y)
    assert np.allclose(mu, w @ h, atol=1e-6)


@pytest.mark.parametrize("seed", range(3))
def test_projection_of_three_two_way_margins_equals_dykstra(seed):
    w, h, y = noisy_release(TRIANGLE, seed)
    workload = MarginalWorkload(MarginalAlgebra(SIZES), TRIANGLE)
    mu = nonnegative_projection(workload, y)
    assert np.allclose(mu, dykstra(w, y), atol=1e-5)
    # non-expansive, the truth being in the set: never farther from the truth than the release
    assert np.linalg.norm(mu - w @ h) <= np.linalg.norm(y - w @ h) + 1e-9


@pytest.mark.parametrize("blocks", [CHAIN, TRIANGLE])
def test_rounding_is_integer_nonnegative_consistent_and_within_one(blocks):
    w, _, y = noisy_release(blocks, 7)
    workload = MarginalWorkload(MarginalAlgebra(SIZES), blocks)
    mu = nonnegative_projection(workload, y)
    z, route = consistent_rounding(workload, mu)
    assert z.dtype == np.int64 and z.min() >= 0
    assert np.abs(z - mu).max() < 1 and "0/1" in route
    coefficients, *_ = np.linalg.lstsq(w, z, rcond=None)  # z is the marginals of one real table
    assert np.allclose(w @ coefficients, z, atol=1e-8)
    assert all(c.passed for c in marginal_checks(workload, z))


def test_checks_catch_tables_that_disagree():
    workload = MarginalWorkload(MarginalAlgebra(SIZES), CHAIN)
    z = np.ones(workload.dimension, dtype=np.int64)  # a×b sums to 2 per level of b, c×b to 4
    failed = {c.claim for c in marginal_checks(workload, z) if not c.passed}
    assert failed == {"postprocess.consistent"}


def test_public_total_is_kept_by_projection_and_rounding():
    w, h, y = noisy_release(TRIANGLE, 3, records=20)
    workload = MarginalWorkload(MarginalAlgebra(SIZES), TRIANGLE)
    exact = exact_margins(workload, y, (), total=20)
    z = postprocess_marginals(workload, y, Postprocess(), total=20).table
    assert exact.values.tolist() == [20]
    sums = [int(z[a:b].sum()) for a, b in zip(workload.offsets[:-1], workload.offsets[1:])]
    assert sums == [20, 20, 20]


def test_replace_one_keeps_the_exact_total_of_the_release():
    # marginal_gaussian under replace-one releases the grand total without noise: the post-processed
    # tables keep the number of records
    attributes = {"a": ["0", "1", "2"], "b": ["0", "1"], "c": ["0", "1", "2", "3"]}
    sol = dpopt.solve({"dpopt": 1, "name": "t", "data": {"attributes": attributes},
                       "query": {"kind": "marginals", "all_of_size": 2}, "adjacency": "replace_one",
                       "privacy": {"zcdp": {"rho": 0.5}}, "mechanism": "marginal_gaussian", "utility": "l2"})
    w, h, _ = noisy_release(TRIANGLE, 5, records=30)
    workload = sol.problem.query.workload
    assert noise_free_sets(sol.mechanism) == ((),)
    truth = dense_workload(SIZES, workload.blocks) @ h
    noisy = sol.mechanism.release(truth, rng=np.random.default_rng(0))
    result = postprocess_marginals(workload, noisy, Postprocess(), noise_free_sets(sol.mechanism))
    sums = {int(result.table[a:b].sum()) for a, b in zip(workload.offsets[:-1], workload.offsets[1:])}
    assert sums == {30} and result.passed


def test_per_marginal_errors_match_monte_carlo():
    # certified: the mechanism's own sampler; direct + least squares: i.i.d. N(0, Δ₂²/μ²) on every cell,
    # projected by a dense numpy least squares. 20,000 draws; each figure is a mean of per-draw squared
    # norms, within 4 standard errors (sample s.d. / √draws) of the closed form.
    attributes = {"a": ["0", "1", "2"], "b": ["0", "1"], "c": ["0", "1", "2", "3"]}
    for adjacency in ("add_remove", "replace_one"):
        spec = {"dpopt": 1, "name": "t", "data": {"attributes": attributes},
                "query": {"kind": "marginals", "all_of_size": 2}, "adjacency": adjacency,
                "privacy": {"zcdp": {"rho": 1}}, "mechanism": "marginal_gaussian", "utility": "l2"}
        sol = dpopt.solve(spec)
        workload, mech = sol.problem.query.workload, sol.mechanism
        mu = target_mu(sol.spec.privacy)
        l2 = math.sqrt(float(sol.problem.space.l2_squared))
        variances = variance_coefficients(workload, mech.coefficients, mech.sampler)  # on the lattice under zCDP
        rows = per_marginal_errors(workload, variances, mu, l2, mech.replace, mech.multiplier, "abc")
        rng = np.random.default_rng(2026)
        draws = 20_000
        z = mech.sample(draws, rng=rng)
        w = dense_workload(SIZES, workload.blocks)
        direct = (l2 / mu) * rng.standard_normal((draws, w.shape[0]))
        if adjacency == "replace_one":  # least squares with the total known: project orthogonally to the total's direction
            w = w - np.outer(w.sum(axis=1), np.ones(w.shape[1])) / w.shape[1]
        fitted = direct @ (w @ np.linalg.pinv(w)).T
        for i, row in enumerate(rows):
            a, b = workload.offsets[i], workload.offsets[i + 1]
            for sample, key in ((z, "certified_table"), (fitted, "direct_ls_table")):
                per_draw = (sample[:, a:b] ** 2).sum(axis=1)
                se = per_draw.std(ddof=1) / math.sqrt(draws)
                assert abs(per_draw.mean() - row[key]) < 4 * se, (adjacency, row["table"], key)
        assert math.isclose(sum(r["certified_table"] for r in rows), sol.certificate["utility"]["value"], rel_tol=1e-9)


def test_report_table_is_rebuilt_from_the_certificate():
    attributes = {"a": ["0", "1", "2"], "b": ["0", "1"], "c": ["0", "1", "2", "3"]}
    sol = dpopt.solve({"dpopt": 1, "name": "t", "data": {"attributes": attributes},
                       "query": {"kind": "marginals", "all_of_size": 2}, "adjacency": "add_remove",
                       "privacy": {"zcdp": {"rho": 1}}, "mechanism": "marginal_gaussian", "utility": "l2"})
    rows = marginal_error_rows(sol.certificate.data)
    assert [r["table"] for r in rows] == ["a × b", "a × c", "b × c"]
    # direct + least squares over every table: σ² × rank (the trace of the projector), the design's baseline
    design = sol.certificate["mechanism"]["parameters"]["design"]
    assert math.isclose(sum(r["direct_ls_table"] for r in rows), design["baselines"]["direct_least_squares"], rel_tol=1e-9)
    # one table measured alone with the whole budget: Δ = 1, σ² = 1/μ² = 1/(2ρ) per cell
    assert [r["alone_table"] for r in rows] == pytest.approx([6 / 2, 12 / 2, 8 / 2])


def test_cli_release_publishes_consistent_nonnegative_integer_tables(tmp_path, capsys, monkeypatch):
    # 4 attributes, 900 histogram cells, with the marginal-space threshold lowered to 500 so that the route
    # of large domains runs on a domain whose certificate is quick to issue; 60 records, so most cells are 0
    # and the raw release has many negative cells
    monkeypatch.setattr(marginals, "DENSE_CELLS", 500)
    sizes = {"a": 6, "b": 5, "c": 6, "d": 5}
    assert math.prod(sizes.values()) > marginals.DENSE_CELLS
    attributes = {k: [f"{k}{i}" for i in range(n)] for k, n in sizes.items()}
    spec = {"dpopt": 1, "name": "two-way marginals, post-processed", "data": {"attributes": attributes},
            "query": {"kind": "marginals", "all_of_size": 2}, "adjacency": "add_remove",
            "privacy": {"zcdp": {"rho": 0.5}}, "mechanism": "marginal_gaussian", "utility": "l2",
            "postprocess": {"nonnegative": True, "integer": True, "consistent": True}}
    assert uses_marginal_space(dpopt.compile(spec).query)
    rng = np.random.default_rng(11)
    data = tmp_path / "people.csv"
    with open(data, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(list(sizes))
        for _ in range(60):
            writer.writerow([f"{k}{rng.integers(0, n)}" for k, n in sizes.items()])
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    out = tmp_path / "out"
    assert main(["release", str(tmp_path / "spec.json"), "--data", str(data), "--seed", "3", "--insecure-seed",
                 "--out", str(out)]) == 0
    doc = json.loads((out / "release.json").read_text())
    published = doc["postprocess"]["values"]
    assert all(isinstance(v, int) and v >= 0 for v in published.values())
    assert any(row["value"] < 0 for row in doc["cells"]["rows"])
    assert [row["postprocessed"] for row in doc["cells"]["rows"]] == list(published.values())
    # consistency, from the labels alone: every two tables give the same one-way margin and total
    margins: dict[tuple[str, str], dict[str, int]] = {}
    for label, value in published.items():
        (x, lx), (y, ly) = (part.split("=") for part in label.split(","))
        for name, level, other in ((x, lx, y), (y, ly, x)):
            margins.setdefault((name, other), {}).setdefault(level, 0)
            margins[(name, other)][level] += value
    for name in sizes:
        seen = [m for (n, _), m in margins.items() if n == name]
        assert len(seen) == 3 and all(m == seen[0] for m in seen)
    assert len({sum(m.values()) for m in margins.values()}) == 1
    assert all(c["passed"] for c in doc["postprocess"]["checks"])
    capsys.readouterr()
    assert main(["verify", str(out / "certificate.json")]) == 0
    certificate = json.loads((out / "certificate.json").read_text())
    assert "marginal tables" in certificate["postprocess"]["method"]["space"]


@pytest.mark.parametrize("options", [Postprocess(nonnegative=False), Postprocess(integer=False),
                                     Postprocess(consistent=False)])
def test_each_property_alone(options):
    _, _, y = noisy_release(TRIANGLE, 9)
    workload = MarginalWorkload(MarginalAlgebra(SIZES), TRIANGLE)
    result = postprocess_marginals(workload, y, options)
    claims = {c.claim for c in result.checks}
    assert claims == {f"postprocess.{p}" for p in ("nonnegative", "integer", "consistent") if getattr(options, p)}
    assert result.passed
    if not options.consistent:  # cell by cell: rounded and clipped, no agreement enforced
        assert np.array_equal(result.table, np.rint(np.maximum(y, 0)).astype(np.int64))


def test_all_pairs_of_levels_in_labels_use_every_combination():
    # the CLI test reads consistency from labels "x=..,y=..": the release's labels are the tables' cells
    spec = {"dpopt": 1, "name": "t", "data": {"attributes": {"a": ["0", "1"], "b": ["0", "1", "2"], "c": ["0", "1"]}},
            "query": {"kind": "marginals", "all_of_size": 2}, "adjacency": "add_remove",
            "privacy": {"zcdp": {"rho": 1}}, "utility": "l2"}
    labels = dpopt.compile(spec).query.labels
    expected = [f"{x}={i},{y}={j}" for x, y in itertools.combinations("abc", 2)
                for i in spec["data"]["attributes"][x] for j in spec["data"]["attributes"][y]]
    assert list(labels) == expected


def test_the_shared_margin_form_states_the_empty_set_only_when_it_is_not_implied():
    # {a,b}, {b,c}: linked through b, so their totals agree already; {a}, {b,c}: only the total ties them
    joined = MarginalWorkload(MarginalAlgebra(SIZES), CHAIN)
    apart = MarginalWorkload(MarginalAlgebra(SIZES), ((0,), (1, 2)))
    assert marginals.shared_sets(joined) == ((1,),) and marginals.hub_sets(joined) == ((1,),)
    assert marginals.hub_sets(apart) == ((),)
    y = np.array([4.0, -1.0, 2.0] + [1.0, 2.0, 0.5, -0.5, 3.0, 1.0, 0.0, 2.0])
    mu = marginals.hub_projection(apart, y)
    # the projection onto {μ ≥ 0, Σ μ_a = Σ μ_bc}, from its KKT conditions with one multiplier λ on the totals:
    # μ_a = max(y_a − λ, 0), μ_bc = max(y_bc + λ, 0), λ the root of the totals' gap (found by bisection)
    low, high = -10.0, 10.0
    for _ in range(200):
        lam = (low + high) / 2
        gap = np.maximum(y[:3] - lam, 0).sum() - np.maximum(y[3:] + lam, 0).sum()
        low, high = (lam, high) if gap > 0 else (low, lam)
    expected = np.concatenate([np.maximum(y[:3] - lam, 0), np.maximum(y[3:] + lam, 0)])
    np.testing.assert_allclose(mu, expected, atol=1e-6)


@pytest.mark.parametrize("total", [None, 41])
def test_two_stage_rounding_is_whole_consistent_within_one_and_keeps_a_public_total(monkeypatch, total):
    # All two-way tables of 4 attributes (consistent, non-negative: the marginals of a real table), rounded in
    # two stages (threshold lowered to 0). References: the agreement equations in Python integers, each cell
    # within 1 of μ̂, the one-way margins the floor or ceiling of μ̂'s, and the joint 0/1 program's optimum
    # (HiGHS on 78 cells, proven optimal) as a lower bound of the objective Σ(1 − 2f) b.
    sizes, blocks = (3, 4, 2, 3), tuple(itertools.combinations(range(4), 2))
    workload = MarginalWorkload(MarginalAlgebra(sizes), blocks)
    rng = np.random.default_rng(5)
    h = rng.gamma(0.5, 1.0, size=int(np.prod(sizes)))
    h *= (total or 40.3) / h.sum()
    mu = dense_workload(sizes, blocks) @ h
    exact = exact_margins(workload, mu, (), total) if total else None
    optimum, _ = consistent_rounding(workload, mu, exact)
    monkeypatch.setattr(marginals, "TWO_STAGE_CELLS", 0)
    z, route = consistent_rounding(workload, mu, exact)
    assert "two stages" in route and z.dtype == np.int64
    assert all(c.passed for c in marginal_checks(workload, z, exact))
    assert np.abs(z - mu).max() < 1
    for s, table, real in zip(workload.sets, workload.tables(z), workload.tables(mu)):
        for axis in range(2):
            got, want = table.sum(axis=1 - axis), real.sum(axis=1 - axis)
            assert np.all((got == np.floor(want)) | (got == np.ceil(want)))
    if total:
        assert workload.tables(z)[0].sum() == total
    frac = mu - np.floor(mu)
    assert ((1 - 2 * frac) * (z - np.floor(mu))).sum() >= ((1 - 2 * frac) * (optimum - np.floor(mu))).sum() - 1e-9
