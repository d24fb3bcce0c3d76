"""Size guards: :func:`dpopt.core.memory.require_memory` refuses above the limit, with one line."""

from __future__ import annotations

import json

import numpy as np
import pytest

import dpopt
from dpopt.cli import main
from dpopt.core.memory import DEFAULT_LIMIT, dense_bytes, format_bytes, memory_limit, require_memory
from dpopt.domain.queries import compile_query
from dpopt.errors import MemoryLimitError, SpecError, UnsupportedSpecError
from dpopt.privacy.pld import DiscretePLD
from dpopt.sensitivity.subspace import FullSpace, SumZeroSpace


def test_default_limit_is_two_gib(monkeypatch):
    monkeypatch.delenv("DPOPT_MEMORY_LIMIT", raising=False)
    assert memory_limit() == DEFAULT_LIMIT == 2 * 1024**3


@pytest.mark.parametrize(("text", "expected"), [
    ("1073741824", 1024**3), ("500M", 500 * 1024**2), ("2g", 2 * 1024**3), ("1.5GiB", 3 * 1024**3 // 2),
    ("4T", 4 * 1024**4),
])
def test_limit_from_environment(monkeypatch, text, expected):
    monkeypatch.setenv("DPOPT_MEMORY_LIMIT", text)
    assert memory_limit() == expected


@pytest.mark.parametrize("text", ["lots", "-1G", "1 X", "1e9"])
def test_bad_limit_is_a_spec_error(monkeypatch, text):
    monkeypatch.setenv("DPOPT_MEMORY_LIMIT", text)
    with pytest.raises(SpecError, match="DPOPT_MEMORY_LIMIT"):
        memory_limit()


def test_helmert_basis_of_a_1000_by_1000_table_is_refused(monkeypatch):
    """Issue 31 measured the dense Helmert basis of a 1000 x 1000 table at 7.28 TiB:
    (10^6 - 1) x 10^6 float64 entries = 7,999,992,000,000 B = 7.276 TiB."""
    monkeypatch.delenv("DPOPT_MEMORY_LIMIT", raising=False)
    nbytes = dense_bytes(10**6 - 1, 10**6)
    assert nbytes == 7_999_992_000_000
    assert format_bytes(nbytes) == "7.28 TiB"
    with pytest.raises(MemoryLimitError) as caught:
        require_memory(nbytes, "the dense Helmert basis")
    assert isinstance(caught.value, UnsupportedSpecError)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("the dense Helmert basis: would take 7.28 TiB")
    assert "2 GiB" in message and "DPOPT_MEMORY_LIMIT" in message


def test_below_the_limit_passes(monkeypatch):
    monkeypatch.setenv("DPOPT_MEMORY_LIMIT", "1K")
    require_memory(1024, "a structure of exactly the limit")
    with pytest.raises(MemoryLimitError):
        require_memory(1025, "one byte more")


def test_dense_bytes_does_not_overflow():
    """Python integers: 10^12 x 10^12 float64 entries = 8 x 10^24 bytes exactly."""
    assert dense_bytes(10**12, 10**12) == 8 * 10**24
    assert dense_bytes(3, 4, itemsize=1) == 12


# ------------------------------------------------------------- the guards in place
# A limit of 1 MiB stands for the default 2 GiB on domains 1000 times smaller, so that the
# refusals run in a fraction of a second; the estimates are the shapes' products (8-byte floats).

def _table(rows: int, columns: int, **fields) -> dict:
    return {"dpopt": 1, "name": "table", "adjacency": "replace_one", "privacy": {"gdp": {"mu": 1.0}},
            "data": {"attributes": {"a": [f"a{i}" for i in range(rows)], "b": [f"b{i}" for i in range(columns)]}},
            "query": {"kind": "contingency_table", "attributes": ["a", "b"]}, **fields}


def test_auto_on_a_large_table_refuses_in_one_line_naming_the_structures(monkeypatch):
    # d = 1200 cells: the Helmert basis takes 3 x 1200 x 1200 x 8 B = 33 MiB; the certificate's
    # Monte Carlo of 4,000,000 // 1200 = 3,333 noise draws 2 x 3333 x 1200 x 8 B = 61 MiB; both above 1 MiB
    monkeypatch.setenv("DPOPT_MEMORY_LIMIT", "1M")
    with pytest.raises(dpopt.errors.CalibrationError) as caught:
        dpopt.solve(_table(30, 40))
    message = str(caught.value)
    assert "\n" not in message
    # (james_stein refuses earlier, on its guaranteed gain; its Helmert basis: the next test)
    assert "k_norm: the dense 1200 x 1199 basis of the sum_zero span: would take 32.9 MiB" in message
    assert "3,333 noise draws of dimension 1,200: would take 61 MiB" in message


def test_an_explicit_family_over_the_limit_is_one_line_exit_2(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("DPOPT_MEMORY_LIMIT", "1M")
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(_table(30, 40, mechanism="james_stein")))
    assert main(["solve", str(spec)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Helmert basis" in err and "DPOPT_MEMORY_LIMIT" in err


def test_the_dense_query_matrix_and_span_bases_are_refused(monkeypatch):
    monkeypatch.setenv("DPOPT_MEMORY_LIMIT", "1M")
    query = compile_query(dpopt.load_spec(_table(30, 40)))
    with pytest.raises(MemoryLimitError, match="the dense 1200 x 1200 matrix of the contingency_table query"):
        query.dense()  # 1200 x 1200 x 8 B = 11 MiB
    with pytest.raises(MemoryLimitError, match="the dense 1200 x 1199 basis of the sum_zero span: would take 32.9 MiB"):
        SumZeroSpace(1200).basis()  # 3 x 1200 x 1199 x 8 B
    with pytest.raises(MemoryLimitError, match="the dense 400 x 400 basis of the full span: would take 1.22 MiB"):
        FullSpace(400).basis()  # 400 x 400 x 8 B = 1,280,000 B
    assert FullSpace(300).basis().shape == (300, 300)  # 703 KiB


def test_noise_draws_and_the_privacy_loss_grid_are_refused(monkeypatch):
    mechanism = dpopt.solve({"dpopt": 1, "name": "c", "data": {"attributes": {"a": ["x"]}}, "query": {"kind": "count"},
                             "adjacency": "add_remove", "privacy": {"gdp": {"mu": 1.0}},
                             "mechanism": "gaussian"}).mechanism
    monkeypatch.setenv("DPOPT_MEMORY_LIMIT", "1M")  # after the solve, whose certificate draws 100,000
    with pytest.raises(MemoryLimitError, match="100,000 noise draws of dimension 1: would take 1.53 MiB"):
        mechanism.sample(100_000)  # 2 x 100,000 x 8 B
    # losses 0 and 1000 on a grid of step 1e-4: 10^7 + 1 bins of 8 B = 76.3 MiB
    with pytest.raises(MemoryLimitError, match="the privacy-loss grid of step 0.0001: would take 76.3 MiB"):
        DiscretePLD.from_losses(np.array([0.0, 1000.0]), np.array([0.5, 0.5]), 1e-4, up=True)


@pytest.mark.slow
def test_auto_on_a_1000_by_1000_table_refuses_under_the_default_limit(monkeypatch):
    """The issue's case: a dense Helmert basis of 7.28 TiB was allocated (MemoryError, or the machine taken).
    Its construction takes three 10^6 x 999,999 arrays: 3 x 10^6 x 999,999 x 8 B = 2.4e13 B = 21.8 TiB."""
    monkeypatch.delenv("DPOPT_MEMORY_LIMIT", raising=False)
    with pytest.raises(dpopt.errors.CalibrationError, match="1000000 x 999999 Helmert basis .* would take 21.8 TiB"):
        dpopt.solve(_table(1000, 1000))


def test_monte_carlo_batches_hold_at_most_the_batch_whatever_the_dimension():
    # 148,137 cells (all two-way marginals of adult): 2·10⁷ // 148,137 = 135 draws a batch
    from dpopt.mechanisms.base import MONTE_CARLO_BATCH, monte_carlo_batches
    sizes = monte_carlo_batches(2_000, 148_137)
    assert sum(sizes) == 2_000 and max(sizes) == MONTE_CARLO_BATCH // 148_137 == 135
    assert monte_carlo_batches(3_333, 1_200) == [3_333]  # 4·10⁶ values: one batch, as before batching
    assert monte_carlo_batches(3, 10**9) == [1, 1, 1]


def test_a_batched_monte_carlo_draws_what_one_call_draws(monkeypatch):
    # The Gaussian sampler takes its variates from one generator in row-major order, so draws made in batches
    # of 7 rows are the rows of one call (numpy's Generator streams are sequential): every per-draw term, hence
    # the estimate and its interval, must be identical, not merely close. (The exact lattice sampler's rejection
    # rounds consume the stream per call, not per row: the floating-point sampler is the one with that property.)
    import dpopt.mechanisms.base as base
    mechanism = dpopt.solve(_table(3, 4, mechanism="gaussian", sampler="floating_point")).mechanism
    whole = mechanism._monte_carlo("l2", None, None, draws=50)
    monkeypatch.setattr(base, "MONTE_CARLO_BATCH", 7 * 12)
    assert base.monte_carlo_batches(50, 12) == [7] * 7 + [1]
    assert mechanism._monte_carlo("l2", None, None, draws=50) == whole
    assert mechanism._monte_carlo("max_variance", None, None, draws=50).value == pytest.approx(
        float(np.var(mechanism.sample(50, np.random.default_rng(base.MONTE_CARLO_SEED)), axis=0).max()), rel=1e-12)


def test_merged_moments_are_numpys_variance():
    from dpopt.mechanisms.base import merge_moments
    z = np.random.default_rng(3).normal(size=(101, 4)) * [1.0, 2.0, 5.0, 1e3] + 7.0
    moments = None
    for part in (z[:10], z[10:11], z[11:]):
        moments = merge_moments(moments, part)
    count, mean, m2 = moments
    assert count == 101
    np.testing.assert_allclose(mean, z.mean(axis=0), rtol=1e-13)
    np.testing.assert_allclose(m2 / count, np.var(z, axis=0), rtol=1e-12)
