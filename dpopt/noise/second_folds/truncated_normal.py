"""The truncated-Gaussian second fold (Thm B.7) and the stable Gaussian-mass and Mills-ratio
forms it needs in both tails (``erfcx``/``log_ndtr``, digest P8)."""

from __future__ import annotations

import math

import numpy as np

from dpopt._lazy import lazy_module
from dpopt.core import normal
from dpopt.noise.second_folds.base import SecondFold, as_array, is_scalar, mp_exact

mpmath = lazy_module("mpmath")

_SQRT2 = math.sqrt(2.0)
_SQRT_2PI = math.sqrt(2.0 * math.pi)


def _npdf(x: np.ndarray) -> np.ndarray:
    """The standard normal density φ(x) = exp(−x²/2)/√(2π), as scipy.stats.norm.pdf evaluates it."""
    return np.exp(-x**2 / 2.0) / _SQRT_2PI


def _log_gauss_mass(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """ln(Φ(b) − Φ(a)) for a < b, stable in both tails."""
    a, b = np.broadcast_arrays(as_array(a), as_array(b))
    upper = a > 0  # both in the upper tail: reflect
    la = np.where(upper, normal.log_ndtr(-b), normal.log_ndtr(a))
    lb = np.where(upper, normal.log_ndtr(-a), normal.log_ndtr(b))
    with np.errstate(divide="ignore"):
        return lb + np.log1p(-np.exp(la - lb))


def _log_gauss_mass_scalar(a: float, b: float) -> float:
    """Scalar :func:`_log_gauss_mass`."""
    if a > 0:
        la, lb = float(normal.log_ndtr(-b)), float(normal.log_ndtr(-a))
    else:
        la, lb = float(normal.log_ndtr(a)), float(normal.log_ndtr(b))
    return lb + math.log1p(-math.exp(la - lb)) if la < lb else -math.inf


_MILLS_SERIES = (1.0, -2.0, 10.0, -74.0, 706.0, -8162.0)


def _mills_excess(a: np.ndarray) -> np.ndarray:
    """r(a) = φ(a)/Φ(−a) − a for a ≥ 0: the mean excess over a of a standard normal
    conditioned on exceeding a; erfcx form, and the asymptotic series
    1/a − 2/a³ + 10/a⁵ − … for a > 50, where the difference would cancel."""
    a = as_array(a)
    big = a > 50.0
    ab = np.where(big, a, 50.0)
    series = sum(c * ab ** (-(2 * i + 1)) for i, c in enumerate(_MILLS_SERIES))
    ad = np.where(big, 0.0, a)
    direct = math.sqrt(2.0 / math.pi) / normal.erfcx(ad / _SQRT2) - ad
    return np.where(big, series, direct)


def _mills_excess_scalar(a: float) -> float:
    if a > 50.0:
        return sum(c * a ** (-(2 * i + 1)) for i, c in enumerate(_MILLS_SERIES))
    return math.sqrt(2.0 / math.pi) / float(normal.erfcx(a / _SQRT2)) - a


def _truncated_excess_scalar(a: float, b: float) -> float:
    """Scalar :func:`_truncated_excess` (the optimisers call it millions of times)."""
    if math.isinf(b):
        return _mills_excess_scalar(a)
    decay = math.exp(-(b - a) * (b + a) / 2.0)
    surv = decay * float(normal.erfcx(b / _SQRT2)) / float(normal.erfcx(a / _SQRT2))
    return (_mills_excess_scalar(a) - surv * (b - a + _mills_excess_scalar(b))) / (1.0 - surv)


def _truncated_excess(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """E[X − a] for X a standard normal truncated to [a, b], 0 ≤ a < b ≤ ∞.

    With S = Φ(−b)/Φ(−a) (the conditional mass beyond b):
    (r(a) − S·(b − a + r(b))) / (1 − S), r the mean excess (:func:`_mills_excess`).
    """
    a, b = np.broadcast_arrays(as_array(a), as_array(b))
    finite = np.isfinite(b)
    bf = np.where(finite, b, a + 1.0)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        surv = np.where(finite, np.exp(-(bf - a) * (bf + a) / 2.0) * normal.erfcx(bf / _SQRT2)
                        / normal.erfcx(a / _SQRT2), 0.0)
        rb = np.where(finite, _mills_excess(bf), 0.0)
        return (_mills_excess(a) - surv * (bf - a + rb)) / (1.0 - surv)


def _mills_shift(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(φ(a) − φ(b)) / (Φ(b) − Φ(a)) for a < b: the mean of a standard normal truncated
    to [a, b]; tail forms in both tails (:func:`_truncated_excess`), direct in between."""
    a, b = np.broadcast_arrays(as_array(a), as_array(b))
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
        mass = normal.ndtr(bm) - normal.ndtr(am)
        out[mid] = (_npdf(am) - _npdf(bm)) / mass
    return out


def _mills_shift_scalar(a: float, b: float) -> float:
    """Scalar :func:`_mills_shift`."""
    if a >= 0:
        return a + _truncated_excess_scalar(a, b)
    if b <= 0:
        return b - _truncated_excess_scalar(-b, -a)
    mass = float(normal.ndtr(b)) - float(normal.ndtr(a))
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
            bracket = float(normal.erfcx(a / _SQRT2))
            if math.isfinite(b):
                bracket -= float(normal.erfcx(b / _SQRT2)) * math.exp(-(b - a) * (b + a) / 2.0)
            self._log_z_tail = math.log(0.5 * bracket)

    def _log_mgf_scalar(self, u: float) -> float:
        s = self.sigma
        A, B = self._alpha - s * u, self._beta - s * u
        if A > 0:
            bracket = float(normal.erfcx(A / _SQRT2))
            if not math.isinf(self.high):
                bracket -= float(normal.erfcx(B / _SQRT2)) * math.exp(-(B - A) * (B + A) / 2.0)
            return u * self.low + math.log(0.5 * bracket) - self._log_z_tail
        return self.mu * u + (s * u) ** 2 / 2.0 + _log_gauss_mass_scalar(A, B) - self._log_z

    def log_mgf(self, u):
        if is_scalar(u):
            return np.float64(self._log_mgf_scalar(float(u)))
        u = as_array(u)
        s = self.sigma
        A = self._alpha - s * u
        B = self._beta - s * u
        # upper-tail branch (A > 0): exact cancellation of the quadratic terms
        Ap = np.where(A > 0, A, 1.0)
        with np.errstate(over="ignore", invalid="ignore"):
            if math.isinf(self.high):
                bracket = normal.erfcx(Ap / _SQRT2)
            else:
                Bp = np.where(A > 0, B, 2.0)
                bracket = normal.erfcx(Ap / _SQRT2) - normal.erfcx(Bp / _SQRT2) * np.exp(-(Bp - Ap) * (Bp + Ap) / 2.0)
            tail = u * self.low + np.log(0.5 * bracket) - self._log_z_tail
        direct = self.mu * u + (s * u) ** 2 / 2.0 + _log_gauss_mass(np.where(A > 0, -1.0, A), np.where(A > 0, 0.0, B))
        return np.where(A > 0, tail, direct - self._log_z)

    def dlog_mgf(self, u):
        # the tilted law is N(μ + σ²u, σ²) on [lo, hi]; in the upper tail (A ≥ 0) its mean
        # is lo + σ·E[X − A] exactly (μ + σ²u + σA = lo), which avoids cancelling μ + σ²u
        s = self.sigma
        if is_scalar(u):
            A, B = self._alpha - s * float(u), self._beta - s * float(u)
            if A >= 0:
                return np.float64(self.low + s * _truncated_excess_scalar(A, B))
            return np.float64(self.mu + s * s * float(u) + s * _mills_shift_scalar(A, B))
        u = as_array(u)
        A, B = self._alpha - s * u, self._beta - s * u
        Au = np.where(A >= 0, A, 0.0)
        Bu = np.where(A >= 0, B, 1.0)
        upper = self.low + s * _truncated_excess(Au, Bu)
        return np.where(A >= 0, upper, self.mu + s * s * u + s * _mills_shift(np.minimum(A, -0.0), np.where(A >= 0, 1.0, B)))

    def _mp_bounds(self):
        mu, s = mp_exact(self.mu), mp_exact(self.sigma)
        al = (mp_exact(self.low) - mu) / s
        be = mpmath.inf if math.isinf(self.high) else (mp_exact(self.high) - mu) / s
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
        from scipy import stats  # deferred: scipy.stats costs ~0.7 s at import, and only sampling needs it

        return stats.truncnorm.rvs(self._alpha, self._beta, loc=self.mu, scale=self.sigma,
                                   size=size, random_state=rng)

    def scaled(self, c):
        return TruncatedNormalFold(self.mu * c, self.sigma * c, self.low * c, self.high * c)

    @property
    def parameters(self):
        return {"kind": self.kind, "mu": self.mu, "sigma": self.sigma, "low": self.low,
                "high": None if math.isinf(self.high) else self.high}
