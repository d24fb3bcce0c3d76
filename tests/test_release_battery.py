"""The release battery: every registered family, released as a user releases it.

Parametrised over the registry (:func:`dpopt.mechanisms.base.registry`), as scipy's
``test_continuous_basic`` runs one battery over every distribution. For each family, a
small spec it serves (:data:`CASES`) and a 20-record data set:

* **CLI release** — ``dpopt release SPEC --data FILE --seed 7 --insecure-seed`` prints a
  document whose values are the family's, in its support, and bit for bit the Python
  release from the same stream (so the CLI goes through ``Mechanism.release``);
* **Python release** — ``Mechanism.release`` of N copies of the true answer (computed here
  from the records with numpy, not by dpopt), vectorised over the rows;
* **law** — the errors ``release − answer`` follow the certified law around the true
  answer, written here from the certificate's parameters and the papers (not from the
  family's sampler): a KS test for continuous laws, a χ² test for integer laws, and the
  support (the box of a bounded family);
* **audit** — the empirical audit (:mod:`dpopt.audit.empirical`), which releases on two
  neighbouring answers through ``Mechanism.release``, does not refute the certificate;
* **planted bug** — the historical bug of the family's own release logic (noise drawn
  around the box centre for the bounded generalized Gaussian; James–Stein shrinkage
  skipped: both are ``answer + sample()``, the path the release layer used to take) or,
  for additive families, half the certified noise (σ/2) is caught by the law test or by
  the audit.

Tolerances (fixed seeds, so every run is identical): a correct family must give a p-value
above :data:`P_PASS` = 10⁻³ (a false failure has probability 10⁻³ per family at a random
seed); a planted bug must give one below :data:`P_CAUGHT` = 10⁻⁶. At N = 20,000 errors the
KS statistic of a scale change by 2 is D ≥ 0.15 (Gaussian: sup|Φ(x) − Φ(2x)| = 0.17), so
its p-value is ≈ 2·exp(−2N·D²) < 10⁻³⁰⁰; the two bugs that change a support or a location
are detected with larger D still.
"""

from __future__ import annotations

import importlib.util
import json
import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import yaml
from scipy import linalg, stats

import dpopt
from dpopt.audit import audit_answer, audit_mechanism
from dpopt.cli import main
from dpopt.core.families import capability, family_names
from dpopt.ledger import Ledger
from dpopt.mechanisms import registry
from dpopt.plan import solve_plan
from dpopt.release import release_groups
from dpopt.release.hierarchy import release_hierarchy
from dpopt.rng import random_source

N = 20_000
AUDIT_DRAWS = 40_000
P_PASS = 1e-3
P_CAUGHT = 1e-6
SEED = 7
ROOT = Path(__file__).resolve().parents[1]

GROUPS = ["a", "b", "c", "d"]
SEXES = ["f", "m"]
SCORES = [8, 9, 7, 10, 6, 8, 9, 10, 7, 8, 9, 6, 10, 8, 7, 9, 8, 10, 6, 5]
RECORDS = [
    {"group": GROUPS[(3 * i) % 4 if i % 5 else 0], "sex": SEXES[i % 2], "score": SCORES[i]}
    for i in range(len(SCORES))
]

DOMAIN = {"group": GROUPS, "sex": SEXES, "score": {"min": 0, "max": 10}}
HISTOGRAM = {"kind": "histogram", "attribute": "group"}
TABLE = {"kind": "contingency_table", "attributes": ["group", "sex"]}

CASES: dict[str, dict] = {
    # family -> the spec fields it is released under (data: DOMAIN, n = 20 under replace_one)
    "gaussian": dict(query=HISTOGRAM, adjacency="add_remove", privacy={"gdp": {"mu": 1.0}}),
    "projected_gaussian": dict(query=TABLE, adjacency="replace_one", privacy={"gdp": {"mu": 1.0}}),
    "james_stein": dict(query=HISTOGRAM, adjacency="replace_one", privacy={"gdp": {"mu": 0.5}}),
    "gaussian_optimal": dict(query=TABLE, adjacency="replace_one", privacy={"gdp": {"mu": 1.0}}),
    "marginal_gaussian": dict(query={"kind": "marginals", "attributes": [["group"], ["group", "sex"]]},
                              adjacency="replace_one", privacy={"gdp": {"mu": 1.0}}),
    "marginal_laplace": dict(query={"kind": "marginals", "attributes": [["group"], ["group", "sex"]]},
                             adjacency="add_remove", privacy={"pure": {"epsilon": 1.0}}),
    "kronecker_gaussian": dict(query={"kind": "kronecker", "terms": [{"group": "prefix", "sex": "identity"}]},
                               adjacency="replace_one", privacy={"gdp": {"mu": 1.0}}),
    "kronecker_laplace": dict(query={"kind": "kronecker", "terms": [{"group": "prefix", "sex": "identity"}]},
                              adjacency="add_remove", privacy={"pure": {"epsilon": 1.0}}),
    # a test_power design: ξ = (1, 1, 0, 0), the last two coordinates not released (NaN); measured exactly
    "query_scaling": dict(query=HISTOGRAM, adjacency="add_remove", privacy={"gdp": {"mu": 1.0}},
                          utility={"metric": "test_power", "alternative": [1, 2, 0, 0]}),
    "laplace": dict(query=HISTOGRAM, adjacency="add_remove", privacy={"pure": {"epsilon": 1.0}}),
    "k_norm": dict(query=HISTOGRAM, adjacency="replace_one", privacy={"pure": {"epsilon": 1.0}}),
    # ε = 0.05 on a mean in [0, 10]: GG(p = 2) truncated to the box around the answer (the case)
    "generalized_gaussian": dict(query={"kind": "mean", "attribute": "score"}, adjacency="replace_one",
                                 privacy={"pure": {"epsilon": 0.05}}),
    "staircase": dict(query=HISTOGRAM, adjacency="add_remove", privacy={"pure": {"epsilon": 1.0}}),
    # on counts the exact mixture of discrete Laplace laws (here one atom: the geometric law maximises P(Z = 0))
    "r2dp": dict(query=HISTOGRAM, adjacency="add_remove", privacy={"pure": {"epsilon": 5.0}},
                 utility={"metric": "usefulness", "gamma": 0.5}),
    "discrete_gaussian": dict(query=HISTOGRAM, adjacency="add_remove", privacy={"zcdp": {"rho": 0.5}}),
    "discrete_laplace": dict(query=HISTOGRAM, adjacency="add_remove", privacy={"pure": {"epsilon": 1.0}}),
}

FAMILY_NAMES = sorted(registry())


def spec_for(family: str, **overrides) -> dict:
    case = CASES[family] | overrides
    fixed = case["adjacency"] != "add_remove"
    data = {"attributes": DOMAIN} | ({"n": len(RECORDS)} if fixed else {})
    return {"dpopt": 1, "name": f"battery: {family}", "data": data, "mechanism": family,
            "utility": {"metric": "l2"}, **case}


def true_answer(spec: dict) -> np.ndarray:
    """φ(X) from the records, with numpy (independently of dpopt's SQL)."""
    query = spec["query"]
    if query["kind"] == "mean":
        return np.array([np.mean([r["score"] for r in RECORDS])])
    if query["kind"] == "histogram":
        return np.array([sum(r["group"] == g for r in RECORDS) for g in GROUPS], dtype=float)
    table = np.array([sum(r["group"] == g and r["sex"] == s for r in RECORDS) for g in GROUPS for s in SEXES],
                     dtype=float)
    if query["kind"] == "marginals":  # [group], [group, sex]
        return np.concatenate([table.reshape(4, 2).sum(axis=1), table])
    if query["kind"] == "kronecker":  # prefix counts over group (in its listed order) × sex
        return np.cumsum(table.reshape(4, 2), axis=0).ravel()
    return table


class Release:
    """A family's solution, its true answer and N Python releases of it (computed once)."""

    def __init__(self, family: str, **overrides):
        self.family = family
        self.spec = spec_for(family, **overrides)
        self.solution = dpopt.solve(self.spec)
        self.mechanism = self.solution.mechanism
        self.truth = true_answer(self.spec)
        self.out = self.mechanism.release(np.tile(self.truth, (N, 1)), np.random.default_rng(SEED))


_RELEASES: dict[str, Release] = {}


def released(family: str) -> Release:
    if family not in CASES:
        pytest.fail(f"family {family!r} has no battery case: add one to CASES in {Path(__file__).name}")
    if family not in _RELEASES:
        _RELEASES[family] = Release(family)
    return _RELEASES[family]


# ----------------------------------------------------------------------------- the laws
def _ks(x: np.ndarray, cdf) -> float:
    return float(stats.kstest(np.ravel(x), cdf).pvalue)


def _chi2_integer(e: np.ndarray, log_weight) -> float:
    """χ² of integer errors against the law ∝ exp(log_weight(k)); values whose expected count is
    below 5 pooled into the two end bins. The normaliser is a sum over |k| ≤ 10⁴ (the mass
    beyond is below 10⁻³⁰⁰ for the scales here); 0 when an error is not an integer."""
    if not np.all(e == np.round(e)):
        return 0.0
    k = np.arange(-10_000, 10_001)
    w = log_weight(k)
    p = np.exp(w - w.max())
    p /= p.sum()
    lo, hi = k[p * e.size >= 5].min(), k[p * e.size >= 5].max()
    expected = p[(k >= lo) & (k <= hi)].copy()
    expected[0] += p[k < lo].sum()
    expected[-1] += p[k > hi].sum()
    observed = np.bincount((np.clip(e, lo, hi) - lo).astype(np.int64), minlength=hi - lo + 1)
    return float(stats.chisquare(observed, expected * e.size).pvalue)


def _span_basis(space) -> np.ndarray:
    """An orthonormal basis of span(S), by SVD of the projector (independent of dpopt's bases)."""
    u, s, _ = linalg.svd(space.span.project(np.eye(space.dimension)))
    return u[:, s > 0.5]


def _js_reference(theta: np.ndarray, sigma: float, variant: str, size: int) -> np.ndarray:
    """Lee et al. (2022) eqs 8–9, written here: y = θ + σZ, then the plain James–Stein estimator."""
    rng = np.random.default_rng(12345)
    y = theta + sigma * rng.standard_normal((size, theta.size))
    k = theta.size
    if variant == "zero":
        centre, c = np.zeros_like(y), k - 2
    else:
        centre, c = np.repeat(y.mean(axis=1, keepdims=True), k, axis=1), k - 3
    r = y - centre
    return centre + (1 - c * sigma**2 / np.sum(r**2, axis=1, keepdims=True)) * r


def _staircase_cdf(epsilon0: float, step: float, g: float):
    """Geng & Viswanath (2016), Def. 3: density a·b^k on [kΔ, (k+γ)Δ), a·b^(k+1) on [(k+γ)Δ, (k+1)Δ),
    b = e^{−ε₀}, a = (1 − b)/(2Δ(γ + (1 − γ)b)), symmetric; its CDF by summing whole steps."""
    b = math.exp(-epsilon0)
    a = (1 - b) / (2 * step * (g + (1 - g) * b))

    def upper(x):  # P(X > x), x ≥ 0
        k = np.floor(x / step)
        r = x / step - k
        rest = a * step * b**k * (np.maximum(g - r, 0) + b * (1 - g - np.maximum(r - g, 0)))
        beyond = a * step * (g + (1 - g) * b) * b ** (k + 1) / (1 - b)
        return rest + beyond

    return lambda x: np.where(x >= 0, 1 - upper(np.abs(x)), upper(np.abs(x)))


def law_pvalue(r: Release, out: np.ndarray | None = None) -> float:
    """The p-value of the errors of ``out`` (default: the family's releases) against the certified
    law around the true answer; 0 when an output leaves the certified support."""
    m, p = r.mechanism, r.mechanism.parameters
    out = r.out if out is None else out
    e = out - r.truth
    family = r.family
    if family == "gaussian" and p.get("sampler") == "exact":  # the lattice: i.i.d. N_ℤ(0, σ_ℤ²) (CKS 2020)
        s2 = float(m.lattice_sigma2)
        return _chi2_integer(np.ravel(e), lambda k: -(k.astype(float) ** 2) / (2 * s2))
    if family == "gaussian":
        return _ks(e / p["sigma"], stats.norm.cdf)
    if family == "projected_gaussian":
        basis = _span_basis(r.solution.space)
        if np.abs(e - (e @ basis) @ basis.T).max() > 1e-8:  # noise off the span: invariants broken
            return 0.0
        if p.get("sampler") == "exact":
            # on the sum-zero span e = η − η̄1, so e_0 − e_1 = η_0 − η_1, the difference of two i.i.d. N_ℤ(0, σ_ℤ²):
            # its pmf is the self-convolution of the discrete Gaussian's (|k| ≤ 10⁴, the mass beyond < 10⁻³⁰⁰)
            assert p["span"] == "sum_zero", p
            s2 = float(m.lattice_sigma2)
            k = np.arange(-10_000, 10_001)
            w = np.exp(-(k.astype(float) ** 2) / (2 * s2))
            pmf = np.convolve(w, w)[10_000:30_001]  # index j ↔ difference j − 10,000
            with np.errstate(divide="ignore"):
                log_pmf = np.log(pmf)
            return _chi2_integer(np.round(e[:, 0] - e[:, 1], 9), lambda j: log_pmf[j + 10_000])
        return _ks(e @ basis / p["sigma"], stats.norm.cdf)
    if family == "gaussian_optimal":
        lam, u = linalg.eigh(m.noise_covariance())
        on = lam > 1e-10 * lam.max()
        if np.abs(e @ u[:, ~on]).max() > 1e-6:
            return 0.0
        return _ks(e @ u[:, on] / np.sqrt(lam[on]), stats.norm.cdf)
    if family in ("marginal_gaussian", "kronecker_gaussian") and p.get("sampler") == "exact":
        # The lattice release states no product law (a linear image of discrete Gaussians), only each cell's
        # variance (utility.per_cell): the sample variance of cell i has SE ≈ v_i·√(2/(N − 1)) (near-normal
        # errors), and each cell's mean is 0 with SE √(v_i/N); the smallest two-sided p-value, Bonferroni over 2d.
        v = np.array([c["standard_error"] ** 2 for c in r.solution.certificate["utility"]["per_cell"]["cells"]])
        n = e.shape[0]
        z = np.concatenate([(e.var(axis=0, ddof=1) - v) / (v * math.sqrt(2 / (n - 1))), e.mean(axis=0) / np.sqrt(v / n)])
        return float(min(1.0, z.size * 2 * stats.norm.sf(np.abs(z).max())))
    if family == "marginal_gaussian":
        # Σ = W (Σ_T a_T E_T)⁺ Wᵀ built densely: W = [group margin; group × sex table], E_T = ⊗ (I − J/n or J/n)
        sizes = p["levels"]
        w = np.vstack([np.kron(np.eye(4), np.ones((1, 2))), np.eye(8)])
        g_plus = sum(np.kron(*[np.eye(n) - 1 / n if k in c["component"] else np.full((n, n), 1 / n)
                               for k, n in zip(p["attributes"], sizes)]) / c["a"] for c in p["coefficients"])
        lam, u = linalg.eigh(w @ g_plus @ w.T)
        on = lam > 1e-10 * lam.max()
        if np.abs(e @ u[:, ~on]).max() > 1e-6:
            return 0.0
        return _ks(e @ u[:, on] / np.sqrt(lam[on]), stats.norm.cdf)
    if family == "kronecker_gaussian":
        # Σ = σ² W (⊗ A_kᵀA_k)⁻¹ Wᵀ built densely: W = prefix(4) ⊗ I₂, A_k the recorded strategy factors
        w = np.kron(np.tril(np.ones((4, 4))), np.eye(2))
        a = np.kron(*[np.array(f["matrix"]) for f in p["strategy"]])
        lam, u = linalg.eigh(p["sigma"] ** 2 * w @ np.linalg.inv(a.T @ a) @ w.T)
        return _ks(e @ u / np.sqrt(lam), stats.norm.cdf)
    if family == "marginal_laplace":
        # reference errors drawn here: W (AᵀA)⁻¹ Aᵀ z, z = θ_S η_S on the weighted marginals A = [θ_S M_S], η_S i.i.d.
        # discrete Laplace of the recorded lattice scale t_S (the exact default), drawn as the difference of two
        # i.i.d. geometrics of success probability 1 − e^{−1/t_S} (P[G₁ − G₂ = k] ∝ e^{−|k|/t_S})
        w = np.vstack([np.kron(np.eye(4), np.ones((1, 2))), np.eye(8)])
        rows = {("group",): np.kron(np.eye(4), np.ones((1, 2))), ("group", "sex"): np.eye(8),
                ("sex",): np.kron(np.ones((1, 4)), np.eye(2)), (): np.ones((1, 8))}
        assert p["sampler"] == "exact"
        scales = {tuple(s["marginal"]): float(Fraction(s["scale"])) for s in p["lattice"]}
        a = np.vstack([s["weight"] * rows[tuple(s["marginal"])] for s in p["strategy"]])
        ref = np.random.default_rng(SEED + 1)

        def discrete_laplace(marginal):
            q, shape = -math.expm1(-1.0 / scales[marginal]), (e.shape[0], rows[marginal].shape[0])
            return ref.geometric(q, shape) - ref.geometric(q, shape)

        z = np.hstack([s["weight"] * discrete_laplace(tuple(s["marginal"])) for s in p["strategy"]])
        reference = z @ (w @ np.linalg.pinv(a.T @ a) @ a.T).T
        return min(float(stats.ks_2samp(e[:, i], reference[:, i]).pvalue) for i in (0, 4)) * 2
    if family == "kronecker_laplace":
        # reference errors drawn here: W (AᵀA)⁻¹ Aᵀ z, W = prefix(4) ⊗ I₂, on the rows of A = Ã_group ⊗ [θ_S M_S]
        # (sex is the plain attribute: M_() = 1ᵀ, M_(sex) = I), Ã_group the recorded integer factor and z = θ_S η
        # with η i.i.d. discrete Laplace of the recorded scale t_S per marginal S (the exact default), drawn as the
        # difference of two i.i.d. geometrics of success probability 1 − e^{−1/t_S}
        w = np.kron(np.tril(np.ones((4, 4))), np.eye(2))
        assert p["sampler"] == "exact"
        (factor,) = p["lattice"]["factors"]
        scales = {tuple(s["marginal"]): float(Fraction(s["scale"])) for s in p["lattice"]["scales"]}
        rows = {(): np.ones((1, 2)), ("sex",): np.eye(2)}
        ordered = np.array(factor["matrix"], dtype=float)
        ref = np.random.default_rng(SEED + 1)
        blocks, noise = [], []
        for s in p["strategy"]["marginals"]:
            marginal = tuple(s["marginal"])
            blocks.append(np.kron(ordered, s["weight"] * rows[marginal]))
            q, shape = -math.expm1(-1.0 / scales[marginal]), (e.shape[0], blocks[-1].shape[0])
            noise.append(s["weight"] * (ref.geometric(q, shape) - ref.geometric(q, shape)))
        a, z = np.vstack(blocks), np.hstack(noise)
        reference = z @ (w @ np.linalg.inv(a.T @ a) @ a.T).T
        return min(float(stats.ks_2samp(e[:, i], reference[:, i]).pvalue) for i in (0, 7)) * 2
    if family == "query_scaling":
        xi = np.array([math.inf if x is None else x for x in p["xi"]])
        noisy = np.isfinite(xi) & (xi > 0)
        if np.any(e[:, np.isinf(xi)] != 0) or not np.all(np.isnan(out[:, xi == 0])):
            return 0.0
        if p.get("sampler") == "exact":  # each noisy count: x_i + N_ℤ(0, σ_i²), σ_i² recorded; Bonferroni over them
            lattice = [float(Fraction(v)) for v, n in zip(p["lattice_variances"], noisy) if n]
            pvalues = [_chi2_integer(e[:, i], lambda k, s2=s2: -(k.astype(float) ** 2) / (2 * s2))
                       for i, s2 in zip(np.flatnonzero(noisy), lattice)]
            return min(pvalues) * len(pvalues)
        return _ks(e[:, noisy] * np.sqrt(xi[noisy]) / p["sigma"], stats.norm.cdf)
    if family == "james_stein":
        assert p["variant"] in ("zero", "mean"), p  # B = I in this case's spec
        reference = _js_reference(r.truth, p["sigma"], p["variant"], e.shape[0]) - r.truth
        return float(stats.ks_2samp(np.sum(e**2, axis=1), np.sum(reference**2, axis=1)).pvalue)
    if family == "laplace" and p.get("sampler") == "exact":  # on counts: i.i.d. discrete Laplace of scale t (CKS 2020)
        t = float(Fraction(p["scale_exact"]))
        return _chi2_integer(np.ravel(e), lambda k: -np.abs(k) / t)
    if family == "laplace":
        return _ks(e / p["scale"], stats.laplace.cdf)
    if family == "k_norm" and p.get("sampler") == "exact":
        # the lattice law (the default on counts): P[z] ∝ exp(−ε‖z‖_K) on the sum-zero integers, ‖z‖_K = ½‖z‖₁, so
        # ½‖Z‖₁ = k with probability ∝ N(k)e^{−εk}, N(k) the sum-zero z ∈ ℤ^d with ‖z‖₁ = 2k, counted here by
        # enumerating z_1..z_{d−1} in [−2K, 2K], K = 40 (beyond, the mass is below (4k + 1)^{d−1}e^{−εk} < 10⁻¹⁰)
        if np.abs(e.sum(axis=1)).max() > 0:
            return 0.0
        eps, d, top = r.spec["privacy"]["pure"]["epsilon"], e.shape[1], 40
        grid = np.arange(-2 * top, 2 * top + 1)
        free = np.stack(np.meshgrid(*[grid] * (d - 1), indexing="ij"), axis=-1).reshape(-1, d - 1)
        half = (np.abs(free).sum(axis=1) + np.abs(free.sum(axis=1))) // 2
        counts = np.bincount(half[half <= top], minlength=top + 1).astype(float)
        with np.errstate(divide="ignore"):
            log_count = np.log(counts)
        return _chi2_integer(0.5 * np.abs(e).sum(axis=1),
                             lambda k: np.where((k >= 0) & (k <= top), log_count[np.clip(k, 0, top)] - eps * k, -np.inf))
    if family == "k_norm":
        # K = conv{e_i − e_j} (histogram, replace-one): ‖z‖_K = ½‖z‖₁ on the sum-zero span, and the
        # density ∝ exp(−ε‖z‖_K) on an r-dimensional span makes ‖Z‖_K ~ Gamma(r, 1/ε) (Hardt–Talwar)
        if np.abs(e.sum(axis=1)).max() > 1e-8:
            return 0.0
        eps = r.spec["privacy"]["pure"]["epsilon"]
        r_dim = r.solution.space.rank
        return _ks(0.5 * np.abs(e).sum(axis=1), stats.gamma(r_dim, scale=1 / eps).cdf)
    if family == "generalized_gaussian":
        law = stats.gennorm(p["p"], scale=p["scale"])
        if p["variant"] == "unbounded":
            return _ks(e, law.cdf)
        lo, hi = np.asarray(p["lower"]) - r.truth, np.asarray(p["upper"]) - r.truth
        if np.any(e < lo - 1e-12) or np.any(e > hi + 1e-12):
            return 0.0
        f_lo, f_hi = law.cdf(lo[0]), law.cdf(hi[0])
        if p["variant"] == "truncated":  # GG conditioned on the box around the answer
            return _ks(e[:, 0], lambda x: np.clip((law.cdf(x) - f_lo) / (f_hi - f_lo), 0, 1))
        # boundary-inflated: GG clamped to the box, atoms F(lo) and 1 − F(hi) at its ends (KS does not
        # apply to atoms): χ² over the two atoms and 20 interior bins of equal probability
        x = e[:, 0]
        at_lo, at_hi = x <= lo[0] + 1e-9, x >= hi[0] - 1e-9
        edges = law.ppf(np.linspace(f_lo, f_hi, 21))
        inner = np.histogram(x[~at_lo & ~at_hi], bins=edges)[0]
        observed = np.concatenate([[at_lo.sum()], inner, [at_hi.sum()]])
        expected = np.concatenate([[f_lo], np.full(20, (f_hi - f_lo) / 20), [1 - f_hi]]) * x.size
        return float(stats.chisquare(observed, expected).pvalue)
    if family == "staircase" and p.get("sampler") == "exact":
        # on counts: the staircase density of Def. 3 at the integers, step m and boundary r lattice points (level
        # ⌊|k|/m⌋, one more from r on within a step), per-step ε' as recorded
        eps, m, r = float(Fraction(p["epsilon0_exact"])), p["step_units"], p["boundary_units"]
        return _chi2_integer(np.ravel(e), lambda k: -eps * (np.abs(k) // m + (np.abs(k) % m >= r)))
    if family == "staircase":
        return _ks(e, _staircase_cdf(p["epsilon0"], p["step"], p["g"]))
    if family == "r2dp" and "mixture" in p:
        # p(k) = Σ_j w_j tanh(1/(2s_j)) e^{−|k|/s_j} (a mixture of discrete Laplace laws, each normalised)
        scales = [float(Fraction(s)) for s in p["mixture"]["scales"]]
        weights = np.array(p["mixture"]["weights"], dtype=float)
        return _chi2_integer(np.ravel(e), lambda k: np.logaddexp.reduce([
            math.log(w * math.tanh(0.5 / s)) - np.abs(k) / s for w, s in zip(weights / weights.sum(), scales)]))
    if family == "r2dp":
        # Z = L/t, L ~ Laplace(1), t ~ the second fold: P(Z > x) = ½E[e^{−tx}] = ½M(−x) (R²DP eq. 11)
        fold = m.fold
        half_tail = lambda x: 0.5 * np.asarray(fold.mgf(-np.abs(x)), dtype=float)  # noqa: E731
        return _ks(e, lambda x: np.where(x >= 0, 1 - half_tail(x), half_tail(x)))
    if family == "discrete_gaussian":
        s2 = float(Fraction(p["sigma_squared_exact"]))
        return _chi2_integer(np.ravel(e), lambda k: -(k.astype(float) ** 2) / (2 * s2))
    if family == "discrete_laplace":
        t = float(Fraction(p["scale_exact"]))
        return _chi2_integer(np.ravel(e), lambda k: -np.abs(k) / t)
    pytest.fail(f"family {family!r} has no reference law in the battery: add one to law_pvalue")


# --------------------------------------------------------------------------- planted bugs
class Planted:
    """The family's mechanism with a bug planted in its release (everything else forwarded)."""

    def __init__(self, mechanism, bug: str):
        self.inner, self.bug = mechanism, bug

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def release(self, values, rng=None):
        values = np.asarray(values, dtype=float)
        if self.bug == "answer + sample()":
            rows = values.reshape(-1, self.inner.dimension)
            return (rows + self.inner.sample(rows.shape[0], rng)).reshape(values.shape)
        return values + 0.5 * (self.inner.release(values, rng) - values)


def planted_bug(r: Release) -> str:
    """The family's bug: its own release logic bypassed when it has one, else σ/2."""
    own = type(r.mechanism)._release is not dpopt.Mechanism._release
    special = r.family in ("james_stein",) or r.mechanism.parameters.get("variant") in ("truncated",
                                                                                       "boundary_inflated")
    return "answer + sample()" if own and special else "noise / 2"


# ---------------------------------------------------------------------------------- tests
def test_every_family_auto_can_choose_has_a_case():
    assert set(family_names()) <= set(CASES), sorted(set(family_names()) - set(CASES))


@pytest.fixture(scope="module")
def data_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("battery") / "records.csv"
    path.write_text("group,sex,score\n" + "".join(f"{r['group']},{r['sex']},{r['score']}\n" for r in RECORDS))
    return path


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_cli_release(family, data_file, tmp_path, capfd):
    r = released(family)
    capfd.readouterr()  # the solvers' banners of the Python solve above, not the CLI's output
    spec_path = tmp_path / f"{family}.yaml"
    spec_path.write_text(yaml.safe_dump(r.spec))
    code = main(["release", str(spec_path), "--data", str(data_file), "--seed", str(SEED), "--insecure-seed"])
    captured = capfd.readouterr()
    if code == 2:  # a family that cannot release through the CLI says so in one line
        assert captured.err.count("\n") == 1 and captured.out == ""
        pytest.fail(f"{family} cannot release through the CLI: {captured.err.strip()}")
    assert code == 0, captured.err
    document = json.loads(captured.out)
    assert document["mechanism"]["family"] == family and "records" not in document
    values = np.array([np.nan if v is None else v for v in document["release"].values()])
    # the CLI release is Mechanism.release at the true answer, from the root stream of the seed
    python = r.mechanism.release(r.truth, random_source(SEED, insecure_seed=True).stream())
    np.testing.assert_array_equal(values, python)
    # inside the certified support (the law test returns 0 outside it), with the Python sample
    assert law_pvalue(r, np.vstack([r.out, values])) > P_PASS


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_python_release_is_vectorised_over_rows(family):
    r = released(family)
    assert r.out.shape == (N, r.mechanism.dimension)
    one = r.mechanism.release(r.truth, np.random.default_rng(SEED))
    assert one.shape == (r.mechanism.dimension,)
    assert r.mechanism.release(r.truth[None, :], np.random.default_rng(SEED)).shape == (1, r.mechanism.dimension)
    np.testing.assert_array_equal(np.isnan(one), np.isnan(r.out[0]))


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_release_follows_the_certified_law(family):
    assert law_pvalue(released(family)) > P_PASS


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_audit_on_the_release_path_does_not_refute(family):
    r = released(family)
    spec = r.solution.spec
    result = audit_mechanism(r.mechanism, r.solution.space, spec.privacy, draws=AUDIT_DRAWS,
                             answer=audit_answer(spec))
    assert result.audited and result.passed, result.to_dict()


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_planted_bug_is_caught(family):
    r = released(family)
    bug = planted_bug(r)
    broken = Planted(r.mechanism, bug)
    out = broken.release(np.tile(r.truth, (N, 1)), np.random.default_rng(SEED))
    p = law_pvalue(r, out)
    caught_by = ["law"] if p < P_CAUGHT else []
    if not caught_by:
        spec = r.solution.spec
        result = audit_mechanism(broken, r.solution.space, spec.privacy, draws=AUDIT_DRAWS,
                                 answer=audit_answer(spec))
        caught_by += [] if result.passed else ["audit"]
    print(f"{family}: planted '{bug}' caught by {caught_by or 'nothing'} (law p = {p:.3g})")
    assert caught_by, (family, bug, p)


def test_truncated_gg_bug_is_also_refuted_by_the_audit():
    # the bug: noise truncated around the box centre gives neighbours disjoint supports,
    # which the audit on the release path refutes (the certified ε = 1 is far below its bound)
    r = released("generalized_gaussian")
    spec = r.solution.spec
    broken = Planted(r.mechanism, "answer + sample()")
    result = audit_mechanism(broken, r.solution.space, spec.privacy, draws=AUDIT_DRAWS, answer=audit_answer(spec))
    assert not result.passed and result.lower_bound > 2 * result.certified, result.to_dict()


def test_boundary_inflated_gg_follows_its_law_and_its_bug_is_caught():
    # at ε = 1 the same spec's best floating-point option is the other bounded variant, Laplace clamped to the box
    # (by default the exact truncated GG on the lattice box is released instead: exact is the default)
    r = Release("generalized_gaussian", privacy={"pure": {"epsilon": 1.0}}, sampler="floating_point")
    assert r.mechanism.parameters["variant"] == "boundary_inflated"
    assert law_pvalue(r) > P_PASS
    out = Planted(r.mechanism, planted_bug(r)).release(np.tile(r.truth, (N, 1)), np.random.default_rng(SEED))
    assert law_pvalue(r, out) < P_CAUGHT


def test_james_stein_release_error_matches_its_certified_value():
    # specs/table_age_sex_gdp.yaml (the case): the certificate states the worst case over
    # tables with total n (all records in one cell), E‖e‖² ≈ 3205, by Lee et al.'s closed form. The
    # release layer's path (noisy_block, as single, grouped and Dask releases) at that answer must
    # match it within 4 standard errors of the Monte Carlo mean; skipping the shrinkage gives the
    # Gaussian stage's kσ² = 17·200 = 3400, more than 20 standard errors away.
    from dpopt.release.blocks import noisy_block

    sol = dpopt.solve(ROOT / "specs" / "table_age_sex_gdp.yaml")
    m = sol.mechanism
    certified = sol.certificate["utility"]["value"]
    worst = m.worst_case_answer()
    errors = np.sum((noisy_block(m, np.tile(worst, (N, 1)), np.random.default_rng(SEED)) - worst) ** 2, axis=1)
    se = errors.std(ddof=1) / math.sqrt(N)
    assert abs(errors.mean() - certified) < 4 * se, (errors.mean(), certified, se)
    assert m.stage_cost - certified > 20 * se


@pytest.mark.parametrize("name", ["sample", "release", "expected_utility", "privacy_checks"])
def test_public_methods_are_final(name):
    # the template: a family implements the private hooks; redefining a public method is refused
    with pytest.raises(TypeError, match=f"redefines {name}"):
        type("Rogue", (dpopt.Mechanism,), {name: lambda self, *a, **k: None})


def test_committee_example_releases_inside_the_box(capfd):
    # the command: a mean of scores in [0, 10] (true value 8) printed 12.617 before the fix
    spec, data = ROOT / "specs" / "committee_mean_truncated_gg.yaml", ROOT / "specs" / "data" / "committee.csv"
    assert main(["release", str(spec), "--data", str(data), "--seed", "6", "--insecure-seed"]) == 0
    value = json.loads(capfd.readouterr().out)["release"]["value"]
    assert 0.0 <= value <= 10.0


# --------------------------------------------------------------------- exact noise on every release path
EXACT_COUNT_CASES = {
    # family -> (query, target): each releases exact (integer) noise on counts by default (issue 39)
    "laplace": (HISTOGRAM, {"pure": {"epsilon": 1.0}}),
    "discrete_laplace": (HISTOGRAM, {"pure": {"epsilon": 1.0}}),
    "gaussian": (HISTOGRAM, {"zcdp": {"rho": 0.5}}),
    "discrete_gaussian": (HISTOGRAM, {"zcdp": {"rho": 0.5}}),
    "marginal_gaussian": ({"kind": "marginals", "attributes": [["group"], ["group", "sex"]]}, {"zcdp": {"rho": 0.5}}),
    "marginal_laplace": ({"kind": "marginals", "attributes": [["group"], ["group", "sex"]]}, {"pure": {"epsilon": 1.0}}),
    "query_scaling": (HISTOGRAM, {"zcdp": {"rho": 0.5}}),
    "r2dp": (HISTOGRAM, {"pure": {"epsilon": 1.0}}),
}
SLOW_PATH_FAMILIES = ("gaussian", "discrete_gaussian", "marginal_gaussian", "marginal_laplace", "query_scaling")
"""Their certificates take 1–3 s CPU each path (the sampler checks); the default run keeps laplace and
discrete_laplace, whose exact paths are this issue's."""
STATES = {"S1": ["S1C1", "S1C2"], "S2": ["S2C1"]}
VISITS_SPEC, VISITS_DATA = ROOT / "specs" / "visits_person_level.yaml", ROOT / "specs" / "data" / "visits.csv"
COUNTY = [("S1", "S1C1"), ("S1", "S1C2"), ("S2", "S2C1")]


def _no_idealized_note(where: str, document) -> None:
    text = json.dumps(document.data if hasattr(document, "data") else document, ensure_ascii=False)
    assert "idealized" not in text, where


@pytest.fixture(scope="module")
def county_data(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("paths") / "records.csv"
    path.write_text("group,sex,state,county\n" + "".join(
        f"{r['group']},{r['sex']},{COUNTY[i % 3][0]},{COUNTY[i % 3][1]}\n" for i, r in enumerate(RECORDS)))
    return path


@pytest.mark.parametrize("family", [pytest.param(f, marks=pytest.mark.slow) if f in SLOW_PATH_FAMILIES else f
                                    for f in EXACT_COUNT_CASES])
def test_every_release_path_of_an_exact_count_family_states_no_idealized_numerics(family, county_data, tmp_path,
                                                                                    capfd):
    """Each exact count family, released through the Python API, the CLI charged to a ledger, a person-level CLI
    release (rows bounded per person; the families that serve a privacy unit), a grouped release (DuckDB, and Dask when installed), a one-query plan and a
    TopDown hierarchy: no certificate (nor the ledger's copy) carries the floating-point note; ``sampler:
    floating_point`` on the Python path does (the test can fail)."""
    data, (query, privacy) = county_data, EXACT_COUNT_CASES[family]
    engines = ("duckdb", "dask") if importlib.util.find_spec("dask") else ("duckdb",)  # Dask is optional
    spec = {"dpopt": 1, "name": f"exact paths: {family}", "data": {"attributes": {"group": GROUPS, "sex": SEXES}},
            "query": query, "adjacency": "add_remove", "privacy": privacy, "mechanism": family,
            "utility": {"metric": "l2"}}
    solution = dpopt.solve(spec)
    assert solution.mechanism.exact_noise, family
    _no_idealized_note(f"{family}: Python", solution.certificate)
    if not family.startswith("discrete_"):  # the discrete families have no floating-point sampler
        floating = dpopt.solve({**spec, "sampler": "floating_point"})
        assert "idealized" in json.dumps(floating.certificate.data), f"{family}: floating point"
    spec_path = tmp_path / f"{family}.yaml"
    spec_path.write_text(yaml.safe_dump(spec))
    budget = {k: {p: 10 * v for p, v in params.items()} for k, params in privacy.items()}  # room for one release
    ledger = Ledger.create(tmp_path / f"ledger_{family}", budget)
    capfd.readouterr()
    code = main(["release", str(spec_path), "--data", str(data), "--seed", "7", "--insecure-seed",
                 "--ledger", str(ledger.path), "--out", str(tmp_path / "cli")])
    assert code == 0, capfd.readouterr().err
    written = json.loads((tmp_path / "cli" / "certificate.json").read_text())
    assert any("exact" in note for note in written["mechanism"]["notes"])  # the notes are there, and say exact
    _no_idealized_note(f"{family}: CLI", written)
    for entry in ledger.entries:
        _no_idealized_note(f"{family}: ledger", ledger.certificate(entry))
    if capability(family).privacy_unit:  # person level: the visits table, each person's rows bounded before counting
        person = {**yaml.safe_load(VISITS_SPEC.read_text()), "mechanism": family, "privacy": privacy}
        (tmp_path / "person.yaml").write_text(yaml.safe_dump(person))
        assert main(["release", str(tmp_path / "person.yaml"), "--data", str(VISITS_DATA), "--seed", "7",
                     "--insecure-seed", "--out", str(tmp_path / "person")]) == 0, capfd.readouterr().err
        _no_idealized_note(f"{family}: person level",
                           json.loads((tmp_path / "person" / "certificate.json").read_text()))
    for engine in engines:
        grouped = release_groups(spec, data, "state", groups={"state": list(STATES)}, seed=7, insecure_seed=True,
                                 engine=engine)
        _no_idealized_note(f"{family}: grouped ({engine})", grouped.certificate)
    plan = {key: value for key, value in spec.items() if key not in ("query", "mechanism")}
    plan["queries"] = [{"name": "q", "query": query, "mechanism": family}]
    _no_idealized_note(f"{family}: plan", solve_plan(plan).certificate)
    geography = {"levels": ["state", "county"], "shares": "equal",
                 "units": {"state": list(STATES), "county": {c: s for s, cs in STATES.items() for c in cs}}}
    hierarchy = release_hierarchy({**spec, "geography": geography}, data, seed=7, insecure_seed=True)
    _no_idealized_note(f"{family}: hierarchy", hierarchy.certificate)
