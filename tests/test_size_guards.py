"""Refuse before allocating (issue 35): sizes counted from the spec, each refusal one line within seconds.

Each case is one that took gigabytes or minutes before: every expected count is derived in a comment (a
binomial coefficient, a product of levels, a Stirling sum), never read off the code. Each refusal is timed
in CPU seconds (``time.process_time``) against :data:`SECONDS`, well above what counting takes and far
below what building took.
"""

from __future__ import annotations

import itertools
import json
import math
import time

import pytest

import dpopt
from dpopt.cli import main
from dpopt.core.memory import LABEL_BYTES
from dpopt.domain.kronecker import factor_rows, range_rows
from dpopt.domain.queries import compile_query, elementary_symmetric
from dpopt.errors import MemoryLimitError, UnsupportedSpecError
from dpopt.sensitivity.enumerate import _replacements, enumeration_size, neighbours_per_dataset
from dpopt.sensitivity.person_structure import count_growth_strings, growth_strings
from dpopt.spec.load import MAX_SPEC_BYTES
from dpopt.spec.models_workload import RangesFactor

SECONDS = 5.0
"""CPU seconds a refusal may take: counting takes milliseconds; building took minutes or gigabytes."""

FIFTY = [f"l{i}" for i in range(50)]


def _timed(call):
    start = time.process_time()
    try:
        call()
    finally:
        assert time.process_time() - start < SECONDS


def test_all_three_way_marginals_of_forty_fifty_level_attributes_are_refused_before_their_labels(monkeypatch):
    monkeypatch.delenv("DPOPT_MEMORY_LIMIT", raising=False)
    spec = dpopt.load_spec({"dpopt": 1, "name": "t", "data": {"attributes": {f"a{i}": FIFTY for i in range(40)}},
                            "query": {"kind": "marginals", "all_of_size": 3}, "adjacency": "replace_one",
                            "privacy": {"gdp": {"mu": 1}}})
    # C(40, 3) = 9880 tables of 50³ = 125,000 cells: 1,235,000,000 labels
    with pytest.raises(MemoryLimitError, match="the 1235000000 output labels of all 9880 marginals of size 3"):
        _timed(lambda: compile_query(spec))


def test_elementary_symmetric_counts_the_cells_of_every_marginal_of_size_k():
    sizes = [3, 2, 4, 5, 7]
    for k in range(len(sizes) + 1):  # brute force: the product of every k-subset, summed
        assert elementary_symmetric(sizes, k) == sum(math.prod(c) for c in itertools.combinations(sizes, k))


def test_a_kronecker_query_over_forty_fifty_level_attributes_is_refused_before_its_labels(monkeypatch):
    monkeypatch.delenv("DPOPT_MEMORY_LIMIT", raising=False)
    spec = dpopt.load_spec({"dpopt": 1, "name": "t", "data": {"attributes": {f"a{i}": FIFTY for i in range(40)},
                                                              "n": 100},
                            "query": {"kind": "kronecker", "all_of_size": 2, "crossed_with": {"a0": "prefix"}},
                            "adjacency": "replace_one", "privacy": {"gdp": {"mu": 1}}})
    # C(39, 2) = 741 terms, each 50 (prefix) x 50 x 50 (two identities) = 125,000 rows: 92,625,000 labels
    labels = math.comb(39, 2) * 50**3
    assert labels == 92_625_000
    with pytest.raises(MemoryLimitError, match=f"the {labels} output labels of the kronecker query"):
        _timed(lambda: compile_query(spec))


def test_a_100000_level_prefix_factor_is_refused_before_its_matrix(monkeypatch):
    monkeypatch.delenv("DPOPT_MEMORY_LIMIT", raising=False)
    spec = dpopt.load_spec({"dpopt": 1, "name": "t", "data": {"attributes": {"big": [str(i) for i in range(100_000)]},
                                                              "n": 10},
                            "query": {"kind": "kronecker", "terms": [{"big": "prefix"}]},
                            "adjacency": "replace_one", "privacy": {"gdp": {"mu": 1}}})
    # a 10⁵ x 10⁵ float64 matrix and a working copy: 2 · 10¹⁰ · 8 bytes = 149 GiB
    with pytest.raises(MemoryLimitError, match="dense factor matrices .* 149 GiB"):
        _timed(lambda: compile_query(spec))


def test_factor_rows_counts_what_factor_matrix_builds():
    for n in range(1, 8):
        assert factor_rows("ranges", n) == len(range_rows(n, None)) == n * (n + 1) // 2
        for w in range(1, 10):
            assert factor_rows(RangesFactor(ranges=w), n) == len(range_rows(n, w))


def test_a_linear_query_whose_column_pairs_do_not_fit_is_refused_before_its_svd(monkeypatch):
    monkeypatch.delenv("DPOPT_MEMORY_LIMIT", raising=False)
    m = 600
    spec = {"dpopt": 1, "name": "t", "data": {"attributes": {"a": [str(i) for i in range(m)]}},
            "query": {"kind": "linear", "attribute": "a", "matrix": [[1.0] * m for _ in range(m)]},
            "adjacency": "replace_one", "privacy": {"gdp": {"mu": 1}}}
    loaded = dpopt.load_spec(spec)
    # m(m − 1) = 359,400 differences of m + 2 numbers (the row and its two column indices): 1.6 GiB,
    # under the limit at m = 600; at a 1 GiB limit refused
    monkeypatch.setenv("DPOPT_MEMORY_LIMIT", "1G")
    with pytest.raises(MemoryLimitError, match="the 359400 differences of pairs of columns"):
        _timed(lambda: dpopt.derive(loaded))


def test_a_spec_file_above_the_limit_is_refused_unparsed(tmp_path, capsys):
    path = tmp_path / "big.yaml"
    path.write_text("dpopt: 1\n# " + "x" * MAX_SPEC_BYTES + "\n")
    start = time.process_time()
    assert main(["solve", str(path)]) == 2
    assert time.process_time() - start < SECONDS
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "above the 8 MiB a spec file may take" in err


def test_growth_strings_are_counted_without_being_listed():
    for length in range(8):
        for most in range(1, 5):
            assert count_growth_strings(length, most) == len(growth_strings(length, most))
    # partitions of 4 cells into at most 2 blocks: S(4, 1) + S(4, 2) = 1 + 7
    assert count_growth_strings(4, 2) == 8


def test_person_level_marginals_with_fifty_rows_one_per_cell_are_refused_in_seconds(monkeypatch):
    monkeypatch.delenv("DPOPT_MEMORY_LIMIT", raising=False)
    spec = dpopt.load_spec({
        "dpopt": 1, "name": "t",
        "data": {"attributes": {"age": ["0", "1", "2", "3"], "clinic": ["n", "s", "e", "w", "c"]},
                 "privacy_unit": {"id": "pid", "max_rows": 50, "max_rows_per_group": 1}},
        "query": {"kind": "marginals", "attributes": [["age"], ["clinic"]]}, "adjacency": "add_remove",
        "privacy": {"zcdp": {"rho": 0.5}}})
    # 20 cells hold at most 20 rows, one each, over 4 and 5 levels: Σ_{k≤4} S(20, k) placements of the age
    # levels alone, ~4.6·10¹⁰, far above the search's 200,000 (it listed them first: 8.2 GB)
    with pytest.raises(UnsupportedSpecError, match="max_rows_per_group"):
        _timed(lambda: dpopt.derive(spec))


def test_neighbours_per_dataset_bounds_the_replacements_listed():
    for records, values, k in ((2, 4, 1), (3, 3, 2), (3, 4, 3), (2, 5, 2)):
        for dataset in itertools.combinations_with_replacement(range(values), records):
            assert sum(1 for _ in _replacements(dataset, values, k)) <= neighbours_per_dataset(
                records, values, "hamming", k)


def test_hamming_3_marginals_skip_the_brute_force_check_that_took_gigabytes():
    spec = dpopt.load_spec({"dpopt": 1, "name": "t",
                            "data": {"attributes": {"a": ["x", "y", "z"], "b": ["p", "q"], "c": ["r", "s", "t", "u"]}},
                            "query": {"kind": "marginals", "all_of_size": 2},
                            "adjacency": {"kind": "hamming", "distance": 3},
                            "privacy": {"approx": {"epsilon": 1.0, "delta": 1e-5}}})
    # 24 record values, datasets of 3 records: C(27, 3) = 2925 datasets (under the 3000 cap), each with up to
    # 3·24 + 3·C(25, 2) + C(26, 3) = 72 + 900 + 2600 = 3572 neighbours, of 26 coordinates: 5.4·10⁸ numbers
    assert neighbours_per_dataset(3, 24, "hamming", 3) == 3572
    assert enumeration_size(spec, compile_query(spec)) is None


def test_a_release_whose_consistent_rounding_is_np_hard_at_that_size_is_refused_before_the_data(tmp_path, capsys):
    spec = json.loads(json.dumps(dpopt.load_spec(str(_example("marginals_8attr_3way_invariants"))).model_dump(
        mode="json", exclude_none=True)))
    spec["postprocess"] = {"integer": True, "consistent": True, "nonnegative": True}
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    start = time.process_time()
    assert main(["release", str(path), "--data", str(tmp_path / "absent.csv")]) == 2  # refused before reading it
    assert time.process_time() - start < SECONDS
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "postprocess.integer" in err and "10325 cells" in err


def _example(name: str):
    from conftest import ROOT

    return ROOT / "specs" / f"{name}.yaml"


def test_label_bytes_is_a_lower_bound_of_a_one_character_label():
    import sys

    assert LABEL_BYTES <= sys.getsizeof("a") + 8  # the str and its pointer in the tuple
