r"""Private χ² tests on a released table by parametric bootstrap (Lee, Kim, Kwak & Jung 2022, Sec. 4.3).

The tests see only the release θ̃ = M_μ(θ(S)) (and, in the bootstrap, fresh releases of
simulated tables through the *same* mechanism, truncation included), so they are
post-processing and keep the release's μ-GDP. The privatised statistic

.. math:: \tilde T = \sum_{ij} (\tilde\theta_{ij} - \tilde E_{ij})^2 / \tilde E_{ij}

is not asymptotically χ², so its null law is simulated:

* **goodness of fit** (Algorithm 2), H0: π = π₀: Ñ = Σθ̃, Ẽ = Ñπ₀; replicates
  θ^{(b)} ~ Multinomial(Ñ, π₀), released, with E^{(b)} = N^{(b)}π₀, N^{(b)} their totals;
* **homogeneity** (Algorithm 3), H0: π₁ = … = π_r for r independent tables (one row each,
  each released separately): Ñ_i = Σ_j θ̃_ij, π̃₀ = Σ_i θ̃_i / Σ_i Ñ_i, Ẽ_ij = Ñ_i π̃₀_j;
  replicates θ_i^{(b)} ~ Multinomial(Ñ_i, π̃₀).

P-value = (1/B) Σ_b 1{T^{(b)} ≥ T̃} (no +1, as in the paper); reject when P < α.

Choices the paper leaves open (digest §5, §7.13), made explicit here:

* Ñ is real; the multinomial size is Ñ rounded to the nearest integer.
* 0/0 = 0 (the paper's convention); a cell with Ẽ ≤ 0 and a non-zero numerator makes
  the statistic +∞ (counted as "at least as extreme" in the bootstrap: conservative).
* A released total Ñ ≤ 0, or a π̃₀ with a negative entry, admits no bootstrap: an error
  is raised. Truncated mechanisms (:func:`dpopt.mechanisms.james_stein.truncate_at_zero`),
  which the paper's simulations use, never produce either.
* Privacy of a homogeneity release needs each record in one table only (the paper does
  not discuss composition).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from dpopt.mechanisms.base import Mechanism
from dpopt.mechanisms.james_stein import truncate_at_zero

Privatizer = Callable[[np.ndarray, np.random.Generator], np.ndarray]
"""Maps true tables (rows of an (m, c) array) to their independent releases (m, c)."""


def privatizer(mechanism: Mechanism, truncate: bool = False) -> Privatizer:
    """The release map of a dpopt mechanism, applied row by row, optionally truncated at zero.

    Every table goes through the family's public :meth:`Mechanism.release` (vectorised over rows).
    """
    def release(tables: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        out = mechanism.release(np.atleast_2d(np.asarray(tables, dtype=float)), rng)
        return truncate_at_zero(out) if truncate else out

    return release


def chi2_statistic(observed: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """Σ (O − E)²/E over the last axis (all but the last axis broadcast), with 0/0 = 0
    and +∞ when E ≤ 0 meets a non-zero O − E."""
    observed, expected = np.asarray(observed, dtype=float), np.asarray(expected, dtype=float)
    num = (observed - expected) ** 2
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(expected > 0, num / expected, np.where(num == 0, 0.0, np.inf))
    return terms.sum(axis=-1)


@dataclass(frozen=True)
class BootstrapTest:
    """The outcome of a private bootstrap test.

    Attributes
    ----------
    statistic : float
        T̃ on the release.
    p_value : float
    reject : bool
        p_value < alpha.
    alpha : float
    replicates : int
        B.
    sizes : tuple of int
        The multinomial sizes used (Ñ, or Ñ_i per table), rounded.
    method : str
    """

    statistic: float
    p_value: float
    reject: bool
    alpha: float
    replicates: int
    sizes: tuple[int, ...]
    method: str


def _size(total: float, what: str) -> int:
    if not (math.isfinite(total) and round(total) > 0):
        raise ValueError(f"the released {what} is {total:.6g}: no bootstrap (use a truncated mechanism)")
    return round(total)


def _check_inputs(alpha: float, replicates: int) -> None:
    if not (0 < alpha < 1):
        raise ValueError(f"alpha must lie in (0, 1) (got {alpha})")
    if int(replicates) != replicates or replicates < 1:
        raise ValueError(f"replicates must be a positive integer (got {replicates})")


def bootstrap_gof(
    released: np.ndarray,
    pi0: np.ndarray,
    privatize: Privatizer,
    *,
    alpha: float = 0.05,
    replicates: int = 1000,
    rng: np.random.Generator | None = None,
) -> BootstrapTest:
    """μ-GDP goodness-of-fit test H0: π = π₀ from a released table (Algorithm 2).

    Parameters
    ----------
    released : array, shape (p,)
        θ̃ = M_μ(θ(S)), the cells flattened.
    pi0 : array, shape (p,)
        The null cell probabilities (positive, summing to 1).
    privatize : callable
        The mechanism M_μ that produced ``released`` (see :func:`privatizer`).
    alpha : float
    replicates : int
        B.
    rng : numpy Generator

    Returns
    -------
    BootstrapTest
    """
    _check_inputs(alpha, replicates)
    rng = np.random.default_rng() if rng is None else rng
    released = np.asarray(released, dtype=float).reshape(-1)
    pi0 = np.asarray(pi0, dtype=float).reshape(-1)
    if pi0.shape != released.shape or np.any(pi0 <= 0) or not math.isclose(pi0.sum(), 1.0, rel_tol=1e-9):
        raise ValueError("pi0 must be positive, sum to 1 and have one entry per released cell")
    total = float(released.sum())
    n = _size(total, "total Ñ")
    statistic = float(chi2_statistic(released, total * pi0))
    boot = privatize(rng.multinomial(n, pi0, size=int(replicates)).astype(float), rng)
    boot_stat = chi2_statistic(boot, boot.sum(axis=1, keepdims=True) * pi0)
    p_value = float(np.mean(boot_stat >= statistic))
    return BootstrapTest(statistic, p_value, p_value < alpha, alpha, int(replicates), (n,),
                         "parametric bootstrap goodness of fit (Lee et al. 2022, Algorithm 2)")


def bootstrap_homogeneity(
    released: np.ndarray,
    privatize: Privatizer,
    *,
    alpha: float = 0.05,
    replicates: int = 1000,
    rng: np.random.Generator | None = None,
) -> BootstrapTest:
    """μ-GDP homogeneity test H0: π₁ = … = π_r from r released tables (Algorithm 3).

    Parameters
    ----------
    released : array, shape (r, c)
        Row i is the release of table i (each released separately by ``privatize``).
    privatize : callable
        The mechanism for one table of c cells (see :func:`privatizer`).
    alpha, replicates, rng
        As in :func:`bootstrap_gof`.

    Returns
    -------
    BootstrapTest
    """
    _check_inputs(alpha, replicates)
    rng = np.random.default_rng() if rng is None else rng
    released = np.atleast_2d(np.asarray(released, dtype=float))
    r, c = released.shape
    if r < 2:
        raise ValueError("a homogeneity test needs at least two tables")
    row_totals = released.sum(axis=1)
    sizes = tuple(_size(float(t), f"total of table {i + 1}") for i, t in enumerate(row_totals))
    pooled = released.sum(axis=0) / row_totals.sum()
    if np.any(pooled < 0):
        raise ValueError("the pooled released proportions have a negative entry: no bootstrap "
                         "(use a truncated mechanism)")
    statistic = float(chi2_statistic(released.reshape(-1), np.outer(row_totals, pooled).reshape(-1)))
    B = int(replicates)
    tables = np.stack([rng.multinomial(n, pooled, size=B) for n in sizes], axis=1).astype(float)  # (B, r, c)
    boot = privatize(tables.reshape(B * r, c), rng).reshape(B, r, c)
    totals = boot.sum(axis=2)  # (B, r)
    with np.errstate(divide="ignore", invalid="ignore"):
        pooled_b = boot.sum(axis=1) / totals.sum(axis=1, keepdims=True)  # (B, c)
    expected = totals[:, :, None] * pooled_b[:, None, :]
    boot_stat = chi2_statistic(boot.reshape(B, r * c), expected.reshape(B, r * c))
    boot_stat = np.where(np.isnan(boot_stat), np.inf, boot_stat)
    p_value = float(np.mean(boot_stat >= statistic))
    return BootstrapTest(statistic, p_value, p_value < alpha, alpha, B, sizes,
                         "parametric bootstrap homogeneity (Lee et al. 2022, Algorithm 3)")


@dataclass(frozen=True)
class RejectionRate:
    """A simulated rejection rate and its binomial standard error √(r(1 − r)/K)."""

    rate: float
    se: float
    repetitions: int


def simulate_rejection_rate(
    test: Callable[[np.random.Generator], BootstrapTest], repetitions: int, rng: np.random.Generator
) -> RejectionRate:
    """The fraction of ``repetitions`` independent runs of ``test`` that reject (type-I
    error under H0, power under H1), with its standard error."""
    rejections = sum(test(rng).reject for _ in range(int(repetitions)))
    rate = rejections / repetitions
    return RejectionRate(rate, math.sqrt(rate * (1.0 - rate) / repetitions), int(repetitions))
