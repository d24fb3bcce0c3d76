"""Post-processing of one release: least squares, non-negativity, controlled rounding, exact checks.

Oracles: the closed-form projections (orthogonal projection onto {Ch = t}; the constrained
BLUE y − ΣCᵀ(CΣCᵀ)⁻¹(Cy − t)), an independent QP solver (cvxpy) for the simplex projection,
and the integer program (scipy milp) for the min-cost-flow rounding; every output property is
re-checked here in Python integers.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import cvxpy as cp
import numpy as np
import pytest

import dpopt
from dpopt.certificate.model import Certificate
from dpopt.cli import main
from dpopt.errors import SolverError
from dpopt.postprocess import consistent_table, spec_structure, table_structure
from dpopt.postprocess.least_squares import grouped_sum_projection, metric, weighted_least_squares
from dpopt.postprocess.nonnegative import grouped_simplex_projection, nonnegative_least_squares
from dpopt.postprocess.rounding import round_grouped, round_integer_program, round_two_way
from dpopt.postprocess.structure import Structure
from dpopt.report.render import render_markdown
from dpopt.spec.models import Postprocess


def _ints(a) -> list[int]:
    return [int(x) for x in np.asarray(a).reshape(-1)]


def _assert_exact(table, structure, values):
    """Whole, non-negative, and C·h = t, all in Python integers (independent of the package's checks)."""
    h = np.asarray(table)
    assert h.dtype.kind == "i"
    cells = _ints(h)
    assert min(cells) >= 0
    for row, t in zip(structure.constraints.tolist(), _ints(values)):
        assert sum(c * x for c, x in zip(row, cells)) == t


def test_least_squares_is_the_orthogonal_projection():
    # 2×3 table, both margins and the total invariant, isotropic noise: ĥ = y − Cᵀ(CCᵀ)⁺(Cy − t)
    s = table_structure((2, 3), margins=[(0,), (1,)], total=True)
    rng = np.random.default_rng(0)
    h = rng.integers(0, 9, 6)
    y = h + rng.normal(0, 2, 6)
    t = s.invariant_values(h).astype(float)
    c = s.constraints.astype(float)
    closed = y - c.T @ np.linalg.pinv(c @ c.T) @ (c @ y - t)
    got = weighted_least_squares(y, s, t, metric(None, 6))
    np.testing.assert_allclose(got, closed, atol=1e-10)


def test_least_squares_with_correlated_noise_is_the_constrained_blue():
    # Σ positive definite: the GLS estimate under Ch = t is y − ΣCᵀ(CΣCᵀ)⁻¹(Cy − t) (Lagrange)
    s = table_structure((2, 2), margins=[(0,)])
    rng = np.random.default_rng(1)
    b = rng.normal(size=(4, 4))
    sigma = b @ b.T + np.eye(4)
    h = np.array([3, 5, 2, 7])
    y = h + rng.multivariate_normal(np.zeros(4), sigma)
    t = s.invariant_values(h).astype(float)
    c = s.constraints.astype(float)
    closed = y - sigma @ c.T @ np.linalg.solve(c @ sigma @ c.T, c @ y - t)
    got = weighted_least_squares(y, s, t, metric(sigma, 4))
    np.testing.assert_allclose(got, closed, atol=1e-9)


def test_projected_noise_keeps_the_noiseless_directions():
    # Σ = σ²P (P projects on the interaction space of a 2×3 table): y − h lies in range(P), so the
    # margins of y are exact, and the GLS estimate is y itself (nothing to correct, no invariant given)
    shape = (2, 3)
    m = table_structure(shape, margins=[(0,), (1,)])
    c = m.constraints.astype(float)
    p = np.eye(6) - c.T @ np.linalg.pinv(c @ c.T) @ c
    rng = np.random.default_rng(2)
    h = rng.integers(0, 9, 6)
    y = h + p @ rng.normal(0, 3, 6)
    free = table_structure(shape)
    got = weighted_least_squares(y, free, np.zeros(0), metric(4.0 * p, 6))
    np.testing.assert_allclose(got, y, atol=1e-9)
    np.testing.assert_allclose(c @ got, c @ h, atol=1e-9)


def test_grouped_closed_forms_match_an_independent_solver():
    # WLS: the null-space solver; NNLS (simplex projection): cvxpy's QP solved here directly
    rng = np.random.default_rng(3)
    groups = np.repeat(np.arange(5), [1, 2, 3, 4, 6])
    y = rng.normal(1, 3, groups.size)
    totals = np.array([4, 0, 7, 2, 11])
    ls = grouped_sum_projection(y, groups, totals)
    nn = grouped_simplex_projection(y, groups, totals)
    for g in range(5):
        s = table_structure((int((groups == g).sum()),), total=True)
        sel = groups == g
        np.testing.assert_allclose(ls[sel], weighted_least_squares(y[sel], s, [totals[g]], metric(None, sel.sum())), atol=1e-9)
        x = cp.Variable(int(sel.sum()))
        cp.Problem(cp.Minimize(cp.sum_squares(x - y[sel])), [x >= 0, cp.sum(x) == totals[g]]).solve(solver=cp.CLARABEL)
        np.testing.assert_allclose(nn[sel], x.value, atol=1e-6)


def test_projected_noise_under_its_total_takes_the_simplex_projection():
    # Σ = σ²(I − 11ᵀ/n) (Gaussian noise projected off the total, the total released exactly): on {1ᵀh = t} the
    # objective ‖L(y − h)‖² is ‖y − h‖²/σ² − (1ᵀ(y − h))²/(nσ²), the last term 0 there, so its minimiser is the
    # simplex projection; checked against cvxpy's QP on the metric itself (objective no larger, within 1e-5)
    rng = np.random.default_rng(11)
    n, sigma = 8, 3.0
    s = table_structure((n,), total=True)
    m = metric(sigma**2 * (np.eye(n) - np.ones((n, n)) / n), n)
    assert m.exact.shape[1] == 1
    for _ in range(5):
        h = rng.integers(0, 5, n) * (rng.random(n) < 0.5)
        y = h + rng.normal(0, sigma, n)
        y += (h.sum() - y.sum()) / n  # the projected release keeps the total
        got, route = nonnegative_least_squares(y, s, s.invariant_values(h), m)
        assert route.startswith("closed form")
        x = cp.Variable(n)
        cp.Problem(cp.Minimize(cp.sum_squares(m.whitening @ (y - x))), [x >= 0, cp.sum(x) == h.sum()]).solve(
            solver=cp.CLARABEL)
        np.testing.assert_allclose(got, x.value, atol=1e-5)
        objective = lambda v: float(np.sum((m.whitening @ (y - v)) ** 2))  # noqa: E731
        assert objective(got) <= objective(x.value) + 1e-9
    # every cell its own invariant: the one table meeting them is h = t, under any metric
    own = Structure(np.eye(3), ("a", "b", "c"), np.eye(3, dtype=np.int64), ("a", "b", "c"), (3,))
    got, route = nonnegative_least_squares(np.array([1.2, -0.3, 2.0]), own, np.array([1, 0, 2]),
                                           metric(np.diag([1.0, 2.0, 3.0]), 3))
    assert route.startswith("closed form") and got.tolist() == [1.0, 0.0, 2.0]
    # noise correlated across cells another way: not isotropic off the total, the QP route
    other = metric(np.diag(np.arange(1.0, n + 1)), n)
    assert nonnegative_least_squares(y, s, s.invariant_values(h), other)[1].startswith("cvxpy")


def test_largest_remainders_stay_within_one_and_keep_every_group_sum():
    rng = np.random.default_rng(4)
    for _ in range(20):
        groups = rng.integers(0, 6, 40)
        groups[:6] = np.arange(6)
        totals = rng.integers(0, 30, 6)
        x = grouped_simplex_projection(rng.normal(2, 3, 40), groups, totals)  # a real table with these sums
        out = round_grouped(x, groups, totals)
        assert np.all(np.abs(out - x) < 1)
        for g in range(6):
            assert sum(_ints(out[groups == g])) == int(totals[g])


def test_min_cost_flow_equals_the_integer_program():
    # two independent exact routes for the 2-D controlled rounding: same ℓ1 distance to x̂
    rng = np.random.default_rng(5)
    s = table_structure((3, 4), margins=[(0,), (1,)], total=True)
    for _ in range(10):
        h = rng.integers(0, 6, 12)
        t = s.invariant_values(h)
        x, route = nonnegative_least_squares(h + rng.normal(0, 2, 12), s, t, metric(None, 12))
        assert route.startswith("cvxpy")
        flow = round_two_way(x.reshape(3, 4), t[1:4].astype(int), t[4:].astype(int)).reshape(-1)
        mip = round_integer_program(x, s.constraints, t)
        _assert_exact(flow, s, t)
        _assert_exact(mip, s, t)
        assert np.all(np.abs(flow - x) < 1) and np.all(np.abs(mip - x) < 1)
        assert np.isclose(np.abs(flow - x).sum(), np.abs(mip - x).sum(), atol=1e-6)


@pytest.mark.parametrize(
    "shape, margins",
    [((6,), []), ((2, 6), [(0,), (1,)]), ((2, 3, 2), [(0, 1), (1, 2)]), ((4, 3), [(0,)])],
)
def test_output_is_integer_nonnegative_and_meets_every_invariant(shape, margins):
    rng = np.random.default_rng(6)
    s = table_structure(shape, margins=margins, total=True)
    m = int(np.prod(shape))
    for _ in range(5):
        h = rng.poisson(1.5, m)
        t = s.invariant_values(h)
        result = consistent_table(h + rng.normal(0, 3, m), s, t)
        _assert_exact(result.table, s, t)
        assert np.all(np.abs(result.table - result.nonnegative) < 1)
        assert result.passed


def test_several_tables_of_one_histogram_are_made_consistent():
    # a 2×3 table released with its two margins (three queries): one table behind every number
    s = table_structure((2, 3), total=True, queries=[(0, 1), (0,), (1,)])
    h = np.array([4, 0, 2, 1, 3, 5])
    rng = np.random.default_rng(7)
    y = s.queries @ h + rng.normal(0, 2, s.queries.shape[0])
    result = consistent_table(y, s, [int(h.sum())])
    cells = _ints(result.table)
    assert _ints(result.answers) == [sum(int(a) * c for a, c in zip(row, cells)) for row in s.queries.tolist()]
    _assert_exact(result.table, s, [h.sum()])


def test_inconsistent_invariants_are_refused():
    s = table_structure((2, 2), margins=[(0,)], total=True)
    with pytest.raises(SolverError):
        consistent_table([1.0, 2.0, 3.0, 4.0], s, [10, 3, 6])  # margins sum to 9, total 10


def test_cell_by_cell_when_not_consistent():
    s = table_structure((3,), total=True)
    out = consistent_table([2.4, -1.2, 7.6], s, [9], options=Postprocess(consistent=False))
    assert out.table.tolist() == [2, 0, 8]


def test_postprocessing_lowers_rmse_on_a_sparse_table_and_shows_the_bias():
    # Sparse 4×6 table (most cells 0), Gaussian σ = 3, total invariant, 400 releases (fixed seed).
    # Raw noise is unbiased with RMSE σ; non-negativity can only raise a zero cell, so the bias of the
    # post-processed zero cells is positive (TopDown's small-count bias, Abowd et al. 2022, §9).
    rng = np.random.default_rng(8)
    h = np.zeros(24, dtype=int)
    h[[0, 5, 11, 17]] = [30, 6, 2, 15]
    s = table_structure((4, 6), total=True)
    t = s.invariant_values(h)
    raw_sq, post_sq, zero_bias = [], [], []
    for _ in range(400):
        y = h + rng.normal(0, 3, 24)
        out = consistent_table(y, s, t).table
        raw_sq.append(np.mean((y - h) ** 2))
        post_sq.append(np.mean((out - h) ** 2))
        zero_bias.append(np.mean(out[h == 0]))
    raw_sq, post_sq, zero_bias = map(np.asarray, (raw_sq, post_sq, zero_bias))
    diff = raw_sq - post_sq
    # paired difference of mean squared errors: > 4 standard errors above 0
    assert diff.mean() > 4 * diff.std(ddof=1) / np.sqrt(diff.size)
    # the bias on the zero cells is positive, > 4 standard errors
    assert zero_bias.mean() > 4 * zero_bias.std(ddof=1) / np.sqrt(zero_bias.size)


def test_spec_structure_reads_invariants_and_the_public_size():
    base = {
        "dpopt": 1, "name": "t", "data": {"attributes": {"a": ["x", "y"], "b": ["u", "v", "w"]}},
        "query": {"kind": "contingency_table", "attributes": ["a", "b"]},
        "adjacency": "replace_one", "privacy": {"gdp": {"mu": 1}},
        "postprocess": {"nonnegative": True, "integer": True, "consistent": True},
    }
    s = spec_structure(dpopt.compile(base | {"invariants": [{"kind": "margins", "attributes": ["a"]}]}))
    assert s.shape == (2, 3) and s.constraints.shape == (3, 6)  # total + 2 margin rows
    s = spec_structure(dpopt.compile(base | {"data": base["data"] | {"n": 10}}))
    assert s.constraint_names == ("total",)


def test_cli_release_post_processes_a_table_with_invariants(tmp_path, capsys):
    # projected Gaussian (noise on the interaction space of a 3×2 table, margins exact): the published
    # table is integral, non-negative and has the margins of the data (counted here from the CSV)
    root = Path(__file__).resolve().parents[1]
    data = root / "specs" / "data" / "blocks.csv"
    spec = {
        "dpopt": 1, "name": "race by sex, margins exact",
        "data": {"attributes": {"race": ["white", "black", "other"], "sex": ["female", "male"]}},
        "query": {"kind": "contingency_table", "attributes": ["race", "sex"]},
        "invariants": [{"kind": "margins", "attributes": ["race"]}, {"kind": "margins", "attributes": ["sex"]}],
        "adjacency": "replace_one", "privacy": {"gdp": {"mu": 0.5}}, "mechanism": "projected_gaussian",
        "postprocess": {"nonnegative": True, "integer": True, "consistent": True},
    }
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    out = tmp_path / "out"
    assert main(["release", str(tmp_path / "spec.json"), "--data", str(data), "--seed", "2", "--insecure-seed",
                 "--error-draws", "3", "--out", str(out)]) == 0
    doc = json.loads((out / "release.json").read_text())
    published = doc["postprocess"]["values"]
    assert all(isinstance(v, int) and v >= 0 for v in published.values())
    rows = list(csv.DictReader(open(data)))
    for race in spec["data"]["attributes"]["race"]:
        assert sum(v for k, v in published.items() if k.startswith(f"race={race},")) == sum(r["race"] == race for r in rows)
    for sex in spec["data"]["attributes"]["sex"]:
        assert sum(v for k, v in published.items() if k.endswith(f"sex={sex}")) == sum(r["sex"] == sex for r in rows)
    assert "Σ⁺ of the projected_gaussian" in doc["postprocess"]["method"]["metric"]
    capsys.readouterr()
    assert main(["verify", str(out / "certificate.json")]) == 0
    text = render_markdown(Certificate.from_file(out / "certificate.json"))
    assert "## Post-processing" in text and "RMSE raw" in text


def test_integer_without_nonnegativity_keeps_the_sums():
    s = table_structure((2, 3), margins=[(0,)], total=True)
    h = np.array([0, 1, 0, 6, 2, 3])
    t = s.invariant_values(h)
    y = h + np.array([-2.3, 0.4, -1.7, 0.2, 1.1, -0.5])
    out = consistent_table(y, s, t, options=Postprocess(nonnegative=False))
    assert out.nonnegative is None and out.table.dtype.kind == "i"
    assert np.all(np.abs(out.table - out.least_squares) < 1)
    cells = _ints(out.table)
    assert [sum(c * x for c, x in zip(row, cells)) for row in s.constraints.tolist()] == _ints(t)
    assert min(cells) < 0  # the least-squares table has negative cells here, and rounding keeps them
