"""The query transform f ↦ Diag(ξ)^{1/2} f and the paper's fixed-data designs on a box:
the closed-form optimal ξ of Theorems 2.1 and 2.4 (see :mod:`dpopt.optimize.query_scaling`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from dpopt.privacy.gaussian_calibration import gaussian_sigma
from dpopt.spec.models import ApproxTarget, Privacy
from dpopt.stats.inference import log_ci_volume, power_from_noncentrality
from dpopt.stats.log_volume import exp_or_inf


def _noisy(xi: np.ndarray) -> np.ndarray:
    return (xi > 0) & np.isfinite(xi)


def adjust_query(values, xi) -> np.ndarray:
    r"""The adjusted query :math:`f_\xi = \mathrm{Diag}(\xi)^{1/2} f`.

    Coordinates with ξ_i = ∞ (released exactly) are passed through unscaled; ξ_i = 0
    gives 0 (the coordinate is not asked).
    """
    f = np.asarray(values, dtype=float).reshape(-1)
    xi = np.asarray(xi, dtype=float).reshape(-1)
    check_xi(xi, f.size)
    return np.where(np.isinf(xi), f, np.sqrt(np.where(np.isinf(xi), 1.0, xi)) * f)


def invert_adjusted_release(release, xi) -> np.ndarray:
    r"""The analyst's estimate of f from a release of :math:`f_\xi`: :math:`\mathrm{Diag}(\xi)^{-1/2} M`.

    ξ_i = ∞ coordinates are returned as released (exact); ξ_i = 0 coordinates were not
    asked and come back as NaN.
    """
    m = np.asarray(release, dtype=float).reshape(-1)
    xi = np.asarray(xi, dtype=float).reshape(-1)
    check_xi(xi, m.size)
    out = np.full(m.size, np.nan)
    noisy = _noisy(xi)
    out[noisy] = m[noisy] / np.sqrt(xi[noisy])
    out[np.isinf(xi)] = m[np.isinf(xi)]
    return out


def check_xi(xi: np.ndarray, k: int) -> None:
    if xi.shape != (k,):
        raise ValueError(f"xi must have {k} entries (got {xi.size})")
    if np.isnan(xi).any() or (xi < 0).any():
        raise ValueError("xi must be non-negative (0: not asked, inf: released exactly)")


def _psi_squared(psi) -> np.ndarray:
    p2 = np.asarray(psi, dtype=float).reshape(-1) ** 2
    if p2.size < 1 or not np.isfinite(p2).all():
        raise ValueError("psi must be a non-empty finite vector")
    if not (p2 > 0).any():
        raise ValueError("psi is zero: the query never changes between neighbours (no noise needed)")
    return p2


def box_sensitivity(psi, xi) -> float:
    r"""Lemma 2.2: :math:`\Delta(f_\xi) = \sqrt{\sum_i \xi_i\psi_i^2}` on a box (ψ_i = 0 where ξ_i = ∞).

    Raises
    ------
    ValueError
        If a coordinate with ψ_i ≠ 0 is released exactly (ξ_i = ∞): infinite sensitivity.
    """
    p2 = _psi_squared(psi)
    xi = np.asarray(xi, dtype=float).reshape(-1)
    check_xi(xi, p2.size)
    if (np.isinf(xi) & (p2 > 0)).any():
        raise ValueError("a coordinate that changes between neighbours cannot be released exactly")
    finite = np.isfinite(xi)
    return math.sqrt(float(np.sum(xi[finite] * p2[finite])))


def volume_optimal_xi(psi) -> np.ndarray:
    r"""Theorem 2.1(3): :math:`\xi^*_i = (\|\psi\|^2/k')/\psi_i^2` (k' the coordinates with ψ_i ≠ 0).

    It keeps :math:`\sum_i\xi^*_i\psi_i^2 = \|\psi\|^2` (same privacy as f); ψ_i = 0
    coordinates get ξ_i = ∞ (released exactly).

    Examples
    --------
    >>> volume_optimal_xi([1.0, 2.0]).tolist()
    [2.5, 0.625]
    """
    p2 = _psi_squared(psi)
    noisy = p2 > 0
    xi = np.full(p2.size, np.inf)
    xi[noisy] = p2.sum() / (noisy.sum() * p2[noisy])
    return xi


def power_optimal_xi(psi, eta) -> np.ndarray:
    r"""Theorem 2.4(3): all weight on :math:`j^* = \arg\max_i \eta_i^2/\psi_i^2`,
    :math:`\xi_{j^*} = \|\psi\|^2/\psi_{j^*}^2`.

    ψ_i = 0 coordinates are released exactly (ξ_i = ∞); if η is non-zero on one of them
    the test is already perfect and j* is still chosen among the others. Ties in the
    argmax take the first index (any split among tied indices is optimal).

    Examples
    --------
    >>> power_optimal_xi([1.0, 2.0], [1.0, 1.0]).tolist()
    [5.0, 0.0]
    """
    p2 = _psi_squared(psi)
    e2 = np.asarray(eta, dtype=float).reshape(-1) ** 2
    if e2.shape != p2.shape:
        raise ValueError(f"eta must have {p2.size} entries (got {e2.size})")
    if not (e2 > 0).any():
        raise ValueError("eta equals the null hypothesis (all zeros)")
    noisy = p2 > 0
    ratio = np.where(noisy, e2 / np.where(noisy, p2, 1.0), -1.0)
    j = int(np.argmax(ratio))
    xi = np.where(noisy, 0.0, np.inf)
    xi[j] = p2.sum() / p2[j]
    return xi


def volume_ratio(psi) -> float:
    r"""The volume ratio of Theorem 2.1,
    :math:`\mathrm{Vol}(CR_{\xi^*})/\mathrm{Vol}(CR_{\xi=1})
    = \bigl((\prod\psi_i^2)^{1/k}/\overline{\psi^2}\bigr)^{k/2}`.

    0 when some ψ_i = 0 (that coordinate is then exact: the limit of the formula).

    Examples
    --------
    >>> round(volume_ratio([1.0, 2.0]), 12)
    0.8
    """
    p2 = _psi_squared(psi)
    if (p2 == 0).any():
        return 0.0
    k = p2.size
    return math.exp(0.5 * k * (float(np.mean(np.log(p2))) - math.log(float(p2.mean()))))


def scaled_log_ci_volume(xi, sigma: float, alpha: float = 0.05) -> float:
    r"""log of eq. (6), :math:`V_r (\sigma^2 t)^{r/2}\det[\mathrm{Diag}(\xi)]^{-1/2}` over the noisy coordinates
    (:func:`~dpopt.stats.inference.log_ci_volume`: finite beyond the double range).

    Exact coordinates (ξ = ∞) add no volume (the region is a point along them); a
    coordinate not asked (ξ = 0) makes it unbounded (∞).
    """
    xi = np.asarray(xi, dtype=float).reshape(-1)
    check_xi(xi, xi.size)
    if (xi == 0).any():
        return math.inf
    noisy = _noisy(xi)
    log_det = float(np.sum(2.0 * math.log(sigma) - np.log(xi[noisy])))
    return log_ci_volume(int(noisy.sum()), log_det, alpha)


def scaled_ci_volume(xi, sigma: float, alpha: float = 0.05) -> float:
    """Eq. (6) itself (:func:`scaled_log_ci_volume`), +inf beyond the double range or when unbounded."""
    return exp_or_inf(scaled_log_ci_volume(xi, sigma, alpha))


def scaled_test_power(xi, eta, sigma: float, alpha: float = 0.05) -> float:
    r"""Power of the LR test (7),
    :math:`1 - \Phi(z_{1-\alpha} - \sqrt{\eta^\top\mathrm{Diag}(\xi)\eta}/\sigma)`.

    A non-zero η_i on an exact coordinate (ξ_i = ∞) is detected with certainty (power 1).

    Examples
    --------
    >>> round(scaled_test_power([5.0, 0.0], [1.0, 1.0], 1.0), 6)
    0.722812
    """
    xi = np.asarray(xi, dtype=float).reshape(-1)
    e = np.asarray(eta, dtype=float).reshape(-1)
    check_xi(xi, e.size)
    if (np.isinf(xi) & (e != 0)).any():
        return 1.0
    noisy = _noisy(xi)
    lam = math.sqrt(float(np.sum(xi[noisy] * e[noisy] ** 2))) / sigma
    return power_from_noncentrality(lam, alpha)


@dataclass(frozen=True)
class FixedDataDesign:
    """The paper's fixed-data design for one goal at an (ε, δ) target.

    Attributes
    ----------
    xi : ndarray
        The optimal ξ (paper normalisation ψᵀDiag(ξ)ψ = ‖ψ‖²).
    sigma : float
        Certified noise scale for the adjusted query (= Δ(f)/s*(ε, δ) up to the safe rounding).
    sensitivity : float
        Δ(f_ξ), equal to Δ(f) = ‖ψ‖.
    noise_sd : ndarray
        Standard deviation of the recovered estimate per coordinate, σ/√ξ_i (0 exact, ∞ not asked).
    objective : str
    value, baseline : float
        The goal's value at ξ and at ξ = 1 (plain f, same privacy).
    ratio : float
        value / baseline.
    """

    xi: np.ndarray
    sigma: float
    sensitivity: float
    noise_sd: np.ndarray
    objective: str
    value: float
    baseline: float
    ratio: float


def design_fixed_data(psi, epsilon: float, delta: float, objective: str = "ci_volume", eta=None,
                      alpha: float = 0.05) -> FixedDataDesign:
    """Theorem 2.1 / 2.4 end to end: optimal ξ, Gaussian σ calibrated by the analytic condition (4).

    σ is the smallest float whose 60-digit analytic-Gaussian check (Balle & Wang, Thm 8)
    passes for the adjusted sensitivity Δ(f_ξ), evaluated exactly in rationals.

    Parameters
    ----------
    psi : array_like
        ψ = f(S̃) − f(S̃′), the per-coordinate worst-case differences (box sensitivity region).
    epsilon, delta : float
        The (ε, δ)-DP target.
    objective : {'ci_volume', 'test_power'}
    eta : array_like, optional
        The alternative (required for ``test_power``).
    alpha : float
        Confidence 1 − α / test level α.
    """
    p2 = _psi_squared(psi)
    if objective == "ci_volume":
        xi = volume_optimal_xi(psi)
    elif objective == "test_power":
        if eta is None:
            raise ValueError("objective 'test_power' needs eta")
        xi = power_optimal_xi(psi, eta)
    else:
        raise ValueError(f"objective must be 'ci_volume' or 'test_power' (got {objective!r})")
    privacy = Privacy(approx=ApproxTarget(epsilon=epsilon, delta=delta))
    finite = np.isfinite(xi)
    terms = zip(xi[finite], p2[finite])
    adjusted = sum((Fraction(float(x)) * Fraction(float(p)) for x, p in terms), Fraction(0))
    plain = sum((Fraction(float(v)) ** 2 for v in np.asarray(psi, dtype=float).reshape(-1)), Fraction(0))
    sigma = gaussian_sigma(adjusted, privacy)
    sigma_plain = gaussian_sigma(plain, privacy)
    if objective == "ci_volume":
        value = scaled_ci_volume(xi, sigma, alpha)
        baseline = scaled_ci_volume(np.ones(p2.size), sigma_plain, alpha)
    else:
        value = scaled_test_power(xi, eta, sigma, alpha)
        baseline = scaled_test_power(np.ones(p2.size), eta, sigma_plain, alpha)
    with np.errstate(divide="ignore"):
        sd = np.where(np.isinf(xi), 0.0, sigma / np.sqrt(np.where(np.isinf(xi), 1.0, xi)))
    delta_xi = math.sqrt(float(adjusted))
    return FixedDataDesign(xi, sigma, delta_xi, sd, objective, value, baseline, value / baseline)
