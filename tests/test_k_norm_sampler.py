"""Statistical tests of the K-norm sampler: Z = R·U, R ~ Gamma(s + 1, rate ε), U uniform on K.

Facts tested, each derived in the module docstring of ``dpopt.mechanisms.k_norm``: Z has
density ε^s e^{−ε‖z‖_K}/(s! vol K) on the span, so ‖Z‖_K ~ Gamma(s, rate ε) (the volume
of the shell {‖z‖_K ∈ [t, t + dt]} is s t^{s−1} vol K dt) and E‖Z‖_K = s/ε; the cone of K
that holds Z is its facet f with probability vol conv(0, f)/vol K; and small gauge balls
around 0 and around a vertex v carry masses whose ratio is at most e^{ε(1+h)}
(‖v + z‖_K ≤ 1 + h on v + hK).

The gauges are evaluated independently of the mechanism's facets: ‖x‖₁/2 for the root
polytope conv{e_i − e_j} (see test_k_norm_geometry.py), |x_11| on the 2×2 segment
conv{±(1, −1, −1, 1)}, and for the paper's 3×3 Semi-DP hull the facets digest §2.2
lists: ±x_ij ≤ 1 and the L-shaped x_ij + x_il + x_kj ≤ 1 (checked here against a linear
program over the vertices).

A deliberately wrong sampler with radius shape s (the bug the issue names) must fail the
radius tests and the density-ratio test; it passes the facet test, which only sees the
direction. A sampler that picks facets uniformly must fail the facet test.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats
from scipy.optimize import linprog

from dpopt.mechanisms.k_norm import HullBody, KNormMechanism
from dpopt.sensitivity.space import SensitivitySpace
from dpopt.sensitivity.table_moves import paper_moves


def root_vectors(m: int) -> np.ndarray:
    eye = np.eye(m)
    return np.array([eye[i] - eye[j] for i, j in itertools.permutations(range(m), 2)])


def paper_3x3_vectors() -> np.ndarray:
    v = paper_moves(3, 3).astype(float)
    return np.unique(np.vstack([v, -v]), axis=0)


def paper_3x3_gauge(x: np.ndarray) -> np.ndarray:
    t = np.asarray(x).reshape(-1, 3, 3)
    best = np.abs(t).reshape(-1, 9).max(axis=1)
    for (i, k), (j, l) in itertools.product(itertools.permutations(range(3), 2), repeat=2):
        best = np.maximum(best, t[:, i, j] + t[:, i, l] + t[:, k, j])
    return best


def half_l1(x: np.ndarray) -> np.ndarray:
    return np.abs(x).sum(axis=1) / 2


CASES = {
    # name: (vectors, independent gauge)
    "2x2 margins (s=1)": (np.array([[1.0, -1, -1, 1], [-1, 1, 1, -1]]), lambda x: np.abs(x[:, 0])),
    "3-cell histogram (s=2)": (root_vectors(3), half_l1),
    "3x3 margins, paper (s=4)": (paper_3x3_vectors(), paper_3x3_gauge),
    "6-cell histogram, gift wrapping (s=5)": (root_vectors(6), half_l1),
}


class ShapeSRadius(KNormMechanism):
    """The known bug: radius Gamma(shape s) instead of s + 1 (under-noises)."""

    def _radius(self, rng, size):
        return rng.gamma(self.rank, 1.0 / self.epsilon, size=size)


class UniformFacetBody(HullBody):
    """Wrong direction: every facet equally likely (then a cone of it by volume)."""

    def uniform(self, rng, size):
        K = self.polytope
        facets = rng.integers(0, len(K.normals), size)
        cone = np.empty(size, dtype=int)
        for f in range(len(K.normals)):
            members = np.flatnonzero(K.simplex_facet == f)
            pick = facets == f
            p = K.cone_volumes[members] / K.cone_volumes[members].sum()
            cone[pick] = rng.choice(members, size=pick.sum(), p=p)
        e = rng.standard_exponential((size, self.rank + 1))
        return K.combine(cone, e[:, :-1] / e.sum(axis=1, keepdims=True), self.images)


def mechanism(vectors: np.ndarray, epsilon: float, cls=KNormMechanism, body=HullBody) -> KNormMechanism:
    space = SensitivitySpace.from_vectors(vectors, method="test", adjacency="test", complete=True)
    return cls(epsilon, body(np.asarray(vectors, dtype=float), space.span.basis()), space)


def test_paper_3x3_gauge_is_the_hull_norm():
    """The digest's facet list gives the LP value ‖x‖_K = min{Σλ : Σλ_j v_j = x, λ ≥ 0}."""
    vectors = paper_3x3_vectors()
    assert np.allclose(paper_3x3_gauge(vectors), 1.0)
    x = mechanism(vectors, 1.0).sample(20, np.random.default_rng(2))
    lp = [linprog(np.ones(len(vectors)), A_eq=vectors.T, b_eq=row, bounds=(0, None), method="highs").fun
          for row in x]
    assert np.allclose(paper_3x3_gauge(x), lp, rtol=1e-7)


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("epsilon", [0.5, 2.0])
def test_mean_gauge_is_s_over_epsilon(name, epsilon):
    """E‖Z‖_K = s/ε within 5 standard errors (SD of Gamma(s, ε) is √s/ε); shape s gives
    s²/((s+1)ε), off by s/((s+1)ε) ≥ 1/(2ε), i.e. ≥ 50 standard errors here."""
    vectors, gauge = CASES[name]
    n = 100_000
    for cls, correct in ((KNormMechanism, True), (ShapeSRadius, False)):
        m = mechanism(vectors, epsilon, cls)
        s = m.rank
        g = gauge(m.sample(n, np.random.default_rng(7)))
        se = math.sqrt(s) / epsilon / math.sqrt(n)
        assert bool(abs(g.mean() - s / epsilon) <= 5 * se) == correct


@pytest.mark.parametrize("name", list(CASES))
def test_radius_law_is_gamma_s(name):
    """KS test of ‖Z‖_K against Gamma(s, rate ε): p > 1e-3 for the sampler, p < 1e-6 for shape s."""
    vectors, gauge = CASES[name]
    for cls, correct in ((KNormMechanism, True), (ShapeSRadius, False)):
        m = mechanism(vectors, 1.0, cls)
        g = gauge(m.sample(50_000, np.random.default_rng(13)))
        p = stats.kstest(g, stats.gamma(m.rank, scale=1.0).cdf).pvalue
        assert (p > 1e-3) if correct else (p < 1e-6)


@pytest.mark.parametrize("m_cells", [5, 6])
def test_facet_hits_follow_cone_volumes(m_cells):
    """Z lies in the cone of facet I = {i : z_i > 0} of the root polytope with probability
    C(n−1, |I|−1)/C(2n, n) (normalized volumes; n = m − 1), a χ² test over the 2^m − 2
    facets (m = 5: qhull, m = 6: gift wrapping). The shape-s sampler passes (the direction
    does not see the radius); uniform facets fail."""
    n = m_cells - 1
    subsets = [I for r in range(1, m_cells) for I in itertools.combinations(range(m_cells), r)]
    expected = np.array([math.comb(n - 1, len(I) - 1) / math.comb(2 * n, n) for I in subsets])
    assert expected.sum() == pytest.approx(1.0)
    index = {sum(1 << i for i in I): j for j, I in enumerate(subsets)}
    draws = 120_000
    vectors = root_vectors(m_cells)
    for cls, body, correct in ((KNormMechanism, HullBody, True), (ShapeSRadius, HullBody, True),
                               (KNormMechanism, UniformFacetBody, False)):
        z = mechanism(vectors, 1.0, cls, body).sample(draws, np.random.default_rng(17))
        codes = ((z > 0) * (1 << np.arange(m_cells))).sum(axis=1)
        counts = np.bincount([index[c] for c in codes], minlength=len(subsets))
        p = stats.chisquare(counts, draws * expected).pvalue
        assert (p > 1e-3) if correct else (p < 1e-6)


def test_density_ratio_at_hull_vertices():
    """Mass of the gauge ball hK around 0 over the mass around each vertex v of the hexagon
    (3-cell histogram, s = 2, ε = 1, h = 0.12): at most e^{ε(1+h)} = 3.06, up to 4 standard
    errors of the log ratio (√(1/N₀ + 1/N_v) ≈ 0.023 with 10⁶ draws: N₀ ≈ 6,700 since
    ‖Z‖_K ~ Gamma(2, 1), N_v ≈ e^{−1}h²/2·10⁶ ≈ 2,650); the sampler's ratio is about 2.6.
    The shape-s sampler has density ∝ E₁(ε‖z‖_K), infinite at 0: its ratio is about 9."""
    epsilon, h, draws = 1.0, 0.12, 1_000_000
    vectors = root_vectors(3)
    bound = math.exp(epsilon * (1 + h))
    for cls, correct in ((KNormMechanism, True), (ShapeSRadius, False)):
        z = mechanism(vectors, epsilon, cls).sample(draws, np.random.default_rng(29))
        near_zero = int((half_l1(z) <= h).sum())
        for v in vectors:
            near_v = int((half_l1(z - v) <= h).sum())
            tolerance = 4 * math.sqrt(1 / near_zero + 1 / near_v)
            assert (near_zero / near_v <= bound * math.exp(tolerance)) == correct


def test_noise_keeps_the_margins():
    """Noise on the span of the 3×3 Semi-DP space has zero row and column sums."""
    z = mechanism(paper_3x3_vectors(), 1.0).sample(10_000, np.random.default_rng(1)).reshape(-1, 3, 3)
    assert np.abs(z.sum(axis=1)).max() < 1e-12 and np.abs(z.sum(axis=2)).max() < 1e-12
