r"""Semi-DP guarantees (Cho & Awan 2024): conversion, composition, and the certificate scope.

A mechanism is (D, A, f)-DP when T(M(X), M(X')) ≥ f for all A-adjacent X, X' of the
dataspace D. With invariants T(X) = t published, only the conforming datasets D_t can be
protected from each other; the semi-adjacency A_a links X, X' ∈ D_t with d(X, X') ≤ a,
and a release is f-Semi-DP when M is (D_t, A_a, f)-DP (Def. 12) with a ≥ a(t) (Def. 13).

* **Proposition 15**: a (D, A_1, f)-DP mechanism is (D_t, A_{a(t)}, f^{∘a(t)})-DP. In
  the paper's convention (α = 1 − type-I error) f^{∘a} is a functional power; in the
  type-I convention of :mod:`dpopt.privacy.tradeoff` it is 1 − (1 − f)^{∘a}, i.e.
  :func:`~dpopt.privacy.tradeoff.group_privacy` (the same curve, reflected). Closed
  forms: G_μ → G_{aμ}; ρ-zCDP → a²ρ-zCDP (Lemma 39); ε-DP → f_ε^{∘a} ≥ f_{aε} (not equal:
  the power has three pieces); (ε, δ) → (aε, δ(e^{aε} − 1)/(e^ε − 1)) (a lower bound
  of f_{ε,δ}^{∘a}, Dong, Roth & Su 2022, Thm 2.14 with the (ε, δ) group bound).
* **Proposition 21** (composition): "Semi-DP first" f_1^{∘a} ⊗ … ⊗ f_k^{∘a} dominates
  "composition first" (f_1 ⊗ … ⊗ f_k)^{∘a}; for GDP both are G_{a√Σμ_i²}, for zCDP
  both a²Σρ_i. Pure and (ε, δ) compositions are given by basic composition (a bound).
* ρ-zCDP → (ε, δ): the certificate's headline is the CKS conversion (Canonne, Kamath &
  Steinke 2020, Prop. 12), the tightest of the two valid for every ρ-zCDP mechanism; Lemma 40
  (Bun & Steinke 2016), ε = ρ + 2√(ρ log(1/δ)), the conversion behind the paper's Census
  figures, is listed beside it as a looser bound (:func:`zcdp_epsilon_readings`).

References
----------
.. [1] J. Cho and J. Awan, "Formal privacy guarantees with invariant statistics", 2024.
.. [2] J. Dong, A. Roth and W. Su, "Gaussian differential privacy", JRSS-B 84 (2022).
.. [3] M. Bun and T. Steinke, "Concentrated differential privacy", TCC 2016.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from dpopt.privacy.gaussian import gaussian_epsilon
from dpopt.privacy.tradeoff import GaussianTradeOff, PureDPTradeOff, TradeOff, group_privacy
from dpopt.privacy.zcdp import zcdp_epsilon_bun_steinke, zcdp_epsilon_cks
from dpopt.sensitivity.semi_space import SemiSensitivitySpace
from dpopt.spec.models import Spec

REPORTED_DELTAS = (1e-5, 1e-6, 1e-10)
"""The δ at which a Semi-DP scope lists ε (1e-10 is the paper's Census δ)."""


class ApproxDPTradeOff(TradeOff):
    r"""The (ε, δ)-DP trade-off :math:`f_{\varepsilon,\delta}(\alpha) = \max\{0,
    1-\delta-e^{\varepsilon}\alpha, e^{-\varepsilon}(1-\delta-\alpha)\}` (α the type-I error;
    Dong, Roth & Su 2022, eq. 2.3; Cho & Awan §2 write it in α ↦ 1 − α)."""

    symmetric = True

    def __init__(self, epsilon: float, delta: float):
        if not (0 <= epsilon <= 700 and 0 <= delta <= 1):
            raise ValueError(f"need 0 ≤ ε ≤ 700 and 0 ≤ δ ≤ 1 (got ε={epsilon}, δ={delta})")
        self.epsilon, self.delta = float(epsilon), float(delta)

    @property
    def name(self) -> str:
        return f"({self.epsilon:g}, {self.delta:g})-DP"

    def _evaluate(self, alpha):
        e, d = self.epsilon, self.delta
        return np.maximum(0.0, np.maximum(1.0 - d - math.exp(e) * alpha, math.exp(-e) * (1.0 - d - alpha)))

    def _complement(self, alpha):
        e, d = self.epsilon, self.delta
        return np.minimum(1.0, np.minimum(d + math.exp(e) * alpha, 1.0 - math.exp(-e) * (1.0 - d - alpha)))


@dataclass(frozen=True)
class SemiDPGuarantee:
    """A guarantee (D_t, A_a, f) in one privacy language.

    Attributes
    ----------
    definition : {'gdp', 'zcdp', 'pure', 'approx'}
    parameters : dict
        The parameters of f in that language (``mu``; ``rho``; ``epsilon`` [, ``delta``]).
    a : int
        The semi-adjacent parameter: datasets of D_t within distance a are protected.
    exact : bool
        True when ``parameters`` state f^{∘a} exactly; False when they state a weaker
        guarantee implied by it (e.g. aε for f_ε^{∘a}).
    method : str
        The results used.
    """

    definition: str
    parameters: dict
    a: int
    exact: bool
    method: str

    def epsilon(self, delta: float) -> float:
        """ε at δ, the tightest conversion valid for the guarantee: the exact Gaussian profile for
        GDP, CKS for zCDP (:func:`zcdp_epsilon_readings`), ε itself otherwise."""
        p = self.parameters
        if self.definition == "gdp":
            return gaussian_epsilon(delta, p["mu"])
        if self.definition == "zcdp":
            return zcdp_epsilon_cks(delta, p["rho"])[0]
        if self.definition == "approx" and delta < p["delta"]:
            raise ValueError(f"an (ε, {p['delta']:g})-DP guarantee says nothing at δ = {delta:g}")
        return p["epsilon"]

    def to_dict(self) -> dict:
        return {"definition": self.definition, **self.parameters, "a": self.a, "exact": self.exact,
                "method": self.method}


def semi_dp_tradeoff(base: TradeOff, a: int) -> TradeOff:
    """f^{∘a} of Proposition 15 (type-I convention: 1 − (1 − f)^{∘a}); a = 0 gives no loss."""
    if a == 0:
        return GaussianTradeOff(0.0)
    return group_privacy(base, a)


def semi_dp_from_dp(definition: str, parameters: dict, a: int) -> SemiDPGuarantee:
    """Proposition 15: a (D, A_1, f)-DP mechanism is (D_t, A_a, f^{∘a})-DP.

    Parameters
    ----------
    definition : {'gdp', 'zcdp', 'pure', 'approx'}
    parameters : dict
        ``{"mu": μ}``, ``{"rho": ρ}``, ``{"epsilon": ε}`` or ``{"epsilon": ε, "delta": δ}``.
    a : int
        The semi-adjacent parameter a(t) ≥ 0.

    Examples
    --------
    The 2020 Census (Cho & Awan §6): ρ = 2.56 with state totals invariant, a(t) = 2.

    >>> g = semi_dp_from_dp("zcdp", {"rho": 2.56}, 2)
    >>> g.parameters["rho"], round(zcdp_epsilon_bun_steinke(1e-10, g.parameters["rho"]), 5)  # the paper's figure
    (10.24, 40.95057)
    >>> round(g.epsilon(1e-10), 5)  # the tighter CKS conversion
    39.82257
    """
    if int(a) != a or a < 0:
        raise ValueError(f"a must be a non-negative integer (got {a})")
    a = int(a)
    p = parameters
    if definition == "gdp":
        return SemiDPGuarantee("gdp", {"mu": a * p["mu"]}, a, True, "Prop. 15 with G_μ^∘a = G_(aμ)")
    if definition == "zcdp":
        return SemiDPGuarantee("zcdp", {"rho": a * a * p["rho"]}, a, True,
                               "Prop. 15 with zCDP group privacy a²ρ (Lemma 39)")
    if definition == "pure":
        return SemiDPGuarantee("pure", {"epsilon": a * p["epsilon"]}, a, a <= 1,
                               "Prop. 15: f_ε^∘a ≥ f_(aε) (aε-DP; the exact f_ε^∘a is tighter)")
    if definition == "approx":
        e, d = p["epsilon"], p["delta"]
        factor = a if e == 0 else math.expm1(a * e) / math.expm1(e)
        return SemiDPGuarantee("approx", {"epsilon": a * e, "delta": min(1.0, d * factor) if a else 0.0}, a,
                               a <= 1, "Prop. 15: f_(ε,δ)^∘a ≥ f_(aε, δ(e^(aε)−1)/(e^ε−1)) (group privacy)")
    raise ValueError(f"no Semi-DP conversion for a {definition!r} guarantee")


def base_tradeoff(definition: str, parameters: dict) -> TradeOff:
    """The trade-off function f of a guarantee (type-I convention); not for zCDP (which is
    not a single trade-off function)."""
    if definition == "gdp":
        return GaussianTradeOff(parameters["mu"])
    if definition == "pure":
        return PureDPTradeOff(parameters["epsilon"])
    if definition == "approx":
        return ApproxDPTradeOff(parameters["epsilon"], parameters["delta"])
    raise ValueError(f"a {definition!r} guarantee is not one trade-off function")


def compose_semi_dp(
    guarantees: Sequence[tuple[str, dict]], a: int, order: str = "semi_first"
) -> SemiDPGuarantee:
    """Proposition 21: k mechanisms, each (D, A_1, f_i)-DP, released with invariants.

    ``order="semi_first"`` gives f_1^{∘a} ⊗ … ⊗ f_k^{∘a}, ``"composition_first"`` gives
    (f_1 ⊗ … ⊗ f_k)^{∘a}; the first is at least as strong (Lemma 41). For GDP and zCDP
    both are exact and equal; pure and (ε, δ) use basic composition (Σε_i, Σδ_i) of the
    Prop. 15 bounds, which is the same for both orders.

    Raises
    ------
    ValueError
        Mixed definitions, or an unknown order.
    """
    if order not in ("semi_first", "composition_first"):
        raise ValueError(f"order must be 'semi_first' or 'composition_first' (got {order!r})")
    definitions = {d for d, _ in guarantees}
    if len(definitions) != 1:
        raise ValueError(f"compose guarantees of one definition (got {sorted(definitions)})")
    (definition,) = definitions
    params = [p for _, p in guarantees]
    if definition == "gdp":
        if order == "semi_first":
            mu = math.sqrt(sum((a * p["mu"]) ** 2 for p in params))
        else:
            mu = a * math.sqrt(sum(p["mu"] ** 2 for p in params))
        return SemiDPGuarantee("gdp", {"mu": mu}, a, True, f"Prop. 21 ({order}): G_μ composition and G_μ^∘a = G_(aμ)")
    if definition == "zcdp":
        if order == "semi_first":
            rho = sum(a * a * p["rho"] for p in params)
        else:
            rho = a * a * sum(p["rho"] for p in params)
        return SemiDPGuarantee("zcdp", {"rho": rho}, a, True, f"Prop. 21 ({order}): zCDP adds, group a²ρ")
    singles = [semi_dp_from_dp(definition, p, a) for p in params]
    out = {"epsilon": sum(g.parameters["epsilon"] for g in singles)}
    if definition == "approx":
        out["delta"] = min(1.0, sum(g.parameters["delta"] for g in singles))
    return SemiDPGuarantee(definition, out, a, False, f"Prop. 21 ({order}) with basic composition of Prop. 15 bounds")


# ------------------------------------------------------------ certificate scope
ZCDP_HEADLINE_METHOD = ("CKS conversion (Canonne, Kamath & Steinke 2020, Prop. 12), the tightest valid for every "
                        "ρ-zCDP mechanism; the mechanism's own exact profile (mechanism.privacy) may be tighter")
GDP_HEADLINE_METHOD = "exact Gaussian profile (Balle & Wang 2018): tight for a μ-GDP guarantee"


def zcdp_epsilon_readings(rho: float, deltas=REPORTED_DELTAS) -> dict:
    """ε at each δ of a ρ-zCDP guarantee: the headline (CKS) and the looser bounds, each with its method.

    Returns ``{"epsilon_at_delta": {δ: ε_CKS}, "epsilon_conversion": method,
    "epsilon_looser_bounds": {"bun_steinke": {"method": ..., "epsilon_at_delta": {δ: ε_BS}}}}``
    (δ keys formatted ``f"{δ:g}"``); Bun–Steinke is never below CKS.
    """
    return {
        "epsilon_at_delta": {f"{d:g}": zcdp_epsilon_cks(d, rho)[0] for d in deltas},
        "epsilon_conversion": ZCDP_HEADLINE_METHOD,
        "epsilon_looser_bounds": {
            "bun_steinke": {
                "method": "ε = ρ + 2√(ρ log(1/δ)) (Cho & Awan Lemma 40; Bun & Steinke 2016, Prop. 1.3), "
                          "the conversion of the paper's Census figures: looser than CKS",
                "epsilon_at_delta": {f"{d:g}": zcdp_epsilon_bun_steinke(d, rho) for d in deltas},
            }
        },
    }


def _epsilon_readings(definition: str, parameters: dict) -> dict:
    if definition == "zcdp":
        return zcdp_epsilon_readings(parameters["rho"])
    return {"epsilon_at_delta": {f"{d:g}": gaussian_epsilon(d, parameters["mu"]) for d in REPORTED_DELTAS},
            "epsilon_conversion": GDP_HEADLINE_METHOD}


_TARGET_WORDS = {
    "gdp": lambda p: f"μ-GDP with μ = {p['mu']:g} (trade-off G_μ)",
    "zcdp": lambda p: f"ρ-zCDP with ρ = {p['rho']:g}",
    "pure": lambda p: f"ε-DP with ε = {p['epsilon']:g}",
    "approx": lambda p: f"(ε, δ)-DP with ε = {p['epsilon']:g}, δ = {p['delta']:g}",
    "pdp": lambda p: f"(ε, δ)-probabilistic DP with ε = {p['epsilon']:g}, δ = {p['delta']:g}",
}


def semi_dp_block(spec: Spec, space: SemiSensitivitySpace) -> dict:
    """The Semi-DP statement of a certificate (a deterministic function of spec and space)."""
    return semi_dp_scope(
        spec.privacy.definition,
        spec.privacy.parameters,
        space.semi.value,
        space.semi.reading,
        space.semi.method,
        space.semi.exact,
        space.determined_by_invariants,
    )


def semi_dp_scope(definition: str, parameters: dict, a: int, reading: str, a_method: str, a_exact: bool,
                  noise_free_determined: bool) -> dict:
    """The Semi-DP part of a certificate's scope: what is protected from what, and how.

    Deterministic in its arguments (``dpopt verify`` recomputes it).
    """
    target = _TARGET_WORDS[definition](parameters)
    scope = {
        "notion": "Semi-DP (Cho & Awan 2024, Def. 12): (D_t, A_a, f)-DP for every value t of the invariants",
        "dataspace": "D_t: the datasets of n records whose invariant statistics equal t",
        "adjacency": f"A_{a}: two datasets of D_t that differ in at most a = {a} records "
                     "(replace-one distance measured in the whole dataspace; paths may leave D_t)",
        "semi_adjacent_parameter_reading": reading,
        "semi_adjacent_parameter_method": a_method,
        "semi_adjacent_parameter_exact": a_exact,
        "statement": (
            f"For every value t of the invariants and every two datasets X, X′ of D_t that differ in at most "
            f"{a} records, the release is {target} between X and X′. Since a ≥ a(t) (Def. 13, "
            f"{reading.replace('_', '-')} reading), any one person's record may be replaced by any value it "
            "can take in D_t, together with the changes of other records the invariants force, and the two "
            "datasets stay protected from each other."
        ),
        "not_protected": (
            "The invariants are published exactly: datasets whose invariant values differ are not protected "
            "from each other, and every statistic determined by the invariants is disclosed."
            + ("" if noise_free_determined else
               " The noise-free component of this release is NOT a function of the invariants alone: "
               "it may separate datasets of D_t that are not linked by protected steps.")
        ),
    }
    if definition in ("gdp", "zcdp"):
        scope.update(_epsilon_readings(definition, parameters))
    if definition in ("gdp", "zcdp", "pure", "approx"):
        naive = semi_dp_from_dp(definition, parameters, a)
        comparison = {
            "description": (
                f"a mechanism certified only {target} under ordinary replace-one adjacency on the whole "
                f"dataspace, released with these invariants, would carry (D_t, A_{a}, f^∘{a}) (Prop. 15)"
            ),
            **naive.to_dict(),
        }
        if definition in ("gdp", "zcdp"):
            comparison.update(_epsilon_readings(definition, naive.parameters))
        scope["ordinary_dp_read_under_invariants"] = comparison
    return scope
