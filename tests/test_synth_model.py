"""dpopt.synth: records from published marginal tables.

Expected values come from independent tabulations: the records' histogram over the whole (small) domain
counted cell by cell with ``collections.Counter``, summed onto each table; never from the package's own
``residual``. Tables "from data" are tabulations of a seeded random record file, so they are consistent
whole numbers that admit a record file by construction.
"""

from __future__ import annotations

import itertools
import time
import tracemalloc
from collections import Counter

import numpy as np
import pytest

from dpopt.errors import SpecError
from dpopt.synth import SynthesisResult, synthesize_records, tabulations


def domain_of(levels: list[int]) -> dict[str, int]:
    return {f"a{i}": k for i, k in enumerate(levels)}


def tables_of(records: np.ndarray, domain: dict[str, int], keys) -> dict[tuple[str, ...], np.ndarray]:
    """Each key's table, counted record by record (Counter), independently of dpopt.synth."""
    names = list(domain)
    out = {}
    for key in keys:
        axes = [names.index(k) for k in key]
        counted = Counter(tuple(int(r[a]) for a in axes) for r in records)
        table = np.zeros([domain[k] for k in key], dtype=np.int64)
        for cell, count in counted.items():
            table[cell] = count
        out[tuple(key)] = table
    return out


def brute_force_l1(records: np.ndarray, domain: dict[str, int], tables) -> dict[tuple[str, ...], int]:
    """L1 gap of every table, from the records' full-domain histogram (every cell enumerated)."""
    names = list(domain)
    histogram = Counter(tuple(int(v) for v in r) for r in records)
    out = {}
    for key, given in tables.items():
        axes = [names.index(k) for k in key]
        counts = np.zeros(given.shape, dtype=np.int64)
        for cell in itertools.product(*[range(k) for k in domain.values()]):
            counts[tuple(cell[a] for a in axes)] += histogram.get(cell, 0)
        out[key] = int(np.abs(counts - given).sum())
    return out


def spans(domain: dict[str, int], keys) -> bool:
    """Whether the two-way keys connect every attribute (a spanning tree exists among them)."""
    parent = {k: k for k in domain}

    def find(x):
        while parent[x] != x:
            x = parent[x]
        return x

    for a, b in keys:
        parent[find(a)] = find(b)
    return len({find(k) for k in domain}) == 1


def random_records(levels: list[int], n: int, seed: int) -> np.ndarray:
    """A dependent record file: each attribute copies the previous one's level (mod its size) half the time."""
    rng = np.random.default_rng(seed)
    cols = [rng.integers(0, levels[0], n)]
    for k in levels[1:]:
        cols.append(np.where(rng.random(n) < 0.5, cols[-1] % k, rng.integers(0, k, n)))
    return np.stack(cols, axis=1)


def test_exact_on_one_way_and_a_spanning_tree_of_consistent_tables():
    domain = domain_of([3, 2, 3, 2])
    data = random_records(list(domain.values()), 40, seed=1)
    pairs = list(itertools.combinations(domain, 2))
    tables = tables_of(data, domain, pairs)
    out = synthesize_records(domain, tables, 40, np.random.default_rng(0))
    assert isinstance(out, SynthesisResult) and out.records.shape == (40, 4) and out.records.dtype == np.int32
    gaps = brute_force_l1(out.records, domain, tables)
    assert gaps == out.residual
    exact = [k for k, v in gaps.items() if v == 0]
    assert len(exact) >= len(domain) - 1 and spans(domain, exact)
    ones = tables_of(data, domain, [(k,) for k in domain])
    assert brute_force_l1(out.records, domain, ones) == {k: 0 for k in ones}
    assert "exactly" in out.method


def test_a_junction_tree_workload_is_matched_exactly():
    """A chain of two-way tables (with one-way tables) is decomposable: a record file with all of them exists
    (the data), and the chain is itself the spanning tree the method matches exactly."""
    domain = domain_of([3, 4, 2, 3, 2])
    data = random_records(list(domain.values()), 60, seed=2)
    keys = [("a0", "a1"), ("a1", "a2"), ("a2", "a3"), ("a3", "a4"), ("a0",), ("a4",)]
    tables = tables_of(data, domain, keys)
    out = synthesize_records(domain, tables, 60, np.random.default_rng(3))
    assert brute_force_l1(out.records, domain, tables) == {k: 0 for k in keys} == out.residual


def test_three_way_tables_and_weights_are_accepted():
    domain = domain_of([2, 3, 2, 2])
    data = random_records(list(domain.values()), 50, seed=4)
    keys = [("a0", "a1", "a2"), ("a1", "a2", "a3"), ("a0", "a3")]
    tables = tables_of(data, domain, keys)
    out = synthesize_records(domain, tables, 50, np.random.default_rng(5), weights={keys[0]: 2.0})
    assert brute_force_l1(out.records, domain, tables) == out.residual
    ones = tables_of(data, domain, [(k,) for k in domain])  # implied by the consistent tables: matched exactly
    assert brute_force_l1(out.records, domain, ones) == {k: 0 for k in ones}


def test_without_exact_repair_the_residual_is_still_the_brute_force_gap():
    domain = domain_of([3, 2, 3, 2])
    data = random_records(list(domain.values()), 40, seed=9)
    tables = tables_of(data, domain, itertools.combinations(domain, 2))
    out = synthesize_records(domain, tables, 40, np.random.default_rng(0), exact=False)
    assert out.residual == brute_force_l1(out.records, domain, tables)
    assert "no given table exactly" in out.method


def test_residual_of_inconsistent_tables():
    """Two tables whose shared margin of a1 differs by 4 (L1): no record file matches both, so the residuals
    sum to at least 4 (triangle inequality on a1's margin), and each is the brute-force L1 gap."""
    domain = domain_of([2, 2, 2])
    first = np.array([[5, 5], [5, 5]])   # a1 margin (10, 10)
    second = np.array([[6, 6], [2, 6]])  # a1 margin (12, 8)
    tables = {("a0", "a1"): first, ("a1", "a2"): second}
    out = synthesize_records(domain, tables, 20, np.random.default_rng(0))
    gaps = brute_force_l1(out.records, domain, tables)
    assert gaps == out.residual and sum(gaps.values()) >= 4


def test_totals_other_than_n_are_scaled_and_reported():
    domain = domain_of([2, 2])
    tables = {("a0", "a1"): np.array([[4.0, 2.0], [2.0, 2.0]])}  # 10 counts, 20 records asked
    out = synthesize_records(domain, tables, 20, np.random.default_rng(0))
    assert out.records.shape == (20, 2)
    assert out.residual == brute_force_l1(out.records, domain, tables)
    assert out.residual[("a0", "a1")] >= 10  # |20 − 10| at least, whatever the records


def test_records_stay_in_the_domain_and_seed_determines_them():
    domain = domain_of([4, 3, 5, 2, 3])
    data = random_records(list(domain.values()), 80, seed=6)
    tables = tables_of(data, domain, itertools.combinations(domain, 2))
    first = synthesize_records(domain, tables, 80, np.random.default_rng(11))
    again = synthesize_records(domain, tables, 80, np.random.default_rng(11))
    other = synthesize_records(domain, tables, 80, np.random.default_rng(12))
    assert np.array_equal(first.records, again.records) and first.residual == again.residual
    assert not np.array_equal(first.records, other.records)
    levels = np.array(list(domain.values()))
    assert first.records.min() >= 0 and np.all(first.records.max(axis=0) < levels)


def test_no_records_and_progress_lines():
    lines = []
    out = synthesize_records({"a": 2, "b": 3}, {("a", "b"): np.zeros((2, 3))}, 0, np.random.default_rng(0),
                             progress=lines.append)
    assert out.records.shape == (0, 2) and out.residual == {("a", "b"): 0}
    assert lines and all(isinstance(line, str) and "\n" not in line for line in lines)


def test_cost_grows_with_the_tables_not_the_domain():
    """20 attributes of 6 levels: 6^20 ≈ 3.7·10^15 cells (29 PB as float64). All 190 two-way tables
    (6,840 cells) and 300 records: the working set is the tables and the records (well under 1 MB each), so a
    peak of 64 MB (tracemalloc) and 60 s bound it with room, while any domain-sized array is refused by numpy
    or by the bound by 9 orders of magnitude."""
    domain = domain_of([6] * 20)
    data = random_records([6] * 20, 300, seed=7)
    tables = tables_of(data, domain, itertools.combinations(domain, 2))
    tracemalloc.start()
    start = time.process_time()
    out = synthesize_records(domain, tables, 300, np.random.default_rng(8))
    cpu = time.process_time() - start
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 64 * 2**20 and cpu < 60
    assert spans(domain, [k for k, v in out.residual.items() if v == 0])


@pytest.mark.parametrize("domain, tables, n, weights, field", [
    ({"a": 2, "b": 2}, {("b", "a"): np.ones((2, 2))}, 4, None, "marginals[('b', 'a')]"),
    ({"a": 2, "b": 2}, {("a", "c"): np.ones((2, 2))}, 4, None, "marginals[('a', 'c')]"),
    ({"a": 2, "b": 2}, {("a", "b"): np.ones((2, 3))}, 4, None, "marginals[('a', 'b')]"),
    ({"a": 2, "b": 2}, {("a", "b"): -np.ones((2, 2))}, 4, None, "marginals[('a', 'b')]"),
    ({"a": 2, "b": 2}, {("a", "b"): np.full((2, 2), np.nan)}, 4, None, "marginals[('a', 'b')]"),
    ({"a": 0, "b": 2}, {("b",): np.ones(2)}, 4, None, "domain['a']"),
    ({"a": 2, "b": 2}, {("a", "b"): np.ones((2, 2))}, -1, None, "n"),
    ({"a": 2, "b": 2}, {("a", "b"): np.ones((2, 2))}, 4, {("a", "b"): 0.0}, "weights[('a', 'b')]"),
    ({"a": 2, "b": 2}, {("a", "b"): np.ones((2, 2))}, 4, {("a",): 1.0}, "weights"),
])
def test_bad_input_is_one_line_naming_the_argument(domain, tables, n, weights, field):
    with pytest.raises(SpecError) as info:
        synthesize_records(domain, tables, n, np.random.default_rng(0), weights=weights)
    assert info.value.field == field and "\n" not in str(info.value)


def test_tabulations_count_the_records_and_agree_on_shared_margins():
    """A tabulation is the number of records in each cell (counted here with a Counter over the rows); two tables
    sharing an attribute give it the same margin, and a one-way table is that margin (consistency by construction)."""
    domain = {"a": 3, "b": 2, "c": 4}
    records = np.random.default_rng(5).integers(0, [3, 2, 4], size=(200, 3))
    out = tabulations(domain, [("a", "b"), ("a", "c"), ("c",)], records)
    counted = Counter(map(tuple, records.tolist()))
    for key, axes in ((("a", "b"), (0, 1)), (("a", "c"), (0, 2)), (("c",), (2,))):
        expected = np.zeros([domain[k] for k in key], dtype=np.int64)
        for row, times in counted.items():
            expected[tuple(row[i] for i in axes)] += times
        assert out[key].dtype == np.int64 and np.array_equal(out[key], expected)
    assert np.array_equal(out[("a", "b")].sum(axis=1), out[("a", "c")].sum(axis=1))
    assert np.array_equal(out[("a", "c")].sum(axis=0), out[("c",)])
