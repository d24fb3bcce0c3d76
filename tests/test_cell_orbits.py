"""cell_orbits (the cells a symmetry of the neighbouring differences makes equal, pooling a Monte Carlo's per-cell
errors) against the brute-force definition it replaced, on random and real difference sets, and on cases whose
orbits are derived by hand."""

from __future__ import annotations

import itertools
import time

import numpy as np
import pytest

import dpopt
from dpopt.certificate.per_cell import cell_orbits


def brute_force_orbits(labels, vectors):
    """The definition, tried swap by swap: for every pair of levels of every attribute, rebuild the set of rounded
    rows with the two levels' columns exchanged and compare it with the listed set (O(L⁴) for a histogram of L
    cells; the package's implementation before it was made incremental)."""
    if vectors is None:
        return None
    try:
        cells = [tuple(part.split("=", 1)[1] for part in str(label).split(",")) for label in labels]
    except IndexError:
        return None
    index = {cell: i for i, cell in enumerate(cells)}
    if len(index) != len(cells) or vectors.shape[1] != len(cells) or len({len(c) for c in cells}) != 1:
        return None
    rows = {tuple(r) for r in np.round(vectors, 9).tolist()}
    parent = list(range(len(cells)))

    def root(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for axis in range(len(cells[0])):
        levels = list(dict.fromkeys(c[axis] for c in cells))
        for a, b in ((a, b) for k, a in enumerate(levels) for b in levels[k + 1:]):
            swap = {a: b, b: a}
            image = [index.get(c[:axis] + (swap.get(c[axis], c[axis]),) + c[axis + 1:]) for c in cells]
            if None in image:
                continue
            moved = np.empty_like(vectors)
            moved[:, image] = vectors
            if {tuple(r) for r in np.round(moved, 9).tolist()} == rows:
                for i, j in enumerate(image):
                    parent[root(i)] = root(j)
    return np.array([root(i) for i in range(len(cells))])


def _labels(shape, rng, drop):
    """Cell labels of a table of ``shape`` (attributes a0, a1, …), levels shuffled, some cells dropped."""
    levels = [list(rng.permutation([f"l{k}" for k in range(n)])) for n in shape]
    cells = [",".join(f"a{axis}={level}" for axis, level in enumerate(c)) for c in itertools.product(*levels)]
    keep = rng.random(len(cells)) >= drop
    return [c for c, k in zip(cells, keep) if k] or cells[:1]


def _closed(rows, permutations):
    """The set of rows closed under the column permutations (each p moves column i to p[i]): the smallest
    superset they map onto itself."""
    found = {tuple(r) for r in rows}
    frontier = list(found)
    while frontier:
        new = []
        for r in frontier:
            for p in permutations:
                image = np.empty(len(r))
                image[p] = r
                t = tuple(image)
                if t not in found:
                    found.add(t)
                    new.append(t)
        frontier = new
    return np.array(sorted(found))


def _swaps(labels):
    """Every level swap of the labels that maps the cells onto cells, as a permutation of the cells."""
    cells = [tuple(part.split("=")[1] for part in label.split(",")) for label in labels]
    index = {c: i for i, c in enumerate(cells)}
    out = []
    for axis in range(len(cells[0])):
        levels = sorted({c[axis] for c in cells})
        for a, b in itertools.combinations(levels, 2):
            swap = {a: b, b: a}
            image = [index.get(c[:axis] + (swap.get(c[axis], c[axis]),) + c[axis + 1:]) for c in cells]
            if None not in image:
                out.append(np.array(image))
    return out


@pytest.mark.parametrize("seed", range(60))
def test_random_difference_sets_give_the_brute_force_orbits(seed):
    rng = np.random.default_rng(seed)
    shape = [(5,), (3, 3), (2, 3, 2), (4, 3), (2, 2, 2)][seed % 5]
    labels = _labels(shape, rng, drop=0.15 if seed % 3 == 0 else 0.0)
    d = len(labels)
    values = np.array([1.0, -1.0, 2.0, 0.5, 1 / 3])
    rows = np.zeros((int(rng.integers(1, 5)), d))
    for r in rows:
        at = rng.choice(d, size=min(d, int(rng.integers(1, 4))), replace=False)
        r[at] = rng.choice(values, size=len(at))
    swaps = _swaps(labels)
    chosen = [swaps[k] for k in rng.choice(len(swaps), size=min(len(swaps), int(rng.integers(0, 4))),
                                           replace=False)] if swaps else []
    vectors = _closed(rows, chosen)  # the chosen swaps are symmetries; most others are not
    vectors = np.vstack([vectors, vectors[: len(vectors) // 2]])  # duplicates: a set, not a multiset
    vectors[vectors == 0] = rng.choice([0.0, -0.0, 1e-12], size=int(np.sum(vectors == 0)))  # all round to 0
    vectors = vectors[rng.permutation(len(vectors))]
    np.testing.assert_array_equal(cell_orbits(labels, vectors), brute_force_orbits(labels, vectors))


SPACES = [
    ({"a": 6}, "histogram", "replace_one", []),
    ({"a": 5}, "histogram", "add_remove", []),
    ({"a": 3, "b": 4}, "contingency_table", "replace_one", []),
    ({"a": 3, "b": 3}, "contingency_table", "add_remove", []),
    ({"a": 3, "b": 4}, "contingency_table", "replace_one", ["a"]),
    ({"a": 3, "b": 3}, "contingency_table", "replace_one", ["a", "b"]),
    ({"a": 2, "b": 2, "c": 3}, "contingency_table", "replace_one", ["c"]),
    ({"a": 2, "b": 3, "c": 2}, "contingency_table", "add_remove", []),
]


@pytest.mark.parametrize("sizes, kind, adjacency, margins", SPACES)
def test_the_spaces_dpopt_derives_give_the_brute_force_orbits(sizes, kind, adjacency, margins):
    attributes = {name: [f"{name}{k}" for k in range(n)] for name, n in sizes.items()}
    query = ({"kind": "histogram", "attribute": "a"} if kind == "histogram"
             else {"kind": kind, "attributes": list(attributes)})
    spec = {"dpopt": 1, "name": "orbits", "data": {"attributes": attributes, "n": 100}, "query": query,
            "adjacency": {"kind": adjacency}, "privacy": {"pure": {"epsilon": 1.0}}, "mechanism": "k_norm",
            "utility": {"metric": "l2"}}
    if margins:
        spec["invariants"] = [{"kind": "margins", "attributes": [m]} for m in margins]
    problem = dpopt.compile(spec)
    vectors = problem.space.listed()
    expected = brute_force_orbits(problem.labels, vectors)
    np.testing.assert_array_equal(cell_orbits(problem.labels, vectors), expected)
    shuffled = vectors[np.random.default_rng(1).permutation(len(vectors))]  # the set, in another order
    np.testing.assert_array_equal(cell_orbits(problem.labels, shuffled), expected)


def test_a_replace_one_histogram_is_one_orbit_rooted_at_its_last_cell():
    # differences e_i − e_j, i ≠ j: every swap is a symmetry. By hand, the unions of swaps (v0, v1), (v0, v2),
    # (v0, v3) in turn make 1, then 2, then 3 the root of cell 0's orbit, which then holds every cell.
    labels = [f"a=v{i}" for i in range(4)]
    vectors = np.array([np.eye(4)[i] - np.eye(4)[j] for i in range(4) for j in range(4) if i != j])
    np.testing.assert_array_equal(cell_orbits(labels, vectors), [3, 3, 3, 3])


def test_a_published_subtotal_breaks_the_swaps_that_cross_it():
    # x + y published: a replaced record stays within {x, y}, S = {e_x − e_y, e_y − e_x}. Swap (x, y) maps S onto
    # itself; (x, z) maps e_x − e_y to e_z − e_y ∉ S, (y, z) maps it to e_x − e_z ∉ S: orbits {x, y} (root y) and {z}
    labels = ["a=x", "a=y", "a=z"]
    vectors = np.array([[1.0, -1.0, 0.0], [-1.0, 1.0, 0.0]])
    np.testing.assert_array_equal(cell_orbits(labels, vectors), [1, 1, 2])


def test_exactly_one_swap_is_a_symmetry():
    # cells ax, ay, bx, by; S = {e_ax − e_ay, e_bx − e_by}. Swap (a, b) exchanges the two rows; swap (x, y) maps
    # e_ax − e_ay to e_ay − e_ax ∉ S. By hand: the unions of (a, b) set parent[ax] = bx, parent[ay] = by
    labels = ["a=a,b=x", "a=a,b=y", "a=b,b=x", "a=b,b=y"]
    vectors = np.array([[1.0, -1.0, 0.0, 0.0], [0.0, 0.0, 1.0, -1.0]])
    np.testing.assert_array_equal(cell_orbits(labels, vectors), [2, 3, 2, 3])
    np.testing.assert_array_equal(cell_orbits(labels, -vectors), [2, 3, 2, 3])


def test_columns_alike_but_rows_not():
    # S = {e_x + e_y, e_z}: every column holds one 1, so the column profiles agree for every swap, and only the rows
    # decide. Swap (x, y) fixes both rows; (x, z) maps e_x + e_y to e_y + e_z ∉ S, (y, z) to e_x + e_z ∉ S
    labels = ["a=x", "a=y", "a=z"]
    np.testing.assert_array_equal(cell_orbits(labels, np.array([[1.0, 1.0, 0.0], [0.0, 0.0, 1.0]])), [1, 1, 2])


def test_edge_cases_keep_their_meaning():
    labels = ["a=x", "a=y", "a=z"]
    np.testing.assert_array_equal(cell_orbits(labels, np.zeros((0, 3))), [2, 2, 2])  # ∅ is kept by every swap
    np.testing.assert_array_equal(cell_orbits(labels, np.array([[np.nan, 0, 0], [0, np.nan, 0]])), [0, 1, 2])
    assert cell_orbits(labels, None) is None
    assert cell_orbits(["count"], np.ones((1, 1))) is None
    assert cell_orbits(labels, np.ones((1, 2))) is None  # differences of another dimension


def test_a_hash_collision_never_merges_cells(monkeypatch):
    # every row hashes to 0: the screen lets every swap through, and only the exact comparison decides
    from dpopt.certificate import per_cell

    monkeypatch.setattr(per_cell, "_entry_words", lambda columns, values: np.zeros(len(columns), np.uint64))
    labels = ["a=a,b=x", "a=a,b=y", "a=b,b=x", "a=b,b=y"]
    vectors = np.array([[1.0, -1.0, 0.0, 0.0], [0.0, 0.0, 1.0, -1.0]])
    np.testing.assert_array_equal(per_cell.cell_orbits(labels, vectors), [2, 3, 2, 3])
    lopsided = np.vstack([np.eye(4), -np.eye(4), [[2.0, 0, 0, 0]]])
    np.testing.assert_array_equal(per_cell.cell_orbits(labels, lopsided), [0, 1, 2, 3])


def test_a_100_cell_replace_one_histogram_takes_well_under_a_second():
    # the brute force took minutes here (O(L⁴): 4,950 swaps × a set of 9,900 rows of 100 values); the incremental
    # form tests 99 swaps of ~400 entries each. 2 s leaves room for a loaded machine (0.03 s measured idle).
    labels = [f"a=v{i}" for i in range(100)]
    eye = np.eye(100)
    vectors = (eye[:, None, :] - eye[None, :, :]).reshape(-1, 100)
    vectors = vectors[np.any(vectors != 0, axis=1)]
    start = time.process_time()
    orbits = cell_orbits(labels, vectors)
    assert time.process_time() - start < 2.0
    np.testing.assert_array_equal(orbits, np.full(100, 99))  # one orbit, rooted as in the 4-cell case above
