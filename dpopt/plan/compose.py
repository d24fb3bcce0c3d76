r"""Composition of a plan's mechanisms under its target, exactly.

The queries of a plan are answered from the same records with independent noise, so the
plan's privacy is the composition of its mechanisms' (on the same neighbouring pair).

* **Additive targets** — ρ-zCDP: ρ = Σ ρ_i (Bun & Steinke 2016, Lemma 2.3); μ-GDP:
  μ² = Σ μ_i² (Dong, Roth & Su 2022, Cor. 3.3: G_a ⊗ G_b = G_√(a²+b²), and the tensor
  product is monotone, so a mechanism certified μ_i-GDP by its own trade-off bound —
  e.g. Laplace, whose exact curve is not Gaussian — composes the same way); pure ε:
  ε = Σ ε_i (basic composition, tight for pure DP in the worst case). Checked in exact
  rational arithmetic: the per-query targets at their binary values, the plan's target as the
  decimal written (0.3 is 3/10).
* **(ε, δ) targets** — the privacy-loss distribution of each mechanism's *dominating
  pair* (below) is computed with a rigorous bracket (:mod:`dpopt.privacy.pld`), the
  brackets are convolved (independent losses add) and δ(ε) is read on the pessimistic
  side: the composed guarantee is exact up to the loss grid (10⁻⁴ nats).

Dominating pair of one mechanism (a pair of output laws whose trade-off lies below that
of every neighbouring pair, so that its composition bounds the composition of any pairs;
Zhu, Dong & Wang 2022, Def. 7 and Thm. 10): for Gaussian noise N(0, Σ) on the span, the
whitened pair N(0, 1) vs N(s, 1) with s = max ‖Σ^{−1/2}v‖ (rotation invariance); for a
product of log-concave marginals whose listed differences reduce to one maximal shift
pattern (larger shifts are less private, :mod:`dpopt.certificate.second_route`), that
pattern; for i.i.d. Laplace(b) noise with several maximal patterns, the one-coordinate pair
Lap(0, b) vs Lap(Δ₁, b) with Δ₁ the largest ℓ1 difference (Zhu, Dong & Wang 2022, §5:
concentrating an ℓ1 shift on one coordinate is the worst case; checked numerically in the
tests). Other laws have no dominating pair here, and a plan with them needs an additive target.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from dpopt._lazy import lazy_module
from dpopt.certificate.second_route import _patterns, evaluate
from dpopt.core.checks import Check
from dpopt.core.decimals import float_below, written
from dpopt.core.roots import bisect_feasible
from dpopt.core.rows import row_groups
from dpopt.mechanisms import Mechanism
from dpopt.noise.gaussian import GaussianMarginal
from dpopt.noise.laplace import LaplaceMarginal
from dpopt.noise.law import PostProcessedLaw, ProductLaw
from dpopt.privacy.gaussian import gaussian_delta_mp, gaussian_epsilon
from dpopt.privacy.pld import DEFAULT_STEP, PLDBracket, marginal_pld, product_pld
from dpopt.privacy.zcdp import zcdp_epsilon_cks
from dpopt.sensitivity.space import SensitivitySpace
from dpopt.spec.models import Privacy

mpmath = lazy_module("mpmath")

ADDITIVE = {"zcdp": "rho", "gdp": "mu", "pure": "epsilon"}
"""Targets that compose by adding a currency: ρ, μ² and ε."""

STEP = DEFAULT_STEP
"""Loss grid of the composed PLD, in nats (one grid for every mechanism of the plan)."""


def currency(definition: str, parameters: dict) -> Fraction:
    """The additive currency of a target, exactly: ρ, μ², ε (μ² for the GDP design of (ε, δ)), each
    number at the decimal it is read as (:func:`dpopt.core.decimals.written`; a computed per-query target at its
    repr), as each query's mechanism is certified against that decimal."""
    if definition in ("gdp", "approx") and "mu" in parameters:
        return written(parameters["mu"]) ** 2
    return written(parameters[ADDITIVE[definition]])


def written_currency(definition: str, parameters: dict) -> Fraction:
    """The additive currency of a target a person wrote, on the decimals written
    (:func:`dpopt.core.decimals.written`): the budget the per-query targets (:func:`currency`) must fit."""
    value = written(parameters[ADDITIVE[definition]])
    return value * value if definition == "gdp" else value


def share_target(definition: str, total: float, share: float) -> dict:
    """The per-query target holding ``share`` of the currency ``total`` (in the target's own units)."""
    if definition in ("gdp", "approx"):
        return {"gdp": {"mu": total * math.sqrt(share)}}
    return {definition: {ADDITIVE[definition]: total * share}}


def fit_targets(definition: str, total: float, shares: list[float]) -> list[dict]:
    """Per-query targets for ``shares`` whose currencies sum to at most the budget, exactly.

    Floating-point rounding can make Σ currency exceed the budget by an ulp; the shares are
    then scaled down by 1 − 10⁻¹² until the exact rational sum fits (the budget of an additive
    target as written, :func:`written_currency`).
    """
    budget = (currency("gdp", {"mu": total}) if definition == "approx"  # a computed μ, at its repr
              else written_currency(definition, {ADDITIVE[definition]: total}))  # the plan's target as written
    scale = 1.0
    while True:
        targets = [share_target(definition, total, s * scale) for s in shares]
        spent = sum(currency(*next(iter(t.items()))) for t in targets)
        if spent <= budget:
            return targets
        scale *= 1.0 - 1e-12


def additive_check(privacy: Privacy, targets: list[Privacy], names: list[str]) -> Check:
    """``composition``: Σ currency_i ≤ budget in exact rational arithmetic (module docstring)."""
    definition = privacy.definition
    budget = written_currency(definition, privacy.parameters)
    spent = [currency(t.definition, t.parameters) for t in targets]
    total = sum(spent, Fraction(0))
    unit = {"zcdp": "ρ", "gdp": "μ²", "pure": "ε"}[definition]
    rule = {"zcdp": "ρ = Σ ρ_i (Bun & Steinke 2016, Lemma 2.3)",
            "gdp": "μ² = Σ μ_i² (Dong, Roth & Su 2022, Cor. 3.3)",
            "pure": "ε = Σ ε_i (basic composition)"}[definition]
    wrong = [n for n, t in zip(names, targets) if t.definition != definition]
    ok = total <= budget and not wrong
    detail = (f"Σ {unit}_i = {float(total):.12g} ≤ {float(budget):.12g}" if ok else
              f"queries {wrong} are not certified under {definition}" if wrong else
              f"Σ {unit}_i = {float(total):.12g} exceeds the budget {float(budget):.12g}")
    return Check("composition", f"{rule}, exact rational arithmetic on the per-query targets", ok, detail)


@dataclass(frozen=True)
class ProductPair:
    """A non-Gaussian dominating pair: independent coordinates ``marginals`` shifted by ``shifts``."""

    marginals: tuple
    shifts: tuple

    @property
    def spread(self) -> float:
        """Σ |t_k| / scale_k, the loss scale (sets the grid)."""
        return float(sum(abs(t) / m.scale for t, m in zip(self.shifts, self.marginals)))


def gdp_route_check(privacy: Privacy, targets: list[Privacy], names: list[str]) -> Check:
    """``composition.gdp`` for an (ε, δ) plan designed in μ-GDP: the queries' μ_i-GDP compose to
    μ = √(Σμ_i²)-GDP (Dong, Roth & Su 2022, Cor. 3.3), which is (ε, δ_μ(ε))-DP (Cor. 2.13);
    δ_μ(ε) ≤ δ is evaluated in 60-digit arithmetic at Σμ_i² taken exactly."""
    eps, delta = privacy.parameters["epsilon"], privacy.parameters["delta"]
    wrong = [n for n, t in zip(names, targets) if t.definition != "gdp"]
    total = sum((written(t.parameters["mu"]) ** 2 for t in targets if t.definition == "gdp"), Fraction(0))
    with mpmath.workdps(60):
        mu = mpmath.sqrt(mpmath.mpf(total.numerator) / total.denominator)
        achieved = gaussian_delta_mp(float_below(eps), mu)
    ok = not wrong and achieved <= float_below(delta)
    return Check("composition.gdp", "μ = √(Σ μ_i²) (Dong, Roth & Su 2022, Cor. 3.3), then the exact μ-GDP "
                                    "(ε, δ) profile (Cor. 2.13) in 60-digit arithmetic", ok,
                 f"queries {wrong} are not certified under gdp" if wrong else
                 f"μ = {float(mu):.12g}: δ(ε={eps:g}) = {float(achieved):.6g} vs {delta:g}")


DISTINCT_FROM = 1_000
"""Listed differences above which :func:`dominating_pair` works on the distinct ones (the census plan's Semi-DP space
listed 538,571 moves of 15 cells, 471 distinct, before it kept only its distinct vectors)."""


def dominating_pair(mechanism: Mechanism, space: SensitivitySpace) -> float | ProductPair | str:
    """The mechanism's dominating pair (module docstring): the whitened shift s of N(0, 1) vs
    N(s, 1) for Gaussian noise (a float), else the product pair, or the reason there is none."""
    law = mechanism.noise_law()
    if isinstance(law, PostProcessedLaw):
        law = law.inner
    if not isinstance(law, ProductLaw):
        return f"{mechanism.family}: no dominating pair for a noise law of type {type(law).__name__}"
    vectors = space.listed()
    if vectors is None:
        return f"{mechanism.family}: the sensitivity space is too large to list its differences"
    if vectors.shape[0] > DISTINCT_FROM:  # every use below is a maximum or a first maximiser over the rows
        first, _ = row_groups(np.asarray(vectors, dtype=float) + 0.0)
        vectors = vectors[np.sort(first)]  # each distinct row at its first occurrence, in their order
    _, residual = law.coordinates(vectors)
    if (residual > 1e-9 * np.maximum(1.0, np.abs(vectors).max(axis=1))).any():
        return f"{mechanism.family}: a difference leaves the noise's support"
    patterns, _ = _patterns(law, vectors)
    if not patterns:
        return 0.0
    if law.gaussian:
        return float(patterns[0].shifts[0])
    if len(patterns) == 1 and all(m.log_concave for m in law.marginals):
        return ProductPair(tuple(law.marginals), tuple(float(t) for t in patterns[0].shifts))
    scales = {m.b for m in law.marginals if isinstance(m, LaplaceMarginal)}
    if len(scales) == 1 and all(isinstance(m, LaplaceMarginal) for m in law.marginals) and law.basis is None:
        w, _ = law.coordinates(vectors)
        return ProductPair((LaplaceMarginal(scales.pop()),), (float(np.abs(w).sum(axis=1).max()),))
    return (f"{mechanism.family}: {len(patterns)} maximal shift patterns and no dominating pair "
            "(use a gdp, zcdp or pure target)")


def composed_pld(pairs: list[float | ProductPair], step: float | None = None) -> PLDBracket:
    """The bracket of the composition of dominating pairs: the Gaussian ones first, exactly
    (N(0,1) vs N(s_k,1) compose to N(0,1) vs N(√Σs_k², 1): the losses are independent normals
    whose means and variances add), then the losses of the others added by convolution. The
    grid is :data:`STEP` nats times the loss scale (at least 1), so that its length stays bounded."""
    gaussian = math.sqrt(sum(p * p for p in pairs if isinstance(p, float)))
    products = [p for p in pairs if isinstance(p, ProductPair)]
    if step is None:
        step = STEP * max(1.0, gaussian + sum(p.spread for p in products))
    brackets = [product_pld(p.marginals, p.shifts, step) for p in products]
    if gaussian > 0 or not brackets:
        brackets.insert(0, marginal_pld(GaussianMarginal(1.0), gaussian, step))
    total = brackets[0]
    for b in brackets[1:]:
        total = total.compose(b)  # on the coarser grid of the two (DiscretePLD.compose)
    return total


def epsilon_at(bracket: PLDBracket, delta: float) -> tuple[float, float]:
    """(optimistic, pessimistic) ε at which δ(ε) = ``delta`` on each side (bisection on the
    non-increasing δ(ε), to 10⁻¹⁰ nats)."""
    def solve(side) -> float:
        lo, hi = 0.0, 1.0
        while float(side.delta(hi)[0]) > delta:
            lo, hi = hi, 2.0 * hi
            if hi > 1e4:
                return math.inf
        return bisect_feasible(lambda eps: float(side.delta(eps)[0]) <= delta, lo, hi, atol=1e-10)
    return solve(bracket.lower), solve(bracket.upper)


def composed_epsilon(pairs: list[float | PLDBracket], delta: float) -> tuple[float, float, str]:
    """(lower, upper, method) bounds on the composed ε at ``delta``: exact when every pair is
    Gaussian (μ = √Σs_k², ε from the exact μ-GDP profile, Balle & Wang 2018 / Dong, Roth & Su
    2022, Cor. 2.13), else read on both sides of the composed PLD bracket."""
    if all(isinstance(p, float) for p in pairs):
        mu = math.sqrt(sum(p * p for p in pairs))
        eps = gaussian_epsilon(delta, mu)
        return eps, eps, f"exact: Gaussian pairs compose to μ = {mu:.12g}"
    lo, hi = epsilon_at(composed_pld(pairs), delta)
    return lo, hi, "composed PLD bracket"


def pld_check(mechanisms: list[Mechanism], spaces: list[SensitivitySpace], privacy: Privacy,
              claim: str = "composition.pld") -> Check:
    """The plan's target evaluated on the composed PLD of the dominating pairs.

    Passes when the optimistic side does not refute the target (``confirmed`` when the
    pessimistic side meets it, ``consistent`` within the grid's resolution); a mechanism
    with no dominating pair makes the check unavailable (it passes and says so).
    """
    method = ("privacy-loss distributions of each mechanism's dominating pair, composed by convolution "
              f"(pessimistic/optimistic bracket, grid {STEP:g} nats × the loss scale, dpopt.privacy.pld)")
    pairs = []
    for mechanism, space in zip(mechanisms, spaces):
        pair = dominating_pair(mechanism, space)
        if isinstance(pair, str):
            return Check(claim, "second route not available", True, pair)
        pairs.append(pair)
    bracket = composed_pld(pairs)
    verdict = evaluate(bracket, privacy)
    detail = verdict.text()
    if privacy.definition == "approx":
        lo, hi, how = composed_epsilon(pairs, privacy.parameters["delta"])
        detail += f"; composed ε at δ = {privacy.parameters['delta']:g}: [{lo:.10g}, {hi:.10g}] ({how})"
    return Check(claim, method, not verdict.refuted, detail)


def epsilon_per_delta(mechanisms: list[Mechanism], spaces: list[SensitivitySpace], deltas,
                      rho: float | None = None) -> dict:
    """The composed ε at each δ of ``deltas`` (``{"epsilon_at_delta", "epsilon_method"}``): exact when every
    dominating pair is Gaussian, else the pessimistic side of the composed PLD bracket (an upper bound, to the
    loss grid), :func:`composed_epsilon`. When a mechanism has no dominating pair (a lattice measurement,
    :mod:`dpopt.mechanisms.lattice`): the CKS conversion (Prop. 12) of the plan's ρ-zCDP guarantee ``rho``
    when it has one, else None with the reason."""
    pairs = []
    for mechanism, space in zip(mechanisms, spaces):
        pair = dominating_pair(mechanism, space)
        if isinstance(pair, str) and rho is not None:
            return {"epsilon_at_delta": {f"{d:g}": zcdp_epsilon_cks(d, rho)[0] for d in deltas},
                    "epsilon_method": f"the plan's ρ-zCDP guarantee (ρ = {rho:g}) by the CKS conversion (Canonne, "
                                      f"Kamath & Steinke 2020, Prop. 12): {pair}"}
        if isinstance(pair, str):
            return {"epsilon_at_delta": None, "epsilon_method": f"not stated: {pair}"}
        pairs.append(pair)
    if all(isinstance(p, float) for p in pairs):
        found = {f"{d:g}": composed_epsilon(pairs, d) for d in deltas}
        return {"epsilon_at_delta": {d: hi for d, (_, hi, _) in found.items()},
                "epsilon_method": next(iter(found.values()))[2]}
    bracket = composed_pld(pairs)  # composed once, read at every δ
    upper = {f"{d:g}": epsilon_at(bracket, d)[1] for d in deltas}
    return {"epsilon_at_delta": {d: e if math.isfinite(e) else None for d, e in upper.items()},
            "epsilon_method": "composed PLD bracket of the dominating pairs, pessimistic side (an upper bound, to the "
                              "loss grid)"}
