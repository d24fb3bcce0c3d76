r"""A second route to a certificate's privacy and cost claims, from the noise law alone.

The family's own ``privacy_checks`` evaluate its closed forms. This module re-derives the
same claims without them, from the law of the noise the mechanism emits
(:meth:`Mechanism.noise_law`, stated by each family, :mod:`dpopt.noise.law`):

``privacy.second_route``
    For every neighbouring difference v the spec implies (the listed vectors of the
    sensitivity space, reduced by exact symmetries, below), the privacy-loss distribution
    of the pair (noise, noise + v) is computed numerically with a rigorous bracket
    (:mod:`dpopt.privacy.pld`), and the target is evaluated on both sides of the bracket:
    δ(ε) for (ε, δ); the whole (ε, δ) profile against G_μ's for μ-GDP (a mechanism is
    μ-GDP iff it is (ε, δ_μ(ε))-DP for every ε ≥ 0 in both orders, Dong, Roth & Su 2022,
    Cor. 2.13); Rényi divergences against αρ for ρ-zCDP; the essential supremum of the
    loss for pure ε; P(|L| > ε) for probabilistic DP. The outcome is

    * **confirmed** — the pessimistic side meets the target;
    * **consistent** — the optimistic side meets it but the pessimistic does not (a tight
      calibration, within the discretisation's resolution; or a claim, like pure ε or
      zCDP, that the window of a numerical route cannot confirm in the far tails);
    * **refuted** — the optimistic side already violates it: the check fails.

    A density ∝ exp(−ε‖z‖_K) has privacy loss sup_y log f(y)/f(y − v) = ε‖v‖_K (triangle
    inequality, attained on the ray through v), evaluated with the law's own gauge.

``privacy.second_route.sampler``
    The law analysed is the law the sampler draws: Kolmogorov–Smirnov tests of the
    mechanism's own draws (fixed seed) against each marginal of the law (or ‖Z‖_K against
    its Gamma(s, rate ε) law), family-wise level 10⁻⁶ (p-values bounded by the
    Dvoretzky–Kiefer–Wolfowitz–Massart inequality), and every draw in the law's support.

``utility.integration``
    The predicted cost recomputed by numerical integration of the law's marginals.

Reductions (exact, stated in each check's method): the pair for −v has the same loss law
as for v (symmetric marginals); permuting coordinates with equal marginals, or flipping
their signs, preserves a product law, so only the sorted magnitudes |Bᵀv| per group of
equal marginals matter; for log-concave marginals the trade-off of a shift decreases
in every |shift| (monotone likelihood ratio, preserved by products), so only maximal
patterns are checked; a product of Gaussians is whitened to one N(0, 1) coordinate with
shift ‖Λ^{−1/2}Bᵀv‖ (rotation invariance), so only the largest such shift is checked.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dpopt.core import normal
from dpopt.core.checks import Check
from dpopt.domain.workload import workload_matrix
from dpopt.errors import CalibrationError, DpoptError
from dpopt.mechanisms import Mechanism
from dpopt.noise.gaussian import GaussianMarginal
from dpopt.noise.law import GaugeLaw, PostProcessedLaw, ProductLaw
from dpopt.privacy.gaussian import gaussian_epsilon, gaussian_log_delta, gaussian_mu
from dpopt.privacy.pld import DEFAULT_STEP, PLDBracket, marginal_pld, product_pld, profile_tradeoff
from dpopt.privacy.tradeoff import PureDPTradeOff
from dpopt.sensitivity.space import SensitivitySpace
from dpopt.spec.models import Privacy, Spec

NOT_AVAILABLE = "second route not available"
"""Method prefix of a check the second route could not make (printed N/A, never a silent pass)."""

SAMPLER_DRAWS = 20_000
SAMPLER_SEED = 20261123
SAMPLER_LEVEL = 1e-6
"""Family-wise level of the sampler's Kolmogorov–Smirnov tests (Bonferroni over coordinates)."""

MAX_PATTERNS = 48
"""At most this many distinct shift patterns get their own PLD (the largest first)."""

MAX_LATTICE_POINTS = 2_000_001
"""Most points of a lattice law's window the privacy claim's PLD forms (N_ℤ(0, σ²) reaches it near σ² = 1.3·10¹⁰,
its window about ±8.8σ; the tabulated law stops at 2³⁰): beyond, the claim is not available."""

GDP_DELTA_FLOOR = 1e-12
"""The GDP profile is compared for ε up to δ_μ(ε) = this (below, the window's tail mass dominates)."""

_REL = 1e-9
"""Relative allowance for floating-point evaluation when refuting."""

_ABS = 1e-15


def not_available(claim: str, reason: str) -> Check:
    """An explicit "second route not available" line (passes, and says so)."""
    return Check(claim, NOT_AVAILABLE, True, reason)


def is_not_available(check) -> bool:
    """True for a check made by :func:`not_available` (a Check or its dict form)."""
    method = check["method"] if isinstance(check, dict) else check.method
    return method == NOT_AVAILABLE


def noise_law_of(mechanism: Mechanism):
    """The mechanism's noise law (:meth:`~Mechanism.noise_law`).

    Returns
    -------
    law or str
        The law, or the reason there is none.
    """
    law = mechanism.noise_law()
    if law is None:
        return f"the {mechanism.family} family states no noise law (Mechanism.noise_law)"
    return law


# --------------------------------------------------------------------------- verdicts
@dataclass(frozen=True)
class Verdict:
    """The target evaluated on both sides of a bracket.

    ``lower``/``upper`` bound the quantity named ``quantity`` (e.g. δ(ε), μ, ε), which the
    target bounds by ``target``; ``status`` is confirmed, consistent or refuted.
    """

    status: str
    quantity: str
    lower: float
    upper: float
    target: float
    note: str = ""

    @property
    def refuted(self) -> bool:
        return self.status == "refuted"

    def margin(self) -> str:
        if self.target > 0 and math.isfinite(self.lower):
            return f"margin {(self.target - self.lower) / self.target:+.3g} (relative, optimistic side)"
        return ""

    def text(self) -> str:
        upper = "∞" if self.upper == math.inf else f"{self.upper:.6g}"
        out = f"{self.status}: {self.quantity} ∈ [{self.lower:.6g}, {upper}] vs target {self.target:.6g}"
        parts = [p for p in (self.margin(), self.note) if p]
        return out + ("; " + "; ".join(parts) if parts else "")


def _status(lower: float, upper: float, target: float) -> str:
    if lower > target * (1 + _REL) + _ABS:
        return "refuted"
    return "confirmed" if upper <= target else "consistent"


def _eps_delta(b: PLDBracket, epsilon: float, delta: float) -> Verdict:
    lo, hi = float(b.lower.delta(epsilon)[0]), float(b.upper.delta(epsilon)[0])
    return Verdict(_status(lo, hi, delta), f"δ(ε={epsilon:g})", lo, hi, delta)


def _pure(b: PLDBracket, epsilon: float) -> Verdict:
    lo, hi = b.lower.max_loss(), b.upper.max_loss()
    tail = float(b.upper.delta(epsilon)[0])
    status = "refuted" if lo > epsilon * (1 + _REL) + _ABS else "consistent"
    return Verdict(status, "ess sup L", lo, hi, epsilon,
                   f"(ε, {tail:.3g})-DP confirmed on the window; pure ε needs the far tails, which a numerical "
                   "route does not see")


def _gdp(b: PLDBracket, mu: float) -> Verdict:
    top = gaussian_epsilon(GDP_DELTA_FLOOR, mu, certify=False)  # a window end: no directed rounding needed
    eps = np.linspace(0.0, top, 1201)
    target = np.exp([gaussian_log_delta(e, mu) for e in eps])
    lo, hi = b.lower.delta(eps), b.upper.delta(eps)
    worst = int(np.argmax(lo / target))
    mu_lo = _mu_at(eps[worst], lo[worst])
    ratio_hi = hi[:-1] / target[1:]  # δ(ε) ≤ δ̂(ε_j) ≤ δ_μ(ε_{j+1}) ≤ δ_μ(ε) on [ε_j, ε_{j+1}]
    j = int(np.argmax(ratio_hi))
    mu_hi = _mu_at(eps[j + 1], hi[j])
    refuted = bool((lo > target * (1 + _REL) + _ABS).any())
    status = "refuted" if refuted else ("confirmed" if ratio_hi.max() <= 1.0 else "consistent")
    return Verdict(status, "μ", mu_lo, mu_hi, mu,
                   f"(ε, δ) profile on {eps.size} points of [0, {top:.4g}] (δ_μ ≥ {GDP_DELTA_FLOOR:g}); "
                   f"worst ε = {eps[worst]:.4g}: δ ∈ [{lo[worst]:.6g}, {hi[worst]:.6g}] vs δ_μ = {target[worst]:.6g}")


def _mu_at(epsilon: float, delta: float) -> float:
    """The μ whose profile passes through (ε, δ); 0 for δ = 0, ∞ for δ ≥ 1.

    The double-precision root (``gaussian_mu(..., certify=False)``): an end of the μ bracket
    read off the PLD bracket, whose width (~1e-4 of μ) is ten orders of magnitude above the
    root's error, so directed rounding would not change what it shows.
    """
    if delta <= 0:
        return 0.0
    if delta >= 1:
        return math.inf
    try:
        return gaussian_mu(float(epsilon), float(delta), certify=False)
    except CalibrationError:
        return math.inf


def _zcdp(b: PLDBracket, rho: float) -> Verdict:
    """The Rényi divergences of the bracket's two sides against ρ. Refuting allows for the evaluation's rounding:
    the log of a sum of n positive terms is off by at most about n·u (u = 2⁻⁵³, Higham 2002, §4.2), which
    D_α/α = log(Σ m_i e^{(α−1)L_i})/((α − 1)α) divides by (α − 1)α — at small ρ and α near 1 far above
    :data:`_REL` (ρ = 5·10⁻⁷, σ_ℤ = 1000: 6.6·10⁻⁹ relative at α = 1.025 for the exact discrete Gaussian, whose
    D_α/α is ρ exactly); taken 4 times for the masses' own rounding."""
    orders = 1.0 + np.logspace(-2, 2, 41)
    lo = b.lower.renyi(orders) / orders
    hi = b.upper.renyi(orders) / orders
    rounding = 4.0 * np.count_nonzero(b.lower.masses) * np.finfo(float).eps / ((orders - 1.0) * orders)
    k = int(np.argmax(lo - rounding))
    status = ("refuted" if lo[k] > rho * (1 + _REL) + _ABS + rounding[k]
              else ("confirmed" if hi.max() <= rho else "consistent"))
    return Verdict(status, "max_α D_α/α", float(lo[k]), float(hi.max()), rho,
                   f"Rényi divergences at {orders.size} orders α ∈ [1.01, 101]; worst α = {orders[k]:.4g}; the "
                   "pessimistic side is infinite when the window leaves tail mass")


def _pdp(b: PLDBracket, epsilon: float, delta: float) -> Verdict:
    hi = b.upper.probability_above(epsilon) + b.lower.probability_below(-epsilon)
    lo = (b.lower.probability_above(epsilon)
          + float(b.upper.masses[b.upper.losses < -epsilon].sum()))
    return Verdict(_status(lo, hi, delta), f"P(|L| > {epsilon:g})", lo, hi, delta)


def evaluate(bracket: PLDBracket, privacy: Privacy) -> Verdict:
    """The privacy target evaluated on a PLD bracket."""
    p = privacy.parameters
    definition = privacy.definition
    if definition == "pure":
        return _pure(bracket, p["epsilon"])
    if definition == "approx":
        return _eps_delta(bracket, p["epsilon"], p["delta"])
    if definition == "gdp":
        return _gdp(bracket, p["mu"])
    if definition == "zcdp":
        return _zcdp(bracket, p["rho"])
    if definition == "pdp":
        return _pdp(bracket, p["epsilon"], p["delta"])
    raise ValueError(f"no second route for a {definition} target")


def relative_shift(law, vectors: np.ndarray) -> np.ndarray:
    """How large each difference is for the noise: ‖(Bᵀv)_k / scale_k‖₂ for a product law (the
    whitened norm for Gaussians), ‖v‖_K for a gauge law; differences off the noise's support
    (or on coordinates not released) count by what the noise sees of them."""
    if isinstance(law, PostProcessedLaw):
        law = law.inner
    vectors = np.atleast_2d(np.asarray(vectors, dtype=float))
    if isinstance(law, GaugeLaw):
        return np.asarray(law.gauge(vectors), dtype=float)
    w, _ = law.coordinates(vectors)
    scales = np.array([m.gaussian_sd or m.scale for m in law.marginals])
    return np.linalg.norm(w / scales, axis=1)


# ------------------------------------------------------------------ shift patterns
@dataclass(frozen=True)
class Pattern:
    """One neighbouring difference, as the shifts of the law's coordinates."""

    vector: np.ndarray
    shifts: np.ndarray


def _patterns(law: ProductLaw, vectors: np.ndarray) -> tuple[list[Pattern], str]:
    """The shift patterns to check, and the reduction applied (see the module docstring)."""
    w, _ = law.coordinates(vectors)
    nonzero = np.abs(w).max(axis=1) > 0
    vectors, w = vectors[nonzero], w[nonzero]
    if law.gaussian:
        sd = np.array([m.gaussian_sd for m in law.marginals])
        size = np.linalg.norm(w / sd, axis=1)
        k = int(np.flatnonzero(size >= size.max() * (1.0 - _REL))[0])  # the first of those tied up to rounding
        return [Pattern(vectors[k], np.array([size[k]]))], (
            f"Gaussian product whitened to N(0, 1) with shift ‖Λ^(-1/2)Bᵀv‖, largest over {len(vectors)} "
            "vectors (δ increases with it)")
    groups: dict[tuple, list[int]] = {}
    for k, m in enumerate(law.marginals):
        groups.setdefault(m.key, []).append(k)
    columns = [np.array(ix) for ix in groups.values()]
    keys = np.concatenate([-np.sort(-np.abs(w[:, ix]), axis=1) for ix in columns], axis=1)
    keys = np.round(keys, 12)
    unique, first = np.unique(keys, axis=0, return_index=True)
    note = f"{len(unique)} distinct patterns of sorted |shift| per group of equal marginals among {len(vectors)} vectors"
    if all(m.log_concave for m in law.marginals):
        dominated = np.array([
            any(j != i and (unique[j] >= unique[i]).all() and (unique[j] > unique[i]).any() for j in range(len(unique)))
            for i in range(len(unique))
        ])
        unique, first = unique[~dominated], first[~dominated]
        note += f"; {len(unique)} maximal (log-concave marginals: larger shifts are less private)"
    order = np.argsort(-np.sum(unique, axis=1))
    if len(order) > MAX_PATTERNS:
        note += f"; the {MAX_PATTERNS} with the largest total shift are checked (NOT all)"
        order = order[:MAX_PATTERNS]
    out = []
    for i in order:
        v = vectors[first[i]]
        out.append(Pattern(v, law.coordinates(v[None, :])[0][0]))
    return out, note


def pair_pld(law: ProductLaw, pattern: Pattern) -> PLDBracket:
    """The PLD bracket of (Z, Z + v) for a product law, on a loss grid of step 10⁻⁴ × the loss
    scale (μ for a whitened Gaussian, Σ|t_k|/scale_k otherwise)."""
    if law.gaussian:
        mu = float(pattern.shifts[0])
        return marginal_pld(GaussianMarginal(1.0), mu, DEFAULT_STEP * mu)
    spread = float(sum(abs(t) / m.scale for t, m in zip(pattern.shifts, law.marginals)))
    # without log-concavity the bracket of an interval is looser (unimodality only): a
    # coarser grid keeps the point count, and the cost, of the same order
    coarse = 1.0 if all(m.log_concave for m in law.marginals) else 4.0
    return product_pld(law.marginals, pattern.shifts, DEFAULT_STEP * coarse * spread)


# -------------------------------------------------------------------- the privacy claim
def _support_check(residual: np.ndarray, vectors: np.ndarray) -> int | None:
    """Index of a difference that leaves the noise's support, if any."""
    scale = np.maximum(1.0, np.abs(vectors).max(axis=1))
    bad = np.flatnonzero(residual > 1e-9 * scale)
    return int(bad[0]) if bad.size else None


def _selects_coordinates(basis: np.ndarray) -> bool:
    """Whether every column of ``basis`` is a distinct standard unit vector: the law's noise is then integer noise
    on some of the answer's own coordinates (e.g. query scaling's released cells), and a neighbouring difference's
    coordinates are its entries there."""
    b = np.asarray(basis)
    ones = np.argwhere(b == 1)
    return bool(np.isin(b, (0, 1)).all() and len(ones) == b.shape[1] and len(set(ones[:, 0])) == b.shape[1]
                and sorted(ones[:, 1].tolist()) == list(range(b.shape[1])))


def privacy_claim(law, space: SensitivitySpace, privacy: Privacy) -> Check:
    """``privacy.second_route``: the target re-derived from the noise law (module docstring)."""
    claim = "privacy.second_route"
    prefix = ""
    if isinstance(law, PostProcessedLaw):
        prefix = f"post-processing ({law.operation}) of a release with noise {law.inner.description}; "
        law = law.inner
    vectors = space.listed()
    if isinstance(law, GaugeLaw):
        return _gauge_claim(law, space, vectors, privacy, prefix)
    if not isinstance(law, ProductLaw):
        return not_available(claim, f"no analysis for a law of type {type(law).__name__}")
    if vectors is None:
        return not_available(claim, "the sensitivity space is too large to list its vectors")
    if privacy.definition not in ("pure", "approx", "gdp", "zcdp", "pdp"):
        return not_available(claim, f"no numerical route for a {privacy.definition} target")
    _, residual = law.coordinates(vectors)
    off = _support_check(residual, vectors)
    method = (f"{prefix}numerical privacy-loss distribution of {law.description or 'the noise law'} at the "
              "neighbouring differences (pessimistic/optimistic bracket, dpopt.privacy.pld)")
    if off is not None:
        return Check(claim, method, False,
                     f"refuted: the difference {vectors[off].tolist()} leaves the noise's support (residual "
                     f"{residual[off]:.3g}), so those neighbours are told apart with certainty")
    if law.lattice:
        if law.basis is not None and not law.projection and not _selects_coordinates(law.basis):
            return not_available(claim, "integer noise in a rotated basis has no lattice analysis")
        w, _ = law.coordinates(vectors)
        if (np.abs(w - np.round(w)) > 1e-9).any():
            return Check(claim, method, False, "refuted: integer noise with a non-integer difference "
                                               "(the two outputs have disjoint supports)")
        points = max(2 * int(m.window()) + 1 for m in law.marginals)
        if points > MAX_LATTICE_POINTS:
            return not_available(claim, f"the lattice law's window has {points} points (above "
                                        f"{MAX_LATTICE_POINTS}): no numerical privacy-loss distribution")
    patterns, reduction = _patterns(law, vectors)
    if not patterns:
        return not_available(claim, "every listed difference is zero on the released coordinates")
    worst: tuple[Verdict, Pattern] | None = None
    for pattern in patterns:
        verdict = evaluate(pair_pld(law, pattern), privacy)
        if worst is None or _worse(verdict, worst[0]):
            worst = (verdict, pattern)
    verdict, pattern = worst
    coverage = "" if space.complete else (
        "; the space lists the generators of its hull only: points inside are assumed no worse "
        "(holds for the Gaussian, whose loss grows with a norm)")
    return Check(
        claim,
        method + f"; reduction: {reduction}{coverage}",
        not verdict.refuted,
        f"{verdict.text()}; worst difference {_short_vector(pattern.vector)}",
    )


def _rank(v: Verdict) -> tuple:
    order = {"refuted": 2, "consistent": 1, "confirmed": 0}[v.status]
    return (order, v.lower / v.target if v.target > 0 else v.lower)


def _worse(v: Verdict, than: Verdict) -> bool:
    """Whether ``v`` ranks above ``than`` by more than rounding (_REL): patterns tied up to the last bits
    of this machine's BLAS keep the first one, which a verifier elsewhere names too."""
    (order, value), (other_order, other_value) = _rank(v), _rank(than)
    return order > other_order or (order == other_order and value > other_value + _REL * abs(other_value))


def _short_vector(v: np.ndarray) -> str:
    if v.size <= 12:
        return "[" + ", ".join(f"{x:.6g}" for x in v) + "]"
    nz = np.flatnonzero(v)
    return "{" + ", ".join(f"{i}: {v[i]:.6g}" for i in nz[:12]) + (", …" if nz.size > 12 else "") + "}"


def _gauge_claim(law: GaugeLaw, space, vectors, privacy: Privacy, prefix: str) -> Check:
    claim = "privacy.second_route"
    if vectors is None:
        return not_available(claim, "the sensitivity space is too large to list its vectors")
    method = (f"{prefix}{law.description}: sup_y log f(y)/f(y − v) = ε‖v‖_K (triangle inequality, attained on "
              "the ray through v), ‖v‖_K from the law's own gauge (facets of K), at every listed difference")
    residual = law.residual(vectors)
    off = _support_check(residual, vectors)
    if off is not None:
        return Check(claim, method, False, f"refuted: the difference {vectors[off].tolist()} leaves the span")
    gauges = np.asarray(law.gauge(vectors), dtype=float)
    # the first of the differences tied at the largest gauge up to rounding (_REL), not whichever one the
    # last bits of this machine's BLAS make largest: the detail names it, and a verifier re-derives it
    k = int(np.flatnonzero(gauges >= gauges.max() * (1.0 - _REL))[0])
    eps = law.epsilon * float(gauges[k])
    p, definition = privacy.parameters, privacy.definition
    if definition in ("pure", "pdp"):
        target, quantity, value = p["epsilon"], "ε", eps
    elif definition == "approx":  # randomized response, the worst ε-DP pair (dpopt.privacy.pure_conversion)
        target = math.log(math.exp(p["epsilon"]) + p["delta"]) - math.log1p(-p["delta"])
        quantity, value = "ε vs log((e^ε + δ)/(1 − δ)) (ε-DP ⇒ (ε, δ): randomized response)", eps
    elif definition == "zcdp":
        target, quantity, value = p["rho"], "ρ = ε tanh(ε/2) (KL of randomized response)", eps * math.tanh(eps / 2.0)
    elif definition == "gdp":
        target = float(normal.log_ndtr(p["mu"] / 2.0) - normal.log_ndtr(-p["mu"] / 2.0))
        quantity = "ε vs log(Φ(μ/2)/Φ(−μ/2)) (ε-DP ⇒ μ-GDP)"
        value = eps
    else:
        return not_available(claim, f"no {definition} route for a K-norm density")
    status = "refuted" if value > target * (1 + _REL) + _ABS else ("confirmed" if value <= target else "consistent")
    verdict = Verdict(status, quantity, value, value, target, "evaluated in float64")
    return Check(claim, method, not verdict.refuted,
                 f"{verdict.text()}; worst difference {_short_vector(vectors[k])} (‖v‖_K = {gauges[k]:.12g})")


# --------------------------------------------------------------------- the sampler
def sampler_claim(law, mechanism: Mechanism, draws: int = SAMPLER_DRAWS, seed: int = SAMPLER_SEED) -> Check:
    """``privacy.second_route.sampler``: the mechanism's draws follow the law analysed."""
    claim = "privacy.second_route.sampler"
    if isinstance(law, PostProcessedLaw):
        law = law.inner
    draws = min(draws, max(2_000, 1_000_000 // max(1, law.dimension)))
    z = mechanism.sample(draws, np.random.default_rng(seed))
    if isinstance(law, GaugeLaw):
        from scipy import special  # imported where used (start-up of `dpopt verify`)

        residual = law.residual(z)
        g = np.asarray(law.gauge(z), dtype=float)
        p = _ks_continuous(g, lambda t: special.gammainc(law.rank, law.epsilon * t))
        tests, worst, what = 1, p, f"‖Z‖_K vs Gamma({law.rank}, rate ε)"
        scale = 1.0 / law.epsilon
    else:
        w, residual = law.coordinates(z)
        if law.projection:  # W is not a function of Z = P·W: its draws, and that the sampler's Z are their images
            w = mechanism.latent_sample(draws, np.random.default_rng(seed))
            residual = np.linalg.norm(z - w @ np.asarray(law.basis, dtype=float).T, axis=1)
        pvalues = [_ks_pvalue(w[:, k], m) for k, m in enumerate(law.marginals)]
        tests, k = len(pvalues), int(np.argmin(pvalues))
        worst, what = pvalues[k], f"coordinate {k} of the law vs {law.marginals[k]!r}"
        scale = max(m.scale for m in law.marginals)
    inside = float(np.nanmax(residual)) if residual.size else 0.0
    allowed = 1e-9 * max(1.0, scale) * math.sqrt(law.dimension)
    ok = worst >= SAMPLER_LEVEL / tests and inside <= allowed
    # the distance itself is rounding (its digits differ between BLAS builds): the detail states the bound it meets
    support = (f"every draw within {allowed:.3g} of the support" if inside <= allowed
               else f"a draw {inside:.3g} from the support, above the {allowed:.3g} allowed")
    return Check(
        claim,
        f"Kolmogorov–Smirnov tests of {draws} draws of the mechanism's sampler (seed {seed}) against the law "
        f"analysed by the second route, family-wise level {SAMPLER_LEVEL:g} (Bonferroni over {tests}; p-values "
        "bounded by the DKW–Massart inequality 2·exp(−2nD²)); every draw in the law's support",
        ok,
        f"smallest p-value ≤ {worst:.3g} ({what}); {support}",
    )


def _ks_pvalue(x: np.ndarray, marginal) -> float:
    """Kolmogorov–Smirnov p-value of the sample ``x`` against ``marginal``.

    A lattice law is compared at its support points, D = max_k |F̂(k) − F(k)|, with the
    continuous KS law of D (conservative for a discrete law: its p-values are too large,
    never too small; scipy's ``kstest`` mis-handles ties). Between consecutive distinct draws
    u < u′, F̂ is constant on u ≤ k < u′ and F increases, so the maximum is at k = u or k = u′ − 1:
    only those points are evaluated (twice the draws, not the range of the draws).
    """
    if not marginal.lattice:
        return _ks_continuous(x, marginal.cdf)
    if (x != np.round(x)).any():
        return 0.0
    values = np.unique(x)
    k = np.union1d(values, values[1:] - 1.0)
    empirical = np.searchsorted(np.sort(x), k, side="right") / x.size
    gap = float(np.max(np.abs(empirical - marginal.cdf(k))))
    gap = max(gap, float(marginal.cdf(k[0] - 1.0)), float(1.0 - marginal.cdf(k[-1])))
    return _ks_sf(gap, x.size)


def _ks_continuous(x: np.ndarray, cdf) -> float:
    r"""Two-sided Kolmogorov–Smirnov p-value of ``x`` against a continuous ``cdf``:
    D = max(D⁺, D⁻), D⁺ = max_i (i/n − F(x_(i))), D⁻ = max_i (F(x_(i)) − (i − 1)/n)."""
    f = np.asarray(cdf(np.sort(x)), dtype=float)
    n = f.size
    i = np.arange(1, n + 1)
    return _ks_sf(float(max(np.max(i / n - f), np.max(f - (i - 1) / n))), n)


def _ks_sf(gap: float, n: int) -> float:
    r"""A p-value for the two-sided KS statistic D_n of n draws: the Dvoretzky–Kiefer–Wolfowitz
    inequality with Massart's constant (Massart 1990), P(D_n > d) ≤ 2·exp(−2n d²), for every n
    (for a discrete law D_n is stochastically smaller, so it holds too). It is never below
    the exact p-value, so a rejection is a rejection of the exact test too; at the levels used
    here (10⁻⁶ with Bonferroni, n ≥ 2000) the D it rejects at is within 0.2% of the exact
    test's (``scipy.stats.kstwo``), and it costs O(1) where the exact law of D costs O(n)."""
    return float(min(1.0, 2.0 * math.exp(-2.0 * n * gap * gap)))


# ------------------------------------------------------------------ costs by integration
def utility_claim(law, spec: Spec, mechanism: Mechanism) -> Check:
    """``utility.integration``: the predicted cost by numerical integration of the law's marginals."""
    claim = "utility.integration"
    u = spec.utility
    if not isinstance(law, ProductLaw):
        return not_available(claim, "costs by integration are computed for product laws of additive noise only")
    if law.observed is not None and not np.all(law.observed):
        return not_available(claim, "some coordinates are not released")
    basis = np.eye(law.dimension) if law.basis is None else np.asarray(law.basis, dtype=float)
    cache: dict = {}

    def moment(m, p: float) -> float:
        if (m.key, p) not in cache:
            cache[(m.key, p)] = m.abs_moment(p)
        return cache[(m.key, p)]

    if u.metric == "l2":
        workload = workload_matrix(u)
        image = basis if workload is None else workload @ basis
        value = float(sum(moment(m, 2.0) * float(image[:, k] @ image[:, k]) for k, m in enumerate(law.marginals)))
        how = "E‖W·BW'‖² = Σ_k E W'_k² ‖W B e_k‖², E W'_k² = ∫ 2x·2P(W'_k > x) dx"
    elif u.metric == "max_variance":
        var = np.array([moment(m, 2.0) for m in law.marginals])
        value = float(((basis**2) @ var).max())
        how = "max_i Σ_k B_ik² E W_k²"
    elif u.metric in ("l1", "usefulness") and law.basis is None:
        if u.metric == "l1":
            value = float(sum(moment(m, 1.0) for m in law.marginals))
            how = "Σ_i E|W_i|, E|W| = ∫ 2P(W > x) dx"
        else:
            value = float(np.mean([m.within(u.gamma) for m in law.marginals]))
            how = "mean_i P(|W_i| ≤ γ) from the law's distribution function"
    else:
        return not_available(claim, f"no integration for the '{u.metric}' metric of this law")
    try:
        predicted = mechanism.expected_utility(u)
    except DpoptError as exc:
        return Check(claim, how, False, f"the predicted utility could not be recomputed: {exc}")
    if predicted.ci is not None:
        se = (predicted.ci[1] - predicted.ci[0]) / (2 * 1.96)
        ok = abs(value - predicted.value) <= 5 * se + 1e-9 * abs(value)
        against = f"Monte Carlo {predicted.value:.8g} ± {se:.2g} (SE), 5 SE allowed"
    else:
        ok = math.isclose(value, predicted.value, rel_tol=1e-6, abs_tol=1e-12)
        against = f"predicted {predicted.value:.12g} ({predicted.method}), relative 1e-6 allowed"
    return Check(claim, f"numerical integration of the noise law: {how}", ok, f"integrated {value:.12g}; {against}")


def second_route_claims(spec: Spec, space: SensitivitySpace, mechanism: Mechanism) -> list[Check]:
    """The three second-route checks for a certificate (each explicit when not available)."""
    try:
        law = noise_law_of(mechanism)
    except (AttributeError, TypeError, ValueError) as exc:
        reason = f"the noise law of {mechanism.family} could not be built ({type(exc).__name__}: {exc})"
        return [not_available(c, reason) for c in ("privacy.second_route", "privacy.second_route.sampler",
                                                   "utility.integration")]
    if isinstance(law, str):
        return [not_available(c, law) for c in ("privacy.second_route", "privacy.second_route.sampler",
                                                "utility.integration")]
    return [privacy_claim(law, space, spec.privacy), sampler_claim(law, mechanism), utility_claim(law, spec, mechanism)]


# ------------------------------------------------------------------ trade-off for the report
def mechanism_tradeoff(law, space: SensitivitySpace, alpha: np.ndarray) -> tuple[np.ndarray, str] | None:
    """A certified lower bound on the mechanism's trade-off curve at type-I errors ``alpha``.

    Product laws: for every checked pattern, the pessimistic PLD's profile δ̂(ε) on a grid of
    ε, turned into a curve by :func:`dpopt.privacy.pld.profile_tradeoff`; the pointwise
    minimum over patterns. Gauge laws: the ε-DP curve at ε = ε_law·max‖v‖_K. None when the
    law has no analysis or the space cannot be listed.
    """
    if isinstance(law, PostProcessedLaw):
        law = law.inner
    vectors = space.listed()
    if vectors is None:
        return None
    if isinstance(law, GaugeLaw):
        eps = law.epsilon * float(np.max(law.gauge(vectors)))
        return PureDPTradeOff(eps)(alpha), f"ε-DP curve at ε = ε·max‖v‖_K = {eps:.4g}"
    if not isinstance(law, ProductLaw) or law.lattice and law.basis is not None:
        return None
    patterns, _ = _patterns(law, vectors)
    if not patterns:
        return None
    curve = np.ones_like(np.asarray(alpha, dtype=float))
    for pattern in patterns:
        upper = pair_pld(law, pattern).upper
        top = min(max(upper.max_loss(), 1e-6), 60.0)
        eps = np.linspace(0.0, top, 400)
        curve = np.minimum(curve, profile_tradeoff(alpha, eps, upper.delta(eps)))
    return curve, (f"certified lower bound from the pessimistic privacy-loss distribution "
                   f"({len(patterns)} difference pattern(s))")
