r"""f-DP trade-off functions as objects (the μ-GDP check is :mod:`dpopt.privacy.gdp_check`).

Convention
----------
A trade-off function :math:`T = T(P, Q)` maps the **type-I error** α of a test of
H0: P (the output on S) against H1: Q (the output on a neighbour S′) to the smallest
**type-II error** β any test of size α achieves (Dong, Roth & Su 2022, Def. 2.1):

.. math:: T(P, Q)(\alpha) = \inf_\phi \{\beta_\phi : \alpha_\phi \le \alpha\}.

Every method below takes α in this convention (:data:`TYPE_I`). Some authors plot the
same curve against 1 − α (the specificity); :meth:`TradeOff.curve` accepts either,
named explicitly (:data:`SPECIFICITY`). The power of the most powerful level-α test is
1 − T(α) (:meth:`TradeOff.power`).

Families
--------
* :class:`GaussianTradeOff` — :math:`G_\mu(\alpha) = \Phi(\Phi^{-1}(1-\alpha) - \mu)`,
  evaluated by :func:`dpopt.privacy.gaussian.gdp_tradeoff`.
* :class:`PureDPTradeOff` — ε-DP: :math:`\max\{0, 1 - e^{\varepsilon}\alpha,
  e^{-\varepsilon}(1-\alpha)\}` (the form the paper misprints in Sec. 3.1).
* :class:`LaplaceTradeOff` — one-dimensional Laplace shift ε (in units of the scale),
  :math:`T(\mathrm{Lap}(0,1), \mathrm{Lap}(\varepsilon,1))` (Dong et al.; Lee et al., proof of Prop. 9).
* :class:`Laplace2DTradeOff` — the exact trade-off of two independent Laplace
  coordinates shifted by (δ₁, δ₂): Lee, Kim, Kwak & Jung (2022), eq. (14), in explicit
  Lambert-W form; :func:`contingency_laplace_tradeoff` is its contingency-table case
  δ = (1/b, −1/b), eq. (16) with the misprint e^{−1+K₁/2} corrected to e^{−1/b+K₁/2}.
* :class:`GroupTradeOff` — group privacy: an f-DP mechanism is
  :math:`1 - (1-f)^{\circ k}`-DP for groups of k records (Dong, Roth & Su 2022, Thm 2.14).

References
----------
.. [1] J. Dong, A. Roth and W. Su, "Gaussian differential privacy", JRSS-B 84 (2022).
.. [2] S. Lee, W. Kim, S. Kwak and H. Jung, "Differentially private multivariate
   statistics with an application to contingency table analysis", 2022.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod

import numpy as np

from dpopt.core import normal
from dpopt.privacy.gaussian import gdp_tradeoff

TYPE_I = "type_I"
"""Convention: the argument is the type-I error α (size) of the test."""

SPECIFICITY = "specificity"
"""Convention: the argument is 1 − α (the probability of accepting H0 under H0)."""

_MAX_EXPONENT = 700.0  # e^700 is the largest exponential kept in double precision


def _as_alpha(x) -> np.ndarray:
    a = np.asarray(x, dtype=float)
    if np.any(~np.isfinite(a)) or np.any(a < 0.0) or np.any(a > 1.0):
        raise ValueError("a type-I error must lie in [0, 1]")
    return a


def _out(value: np.ndarray, like):
    return float(value) if np.ndim(like) == 0 else value


class TradeOff(ABC):
    """A trade-off function T: [0, 1] → [0, 1] (α = type-I error ↦ least type-II error).

    Subclasses implement ``_evaluate`` and may implement ``_complement`` (1 − T computed
    without cancellation near α = 0) and ``_subgradient`` (a subgradient of the convex
    T, which makes :func:`~dpopt.privacy.gdp_check.gdp_margin` converge quadratically).
    """

    symmetric: bool = False
    """True when T = T⁻¹ (e.g. any T(P, Q) whose P and Q are mirror images)."""

    convention = TYPE_I

    @property
    @abstractmethod
    def name(self) -> str:
        """A short description, e.g. ``"G_1"``."""

    @abstractmethod
    def _evaluate(self, alpha: np.ndarray) -> np.ndarray:
        """T(α) for α an array in [0, 1]."""

    def _complement(self, alpha: np.ndarray) -> np.ndarray:
        return 1.0 - self._evaluate(alpha)

    def _subgradient(self, alpha: np.ndarray) -> np.ndarray | None:
        return None

    def __call__(self, alpha):
        """T(α), α the type-I error (float or array)."""
        a = _as_alpha(alpha)
        return _out(np.clip(self._evaluate(a), 0.0, 1.0), alpha)

    def curve(self, x, convention: str = TYPE_I):
        """The least type-II error at x, where x is α (``TYPE_I``) or 1 − α (``SPECIFICITY``)."""
        if convention == TYPE_I:
            return self(x)
        if convention == SPECIFICITY:
            return self(1.0 - _as_alpha(x)) if np.ndim(x) else self(1.0 - float(x))
        raise ValueError(f"convention must be {TYPE_I!r} or {SPECIFICITY!r} (got {convention!r})")

    def power(self, alpha):
        """1 − T(α): the power of the most powerful level-α test (accurate near α = 0)."""
        a = _as_alpha(alpha)
        return _out(np.clip(self._complement(a), 0.0, 1.0), alpha)

    def subgradient(self, alpha):
        """A subgradient of T at α (the slope of the piece containing α), or None."""
        a = _as_alpha(alpha)
        g = self._subgradient(a)
        return None if g is None else _out(g, alpha)

    def fixed_point(self) -> float:
        """The α with T(α) = α (the point of the curve closest to the origin if symmetric)."""
        from scipy import optimize  # imported where used (start-up of `dpopt verify`)

        return float(optimize.brentq(lambda a: float(self._evaluate(np.asarray(a))) - a, 0.0, 1.0,
                                     xtol=1e-15, rtol=1e-15))

    def inverse(self, beta):
        """T⁻¹(β) = inf{α : T(α) ≤ β} (T itself when symmetric)."""
        if self.symmetric:
            return self(beta)
        from scipy import optimize

        b = _as_alpha(beta)
        out = np.array([
            0.0 if float(self._evaluate(np.asarray(0.0))) <= v else
            optimize.brentq(lambda a, v=v: float(self._evaluate(np.asarray(a))) - v, 0.0, 1.0,
                            xtol=1e-15, rtol=1e-15)
            for v in np.atleast_1d(b)
        ])
        return _out(out.reshape(np.shape(b)), beta)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


class GaussianTradeOff(TradeOff):
    r""":math:`G_\mu(\alpha) = \Phi(\Phi^{-1}(1-\alpha) - \mu)` (Dong, Roth & Su 2022, eq. 2.4).

    Subgradient :math:`-\exp(\mu z - \mu^2/2)` with :math:`z = \Phi^{-1}(1-\alpha)`.
    """

    symmetric = True

    def __init__(self, mu: float):
        if not (math.isfinite(mu) and mu >= 0):
            raise ValueError(f"mu must be finite and non-negative (got {mu})")
        self.mu = float(mu)

    @property
    def name(self) -> str:
        return f"G_{self.mu:g}"

    def _evaluate(self, alpha):
        return np.asarray(gdp_tradeoff(alpha, self.mu), dtype=float)

    def _complement(self, alpha):
        return normal.ndtr(self.mu + normal.ndtri(alpha))

    def _subgradient(self, alpha):
        z = -normal.ndtri(alpha)
        with np.errstate(over="ignore"):
            return -np.exp(self.mu * z - self.mu**2 / 2.0)


class PureDPTradeOff(TradeOff):
    r"""The ε-DP trade-off :math:`f_\varepsilon(\alpha) = \max\{0, 1 - e^{\varepsilon}\alpha, e^{-\varepsilon}(1-\alpha)\}`.

    Kink at α = 1/(1 + e^ε). (Lee et al. print a different, incorrect expression in
    Sec. 3.1; this is the standard form, Dong, Roth & Su 2022, eq. 2.3 with δ = 0.)
    """

    symmetric = True

    def __init__(self, epsilon: float):
        if not (0 <= epsilon <= _MAX_EXPONENT):
            raise ValueError(f"epsilon must lie in [0, {_MAX_EXPONENT:g}] (got {epsilon})")
        self.epsilon = float(epsilon)

    @property
    def name(self) -> str:
        return f"{self.epsilon:g}-DP"

    def _evaluate(self, alpha):
        e = self.epsilon
        return np.maximum(0.0, np.maximum(1.0 - math.exp(e) * alpha, math.exp(-e) * (1.0 - alpha)))

    def _complement(self, alpha):
        e = self.epsilon
        return np.minimum(math.exp(e) * alpha, -math.expm1(-e) + math.exp(-e) * alpha)

    def _subgradient(self, alpha):
        e = self.epsilon
        return np.where(alpha < 1.0 / (1.0 + math.exp(e)), -math.exp(e), -math.exp(-e))


class LaplaceTradeOff(TradeOff):
    r"""One Laplace coordinate shifted by ε scale units: :math:`T(\mathrm{Lap}(0,1), \mathrm{Lap}(\varepsilon,1))`.

    .. math::
        T(\alpha) = \begin{cases} 1 - e^{\varepsilon}\alpha & \alpha < \tfrac12 e^{-\varepsilon} \\
        e^{-\varepsilon}/(4\alpha) & \tfrac12 e^{-\varepsilon} \le \alpha < \tfrac12 \\
        e^{-\varepsilon}(1-\alpha) & \alpha \ge \tfrac12 \end{cases}

    (Dong, Roth & Su 2022, Sec. 2; Lee et al. 2022, proof of Prop. 9). A Laplace
    mechanism of scale b on a query with sensitivity Δ has ε = Δ/b.
    """

    symmetric = True

    def __init__(self, epsilon: float):
        if not (0 <= epsilon <= _MAX_EXPONENT):
            raise ValueError(f"epsilon must lie in [0, {_MAX_EXPONENT:g}] (got {epsilon})")
        self.epsilon = float(epsilon)

    @property
    def name(self) -> str:
        return f"Lap_1({self.epsilon:g})"

    def _pieces(self, alpha):
        e = self.epsilon
        return [alpha < 0.5 * math.exp(-e), alpha < 0.5]

    def _evaluate(self, alpha):
        e = self.epsilon
        with np.errstate(divide="ignore"):
            return np.select(self._pieces(alpha),
                             [1.0 - math.exp(e) * alpha, math.exp(-e) / (4.0 * alpha)],
                             math.exp(-e) * (1.0 - alpha))

    def _complement(self, alpha):
        e = self.epsilon
        with np.errstate(divide="ignore"):
            return np.select(self._pieces(alpha),
                             [math.exp(e) * alpha, 1.0 - math.exp(-e) / (4.0 * alpha)],
                             1.0 - math.exp(-e) * (1.0 - alpha))

    def _subgradient(self, alpha):
        e = self.epsilon
        with np.errstate(divide="ignore", over="ignore"):
            return np.select(self._pieces(alpha),
                             [np.full_like(alpha, -math.exp(e)), -math.exp(-e) / (4.0 * alpha * alpha)],
                             -math.exp(-e))


class Laplace2DTradeOff(TradeOff):
    r"""Two independent Laplace(·, 1) coordinates shifted by δ = (δ₁, δ₂): Lee et al. (2022), eq. (14).

    By the symmetries of the Laplace law only a = max|δ_k| and c = min|δ_k| matter
    (eq. 14 is written for δ₁ = a ≥ 0 ≥ δ₂ = −c); D = a + c = ‖δ‖₁. With the breakpoints
    A₁ = ¼e^{−D}, A₂ = ¼e^{−a}(1+c), A₃ = ¼e^{−a}(2+c), A₄ = ¼e^{−c}(2+c), A₅ = ¼e^{−c}(3+c):

    1. α < A₁: T = 1 − e^{D} α;
    2. A₁ ≤ α < A₂: T = ¼e^{1−u}(2+u), u = W₀(4α e^{1+D}) (computed as the Wright ω
       function of log 4α + 1 + D, no overflow);
    3. A₂ ≤ α < A₃: T = −e^{a−c} α + ½e^{−c}(2+c);
    4. A₃ ≤ α < A₄: T = e^{−D}(2+c)²/(16α);
    5. A₄ ≤ α < A₅: T = −e^{c−a} α + ½e^{−a}(2+c);
    6. A₅ ≤ α < ¾: T = ¼(v−2)e^{v−3−D}, v = −W₋₁(−4α e^{−3});
    7. α ≥ ¾: T = e^{−D}(1 − α).

    Pieces 2 and 6 are the paper's implicit K₁, K₂ forms with u = 1 + (D − K₁)/2 and
    v = 3 + (D + K₂)/2. Slopes: piece 2, −e^{2−2u+D}; piece 6, −e^{2v−6−D}. The case
    c = 0 reduces to :class:`LaplaceTradeOff` (pieces 2 and 6 are then empty).
    """

    symmetric = True

    def __init__(self, delta1: float, delta2: float):
        a, c = max(abs(delta1), abs(delta2)), min(abs(delta1), abs(delta2))
        if not (math.isfinite(a) and a + c <= _MAX_EXPONENT):
            raise ValueError(f"the shift's l1 norm must be at most {_MAX_EXPONENT:g} (got {a + c})")
        self.a, self.c = float(a), float(c)

    @property
    def name(self) -> str:
        return f"Lap_2({self.a:g}, {-self.c:g})"

    @property
    def breakpoints(self) -> tuple[float, float, float, float, float, float]:
        """(A₁, …, A₅, ¾), the left ends of pieces 2–7."""
        a, c = self.a, self.c
        return (0.25 * math.exp(-a - c), 0.25 * math.exp(-a) * (1 + c), 0.25 * math.exp(-a) * (2 + c),
                0.25 * math.exp(-c) * (2 + c), 0.25 * math.exp(-c) * (3 + c), 0.75)

    def _pieces(self, alpha):
        return [alpha < b for b in self.breakpoints]

    def _uv(self, alpha):
        from scipy import special  # imported where used (start-up of `dpopt verify`)

        D = self.a + self.c
        with np.errstate(divide="ignore", invalid="ignore"):
            u = np.real(special.wrightomega(np.log(4.0 * np.maximum(alpha, 1e-320)) + 1.0 + D))
            arg = np.clip(-4.0 * alpha * math.exp(-3.0), -math.exp(-1.0), 0.0)
            v = -np.real(special.lambertw(np.where(arg < 0, arg, -1e-300), k=-1))
        return u, v

    def _evaluate(self, alpha):
        a, c = self.a, self.c
        D = a + c
        u, v = self._uv(alpha)
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            values = [
                1.0 - math.exp(D) * alpha,
                0.25 * np.exp(1.0 - u) * (2.0 + u),
                -math.exp(a - c) * alpha + 0.5 * math.exp(-c) * (2 + c),
                math.exp(-D) * (2 + c) ** 2 / (16.0 * alpha),
                -math.exp(c - a) * alpha + 0.5 * math.exp(-a) * (2 + c),
                0.25 * (v - 2.0) * np.exp(v - 3.0 - D),
            ]
            return np.select(self._pieces(alpha), values, math.exp(-D) * (1.0 - alpha))

    def _complement(self, alpha):
        D = self.a + self.c
        return np.where(alpha < 0.25 * math.exp(-D), math.exp(D) * alpha, 1.0 - self._evaluate(alpha))

    def _subgradient(self, alpha):
        a, c = self.a, self.c
        D = a + c
        u, v = self._uv(alpha)
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            slopes = [
                np.full_like(alpha, -math.exp(D)),
                -np.exp(2.0 - 2.0 * u + D),
                np.full_like(alpha, -math.exp(a - c)),
                -math.exp(-D) * (2 + c) ** 2 / (16.0 * alpha * alpha),
                np.full_like(alpha, -math.exp(c - a)),
                -np.exp(2.0 * v - 6.0 - D),
            ]
            return np.select(self._pieces(alpha), slopes, -math.exp(-D))


def contingency_laplace_tradeoff(scale: float) -> Laplace2DTradeOff:
    r"""T_b of Laplace(b) noise on a contingency table under replace-one: eq. (16) of Lee et al.

    Neighbouring tables differ by e_i − e_j, so the p-dimensional test reduces to two
    coordinates shifted by (1/b, −1/b) (Lee et al. 2022, Sec. 3.3):
    :math:`T_b = T(\mathrm{Lap}_2(0, 1), \mathrm{Lap}_2((1/b, -1/b), 1))`.
    """
    if not (scale > 0 and math.isfinite(scale)):
        raise ValueError(f"the Laplace scale must be positive and finite (got {scale})")
    return Laplace2DTradeOff(1.0 / scale, -1.0 / scale)


def laplace_tradeoff(shift) -> TradeOff:
    """The exact trade-off of i.i.d. Laplace(·, 1) noise under a shift vector (scale units).

    Up to two non-zero coordinates have a closed form (1-D, eq. 14); a shift with three or
    more is the paper's Conjecture 12 territory and has none here.

    Raises
    ------
    ValueError
        For a shift with more than two non-zero coordinates.
    """
    s = np.sort(np.abs(np.atleast_1d(np.asarray(shift, dtype=float))))[::-1]
    if s.size > 2 and s[2] > 0:
        raise ValueError("no closed-form Laplace trade-off for a shift with more than two non-zero coordinates")
    if s.size < 2 or s[1] == 0:
        return LaplaceTradeOff(float(s[0]))
    return Laplace2DTradeOff(float(s[0]), -float(s[1]))


class GroupTradeOff(TradeOff):
    r"""Group privacy: an f-DP mechanism is :math:`1 - (1-f)^{\circ k}`-DP for groups of k records.

    Dong, Roth & Su (2022), Thm 2.14. For :math:`f = G_\mu` this is :math:`G_{k\mu}`
    (use :func:`group_privacy`, which returns that exact form).
    """

    def __init__(self, base: TradeOff, k: int):
        if int(k) != k or k < 1:
            raise ValueError(f"the group size must be a positive integer (got {k})")
        self.base, self.k = base, int(k)

    @property
    def name(self) -> str:
        return f"group({self.base.name}, k={self.k})"

    def _complement(self, alpha):
        x = alpha
        for _ in range(self.k):
            x = np.clip(self.base._complement(x), 0.0, 1.0)
        return x

    def _evaluate(self, alpha):
        # 1 − g(y) = f(y) at the last step: evaluated by f itself, accurate when T is small
        x = alpha
        for _ in range(self.k - 1):
            x = np.clip(self.base._complement(x), 0.0, 1.0)
        return self.base._evaluate(x)

    def _subgradient(self, alpha):
        x, slope = alpha, np.ones_like(alpha)
        for _ in range(self.k):
            g = self.base._subgradient(x)
            if g is None:
                return None
            with np.errstate(invalid="ignore", over="ignore"):
                slope = slope * (-g)
            x = np.clip(self.base._complement(x), 0.0, 1.0)
        return -slope


def group_privacy(tradeoff: TradeOff, k: int) -> TradeOff:
    """The trade-off for groups of k records (Dong, Roth & Su 2022, Thm 2.14).

    :math:`G_\\mu` gives :math:`G_{k\\mu}` exactly; other families a :class:`GroupTradeOff`.
    """
    if isinstance(tradeoff, GaussianTradeOff):
        if int(k) != k or k < 1:
            raise ValueError(f"the group size must be a positive integer (got {k})")
        return GaussianTradeOff(k * tradeoff.mu)
    return GroupTradeOff(tradeoff, k)
