"""The public component (I − P_V)x of a marginal span, exactly (issue 39): MarginalSpan.invariant_component.

Expected values come from elsewhere: an exact rational projector built with sympy from the dense marginal matrix
(range(W), or W applied to the sum-zero vectors when the grand total is left out), brute force over a small domain's
neighbouring moves, and the floating-point projector of MarginalWorkload."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
import sympy

from dpopt.domain.marginal_algebra import MarginalAlgebra, MarginalWorkload
from dpopt.sensitivity.marginal_span import MAX_EXACT_TERMS, MarginalSpan, workload_column

CASES = [
    ((3, 2, 3), ((0, 1), (0, 2), (1, 2)), ()),           # person-level 2-way marginals: nothing left out
    ((3, 2, 3), ((0, 1), (0, 2), (1, 2)), ((),)),        # replace-one: the grand total fixed
    ((3, 2), ((0,), (1,)), ((),)),
    ((2, 3, 2), ((2, 0), (1,), ()), ()),                 # a block listed out of order, and the count block
    ((3, 1, 2), ((0, 1), (1, 2)), ()),                   # an attribute of one level (components of rank 0)
    ((2, 2, 3), ((0, 1, 2), (0, 1)), ()),                # a block inside another (a consistent workload)
]


def dense_workload(workload: MarginalWorkload) -> np.ndarray:
    """W (d × N) with its columns W e_j, one per cell j of the full table (row-major)."""
    cells = itertools.product(*(range(n) for n in workload.algebra.sizes))
    return np.stack([workload_column(workload, cell) for cell in cells], axis=1).astype(int)


def exact_residual(workload: MarginalWorkload, without: tuple, x: np.ndarray) -> list[Fraction]:
    """(I − P)x in rationals, P the orthogonal projector onto range(W), or onto W·{sum-zero vectors} when the grand
    total is left out (the replace-one span), built from a column basis of that range: P = A (AᵀA)⁻¹ Aᵀ."""
    w = sympy.Matrix(dense_workload(workload))
    if without == ((),):
        w = sympy.Matrix.hstack(*[w[:, j] - w[:, 0] for j in range(1, w.shape[1])])
    assert without in ((), ((),))
    columns = w.columnspace()
    if not columns:
        return [Fraction(int(v)) for v in x]
    a = sympy.Matrix.hstack(*columns)
    p = a * (a.T * a).inv() * a.T
    r = (sympy.eye(len(x)) - p) * sympy.Matrix([int(v) for v in x])
    return [Fraction(int(sympy.fraction(v)[0]), int(sympy.fraction(v)[1])) for v in r]


@pytest.mark.parametrize("sizes, blocks, without", CASES)
def test_equals_the_exact_projector_to_the_last_bit(sizes, blocks, without):
    workload = MarginalWorkload(MarginalAlgebra(sizes), blocks)
    span = MarginalSpan(workload, without)
    rng = np.random.default_rng(7)
    x = rng.integers(-40, 10**6, size=(3, workload.dimension))
    x[1] = dense_workload(workload) @ rng.integers(0, 500, size=workload.algebra.cells)  # a consistent answer
    got = span.invariant_component(x)
    assert got.shape == x.shape and got.dtype == float
    for row, out in zip(x, got):
        expected = [float(v) for v in exact_residual(workload, span.without, row)]  # float(Fraction): rounded once
        assert out.tolist() == expected
    # the rank is the one the exact basis has
    assert span.rank == sympy.Matrix(dense_workload(workload)).rank() - (1 if without == ((),) else 0)


def person_contributions(cells: int, rows: int) -> list[np.ndarray]:
    """Every histogram of at most ``rows`` rows over ``cells`` cells (a person's possible rows)."""
    out = []
    for k in range(rows + 1):
        for chosen in itertools.combinations_with_replacement(range(cells), k):
            out.append(np.bincount(np.array(chosen, dtype=int), minlength=cells))
    return out


def test_neighbouring_person_level_answers_get_the_same_bits():
    """Add/remove one person with ≤ 2 rows of a 3 × 2 × 3 table under all 2-way marginals (every move of the
    brute-forced contributions): the exact component is the same bytes; the floating-point x − P_V x is not."""
    workload = MarginalWorkload(MarginalAlgebra((3, 2, 3)), ((0, 1), (0, 2), (1, 2)))
    span = MarginalSpan(workload)
    w = dense_workload(workload)
    base = np.random.default_rng(11).integers(0, 3000, size=workload.algebra.cells)
    contributions = person_contributions(workload.algebra.cells, 2)
    assert len(contributions) == 1 + 18 + 171
    # plus a fixed integer vector off range(W) (answers a consistent table never has), so that the public part is
    # not simply 0: the neighbours still differ by W v ∈ V
    offset = np.random.default_rng(12).integers(-1000, 1000, size=workload.dimension)
    answers = np.stack([w @ (base + v) + offset for v in contributions])
    exact = span.invariant_component(answers)
    assert np.abs(exact[0]).max() > 1.0
    assert all(row.tobytes() == exact[0].tobytes() for row in exact)
    naive = answers - span.project(answers.astype(float))
    assert any(row.tobytes() != naive[0].tobytes() for row in naive)  # what the exact form is for


def test_replace_one_neighbours_get_the_same_bits():
    """Replace one record (e_i − e_j, every pair of cells) under 1-way marginals of a 3 × 4 table, grand total left
    out: the same bytes on all 12·11 neighbours."""
    workload = MarginalWorkload(MarginalAlgebra((3, 4)), ((0,), (1,), (0, 1)))
    span = MarginalSpan(workload, without=((),))
    w = dense_workload(workload)
    base = np.random.default_rng(5).integers(1, 10**7, size=12)
    moves = [np.eye(12, dtype=int)[i] - np.eye(12, dtype=int)[j] for i in range(12) for j in range(12) if i != j]
    exact = span.invariant_component(np.stack([w @ (base + m) for m in moves]))
    assert all(row.tobytes() == exact[0].tobytes() for row in exact)


@pytest.mark.parametrize("sizes, without", [((4,) * 10, ()), ((5, 3, 7, 2, 6), ((),))])
def test_close_to_the_floating_point_projection(sizes, without):
    """Every 2-way marginal (10 attributes: d = 720): within 1e-12 of max |x| of x − P_V x in floats."""
    blocks = tuple(itertools.combinations(range(len(sizes)), 2))
    workload = MarginalWorkload(MarginalAlgebra(sizes), blocks)
    span = MarginalSpan(workload, without)
    x = np.random.default_rng(3).integers(0, 10**6, size=(2, workload.dimension))
    got = span.invariant_component(x)
    assert np.abs(got - (x - span.project(x.astype(float)))).max() <= 1e-12 * np.abs(x).max()
    assert np.abs(got).max() > 1.0  # inconsistent answers: a non-trivial public part


def test_refused_above_the_stated_size():
    """Σ_S 2^|S| n(S) above MAX_EXACT_TERMS: None, so the lattice release is refused with that reason."""
    sizes = (200,) * 11  # 55 blocks of 40,000 cells, 4 components each: 8.8e6 terms
    workload = MarginalWorkload(MarginalAlgebra(sizes), tuple(itertools.combinations(range(11), 2)))
    span = MarginalSpan(workload)
    assert span.exact_terms == 55 * 4 * 200**2 > MAX_EXACT_TERMS
    assert span.invariant_component(np.zeros((1, workload.dimension))) is None


PERSON_SPEC = {
    "dpopt": 1, "name": "person-level 2-way marginals",
    "data": {"attributes": {"age": ["young", "mid", "old"], "sex": ["f", "m"], "region": ["n", "c", "s"]},
             "privacy_unit": {"id": "pid", "max_rows": 2}},
    "query": {"kind": "marginals", "attributes": [["age", "sex"], ["age", "region"], ["sex", "region"]]},
    "adjacency": {"kind": "replace_one"}, "mechanism": "auto", "utility": {"metric": "l2"},
}


def people_csv(path) -> None:
    rng = np.random.default_rng(2)
    lines = ["pid,age,sex,region"]
    for person in range(60):
        for _ in range(int(rng.integers(1, 4))):
            lines.append(f"P{person},{rng.choice(['young', 'mid', 'old'])},{rng.choice(['f', 'm'])},"
                         f"{rng.choice(['n', 'c', 's'])}")
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize("privacy, forged", [
    ({"zcdp": {"rho": 0.5}}, {"sigma": 2.0}),                      # σ = √(Δ₂²/2ρ) = √24 ≈ 4.9 designed
    ({"gdp": {"mu": 1.0}}, {"sigma": 2.0}),
    ({"pdp": {"epsilon": 1.0, "delta": 0.05}}, {"lattice_sigma2": "4"}),
])
def test_person_level_marginals_release_exactly_and_verify(tmp_path, privacy, forged):
    """auto on person-level 2-way marginals: projected_gaussian on the lattice (rank 14 of d = 21: σ²·14 against the
    isotropic lattice Gaussian's σ²·21; marginal_gaussian does not serve a privacy unit, gaussian_optimal needs the
    moves listed), released and re-verified with no idealized-numerics note; a forged σ fails verify."""
    import json
    import subprocess
    import sys

    import dpopt

    spec_path, data = tmp_path / "spec.json", tmp_path / "people.csv"
    spec_path.write_text(json.dumps(PERSON_SPEC | {"privacy": privacy}))
    people_csv(data)
    run = lambda *args: subprocess.run([sys.executable, "-m", "dpopt.cli", *args], capture_output=True, text=True)
    released = run("release", str(spec_path), "--data", str(data), "--out", str(tmp_path / "rel"))
    assert released.returncode == 0, released.stderr
    checked = run("verify", str(tmp_path / "rel"))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    certificate = json.loads((tmp_path / "rel" / "certificate.json").read_text())
    mechanism = certificate["mechanism"]
    assert mechanism["family"] == "projected_gaussian"
    assert mechanism["parameters"]["sampler"] == "exact" and mechanism["parameters"]["span"] == "marginal"
    # Σ m_T over the closure ∅, {age}, {sex}, {region}, and the three pairs: 1 + 2 + 1 + 2 + 2 + 4 + 2
    assert mechanism["parameters"]["span_rank"] == 14
    for text in ((tmp_path / "rel" / "release.json").read_text(), json.dumps(certificate)):
        assert "idealized" not in text
    assert dpopt.verify(certificate).passed
    tampered = json.loads(json.dumps(certificate))
    tampered["mechanism"]["parameters"].update(forged)
    assert "privacy" in [check.claim for check in dpopt.verify(tampered).failed]


def test_rotated_james_stein_measures_a_marginal_span_exactly():
    """james_stein by name on the same spec: the rotated variant's public part (I − P_V)x is the span's exact one, so
    it measures on the lattice (before: floating point, "the component off a span other than the sum-zero one"),
    and verifies; the public parts of neighbouring answers off range(W) (one person added) agree bit for bit."""
    import json

    import dpopt

    solution = dpopt.solve(PERSON_SPEC | {"privacy": {"zcdp": {"rho": 0.5}}, "mechanism": "james_stein"})
    mechanism = solution.mechanism
    assert mechanism.parameters["variant"] == "rotated" and mechanism.parameters["sampler"] == "exact"
    assert dpopt.verify(json.loads(solution.certificate.to_json())).passed
    workload = MarginalWorkload(MarginalAlgebra((3, 2, 3)), ((0, 1), (0, 2), (1, 2)))
    rng = np.random.default_rng(4)
    x = dense_workload(workload) @ rng.integers(0, 50, size=18) + rng.integers(-9, 9, size=workload.dimension)
    neighbour = x + workload_column(workload, (2, 1, 0)).astype(int)
    public = mechanism.span.invariant_component(np.stack([x, neighbour]))
    assert np.abs(public[0]).max() > 0 and public[0].tobytes() == public[1].tobytes()
