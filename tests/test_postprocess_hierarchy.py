"""TopDown over a geographic hierarchy: exact consistency, the two solution routes, the budget split,
the error before/after, and the release end to end (Python and CLI).

Oracles: parent sums recomputed here in Python integers; the vectorised closed-form route against
the joint per-parent route (cvxpy QP + integer program); the optimal budget shares against a
numerical minimisation (scipy); composition checked in exact rationals here.
"""

from __future__ import annotations

import csv
import json
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from scipy import optimize

from dpopt.certificate.hierarchy_budget import level_shares, level_specs
from dpopt.certificate.verify import verify
from dpopt.cli import main
from dpopt.errors import SpecError, UnsupportedSpecError
from dpopt.postprocess import table_structure, topdown
from dpopt.postprocess.evaluation import release_units
from dpopt.postprocess.hierarchy import _per_parent, children_level, two_way_projection
from dpopt.postprocess.least_squares import metric, weighted_least_squares
from dpopt.release.hierarchy import release_hierarchy
from dpopt.solve import solve
from dpopt.spec.load import load_spec
from dpopt.spec.models import Postprocess

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "specs" / "hierarchy_topdown_zcdp.yaml"
DATA = ROOT / "specs" / "data" / "hierarchy.csv"


def synthetic(rng, states=4, counties=20, cells=6, rate=1.0):
    county_state = np.sort(np.concatenate([np.arange(states), rng.integers(0, states, counties - states)]))
    county = rng.poisson(rate, (counties, cells))
    state = np.zeros((states, cells), dtype=np.int64)
    np.add.at(state, county_state, county)
    return [state.sum(axis=0)[None, :], state, county], [np.zeros(states, dtype=np.int64), county_state]


def _assert_consistent(tables, parents):
    for upper, lower, parent in zip(tables, tables[1:], parents):
        sums = [[0] * upper.shape[1] for _ in range(upper.shape[0])]
        for row, p in zip(lower.tolist(), parent.tolist()):
            assert all(isinstance(x, int) and x >= 0 for x in row)
            sums[p] = [a + b for a, b in zip(sums[p], row)]
        assert sums == upper.tolist()


def test_topdown_output_is_integer_nonnegative_and_sums_exactly():
    rng = np.random.default_rng(0)
    truth, parents = synthetic(rng)
    noisy = [t + rng.normal(0, 2, t.shape) for t in truth]
    result = topdown(noisy, parents, table_structure((2, 3)))
    assert all(t.dtype.kind == "i" for t in result.tables)
    _assert_consistent(result.tables, parents)
    assert result.passed


def test_nation_invariants_are_met():
    rng = np.random.default_rng(1)
    truth, parents = synthetic(rng)
    s = table_structure((2, 3), margins=[(0,)], total=True)
    values = s.invariant_values(truth[0][0])
    result = topdown([t + rng.normal(0, 2, t.shape) for t in truth], parents, s, values)
    cells = result.tables[0][0].tolist()
    assert [sum(c * x for c, x in zip(row, cells)) for row in s.constraints.tolist()] == values.tolist()
    _assert_consistent(result.tables, parents)


def test_closed_form_route_equals_the_joint_per_parent_route():
    rng = np.random.default_rng(2)
    truth, parents = synthetic(rng, states=3, counties=8, cells=4)
    s = table_structure((4,))
    noisy = truth[2] + rng.normal(0, 2, truth[2].shape)
    options = Postprocess()
    fast, ls_f, nn_f, _ = children_level(noisy, parents[1], truth[1], s, 4.0 * np.eye(4), options)
    slow, ls_s, nn_s, _ = _per_parent(noisy, parents[1], truth[1], s, 4.0 * np.eye(4), options, "numpy")
    np.testing.assert_allclose(ls_f, ls_s, atol=1e-8)
    np.testing.assert_allclose(nn_f, nn_s, atol=1e-5)
    # both roundings are optimal in ℓ1 for the same real table (ties may differ)
    assert np.isclose(np.abs(fast - nn_f).sum(), np.abs(slow - nn_f).sum(), atol=1e-4)
    assert np.all(np.abs(fast - nn_f) < 1)


def test_postprocessing_lowers_county_rmse_on_a_sparse_hierarchy_and_shows_the_bias():
    # Sparse counties (Poisson(0.5) cells), Gaussian noise of the example spec's level mechanisms,
    # 60 releases (fixed seed). Paired per-release differences of the county MSE must be > 4 SE above 0;
    # zero cells must be biased upwards by > 4 SE (non-negativity; Abowd et al. 2022, §9).
    rng = np.random.default_rng(3)
    truth, parents = synthetic(rng, states=5, counties=60, cells=12, rate=0.5)
    mechanisms = [solve(s).mechanism for s in level_specs(load_spec(SPEC))[0]]
    s = table_structure((2, 6))
    diff, zero = [], []
    for _ in range(60):
        noisy = [release_units(m, t, rng) for m, t in zip(mechanisms, truth)]
        out = topdown(noisy, parents, s).tables[2]
        diff.append(np.mean((noisy[2] - truth[2]) ** 2) - np.mean((out - truth[2]) ** 2))
        zero.append(np.mean(out[truth[2] == 0]))
    diff, zero = np.asarray(diff), np.asarray(zero)
    assert diff.mean() > 4 * diff.std(ddof=1) / np.sqrt(diff.size)
    assert zero.mean() > 4 * zero.std(ddof=1) / np.sqrt(zero.size)


def test_optimal_shares_minimise_the_weighted_error():
    spec = load_spec(SPEC)
    shares, _ = level_shares(spec)
    assert sum(shares) == 1
    w = np.array(spec.geography.weights)
    # minimise Σ w_l / s_l on the simplex numerically (σ_l² ∝ 1/s_l for equal Δ_l)
    res = optimize.minimize(lambda z: float(np.sum(w * (1 + np.exp(z).sum()) / np.concatenate([[1], np.exp(z)]))),
                            np.zeros(2), method="Nelder-Mead", options={"xatol": 1e-10, "fatol": 1e-14})
    numeric = np.concatenate([[1], np.exp(res.x)]) / (1 + np.exp(res.x).sum())
    np.testing.assert_allclose([float(s) for s in shares], numeric, atol=1e-4)


def test_level_budgets_compose_to_the_target_exactly():
    """Each level's target is certified against the decimal its float is read as (its repr, as the ledger
    reads it: dpopt.core.decimals), so the levels' decimals compose to the decimal written: ρ = 1, μ = 7/10
    (not the float 0.7, which is below 7/10)."""
    specs, shares, _ = level_specs(load_spec(SPEC))
    total = sum(Fraction(repr(s.privacy.zcdp.rho)) for s in specs)
    assert total <= Fraction(1)  # ρ = 1 in the example spec; each level rounded down
    gdp = load_spec(load_spec(SPEC).model_dump(mode="json", exclude_none=True) | {"privacy": {"gdp": {"mu": 0.7}}})
    mus = [Fraction(repr(s.privacy.gdp.mu)) for s in level_specs(gdp)[0]]
    assert sum(m * m for m in mus) <= Fraction(7, 10) ** 2


def test_release_end_to_end_and_every_level_certificate_verifies(tmp_path):
    rel = release_hierarchy(SPEC, DATA, seed=5, insecure_seed=True, error_draws=5)
    _assert_consistent(list(rel.tables), list(rel.parents))
    assert rel.records == sum(1 for _ in open(DATA)) - 1  # the nation total itself is noisy (no invariant)
    assert all(c["passed"] for c in rel.block["checks"])
    rows = rel.block["postprocess"]["error"]["levels"]
    assert [r["level"] for r in rows] == ["nation", "state", "county"]
    for cert in rel.certificates:
        assert verify(cert).passed
    paths = rel.write(tmp_path)
    doc = json.loads(paths[0].read_text())
    assert set(doc["tables"]) == set(doc["noisy"]) == {"nation", "state", "county"}


def test_cli_release_and_one_line_errors(tmp_path, capsys):
    args = ["release", str(SPEC), "--data", str(DATA), "--seed", "1", "--insecure-seed", "--error-draws", "0",
            "--out", str(tmp_path / "out")]
    assert main(args) == 0
    assert (tmp_path / "out" / "certificate_county.json").exists()
    bad = load_spec(SPEC).model_dump(mode="json", exclude_none=True)
    bad["geography"] = {"levels": ["sex"]}
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    capsys.readouterr()
    assert main(["release", str(tmp_path / "bad.json")] + args[2:]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "geography.levels" in err[0]


def test_geography_spec_validation():
    doc = load_spec(SPEC).model_dump(mode="json", exclude_none=True)
    with pytest.raises(SpecError, match="shares"):
        load_spec(doc | {"geography": {"levels": ["state", "county"], "shares": [1, 2]}})
    with pytest.raises(SpecError, match="weights"):
        load_spec(doc | {"geography": {"levels": ["state", "county"], "shares": "equal", "weights": [1, 1, 1]}})
    with pytest.raises(SpecError, match="share"):
        load_spec(doc | {"geography": {"levels": ["state"], "shares": ["1/2", "x"]}})
    pure = load_spec(doc | {"privacy": {"pure": {"epsilon": 1}}})
    with pytest.raises(UnsupportedSpecError, match="optimal"):
        level_shares(pure)
    given = load_spec(doc | {"geography": {"levels": ["state", "county"], "shares": ["1/4", "1/4", "1/2"]}})
    assert level_shares(given)[0] == [Fraction(1, 4), Fraction(1, 4), Fraction(1, 2)]


def test_dask_engine_gives_the_same_per_parent_solutions():
    rng = np.random.default_rng(9)
    truth, parents = synthetic(rng, states=2, counties=5, cells=3)
    noisy = truth[2] + rng.normal(0, 2, truth[2].shape)
    s = table_structure((3,))
    local = _per_parent(noisy, parents[1], truth[1], s, None, Postprocess(), "numpy")
    dask = pytest.importorskip("dask")
    with dask.config.set(scheduler="synchronous"):
        remote = _per_parent(noisy, parents[1], truth[1], s, None, Postprocess(), "dask")
    np.testing.assert_array_equal(local[0], remote[0])
    np.testing.assert_allclose(local[2], remote[2], atol=1e-9)


def test_correlated_noise_mean_shift_and_per_parent_qp_equal_the_joint_problem():
    # With a correlated Σ the WLS is still the mean shift (Lagrange: W(x_c − y_c) = λ for every child);
    # checked against the joint generalised least squares with Σ ⊗ I (null-space method), and the
    # per-parent QP against the joint QP.
    rng = np.random.default_rng(10)
    truth, parents = synthetic(rng, states=3, counties=9, cells=4)
    b = rng.normal(size=(4, 4))
    sigma = b @ b.T + np.eye(4)
    noisy = truth[2] + rng.multivariate_normal(np.zeros(4), sigma, truth[2].shape[0])
    s = table_structure((4,))
    out, ls, nn, route = children_level(noisy, parents[1], truth[1], s, sigma, Postprocess())
    assert "QP per parent" in route
    joint = _per_parent(noisy, parents[1], truth[1], s, sigma, Postprocess(), "numpy")
    np.testing.assert_allclose(ls, joint[1], atol=1e-8)
    np.testing.assert_allclose(nn, joint[2], atol=1e-4)
    _assert_consistent([truth[1], out], [parents[1]])


def test_two_way_projection_is_the_constrained_least_squares():
    # oracle: the null-space generalised least squares with both sets of sums as invariants
    rng = np.random.default_rng(11)
    x = rng.poisson(3, (4, 5))
    y = x + rng.normal(0, 2, x.shape)
    s = table_structure((4, 5), margins=[(0,), (1,)])
    values = s.invariant_values(x.reshape(-1))
    oracle = weighted_least_squares(y.reshape(-1), s, values, metric(None, 20)).reshape(4, 5)
    np.testing.assert_allclose(two_way_projection(y, x.sum(axis=1), x.sum(axis=0)), oracle, atol=1e-9)


def test_topdown_with_exact_unit_totals_meets_them_and_the_parent_sums():
    rng = np.random.default_rng(12)
    truth, parents = synthetic(rng, states=4, counties=15, cells=6)
    noisy = [t + rng.normal(0, 2, t.shape) for t in truth]
    s = table_structure((6,), total=True)
    totals = [truth[1].sum(axis=1), truth[2].sum(axis=1)]
    result = topdown(noisy, parents, s, [int(truth[0].sum())], unit_totals=totals)
    _assert_consistent(result.tables, parents)
    assert sum(result.tables[0][0].tolist()) == int(truth[0].sum())
    for table, total in zip(result.tables[1:], totals):
        assert [sum(row) for row in table.tolist()] == total.tolist()
    assert result.passed


def test_release_with_exact_unit_totals(tmp_path):
    doc = load_spec(SPEC).model_dump(mode="json", exclude_none=True)
    doc["geography"] = doc["geography"] | {"exact_totals": True}
    with pytest.raises(UnsupportedSpecError, match="exact_totals"):
        release_hierarchy(doc, DATA, seed=1, insecure_seed=True)
    doc["adjacency"] = {"kind": "replace_one"}
    rel = release_hierarchy(doc, DATA, seed=1, insecure_seed=True)
    rows = list(csv.DictReader(open(DATA)))
    assert int(rel.tables[0].sum()) == len(rows)
    for name, keys, table in zip(rel.names[1:], rel.keys[1:], rel.tables[1:]):
        counted = {k: sum(r[name] == k for r in rows) for k in keys.tolist()}
        assert [sum(row) for row in table.tolist()] == [counted[k] for k in keys.tolist()]
    assert all(verify(c).passed for c in rel.certificates)


def test_verify_re_derives_the_hierarchy_block():
    rel = release_hierarchy(SPEC, DATA, seed=4, insecure_seed=True)
    cert = rel.certificates[1].data
    result = verify(cert)
    assert result.passed
    assert {"hierarchy.level", "hierarchy.budget", "hierarchy.composition"} <= {c.claim for c in result.checks}
    tampered = json.loads(json.dumps(cert))
    tampered["hierarchy"]["levels"][2]["privacy"]["zcdp"]["rho"] = 0.9  # a level claims more budget than re-derived
    assert [c.claim for c in verify(tampered).failed] == ["hierarchy.composition"]
    swapped = json.loads(json.dumps(cert))
    swapped["hierarchy"]["spec"]["privacy"] = {"zcdp": {"rho": 2.0}}  # not the hierarchy this level belongs to
    assert "hierarchy.level" in [c.claim for c in verify(swapped).failed]


def test_real_valued_topdown_keeps_the_sums():
    # integer: false publishes the NNLS tables: non-negative, summing to their parents up to round-off
    rng = np.random.default_rng(13)
    truth, parents = synthetic(rng, states=3, counties=7, cells=4)
    noisy = [t + rng.normal(0, 1, t.shape) for t in truth]
    result = topdown(noisy, parents, table_structure((4,)), options=Postprocess(integer=False))
    sums = np.zeros_like(result.tables[1])
    np.add.at(sums, parents[1], result.tables[2])
    np.testing.assert_allclose(sums, result.tables[1], atol=1e-6)
    np.testing.assert_allclose(result.tables[1].sum(axis=0), result.tables[0][0], atol=1e-6)
    assert result.tables[2].min() >= 0
