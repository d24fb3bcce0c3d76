"""Compiled counting queries: the matrix A (sparse, built on first use) and its dense form.

The expected answers are the queries' record-by-record counts (``CountingQuery.evaluate``,
which never reads A): φ(X) = A h(X) must hold with A as a sparse matrix and as
``CountingQuery.dense()``, for every counting kind, and the two forms must be equal.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import make_spec

from dpopt.domain.queries import compile_query
from dpopt.spec.load import load_spec

ATTRIBUTES = {"race": ["white", "black", "other"], "sex": ["f", "m"], "age": ["young", "old"]}
QUERIES = {
    "count": {"kind": "count"},
    "histogram": {"kind": "histogram", "attribute": "race"},
    "contingency_table": {"kind": "contingency_table", "attributes": ["sex", "race"]},
    "marginals": {"kind": "marginals", "attributes": [["race"], ["sex", "age"]]},
    "linear": {"kind": "linear", "attribute": "race", "matrix": [[1, 1, 0], [0, 2, -1]]},
}


def _query(kind: str):
    return compile_query(load_spec(make_spec(data={"attributes": ATTRIBUTES}, query=QUERIES[kind])))


def _histogram(query, records) -> np.ndarray:
    """h(X) over the query's cells (row-major in its attributes), counted record by record."""
    shape = [len(levels) for levels in query.levels]
    h = np.zeros(shape or [1])
    for record in records:
        cell = tuple(query.levels[i].index(record[a]) for i, a in enumerate(query.attributes))
        h[cell or (0,)] += 1
    return h.reshape(-1)


@pytest.mark.parametrize("kind", sorted(QUERIES))
def test_both_forms_of_the_matrix_give_the_record_counts(kind):
    query = _query(kind)
    rng = np.random.default_rng(7)
    records = [{a: levels[rng.integers(len(levels))] for a, levels in ATTRIBUTES.items()} for _ in range(40)]
    expected = query.evaluate(records)
    h = _histogram(query, records)
    dense = query.dense()
    assert dense.shape == (query.dimension, query.cells) == query.matrix.shape
    np.testing.assert_array_equal(dense @ h, expected)
    np.testing.assert_array_equal(query.matrix @ h, expected)
    np.testing.assert_array_equal(query.matrix.toarray(), dense)


def test_dense_is_a_new_array():
    query = _query("linear")
    query.dense()[0, 0] = 99.0
    assert query.dense()[0, 0] == 1.0


def _linear(matrix, **extra):
    query = {"kind": "linear", "attribute": "race", "matrix": matrix, **extra}
    return compile_query(load_spec(make_spec(data={"attributes": ATTRIBUTES}, query=query)))


def test_linear_rows_are_named_from_the_spec():
    # issue 37: rows were "row 0" … "row 14". A run of ones over consecutive levels (in the spec's order) is named
    # by its first and last level; any other row, or two rows that would share a name, by its index
    query = _linear([[1, 1, 1], [0, 1, 1], [0, 0, 1], [1, 0, 1], [0, 2, 0], [0, 0, 1]])
    assert query.labels == ("race=white..other", "race=black..other", "row 2", "row 3", "row 4", "row 5")
    assert _linear([[1, 0, 0], [1, 1, 0]]).labels == ("race=white", "race=white..black")
    named = _linear([[1, 1, 1], [0, 0, 1]], labels=["respondents", "others"])
    assert named.labels == ("respondents", "others")


@pytest.mark.parametrize("labels, message", [
    (["a"], "query: labels: 1 labels for 2 matrix rows (one per row)"),
    (["a", "  "], "query.labels: label 1 is blank: name every row of the matrix"),
    (["a", "a"], "query.labels: 'a' names more than one row: labels must be unique"),
])
def test_linear_labels_are_refused_in_one_line(labels, message):
    from dpopt.errors import SpecError

    with pytest.raises(SpecError) as caught:
        _linear([[1, 1, 1], [0, 0, 1]], labels=labels)
    assert str(caught.value) == message
