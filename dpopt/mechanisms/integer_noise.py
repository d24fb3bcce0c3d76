r"""What the exact integer-noise families share (``discrete_gaussian``, ``discrete_laplace``).

i.i.d. noise per coordinate with a symmetric law on ℤ, for integer-valued queries:

* the families serve queries with integer answers only
  (:attr:`dpopt.domain.queries.CountingQuery.integer_answers`: counts, or whole weights);
* their exact (ε, δ) profiles depend on a neighbouring difference only through its move
  pattern, the sorted non-zero |Δ_k| (:func:`move_patterns`);
* their parameters are dyadic rationals p/2^k rounded up (:func:`dyadic_ceil`), so that
  the exact samplers work in int64;
* their utilities follow from three moments of one coordinate, m₁ = E|Z|, m₂ = E Z²,
  m₄ = E Z⁴: E‖WZ‖² = m₂‖W‖_F², E‖Z‖₁ = d m₁, max variance m₂;
* their Monte Carlo estimates carry a standard error never below the one the law itself
  implies. For a per-draw statistic T with known Var T under the claimed law, the test
  |mean − E T| ≤ 5·SE is a z-test under that law; the sample's own SE estimates the same
  quantity but is 0 when the noise is almost surely 0 (large ε), where every draw is 0:
  T = ZᵀAZ (A = WᵀW) has Var = (m₄ − 3m₂²) Σ A_ii² + 2m₂² ‖A‖_F²; T = ‖Z‖₁ has
  Var = d (m₂ − m₁²); T = mean_i 1{|Z_i| ≤ γ} has Var = p(1 − p)/d.
"""

from __future__ import annotations

import math
from abc import abstractmethod
from fractions import Fraction
from typing import ClassVar

import numpy as np

from dpopt.errors import CalibrationError
from dpopt.mechanisms.base import Mechanism, UtilityValue
from dpopt.sensitivity.space import SensitivitySpace

GRID_BITS = 21
"""Dyadic parameters p/2^k are rounded (up, the safe direction) to 21 significant bits: p > 2^20, so a
parameter is within 2^-20 < 1e-6 relative of the value it rounds."""

EXACT_SAMPLER_NOTE = (
    "exact sampler in integer arithmetic (Canonne, Kamath & Steinke 2020, {algorithm}); no floating "
    "point touches the noise. Randomness: the numpy Generator passed to release (dpopt release: "
    "AES-CTR CSPRNG keyed from OS entropy unless --insecure-seed). Timing: the noise is drawn before it is "
    "added, so the random words and rejection rounds depend on the scale and the noise drawn, never on the "
    "data; not covered: the running time's dependence on the noise drawn"
)


def dyadic_ceil(x: Fraction) -> Fraction:
    """The smallest p/2^k ≥ x with p of about :data:`GRID_BITS` bits (k in [0, 30]).

    Rounding up keeps a noise scale on the private side of its target.
    """
    if x <= 0:
        raise CalibrationError(f"a noise parameter must be positive (got {x})")
    exponent = x.numerator.bit_length() - x.denominator.bit_length()  # floor(log2 x) or one more
    k = min(max(GRID_BITS - exponent, 0), 30)
    q = 2**k
    p = -((-x.numerator * q) // x.denominator)
    return Fraction(p, q)


def dyadic_ceil_fine(x: Fraction) -> Fraction:
    """:func:`dyadic_ceil` on the grid of x's exact exponent e = ⌊log₂ x⌋, p/2^k ≥ x with k = 21 − e in [0, 30]:
    :func:`dyadic_ceil` estimates e from bit lengths, one too high for some representations of the same x, and then
    rounds on a grid twice as coarse, which holds this one's points: never above :func:`dyadic_ceil` (x)."""
    if x <= 0:
        raise CalibrationError(f"a noise parameter must be positive (got {x})")
    exponent = x.numerator.bit_length() - x.denominator.bit_length()
    if x.numerator * 2 ** max(-exponent, 0) < x.denominator * 2 ** max(exponent, 0):
        exponent -= 1
    q = 2 ** min(max(GRID_BITS - exponent, 0), 30)
    return Fraction(-((-x.numerator * q) // x.denominator), q)
def dyadic_floor(x: Fraction) -> Fraction:
    """The largest p/2^k ≤ x with p of about :data:`GRID_BITS` bits (k in [0, 30]): :func:`dyadic_ceil`'s grid,
    rounded down (a privacy parameter ε′ ≤ ε, the safe direction)."""
    if x <= 0:
        raise CalibrationError(f"a privacy parameter must be positive (got {x})")
    exponent = x.numerator.bit_length() - x.denominator.bit_length()
    q = 2 ** min(max(GRID_BITS - exponent, 0), 30)
    return Fraction(x.numerator * q // x.denominator, q)


def move_patterns(space: SensitivitySpace) -> list[tuple[int, ...]] | None:
    """The distinct move patterns (sorted non-zero |Δ_k|, :func:`~dpopt.privacy.discrete_gaussian.move_pattern`)
    of the neighbouring differences: those the derivation states (:meth:`SensitivitySpace.stated_patterns`, computed
    once per space), else those of the listed differences; None if S is not listed (and states none, or too many to find)
    or a difference is not an integer vector."""
    stated = space.stated_patterns()
    if stated is not None:
        return stated
    if not space.complete:
        return None
    vectors = space.listed()
    return None if vectors is None else vector_patterns(vectors)


def vector_patterns(vectors: np.ndarray) -> list[tuple[int, ...]] | None:
    """The distinct move patterns of the rows of ``vectors`` (:func:`move_patterns`); None if a row is not an
    integer vector or every row is zero."""
    vectors = np.atleast_2d(np.asarray(vectors))
    magnitudes = np.abs(vectors[np.any(vectors != 0, axis=1)])
    if magnitudes.size == 0 or np.any(magnitudes != np.round(magnitudes)):
        return None
    values = np.unique(magnitudes[magnitudes > 0])
    counts = np.unique(np.stack([np.count_nonzero(magnitudes == v, axis=1) for v in values], axis=1), axis=0)
    return sorted(tuple(int(v) for v, c in zip(values, row) for _ in range(int(c))) for row in counts)


class IntegerNoiseMechanism(Mechanism):
    """i.i.d. symmetric integer noise on each coordinate (see the module docstring)."""

    integer_noise: ClassVar[bool] = True

    @abstractmethod
    def _abs_moments(self) -> tuple[float, float, float]:
        """(E|Z|, E Z², E Z⁴) of one coordinate."""

    def _expected_l2(self, workload: np.ndarray | None) -> float:
        frob = self.dimension if workload is None else float(np.sum(workload**2))
        return self._abs_moments()[1] * frob

    def _expected_l1(self) -> float:
        return self.dimension * self._abs_moments()[0]

    def _max_variance(self) -> float:
        return self._abs_moments()[1]

    def _per_draw_sd(self, metric: str, workload: np.ndarray | None, gamma: float | None) -> float | None:
        """The standard deviation of the per-draw statistic of ``metric`` under the family's law."""
        m1, m2, m4 = self._abs_moments()
        d = self.dimension
        if metric == "l2":
            a = np.eye(d) if workload is None else workload.T @ workload
            variance = (m4 - 3 * m2 * m2) * float(np.sum(np.diag(a) ** 2)) + 2 * m2 * m2 * float(
                np.sum(a * a)
            )
        elif metric == "l1":
            variance = d * (m2 - m1 * m1)
        elif metric == "usefulness":
            p = self._usefulness(gamma)
            variance = p * (1 - p) / d
        else:
            return None
        return math.sqrt(max(variance, 0.0))

    def _monte_carlo(
        self, metric: str, workload, gamma, draws: int | None = None, alpha=None, alternative=None
    ) -> UtilityValue:
        """The base estimate, its standard error raised to the law's own when that is larger."""
        estimate = super()._monte_carlo(
            metric, workload, gamma, draws=draws, alpha=alpha, alternative=alternative
        )
        sd = self._per_draw_sd(metric, workload, gamma)
        if estimate.ci is None or sd is None or draws is None:
            return estimate
        se = max((estimate.ci[1] - estimate.ci[0]) / (2 * 1.96), sd / math.sqrt(draws))
        return UtilityValue(
            metric,
            estimate.value,
            estimate.method + "; SE at least the law's",
            (estimate.value - 1.96 * se, estimate.value + 1.96 * se),
        )
