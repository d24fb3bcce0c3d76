r"""The Laplace mechanism under μ-GDP: conversions, calibrations, its exact μ.

Laplace(b) noise, i.i.d. per coordinate (density e^{−|x|/b}/(2b), variance 2b²), on a
query with l1 sensitivity Δ₁ (Lee, Kim, Kwak & Jung 2022, Sec. 3). Four scales:

* **universal** (any ε-DP mechanism): ε-DP ⇒ μ-GDP iff
  :math:`\varepsilon \le \varepsilon_\mu = \log\frac{\Phi(\mu/2)}{1-\Phi(\mu/2)}` (eq. 12),
  so :math:`b^{\varepsilon}_\mu = \Delta_1/\varepsilon_\mu`;
* **L1-tight** (Laplace-specific): :math:`T_{\mathrm{Lap},\varepsilon} \ge G_\mu` iff
  :math:`\varepsilon \le \varepsilon'_\mu = -2\log(2\Phi(-\mu/2))` (Prop. 9), so
  :math:`b^{\Delta_1}_\mu = \Delta_1/\varepsilon'_\mu`; tight in one dimension, proven for two
  coordinates (Thm 11) and for any query whose neighbouring differences have at most two
  non-zero coordinates, and only **conjectured** beyond (Conjecture 12, never certified here);
* **contingency-tight** :math:`\tilde b_\mu = \inf\{b : T_b \ge G_\mu\}` (eq. 17), by the
  bisection of Algorithm 1, returning the feasible end of the bracket;
* **two-sparse tight**: the same for a general shift pattern (a, c) of two coordinates.

The paper calls both ε_μ and ε′_μ "ε_μ" (digest §7.3); here they are
:func:`eps_universal` and :func:`eps_laplace_tight`.

:func:`laplace_gdp_route` reads from a sensitivity space which of these results applies
(one coordinate moves; at most two move; more), and :class:`LaplaceGDPRoute` calibrates,
checks (independently of the calibration: closed forms in 60-digit arithmetic, or the
branch-and-bound certificate of :func:`dpopt.privacy.gdp_check.gdp_margin`) and reports
the mechanism's exact μ.

References
----------
.. [1] S. Lee, W. Kim, S. Kwak and H. Jung, "Differentially private multivariate
   statistics with an application to contingency table analysis", 2022.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from dpopt._lazy import lazy_module
from dpopt.core import normal
from dpopt.core.roots import bisect_feasible
from dpopt.core.rounding import nudge_until
from dpopt.errors import CalibrationError
from dpopt.privacy.gdp_check import certified_mu, gdp_margin
from dpopt.privacy.tradeoff import Laplace2DTradeOff
from dpopt.sensitivity.space import SensitivitySpace

mpmath = lazy_module("mpmath")
optimize = lazy_module("scipy.optimize")
special = lazy_module("scipy.special")

_MP_DIGITS = 60


# ------------------------------------------------------------------------- conversions
def eps_universal(mu: float) -> float:
    r""":math:`\varepsilon_\mu = \log\Phi(\mu/2) - \log\Phi(-\mu/2)`: every ε_μ-DP mechanism is μ-GDP (eq. 12).

    Examples
    --------
    >>> round(eps_universal(1.0), 10)
    0.8069653463
    """
    return float(normal.log_ndtr(mu / 2.0) - normal.log_ndtr(-mu / 2.0))


def mu_universal(epsilon: float) -> float:
    r"""The inverse of :func:`eps_universal`: an ε-DP mechanism is μ-GDP for :math:`\mu = 2\Phi^{-1}(e^\varepsilon/(1+e^\varepsilon))`."""
    return float(-2.0 * normal.ndtri(special.expit(-epsilon)))


def eps_laplace_tight(mu: float) -> float:
    r""":math:`\varepsilon'_\mu = -2\log(2\Phi(-\mu/2))`: Laplace with Δ₁/b ≤ ε′_μ is μ-GDP (Prop. 9).

    Examples
    --------
    >>> round(eps_laplace_tight(1.0), 10)
    0.9655291621
    """
    return float(-2.0 * (math.log(2.0) + normal.log_ndtr(-mu / 2.0)))


def mu_laplace_tight(epsilon: float) -> float:
    r"""The inverse of :func:`eps_laplace_tight`: :math:`\mu = -2\Phi^{-1}(e^{-\varepsilon/2}/2)`, the exact μ of 1-D Laplace."""
    return float(-2.0 * special.ndtri_exp(-epsilon / 2.0 - math.log(2.0)))


def laplace_scale_universal(mu: float, l1: float) -> float:
    """:math:`b^{\\varepsilon}_\\mu = \\Delta_1/\\varepsilon_\\mu` (universal conversion)."""
    return float(l1) / eps_universal(mu)


def laplace_scale_l1(mu: float, l1: float) -> float:
    """:math:`b^{\\Delta_1}_\\mu = \\Delta_1/\\varepsilon'_\\mu` (Prop. 9, Thm 11; Conjecture 12 for three or more coordinates)."""
    return float(l1) / eps_laplace_tight(mu)


# ------------------------------------------------------------------- Algorithm 1 (tables)
def _piece2_gap(scale: float, mu: float) -> float:
    r""":math:`\min (T_b - G_\mu)` over piece 2 of eq. (16), the closed interval u ∈ [1, 1 + 1/b].

    Parameterised by u (digest §4.4): :math:`\alpha(u) = \tfrac14 u e^{u-1-2/b}`,
    :math:`T_b = \tfrac14 e^{1-u}(2+u)`; α is handled in log form, so no overflow.
    Minimised on a 65-point grid, then by bounded Brent around the best point.
    """
    d = 1.0 / scale

    def gap(u: float) -> float:
        log_alpha = math.log(u / 4.0) + u - 1.0 - 2.0 * d
        g = normal.ndtr(-special.ndtri_exp(log_alpha) - mu)
        return 0.25 * math.exp(1.0 - u) * (2.0 + u) - float(g)

    grid = np.linspace(1.0, 1.0 + d, 65)
    values = [gap(u) for u in grid]
    i = int(np.argmin(values))
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)]
    res = optimize.minimize_scalar(gap, bounds=(lo, hi), method="bounded", options={"xatol": 1e-12 * (1 + d)})
    return min(values[i], float(res.fun))


def _bisect_feasible(feasible, lower: float, upper: float, rtol: float) -> float:
    """Bisection on a monotone feasibility predicate; returns the feasible end of the bracket."""
    if not feasible(upper):
        raise CalibrationError(f"the starting upper scale {upper:.17g} is not feasible")
    return bisect_feasible(feasible, lower, upper, rtol=rtol)


def contingency_laplace_scale(mu: float, rtol: float = 1e-12) -> float:
    r"""The contingency-table-tight scale :math:`\tilde b_\mu` by Algorithm 1 (Lee et al. 2022).

    Bisection on b with :math:`f(b) = \min_\alpha (T_b - G_\mu)` over piece 2 of eq. (16)
    (the reduction is valid because T_b is symmetric and its other pieces are linear).
    As in the paper the bracket starts at :math:`b^U = b^{\varepsilon}_\mu` (universal,
    Δ₁ = 2); the paper's :math:`b^L = 0` (which overflows) is replaced by the proven
    lower bound :math:`1/\varepsilon'_\mu`: one cell of the two a neighbour moves already
    gives a 1-D Laplace test with shift 1/b. It stops when the bracket is narrower than
    ``rtol`` relative and returns its **feasible** end :math:`b^U` (never the midpoint).

    Examples
    --------
    >>> round(contingency_laplace_scale(1.0), 7)  # digest §2.5 table
    1.3589054
    """
    if not (mu > 0 and math.isfinite(mu)):
        raise CalibrationError(f"mu must be positive and finite (got {mu})")
    upper = laplace_scale_universal(mu, 2.0)
    lower = laplace_scale_l1(mu, 1.0)
    if 2.0 / lower > 1400.0:
        raise CalibrationError(f"mu = {mu} needs a Laplace scale below the floating-point range")
    return _bisect_feasible(lambda b: _piece2_gap(b, mu) >= 0.0, lower, upper, rtol)


def laplace_scale_2d(mu: float, a: float, c: float, rtol: float = 1e-9) -> float:
    r"""The smallest b with :math:`T(\mathrm{Lap}_2(0,1), \mathrm{Lap}_2((a, -c)/b, 1)) \ge G_\mu`, a ≥ c ≥ 0.

    c = 0: :math:`a/\varepsilon'_\mu` (Prop. 9, closed form). Otherwise bisection between
    :math:`a/\varepsilon'_\mu` (one coordinate alone) and :math:`(a+c)/\varepsilon'_\mu`
    (Thm 11 / Lemma 10), each candidate decided by the certified
    :func:`~dpopt.privacy.gdp_check.gdp_margin` of eq. (14); returns the feasible end.
    """
    a, c = max(a, c), min(a, c)
    if c == 0:
        return laplace_scale_l1(mu, a)
    lower, upper = laplace_scale_l1(mu, a), laplace_scale_l1(mu, a + c) * (1.0 + 1e-9)
    return _bisect_feasible(lambda b: gdp_margin(Laplace2DTradeOff(a / b, c / b), mu).passed, lower, upper, rtol)


def gaussian_laplace_crossing(calibration: str, ratio: float = math.sqrt(2.0)) -> float:
    r"""The μ at which Gaussian and Laplace noise have equal L2 cost, per coordinate.

    :math:`L_2(M_G) = p\Delta_2^2/\mu^2` and :math:`L_2(M_{\mathrm{Lap}}) = 2pb^2` (Lemma 13) are
    equal when :math:`\sqrt2\,\mu\, b(\mu) = \Delta_2`. ``calibration`` is ``"universal"``
    (:math:`b^\varepsilon_\mu`), ``"l1"`` (:math:`b^{\Delta_1}_\mu`; the paper's 6.130 at
    Δ₁/Δ₂ = √2 and 3.36 at Δ₁/Δ₂ = 1) or ``"contingency"`` (:math:`\tilde b_\mu` on a
    table, Δ₁/Δ₂ = √2 only; Fig. 6 caption "3.67", computed 3.687). ``ratio`` = Δ₁/Δ₂.
    Below the crossing the Gaussian is cheaper.
    """
    if calibration == "contingency":
        if not math.isclose(ratio, math.sqrt(2.0)):
            raise ValueError("the contingency-table scale exists for Δ₁/Δ₂ = √2 only")
        scale = lambda m: contingency_laplace_scale(m, rtol=1e-13)
        l2, bracket = math.sqrt(2.0), (0.5, 20.0)
    elif calibration in ("universal", "l1"):
        l2, bracket = 1.0, (0.05, 100.0)
        f = laplace_scale_universal if calibration == "universal" else laplace_scale_l1
        scale = lambda m: f(m, ratio)
    else:
        raise ValueError(f"calibration must be 'universal', 'l1' or 'contingency' (got {calibration!r})")
    return float(optimize.brentq(lambda m: math.sqrt(2.0) * m * scale(m) - l2, *bracket, xtol=1e-12, rtol=1e-14))


# --------------------------------------------------------------- routes over a space
def _up(value: Fraction) -> float:
    """The smallest float ≥ ``value``."""
    x = float(value)
    return x if Fraction(x) >= value else float(np.nextafter(x, math.inf))


def _mp_eps_laplace_tight(mu: float) -> mpmath.mpf:
    return -2 * mpmath.log(2 * mpmath.ncdf(-mpmath.mpf(mu) / 2))


def _mp_eps_universal(mu: float) -> mpmath.mpf:
    m = mpmath.mpf(mu) / 2
    return mpmath.log(mpmath.ncdf(m) / mpmath.ncdf(-m))


@dataclass(frozen=True)
class LaplaceGDPCheck:
    """The outcome of :meth:`LaplaceGDPRoute.check`."""

    passed: bool
    method: str
    detail: str


@dataclass(frozen=True)
class LaplaceGDPRoute:
    """Which proven result gives the μ-GDP of i.i.d. Laplace noise on a sensitivity space.

    Attributes
    ----------
    kind : str
        ``"one_dimensional"``: each neighbouring difference moves one coordinate (exact,
        Prop. 9); ``"two_sparse"``: at most two (exact, eq. 14 / Thm 11; a contingency
        table is the pattern (1, 1), eq. 16); ``"universal"``: otherwise, through ε-DP
        with ε = Δ₁/b and eq. (12) (Conjecture 12 would allow less noise; not certified).
    patterns : tuple of (Fraction, Fraction)
        The maximal shift patterns (largest, second-largest |coordinate|) of the
        difference vectors, in sensitivity units (empty for ``universal``).
    l1 : Fraction
        Δ₁.
    """

    kind: str
    patterns: tuple[tuple[Fraction, Fraction], ...]
    l1: Fraction

    @property
    def description(self) -> str:
        pats = ", ".join(f"({a}, {c})" for a, c in self.patterns)
        return {
            "one_dimensional": f"one coordinate per neighbouring difference, shift {pats}: exact 1-D "
                               "Laplace trade-off (Lee et al. 2022, Prop. 9)",
            "two_sparse": f"at most two coordinates per neighbouring difference, patterns {pats}: exact 2-D "
                          "Laplace trade-off (Lee et al. 2022, eq. 14, Thm 11; tables eq. 16)",
            "universal": "three or more coordinates per difference (or differences not listed): ε-DP with "
                         "ε = Δ₁/b and the universal conversion (Lee et al. 2022, eq. 12); the smaller "
                         "scale of Conjecture 12 is unproven and not used",
        }[self.kind]

    def scale(self, mu: float) -> float:
        """The calibrated scale (before the safe-direction rounding of the mechanism).

        For two-coordinate patterns the bisection's feasible end is moved up by 1e-10
        relative: the certified check needs T − G_μ to clear its rounding allowance.
        """
        if self.kind == "one_dimensional":
            return laplace_scale_l1(mu, float(self.patterns[0][0]))
        if self.kind == "universal":
            return laplace_scale_universal(mu, float(self.l1))
        if mu > 60.0:  # ε′_μ > 1800: shifts beyond double precision (e^700) for two coordinates
            raise CalibrationError(f"mu = {mu} is beyond the floating-point range of the 2-D Laplace trade-off")
        scales = []
        for a, c in self.patterns:
            if c == 0:
                scales.append(laplace_scale_l1(mu, float(a)))
            elif a == c:
                scales.append(float(a) * contingency_laplace_scale(mu))
            else:
                scales.append(laplace_scale_2d(mu, float(a), float(c)))
        return max(scales) * (1.0 + 1e-10)

    def check(self, scale: float, mu: float) -> LaplaceGDPCheck:
        """Is Laplace noise of scale b μ-GDP on this space? Independent of :meth:`scale`."""
        b = Fraction(scale)
        if self.kind in ("one_dimensional", "universal"):
            tight = self.kind == "one_dimensional"
            eps = (self.patterns[0][0] if tight else self.l1) / b
            with mpmath.workdps(_MP_DIGITS):
                bound = _mp_eps_laplace_tight(mu) if tight else _mp_eps_universal(mu)
                ok = bool(mpmath.mpf(eps.numerator) / eps.denominator <= bound)
            what = "−2 log(2Φ(−μ/2)) (Prop. 9)" if tight else "log(Φ(μ/2)/Φ(−μ/2)) (eq. 12)"
            return LaplaceGDPCheck(
                ok,
                f"exact ε = Δ/b against {what} in {_MP_DIGITS}-digit arithmetic; {self.description}",
                f"ε = {float(eps):.17g} vs bound {mpmath.nstr(bound, 17)} at μ = {mu}",
            )
        try:
            margins = [gdp_margin(Laplace2DTradeOff(_up(a / b), _up(c / b)), mu) for a, c in self.patterns]
        except ValueError as exc:  # a shift beyond e^700: outside double precision
            return LaplaceGDPCheck(False, f"exact 2-D Laplace trade-off; {self.description}", str(exc))
        worst = min(margins, key=lambda m: m.lower_bound)
        return LaplaceGDPCheck(
            all(m.passed for m in margins),
            f"certified T ≥ G_μ for every pattern: {worst.method}; {self.description}",
            f"certified lower bound on min(T − G_μ) {worst.lower_bound:.3g}; closest approach μ = "
            f"{worst.mu_observed:.10g} at α = {worst.argmin:.6g} vs μ = {mu}",
        )

    def mu(self, scale: float) -> float:
        """The mechanism's own μ (the smallest certified μ with T ≥ G_μ), rounded up.

        Raises
        ------
        CalibrationError
            When the shift 1/b is beyond the floating-point range of the trade-off.
        """
        if self.kind == "two_sparse":
            b = Fraction(scale)
            try:
                return max(certified_mu(Laplace2DTradeOff(_up(a / b), _up(c / b))) for a, c in self.patterns)
            except ValueError as exc:
                raise CalibrationError(f"no μ for Laplace scale {scale}: {exc}") from None
        eps = float((self.patterns[0][0] if self.kind == "one_dimensional" else self.l1) / Fraction(scale))
        mu = mu_laplace_tight(eps) if self.kind == "one_dimensional" else mu_universal(eps)
        return nudge_until(mu, lambda m: self.check(scale, m).passed, up=True)


def _maximal(pairs: list[tuple[Fraction, Fraction]]) -> tuple[tuple[Fraction, Fraction], ...]:
    """The pairs not dominated coordinate-wise by another (a larger shift is less private)."""
    return tuple(sorted(p for p in pairs if not any(q != p and q[0] >= p[0] and q[1] >= p[1] for q in pairs)))


@functools.lru_cache(maxsize=64)
def laplace_gdp_route(space: SensitivitySpace) -> LaplaceGDPRoute:
    """Read the applicable Laplace μ-GDP result off a sensitivity space (cached per space).

    One-dimensional queries need no listing (every |difference| ≤ Δ₁, and the Laplace
    trade-off decreases in the shift). Otherwise the route is exact only when the space
    lists *every* difference (``space.complete``): a hull's generators say nothing about
    the sparsity of the points inside it.
    """
    if space.dimension == 1:
        return LaplaceGDPRoute("one_dimensional", ((space.l1, Fraction(0)),), space.l1)
    vectors = None
    if space.complete:
        try:
            vectors = space.vectors()
        except ValueError:
            vectors = None
    if vectors is not None and len(vectors):
        mags = -np.sort(-np.abs(np.asarray(vectors, dtype=float)), axis=1)
        if mags.shape[1] < 3 or not np.any(mags[:, 2] > 0):
            top = np.unique(mags[:, :2], axis=0)
            pairs = [(Fraction(float(a)), Fraction(float(c))) for a, c in top if a > 0]
            patterns = _maximal(pairs)
            if all(c == 0 for _, c in patterns):
                return LaplaceGDPRoute("one_dimensional", (max(patterns),), space.l1)
            return LaplaceGDPRoute("two_sparse", patterns, space.l1)
    return LaplaceGDPRoute("universal", (), space.l1)


def laplace_mu(scale: float, space: SensitivitySpace) -> float:
    """The exact μ of i.i.d. Laplace(b) noise on ``space`` (certified, rounded up), by its route.

    For a contingency table this is μ_b = inf{μ : G_μ ≤ T_b} (Lee et al. 2022, Sec. 3.3).
    """
    return laplace_gdp_route(space).mu(scale)
