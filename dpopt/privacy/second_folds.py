r"""Second folds of R²DP: laws of the Laplace *rate* t = 1/b, through their MGFs.

R²DP (Mohammady et al., CCS 2020) adds Laplace noise whose scale b is itself random.
Everything is written in terms of t = 1/b ≥ 0 and its moment-generating function
:math:`M(u) = \mathbb E[e^{u t}]`: the noise density is :math:`f(x) = \tfrac12 M'(-|x|)`,
its tail :math:`P(Z > x) = \tfrac12 M(-x)` (x ≥ 0; the paper's eq. 10–11), and the exact
privacy for a shift Δ is :math:`\varepsilon = \ln(\mathbb E[t] / M'(-\Delta))` (Thm 4.1).

Each family states its local facts, all numerically stable for the arguments used:

* ``log_mgf(u)`` and ``dlog_mgf(u)`` = M'(u)/M(u) (so ``log M'(u) = log_mgf + log dlog_mgf``),
  vectorised, in the log domain (truncated Gaussian through ``erfcx``/``log_ndtr``;
  uniform through ``expm1``; Rayleigh with its asymptotic series where ``1 + σu√(π/2)
  erfcx(·)`` cancels, digest P8);
* ``mgf_mp(u)`` / ``mgf_prime_mp(u)``: a *separate* closed-form evaluation in mpmath
  (used by the certificate's independent 60-digit privacy check);
* ``mean()`` = E[t] = M'(0); ``inverse_moment(p)`` = E[t^{-p}] (so E|Z| = E[1/t] and
  E Z² = 2 E[1/t²], Table 1), ``inf`` when it diverges (digest P9);
* ``sample(rng, size)``, ``scaled(c)`` (the law of c·t), ``parameters`` (JSON, with ``kind``).

The paper's "linear combination" ``t = Σ a_i X_i`` of independent folds is :class:`SumFold`
(MGF a product, Thm 3.2); its coefficients are absorbed in the components' scales, which
they duplicate (digest §1.6). A finite mixture (:class:`DiscreteFold`) is what the global
LP over mixture weights returns; Bernoulli (Example 3.1) is its two-atom case and the
Laplace mechanism its one-atom case.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import ClassVar

import mpmath
import numpy as np
from scipy import integrate, special, stats

_SQRT2 = math.sqrt(2.0)
_SQRT_PI = math.sqrt(math.pi)
_LOG_HALF = math.log(0.5)


def _arr(u) -> np.ndarray:
    return np.asarray(u, dtype=float)


def _is_scalar(u) -> bool:
    """True for a number (the optimisers' calls take the scalar paths): floats first, as
    ``np.ndim`` costs more than a scalar path's arithmetic."""
    return isinstance(u, (float, int)) or np.ndim(u) == 0


def _gamma_ratio(a, p: float):
    """Γ(a − p)/Γ(a) for a > p, without cancelling huge log-gammas: a product for integer p,
    the asymptotic a^{−p}(1 + p(p+1)/(2a)) for a > 1e8 (relative error O(a^{−2}))."""
    a = np.asarray(a, dtype=float)
    if float(p).is_integer():
        out = np.ones_like(a)
        for j in range(1, int(p) + 1):
            out = out / (a - j)
        return out
    with np.errstate(over="ignore", invalid="ignore"):
        small = np.exp(special.gammaln(np.minimum(a, 1e8) - p) - special.gammaln(np.minimum(a, 1e8)))
    return np.where(a > 1e8, a ** (-p) * (1 + p * (p + 1) / (2 * a)), small)


def _mp(x: float) -> mpmath.mpf:
    """The binary value of a float, exactly, as an mpmath number."""
    return mpmath.mpf(float(x))


class SecondFold(ABC):
    """The law of t = 1/b (a Laplace rate), t ≥ 0 almost surely, E[t] < ∞."""

    kind: ClassVar[str]

    # ------------------------------------------------------------------ facts
    @abstractmethod
    def log_mgf(self, u) -> np.ndarray:
        """ln M(u), vectorised."""

    @abstractmethod
    def dlog_mgf(self, u) -> np.ndarray:
        """M'(u)/M(u) = E[t e^{ut}]/E[e^{ut}], vectorised."""

    @abstractmethod
    def mgf_mp(self, u: mpmath.mpf) -> mpmath.mpf:
        """M(u) in mpmath at the working precision (closed form, independent of the numpy code)."""

    @abstractmethod
    def mgf_prime_mp(self, u: mpmath.mpf) -> mpmath.mpf:
        """M'(u) in mpmath at the working precision."""

    @abstractmethod
    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """``size`` independent draws of t."""

    @abstractmethod
    def scaled(self, c: float) -> SecondFold:
        """The law of c·t (c > 0)."""

    @property
    @abstractmethod
    def parameters(self) -> dict:
        """JSON-ready description, with ``kind``; :func:`fold_from_parameters` inverts it."""

    @property
    @abstractmethod
    def small_ball_exponent(self) -> float:
        """a with P(t ≤ x) ≍ x^a as x → 0 (``inf`` when t is bounded away from 0):
        E[t^{-p}] < ∞ iff a > p."""

    def _inverse_moment_closed(self, p: float) -> float | None:
        return None

    # --------------------------------------------------------------- derived
    def log_mgf_prime(self, u) -> np.ndarray:
        """ln M'(u) = ln M(u) + ln(M'(u)/M(u))."""
        return self.log_mgf(u) + np.log(self.dlog_mgf(u))

    def mgf(self, u) -> np.ndarray:
        return np.exp(self.log_mgf(u))

    def mgf_prime(self, u) -> np.ndarray:
        return np.exp(self.log_mgf_prime(u))

    def mean(self) -> float:
        """E[t] = M'(0)."""
        return float(self.dlog_mgf(0.0))

    def inverse_moment(self, p: float) -> float:
        r"""E[t^{-p}] for p > 0, ``inf`` when it diverges.

        Closed form where the family has one, else from the MGF (Table 1 of the paper,
        generalised): :math:`\mathbb E[t^{-p}] = \frac1{\Gamma(p)}\int_0^\infty x^{p-1} M(-x)\,dx`.
        """
        if not self.small_ball_exponent > p:
            return math.inf
        closed = self._inverse_moment_closed(p)
        if closed is not None:
            return float(closed)
        return inverse_moment_from_mgf(self, p)

    def noise_tail(self, x) -> np.ndarray:
        """P(Z > x) = ½ M(−x) for x ≥ 0 (eq. 11), Z the R²DP noise."""
        return 0.5 * np.exp(self.log_mgf(-np.abs(_arr(x))))

    def noise_log_density(self, x) -> np.ndarray:
        """ln f(x) = ln(½ M'(−|x|)) (eq. 10)."""
        return _LOG_HALF + self.log_mgf_prime(-np.abs(_arr(x)))

    def sample_noise(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """R²DP noise: t from the second fold, then Laplace(1/t); t is discarded."""
        return rng.laplace(0.0, 1.0, size=size) / self.sample(rng, size)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.parameters})"


def inverse_moment_from_mgf(fold: SecondFold, p: float) -> float:
    r""":math:`\frac1{\Gamma(p)}\int_0^\infty x^{p-1} M(-x)\,dx` by adaptive quadrature
    (valid when the integral converges, i.e. ``small_ball_exponent > p``)."""
    scale = 1.0 / fold.mean()

    def integrand(y: float) -> float:
        return float(np.exp((p - 1.0) * math.log(y) + fold.log_mgf(-y))) if y > 0 else 0.0

    total = 0.0
    edges = [0.0, scale, 10 * scale, 100 * scale, 1e4 * scale, math.inf]
    for lo, hi in zip(edges[:-1], edges[1:]):
        # from the bulk outwards; a panel's absolute tolerance is relative to the total so far
        value, _ = integrate.quad(integrand, lo, hi, limit=200, epsabs=1e-14 * total, epsrel=1e-11)
        total += value
    return total / math.gamma(p)


# ------------------------------------------------------------------ discrete
class DiscreteFold(SecondFold):
    """A finite law: t = atoms[i] with probability weights[i] (normalised).

    One atom is the Laplace mechanism (t ≡ ε/Δ, Thm B.1); two atoms the Bernoulli fold
    (Example 3.1). Every extreme point of the LP over mixture weights has at most two atoms.
    """

    kind = "discrete"

    def __init__(self, atoms, weights=None):
        atoms = np.atleast_1d(np.asarray(atoms, dtype=float))
        weights = np.ones_like(atoms) if weights is None else np.atleast_1d(np.asarray(weights, dtype=float))
        if atoms.ndim != 1 or atoms.size == 0 or weights.shape != atoms.shape:
            raise ValueError("atoms and weights must be non-empty lists of the same length")
        if not (np.all(np.isfinite(atoms)) and np.all(atoms > 0)):
            raise ValueError("atoms (values of 1/b) must be finite and positive")
        if not (np.all(np.isfinite(weights)) and np.all(weights >= 0) and weights.sum() > 0):
            raise ValueError("weights must be non-negative with a positive sum")
        keep = weights > 0
        self.atoms = atoms[keep]
        self.weights = weights[keep] / weights[keep].sum()
        self._log_w = np.log(self.weights)

    def log_mgf(self, u) -> np.ndarray:
        z = self._log_w + np.multiply.outer(_arr(u), self.atoms)
        top = z.max(axis=-1)
        return top + np.log(np.exp(z - top[..., None]).sum(axis=-1))

    def dlog_mgf(self, u) -> np.ndarray:
        u = _arr(u)
        z = self._log_w + np.multiply.outer(u, self.atoms)
        z = z - z.max(axis=-1, keepdims=True)
        e = np.exp(z)
        return (e @ self.atoms) / e.sum(axis=-1)

    def mgf_mp(self, u):
        return mpmath.fsum(_mp(w) * mpmath.exp(u * _mp(t)) for t, w in zip(self.atoms, self.weights))

    def mgf_prime_mp(self, u):
        return mpmath.fsum(_mp(w) * _mp(t) * mpmath.exp(u * _mp(t)) for t, w in zip(self.atoms, self.weights))

    def mean(self) -> float:
        return float(self.weights @ self.atoms)

    def _inverse_moment_closed(self, p: float) -> float:
        return float(self.weights @ self.atoms ** (-p))

    @property
    def small_ball_exponent(self) -> float:
        return math.inf

    def sample(self, rng, size):
        return self.atoms[rng.choice(self.atoms.size, size=size, p=self.weights)]

    def scaled(self, c):
        return DiscreteFold(self.atoms * c, self.weights)

    @property
    def parameters(self) -> dict:
        return {"kind": self.kind, "atoms": self.atoms.tolist(), "weights": self.weights.tolist()}

    @property
    def is_degenerate(self) -> bool:
        """True for a single atom: the Laplace mechanism with scale 1/t."""
        return self.atoms.size == 1


# --------------------------------------------------------------------- gamma
class GammaFold(SecondFold):
    r"""Gamma(k, θ), shape k and *scale* θ (the form of the paper's pdf and MGF):
    :math:`M(u) = (1-\theta u)^{-k}`, u < 1/θ; ε = (k+1) ln(1 + Δθ) (Thm B.3)."""

    kind = "gamma"

    def __init__(self, shape: float, scale: float):
        if not (shape > 0 and scale > 0 and math.isfinite(shape) and math.isfinite(scale)):
            raise ValueError("gamma shape and scale must be positive and finite")
        self.shape, self.scale = float(shape), float(scale)

    def log_mgf(self, u):
        if _is_scalar(u):  # the optimisers' scalar calls, without array and errstate overhead
            x = self.scale * float(u)
            return np.float64(-self.shape * math.log1p(-x) if x < 1 else math.inf)
        u = _arr(u)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.scale * u < 1, -self.shape * np.log1p(-self.scale * u), np.inf)

    def dlog_mgf(self, u):
        if _is_scalar(u):
            x = self.scale * float(u)
            return np.float64(self.shape * self.scale / (1 - x) if x < 1 else math.inf)
        u = _arr(u)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.scale * u < 1, self.shape * self.scale / (1 - self.scale * u), np.inf)

    def mgf_mp(self, u):
        return (1 - _mp(self.scale) * u) ** (-_mp(self.shape))

    def mgf_prime_mp(self, u):
        k, th = _mp(self.shape), _mp(self.scale)
        return k * th * (1 - th * u) ** (-k - 1)

    def _inverse_moment_closed(self, p):
        return float(_gamma_ratio(self.shape, p)) * self.scale ** (-p)

    @property
    def small_ball_exponent(self):
        return self.shape

    def sample(self, rng, size):
        return rng.gamma(self.shape, self.scale, size=size)

    def scaled(self, c):
        return GammaFold(self.shape, self.scale * c)

    @property
    def parameters(self):
        return {"kind": self.kind, "shape": self.shape, "scale": self.scale}


# ------------------------------------------------------------------- uniform
def _tilted_uniform_mean(x: np.ndarray) -> np.ndarray:
    """Mean of v on [0, 1] with density ∝ e^{xv}: 1/(1 − e^{−x}) − 1/x (½ at x = 0)."""
    if _is_scalar(x):
        x = float(x)
        if abs(x) < 1e-3:
            return np.float64(0.5 + x / 12.0 - x**3 / 720.0)
        if x < 0:
            return np.float64(1.0 / -x - (1.0 / math.expm1(-x) if -x < 700 else 0.0))
        return np.float64(1.0 - (1.0 / x - (1.0 / math.expm1(x) if x < 700 else 0.0)))
    x = _arr(x)
    small = np.abs(x) < 1e-3
    xs = np.where(small, 1.0, x)
    with np.errstate(over="ignore"):
        big = np.where(xs < 0, 1.0 / (-xs) - 1.0 / np.expm1(-xs), 1.0 - (1.0 / xs - 1.0 / np.expm1(xs)))
    series = 0.5 + x / 12.0 - x**3 / 720.0
    return np.where(small, series, big)


class UniformFold(SecondFold):
    r"""Uniform on [a, b], 0 ≤ a < b: :math:`M(u) = (e^{ub}-e^{ua})/(u(b-a))` (Thm B.5)."""

    kind = "uniform"

    def __init__(self, low: float, high: float):
        if not (0 <= low < high and math.isfinite(high)):
            raise ValueError("uniform second fold needs 0 ≤ low < high < ∞")
        self.low, self.high = float(low), float(high)

    def log_mgf(self, u):
        if _is_scalar(u):
            u = float(u)
            x = u * (self.high - self.low)
            if abs(x) < 1e-8:
                ratio = x / 2.0
            elif x < 0:
                ratio = math.log(math.expm1(x) / x)
            else:
                ratio = x + math.log(-math.expm1(-x) / x)
            return np.float64(u * self.low + ratio)
        u = _arr(u)
        x = u * (self.high - self.low)
        small = np.abs(x) < 1e-8
        xs = np.where(small, 1.0, x)
        with np.errstate(over="ignore"):
            ratio = np.where(xs < 0, np.log(np.expm1(xs) / xs), xs + np.log(-np.expm1(-xs) / xs))
        return u * self.low + np.where(small, x / 2.0, ratio)

    def dlog_mgf(self, u):
        u = _arr(u)
        return self.low + (self.high - self.low) * _tilted_uniform_mean(u * (self.high - self.low))

    def mgf_mp(self, u):
        a, b = _mp(self.low), _mp(self.high)
        if u == 0:
            return mpmath.mpf(1)
        return (mpmath.exp(u * b) - mpmath.exp(u * a)) / (u * (b - a))

    def mgf_prime_mp(self, u):
        a, b = _mp(self.low), _mp(self.high)
        if u == 0:
            return (a + b) / 2
        return ((b * u - 1) * mpmath.exp(u * b) - (a * u - 1) * mpmath.exp(u * a)) / (u * u * (b - a))

    def _inverse_moment_closed(self, p):
        # (b^{1−p} − a^{1−p}) / ((1−p)(b − a)), written with x = (b − a)/a so that it does
        # not cancel when b ≈ a: a^{−p} · expm1((1−p) log1p(x)) / ((1−p) x); p = 1: log1p(x)/(b − a)
        a, x = self.low, (self.high - self.low) / self.low
        if p == 1:
            return math.log1p(x) / (self.high - self.low)
        return a ** (-p) * math.expm1((1 - p) * math.log1p(x)) / ((1 - p) * x)

    @property
    def small_ball_exponent(self):
        return math.inf if self.low > 0 else 1.0

    def sample(self, rng, size):
        return rng.uniform(self.low, self.high, size=size)

    def scaled(self, c):
        return UniformFold(self.low * c, self.high * c)

    @property
    def parameters(self):
        return {"kind": self.kind, "low": self.low, "high": self.high}


# --------------------------------------------------------- truncated normal
def _log_gauss_mass(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """ln(Φ(b) − Φ(a)) for a < b, stable in both tails."""
    a, b = np.broadcast_arrays(_arr(a), _arr(b))
    upper = a > 0  # both in the upper tail: reflect
    la = np.where(upper, special.log_ndtr(-b), special.log_ndtr(a))
    lb = np.where(upper, special.log_ndtr(-a), special.log_ndtr(b))
    with np.errstate(divide="ignore"):
        return lb + np.log1p(-np.exp(la - lb))


def _log_gauss_mass_scalar(a: float, b: float) -> float:
    """Scalar :func:`_log_gauss_mass`."""
    if a > 0:
        la, lb = float(special.log_ndtr(-b)), float(special.log_ndtr(-a))
    else:
        la, lb = float(special.log_ndtr(a)), float(special.log_ndtr(b))
    return lb + math.log1p(-math.exp(la - lb)) if la < lb else -math.inf


_MILLS_SERIES = (1.0, -2.0, 10.0, -74.0, 706.0, -8162.0)


def _mills_excess(a: np.ndarray) -> np.ndarray:
    """r(a) = φ(a)/Φ(−a) − a for a ≥ 0: the mean excess over a of a standard normal
    conditioned on exceeding a; erfcx form, and the asymptotic series
    1/a − 2/a³ + 10/a⁵ − … for a > 50, where the difference would cancel."""
    a = _arr(a)
    big = a > 50.0
    ab = np.where(big, a, 50.0)
    series = sum(c * ab ** (-(2 * i + 1)) for i, c in enumerate(_MILLS_SERIES))
    ad = np.where(big, 0.0, a)
    direct = math.sqrt(2.0 / math.pi) / special.erfcx(ad / _SQRT2) - ad
    return np.where(big, series, direct)


def _mills_excess_scalar(a: float) -> float:
    if a > 50.0:
        return sum(c * a ** (-(2 * i + 1)) for i, c in enumerate(_MILLS_SERIES))
    return math.sqrt(2.0 / math.pi) / float(special.erfcx(a / _SQRT2)) - a


def _truncated_excess_scalar(a: float, b: float) -> float:
    """Scalar :func:`_truncated_excess` (the optimisers call it millions of times)."""
    if math.isinf(b):
        return _mills_excess_scalar(a)
    decay = math.exp(-(b - a) * (b + a) / 2.0)
    surv = decay * float(special.erfcx(b / _SQRT2)) / float(special.erfcx(a / _SQRT2))
    return (_mills_excess_scalar(a) - surv * (b - a + _mills_excess_scalar(b))) / (1.0 - surv)


def _truncated_excess(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """E[X − a] for X a standard normal truncated to [a, b], 0 ≤ a < b ≤ ∞.

    With S = Φ(−b)/Φ(−a) (the conditional mass beyond b):
    (r(a) − S·(b − a + r(b))) / (1 − S), r the mean excess (:func:`_mills_excess`).
    """
    a, b = np.broadcast_arrays(_arr(a), _arr(b))
    finite = np.isfinite(b)
    bf = np.where(finite, b, a + 1.0)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        surv = np.where(finite, np.exp(-(bf - a) * (bf + a) / 2.0) * special.erfcx(bf / _SQRT2)
                        / special.erfcx(a / _SQRT2), 0.0)
        rb = np.where(finite, _mills_excess(bf), 0.0)
        return (_mills_excess(a) - surv * (bf - a + rb)) / (1.0 - surv)


def _mills_shift(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(φ(a) − φ(b)) / (Φ(b) − Φ(a)) for a < b: the mean of a standard normal truncated
    to [a, b]; tail forms in both tails (:func:`_truncated_excess`), direct in between."""
    a, b = np.broadcast_arrays(_arr(a), _arr(b))
    out = np.empty(a.shape)
    up = a >= 0
    low = ~up & (b <= 0)
    mid = ~up & ~low
    if up.any():
        out[up] = a[up] + _truncated_excess(a[up], b[up])
    if low.any():
        out[low] = b[low] - _truncated_excess(-b[low], -a[low])
    if mid.any():
        am, bm = a[mid], b[mid]
        mass = special.ndtr(bm) - special.ndtr(am)
        out[mid] = (stats.norm.pdf(am) - stats.norm.pdf(bm)) / mass
    return out


def _mills_shift_scalar(a: float, b: float) -> float:
    """Scalar :func:`_mills_shift`."""
    if a >= 0:
        return a + _truncated_excess_scalar(a, b)
    if b <= 0:
        return b - _truncated_excess_scalar(-b, -a)
    mass = float(special.ndtr(b)) - float(special.ndtr(a))
    return (math.exp(-a * a / 2.0) - math.exp(-b * b / 2.0)) / math.sqrt(2.0 * math.pi) / mass


def _mp_gauss_mass(a, b):
    """Φ(b) − Φ(a) in mpmath, reflected in the upper tail (no cancellation against 1)."""
    if a > 0:
        return mpmath.ncdf(-a) - mpmath.ncdf(-b)
    return mpmath.ncdf(b) - mpmath.ncdf(a)


class TruncatedNormalFold(SecondFold):
    r"""N(μ, σ²) truncated to [lo, hi], 0 ≤ lo < hi ≤ ∞ (Thm B.7; lo ≥ 0 is required
    for t to be a rate, digest P11).

    .. math:: M(u) = e^{\mu u + \sigma^2u^2/2}\,
              \frac{\Phi(\beta-\sigma u)-\Phi(\alpha-\sigma u)}{\Phi(\beta)-\Phi(\alpha)},
              \quad \alpha = \frac{lo-\mu}\sigma,\ \beta = \frac{hi-\mu}\sigma .

    For u ≤ 0 the exponential and the tiny Φ-difference are combined analytically
    (``erfcx``): ln M(u) = u·lo − α²/2 + ln(½[erfcx(A/√2) − erfcx(B/√2)e^{−(B²−A²)/2}]) − ln Z
    with A = α − σu ≥ 0 (digest P8), and for α > 0 the −α²/2 cancels against ln Z exactly.
    M'/M is the mean of N(μ + σ²u, σ²) on [lo, hi].
    """

    kind = "truncated_normal"

    def __init__(self, mu: float, sigma: float, low: float = 0.0, high: float = math.inf):
        if not (sigma > 0 and math.isfinite(sigma) and math.isfinite(mu)):
            raise ValueError("truncated normal needs finite μ and σ > 0")
        if not (0 <= low < high):
            raise ValueError("truncated normal needs 0 ≤ low < high (t = 1/b must be non-negative)")
        self.mu, self.sigma, self.low, self.high = float(mu), float(sigma), float(low), float(high)
        self._alpha = (self.low - self.mu) / self.sigma
        self._beta = (self.high - self.mu) / self.sigma
        self._log_z = _log_gauss_mass_scalar(self._alpha, self._beta)
        # for α > 0: ln Z + α²/2, computed without forming α²/2 (it cancels in ln M)
        self._log_z_tail = self._log_z + self._alpha**2 / 2.0
        if self._alpha > 0:
            a, b = self._alpha, self._beta
            bracket = float(special.erfcx(a / _SQRT2))
            if math.isfinite(b):
                bracket -= float(special.erfcx(b / _SQRT2)) * math.exp(-(b - a) * (b + a) / 2.0)
            self._log_z_tail = math.log(0.5 * bracket)

    def _log_mgf_scalar(self, u: float) -> float:
        s = self.sigma
        A, B = self._alpha - s * u, self._beta - s * u
        if A > 0:
            bracket = float(special.erfcx(A / _SQRT2))
            if not math.isinf(self.high):
                bracket -= float(special.erfcx(B / _SQRT2)) * math.exp(-(B - A) * (B + A) / 2.0)
            return u * self.low + math.log(0.5 * bracket) - self._log_z_tail
        return self.mu * u + (s * u) ** 2 / 2.0 + _log_gauss_mass_scalar(A, B) - self._log_z

    def log_mgf(self, u):
        if _is_scalar(u):
            return np.float64(self._log_mgf_scalar(float(u)))
        u = _arr(u)
        s = self.sigma
        A = self._alpha - s * u
        B = self._beta - s * u
        # upper-tail branch (A > 0): exact cancellation of the quadratic terms
        Ap = np.where(A > 0, A, 1.0)
        with np.errstate(over="ignore", invalid="ignore"):
            if math.isinf(self.high):
                bracket = special.erfcx(Ap / _SQRT2)
            else:
                Bp = np.where(A > 0, B, 2.0)
                bracket = special.erfcx(Ap / _SQRT2) - special.erfcx(Bp / _SQRT2) * np.exp(-(Bp - Ap) * (Bp + Ap) / 2.0)
            tail = u * self.low + np.log(0.5 * bracket) - self._log_z_tail
        direct = self.mu * u + (s * u) ** 2 / 2.0 + _log_gauss_mass(np.where(A > 0, -1.0, A), np.where(A > 0, 0.0, B))
        return np.where(A > 0, tail, direct - self._log_z)

    def dlog_mgf(self, u):
        # the tilted law is N(μ + σ²u, σ²) on [lo, hi]; in the upper tail (A ≥ 0) its mean
        # is lo + σ·E[X − A] exactly (μ + σ²u + σA = lo), which avoids cancelling μ + σ²u
        s = self.sigma
        if _is_scalar(u):
            A, B = self._alpha - s * float(u), self._beta - s * float(u)
            if A >= 0:
                return np.float64(self.low + s * _truncated_excess_scalar(A, B))
            return np.float64(self.mu + s * s * float(u) + s * _mills_shift_scalar(A, B))
        u = _arr(u)
        A, B = self._alpha - s * u, self._beta - s * u
        Au = np.where(A >= 0, A, 0.0)
        Bu = np.where(A >= 0, B, 1.0)
        upper = self.low + s * _truncated_excess(Au, Bu)
        return np.where(A >= 0, upper, self.mu + s * s * u + s * _mills_shift(np.minimum(A, -0.0), np.where(A >= 0, 1.0, B)))

    def _mp_bounds(self):
        mu, s = _mp(self.mu), _mp(self.sigma)
        al = (_mp(self.low) - mu) / s
        be = mpmath.inf if math.isinf(self.high) else (_mp(self.high) - mu) / s
        return mu, s, al, be

    def mgf_mp(self, u):
        mu, s, al, be = self._mp_bounds()
        mass = _mp_gauss_mass(al - s * u, be - s * u) / _mp_gauss_mass(al, be)
        return mpmath.exp(mu * u + s * s * u * u / 2) * mass

    def mgf_prime_mp(self, u):
        mu, s, al, be = self._mp_bounds()
        A, B = al - s * u, be - s * u
        mass = _mp_gauss_mass(A, B)
        pdf_b = 0 if mpmath.isinf(B) else mpmath.npdf(B)
        tilted_mean = mu + s * s * u + s * (mpmath.npdf(A) - pdf_b) / mass
        return self.mgf_mp(u) * tilted_mean

    @property
    def small_ball_exponent(self):
        return math.inf if self.low > 0 else 1.0

    def sample(self, rng, size):
        return stats.truncnorm.rvs(self._alpha, self._beta, loc=self.mu, scale=self.sigma,
                                   size=size, random_state=rng)

    def scaled(self, c):
        return TruncatedNormalFold(self.mu * c, self.sigma * c, self.low * c, self.high * c)

    @property
    def parameters(self):
        return {"kind": self.kind, "mu": self.mu, "sigma": self.sigma, "low": self.low,
                "high": None if math.isinf(self.high) else self.high}


# ------------------------------------------------------- noncentral chi-square
class NoncentralChi2Fold(SecondFold):
    r"""t = s·X, X ~ χ'²(k, λ): :math:`M_X(u) = e^{\lambda u/(1-2u)}(1-2u)^{-k/2}`, u < ½;
    :math:`M_X'/M_X = \lambda/(1-2u)^2 + k/(1-2u)` (used in the paper's Figs 3–6)."""

    kind = "noncentral_chi2"

    def __init__(self, df: float, noncentrality: float, scale: float = 1.0):
        if not (df > 0 and noncentrality >= 0 and scale > 0):
            raise ValueError("noncentral χ² needs df > 0, noncentrality ≥ 0, scale > 0")
        self.df, self.nc, self.scale_ = float(df), float(noncentrality), float(scale)

    def log_mgf(self, u):
        v = 2 * self.scale_ * _arr(u)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(v < 1, self.nc * (v / 2) / (1 - v) - self.df / 2 * np.log1p(-v), np.inf)

    def dlog_mgf(self, u):
        v = 2 * self.scale_ * _arr(u)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(v < 1, self.scale_ * (self.nc / (1 - v) ** 2 + self.df / (1 - v)), np.inf)

    def mgf_mp(self, u):
        v = 2 * _mp(self.scale_) * u
        return mpmath.exp(_mp(self.nc) * (v / 2) / (1 - v)) * (1 - v) ** (-_mp(self.df) / 2)

    def mgf_prime_mp(self, u):
        v = 2 * _mp(self.scale_) * u
        return self.mgf_mp(u) * _mp(self.scale_) * (_mp(self.nc) / (1 - v) ** 2 + _mp(self.df) / (1 - v))

    def _inverse_moment_closed(self, p):
        # Poisson(λ/2) mixture of central χ²_{k+2j}: E[X^{−p}] = Σ_j π_j Γ(k/2+j−p)/(Γ(k/2+j) 2^p),
        # summed over the ±40 standard deviations of the Poisson weights
        half = self.nc / 2.0
        if half > 1e6:  # the Poisson window would be long: integrate the MGF instead
            return None
        lo = max(0, int(half - 40.0 * math.sqrt(half) - 40.0))
        j = np.arange(lo, int(half + 40.0 * math.sqrt(half) + 60.0) + 1)
        if half > 0:
            log_pois = j * math.log(half) - half - special.gammaln(j + 1.0)
        else:
            log_pois = np.where(j == 0, 0.0, -np.inf)
        terms = np.exp(log_pois) * _gamma_ratio(self.df / 2.0 + j, p)
        return float(terms.sum()) * (2.0 * self.scale_) ** (-p)

    @property
    def small_ball_exponent(self):
        return self.df / 2

    def sample(self, rng, size):
        if self.nc == 0:
            return self.scale_ * rng.chisquare(self.df, size=size)
        return self.scale_ * rng.noncentral_chisquare(self.df, self.nc, size=size)

    def scaled(self, c):
        return NoncentralChi2Fold(self.df, self.nc, self.scale_ * c)

    @property
    def parameters(self):
        return {"kind": self.kind, "df": self.df, "noncentrality": self.nc, "scale": self.scale_}


# ------------------------------------------------------------------- rayleigh
_RAYLEIGH_SWITCH = 8.0
_RAYLEIGH_TERMS = 20


def _double_factorial_coefs(n: int) -> np.ndarray:
    """c_m = (−1)^m (2m−1)!!/2^m, m = 0..n−1: √π erfcx(w) ~ Σ c_m w^{−(2m+1)}."""
    c = np.empty(n)
    c[0] = 1.0
    for m in range(1, n):
        c[m] = -c[m - 1] * (2 * m - 1) / 2.0
    return c


_RC = _double_factorial_coefs(_RAYLEIGH_TERMS + 2)


class RayleighFold(SecondFold):
    r"""Rayleigh(σ): with w = −σu/√2 ≥ 0, :math:`M = 1 - \sqrt\pi\, w\,\mathrm{erfcx}(w)` and
    :math:`M' = \sigma\sqrt2\,[\tfrac{\sqrt\pi}2(1+2w^2)\mathrm{erfcx}(w) - w]`; for w > 8 both
    are evaluated by their asymptotic series (digest P8: direct evaluation cancels)."""

    kind = "rayleigh"

    def __init__(self, sigma: float):
        if not (sigma > 0 and math.isfinite(sigma)):
            raise ValueError("Rayleigh σ must be positive and finite")
        self.sigma = float(sigma)

    def _parts(self, u):
        """(M, M'/(σ√2)) for u ≤ 0."""
        w = -self.sigma * _arr(u) / _SQRT2
        if np.any(w < 0):
            raise ValueError("the Rayleigh fold is evaluated at u ≤ 0 only")
        big = w > _RAYLEIGH_SWITCH
        ws = np.where(big, 1.0, w)
        ex = special.erfcx(ws)
        m_direct = 1.0 - _SQRT_PI * ws * ex
        d_direct = 0.5 * _SQRT_PI * (1 + 2 * ws * ws) * ex - ws
        wb = np.where(big, w, _RAYLEIGH_SWITCH)
        inv2 = 1.0 / (wb * wb)
        # M = −Σ_{m≥1} c_m w^{−2m};  M'/(σ√2) = Σ_{m≥0} (c_{m+1} + c_m/2) w^{−2m−1}
        m_series = np.zeros_like(wb)
        d_series = np.zeros_like(wb)
        power = np.ones_like(wb)
        for m in range(_RAYLEIGH_TERMS):
            d_series += (_RC[m + 1] + 0.5 * _RC[m]) * power / wb
            power = power * inv2
            m_series -= _RC[m + 1] * power
        return np.where(big, m_series, m_direct), np.where(big, d_series, d_direct)

    def log_mgf(self, u):
        return np.log(self._parts(u)[0])

    def dlog_mgf(self, u):
        m, d = self._parts(u)
        return self.sigma * _SQRT2 * d / m

    def mgf_mp(self, u):
        w = -_mp(self.sigma) * u / mpmath.sqrt(2)
        return 1 - mpmath.sqrt(mpmath.pi) * w * mpmath.exp(w * w) * mpmath.erfc(w)

    def mgf_prime_mp(self, u):
        s = _mp(self.sigma)
        w = -s * u / mpmath.sqrt(2)
        ex = mpmath.exp(w * w) * mpmath.erfc(w)
        return s * mpmath.sqrt(2) * (mpmath.sqrt(mpmath.pi) / 2 * (1 + 2 * w * w) * ex - w)

    def _inverse_moment_closed(self, p):
        return self.sigma ** (-p) * 2 ** (-p / 2) * math.gamma(1 - p / 2)

    @property
    def small_ball_exponent(self):
        return 2.0

    def sample(self, rng, size):
        return rng.rayleigh(self.sigma, size=size)

    def scaled(self, c):
        return RayleighFold(self.sigma * c)

    @property
    def parameters(self):
        return {"kind": self.kind, "sigma": self.sigma}


# ------------------------------------------------------------------------ sum
class SumFold(SecondFold):
    r"""t = X₁ + … + X_n with independent X_i (the paper's ensemble, Alg. 1, Cor. 4.2):
    :math:`M = \prod_i M_i`, :math:`M'/M = \sum_i M_i'/M_i`. Coefficients a_i ≥ 0 of the
    paper are the components' scales (a·Gamma(k, θ) = Gamma(k, aθ), …)."""

    kind = "sum"

    def __init__(self, components):
        components = list(components)
        if not components or not all(isinstance(c, SecondFold) for c in components):
            raise ValueError("a sum needs at least one second fold")
        self.components = components

    def log_mgf(self, u):
        return sum(c.log_mgf(u) for c in self.components)

    def dlog_mgf(self, u):
        return sum(c.dlog_mgf(u) for c in self.components)

    def mgf_mp(self, u):
        return mpmath.fprod(c.mgf_mp(u) for c in self.components)

    def mgf_prime_mp(self, u):
        values = [c.mgf_mp(u) for c in self.components]
        primes = [c.mgf_prime_mp(u) for c in self.components]
        total = mpmath.mpf(0)
        for i, p in enumerate(primes):
            total += p * mpmath.fprod(v for j, v in enumerate(values) if j != i)
        return total

    @property
    def small_ball_exponent(self):
        return sum(c.small_ball_exponent for c in self.components)

    def sample(self, rng, size):
        return sum(c.sample(rng, size) for c in self.components)

    def scaled(self, c):
        return SumFold([comp.scaled(c) for comp in self.components])

    @property
    def parameters(self):
        return {"kind": self.kind, "components": [c.parameters for c in self.components]}


_KINDS = {
    "discrete": lambda p: DiscreteFold(p["atoms"], p["weights"]),
    "gamma": lambda p: GammaFold(p["shape"], p["scale"]),
    "uniform": lambda p: UniformFold(p["low"], p["high"]),
    "truncated_normal": lambda p: TruncatedNormalFold(
        p["mu"], p["sigma"], p["low"], math.inf if p.get("high") is None else p["high"]),
    "noncentral_chi2": lambda p: NoncentralChi2Fold(p["df"], p["noncentrality"], p.get("scale", 1.0)),
    "rayleigh": lambda p: RayleighFold(p["sigma"]),
    "sum": lambda p: SumFold([fold_from_parameters(c) for c in p["components"]]),
}


def fold_from_parameters(parameters: dict) -> SecondFold:
    """Rebuild a second fold from its ``parameters``.

    Raises
    ------
    ValueError
        Unknown ``kind`` or invalid parameters.
    """
    kind = parameters.get("kind") if isinstance(parameters, dict) else None
    if kind not in _KINDS:
        raise ValueError(f"unknown second-fold kind {kind!r} (known: {', '.join(_KINDS)})")
    try:
        return _KINDS[kind](parameters)
    except KeyError as exc:
        raise ValueError(f"second fold {kind!r} is missing parameter {exc}") from None
