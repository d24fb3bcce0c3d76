r"""Gaussian noise: isotropic N(0, σ²I) and projected N(0, σ²P) on the sensitivity span.

Privacy depends on σ only through μ = Δ₂/σ (Δ₂ the l2 sensitivity): the mechanism is
exactly μ-GDP, (ε, δ(ε; μ))-DP for the analytic-Gaussian profile, and μ²/2-zCDP
(Dong, Roth & Su 2022; Balle & Wang 2018; Bun & Steinke 2016). When the sensitivity
space spans a proper subspace V (rank-deficient: e.g. a table under replace-one, whose
total n is fixed), noise restricted to V, N(0, σ²P_V), has the same guarantee and a
smaller cost E‖Z‖² = σ² rank(V) instead of σ² d (Lee et al. 2022, Thm 2; Cho & Awan,
Algorithm 1). The component of φ(X) orthogonal to V is then released without noise;
it is constant over all datasets the adjacency connects.
"""

from __future__ import annotations

import math

import numpy as np

from dpopt.core import normal
from dpopt.core.checks import Check
from dpopt.mechanisms.base import Mechanism
from dpopt.noise.gaussian import GaussianMarginal, expected_l1, mean_usefulness
from dpopt.noise.law import ProductLaw
from dpopt.privacy.gaussian import gaussian_epsilon
from dpopt.privacy.gaussian_calibration import gaussian_privacy_check, gaussian_sigma
from dpopt.problem import Problem
from dpopt.sensitivity.space import SensitivitySpace
from dpopt.sensitivity.subspace import FullSpace, Subspace
from dpopt.spec.models import Privacy
from dpopt.stats.inference import ci_volume, power_from_noncentrality, region_importance_weights

_GAUSSIAN_TARGETS = ("gdp", "zcdp", "approx", "pdp")

MAX_LAW_BASIS_ENTRIES = 20_000_000
"""Entries of the span's basis above which the projected Gaussian states no noise law (160 MB; the
second route projects its sampler's draws on that basis)."""


class GaussianMechanism(Mechanism):
    """Isotropic Gaussian noise N(0, σ² I_d).

    ``span`` is the span V of the sensitivity space (R^d by default): ``ci_volume`` is
    measured on V (see :meth:`Mechanism.expected_utility`).
    """

    family = "gaussian"
    title = "Gaussian, isotropic"

    def __init__(self, sigma: float, dimension: int, span: Subspace | None = None):
        self.sigma = float(sigma)
        self.dimension = int(dimension)
        self.span = FullSpace(self.dimension) if span is None else span

    @classmethod
    def supports(cls, problem: Problem) -> str | None:
        privacy = problem.spec.privacy
        if privacy.definition not in _GAUSSIAN_TARGETS:
            return f"Gaussian noise cannot meet a {privacy.definition} target"
        return None

    @classmethod
    def design(cls, problem: Problem) -> "GaussianMechanism":
        space = problem.space
        return cls(gaussian_sigma(space.l2_squared, problem.spec.privacy), space.dimension, space.span)

    @classmethod
    def from_parameters(cls, parameters: dict, space: SensitivitySpace) -> "GaussianMechanism":
        return cls(parameters["sigma"], space.dimension, space.span)

    @property
    def parameters(self) -> dict:
        return {"sigma": self.sigma}

    def _sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return rng.normal(0.0, self.sigma, size=(size, self.dimension))

    def _privacy_checks(self, space: SensitivitySpace, privacy: Privacy) -> list[Check]:
        return [gaussian_privacy_check(space.l2_squared, self.sigma, privacy)]

    def privacy_summary(self, space: SensitivitySpace) -> dict:
        mu = space.l2 / self.sigma
        return {
            "mu": mu,
            "rho": mu * mu / 2.0,
            "epsilon_at_delta": {
                f"{delta:g}": gaussian_epsilon(delta, mu) for delta in (1e-5, 1e-6, 1e-10)
            },
            "conversion": "exact: μ = Δ₂/σ, analytic-Gaussian (ε, δ) profile",
        }

    def noise_law(self) -> ProductLaw:
        """d i.i.d. N(0, σ²) coordinates."""
        return ProductLaw.iid(GaussianMarginal(self.sigma), self.dimension, f"N(0, σ²I_d), σ = {self.sigma:.17g}")

    def _covariance_diagonal(self) -> np.ndarray:
        return np.full(self.dimension, self.sigma**2)

    def _expected_l2(self, workload: np.ndarray | None) -> float:
        if workload is None:
            return self.sigma**2 * self.dimension
        return self.sigma**2 * float(np.sum(workload**2))

    def _expected_l1(self) -> float:
        return expected_l1(np.sqrt(self._covariance_diagonal()))

    def _usefulness(self, gamma: float) -> float:
        return mean_usefulness(np.sqrt(self._covariance_diagonal()), gamma)

    def _max_variance(self) -> float:
        return float(self._covariance_diagonal().max())

    def noise_covariance(self) -> np.ndarray:
        """The noise covariance as a dense d × d matrix (for :mod:`dpopt.stats.inference`)."""
        return self.sigma**2 * np.eye(self.dimension)

    def _ci_volume(self, alpha: float) -> float:
        # P_V Z ~ N(0, σ² I_r) on V for both the isotropic and the projected noise
        return ci_volume(self.span.rank, 2.0 * self.span.rank * math.log(self.sigma), alpha)

    def _exact_shift(self, alternative: np.ndarray) -> bool:
        """Whether part of the shift lies off the noise's support (then it is seen exactly)."""
        if not self.noise_in_span:
            return False
        off = alternative - self.span.project(alternative)
        return bool(np.linalg.norm(off) > 1e-9 * max(1.0, float(np.linalg.norm(alternative))))

    def _test_power(self, alternative: np.ndarray, alpha: float) -> float:
        if self._exact_shift(alternative):
            return 1.0
        return power_from_noncentrality(float(np.linalg.norm(alternative)) / self.sigma, alpha)

    def _inference_draws(self, metric, z, alpha, alternative) -> np.ndarray:
        """``test_power``: the LR test's rejections of η + Z (statistic ηᵀ(η+Z)/(σ‖η‖) > z₁₋α);
        ``ci_volume``: importance weights 1{‖P_V Z‖² ≤ σ²t}/p(P_V Z) (p the N(0, σ²I_r)
        density on V), whose mean is the region's volume."""
        if metric == "test_power":
            if self._exact_shift(alternative):
                return np.ones(z.shape[0])
            norm = float(np.linalg.norm(alternative))
            statistic = (alternative @ alternative + z @ alternative) / (self.sigma * norm)
            return (statistic > normal.ndtri(1.0 - alpha)).astype(float)
        r = self.span.rank
        q = np.sum(self.span.project(z) ** 2, axis=1) / self.sigma**2
        return region_importance_weights(q, r, 2.0 * r * math.log(self.sigma), alpha)


class ProjectedGaussianMechanism(GaussianMechanism):
    """Gaussian noise on the span V of the sensitivity space: N(0, σ² P_V).

    Sampled as P_V z with z ~ N(0, σ² I) (the projector applied implicitly).
    """

    family = "projected_gaussian"
    title = "Gaussian, projected on the sensitivity span"
    noise_in_span = True

    def __init__(self, sigma: float, space: SensitivitySpace):
        super().__init__(sigma, space.dimension)
        self.span = space.span

    @classmethod
    def supports(cls, problem: Problem) -> str | None:
        reason = super().supports(problem)
        if reason is None and not problem.space.rank_deficient:
            return "the sensitivity space spans all of R^d: projection changes nothing (use gaussian)"
        return reason

    @classmethod
    def design(cls, problem: Problem) -> "ProjectedGaussianMechanism":
        return cls(gaussian_sigma(problem.space.l2_squared, problem.spec.privacy), problem.space)

    @classmethod
    def from_parameters(cls, parameters: dict, space: SensitivitySpace) -> "ProjectedGaussianMechanism":
        return cls(parameters["sigma"], space)

    @property
    def parameters(self) -> dict:
        return {"sigma": self.sigma, "span_rank": self.span.rank, "span": self.span.name}

    def _sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return self.span.project(rng.normal(0.0, self.sigma, size=(size, self.dimension)))

    def noise_law(self) -> ProductLaw | str:
        """r i.i.d. N(0, σ²) coordinates in an orthonormal basis of the span (r = its rank); the
        reason it is not built when that d × r basis has more than :data:`MAX_LAW_BASIS_ENTRIES`."""
        if self.span.ambient * self.span.rank > MAX_LAW_BASIS_ENTRIES:
            return (f"the {self.span.ambient} x {self.span.rank} basis of the span is too large for the second "
                    f"route (more than {MAX_LAW_BASIS_ENTRIES} entries)")
        return ProductLaw((GaussianMarginal(self.sigma),) * self.span.rank, self.dimension, self.span.basis(), None,
                          f"N(0, σ²P_V) on the {self.span.rank}-dimensional span V, σ = {self.sigma:.17g}")

    def notes(self) -> list[str]:
        return super().notes() + [
            f"noise lies in the {self.span.rank}-dimensional span of the sensitivity space; the "
            "component of the answer orthogonal to it is released exactly (it is the same on "
            "every dataset the adjacency connects, e.g. the total under replace_one)"
        ]

    def _covariance_diagonal(self) -> np.ndarray:
        return self.sigma**2 * self.span.projector_diagonal()

    def noise_covariance(self) -> np.ndarray:
        basis = self.span.basis()
        return self.sigma**2 * (basis @ basis.T)

    def _expected_l2(self, workload: np.ndarray | None) -> float:
        if workload is None:
            return self.sigma**2 * self.span.rank
        return self.sigma**2 * float(np.sum(self.span.project(workload) ** 2))
