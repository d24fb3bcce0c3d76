"""Second folds with closed-form MGFs: Gamma, uniform, non-central χ² and Rayleigh
(Mohammady et al., CCS 2020, App. B; Rayleigh's asymptotic series, digest P8)."""

from __future__ import annotations

import math

import numpy as np

from dpopt._lazy import lazy_module
from dpopt.core import normal
from dpopt.noise.second_folds.base import SecondFold, as_array, gamma_ratio, is_scalar, mp_exact

mpmath = lazy_module("mpmath")
special = lazy_module("scipy.special")

_SQRT2 = math.sqrt(2.0)
_SQRT_PI = math.sqrt(math.pi)


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
        if is_scalar(u):  # the optimisers' scalar calls, without array and errstate overhead
            x = self.scale * float(u)
            return np.float64(-self.shape * math.log1p(-x) if x < 1 else math.inf)
        u = as_array(u)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.scale * u < 1, -self.shape * np.log1p(-self.scale * u), np.inf)

    def dlog_mgf(self, u):
        if is_scalar(u):
            x = self.scale * float(u)
            return np.float64(self.shape * self.scale / (1 - x) if x < 1 else math.inf)
        u = as_array(u)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.scale * u < 1, self.shape * self.scale / (1 - self.scale * u), np.inf)

    def mgf_mp(self, u):
        return (1 - mp_exact(self.scale) * u) ** (-mp_exact(self.shape))

    def mgf_prime_mp(self, u):
        k, th = mp_exact(self.shape), mp_exact(self.scale)
        return k * th * (1 - th * u) ** (-k - 1)

    def _inverse_moment_closed(self, p):
        return float(gamma_ratio(self.shape, p)) * self.scale ** (-p)

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
    if is_scalar(x):
        x = float(x)
        if abs(x) < 1e-3:
            return np.float64(0.5 + x / 12.0 - x**3 / 720.0)
        if x < 0:
            return np.float64(1.0 / -x - (1.0 / math.expm1(-x) if -x < 700 else 0.0))
        return np.float64(1.0 - (1.0 / x - (1.0 / math.expm1(x) if x < 700 else 0.0)))
    x = as_array(x)
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
        if is_scalar(u):
            u = float(u)
            x = u * (self.high - self.low)
            if abs(x) < 1e-8:
                ratio = x / 2.0
            elif x < 0:
                ratio = math.log(math.expm1(x) / x)
            else:
                ratio = x + math.log(-math.expm1(-x) / x)
            return np.float64(u * self.low + ratio)
        u = as_array(u)
        x = u * (self.high - self.low)
        small = np.abs(x) < 1e-8
        xs = np.where(small, 1.0, x)
        with np.errstate(over="ignore"):
            ratio = np.where(xs < 0, np.log(np.expm1(xs) / xs), xs + np.log(-np.expm1(-xs) / xs))
        return u * self.low + np.where(small, x / 2.0, ratio)

    def dlog_mgf(self, u):
        u = as_array(u)
        return self.low + (self.high - self.low) * _tilted_uniform_mean(u * (self.high - self.low))

    def mgf_mp(self, u):
        a, b = mp_exact(self.low), mp_exact(self.high)
        if u == 0:
            return mpmath.mpf(1)
        return (mpmath.exp(u * b) - mpmath.exp(u * a)) / (u * (b - a))

    def mgf_prime_mp(self, u):
        a, b = mp_exact(self.low), mp_exact(self.high)
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
        v = 2 * self.scale_ * as_array(u)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(v < 1, self.nc * (v / 2) / (1 - v) - self.df / 2 * np.log1p(-v), np.inf)

    def dlog_mgf(self, u):
        v = 2 * self.scale_ * as_array(u)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(v < 1, self.scale_ * (self.nc / (1 - v) ** 2 + self.df / (1 - v)), np.inf)

    def mgf_mp(self, u):
        v = 2 * mp_exact(self.scale_) * u
        return mpmath.exp(mp_exact(self.nc) * (v / 2) / (1 - v)) * (1 - v) ** (-mp_exact(self.df) / 2)

    def mgf_prime_mp(self, u):
        v = 2 * mp_exact(self.scale_) * u
        return self.mgf_mp(u) * mp_exact(self.scale_) * (mp_exact(self.nc) / (1 - v) ** 2 + mp_exact(self.df) / (1 - v))

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
        terms = np.exp(log_pois) * gamma_ratio(self.df / 2.0 + j, p)
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
        w = -self.sigma * as_array(u) / _SQRT2
        if np.any(w < 0):
            raise ValueError("the Rayleigh fold is evaluated at u ≤ 0 only")
        big = w > _RAYLEIGH_SWITCH
        ws = np.where(big, 1.0, w)
        ex = normal.erfcx(ws)
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
        w = -mp_exact(self.sigma) * u / mpmath.sqrt(2)
        return 1 - mpmath.sqrt(mpmath.pi) * w * mpmath.exp(w * w) * mpmath.erfc(w)

    def mgf_prime_mp(self, u):
        s = mp_exact(self.sigma)
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
