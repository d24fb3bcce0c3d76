"""The discrete K-norm mechanism on the lattice span(S) ∩ ℤ^d (dpopt.mechanisms.k_norm_lattice).

Expected values and their sources:

* 2×3 table with both margins, replace-one: S = {0, ±rectangle moves}; in the pivot coordinates c = (z₁₁, z₁₂) the
  moves are ±(1, −1), ±(1, 0), ±(0, 1), whose hull is the hexagon with gauge g(c) = max(|a|, |b|, |a + b|)
  (derived by hand: its six facets are a = ±1, b = ±1, a + b = ±1). The law P[c] ∝ e^{−εg(c)} is enumerated on the
  box |a|, |b| ≤ 40 from that formula, not from the code's gauge; the mass outside is below
  Σ_{k>40} 6k·e^{−k} < 10⁻¹⁴ (g ≥ ‖c‖∞ and at most 8k points have ‖c‖∞ = k).
* acceptance rate of the rejection sampler: Z_p/Z_q with Z_p from that enumeration and
  Z_q = ((1 + e^{−γ})/(1 − e^{−γ}))², γ = ε/M (the product of two discrete Laplace normalisers).
* 2×2 table with both margins: Z = c·(1, −1, −1, 1), c discrete Laplace with P ∝ e^{−ε|c|}, so
  E‖Z‖² = 4·2r/(1 − r)², r = e^{−ε} (the discrete Laplace second moment, Σ_k k² r^{|k|} summed).
"""

from __future__ import annotations

import copy
import json
import math
from fractions import Fraction

import numpy as np
import pytest
from conftest import ROOT, pooled_chi_square
from scipy import stats

import dpopt
from dpopt.noise.discrete_laplace import bernoulli_exp, sample_discrete_laplace
from dpopt.mechanisms.k_norm_lattice import estimate_refusal, proposal_bounds
from dpopt.noise.k_norm_lattice import (
    LatticeGauge,
    acceptance_weights,
    limit_acceptance,
    proposal_scale,
    sample_lattice_k_norm,
)
from dpopt.noise.k_norm_lattice_coverage import level_counts

BOX = 40
EPSILON = 1.0


def table_2x3(**extra) -> dict:
    spec = {"dpopt": 1, "name": "2x3 margins", "data": {"attributes": {"a": ["x", "y"], "b": ["p", "q", "r"]},
                                                         "n": 100},
            "query": {"kind": "contingency_table", "attributes": ["a", "b"]},
            "invariants": [{"kind": "margins", "attributes": ["a"]}, {"kind": "margins", "attributes": ["b"]}],
            "adjacency": {"kind": "replace_one"}, "privacy": {"pure": {"epsilon": EPSILON}}, "mechanism": "k_norm"}
    spec.update(extra)
    return spec


def hexagon_law() -> tuple[np.ndarray, np.ndarray]:
    """The points of the box and their probabilities under P ∝ e^{−ε max(|a|, |b|, |a+b|)} (module docstring)."""
    a, b = np.meshgrid(np.arange(-BOX, BOX + 1), np.arange(-BOX, BOX + 1), indexing="ij")
    points = np.stack([a.ravel(), b.ravel()], axis=1)
    g = np.maximum(np.maximum(np.abs(points[:, 0]), np.abs(points[:, 1])), np.abs(points.sum(axis=1)))
    weights = np.exp(-EPSILON * g)
    return points, weights / weights.sum()


@pytest.fixture(scope="module")
def mechanism():
    sol = dpopt.solve(table_2x3())
    m = sol.mechanism
    assert m.lattice is not None and m.lattice.columns == (0, 1)
    return sol


def test_the_2x3_space_is_the_hexagon(mechanism):
    """The listed moves in pivot coordinates are the hexagon's six vertices, and the code's exact gauge equals
    max(|a|, |b|, |a+b|) on the whole box."""
    lattice = mechanism.mechanism.lattice
    points, _ = hexagon_law()
    g = np.maximum(np.maximum(np.abs(points[:, 0]), np.abs(points[:, 1])), np.abs(points.sum(axis=1)))
    assert np.array_equal(lattice.gauge.scaled(points), lattice.gauge.denominator * g)


def test_sampler_pmf_matches_the_enumerated_law(mechanism):
    """χ² goodness of fit of 200,000 draws (fixed seed) against the enumerated law, cells with expected count < 5
    pooled. Power: a sampler at ε = 1.1 instead of 1 has, by the same enumeration, noncentrality
    λ = N Σ (p₁ − p₀)²/p₀; the test at level 10⁻³ detects it with the power computed below (≥ 0.99)."""
    points, p = hexagon_law()
    draws = 200_000
    rng = np.random.default_rng(11)
    z = mechanism.mechanism.sample(draws, rng)
    c = np.round(z[:, [0, 1]]).astype(np.int64)
    assert np.array_equal(c @ mechanism.mechanism.lattice.echelon, np.round(z).astype(np.int64))
    index = {tuple(q): i for i, q in enumerate(points.tolist())}
    counts = np.bincount([index[tuple(q)] for q in c.tolist()], minlength=len(points))
    statistic, critical = pooled_chi_square(counts, p, draws)
    assert statistic < critical
    big = draws * p >= 5
    pooled = np.append(p[big], p[~big].sum())
    g = np.maximum(np.maximum(np.abs(points[:, 0]), np.abs(points[:, 1])), np.abs(points.sum(axis=1)))
    wrong = np.exp(-1.1 * g) / np.exp(-1.1 * g).sum()
    q = np.append(wrong[big], wrong[~big].sum())
    noncentrality = draws * float(np.sum((q - pooled) ** 2 / pooled))
    assert stats.ncx2.sf(critical, len(pooled) - 1, noncentrality) >= 0.99


def test_privacy_loss_on_neighbours_by_enumeration(mechanism):
    """max over the box and the listed moves δ of log P[z − δ] − log P[z], in exact rationals from the code's
    gauge, is ε′·sup‖δ‖_K = ε′ exactly (attained), and the certificate's claim says ε′ = 1."""
    lattice = mechanism.mechanism.lattice
    vectors = np.round(dpopt.compile(table_2x3()).space.listed()).astype(np.int64)[:, [0, 1]]
    points, _ = hexagon_law()
    inner = points[np.abs(points).max(axis=1) <= BOX - 1]
    g = lattice.gauge.scaled(inner)
    worst = max(int((lattice.gauge.scaled(inner - d) - g).max()) for d in vectors if d.any())
    assert Fraction(worst, lattice.gauge.denominator) * lattice.epsilon == Fraction(1)
    assert lattice.epsilon == 1


def test_acceptance_rate_formula_against_rejection_rounds(mechanism):
    """One round of the sampler (a discrete Laplace proposal, the exact Bernoulli) accepts with probability
    Z_p/Z_q (module docstring); 400,000 rounds, tolerance 4 standard errors √(p(1 − p)/n)."""
    lattice = mechanism.mechanism.lattice
    points, _ = hexagon_law()
    g = np.maximum(np.maximum(np.abs(points[:, 0]), np.abs(points[:, 1])), np.abs(points.sum(axis=1)))
    z_p = float(np.exp(-EPSILON * g).sum())
    gamma = EPSILON / lattice.gauge.l1_bounds[0]
    z_q = ((1 + math.exp(-gamma)) / (1 - math.exp(-gamma))) ** 2
    rate = z_p / z_q
    n = 400_000
    rng = np.random.default_rng(5)
    scale = proposal_scale(lattice.epsilon, lattice.gauge)[0]
    c = sample_discrete_laplace(rng, scale.numerator, scale.denominator, 2 * n).reshape(n, 2)
    num, den = acceptance_weights(lattice.gauge, lattice.epsilon, c)
    accepted = bernoulli_exp(rng, num, den).mean()
    assert abs(accepted - rate) <= 4 * math.sqrt(rate * (1 - rate) / n)
    # the importance-sampling estimate of the same rate (1,000,000 proposals): within 4 of its standard errors
    assert lattice.acceptance_rate() == pytest.approx(rate, abs=4 * math.sqrt(rate / 1_000_000))
    # the large-scale limit vol K/vol(M·B₁) = 2!·3/(2·2)² = 3/8 (hexagon area 3) is the rate's limit, not its value
    assert limit_acceptance(3.0, (2, 2)) == pytest.approx(3 / 8, rel=1e-12)


def test_predicted_l2_against_the_enumerated_law(mechanism):
    """E‖Z‖² of the lattice law: the certificate's importance-sampling estimate covers the enumerated value
    Σ p(c)‖cR‖² (‖cR‖² = 2(a² + b² + (a + b)²) on the 2×3 table) within its 95% interval widened to 4 SE."""
    points, p = hexagon_law()
    a, b = points[:, 0], points[:, 1]
    exact = float(p @ (2.0 * (a**2 + b**2 + (a + b) ** 2)))
    utility = mechanism.certificate["utility"]
    se = (utility["ci95"][1] - utility["ci95"][0]) / (2 * 1.96)
    assert "Monte Carlo" in utility["method"]
    assert abs(utility["value"] - exact) <= 4 * se


def test_2x2_table_is_exact_discrete_laplace():
    sol = dpopt.solve(ROOT / "specs" / "table_2x2_margins_pure.yaml")
    r = math.exp(-1.0)
    assert sol.certificate["utility"]["value"] == pytest.approx(4 * 2 * r / (1 - r) ** 2, rel=1e-12)
    assert sol.mechanism.parameters["sampler"] == "exact"
    assert not any("idealized" in note for note in sol.certificate["mechanism"]["notes"])


def test_release_is_integer_and_keeps_the_margins(mechanism):
    counts = np.array([[10, 20, 30], [5, 7, 9]], dtype=float)
    out = mechanism.mechanism.release(np.tile(counts.ravel(), (50, 1)), np.random.default_rng(2)).reshape(50, 2, 3)
    assert np.array_equal(out, np.round(out))
    assert np.array_equal(out.sum(axis=2), np.tile(counts.sum(axis=1), (50, 1)))
    assert np.array_equal(out.sum(axis=1), np.tile(counts.sum(axis=0), (50, 1)))


@pytest.mark.parametrize("field, value, claim", [("lattice_epsilon", "3/2", "privacy"),
                                                 ("l1_bound", 1, "k_norm.lattice")])
def test_verify_rejects_a_forged_lattice_parameter(mechanism, field, value, claim):
    data = copy.deepcopy(mechanism.certificate.data)
    data["mechanism"]["parameters"][field] = value
    failed = {c.claim for c in dpopt.verify(data).failed}
    assert claim in failed


def test_floating_point_sampler_on_request():
    sol = dpopt.solve(table_2x3(sampler="floating_point"))
    assert sol.mechanism.lattice is None and "sampler" not in sol.mechanism.parameters


def test_utility_bound_holds_for_the_lattice_law(mechanism):
    """auto's lower bound for a counting query (Hammersley–Chapman–Robbins, k_norm.shift_cost_lower_bound) stays
    below the lattice law's E‖Z‖²: the enumerated value on the 2×3 table, the exact one on the 2×2 table
    (4·2r/(1 − r)², r = e^{−1}), which the continuous volume bound (8) exceeds."""
    from dpopt.mechanisms.k_norm import KNormMechanism

    points, p = hexagon_law()
    a, b = points[:, 0], points[:, 1]
    assert KNormMechanism.utility_bound(dpopt.compile(table_2x3())) < float(p @ (2.0 * (a**2 + b**2 + (a + b) ** 2)))
    r = math.exp(-1.0)
    spec = dpopt.load_spec(ROOT / "specs" / "table_2x2_margins_pure.yaml")
    assert KNormMechanism.utility_bound(dpopt.compile(spec)) < 4 * 2 * r / (1 - r) ** 2 < 8.0


def low_acceptance_gauge(l1_bounds: tuple[int, int]) -> LatticeGauge:
    """The hexagon's gauge max(|a|, |b|, |a + b|) with the term h(c) = |a|/M₁ + |b|/M₂ for large M_k: the law is
    unchanged (h ≤ 1/M₁ + 1/M₂ ≤ 1 at the hexagon's vertices ±(1, 0), ±(0, 1), ±(1, −1)), the proposal's scales
    M_k/ε grow and the acceptance falls to about 2!·3/(4M₁M₂) (3/128 ≈ 0.023 at (4, 8), 3/256 at (8, 8)); D = 8."""
    facets = np.array([[1, 0], [-1, 0], [0, 1], [0, -1], [1, 1], [-1, -1]], dtype=np.int64) * 8
    return LatticeGauge(facets, 8, l1_bounds)


@pytest.mark.parametrize("l1_bounds", [(8, 8), (4, 8)])
def test_batched_sampler_keeps_the_law_at_low_acceptance(l1_bounds):
    """The rounds of growing length (sample_lattice_k_norm) at acceptance ≈ 0.012 (plain ball M = 8) and with the
    weighted ball (M₁, M₂) = (4, 8), coordinates of different scales: χ² goodness of fit of 100,000
    draws (fixed seed) against the enumerated hexagon law, cells with expected count < 5 pooled, level 10⁻³ (the
    power computation of test_sampler_pmf_matches_the_enumerated_law applies with N halved: ε = 1.1 is still
    detected, λ printed in the assertion). Also the size-1 path (rounds 1, 2, 4, … proposals): the mean of
    g over 3,000 single draws is within 4 standard errors of the enumerated E g and SD."""
    points, p = hexagon_law()
    gauge = low_acceptance_gauge(l1_bounds)
    rng = np.random.default_rng(17)
    draws = 100_000
    c = sample_lattice_k_norm(rng, gauge, Fraction(1), draws)
    index = {tuple(x): i for i, x in enumerate(points.tolist())}
    counts = np.bincount([index[tuple(x)] for x in c.tolist()], minlength=len(points))
    expected = draws * p
    big = expected >= 5
    observed = np.append(counts[big], counts[~big].sum())
    wanted = np.append(expected[big], expected[~big].sum())
    assert stats.chisquare(observed, wanted).pvalue > 1e-3
    q = np.exp(-1.1 * np.maximum(np.maximum(np.abs(points[:, 0]), np.abs(points[:, 1])), np.abs(points.sum(1))))
    q /= q.sum()
    wanted_q = np.append(draws * q[big], draws * q[~big].sum())
    noncentrality = float(((wanted_q - wanted) ** 2 / wanted).sum())
    power = stats.ncx2.sf(stats.chi2.isf(1e-3, len(wanted) - 1), len(wanted) - 1, noncentrality)
    assert power >= 0.99, noncentrality
    g = np.maximum(np.maximum(np.abs(points[:, 0]), np.abs(points[:, 1])), np.abs(points.sum(axis=1)))
    mean, sd = float(p @ g), math.sqrt(float(p @ g**2) - float(p @ g) ** 2)
    singles = np.concatenate([sample_lattice_k_norm(rng, gauge, Fraction(1), 1) for _ in range(3_000)])
    assert abs(gauge.scaled(singles).mean() / gauge.denominator - mean) <= 4 * sd / math.sqrt(3_000)


def test_estimate_refusal_states_the_cost():
    """The stated cost bound (k_norm_lattice.estimate_refusal): 10⁶ proposals × acceptance ≥ 1,000 effective draws
    and 10⁶ × F × s ≤ 10⁹ gauge multiply-adds. The 4×4 table with both margins (acceptance 2.1·10⁻⁴: 210 effective
    draws; 3,818 facets at rank 9: 3.4·10¹⁰) fails both; the 3×4 table (0.0142, 42 facets, rank 6) passes."""
    assert "210 effective draws" in estimate_refusal(2.1e-4, 9)
    assert "3.4e+10 multiply-adds" in estimate_refusal(0.5, 9, 3818)
    assert estimate_refusal(0.0142, 6, 42) is None


def test_importance_estimate_reports_its_effective_sample_size(mechanism):
    """The Kish effective sample size (Σw)²/Σw² is at least Σw = (proposals drawn) × the acceptance rate, as w ≤ 1;
    the estimate stops at its stated precision, never below 1,000 effective draws."""
    lattice = mechanism.mechanism.lattice
    utility = mechanism.certificate["utility"]
    method = utility["method"]
    drawn = int(method.split("lattice law from ")[1].split(" ")[0])
    effective = float(method.split("effective sample size ")[1].rstrip(")"))
    assert effective >= max(drawn * lattice.acceptance_rate() - 1, 1_000)
    low, high = utility["ci95"]
    assert drawn == 1_000_000 or (high - low) / 2 <= 0.005 * utility["value"]


def test_level_counts_of_the_hexagon():
    """N(j): the hexagon's level set max(|a|, |b|, |a + b|) = j holds 6j lattice points (j ≥ 1; its boundary has
    six edges of j unit steps), 1 at j = 0; on the gauge with D = 8, N sits at G = 8j and is 0 elsewhere. Checked
    against the box count of hexagon_law too."""
    counts = level_counts(low_acceptance_gauge((8, 8)), (1, 1), 8 * 12)
    expected = np.zeros(8 * 12 + 1, dtype=np.int64)
    expected[0] = 1
    expected[8::8] = 6 * np.arange(1, 13)
    assert np.array_equal(counts, expected)
    points, _ = hexagon_law()
    g = np.maximum(np.maximum(np.abs(points[:, 0]), np.abs(points[:, 1])), np.abs(points.sum(axis=1)))
    assert np.array_equal(np.bincount(g[g <= 12]), expected[::8])


def test_ci_volume_coverage_is_proven_and_tight():
    """ci_volume on the 2×3 table: the certificate's region radius r and its proven coverage bound b against the
    enumerated law (hexagon_law, mass outside the box < 10⁻¹⁴): b ≤ P(g ≤ r) ≤ b + 10⁻³, P(g ≤ r) ≥ 0.95, and the
    level below r covers less than 0.95 (r is the smallest); the volume is r²·3·√12: the hexagon's area 3 in the
    lattice coordinates c = (z₁₁, z₁₂), times √det(RRᵀ) for the echelon basis of the tables with zero margins,
    R = [[1, 0, −1, −1, 0, 1], [0, 1, −1, 0, −1, 1]] (z = cR), RRᵀ = [[4, 2], [2, 4]], det 12: the region's area
    in span(S) ⊂ ℝ⁶."""
    sol = dpopt.solve(table_2x3(utility={"metric": "ci_volume", "alpha": 0.05}))
    lattice = sol.mechanism.lattice
    assert lattice is not None
    level = lattice._estimates[("ci_volume", 0.05)]
    radius = Fraction(level.level, lattice.gauge.denominator)
    points, p = hexagon_law()
    g = np.maximum(np.maximum(np.abs(points[:, 0]), np.abs(points[:, 1])), np.abs(points.sum(axis=1)))
    covered = float(p[g <= radius].sum())
    assert level.coverage <= covered <= level.coverage + 1e-3
    assert covered >= 0.95 > float(p[g <= radius - 1].sum())
    assert sol.certificate["utility"]["value"] == pytest.approx(float(radius) ** 2 * 3.0 * math.sqrt(12), rel=1e-9)
    assert "proven coverage" in sol.certificate["utility"]["method"]


def test_weighted_proposal_ball_for_a_long_thin_hull():
    """proposal_bounds: the age summary's moves ±(1, 9, 0), …, ±(1, 75, 1) (extents 1, 75, 1, max ‖v‖₁ = 77) get
    M_k = s·max|v_k| = (3, 225, 3), as 3·225·3 = 2,025 < 77³; the acceptance limit s!·vol K/∏2M_k with vol K = 64
    (the golden row's hull volume) is 384/16,200 ≈ 0.0237, against 384/154³ ≈ 1.05·10⁻⁴ for the plain ball. Tables
    keep the plain ball (2×3: M = 2 = s·1, not smaller)."""
    moves = np.array([[1, 9, 0], [1, 26, 0], [1, 42, 0], [1, 57, 0], [1, 75, 1]])
    assert proposal_bounds(np.vstack([moves, -moves])) == (3, 225, 3)
    assert limit_acceptance(64.0, (3, 225, 3)) == pytest.approx(384 / 16_200, rel=1e-12)
    assert proposal_bounds(np.array([[1, -1], [1, 0], [0, 1], [-1, 1], [-1, 0], [0, -1]])) == (2, 2)


def test_verify_rejects_forged_weighted_bounds_and_ci_volume():
    sol = dpopt.solve(ROOT / "specs" / "age_summary_ci_volume.yaml")
    assert sol.mechanism.parameters["l1_bounds"] == [3, 225, 3]
    data = copy.deepcopy(sol.certificate.data)
    data["mechanism"]["parameters"]["l1_bounds"] = [3, 200, 3]
    assert "k_norm.lattice" in {c.claim for c in dpopt.verify(data).failed}
    data = copy.deepcopy(sol.certificate.data)
    data["utility"]["value"] = 0.9 * data["utility"]["value"]
    assert "utility" in {c.claim for c in dpopt.verify(data).failed}


def test_max_variance_of_the_lattice_law_is_estimated_and_covers_the_product_law():
    """A 3-cell histogram under add/remove: K = Hull(±e_i) is the l1 ball, so the lattice law P[z] ∝ e^{−ε‖z‖₁}
    is i.i.d. discrete Laplace of scale 1/ε per cell, Var = 2e^{−ε}/(1 − e^{−ε})² (CKS 2020). The importance-sampling
    estimate of max_i E Z_i² carries a 95% interval that must hold it (and is narrow: 1% of it)."""
    spec = {"dpopt": 1, "name": "h", "data": {"attributes": {"a": ["x", "y", "z"]}},
            "query": {"kind": "histogram", "attribute": "a"}, "adjacency": "add_remove",
            "privacy": {"pure": {"epsilon": 1.0}}, "mechanism": "k_norm", "utility": {"metric": "max_variance"}}
    solution = dpopt.solve(spec)
    assert solution.mechanism.exact_noise and "idealized" not in json.dumps(solution.certificate.data)
    exact = 2 * math.exp(-1.0) / (1 - math.exp(-1.0)) ** 2
    low, high = solution.certificate.data["utility"]["ci95"]
    assert low <= exact <= high and high - low < 0.01 * exact
    assert dpopt.verify(solution.certificate.data).passed
