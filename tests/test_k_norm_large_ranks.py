"""K-norm on histograms of 100–200 cells: the lattice cross-polytope measures exactly above rank 64, and the two
computations that made it slow give the same results faster.

Expected values and their sources:

* the greedy choice of :func:`dpopt.mechanisms.k_norm.optimal_cost_lower_bound` and ``shift_cost_lower_bound``:
  the algorithm before this change (an explicit residual matrix, recomputed norms), copied below as
  :func:`reference_greedy`, run on y = vB for the first occurrences of the listed rows as the bound ran it;
* the reduced echelon form R of S: sympy's ``rref`` of the listed vectors (exact rationals, one elimination of all
  rows);
* E‖Z‖² of the cross-polytope on an L-cell histogram at ε = 1, derived by hand: under replace-one R has rows
  e_k − e_{L−1} (k < L − 1, the sum-zero span), every difference e_i − e_j has ‖v[J]‖₁ ≤ 2, so M = 2 (the plain
  bound max‖v[J]‖₁, whose product 2^s is below the weighted bound's s^s), c_k i.i.d. discrete Laplace of scale 2 with
  Var = 2e^{−1/2}/(1 − e^{−1/2})² (CKS 2020), and E‖Z‖² = Σ_k Var·‖R_k‖² = (L − 1)·2·Var; under add/remove R = I,
  M = 1, E‖Z‖² = L·2e^{−1}/(1 − e^{−1})²;
* integer products: Python integers (numpy object arrays).
"""

from __future__ import annotations

import copy
import json
import math

import numpy as np
import pytest

import dpopt
import dpopt.mechanisms.k_norm as k_norm_module
from dpopt.core.families import CROSS_MAX_RANK
from dpopt.core.integer_matrices import integer_product
from dpopt.core.rows import row_groups
from dpopt.mechanisms.k_norm_lattice import echelon_lattice


def reference_greedy(rows: np.ndarray, count: int) -> list[int]:
    """``_greedy_independent`` as it was before this change (dpopt e338315), verbatim."""
    residual = np.array(rows, dtype=float)
    norms = np.sum(residual * residual, axis=1)
    tie = 64.0 * residual.shape[1] * np.finfo(float).eps
    chosen: list[int] = []
    for _ in range(count):
        top = float(norms.max())
        if not top > 0:  # the rows span fewer than ``count`` dimensions
            break
        j = int(np.flatnonzero(norms >= top * (1.0 - tie))[0])
        chosen.append(j)
        q = residual[j] / math.sqrt(top)
        residual -= np.outer(residual @ q, q)
        norms = np.sum(residual * residual, axis=1)
        norms[chosen] = -1.0
    return chosen


def reference_rows(vectors: np.ndarray, basis: np.ndarray) -> np.ndarray:
    """The rows v the lower bounds took before this change: the reference greedy on y = vB for the first
    occurrences."""
    rows = np.asarray(vectors, dtype=float)
    rows = rows[np.sort(row_groups(rows)[0])]
    return rows[reference_greedy(rows @ basis, basis.shape[1])]


def histogram(cells: int, adjacency: str, **extra) -> dict:
    return {"dpopt": 1, "name": "h", "data": {"attributes": {"a": [f"v{i}" for i in range(cells)]}, "n": 1000},
            "query": {"kind": "histogram", "attribute": "a"}, "adjacency": {"kind": adjacency},
            "privacy": {"pure": {"epsilon": 1.0}}, "utility": {"metric": "l2"}, **extra}


def two_way(k: int, margins: bool) -> dict:
    levels = [f"l{i}" for i in range(k)]
    spec = {"dpopt": 1, "name": "t", "data": {"attributes": {"a": levels, "b": levels}, "n": 500},
            "query": {"kind": "contingency_table", "attributes": ["a", "b"]}, "adjacency": {"kind": "replace_one"},
            "privacy": {"pure": {"epsilon": 1.0}}}
    if margins:
        spec["invariants"] = [{"kind": "margins", "attributes": ["a"]}, {"kind": "margins", "attributes": ["b"]}]
    return spec


SPACES = [histogram(100, "replace_one"), pytest.param(histogram(160, "replace_one"), marks=pytest.mark.slow),  # 10 s
          histogram(100, "add_remove"),
          histogram(200, "add_remove"), two_way(6, margins=True), two_way(5, margins=False)]


@pytest.mark.parametrize("spec", SPACES, ids=["hist100-replace", "hist160-replace", "hist100-add", "hist200-add",
                                              "6x6-margins", "5x5"])
def test_the_fast_greedy_chooses_the_rows_the_plain_pass_chose(spec):
    """The same rows of S, and the same bounds as before (to 1e-12: the product of s chosen rows with the basis
    may round differently in the last bits from the same rows of the product of all of them)."""
    space = dpopt.derive(dpopt.load_spec(spec))
    vectors, basis = space.vectors(), space.span.basis()
    expected = reference_rows(vectors, basis)
    assert np.array_equal(k_norm_module._greedy_rows(vectors, basis), expected)
    s = basis.shape[1]
    expected = expected @ basis
    _, logdet = np.linalg.slogdet(expected)
    rho_squared = math.exp(2.0 * (s * math.log(2.0) + logdet - math.lgamma(s + 1)
                                  - (0.5 * s * math.log(math.pi) - math.lgamma(0.5 * s + 1))) / s)
    bound, _ = k_norm_module.optimal_cost_lower_bound(vectors, basis, 1.0)
    assert bound == pytest.approx(s * (s + 1) * rho_squared, rel=1e-12)
    residuals = np.abs(np.diag(np.linalg.qr(expected.T, mode="r")))
    shift = k_norm_module.shift_cost_lower_bound(vectors, basis, 1.0)
    assert shift == pytest.approx(float(np.sum(residuals**2)) / (4 * math.sinh(0.5) ** 2), rel=1e-12)


def test_a_residual_at_the_tie_threshold_falls_back_to_the_plain_pass():
    """Orthogonal rows of squared norms 1 − δ, 1 and 1/4: with δ = 64·2·ε_mach the first lies well within the tie
    window 64·3·ε_mach (s = 3) and the fast pass decides; with δ = 64·3·ε_mach it sits on the threshold, where
    rounding decides, so the fast pass declines (None) and the plain pass chooses: the rows are the reference's."""
    rows = np.array([[0.0, math.sqrt(1.0 - 64.0 * 2 * np.finfo(float).eps), 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.5]])
    basis = np.eye(3)
    assert k_norm_module._greedy_fast(rows, 3, 64.0 * 3 * np.finfo(float).eps) is not None  # s = 3: a wider tie
    rows[0, 1] = math.sqrt(1.0 - 64.0 * 3 * np.finfo(float).eps)
    assert k_norm_module._greedy_fast(rows, 3, 64.0 * 3 * np.finfo(float).eps) is None
    assert np.array_equal(k_norm_module._greedy_rows(rows, basis), reference_rows(rows, basis))


def test_rows_spanning_fewer_dimensions_than_asked_fall_back_to_the_plain_pass():
    rows = np.array([[1.0, 1.0, 0.0], [-1.0, -1.0, 0.0], [2.0, 2.0, 0.0]])
    assert k_norm_module._greedy_fast(rows, 2, 64.0 * 2 * np.finfo(float).eps) is None
    basis = np.eye(3)[:, :2]
    assert np.array_equal(k_norm_module._greedy_rows(rows, basis), reference_rows(rows, basis))


@pytest.mark.parametrize("spec", [histogram(30, "replace_one"), histogram(30, "add_remove"), two_way(4, True),
                                  two_way(3, False)], ids=["hist30-replace", "hist30-add", "4x4-margins", "3x3"])
def test_the_echelon_basis_is_sympys_reduced_echelon_form(spec):
    import sympy

    vectors = dpopt.derive(dpopt.load_spec(spec)).vectors()
    columns, echelon = echelon_lattice(vectors)
    rref, pivots = sympy.Matrix(np.unique(vectors, axis=0).astype(int).tolist()).rref()
    assert columns == tuple(pivots)
    assert np.array_equal(echelon, np.array(rref[:len(pivots), :].tolist(), dtype=np.int64))


def test_a_non_integral_echelon_form_is_refused():
    """span{(2, 1)}: its reduced echelon form (1, 1/2) is not integral."""
    assert isinstance(echelon_lattice(np.array([[2.0, 1.0], [-2.0, -1.0]])), str)
    assert isinstance(echelon_lattice(np.array([[0.5, 1.0]])), str)


@pytest.mark.parametrize("a, b", [
    (np.array([[1, -1, 0], [0, 2, 3]]), np.array([[1, 0], [2, 1], [-4, 5]])),  # dense: float BLAS
    (np.eye(40, dtype=np.int64) * 3, np.arange(40 * 7).reshape(40, 7) - 100),  # sparse a
    (np.full((2, 2), 2**40), np.full((2, 2), 2**20)),  # 2^61 entries: past float64's exact range
])
def test_integer_products_are_exact(a, b):
    from scipy import sparse  # noqa: F401 - loaded: the sparse route serves the sparse factor

    assert np.array_equal(integer_product(a, b), (a.astype(object) @ b.astype(object)).astype(np.int64))


def test_an_integer_product_past_int64_raises():
    with pytest.raises(OverflowError):
        integer_product(np.full((1, 4), 2**40), np.full((4, 1), 2**40))


@pytest.mark.parametrize("adjacency, expected", [
    ("replace_one", 99 * 2 * 2 * math.exp(-0.5) / (1 - math.exp(-0.5)) ** 2),
    ("add_remove", 100 * 2 * math.exp(-1.0) / (1 - math.exp(-1.0)) ** 2),
])
def test_k_norm_on_a_100_cell_histogram_measures_exactly(adjacency, expected):
    """Rank 99 / 100 > 64: the lattice cross-polytope, no idealized-numerics note, E‖Z‖² the closed form of the
    module docstring (1,551.4 / 184.1, below the floating-point ball's stated value), verified; a forged bound and a
    forged ε′ fail."""
    assert CROSS_MAX_RANK >= 100
    sol = dpopt.solve(histogram(100, adjacency, mechanism="k_norm"))
    data = sol.certificate.data
    params = data["mechanism"]["parameters"]
    assert params["norm_ball"] == "lattice_cross_polytope" and sol.mechanism.exact_noise
    assert "idealized" not in json.dumps(data)
    assert data["utility"]["value"] == pytest.approx(expected, rel=1e-12)
    assert params["exact_cost"]["exact"] < params["exact_cost"]["continuous"]
    assert dpopt.verify(sol.certificate).passed
    forged = copy.deepcopy(data)
    forged["mechanism"]["parameters"]["l1_bound"] = params["l1_bound"] - 1 if params["l1_bound"] > 1 else 2
    assert not dpopt.verify(forged).passed
    forged = copy.deepcopy(data)
    forged["mechanism"]["parameters"]["lattice_epsilon"] = "2"
    assert "privacy" in {c.claim for c in dpopt.verify(forged).failed}
