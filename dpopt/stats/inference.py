r"""Inference on Gaussian releases: confidence regions, likelihood-ratio tests, inversion.

A release :math:`M = \varphi + Z` with :math:`Z \sim N(0, C)` (C known, possibly singular:
directions outside range(C) are released exactly) supports two standard procedures
(Shoham & Rinott, Sections 2.1–2.2; Anderson 2003, p. 79):

* the **confidence region** of level 1 − α for φ,

  .. math:: CR = \{\mu : \mu - M \in \mathrm{range}(C),\ (M-\mu)^\top C^{+} (M-\mu) \le t\},
            \qquad t = \chi^2_{r,\,1-\alpha},\ r = \mathrm{rank}(C),

  whose r-dimensional volume is :math:`V_r\, t^{r/2} \sqrt{\mathrm{pdet}\, C}` with
  :math:`V_r = \pi^{r/2}/\Gamma(r/2+1)`; it is the highest-density (smallest) region of
  the noise, translated to the release;
* the **likelihood-ratio test** of H0: φ = θ₀ against the simple alternative
  H1: φ = θ₀ + η (Neyman–Pearson): with :math:`\lambda^2 = \eta^\top C^{+}\eta`, the
  standardised statistic :math:`T = \eta^\top C^{+}(M - \theta_0)/\lambda` is N(0, 1) under
  H0 and N(λ, 1) under H1, so the level-α test rejects when :math:`T > z_{1-\alpha}` and has
  power :math:`1 - \Phi(z_{1-\alpha} - \lambda)`. The paper's form (eq. 7),
  :math:`M_\xi^\top \mathrm{Diag}(\xi)^{1/2}\eta/\sigma^2 > z_{1-\alpha}\sqrt{\eta^\top
  \mathrm{Diag}(\xi)\eta}/\sigma`, is the same test for :math:`C = \sigma^2\mathrm{Diag}(\xi)^{-1}`.
  If η has a component outside range(C), that component is released exactly and the test
  is perfect (power 1, size 0).

Coordinates of a release that are NaN were not released (a query-scaling design may ask
for some coordinates only); the procedures use the released coordinates' joint law,
which is the corresponding sub-block of C.

The query-scaling transform itself (the adjusted query :math:`\mathrm{Diag}(\xi)^{1/2}\varphi`
and its inverse) lives with its optimiser in :mod:`dpopt.optimize.query_scaling`.

References
----------
.. [1] T. Shoham and Y. Rinott, "Adjusting queries to statistical procedures under
   differential privacy".
.. [2] T. W. Anderson, *An Introduction to Multivariate Statistical Analysis*, 3rd ed., 2003.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dpopt.core import normal
from dpopt.stats.log_volume import VolumeTerms, exp_or_inf

_RTOL = 1e-12


def log_unit_ball_volume(r: int) -> float:
    r"""log V_r, the log-volume of the unit ball of R^r: :math:`\tfrac r2\log\pi-\log\Gamma(\tfrac r2+1)`."""
    return 0.5 * r * math.log(math.pi) - math.lgamma(0.5 * r + 1.0)


def chi2_radius(r: int, alpha: float) -> float:
    """t = the (1 − α) quantile of χ²_r (the squared Mahalanobis radius of a 1 − α region)."""
    from scipy import stats  # imported where used (several numpy imports' time)

    _check_alpha(alpha)
    return float(stats.chi2.isf(alpha, r))


def log_ci_volume(rank: int, log_det: float, alpha: float) -> float:
    r"""log of :math:`V_r\, t^{r/2} \sqrt{\det C_V}` for a Gaussian of rank r with log pdet = ``log_det``."""
    if rank < 1:
        raise ValueError("a confidence region needs at least one noisy direction (rank >= 1)")
    return log_unit_ball_volume(rank) + 0.5 * rank * math.log(chi2_radius(rank, alpha)) + 0.5 * log_det


def ci_volume(rank: int, log_det: float, alpha: float) -> float:
    """Volume of the 1 − α Gaussian confidence ellipsoid (see :func:`log_ci_volume`).

    ∞ when it exceeds the floating-point range (e^709.78) and 0.0 when it underflows:
    use :func:`log_ci_volume` to compare such regions (:mod:`dpopt.stats.log_volume`).

    Examples
    --------
    >>> round(ci_volume(2, 0.0, 0.05), 6)   # π · χ²_{2,0.95} for C = I₂
    18.822741
    """
    return exp_or_inf(log_ci_volume(rank, log_det, alpha))


def region_importance_weights(q: np.ndarray, rank: int, log_det: float, alpha: float) -> VolumeTerms:
    r"""Monte Carlo terms whose mean is the volume of the 1 − α Gaussian region, in units of that volume.

    For draws Z ~ N(0, C_V) of rank r with squared Mahalanobis norms ``q`` = ZᵀC_V⁻¹Z,
    :math:`E[\mathbf 1\{q \le t\}/p(Z)] = \mathrm{vol}\{q \le t\}` (importance sampling
    with the Gaussian density p itself). If the draws do not follow N(0, C_V), the mean
    misses the closed form: the check of a sampler against :func:`log_ci_volume`. The weights
    are divided by the closed-form volume e^L (:class:`~dpopt.stats.log_volume.VolumeTerms` with unit L):
    :math:`e^{-L}/p(Z) = \exp(\tfrac r2\log 2\pi + \tfrac12\log\det C_V + \tfrac q2 - L)`, at most
    :math:`(2/t)^{r/2}\Gamma(r/2 + 1)e^{t/2}` on the region, so they stay finite whatever the volume.
    """
    t = chi2_radius(rank, alpha)
    log_inv_density = 0.5 * rank * math.log(2.0 * math.pi) + 0.5 * log_det + 0.5 * np.asarray(q, dtype=float)
    log_vol = log_ci_volume(rank, log_det, alpha)
    relative = np.where(q <= t, np.exp(np.minimum(log_inv_density - log_vol, 700.0)), 0.0)
    return VolumeTerms(log_vol, relative)


def power_from_noncentrality(lam: float, alpha: float) -> float:
    r"""Power :math:`1 - \Phi(z_{1-\alpha} - \lambda)` of the level-α LR test, λ = √(ηᵀC⁺η)."""
    _check_alpha(alpha)
    if math.isinf(lam):
        return 1.0
    return float(normal.ndtr(lam - normal.ndtri(1.0 - alpha)))


@dataclass(frozen=True)
class ConfidenceRegion:
    """A confidence ellipsoid {μ : μ − c ∈ span(B), (c − μ)ᵀ B P Bᵀ (c − μ) ≤ t}.

    Attributes
    ----------
    center : ndarray, shape (d,)
        The estimate (the released coordinates).
    basis : ndarray, shape (d, r)
        Orthonormal basis of the noisy directions; the others are known exactly.
    precision : ndarray, shape (r, r)
        Inverse covariance of the estimate in that basis.
    t : float
        Squared Mahalanobis radius, χ²_{r, 1−α}.
    alpha : float
    log_volume : float
        log of the r-dimensional volume.
    """

    center: np.ndarray
    basis: np.ndarray
    precision: np.ndarray
    t: float
    alpha: float
    log_volume: float

    @property
    def rank(self) -> int:
        return self.basis.shape[1]

    @property
    def volume(self) -> float:
        return math.exp(self.log_volume)

    def contains(self, point, tol: float = 1e-9) -> bool:
        """Whether ``point`` lies in the region (exact directions compared with a relative tolerance)."""
        diff = np.asarray(point, dtype=float).reshape(-1) - self.center
        coords = self.basis.T @ diff
        outside = diff - self.basis @ coords
        scale = max(1.0, float(np.abs(self.center).max(initial=0.0)))
        if np.abs(outside).max(initial=0.0) > tol * scale:
            return False
        return bool(coords @ self.precision @ coords <= self.t)


@dataclass(frozen=True)
class LikelihoodRatioTest:
    """The level-α likelihood-ratio test of H0: φ = θ₀ against H1: φ = θ₀ + η on one release.

    Attributes
    ----------
    statistic : float
        The standardised statistic T (N(0,1) under H0); for a shift seen exactly, the
        fraction of the exact shift observed (0 under H0, 1 under H1).
    threshold : float
        z_{1−α}, or 1/2 for an exact shift.
    reject : bool
    power : float
        Power against the alternative.
    noncentrality : float
        λ = √(ηᵀC⁺η) (∞ when part of η is seen exactly).
    """

    statistic: float
    threshold: float
    reject: bool
    power: float
    noncentrality: float


def _released(release: np.ndarray) -> np.ndarray:
    mask = np.isfinite(release)
    if not mask.any():
        raise ValueError("the release has no released (finite) coordinate")
    return mask


def _range_split(covariance: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Eigen-split of a PSD matrix: (eigenvalues > tol, their vectors, null-space vectors)."""
    cov = np.asarray(covariance, dtype=float)
    cov = 0.5 * (cov + cov.T)
    w, v = np.linalg.eigh(cov)
    if w.size and w.min() < -1e-9 * max(1.0, w.max()):
        raise ValueError("the covariance is not positive semi-definite")
    keep = w > _RTOL * max(float(w.max(initial=0.0)), 1e-300)
    return w[keep], v[:, keep], v[:, ~keep]


def confidence_region(release, covariance, alpha: float = 0.05, span=None) -> ConfidenceRegion:
    """The 1 − α confidence ellipsoid for φ from a release M = φ + N(0, C).

    Parameters
    ----------
    release : array_like, shape (d,)
    covariance : array_like, shape (d, d)
        C, positive semi-definite; directions outside range(C) are taken as exact.
    alpha : float
    span : array_like, shape (d, r), optional
        Orthonormal basis of a subspace V: the region is then for the projection of φ on
        V, computed from the projected release (post-processing), with covariance BᵀCB.
        Use the span of the sensitivity space to compare mechanisms fairly.

    Returns
    -------
    ConfidenceRegion

    Raises
    ------
    ValueError
        If a coordinate is NaN (not released: no bounded region), or C is not PSD.
    """
    m = np.asarray(release, dtype=float).reshape(-1)
    if not np.isfinite(m).all():
        raise ValueError("some coordinates were not released; a bounded confidence region needs all of them")
    cov = np.asarray(covariance, dtype=float)
    if span is not None:
        b = np.asarray(span, dtype=float)
        cv = b.T @ cov @ b
        w, v, _ = _range_split(cv)
        basis = b @ v
        m = b @ (b.T @ m)
    else:
        w, basis, _ = _range_split(cov)
    rank = basis.shape[1]
    log_det = float(np.sum(np.log(w)))
    return ConfidenceRegion(
        center=m,
        basis=basis,
        precision=np.diag(1.0 / w),
        t=chi2_radius(rank, alpha),
        alpha=alpha,
        log_volume=log_ci_volume(rank, log_det, alpha),
    )


def _shift_noncentrality(covariance: np.ndarray, shift: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """(λ, direction u with T = uᵀx, exact part of the shift) for the LR test of a shift."""
    w, basis, null = _range_split(covariance)
    exact = null @ (null.T @ shift)
    if np.linalg.norm(exact) > 1e-9 * max(1.0, float(np.linalg.norm(shift))):
        return math.inf, exact / float(exact @ exact), exact
    coords = basis.T @ shift
    lam = math.sqrt(float(coords @ (coords / w)))
    if lam == 0.0:
        raise ValueError("the alternative equals the null hypothesis")
    return lam, basis @ (coords / w) / lam, exact


def gaussian_test_power(covariance, shift, alpha: float = 0.05) -> float:
    """Power of the level-α LR test of a shift η for noise N(0, C); NaN-free inputs.

    Examples
    --------
    >>> round(gaussian_test_power(np.eye(2), [1.0, 1.0], 0.05), 6)   # 1 − Φ(1.644854 − √2)
    0.408797
    """
    lam, _, _ = _shift_noncentrality(np.asarray(covariance, dtype=float), np.asarray(shift, dtype=float))
    return power_from_noncentrality(lam, alpha)


def likelihood_ratio_test(release, covariance, null, alternative, alpha: float = 0.05) -> LikelihoodRatioTest:
    """The most powerful level-α test of H0: φ = ``null`` against H1: φ = ``alternative``.

    Coordinates of ``release`` that are NaN (not released) are dropped together with the
    matching rows and columns of the covariance and entries of the hypotheses.

    Raises
    ------
    ValueError
        If the hypotheses coincide on the released coordinates.
    """
    m = np.asarray(release, dtype=float).reshape(-1)
    mask = _released(m)
    cov = np.asarray(covariance, dtype=float)[np.ix_(mask, mask)]
    theta0 = np.asarray(null, dtype=float).reshape(-1)[mask]
    shift = np.asarray(alternative, dtype=float).reshape(-1)[mask] - theta0
    lam, direction, _ = _shift_noncentrality(cov, shift)
    x = m[mask] - theta0
    if math.isinf(lam):
        statistic, threshold = float(direction @ x), 0.5
    else:
        statistic, threshold = float(direction @ x), float(normal.ndtri(1.0 - alpha))
    power = power_from_noncentrality(lam, alpha)
    return LikelihoodRatioTest(statistic, threshold, statistic > threshold, power, lam)


def _check_alpha(alpha: float) -> None:
    if not (0.0 < alpha < 1.0):
        raise ValueError(f"alpha must lie in (0, 1) (got {alpha})")
