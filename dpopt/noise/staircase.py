r"""The staircase law (Geng & Viswanath 2016): density, tail, moments and sampler of one
coordinate of staircase noise; its design and privacy are :mod:`dpopt.mechanisms.staircase`.

Parameters ε₀ (per step), step width Δ₀ and g ∈ [0, 1]; b = e^{−ε₀},
a = (1 − b) / (2Δ₀(g + (1 − g)b)). The density is symmetric and, for x ≥ 0,

.. math:: f(x) = a\,b^{k} \text{ on } [k\Delta_0, (k+g)\Delta_0), \qquad
          f(x) = a\,b^{k+1} \text{ on } [(k+g)\Delta_0, (k+1)\Delta_0), \quad k = 0, 1, \dots

so ln f drops by ε₀ exactly at the points ±(g + k)Δ₀, which are Δ₀ apart on each side
(between −gΔ₀ and gΔ₀ the density is flat at its top). A shift by m changes ln f(x) by at
most ε₀·⌈m/Δ₀⌉, attained for some x: one coordinate with shift |s| ≤ Δ₀ is ε₀-DP.

E|X| = aΔ₀²[(2g + 2b(1−g))S₁ + (g² + b(1−g²))S₀],
E X² = (2aΔ₀³/3)[3(g + b(1−g))S₂ + 3(g² + b(1−g²))S₁ + (g³ + b(1−g³))S₀],
with S₀ = 1/(1−b), S₁ = b/(1−b)², S₂ = b(1+b)/(1−b)³.

Sampler (G&V, Algorithm 1): S = ±1, G ~ Geometric(1 − b) on {0, 1, …}, U ~ U[0, 1],
B = 0 w.p. g/(g + (1−g)b); X = S·Δ₀[(1−B)(G + gU) + B(G + g + (1−g)U)].
"""

from __future__ import annotations

import functools
import math

import numpy as np

from dpopt.errors import CalibrationError

@functools.cache
def _gauss_legendre_20() -> tuple[np.ndarray, np.ndarray]:
    """20-point Gauss–Legendre nodes and weights (the clipped expectations, per half-step), computed on
    first use (numpy.polynomial is not imported by a solve that never needs them)."""
    return np.polynomial.legendre.leggauss(20)


class StaircaseNoise:
    """One coordinate of staircase noise, parameters (ε₀, Δ₀, g) (see the module docstring)."""

    def __init__(self, epsilon0: float, step: float, g: float):
        if not (epsilon0 > 0 and step > 0 and 0 <= g <= 1 and math.isfinite(epsilon0) and math.isfinite(step)):
            raise ValueError("staircase needs ε₀ > 0, Δ₀ > 0 and 0 ≤ g ≤ 1")
        self.epsilon0, self.step, self.g = float(epsilon0), float(step), float(g)
        self.b = math.exp(-self.epsilon0)
        mass = 2 * self.step * (self.g + (1 - self.g) * self.b)  # 0 when g = 0 and e^{-ε₀} underflows
        if not mass > 0:
            raise CalibrationError(f"staircase noise with ε₀ = {self.epsilon0:g}, g = {self.g:g} is out of "
                                   "floating-point range (e^{-ε₀} underflows to 0)")
        self.a = -math.expm1(-self.epsilon0) / mass

    # ------------------------------------------------------------ density
    def density(self, x) -> np.ndarray:
        y = np.abs(np.asarray(x, dtype=float)) / self.step
        k = np.floor(y)
        return self.a * self.b**k * np.where(y - k < self.g, 1.0, self.b)

    def tail(self, x) -> np.ndarray:
        """P(X > x) for x ≥ 0: the rest of the current step plus the geometric sum beyond."""
        y = np.abs(np.asarray(x, dtype=float)) / self.step
        k = np.floor(y)
        rem = y - k
        b, g = self.b, self.g
        within = (g - np.minimum(rem, g)) + b * ((1 - g) - np.maximum(rem - g, 0.0))
        beyond = (g + b * (1 - g)) * b / (1 - b)
        return self.a * self.step * b**k * (within + beyond)

    def abs_moment(self, p: float) -> float:
        """E|X|^p: closed forms for p = 1, 2; the series of exact step integrals otherwise."""
        a, b, g, d = self.a, self.b, self.g, self.step
        s0, s1, s2 = 1 / (1 - b), b / (1 - b) ** 2, b * (1 + b) / (1 - b) ** 3
        if p == 1:
            return a * d * d * ((2 * g + 2 * b * (1 - g)) * s1 + (g * g + b * (1 - g * g)) * s0)
        if p == 2:
            return (2 * a * d**3 / 3) * (3 * (g + b * (1 - g)) * s2 + 3 * (g * g + b * (1 - g * g)) * s1
                                         + (g**3 + b * (1 - g**3)) * s0)
        k = np.arange(int(60.0 / self.epsilon0 + 60 * (1 + p)))
        lo, mid, hi = k * d, (k + g) * d, (k + 1) * d
        steps = (mid ** (p + 1) - lo ** (p + 1) + b * (hi ** (p + 1) - mid ** (p + 1))) / (p + 1)
        return float(2 * a * np.sum(b**k * steps))

    def clipped_expectations(self, h, counts, floor: float) -> np.ndarray:
        """E[h(max(c + X, τ))] for every count c: the density is constant on each half-step,
        so the expectation is a sum over half-steps of (density × a 20-point Gauss–Legendre
        integral of h), split where c + x crosses τ; steps are summed until b^k < 1e-18."""
        steps = math.ceil(41.5 / self.epsilon0) + 1
        k = np.arange(steps)
        d, g, b = self.step, self.g, self.b
        starts = np.concatenate([k * d, (k + g) * d])
        ends = np.concatenate([(k + g) * d, (k + 1) * d])
        dens = self.a * np.concatenate([b**k, b ** (k + 1)])
        keep = ends > starts
        starts, ends, dens = starts[keep], ends[keep], dens[keep]
        lo = np.concatenate([starts, -ends])  # both sides of 0
        hi = np.concatenate([ends, -starts])
        rho = np.concatenate([dens, dens])
        nodes, weights = _gauss_legendre_20()
        out = []
        for c in np.atleast_1d(np.asarray(counts, dtype=float)):
            cut = floor - c  # x below the cut is clipped to τ
            clip_hi = np.clip(cut, lo, hi)
            mass_clipped = np.sum(rho * (clip_hi - lo))
            a0, a1 = clip_hi, hi
            x = a0[:, None] + (a1 - a0)[:, None] * (nodes[None, :] + 1.0) / 2.0
            smooth = np.sum(rho * (a1 - a0) / 2.0 * (h(np.maximum(c + x, floor)) @ weights))
            out.append(mass_clipped * h(floor) + smooth)
        return np.array(out)

    def usefulness(self, gamma: float) -> float:
        """P(|X| ≤ γ)."""
        return 1.0 - 2.0 * float(self.tail(gamma))

    def sample(self, rng: np.random.Generator, size) -> np.ndarray:
        shape = (size,) if np.ndim(size) == 0 else tuple(size)
        sign = rng.choice([-1.0, 1.0], size=shape)
        geo = rng.geometric(-math.expm1(-self.epsilon0), size=shape) - 1
        u = rng.random(shape)
        inner = rng.random(shape) >= self.g / (self.g + (1 - self.g) * self.b)
        offset = np.where(inner, self.g + (1 - self.g) * u, self.g * u)
        return sign * (geo + offset) * self.step

    @property
    def typical_scale(self) -> float:
        return self.step * (1.0 + 1.0 / self.epsilon0)
