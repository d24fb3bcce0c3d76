r"""What an ε₀-DP mechanism guarantees under every other target, exactly.

Randomized response is the worst ε₀-DP mechanism: the pair RR = (Bern(p), Bern(1 − p)),
p = e^{ε₀}/(1 + e^{ε₀}), has the trade-off function
f_{ε₀,0}(α) = max(0, 1 − e^{ε₀}α, e^{−ε₀}(1 − α)), and every pair of output laws of an
ε₀-DP mechanism on neighbours is a post-processing of it (Kairouz, Oh & Viswanath 2015,
Thm 2.2; Dong, Roth & Su 2022, Prop. 2.5 and Thm 2.10). Hockey-stick and Rényi divergences
and trade-off functions all obey the data-processing inequality, so the guarantee of RR
under a definition is exactly what ε₀-DP implies under it, and no smaller bound is valid
(RR attains it):

* **(ε, δ)**: :math:`\delta(\varepsilon) = \max\bigl(0, (e^{\varepsilon_0} - e^{\varepsilon})/(1 + e^{\varepsilon_0})\bigr)`
  (the hockey-stick divergence of RR, p − e^ε(1 − p)); it is ≤ δ iff
  :math:`\varepsilon_0 \le \log\bigl((e^{\varepsilon} + \delta)/(1 - \delta)\bigr)`, which exceeds ε,
  so an ε-DP family meets (ε, δ) at a slightly larger ε₀.
* **ρ-zCDP**: :math:`\rho = \sup_{\alpha>1} D_\alpha(\mathrm{RR})/\alpha` with
  :math:`D_\alpha = \frac{1}{\alpha-1}\log\frac{e^{\alpha\varepsilon_0} + e^{(1-\alpha)\varepsilon_0}}{1+e^{\varepsilon_0}}`.
  As α → 1, D_α → KL = ε₀ tanh(ε₀/2), so ρ ≥ ε₀ tanh(ε₀/2) for any valid conversion (a bound
  ε₀ tanh(ε₀/2)/2, sometimes quoted, is refuted by RR itself); numerically the supremum is this
  limit (e.g. 1.5231883 at ε₀ = 2 against ε₀²/2 = 2, Bun & Steinke 2016, Prop. 1.4). The
  calibration solves ε₀ tanh(ε₀/2) = ρ(1 − 10⁻⁸) and every order is then certified by
  :func:`~dpopt.privacy.zcdp.renyi_zcdp_holds` (Arb balls on intervals of orders), with
  ε₀²/2 ≤ ρ in exact rationals as the fallback.
* **μ-GDP**: f_{ε₀,0} ≥ G_μ iff :math:`\varepsilon_0 \le \log(\Phi(\mu/2)/\Phi(-\mu/2))`
  (Lee, Kim, Kwak & Jung 2022, eq. 12; equality at the kink α = 1/(1 + e^{ε₀}), and G_μ, convex,
  lies below each chord of f_{ε₀,0}); the check is in 60-digit arithmetic.
* **(ε, δ)-pDP**: the privacy loss never exceeds ε₀, so ε₀ ≤ ε suffices (and RR shows that a
  larger ε₀ does not: its loss is ε₀ with probability p > ½).

The families that are ε₀-DP by construction (K-norm, staircase, R²DP, discrete Laplace's
fallback ...) calibrate ε₀ with :func:`pure_epsilon_for` and certify with :func:`pure_implies`,
which takes ε₀ exactly (a Fraction) and re-derives the conversion independently of the
calibration; the certificate states the conversion used.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING

from dpopt._lazy import lazy_module
from dpopt.core.decimals import float_below, written
from dpopt.core.checks import Check
from dpopt.core.rounding import nudge_until
from dpopt.errors import CalibrationError
from dpopt.privacy.zcdp import RENYI_BITS, renyi_ball, renyi_zcdp_holds
from dpopt.spec.models import Privacy

mpmath = lazy_module("mpmath")

if TYPE_CHECKING:
    from flint import arb

PURE_TARGETS = ("pure", "approx", "zcdp", "gdp", "pdp")
"""Every target an ε₀-DP mechanism can meet through this module."""

_MP_DIGITS = 60

CONVERSIONS = {
    "pure": "ε₀ ≤ ε in exact rationals",
    "approx": ("ε₀-DP ⇒ (ε, δ)-DP with δ = max(0, (e^{ε₀} − e^ε)/(1 + e^{ε₀})), the exact profile of randomized "
               "response, the worst ε₀-DP mechanism (Kairouz, Oh & Viswanath 2015, Thm 2.2)"),
    "zcdp": ("ε₀-DP ⇒ ρ-zCDP with ρ = sup_α D_α(RR)/α, the Rényi divergences of randomized response, the worst "
             "ε₀-DP mechanism (Kairouz, Oh & Viswanath 2015; data processing), certified on intervals of orders; "
             "or ε₀²/2 ≤ ρ (Bun & Steinke 2016, Prop. 1.4)"),
    "gdp": ("ε₀-DP ⇒ μ-GDP iff ε₀ ≤ log(Φ(μ/2)/Φ(−μ/2)) (Lee, Kim, Kwak & Jung 2022, eq. 12; Dong, Roth & Su "
            "2022, randomized response's trade-off f_{ε₀,0} ≥ G_μ)"),
    "pdp": "ε₀-DP ⇒ (ε, δ)-pDP for ε₀ ≤ ε: the privacy loss never exceeds ε₀",
}
"""The conversion each target uses, as the certificate states it."""


@dataclass(frozen=True)
class PureImplication:
    """The outcome of :func:`pure_implies`."""

    passed: bool
    method: str
    detail: str


def rr_delta_mp(epsilon0: Fraction, epsilon: float) -> mpmath.mpf:
    """δ(ε) = max(0, (e^{ε₀} − e^ε)/(1 + e^{ε₀})) of randomized response, in 60 digits, ε₀ exact.

    Examples
    --------
    >>> float(rr_delta_mp(Fraction(1), 0.0))  # (e − 1)/(e + 1) = tanh(1/2)
    0.46211715726000974
    """
    with mpmath.workdps(_MP_DIGITS):
        e0 = mpmath.mpf(epsilon0.numerator) / epsilon0.denominator
        return max(mpmath.mpf(0), (mpmath.exp(e0) - mpmath.exp(mpmath.mpf(epsilon))) / (1 + mpmath.exp(e0)))


def rr_renyi(alpha: float | arb, epsilon0: float | Fraction | arb) -> arb:
    r"""D_α of randomized response at ε₀ as an Arb ball of :data:`~dpopt.privacy.zcdp.RENYI_BITS` bits:
    :math:`\frac{1}{\alpha-1}\log\frac{e^{\alpha\varepsilon_0} + e^{(1-\alpha)\varepsilon_0}}{1+e^{\varepsilon_0}}`."""
    from flint import ctx

    with ctx.workprec(RENYI_BITS):
        a, e = renyi_ball(alpha), renyi_ball(epsilon0)
        return ((a * e).exp() + ((1 - a) * e).exp()).log() / (a - 1) - (1 + e.exp()).log() / (a - 1)


def rr_kl(epsilon0: float) -> float:
    """KL(RR) = ε₀ tanh(ε₀/2), the α → 1 limit of :func:`rr_renyi`."""
    return epsilon0 * math.tanh(epsilon0 / 2.0)


def _mp_gdp_bound(mu: float) -> mpmath.mpf:
    m = mpmath.mpf(mu) / 2
    return mpmath.log(mpmath.ncdf(m) / mpmath.ncdf(-m))


def pure_gdp_mu(epsilon: float) -> float:
    """The smallest μ with ε-DP ⇒ μ-GDP, the inverse of ε ≤ log(Φ(μ/2)/Φ(−μ/2)) (:func:`pure_implies`):
    μ_ε = 2Φ⁻¹(e^ε/(1+e^ε)) = 2√2·erfinv(tanh(ε/2)) in 50 digits, rounded up to a float.

    Examples
    --------
    >>> round(pure_gdp_mu(1.0), 6)  # 2Φ⁻¹(e/(1 + e)) = 2 · 0.61601769… (scipy.stats.norm.ppf)
    1.232035
    """
    with mpmath.workdps(50):
        exact = 2 * mpmath.sqrt(2) * mpmath.erfinv(mpmath.tanh(mpmath.mpf(epsilon) / 2))
        return nudge_until(float(exact), lambda v: mpmath.mpf(v) >= exact, up=True)


def pure_implies(epsilon0: Fraction, privacy: Privacy) -> PureImplication:
    """Does ε₀-DP (ε₀ exact) imply ``privacy``? Independent of :func:`pure_epsilon_for`."""
    definition, p = privacy.definition, privacy.parameters
    method = CONVERSIONS.get(definition)
    e0 = float(epsilon0)
    if definition in ("pure", "pdp"):
        return PureImplication(epsilon0 <= written(p["epsilon"]), method, f"ε₀ = {e0:.17g} vs ε = {p['epsilon']}")
    if definition == "approx":
        delta = rr_delta_mp(epsilon0, float_below(p["epsilon"]))
        return PureImplication(
            bool(delta <= float_below(p["delta"])), method,
            f"ε₀ = {e0:.17g}: δ(ε={p['epsilon']}) = {mpmath.nstr(delta, 17)} vs δ = {p['delta']}",
        )
    if definition == "zcdp":
        if epsilon0 * epsilon0 / 2 <= written(p["rho"]):
            return PureImplication(True, method, f"ε₀²/2 = {float(epsilon0 * epsilon0 / 2):.17g} ≤ ρ = {p['rho']}")
        passed, detail = renyi_zcdp_holds(lambda a: rr_renyi(a, epsilon0), epsilon0, p["rho"])
        return PureImplication(passed, method, f"ε₀ = {e0:.17g}: {detail}")
    if definition == "gdp":
        with mpmath.workdps(_MP_DIGITS):
            bound = _mp_gdp_bound(p["mu"])
            ok = bool(mpmath.mpf(epsilon0.numerator) / epsilon0.denominator <= bound)
        return PureImplication(ok, method, f"ε₀ = {e0:.17g} vs log(Φ(μ/2)/Φ(−μ/2)) = {mpmath.nstr(bound, 17)}")
    return PureImplication(False, "ε₀-DP", f"no conversion from ε-DP to a {definition} target in this version")


def pure_epsilon_for(privacy: Privacy) -> float:
    """The largest float ε₀ (to about 1e-8 relative under zCDP) whose ε₀-DP :func:`pure_implies` the target.

    Examples
    --------
    >>> from dpopt.spec.models import Privacy
    >>> round(pure_epsilon_for(Privacy(approx={"epsilon": 1.0, "delta": 0.01})), 9)  # log((e + 0.01)/0.99)
    1.01372238

    Raises
    ------
    CalibrationError
        For a target this module does not convert to, or an ε₀ the check cannot certify.
    """
    definition, p = privacy.definition, privacy.parameters

    def holds(e: float) -> bool:
        return pure_implies(Fraction(e), privacy).passed

    if definition in ("pure", "pdp"):
        start = p["epsilon"]
    elif definition == "approx":
        start = math.log(math.exp(p["epsilon"]) + p["delta"]) - math.log1p(-p["delta"])
    elif definition == "gdp":
        start = float(_mp_gdp_bound(p["mu"]))
    elif definition == "zcdp":
        return _zcdp_epsilon(p["rho"], holds)
    else:
        raise CalibrationError(f"no conversion from ε-DP to a {definition} target in this version")
    if not math.isfinite(start) or start <= 0:
        raise CalibrationError(f"no ε₀ > 0 meets this {definition} target in floating point")
    return nudge_until(start, holds, up=False)


def _zcdp_epsilon(rho: float, holds) -> float:
    """Solve ε₀ tanh(ε₀/2) = ρ(1 − 10⁻⁸), move down until certified; ε₀ = √(2ρ) when that is larger."""
    from scipy import optimize

    target = rho * (1.0 - 1e-8)
    kl = optimize.brentq(lambda e: rr_kl(e) - target, 0.0, target + 2.0, xtol=1e-300, rtol=1e-15)
    classic = nudge_until(math.sqrt(2.0 * rho), lambda e: Fraction(e) ** 2 / 2 <= written(rho), up=False)
    if kl > classic:
        try:
            return nudge_until(kl, holds, up=False, max_steps=6)
        except CalibrationError:  # ρ so small that the order intervals cannot separate D_α/α from ρ
            pass
    return classic


def mp_fraction(x: mpmath.mpf) -> Fraction:
    """The exact binary value of an mpmath number, as a Fraction (for :func:`pure_implies`)."""
    mantissa, exponent = mpmath.mpf(x).man_exp
    return Fraction(mantissa) * Fraction(2) ** exponent


def pure_privacy_check(achieved: Fraction, privacy: Privacy, how: str, detail: str, premise: bool = True) -> Check:
    """The ``privacy`` check of an ε₀-DP family: ``how`` proves ε₀ = ``achieved`` (exact) and
    :func:`pure_implies` converts it to the target; ``premise`` is any check ε₀ rests on."""
    implied = pure_implies(achieved, privacy)
    method = how if privacy.definition == "pure" else f"{how}; then {implied.method}"
    return Check("privacy", method, premise and implied.passed, f"{detail}; {implied.detail}")


def epsilon_dp_check(eps: Fraction, privacy: Privacy, noise: str, source: str = "") -> Check:
    """Exact rational check of an ε-DP mechanism (ε = Δ₁/b, exact) against the target.

    pure and approx: ε ≤ ε_target (δ is not used); zcdp: ε²/2 ≤ ρ (ε-DP ⇒ ε²/2-zCDP,
    Bun & Steinke 2016, Prop. 1.4). Any other target fails, naming it.
    """
    definition, p = privacy.definition, privacy.parameters
    cite = f"; {source}" if source else ""
    if definition in ("pure", "approx"):
        return Check(
            "privacy",
            f"exact rational check Δ₁/b ≤ ε ({noise}{cite}; δ is not used)",
            eps <= written(p["epsilon"]),
            f"Δ₁/b = {float(eps):.17g} vs ε = {p['epsilon']}",
        )
    if definition == "zcdp":
        return Check(
            "privacy",
            f"exact rational check (Δ₁/b)²/2 ≤ ρ ({noise}{cite}; ε-DP ⇒ ε²/2-zCDP, Bun & Steinke 2016, Prop. 1.4)",
            eps * eps / 2 <= written(p["rho"]),
            f"(Δ₁/b)²/2 = {float(eps * eps / 2):.17g} vs ρ = {p['rho']}",
        )
    return Check("privacy", noise, False, f"no {definition} guarantee for {noise} in this version")
