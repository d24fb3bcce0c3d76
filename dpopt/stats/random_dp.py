r"""Random normal data (Shoham & Rinott, Section 3): the mean query with known Σ under Random DP.

Rows :math:`S_\ell \sim N(\mu^*, \Sigma)` iid, Σ known, μ* unknown; the query is the mean
:math:`f(S) = \frac1n\sum_\ell S_\ell \sim N(\mu^*, \Sigma_n)`, :math:`\Sigma_n = \Sigma/n`, and
the adjusted (whitened) query is :math:`g(S) = \Sigma_n^{-1/2} f(S)`.

**Random DP** (Hall, Wasserman & Rinaldo; the paper's Def. 3.1; *not* Rényi DP): the DP
inequality must hold for neighbours (the last row replaced by a fresh iid row) with
probability at least 1 − γ over the data. It is met through a *privacy set* H of
neighbouring pairs with P(H) = 1 − γ, the sensitivity being the maximum over H:

* :math:`H_g = \{\|g(S) - g(S')\|^2 \le 2r^2/n\}`, :math:`r^2 = \chi^2_{k,1-\gamma}`, since
  :math:`\|g(S)-g(S')\|^2 \sim (2/n)\chi^2_k` (eq. 8). Then :math:`D(g) = \sqrt{2r^2/n}` and
  :math:`D(fg) = \max_{H_g}\|f(S)-f(S')\| = \sqrt{\lambda_{\max}(\Sigma_n)}\,D(g)` (Lemma 3.2);
* :math:`H_f = \{\|f(S)-f(S')\|^2 \le C^2\}` with :math:`C^2` the (1 − γ) quantile of
  :math:`\sum_i (2\lambda_i(\Sigma_n)/n)X_i`, :math:`X_i` iid χ²₁ (a weighted χ², computed by
  Ruben's mixture series, :class:`WeightedChiSquare`); :math:`D(f) = C`.

Each Gaussian mechanism is calibrated with the analytic condition (4) at its own
sensitivity, :math:`\sigma = D/s^*(\varepsilon, \delta)` with :math:`s^*` =
:func:`dpopt.privacy.gaussian.gaussian_mu` (certified, rounded down, so σ is conservative):
:math:`M_g^{H_g}` (σ_g), :math:`M_f^{H_g}` (σ_fg) and :math:`M_f^{H_f}` (σ_f).

**The four degrees of naiveté** (Section 3.4, digest §3.6), for H0: μ* = 0 against
H1: μ* = η at level α, with :math:`a = \eta^\top\Sigma_n^{-1}\eta`,
:math:`b = \|\Sigma_n^{-1}\eta\|^2`, :math:`z = \Phi^{-1}(1-\alpha)`:

* [a] naive (H_f): the noiseless statistic :math:`M^\top\Sigma_n^{-1}\eta` with the correct
  null variance :math:`a + \sigma_f^2 b`: power :math:`1-\Phi(z - a/\sqrt{a+\sigma_f^2 b})`
  (the digest's reconstruction of a test the paper describes in words);
* [b] / [c] the LR test for :math:`M_f \sim N(\mu^*, \Sigma_n + \sigma^2 I)` on H_g (σ_fg) /
  H_f (σ_f): power :math:`1-\Phi(z - \sqrt{\eta^\top(\Sigma_n+\sigma^2 I)^{-1}\eta})` (eq. 11);
* [d] adjusted optimal: query g on H_g and the LR test: power
  :math:`1-\Phi(z-\sqrt{a/(1+\sigma_g^2)})`.

The "super-naive" test ignores the noise also in its critical value; its true size is
:math:`1-\Phi(z\sqrt a/\sqrt{a+\sigma^2 b}) > \alpha`. Confidence regions: volumes
:math:`b_k\sqrt{\det[\Sigma_n(1+\sigma_g^2)]}` for g and :math:`b_k\sqrt{\det[\Sigma_n+\sigma^2 I]}`
for f (Theorem 3.3).

References
----------
.. [1] T. Shoham and Y. Rinott, "Adjusting queries to statistical procedures under
   differential privacy", Sections 3–4 (digest ``papers/001_query_adjusting.md`` §3–4).
.. [2] R. Hall, L. Wasserman and A. Rinaldo, "Random differential privacy", J. Privacy
   and Confidentiality 4(2), 2013.
.. [3] H. Ruben, "Probability content of regions under spherical normal distributions,
   IV: the distribution of homogeneous and non-homogeneous quadratic functions of normal
   variables", Ann. Math. Statist. 33, 1962.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
from scipy import optimize, special

from dpopt.core import normal
from dpopt.privacy.gaussian import gaussian_mu
from dpopt.stats.inference import log_ci_volume, power_from_noncentrality

BLOOD_TEST_COVARIANCE = np.array(
    [
        [1600, -160, -400, 840, 800, -40],
        [-160, 400, 160, -175, -200, 0],
        [-400, 160, 1600, 280, 600, 0],
        [840, -175, 280, 1225, 700, -35],
        [800, -200, 600, 700, 2500, -50],
        [-40, 0, 0, -35, -50, 100],
    ],
    dtype=float,
)
"""Σ of (cholesterol, HDL, Apo A-1, LDL, total lipid, glucose) in (mg/dL)², the paper's Section 4
(upper triangle printed, symmetric)."""

TABLE_1 = (
    {"example": 1, "eta": (10, 5, 10, 8.75, 12.5, 2.5), "n": 50, "delta": 0.02, "gamma": 1e-4},
    {"example": 2, "eta": (10, 5, 10, 8.75, 12.5, 2.5), "n": 50, "delta": 0.0004, "gamma": 1e-6},
    {"example": 3, "eta": (0, 0, 20, 0, 25, 5), "n": 50, "delta": 0.0004, "gamma": 1e-6},
    {"example": 4, "eta": (0, 0, 20, 0, 25, 5), "n": 100, "delta": 0.0001, "gamma": 1e-6},
)
"""The paper's Table 1: alternative η, sample size n, δ and γ of the four examples (α = 0.05)."""


class WeightedChiSquare:
    r"""The law of :math:`Q = \sum_i w_i X_i`, :math:`X_i` iid χ²₁, :math:`w_i > 0` (Ruben 1962).

    .. math:: P(Q > x) = \sum_{j\ge0} c_j\, P(\chi^2_{k+2j} > x/\beta), \quad \beta = \min_i w_i,

    with :math:`c_0 = \prod_i\sqrt{\beta/w_i}`, :math:`g_j = \tfrac12\sum_i(1-\beta/w_i)^j` and
    :math:`c_j = \tfrac1j\sum_{m=0}^{j-1} g_{j-m}c_m`. All terms are non-negative, so the
    truncation error of the tail is at most the missing mass :math:`1 - \sum_j c_j`; the
    number of terms doubles until it is below ``tol`` (keep tol ≳ 1e-15: the float floor).

    Parameters
    ----------
    weights : array_like
        Positive weights w_i.
    tol : float
        Bound on the neglected mixture mass.
    """

    def __init__(self, weights, tol: float = 1e-14, max_terms: int = 1 << 17):
        w = np.asarray(weights, dtype=float).reshape(-1)
        if w.size < 1 or not (w > 0).all() or not np.isfinite(w).all():
            raise ValueError("weights must be positive and finite")
        self.weights = w
        self.beta = float(w.min())
        ratio = 1.0 - self.beta / w
        terms = 64
        while True:
            g = 0.5 * np.sum(ratio[None, :] ** np.arange(1, terms + 1)[:, None], axis=1)
            c = np.zeros(terms + 1)
            c[0] = float(np.prod(np.sqrt(self.beta / w)))
            for j in range(1, terms + 1):
                c[j] = float(np.dot(g[:j][::-1], c[:j])) / j
            missing = 1.0 - float(c.sum())
            if missing < tol or terms >= max_terms:
                break
            terms *= 2
        self.missing_mass = max(missing, 0.0)
        self.coefficients = c
        self._dofs = w.size + 2 * np.arange(terms + 1)

    def sf(self, x: float) -> float:
        """P(Q > x) (too small by at most :attr:`missing_mass`)."""
        if x <= 0:
            return 1.0
        return float(np.dot(self.coefficients, special.chdtrc(self._dofs, x / self.beta)))

    def cdf(self, x: float) -> float:
        return 1.0 - self.sf(x)

    def isf(self, q: float) -> float:
        """The x with P(Q > x) = q, by root-finding on log P(Q > x) in log x."""
        if not (0.0 < q < 1.0):
            raise ValueError(f"q must lie in (0, 1) (got {q})")
        total = float(self.weights.sum())
        lo, hi = math.log(total * 1e-6), math.log(total * 1e3)
        while self.sf(math.exp(hi)) > q:
            hi += math.log(10.0)
        target = math.log(q)
        return math.exp(optimize.brentq(lambda lx: math.log(max(self.sf(math.exp(lx)), 1e-300)) - target,
                                        lo, hi, xtol=1e-14))


def fact_threshold(k: int) -> float:
    """1 − F_{χ²_k}(2k): γ at or below it guarantees C² ≥ λ̄·D(g)² (the paper's Fact; Diaconis–Perlman).

    Examples
    --------
    >>> round(fact_threshold(6), 6)   # the paper prints 0.062
    0.061969
    """
    return float(special.chdtrc(k, 2 * k))


@dataclass(frozen=True)
class NaivetePowers:
    """Powers of the four analyses of Section 3.4 ([a]–[d]) and the super-naive test's true size."""

    naive_f: float
    optimal_fg: float
    optimal_f: float
    adjusted_g: float
    super_naive_size: float


@dataclass(frozen=True)
class RandomDPDesign:
    """The three RDP(ε, δ, γ) Gaussian mechanisms for the mean of n rows N(μ*, Σ), Σ known.

    Build with :meth:`create`. Attributes are the paper's quantities: ``sigma_n`` (Σ/n),
    ``eigenvalues`` (of Σ_n), ``r2`` (χ²_{k,1−γ}), ``d_g``, ``d_fg``, ``c`` (= D(f)),
    ``s_star`` (the analytic-Gaussian Δ/σ), ``sigma_g``, ``sigma_fg``, ``sigma_f``.
    """

    covariance: np.ndarray
    n: int
    epsilon: float
    delta: float
    gamma: float
    sigma_n: np.ndarray
    eigenvalues: np.ndarray
    r2: float
    d_g: float
    d_fg: float
    c: float
    s_star: float
    sigma_g: float
    sigma_fg: float
    sigma_f: float

    @classmethod
    def create(cls, covariance, n: int, epsilon: float, delta: float, gamma: float) -> "RandomDPDesign":
        """Privacy sets, sensitivities and calibrated σ's (digest §4.3 recipe).

        Raises
        ------
        ValueError
            If Σ is not symmetric positive definite or a parameter is out of range.
        """
        cov = np.asarray(covariance, dtype=float)
        if cov.ndim != 2 or cov.shape[0] != cov.shape[1] or not np.allclose(cov, cov.T):
            raise ValueError("covariance must be a symmetric matrix")
        k = cov.shape[0]
        if k < 2:
            raise ValueError("the paper's comparison needs k > 1 coordinates")
        if not (n >= 1 and 0 < gamma < 1):
            raise ValueError("need n >= 1 and gamma in (0, 1)")
        sigma_n = cov / n
        lam = np.linalg.eigvalsh(sigma_n)
        if lam.min() <= 0:
            raise ValueError("covariance must be positive definite")
        r2 = float(special.chdtri(k, gamma))
        d_g = math.sqrt(2.0 * r2 / n)
        d_fg = math.sqrt(float(lam.max())) * d_g
        c = math.sqrt(WeightedChiSquare(2.0 * lam / n).isf(gamma))
        s = gaussian_mu(epsilon, delta)
        return cls(cov, n, epsilon, delta, gamma, sigma_n, lam, r2, d_g, d_fg, c, s, d_g / s, d_fg / s, c / s)

    def at_epsilon(self, epsilon: float, delta: float | None = None) -> "RandomDPDesign":
        """The same privacy sets (they depend on Σ, n, γ only) calibrated for another (ε, δ)."""
        delta = self.delta if delta is None else delta
        s = gaussian_mu(epsilon, delta)
        return dataclasses.replace(self, epsilon=epsilon, delta=delta, s_star=s, sigma_g=self.d_g / s,
                                   sigma_fg=self.d_fg / s, sigma_f=self.c / s)

    @property
    def k(self) -> int:
        return self.covariance.shape[0]

    # ------------------------------------------------------------ the queries
    def whitening(self) -> tuple[np.ndarray, np.ndarray]:
        """(Σ_n^{-1/2}, Σ_n^{1/2}) (symmetric roots): g = Σ_n^{-1/2} f and back."""
        w, v = np.linalg.eigh(self.sigma_n)
        return (v / np.sqrt(w)) @ v.T, (v * np.sqrt(w)) @ v.T

    def in_h_g(self, f_difference) -> np.ndarray:
        """Whether neighbour differences f(S) − f(S′) (rows) lie in H_g: ‖Σ_n^{-1/2}Δf‖² ≤ 2r²/n."""
        inv_root, _ = self.whitening()
        d = np.atleast_2d(np.asarray(f_difference, dtype=float)) @ inv_root
        return np.sum(d**2, axis=1) <= self.d_g**2

    def in_h_f(self, f_difference) -> np.ndarray:
        """Whether neighbour differences lie in H_f: ‖Δf‖² ≤ C²."""
        d = np.atleast_2d(np.asarray(f_difference, dtype=float))
        return np.sum(d**2, axis=1) <= self.c**2

    def release(self, f_value, mechanism: str, rng: np.random.Generator) -> np.ndarray:
        """One release: ``"g"`` (M_g^{H_g}, returned un-whitened: Σ_n^{1/2}M_g), ``"fg"`` or ``"f"``."""
        f = np.asarray(f_value, dtype=float).reshape(-1)
        if mechanism == "g":
            inv_root, root = self.whitening()
            return root @ (inv_root @ f + rng.normal(0.0, self.sigma_g, self.k))
        sigma = {"fg": self.sigma_fg, "f": self.sigma_f}[mechanism]
        return f + rng.normal(0.0, sigma, self.k)

    def estimate_covariance(self, mechanism: str) -> np.ndarray:
        """Covariance of the estimate of μ*: (1 + σ_g²)Σ_n for g; Σ_n + σ²I for fg and f."""
        if mechanism == "g":
            return (1.0 + self.sigma_g**2) * self.sigma_n
        sigma = {"fg": self.sigma_fg, "f": self.sigma_f}[mechanism]
        return self.sigma_n + sigma**2 * np.eye(self.k)

    # ------------------------------------------------------------ inference
    def powers(self, eta, alpha: float = 0.05) -> NaivetePowers:
        """Powers [a]–[d] of Section 3.4 against H1: μ* = η (see the module docstring)."""
        eta = np.asarray(eta, dtype=float).reshape(-1)
        prec = np.linalg.inv(self.sigma_n)
        a = float(eta @ prec @ eta)
        b = float(np.sum((prec @ eta) ** 2))
        z = float(normal.ndtri(1.0 - alpha))

        def lr(mechanism: str) -> float:
            cov = self.estimate_covariance(mechanism)
            return power_from_noncentrality(math.sqrt(float(eta @ np.linalg.solve(cov, eta))), alpha)

        return NaivetePowers(
            naive_f=power_from_noncentrality(a / math.sqrt(a + self.sigma_f**2 * b), alpha),
            optimal_fg=lr("fg"),
            optimal_f=lr("f"),
            adjusted_g=lr("g"),
            super_naive_size=float(normal.ndtr(-z * math.sqrt(a) / math.sqrt(a + self.sigma_f**2 * b))),
        )

    def log_ci_volume(self, mechanism: str, alpha: float = 0.05) -> float:
        """log volume of the 1 − α confidence region for μ* from mechanism ``"g"``, ``"fg"`` or ``"f"``."""
        log_det = float(np.linalg.slogdet(self.estimate_covariance(mechanism))[1])
        return log_ci_volume(self.k, log_det, alpha)

    def volume_ratios(self) -> tuple[float, float]:
        """(Vol CR_g / Vol CR_fg, Vol CR_g / Vol CR_f) — independent of α (Theorem 3.3)."""
        g = self.log_ci_volume("g")
        return math.exp(g - self.log_ci_volume("fg")), math.exp(g - self.log_ci_volume("f"))

    def theorem_3_3_condition(self) -> dict:
        """Theorem 3.3(4)'s sufficient conditions: C² ≥ λ̄·D(g)², and γ ≤ 1 − F_{χ²_k}(2k)."""
        return {
            "c2": self.c**2,
            "mean_eigenvalue_times_dg2": float(self.eigenvalues.mean()) * self.d_g**2,
            "c2_at_least_mean_eigenvalue_dg2": self.c**2 >= float(self.eigenvalues.mean()) * self.d_g**2,
            "fact_threshold": fact_threshold(self.k),
            "gamma_below_fact_threshold": self.gamma <= fact_threshold(self.k),
        }
