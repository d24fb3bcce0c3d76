"""dpopt.synth.denoise (tables shrunk toward independence) and the records fitted to such targets.

Expected values: the simplex projection against its KKT conditions and a brute-force search over the
threshold; the interaction dimension against the rank of the interaction space built from indicator
vectors (numpy.linalg.matrix_rank); the shrinkage at its two ends (no noise: the table; noise beyond the
interactions' energy: independence), computed by hand.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from dpopt.errors import SpecError
from dpopt.synth import synthesize_records
from dpopt.synth.denoise import independence, interaction_dimension, shrink, simplex_projection

SPECS = Path(__file__).resolve().parents[1] / "specs"


def test_simplex_projection_meets_its_optimality_conditions():
    # x = max(v − τ, 0) with Σx = s is the projection iff τ is the threshold of the KKT conditions: every
    # positive x_i has v_i − x_i = τ, every zero has v_i ≤ τ. τ is found here by bisection, independently.
    rng = np.random.default_rng(1)
    for _ in range(20):
        v = rng.normal(size=30) * 10
        s = float(rng.uniform(1, 50))
        x = simplex_projection(v, s)
        low, high = v.min() - s, v.max()
        for _ in range(200):
            tau = (low + high) / 2
            low, high = (tau, high) if np.maximum(v - tau, 0).sum() > s else (low, tau)
        np.testing.assert_allclose(x, np.maximum(v - tau, 0), atol=1e-9)
        assert x.sum() == pytest.approx(s) and x.min() >= 0


def _interaction_rank(shape: tuple[int, ...]) -> int:
    """Rank of the orthogonal complement of the main effects (indicators of each level of each axis, and the
    constant), in the space of tables of ``shape``."""
    cells = list(itertools.product(*[range(n) for n in shape]))
    main = [np.ones(len(cells))] + [np.array([float(c[a] == v) for c in cells])
                                     for a, n in enumerate(shape) for v in range(n)]
    return len(cells) - np.linalg.matrix_rank(np.array(main))


@pytest.mark.parametrize("shape", [(2, 2), (3, 5), (2, 3, 4), (4,)])
def test_interaction_dimension_is_the_rank_of_the_interaction_space(shape):
    assert interaction_dimension(shape) == _interaction_rank(shape)


def test_independence_is_the_outer_product_of_the_margins():
    table = np.array([[10.0, 20.0, 30.0], [5.0, 0.0, 35.0]])
    rows, columns = table.sum(axis=1), table.sum(axis=0)
    np.testing.assert_allclose(independence(table), np.outer(rows, columns) / table.sum())


def test_without_noise_a_table_is_kept_and_pure_noise_goes_to_independence():
    table = np.array([[30.0, 10.0], [10.0, 50.0]])
    # independence: rows 40, 60 and columns 40, 60 of 100 give [[16, 24], [24, 36]]; interactions ±14,
    # energy 4 · 14² = 784; one interaction dimension (p = 1)
    np.testing.assert_allclose(independence(table), [[16.0, 24.0], [24.0, 36.0]])
    np.testing.assert_allclose(shrink(table, 0.0, table.sum()), table)
    np.testing.assert_allclose(shrink(table, 28.0, table.sum()), [[16.0, 24.0], [24.0, 36.0]])  # 1 − 784/784 = 0
    # σ = 14: factor 1 − 196/784 = 3/4, interactions ±10.5
    np.testing.assert_allclose(shrink(table, 14.0, table.sum()), [[26.5, 13.5], [13.5, 46.5]])


def test_a_noisy_table_is_projected_to_the_given_total_without_negative_cells():
    noisy = np.array([[40.0, -8.0, 3.0], [12.0, 25.0, -2.0]])
    out = shrink(noisy, 4.0, 60.0)
    assert out.min() >= 0 and out.sum() == pytest.approx(60.0)
    one_way = shrink(np.array([5.0, -1.0, 20.0]), 3.0, 20.0)  # no interactions: the simplex projection only
    np.testing.assert_allclose(one_way, simplex_projection(np.array([5.0, -1.0, 20.0]), 20.0))


def test_targets_change_the_fit_never_the_tables_the_residual_is_measured_against():
    domain = {"a": 3, "b": 2, "c": 3}
    rng = np.random.default_rng(4)
    data = rng.integers(0, [3, 2, 3], size=(60, 3))
    tables = {}
    for key in itertools.combinations(domain, 2):
        axes = [list(domain).index(k) for k in key]
        table = np.zeros([domain[k] for k in key], dtype=np.int64)
        np.add.at(table, tuple(data[:, a] for a in axes), 1)
        tables[key] = table
    same = synthesize_records(domain, tables, 60, np.random.default_rng(0), exact=False, targets=tables)
    plain = synthesize_records(domain, tables, 60, np.random.default_rng(0), exact=False)
    np.testing.assert_array_equal(same.records, plain.records)  # targets equal to the tables: the same fit
    flat = {k: np.full(t.shape, t.sum() / t.size) for k, t in tables.items()}
    out = synthesize_records(domain, tables, 60, np.random.default_rng(0), exact=False, targets=flat)
    for key, table in tables.items():  # the residual is the gap to the given tables, counted here
        axes = [list(domain).index(k) for k in key]
        counts = np.zeros(table.shape, dtype=np.int64)
        np.add.at(counts, tuple(out.records[:, a] for a in axes), 1)
        assert out.residual[key] == np.abs(counts - table).sum()
    with pytest.raises(SpecError, match="targets"):
        synthesize_records(domain, tables, 60, np.random.default_rng(0), targets={("a", "c", "b"): flat[("a", "b")]})


def test_exact_false_from_a_spec_fits_the_denoised_release_and_verifies(tmp_path):
    # The survey example (1,000 records, 4 attributes) with synthesize.exact: false, through the real pipeline:
    # the records number the noisy tables' least-squares total (not the published, raised one), the certificate
    # says so and verifies.
    import yaml

    import dpopt
    from dpopt.synthesis import verify_synthesis

    document = yaml.safe_load((SPECS / "synthesize_survey.yaml").read_text())
    document["synthesize"]["exact"] = False
    release = dpopt.synthesize(document, SPECS / "data" / "survey.csv", seed=3, insecure_seed=True)
    synthesis = release.certificate.data["synthesis"]
    assert synthesis["records_from"] == "the noisy tables' least-squares total"
    assert synthesis["post_processing"].startswith("the synthetic records are drawn from the measurements' noisy tables")
    assert "target tables" in synthesis["method"] and "matching no given table exactly" in synthesis["method"]
    # Every noisy table of marginal_gaussian has the same total (consistent release), so the least-squares total is
    # that of the 4-cell sex × disability table: its SD is at most the sum of its cells' SDs (Minkowski); 6 SD
    # (a fixed seed; a Gaussian exceeds 6 SD with probability 2·10⁻⁹).
    from dpopt.synthesis.measure import first_measurement_spec
    from dpopt.spec.synthesis import load_synthesis_spec

    mechanism = dpopt.solve(first_measurement_spec(load_synthesis_spec(document))).mechanism
    sd = np.sqrt(mechanism.cell_variances())
    start = mechanism.workload.offsets[[tuple(s) for s in mechanism.workload.sets].index((1, 3))]
    assert abs(release.records.shape[0] - 1000) <= 6 * sd[start:start + 4].sum()
    assert verify_synthesis(release.certificate).passed


def test_exact_must_be_a_boolean_or_a_list_named_in_one_line():
    import yaml

    from dpopt.spec.synthesis import load_synthesis_spec

    document = yaml.safe_load((SPECS / "synthesize_survey.yaml").read_text())
    document["synthesize"]["exact"] = "yes"
    with pytest.raises(SpecError, match=r"^synthesize\.exact: .*boolean") as caught:
        load_synthesis_spec(document)
    assert "\n" not in str(caught.value)
