"""Person-level privacy, part two: marginals with a per-cell cap below the total, linear queries,
post-processing with a privacy unit, Dask bounding against DuckDB's.

Expected values come from the brute force of ``tests/test_person_level.py`` (every per-cell count vector
a person may keep, listed with ``itertools.product``, the query applied with its dense matrix), from
closed forms worked by hand in the comments, and from the DuckDB engine for the Dask engine's kept rows.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import dpopt
from dpopt.errors import UnsupportedSpecError
from test_person_level import UNITS, brute_norms, brute_space, spec_of

SMALL = {"a": ["0", "1"], "b": ["x", "y", "z"], "c": ["only"]}
DERIVED_MARGINALS = [  # (tables, unit, adjacency) whose closed form is attained (see person_structure)
    ([["a"], ["b"], ["c"], ["a", "b"]], {"max_rows": 3, "max_rows_per_group": 1}, "add_remove"),
    ([["a"], ["b"], ["c"], ["a", "b"]], {"max_rows": 5, "max_rows_per_group": 2}, "add_remove"),
    ([["a"], ["b"]], {"max_rows": 3, "max_rows_per_group": 2, "max_groups": 2}, "add_remove"),
    ([["a"], ["b"]], {"max_rows_per_group": 1, "max_groups": 3}, "add_remove"),
    ([["b"], ["a", "b"]], {"max_rows": 4, "max_rows_per_group": 2}, "add_remove"),
    ([["b"], ["a", "b"]], {"max_rows": 4, "max_rows_per_group": 2}, "replace_one"),
    ([["b"], ["a", "b"]], {"max_rows": 3, "max_rows_per_group": 2, "max_groups": 2}, "replace_one"),
]


@pytest.mark.parametrize("tables, unit, adjacency", DERIVED_MARGINALS)
def test_marginals_below_the_total_match_brute_force(tables, unit, adjacency):
    spec = spec_of({"kind": "marginals", "attributes": tables}, unit, adjacency, SMALL)
    space = dpopt.derive(dpopt.load_spec(spec))
    expected = brute_space(spec)
    assert (space.l1, space.l2_squared, space.linf) == expected
    assert brute_norms(space.extreme_vectors(), pairs=False) == expected  # the stated extremes attain them


def test_marginals_below_the_total_by_hand():
    # tables {a}, {b}; ≤ 4 rows, ≤ 2 per cell: two cells of 2 rows differing in b only. Table {a} sees 4 rows
    # in one cell (16), table {b} 2 and 2 (8): l2² = 24, l1 = 2·4 = 8, l∞ = 4 (a's cell gathers b's 3 cells)
    space = dpopt.derive(dpopt.load_spec(spec_of({"kind": "marginals", "attributes": [["a"], ["b"]]},
                                                 {"max_rows": 4, "max_rows_per_group": 2}, "add_remove", SMALL)))
    assert (space.l1, space.l2_squared, space.linf) == (8, 24, 4)


@pytest.mark.parametrize("tables, unit, adjacency, words", [
    ([["b"], ["a", "b"]], {"max_rows": 3, "max_rows_per_group": 1}, "add_remove", "levels"),
    ([["a"], ["b"]], {"max_rows": 3, "max_rows_per_group": 1}, "replace_one", "placed apart"),
])
def test_marginals_not_derived_are_refused_in_one_line(tables, unit, adjacency, words):
    spec = dpopt.load_spec(spec_of({"kind": "marginals", "attributes": tables}, unit, adjacency, SMALL))
    with pytest.raises(UnsupportedSpecError, match=words) as info:
        dpopt.derive(spec)
    assert info.value.field == "data.privacy_unit.max_rows_per_group" and "\n" not in str(info.value)


@pytest.mark.parametrize("adjacency", ["add_remove", "replace_one"])
@pytest.mark.parametrize("unit", UNITS)
def test_linear_query_matches_brute_force(unit, adjacency):
    spec = spec_of({"kind": "linear", "attribute": "a", "matrix": [[1, -2, 3], [0, 1, 1]]}, unit, adjacency)
    space = dpopt.derive(dpopt.load_spec(spec))
    assert (space.l1, space.l2_squared, space.linf) == brute_space(spec)


def test_linear_query_by_hand():
    # A = [1 −2 3]: ≤ 4 rows in all, any per level: all 4 rows on level 2 gives 12, on level 1 gives −8;
    # add/remove l1 = l2 = l∞ = 12; replace: 12 − (−8) = 20
    for adjacency, expected in (("add_remove", 12), ("replace_one", 20)):
        space = dpopt.derive(dpopt.load_spec(spec_of({"kind": "linear", "attribute": "a", "matrix": [[1, -2, 3]]},
                                                     {"max_rows": 4}, adjacency)))
        assert (space.l1, space.l2_squared, space.linf) == (expected, expected**2, expected)
