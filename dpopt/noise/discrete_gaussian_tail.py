r"""The discrete Gaussian N_ℤ(0, σ²) at large σ in closed form, with proven error bounds: nothing of size σ is
formed (the tabulated law of :class:`~dpopt.noise.discrete_gaussian.DiscreteGaussianMarginal` holds 40σ entries).

With f(x) = e^{−x²/(2σ²)} and u = x/σ:

* **Normaliser** (Poisson summation, the Jacobi theta identity):
  :math:`Z = \sum_{k\in\mathbb Z} f(k) = \sigma\sqrt{2\pi}\,(1 + 2\sum_{m\ge1} e^{-2\pi^2\sigma^2m^2})`; the
  correction θ = 2Σ e^{−2π²σ²m²} ≤ 3e^{−2π²σ²} is below e^{−315} for σ² ≥ :data:`MIN_SIGMA2` = 16, so
  Z = σ√(2π) to far below double precision.
* **Upper partial sums** (Euler–Maclaurin to order 4 on [a, ∞), a ≥ 0):

  .. math:: S(a) = \sum_{j\ge a} f(j) = \int_a^\infty f + \frac{f(a)}2 - \frac{f'(a)}{12} + \frac{f'''(a)}{720} + R_4
     = \sigma\sqrt{2\pi}\,Q(u) + e^{-u^2/2}\Big(\frac12 + \frac{u}{12\sigma} - \frac{u^3 - 3u}{720\sigma^3}\Big) + R_4,

  Q the standard normal upper tail, with :math:`|R_4| \le \frac{2\zeta(4)}{(2\pi)^4}\int_a^\infty |f^{(4)}|
  = \frac1{720}\int_a^\infty|f^{(4)}|` and, as f⁽⁴⁾(x) = σ⁻⁴He₄(u)e^{−u²/2}, |He₄(u)| ≤ u⁴ + 6u² + 3 and
  ∫_u^∞ (t⁴ + 6t² + 3)e^{−t²/2}dt = (u³ + 9u)e^{−u²/2} + 12√(2π)Q(u) (integration by parts),

  .. math:: |R_4| \le \frac{(u^3 + 9u)e^{-u^2/2} + 12\sqrt{2\pi}\,Q(u)}{720\,\sigma^3}.

  Hence P(W > k) = S(k + 1)/Z for whole k ≥ 0, with an error below (|R₄| + θS)/(σ√(2π)) ≤ σ⁻⁴/120 + e^{−315}
  (σ⁻⁴/120 ≈ 8·10⁻²¹ at σ² = 2³⁰), and it shrinks with the tail.
* **First absolute moment**: g(x) = x f(x), g(0) = 0, g'(0) = 1, g'''(0) = −3/σ², ∫₀^∞ g = σ², and
  g⁽⁴⁾(x) = σ⁻³He₅(u)e^{−u²/2} with ∫₀^∞|He₅|e^{−u²/2} ≤ ∫₀^∞(u⁵ + 10u³ + 15u)e^{−u²/2} = 8 + 20 + 15 = 43, so
  Σ_{j≥1} j f(j) = σ² − 1/12 − 1/(240σ²) + R₄ with |R₄| ≤ 43/(720σ²), and E|W| = 2Σ_{j≥1} j f(j)/Z.
* **Even moments**: x^{2n}f(x) is smooth and its Fourier transform at m ≠ 0 carries e^{−2π²σ²m²}: by Poisson
  summation E W² = σ² and E W⁴ = 3σ⁴ up to a relative e^{−300} for σ² ≥ 16 (as for the variance,
  :data:`~dpopt.mechanisms.lattice.LARGE_SIGMA2`).

The only floating-point approximations left are Q (:func:`dpopt.core.normal.ndtr`, a few roundings) and the
arithmetic of these few terms; ``tests/test_discrete_gaussian_tail.py`` compares them with 50-digit sums.

References
----------
.. [1] C. Canonne, G. Kamath and T. Steinke, "The discrete Gaussian for differential privacy", NeurIPS 2020
   (arXiv:2004.00010), Section 2.2 (the normaliser by Poisson summation).
.. [2] F. W. J. Olver et al., NIST Digital Library of Mathematical Functions, §2.10(i) (Euler–Maclaurin formula
   and its remainder, 2.10.2) and §24.8 (|B̃_{2k}(x)| ≤ |B_{2k}|, giving 2ζ(p)/(2π)^p).
"""

from __future__ import annotations

import math

import numpy as np

from dpopt.core import normal

MIN_SIGMA2 = 16.0
"""Smallest σ² the closed forms serve (the normaliser's correction θ ≤ 3e^{−2π²σ²} < e^{−315})."""

_ROOT_2PI = math.sqrt(2.0 * math.pi)


def _check(sigma2: float) -> float:
    """σ for σ² in the closed forms' range [:data:`MIN_SIGMA2`, ∞); ValueError otherwise."""
    if not (sigma2 >= MIN_SIGMA2 and math.isfinite(sigma2)):
        raise ValueError(f"the closed forms of N_Z(0, σ²) need σ² ≥ {MIN_SIGMA2:g} (got {sigma2})")
    return math.sqrt(sigma2)


def tail_with_error(sigma2: float, k) -> tuple[np.ndarray, np.ndarray]:
    """(P(W > k), a bound on its error) for W ~ N_ℤ(0, σ²) and whole k ≥ 0 (array), by the module's
    Euler–Maclaurin form of S(k + 1)/Z; the bound is |R₄|/(σ√(2π)) (θ is below e^{−315})."""
    sigma = _check(sigma2)
    u = (np.asarray(k, dtype=float) + 1.0) / sigma
    q = normal.ndtr(-u)
    e = np.exp(-0.5 * u * u)
    value = q + e / (sigma * _ROOT_2PI) * (0.5 + u / (12.0 * sigma) - (u**3 - 3.0 * u) / (720.0 * sigma**3))
    error = ((u**3 + 9.0 * u) * e / _ROOT_2PI + 12.0 * q) / (720.0 * sigma**4)
    return np.clip(value, 0.0, 0.5), error


def tail_upper(sigma2: float, k) -> np.ndarray:
    """A proven upper bound on P(W > k) (the value plus its error bound, :func:`tail_with_error`), at most ½."""
    value, error = tail_with_error(sigma2, k)
    return np.minimum(value + error, 0.5)


def mean_abs_with_error(sigma2: float) -> tuple[float, float]:
    """(E|W|, a bound on its error) for W ~ N_ℤ(0, σ²): 2(σ² − 1/12 − 1/(240σ²))/(σ√(2π)), error ≤
    2·43/(720σ³√(2π)) (module docstring)."""
    sigma = _check(sigma2)
    return (2.0 * (sigma2 - 1.0 / 12.0 - 1.0 / (240.0 * sigma2)) / (sigma * _ROOT_2PI),
            2.0 * 43.0 / (720.0 * sigma**3 * _ROOT_2PI))


def moments(sigma2: float, gamma: float | None = None) -> dict[str, float]:
    """E|W|, E W² = σ², E W⁴ = 3σ⁴ and, given γ ≥ 0, P(|W| ≤ γ) = 1 − 2P(W > ⌊γ⌋) of N_ℤ(0, σ²) in closed form
    (the keys of :func:`~dpopt.noise.discrete_gaussian.discrete_gaussian_moments`)."""
    out = {"mean_abs": mean_abs_with_error(sigma2)[0], "second_moment": float(sigma2),
           "fourth_moment": 3.0 * float(sigma2) ** 2}
    if gamma is not None:
        out["within"] = 0.0 if gamma < 0 else float(1.0 - 2.0 * tail_with_error(sigma2, math.floor(gamma))[0])
    return out
