"""A hull whose group of table moves is too large for the budget's point images is built by plain gift wrapping.

Expected values and their sources:

* the 2×8 table with both margins invariant (replace-one): its neighbouring differences are the 8·7 = 56
  rectangles (e_j − e_j') ⊗ (1, −1) and 0, so n = 57 listed vectors of rank 7; (e_j − e_j') ⊗ (1, −1) ↦ e_j − e_j'
  is a linear isomorphism onto the roots of A_7, whose root polytope has 2^8 − 2 = 254 facets (Gelfand, Graev &
  Postnikov 1997); the facet count is also taken from qhull's full hull (scipy.spatial.ConvexHull), its triangles'
  distinct hyperplanes;
* the group of a 2×8 table: 2·2!·8! = 161,280 (the sign, then row and column permutations; no transpose as
  2 ≠ 8), so 161,280 × 57 = 9,192,960 point images, above the budget's 4,000,000;
* the 4×4 table with both margins: 2·4!·4!·2 = 2,304 elements, 265 listed vectors (module docstring of
  :mod:`dpopt.geometry.symmetric_hull`), 610,560 images, within the budget, so still built up to its group;
* the 5×5 table: 57,600 × 1,401 = 80,697,600 images, so plain gift wrapping, which stops at its first facet with
  360 vertices: C(360, ⌊15/2⌋) = C(360, 7) = 146,622,043,719,720 > 10⁷ (math.comb, computed here);
* invariants released exactly: each row and column total of a release equals the data's, counted with csv.
"""

from __future__ import annotations

import csv
import json
import math
from collections import Counter

import numpy as np
import pytest
from scipy.spatial import ConvexHull

import dpopt
from dpopt.cli import main
from dpopt.geometry import HullBudgetExceeded, Polytope, SymmetricPolytope
from dpopt.mechanisms.k_norm import HULL_BUDGET, HullBody, hull_group
from dpopt.sensitivity.subspace import pivot_coordinates


def table_spec(rows: int, columns: int, **extra) -> dict:
    """A rows × columns table with both one-way margins invariant, K-norm at pure ε = 1."""
    return {"dpopt": 1, "name": f"{rows}x{columns} with margins",
            "data": {"attributes": {"a": [f"r{i}" for i in range(rows)], "b": [f"c{j}" for j in range(columns)]},
                     "n": 16},
            "query": {"kind": "contingency_table", "attributes": ["a", "b"]},
            "invariants": [{"kind": "margins", "attributes": ["a"]}, {"kind": "margins", "attributes": ["b"]}],
            "adjacency": "replace_one", "privacy": {"pure": {"epsilon": 1.0}}, "mechanism": "k_norm", **extra}


def test_the_2x8_table_with_both_margins_is_built_by_plain_gift_wrapping():
    space = dpopt.derive(dpopt.load_spec(table_spec(2, 8)))
    vectors = space.hull_vectors()
    assert vectors.shape == (57, 16) and space.rank == 7
    assert 2 * math.factorial(2) * math.factorial(8) * 57 == 9_192_960 > HULL_BUDGET.images
    assert not hull_group(vectors, space.rank, HULL_BUDGET)
    body = HullBody(vectors, space.span.basis(), HULL_BUDGET)
    assert type(body.polytope) is Polytope and body.polytope.method == "gift wrapping"
    y = pivot_coordinates(vectors).of(vectors)
    qhull = ConvexHull(y).equations  # rows (a, b): ⟨a, x⟩ + b = 0, b < 0 as 0 is interior
    planes = np.unique(np.round(qhull[:, :-1] / -qhull[:, -1:], 9), axis=0)
    assert len(body.polytope.normals) == len(planes) == 2**8 - 2


def test_the_group_is_kept_within_the_images_and_forced_only_where_a_table_shape_exists():
    """4×4: 610,560 images, up to the group; a 3-cell replace-one histogram (rank 2) has no table shape."""
    space = dpopt.derive(dpopt.load_spec(table_spec(4, 4)))
    vectors = space.hull_vectors()
    assert len(vectors) * 2 * math.factorial(4) ** 2 * 2 == 610_560 <= HULL_BUDGET.images
    assert hull_group(vectors, space.rank, HULL_BUDGET)
    eye = np.eye(3)
    roots = np.array([eye[i] - eye[j] for i in range(3) for j in range(3) if i != j])
    basis = np.linalg.qr(roots[[0, 1]].T)[0]
    with pytest.raises(ValueError, match="no table shape keeps the vectors"):
        HullBody(roots, basis, symmetric=True)


def test_the_5x5_table_still_falls_back_on_a_facet_of_360_vertices():
    space = dpopt.derive(dpopt.load_spec(table_spec(5, 5)))
    vectors = space.hull_vectors()
    assert not hull_group(vectors, space.rank, HULL_BUDGET)
    assert math.comb(360, 7) == 146_622_043_719_720
    with pytest.raises(HullBudgetExceeded, match=r"facet with 360 vertices: C\(360, 7\) = 146622043719720"):
        HullBody(vectors, space.span.basis(), HULL_BUDGET)


def test_the_rebuild_follows_the_recorded_builder_not_the_unlimited_rule(monkeypatch):
    """Without a limit the group's images would fit: the certificate's hull is rebuilt by the builder it records,
    so the group is never built for it, and it is for a certificate that records the group."""
    sol = dpopt.solve(table_spec(2, 8, sampler="floating_point"))
    parameters = sol.certificate["mechanism"]["parameters"]
    assert parameters["norm_ball"] == "hull" and parameters["facets"] == 254
    assert parameters["triangulation"] == "gift wrapping" and "symmetry_group_order" not in parameters

    def never(*args, **kwargs):
        raise AssertionError("the hull was built up to its group")

    monkeypatch.setattr(SymmetricPolytope, "from_points", never)
    assert dpopt.verify(sol.certificate).passed
    other = json.loads(sol.certificate.to_json())
    other["mechanism"]["parameters"]["triangulation"] = SymmetricPolytope.method
    with pytest.raises(AssertionError, match="built up to its group"):
        dpopt.verify(other)


def _records(path) -> Counter:
    """16 records: every cell of the 2×8 table once (margins 8 per row, 2 per column)."""
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["a", "b"])
        writer.writerows([f"r{i}", f"c{j}"] for i in range(2) for j in range(8))
    with path.open() as handle:
        return Counter((row["a"], row["b"]) for row in csv.DictReader(handle))


@pytest.mark.parametrize("sampler", ["floating_point", pytest.param("exact", marks=pytest.mark.slow)])  # exact: 8 s
def test_solve_verify_release_agree_through_the_cli(tmp_path, sampler):
    """The exact sampler's path (the lattice cone sampler on the plain hull, 254 facets) is the slow variant; the
    floating-point one crosses the same builder choice in solve, verify and release."""
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(table_spec(2, 8, sampler=sampler)))
    counts = _records(tmp_path / "data.csv")
    assert main(["solve", str(spec), "--out", str(tmp_path / "solved")]) == 0
    assert main(["verify", str(tmp_path / "solved" / "certificate.json")]) == 0
    assert main(["release", str(spec), "--data", str(tmp_path / "data.csv"), "--out", str(tmp_path / "released"),
                 "--seed", "3", "--insecure-seed"]) == 0
    assert main(["verify", str(tmp_path / "released" / "certificate.json")]) == 0
    solved = json.loads((tmp_path / "solved" / "certificate.json").read_text())["mechanism"]
    released = json.loads((tmp_path / "released" / "certificate.json").read_text())["mechanism"]
    assert released == solved and solved["parameters"]["triangulation"] == "gift wrapping"
    values = json.loads((tmp_path / "released" / "release.json").read_text())["release"]
    table = np.array([values[f"a=r{i},b=c{j}"] for i in range(2) for j in range(8)]).reshape(2, 8)
    truth = np.array([counts[(f"r{i}", f"c{j}")] for i in range(2) for j in range(8)]).reshape(2, 8)
    assert np.allclose(table.sum(axis=1), truth.sum(axis=1), atol=1e-9)
    assert np.allclose(table.sum(axis=0), truth.sum(axis=0), atol=1e-9)
