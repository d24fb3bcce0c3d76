"""The marginal algebra against dense matrices built independently with numpy on small domains.

Every expected value is computed from the dense N × N (or d × N) matrices: Kronecker products
of I and J for E_T, the marginal matrices M_S, numpy's eigenvalues of WᵀW, least squares by
numpy's ``lstsq``. The algebra itself never forms them.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

from dpopt.domain.marginal_algebra import MarginalAlgebra, MarginalWorkload, subsets

SIZES = [(3, 2), (2, 3, 4), (3, 2, 2, 3)]


def dense_projector(sizes, t):
    factors = [np.eye(n) - 1.0 / n if k in t else np.full((n, n), 1.0 / n) for k, n in enumerate(sizes)]
    return _kron(factors)


def dense_marginal(sizes, block):
    """M_S with the block's table laid out in the block's listed order (first listed slowest)."""
    factors = [np.eye(n) if k in block else np.ones((1, n)) for k, n in enumerate(sizes)]
    m = _kron(factors)  # rows in increasing attribute order
    shape = [sizes[k] for k in sorted(block)]
    rows = np.arange(m.shape[0]).reshape(shape)
    order = [sorted(block).index(k) for k in block]
    return m[np.transpose(rows, order).ravel()]


def _kron(factors):
    out = np.ones((1, 1))
    for f in factors:
        out = np.kron(out, f)
    return out


def dense_workload(sizes, blocks, weights=None):
    weights = weights or [1.0] * len(blocks)
    return np.vstack([w * dense_marginal(sizes, b) for w, b in zip(weights, blocks)])


@pytest.mark.parametrize("sizes", SIZES)
def test_projectors_diagonal_and_pair_gap(sizes):
    alg = MarginalAlgebra(sizes)
    p = len(sizes)
    cells = list(itertools.product(*[range(n) for n in sizes]))
    total = np.zeros((alg.cells, alg.cells))
    for t in subsets(tuple(range(p))):
        e = dense_projector(sizes, t)
        total += e
        assert np.allclose(e @ e, e)
        assert round(np.trace(e)) == alg.multiplicity(t)
        assert np.allclose(np.diag(e), float(alg.diagonal(t)))
        for i, j in [(0, alg.cells - 1), (0, 1), (1, alg.cells // 2)]:
            disagree = [k for k in range(p) if cells[i][k] != cells[j][k]]
            assert math.isclose(e[i, i] - e[i, j], float(alg.pair_gap(t, disagree)), abs_tol=1e-12)
    assert np.allclose(total, np.eye(alg.cells))


@pytest.mark.parametrize("sizes,blocks,weights", [
    ((3, 2), [(0,), (1,), (1, 0)], None),
    ((2, 3, 4), [(0, 1), (2, 0), (1, 2)], [1.0, 2.0, 0.5]),
    ((3, 2, 2, 3), [(0, 1, 2), (3,), (2, 3)], None),
])
def test_workload_gram_tables_and_least_squares(sizes, blocks, weights):
    alg = MarginalAlgebra(sizes)
    wl = MarginalWorkload(alg, tuple(blocks), None if weights is None else tuple(Fraction(w) for w in weights))
    w = dense_workload(sizes, blocks, weights)
    assert wl.dimension == w.shape[0]
    # WᵀW = Σ λ_T E_T
    gram = sum(float(wl.gram_eigenvalue(t)) * dense_projector(sizes, t) for t in wl.closure)
    assert np.allclose(gram, w.T @ w)
    assert wl.rank() == np.linalg.matrix_rank(w)
    # tables/vector round trip, and W x from the components of x's marginals
    rng = np.random.default_rng(3)
    x = rng.integers(0, 9, alg.cells).astype(float)
    y = (dense_workload(sizes, blocks) @ x)
    assert np.allclose(wl.vector(wl.tables(y)), y)
    full = tuple(range(len(sizes)))
    comps = alg.components(x.reshape(sizes), full)
    assert np.allclose(alg.synthesize(comps, full).ravel(), x)
    assert np.allclose(wl.from_components({t: comps[t] for t in wl.closure}), y)
    # orthogonal projection onto range(M) (unweighted marginals) = least squares
    m = dense_workload(sizes, blocks)
    noisy = y + rng.normal(size=(2, y.size))
    coef, *_ = np.linalg.lstsq(m, noisy.T, rcond=None)
    assert np.allclose(wl.project(noisy), (m @ coef).T)
    q = m @ np.linalg.pinv(m)
    assert np.allclose(wl.projector_diagonal(), np.diag(q))


def test_projection_without_the_total():
    """Leaving out T = ∅ projects onto W·(sum-zero tables): the span of replace-one moves."""
    sizes, blocks = (2, 3, 2), [(0, 1), (1, 2)]
    wl = MarginalWorkload(MarginalAlgebra(sizes), tuple(blocks))
    m = dense_workload(sizes, blocks)
    centred = m - m.mean(axis=1, keepdims=True)
    q = centred @ np.linalg.pinv(centred)
    y = np.random.default_rng(0).normal(size=m.shape[0])
    assert np.allclose(wl.project(y, without=[()]), q @ y)
    assert np.allclose(wl.projector_diagonal(without=[()]), np.diag(q))
    assert wl.rank(without=[()]) == np.linalg.matrix_rank(centred)
