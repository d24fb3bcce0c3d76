r"""What a sequence of releases from one data set spends, under the ledger's budget.

Every release recorded in a ledger is one certified guarantee on the same records; the
releases use independent noise, so their joint output meets the composition of the
guarantees, on the neighbouring datasets every release's scope covers (one neighbouring
relation per ledger; with invariants, the datasets that agree on all of them). Each release contributes its **whole-release** guarantee (the ``groups``
composition of a grouped release, the plan's target for a plan), and the composition is
evaluated in the budget's definition:

* **ρ-zCDP budget** — ρ = Σ ρ_i (Bun & Steinke 2016, Lemma 2.3), exact rational sum;
  a μ-GDP release counts μ²/2 (its pair of output laws is a post-processing of the Gaussian
  pair N(0, 1) vs N(μ, 1) by Blackwell's theorem, as Dong, Roth & Su 2022 state it for
  trade-off functions, and Rényi divergences do not grow under post-processing:
  D_α ≤ αμ²/2, tight for Gaussian noise); a pure ε-DP release counts ε²/2 (Bun & Steinke
  2016, Prop. 1.4).
* **μ-GDP budget** — μ² = Σ μ_i² (Dong, Roth & Su 2022, Cor. 3.3), exact rational sum;
  a pure ε-DP release counts μ_ε² with μ_ε = 2Φ⁻¹(e^ε/(1 + e^ε)), the smallest μ with
  f_{ε,0} ≥ G_μ (derivation: G_μ is convex, equals f_{ε,0} at α = 0, 1 and, for this μ, at
  the kink α* = 1/(1 + e^ε) of f_{ε,0}, so it lies below both chords that make up f_{ε,0};
  a smaller μ puts G_μ(α*) above α*). μ_ε is evaluated in 50 digits and rounded up.
* **pure ε budget** — ε = Σ ε_i (basic composition, tight in the worst case).
* **(ε, δ) budget** — δ(ε) of the composition, by the tightest of the valid routes: the
  **basic route** when every release is pure or (ε, δ) — (Σε_i, Σδ_i)-DP (Dwork & Roth 2014,
  Thm. 3.16), exact on the decimals written, so that releases adding up to the budget fit it;
  the **PLD route** (:mod:`dpopt.plan.compose`, :mod:`dpopt.privacy.pld`): every guarantee is
  replaced by its dominating pair — N(0, 1) vs N(μ, 1) for μ-GDP, randomised response
  (losses ±ε) for pure ε-DP, the four-point pair on which Kairouz, Oh & Viswanath (2015)
  prove their composition theorem (loss +∞ with probability δ, ±ε otherwise) for (ε, δ)-DP — the Gaussian pairs are composed
  exactly, the others by convolution of their pessimistic PLDs, and δ(ε) is read on the
  pessimistic side (exact for Gaussian pairs alone: the μ-GDP profile in 60 digits);
  the **zCDP route** when no release is (ε, δ): ρ as for a zCDP budget, then δ(ε) by the
  conversion of Canonne, Kamath & Steinke (2020, Prop. 12); and, with zCDP releases among
  others, the **mixed route**: the zCDP releases' ρ = Σρ_i as one (ε_z, δ_z)-DP guarantee (CKS),
  δ_z a share of the budget's δ (the best of :data:`MIXED_SHARES`), in the PLD route.

**Numbers as written.** Every parameter (the budget's and the releases') counts as the decimal
it spells (:func:`dpopt.core.decimals.written`: a float at its repr), so three releases at
ρ = 0.1 spend exactly ρ = 0.3. The additive sums are exact on those decimals; where a route
computes in floats (the PLD, CKS and the pure → GDP conversion), every release parameter
enters rounded **up** to a float and the budget's ε rounded **down** (a release counted as
less private, δ read at a smaller ε: both can only overstate what is spent), and the spent δ
(an upper bound) is compared exactly with the budget's decimal δ.

**Group privacy.** A release whose privacy unit is a row, charged to a ledger that protects
persons with at most k rows each (:mod:`dpopt.ledger.store`), is charged at its cost for
groups of k rows: ε → kε (pure), ρ → k²ρ (zCDP; Bun & Steinke 2016, Prop. 1.9), μ → kμ
(GDP; Dong, Roth & Su 2022, G_μ^∘k = G_kμ), (ε, δ) → (kε, δ(e^{kε} − 1)/(e^ε − 1))
(Vadhan 2017, Lemma 2.2 summed as a geometric series: the bound
:func:`dpopt.privacy.semi_dp.semi_dp_from_dp` uses, here in 50 digits rounded up); pDP has no
group conversion and is refused. The additive ones are exact.

Conversions that do not exist are refused, naming the release: nothing converts (ε, δ)
or (ε, δ)-pDP to zCDP, GDP or pure ε, nor zCDP to GDP or pure ε; pDP releases are not
composed under an (ε, δ) budget either.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from dpopt._lazy import lazy_module
from dpopt.core.decimals import float_written_above, written
from dpopt.core.rounding import nudge_until
from dpopt.errors import UnsupportedSpecError
from dpopt.plan.compose import composed_pld, epsilon_at
from dpopt.privacy.gaussian import gaussian_delta_mp, gaussian_epsilon
from dpopt.privacy.pld import DiscretePLD, PLDBracket
from dpopt.privacy.pure_conversion import pure_gdp_mu
from dpopt.privacy.zcdp import zcdp_delta_cks, zcdp_epsilon_cks

mpmath = lazy_module("mpmath")

BUDGETS = ("zcdp", "gdp", "pure", "approx")
"""Definitions a ledger's budget may be given in."""

PARAMETERS = {"zcdp": ("rho",), "gdp": ("mu",), "pure": ("epsilon",), "approx": ("epsilon", "delta"),
              "pdp": ("epsilon", "delta")}
"""The parameters of each definition, as certificates name them."""

CURRENCY = {"zcdp": "rho", "gdp": "mu_squared", "pure": "epsilon"}
"""The additive currency of each additive budget (μ² for GDP)."""

RULES = {
    "zcdp": "ρ = Σ ρ_i (Bun & Steinke 2016, Lemma 2.3), exact rational sum; μ-GDP counts μ²/2, pure ε counts ε²/2",
    "gdp": "μ² = Σ μ_i² (Dong, Roth & Su 2022, Cor. 3.3), exact rational sum; pure ε counts (2Φ⁻¹(e^ε/(1+e^ε)))²",
    "pure": "ε = Σ ε_i (basic composition), exact rational sum",
    "approx": "δ(ε) of the composition: basic composition (Σε_i, Σδ_i) exact on the decimals, or the "
              "PLD of the dominating pairs (μ-GDP: Gaussian; ε: randomised response; "
              "(ε, δ): Kairouz–Oh–Viswanath; zCDP: one (ε, δ) pair by Canonne–Kamath–Steinke) or, without "
              "(ε, δ) releases, ρ-zCDP then Canonne–Kamath–Steinke Prop. 12; the tightest",
}
"""How each budget composes, as the ledger states it."""


def release_guarantee(certificate: dict) -> dict:
    """The guarantee of a whole release: ``{definition, parameters...}``.

    A grouped release's is the composition over the groups one record touches (its
    ``groups.composition``); otherwise the certificate's ``guarantee``.
    """
    block = (certificate.get("groups") or {}).get("composition") or certificate["guarantee"]
    definition = block["definition"]
    return {"definition": definition, **{name: float(block[name]) for name in PARAMETERS[definition]}}


def float_up(value: Fraction) -> float:
    """The smallest float ≥ ``value``."""
    f = float(value)
    return f if Fraction(f) >= value else math.nextafter(f, math.inf)


def float_down(value: Fraction) -> float:
    """The largest float ≤ ``value``."""
    f = float(value)
    return f if Fraction(f) <= value else math.nextafter(f, -math.inf)


def group_guarantee(guarantee: dict, group: int, name: str = "the release") -> dict:
    """The guarantee ``guarantee`` gives groups of ``group`` records (module docstring), its
    parameters as floats rounded up (``group`` = 1: the parameters rounded up, unchanged).

    Raises
    ------
    UnsupportedSpecError
        A pDP guarantee with ``group`` > 1 (no group conversion).
    """
    definition, k = guarantee["definition"], group
    if definition == "pdp" and k > 1:
        raise UnsupportedSpecError("--ledger", f"{name} is certified under pdp, which has no group-privacy "
                                               "conversion: it cannot be charged at the cost of a person's rows")
    if definition == "approx" and k > 1:
        eps, delta = written(guarantee["epsilon"]), written(guarantee["delta"])
        with mpmath.workdps(50):
            e = mpmath.mpf(eps.numerator) / eps.denominator
            factor = mpmath.expm1(k * e) / mpmath.expm1(e)
            grouped = factor * mpmath.mpf(delta.numerator) / delta.denominator
            up = nudge_until(float(grouped), lambda v: mpmath.mpf(v) >= grouped, up=True)
        return {"definition": "approx", "epsilon": float_up(k * eps), "delta": min(1.0, up)}
    scale = {"zcdp": k * k, "gdp": k, "pure": k, "approx": 1, "pdp": 1}[definition]
    return {"definition": definition, **{key: float_up(scale * written(guarantee[key]))
                                         for key in PARAMETERS[definition]}}


def currency(budget: str, guarantee: dict, name: str = "the release", group: int = 1) -> Fraction:
    """What one guarantee spends of an additive budget (ρ, μ² or ε), exactly on its decimals, for
    groups of ``group`` records (module docstring).

    Raises
    ------
    UnsupportedSpecError
        No valid conversion from the guarantee's definition to the budget's.
    """
    definition = guarantee["definition"]
    if definition == budget:
        value = group * written(guarantee[PARAMETERS[budget][0]]) if budget != "zcdp" else \
            group * group * written(guarantee["rho"])
        return value * value if budget == "gdp" else value
    if budget == "zcdp" and definition in ("gdp", "pure"):
        value = group * written(guarantee["mu" if definition == "gdp" else "epsilon"])
        return value * value / 2
    if budget == "gdp" and definition == "pure":
        return Fraction(pure_gdp_mu(float_up(group * written(guarantee["epsilon"])))) ** 2
    raise UnsupportedSpecError("--ledger", f"{name} is certified under {definition}, which does not convert "
                                           f"to the ledger's {budget} budget (no valid conversion)")


@dataclass(frozen=True)
class Spending:
    """The composition of the recorded releases under a budget.

    Attributes
    ----------
    budget : dict
        ``{definition, parameters...}``.
    spent : dict
        Additive budgets: ``{currency: Fraction}``; (ε, δ): ``{"delta": δ(ε_budget), "epsilon": ε(δ_budget)}``.
    within : bool
        The composition meets the budget.
    method : str
        The rule and the route used.
    """

    budget: dict
    spent: dict
    within: bool
    method: str

    @property
    def remaining(self) -> dict:
        """What is left: the currency (and, for GDP, μ = √(μ² left)); δ at ε_budget for (ε, δ)."""
        definition = self.budget["definition"]
        if definition == "approx":
            return {"delta": float_down(max(Fraction(0), written(self.budget["delta"]) - Fraction(self.spent["delta"])))}
        key = CURRENCY[definition]
        total = written(self.budget[PARAMETERS[definition][0]])
        left = max(Fraction(0), (total * total if definition == "gdp" else total) - self.spent[key])
        return {key: left} | ({"mu": math.sqrt(left)} if definition == "gdp" else {})  # μ shown, not compared

    def to_dict(self) -> dict:
        """JSON: each Fraction as ``{"value": float, "exact": "p/q"}``."""
        def plain(values: dict) -> dict:
            return {k: {"value": float(v), "exact": str(v)} if isinstance(v, Fraction) else v
                    for k, v in values.items()}
        return {"budget": self.budget, "spent": plain(self.spent), "remaining": plain(self.remaining),
                "within_budget": self.within, "method": self.method}


def spending(budget: dict, guarantees: list[dict], names: list[str] | None = None,
             groups: list[int] | None = None) -> Spending:
    """Compose ``guarantees`` under ``budget`` (module docstring), each for groups of ``groups[i]``
    records (default 1: the release's own unit).

    Raises
    ------
    UnsupportedSpecError
        A guarantee has no valid conversion to the budget's definition.
    """
    names = names or [f"release {i + 1}" for i in range(len(guarantees))]
    groups = groups or [1] * len(guarantees)
    definition = budget["definition"]
    if definition != "approx":
        key = CURRENCY[definition]
        total = sum((currency(definition, g, n, k) for g, n, k in zip(guarantees, names, groups)), Fraction(0))
        limit = written(budget[PARAMETERS[definition][0]])
        limit = limit * limit if definition == "gdp" else limit
        return Spending(budget, {key: total}, total <= limit, RULES[definition])
    rounded = [group_guarantee(g, k, n) for g, n, k in zip(guarantees, names, groups)]
    return _approx_spending(budget, rounded, names, _basic_sums(guarantees, groups, rounded))


def _basic_sums(guarantees: list[dict], groups: list[int], rounded: list[dict]) -> tuple[Fraction, Fraction] | None:
    """(Σ ε_i, Σ δ_i) of pure and (ε, δ) guarantees, exact on the decimals written (kε for groups of k; a
    group's δ, which is not a decimal, at the binary value of its rounded-up float); None with others."""
    eps = delta = Fraction(0)
    for g, k, r in zip(guarantees, groups, rounded):
        if g["definition"] not in ("pure", "approx"):
            return None
        eps += k * written(g["epsilon"])
        if g["definition"] == "approx":
            delta += written(g["delta"]) if k == 1 else Fraction(r["delta"])
    return eps, delta


def _approx_spending(budget: dict, guarantees: list[dict], names: list[str],
                     basic: tuple[Fraction, Fraction] | None = None) -> Spending:
    """``guarantees`` already rounded up (:func:`group_guarantee`); ε of the budget rounded down, its δ exact.
    ``basic``: (Σ ε_i, Σ δ_i) exact, for the basic-composition route (Dwork & Roth 2014, Thm. 3.16:
    (Σε_i, Σδ_i)-DP), compared exactly with the budget's decimals; the composition is within the budget
    when any valid route shows it."""
    eps, delta = float_down(written(budget["epsilon"])), float_down(written(budget["delta"]))
    kinds = {g["definition"] for g in guarantees}
    refused = [n for g, n in zip(guarantees, names) if g["definition"] == "pdp"]
    if refused:
        raise UnsupportedSpecError("--ledger", f"{refused[0]} is certified under pdp: no valid composition "
                                               "under an (ε, δ) budget is implemented")
    routes = []
    basic_holds = False
    if basic is not None and guarantees and basic[0] <= written(budget["epsilon"]):
        basic_holds = basic[1] <= written(budget["delta"])
        routes.append(({"delta": float_written_above(basic[1]),
                        "epsilon": float_written_above(basic[0]) if basic_holds else math.nan},
                       f"basic composition: ε = Σ ε_i = {float(basic[0]):.12g}, δ = Σ δ_i = {float(basic[1]):.6g}, "
                       "exact on the decimals written"))
    if "zcdp" not in kinds:
        routes.append(_pld_route(guarantees, eps, delta))
    if "approx" not in kinds:
        rho = _rho_above(guarantees)
        spent_delta = zcdp_delta_cks(eps, rho) if rho > 0 else 0.0
        routes.append(({"delta": spent_delta, "epsilon": zcdp_epsilon_cks(delta, rho)[0] if rho > 0 else 0.0},
                       f"zCDP route: ρ = {rho:.12g}, then Canonne–Kamath–Steinke 2020, Prop. 12"))
    if "zcdp" in kinds and kinds != {"zcdp"}:
        routes.append(_mixed_route(guarantees, eps, delta))
    spent, how = min(routes, key=lambda route: route[0]["delta"])  # the basic route first among equals
    within = basic_holds or Fraction(spent["delta"]) <= written(budget["delta"])
    return Spending(budget, spent, within, f"{RULES['approx']}; used: {how}")


def _rho_above(guarantees: list[dict]) -> float:
    """Σ ρ_i of the guarantees (floats already rounded up) converted to zCDP (module docstring), exact on
    their binary values, rounded up to a float."""
    def rho(g: dict) -> Fraction:
        if g["definition"] == "zcdp":
            return Fraction(g["rho"])
        return Fraction(g["mu" if g["definition"] == "gdp" else "epsilon"]) ** 2 / 2

    exact = sum((rho(g) for g in guarantees), Fraction(0))
    return float_up(exact)


MIXED_SHARES = (0.01, 0.05, 0.1, 0.25, 0.5)
"""Shares of the budget's δ tried for the zCDP releases' (ε_z, δ_z) pair in the mixed route."""


def _mixed_route(guarantees: list[dict], eps: float, delta: float) -> tuple[dict, str]:
    """The zCDP releases composed (ρ = Σρ_i) and replaced by one (ε_z, δ_z)-DP guarantee that ρ-zCDP
    implies (Canonne, Kamath & Steinke 2020, Prop. 12), δ_z = s·δ for each s of :data:`MIXED_SHARES`;
    that guarantee's dominating pair then joins the others' in the PLD route; the smallest δ(ε) is kept
    (each is valid)."""
    rho = _rho_above([g for g in guarantees if g["definition"] == "zcdp"])
    others = [g for g in guarantees if g["definition"] != "zcdp"]
    pairs = [{"definition": "approx", "epsilon": zcdp_epsilon_cks(s * delta, rho)[0], "delta": s * delta}
             for s in MIXED_SHARES]
    best = min(pairs, key=lambda pair: _pld_route(others + [pair], eps, delta, with_epsilon=False)[0]["delta"])
    spent, how = _pld_route(others + [best], eps, delta)
    return spent, (f"mixed route: the zCDP releases (ρ = {rho:.12g}) as one ({best['epsilon']:.6g}, "
                   f"{best['delta']:.3g})-DP pair (CKS), then {how}")


def _discrete_pair(epsilon: float, delta: float, upper_step: float, lower_step: float) -> PLDBracket:
    """The PLD bracket of the (ε, δ) dominating pair (δ = 0: randomised response): loss +ε with
    probability (1−δ)e^ε/(1+e^ε), −ε with (1−δ)/(1+e^ε), +∞ with δ (Kairouz, Oh & Viswanath
    2015). The optimistic side puts the +∞ atom at ε (a lower bound on the loss)."""
    p = (1.0 - delta) / (1.0 + math.exp(-epsilon))
    q = (1.0 - delta) - p
    upper = DiscretePLD.from_losses([epsilon, -epsilon], [p, q], upper_step, up=True, plus_infinity=delta)
    lower = DiscretePLD.from_losses([epsilon, -epsilon, epsilon], [p, q, delta], lower_step, up=False)
    return PLDBracket(upper, lower)


def _pld_route(guarantees: list[dict], eps: float, delta: float, with_epsilon: bool = True) -> tuple[dict, str]:
    """(spent, method) of the PLD route: δ at ε_budget and (``with_epsilon``) ε at δ_budget, pessimistic side."""
    gaussian = [g["mu"] for g in guarantees if g["definition"] == "gdp"]
    others = [g for g in guarantees if g["definition"] in ("pure", "approx")]
    if not others:
        squared = sum((Fraction(m) ** 2 for m in gaussian), Fraction(0))  # floats already rounded up
        if squared == 0:
            return {"delta": 0.0, "epsilon": 0.0}, "PLD route: nothing spent"
        with mpmath.workdps(60):
            mu = mpmath.sqrt(mpmath.mpf(squared.numerator) / squared.denominator)
            exact = float(gaussian_delta_mp(eps, mu))
        return ({"delta": exact, "epsilon": gaussian_epsilon(delta, float(mu))},
                f"PLD route: Gaussian pairs compose to μ = {float(mu):.12g}, δ from the exact μ-GDP profile "
                "(60 digits)")
    bracket = composed_pld([float(m) for m in gaussian])
    for g in others:
        bracket = bracket.compose(_discrete_pair(g["epsilon"], g.get("delta", 0.0),
                                                 bracket.upper.step, bracket.lower.step))
    spent_delta = min(1.0, float(bracket.upper.delta(eps)[0]))
    return ({"delta": spent_delta, "epsilon": epsilon_at(bracket, delta)[1] if with_epsilon else math.nan},
            f"PLD route: pessimistic composed PLD, grid {bracket.upper.step:.3g} nats")
