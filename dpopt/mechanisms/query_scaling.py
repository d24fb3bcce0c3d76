r"""Query scaling (Shoham & Rinott): Gaussian noise on the adjusted query Diag(ξ)^{1/2}φ, inverted.

The agency answers the adjusted query :math:`\mathrm{Diag}(\xi)^{1/2}\varphi(X) + U`,
:math:`U \sim N(0, \sigma^2 I)`; the release is the analyst's inverse transform
:math:`\mathrm{Diag}(\xi)^{-1/2}(\cdot)`, an unbiased estimate of φ(X) with noise
:math:`N(0, \sigma^2\mathrm{Diag}(\xi)^{-1})`. So, to a user, this family is "the Gaussian
mechanism with per-coordinate noise chosen for the analysis": ξ is optimised for the
spec's utility (``ci_volume``: smallest confidence region; ``test_power``: most powerful
test against ``utility.alternative``; ``l2``: smallest expected squared error of the
workload) over the spec's derived sensitivity space, by
:func:`dpopt.optimize.query_scaling.optimal_diagonal_scaling` (closed forms on a box,
certified convex programs otherwise). ξ is normalised as in the paper, so that the
adjusted query has the same l2 sensitivity as φ (max over the generators of
Σ ξ_i v_i² = Δ₂²); σ is then calibrated like the isotropic Gaussian's.

Coordinates that never change between neighbours are released exactly (ξ_i = ∞, shown
as ``null`` in the parameters); coordinates a ``test_power`` design does not ask for
(ξ_i = 0) are not released (NaN, ``null`` in a release file). The family needs the
sensitivity span to be a coordinate subspace (otherwise a diagonal scaling would put
noise on a direction that never changes; ``projected_gaussian`` / ``gaussian_optimal``
handle those spaces).

Privacy: the release is a post-processing of a Gaussian mechanism on the adjusted query,
whose l2 sensitivity :math:`\Delta(f_\xi)^2 = \max_v \sum_i \xi_i v_i^2` is evaluated exactly
(rationals) over the generators of the sensitivity hull; the target is then checked as
for the isotropic Gaussian (μ = Δ(f_ξ)/σ).
"""

from __future__ import annotations

import math

import numpy as np

from dpopt.core import normal
from dpopt.core.checks import Check
from dpopt.mechanisms.base import Mechanism
from dpopt.noise.gaussian import GaussianMarginal, expected_l1, mean_usefulness
from dpopt.noise.law import ProductLaw
from dpopt.optimize.query_scaling import (
    OBJECTIVES,
    adjust_query,
    adjusted_l2_squared,
    invert_adjusted_release,
    optimal_diagonal_scaling,
    scaled_ci_volume,
    scaled_test_power,
)
from dpopt.privacy.gaussian import gaussian_epsilon
from dpopt.privacy.gaussian_calibration import gaussian_privacy_check, gaussian_sigma
from dpopt.problem import Problem
from dpopt.sensitivity.space import SensitivitySpace
from dpopt.spec.models import Privacy
from dpopt.stats.inference import region_importance_weights

_GAUSSIAN_TARGETS = ("gdp", "zcdp", "approx")


def _workload_weights(workload) -> np.ndarray | None:
    """w_i = ‖W e_i‖², the weight of coordinate i's variance in E‖W Z‖²."""
    return None if workload is None else np.sum(np.asarray(workload, dtype=float) ** 2, axis=0)


class QueryScalingMechanism(Mechanism):
    """Gaussian noise N(0, σ² Diag(ξ)⁻¹) = the inverse transform of a scaled query's Gaussian release."""

    family = "query_scaling"
    title = "Gaussian on a scaled query Diag(ξ)^½φ, inverted (Shoham–Rinott)"
    noise_in_span = True

    def __init__(self, xi, sigma: float, objective: str, design_note: str | None = None):
        self.xi = np.asarray(xi, dtype=float).reshape(-1)
        if np.isnan(self.xi).any() or (self.xi < 0).any():
            raise ValueError("xi must be non-negative (0: not asked, inf: released exactly)")
        self.sigma = float(sigma)
        self.objective = objective
        self.dimension = self.xi.size
        self.design_note = design_note

    # ---------------------------------------------------------------- facts
    @classmethod
    def supports(cls, problem: Problem) -> str | None:
        spec, space = problem.spec, problem.space
        if spec.privacy.definition not in _GAUSSIAN_TARGETS:
            return f"Gaussian noise cannot meet a {spec.privacy.definition} target"
        metric = spec.utility.metric
        if metric not in OBJECTIVES:
            return f"query scaling is designed for {', '.join(OBJECTIVES)}, not {metric}"
        if space.dimension < 2:
            return "the query has one coordinate: scaling it changes nothing (Shoham & Rinott need k > 1)"
        if spec.invariants and metric == "test_power":
            return ("a test_power design leaves coordinates unreleased, so the release would not keep "
                    "the invariants")
        # a coordinate subspace has projector diagonal in {0, 1} (each e_i inside it or orthogonal to it)
        diagonal = space.span.projector_diagonal()
        if not np.all((np.abs(diagonal) <= 1e-9) | (np.abs(diagonal - 1.0) <= 1e-9)):
            return (
                "the sensitivity span is not a coordinate subspace, so a diagonal scaling would add noise "
                "to a direction that never changes (use projected_gaussian or gaussian_optimal)"
            )
        vectors = space.listed()
        if vectors is None:
            return "the sensitivity space is too large to list the generators of its hull"
        changing = (np.asarray(vectors) != 0).any(axis=0)
        if int(changing.sum()) != space.rank:
            return "the listed generators do not span the sensitivity space"
        weights = _workload_weights(spec.utility.workload)
        if weights is not None and weights.size == space.dimension and not (weights[changing] > 0).all():
            return "the workload ignores a coordinate of the query; remove it from the query"
        return None

    @classmethod
    def design(cls, problem: Problem) -> "QueryScalingMechanism":
        """ξ optimal for the spec's metric, scaled so that Δ(f_ξ) = Δ(f); σ certified for Δ(f_ξ)."""
        spec, space = problem.spec, problem.space
        vectors = space.vectors()
        u = spec.utility
        scaling = optimal_diagonal_scaling(
            vectors, u.metric, eta=u.alternative, weights=_workload_weights(u.workload)
        )
        xi = scaling.xi.copy()
        finite = np.isfinite(xi)
        xi[finite] *= float(space.l2_squared)
        noisy = (xi > 0) & finite
        if (noisy == finite).all() and xi[noisy].max() <= xi[noisy].min() * (1.0 + 1e-9):
            xi[noisy] = 1.0  # the optimum is the plain query (up to rounding): state it exactly
        sigma = gaussian_sigma(adjusted_l2_squared(vectors, xi), spec.privacy)
        note = (
            f"ξ optimises {u.metric} over the sensitivity hull by {scaling.method}"
            + (f"; certified duality gap {scaling.duality_gap:.2g}" if scaling.duality_gap else "")
        )
        return cls(xi, sigma, u.metric, note)

    @classmethod
    def from_parameters(cls, parameters: dict, space: SensitivitySpace) -> "QueryScalingMechanism":
        xi = [math.inf if x is None else float(x) for x in parameters["xi"]]
        if len(xi) != space.dimension:
            raise ValueError(f"xi has {len(xi)} entries for a query of dimension {space.dimension}")
        return cls(xi, parameters["sigma"], parameters["objective"])

    @property
    def parameters(self) -> dict:
        return {
            "xi": [None if math.isinf(x) else float(x) for x in self.xi],
            "sigma": self.sigma,
            "objective": self.objective,
        }

    def _variances(self) -> np.ndarray:
        """σ²/ξ_i per coordinate: 0 when released exactly, ∞ when not asked."""
        with np.errstate(divide="ignore"):
            return np.where(np.isinf(self.xi), 0.0, self.sigma**2 / self.xi)

    def noise_law(self) -> ProductLaw:
        """The law of the emitted noise, for the second route of ``dpopt verify`` (:mod:`dpopt.noise.law`)."""
        xi = np.asarray(self.xi, dtype=float)
        noisy = np.flatnonzero(np.isfinite(xi) & (xi > 0))
        basis = np.zeros((self.dimension, noisy.size))
        basis[noisy, np.arange(noisy.size)] = 1.0
        marginals = tuple(GaussianMarginal(self.sigma / float(np.sqrt(xi[i]))) for i in noisy)
        return ProductLaw(marginals, self.dimension, basis, xi > 0,
                          f"N(0, σ²Diag(ξ)⁻¹), σ = {self.sigma:.17g}; ξ = ∞ exact, ξ = 0 not released")

    def _sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        sd = np.sqrt(self._variances())
        z = rng.normal(size=(size, self.dimension)) * np.where(np.isinf(sd), 0.0, sd)
        z[:, np.isinf(sd)] = np.nan
        return z

    def _privacy_checks(self, space: SensitivitySpace, privacy: Privacy) -> list[Check]:
        vectors = space.vectors()
        exact = np.isinf(self.xi)
        moving = np.flatnonzero(exact & (np.asarray(vectors) != 0).any(axis=0))
        exact_check = Check(
            "query_scaling.exact_coordinates",
            "every generator of the sensitivity hull is exactly 0 on the coordinates released without noise",
            moving.size == 0,
            f"{int(exact.sum())} exact coordinate(s)"
            + (f"; changing: {moving.tolist()}" if moving.size else ""),
        )
        if moving.size:
            return [exact_check, Check("privacy", "Gaussian noise on the adjusted query", False,
                                       "a coordinate released exactly changes between neighbours")]
        adjusted = adjusted_l2_squared(vectors, self.xi)
        check = gaussian_privacy_check(adjusted, self.sigma, privacy)
        return [
            exact_check,
            Check(
                check.claim,
                check.method + f"; Δ₂ here is that of the adjusted query, Δ(f_ξ)² = max_v Σ ξ_i v_i² "
                f"evaluated exactly over the {len(vectors)} generators",
                check.passed,
                check.detail + f"; Δ(f_ξ)² = {float(adjusted):.17g}",
            ),
        ]

    def notes(self) -> list[str]:
        out = super().notes() + [
            (
                "the agency answers the adjusted query Diag(ξ)^½ φ(X) + N(0, σ²I) (Shoham & Rinott); the "
                "release is its inverse transform Diag(ξ)^-½(·), an unbiased estimate of φ(X) with noise "
                "N(0, σ² Diag(ξ)⁻¹)"
            )
        ]
        exact = np.flatnonzero(np.isinf(self.xi))
        if exact.size:
            out.append(f"coordinates {exact.tolist()} never change between neighbours: released exactly")
        unasked = np.flatnonzero(self.xi == 0)
        if unasked.size:
            out.append(f"coordinates {unasked.tolist()} are not asked (ξ = 0) and not released: the "
                       f"{self.objective} design spends the whole budget on the others")
        if self.design_note:
            out.append(self.design_note)
        return out

    def privacy_summary(self, space: SensitivitySpace) -> dict:
        mu = math.sqrt(float(adjusted_l2_squared(space.vectors(), self.xi))) / self.sigma
        return {
            "mu": mu,
            "rho": mu * mu / 2.0,
            "epsilon_at_delta": {f"{delta:g}": gaussian_epsilon(delta, mu) for delta in (1e-5, 1e-6, 1e-10)},
            "conversion": "exact: μ = Δ(f_ξ)/σ, analytic-Gaussian (ε, δ) profile",
        }

    # ------------------------------------------------------------ release
    def _adjusted_release(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """What the agency publishes for each row φ of ``values`` (m × d): Diag(ξ)^½ φ + N(0, σ²I)
        on the asked, changing coordinates; the exact coordinates unchanged; NaN for coordinates not asked."""
        noisy = (self.xi > 0) & np.isfinite(self.xi)
        draws = rng.normal(0.0, self.sigma, values.shape)
        adjusted = adjust_query(values.ravel(), np.tile(self.xi, values.shape[0])).reshape(values.shape)
        out = adjusted + np.where(noisy, draws, 0.0)
        out[:, self.xi == 0] = np.nan
        return out

    def _release(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The inverse transform of the adjusted release: φ + N(0, σ² Diag(ξ)⁻¹), NaN where not asked."""
        adjusted = self._adjusted_release(values, rng)
        return invert_adjusted_release(adjusted.ravel(), np.tile(self.xi, values.shape[0])).reshape(values.shape)

    def noise_covariance(self) -> np.ndarray:
        """Diag(σ²/ξ): 0 on exact coordinates, ∞ on coordinates not asked."""
        return np.diag(self._variances())

    # ------------------------------------------------------------ utility
    def _expected_l2(self, workload: np.ndarray | None) -> float:
        w = np.ones(self.dimension) if workload is None else _workload_weights(workload)
        var = self._variances()
        return float(np.sum(np.where(w > 0, w * var, 0.0)))

    def _expected_l1(self) -> float:
        return expected_l1(np.sqrt(self._variances()))

    def _usefulness(self, gamma: float) -> float:
        return mean_usefulness(np.sqrt(self._variances()), gamma)

    def _max_variance(self) -> float:
        return float(self._variances().max())

    def _ci_volume(self, alpha: float) -> float:
        return scaled_ci_volume(self.xi, self.sigma, alpha)

    def _test_power(self, alternative: np.ndarray, alpha: float) -> float:
        return scaled_test_power(self.xi, alternative, self.sigma, alpha)

    def _inference_draws(self, metric, z, alpha, alternative) -> np.ndarray:
        """``test_power``: rejections of the LR test (7) on η + Z over the asked coordinates;
        ``ci_volume``: importance weights of the N(0, σ²Diag(ξ)⁻¹) region (mean = its volume)."""
        noisy = (self.xi > 0) & np.isfinite(self.xi)
        if metric == "test_power":
            if (np.isinf(self.xi) & (alternative != 0)).any():
                return np.ones(z.shape[0])
            weight = self.xi[noisy] * alternative[noisy] / self.sigma**2
            lam = math.sqrt(float(weight @ alternative[noisy]))
            statistic = (alternative[noisy] + z[:, noisy]) @ weight / lam
            return (statistic > normal.ndtri(1.0 - alpha)).astype(float)
        if (self.xi == 0).any():
            return np.full(z.shape[0], np.inf)
        q = np.sum(self.xi[noisy] * z[:, noisy] ** 2, axis=1) / self.sigma**2
        log_det = float(np.sum(2.0 * math.log(self.sigma) - np.log(self.xi[noisy])))
        return region_importance_weights(q, int(noisy.sum()), log_det, alpha)

