r"""Gaussian noise with the optimal covariance for the spec's utility (``gaussian_optimal``).

The release is φ(X) + Z with Z ~ N(0, Σ), Σ the solution of the convex program of
:mod:`dpopt.optimize.covariance` (the utility — workload error, weighted error,
confidence-region volume or worst-coordinate variance — minimised subject to
vᵀΣ⁺v ≤ μ² at every generator v of the sensitivity space). range(Σ) = span(S), so the
component of φ(X) orthogonal to the span (constant between neighbours, e.g. the total
under replace-one, or published invariants) is released exactly.

Privacy, evaluated at the stored Σ and independently of the solver: for v ∈ range(Σ),
T(N(0, Σ), N(v, Σ)) = G_{‖Σ^{+1/2}v‖} (Kim et al., Lemma A.2; Cho & Awan, Lemma 43), and
‖Σ^{+1/2}v‖ is a convex function of v, so the mechanism is exactly μ_Σ-GDP with the
Mahalanobis sensitivity

.. math:: \mu_\Sigma^2 = \max_{v \in \mathrm{gen}(S)} v^\top \Sigma^{+} v ,

hence (ε, δ(ε; μ_Σ))-DP (analytic Gaussian) and μ_Σ²/2-zCDP. The check computes μ_Σ² with an
eigendecomposition of Σ (numerical rank, every generator in range(Σ)), inflates it by a
rounding allowance, and compares it with the target in exact rational arithmetic (gdp,
zcdp) or the 60-digit analytic-Gaussian profile (approx) — the checks of
:func:`dpopt.privacy.gaussian_calibration.gaussian_privacy_check` applied to whitened noise of unit
scale. The design multiplies the solver's Σ by the factor that makes this check hold with
equality up to rounding (:func:`dpopt.core.rounding.nudge_until`), so solver accuracy
never affects the guarantee, only (slightly) the utility.

Sampling draws z ~ N(0, I_r) and returns F z with F = Q_r Λ_r^{1/2} from the eigendecomposition
of Σ: no singular matrix is ever inverted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from dpopt.core import normal
from dpopt.core.checks import Check
from dpopt.core.rounding import nudge_until
from dpopt.core.rows import row_groups
from dpopt.errors import CalibrationError
from dpopt.mechanisms.base import Mechanism
from dpopt.noise.gaussian import GaussianMarginal, expected_l1, mean_usefulness
from dpopt.noise.law import ProductLaw
from dpopt.optimize.covariance import OBJECTIVES, Objective, optimal_covariance, target_mu
from dpopt.privacy.gaussian import gaussian_epsilon
from dpopt.privacy.gaussian_calibration import gaussian_privacy_check
from dpopt.problem import Problem
from dpopt.sensitivity.space import SensitivitySpace
from dpopt.spec.models import Privacy, Spec
from dpopt.stats.inference import ci_volume, power_from_noncentrality, region_importance_weights

_EIGEN_RTOL = 1e-12
"""Eigenvalues of a covariance below this fraction of the largest are taken as 0 in the noise law."""

MAX_DIMENSION = 120
"""Largest query dimension served (Σ is stored densely in the certificate)."""

RANK_TOL = 1e-10
"""Eigenvalues of Σ at most this fraction of the largest are its null space."""

RANGE_TOL = 1e-9
"""Largest relative distance of a generator from range(Σ) accepted by the range check."""

_TARGETS = ("gdp", "zcdp", "approx")


@dataclass(frozen=True)
class MahalanobisSensitivity:
    """sup_v vᵀΣ⁺v over the generators, from one eigendecomposition of Σ.

    Attributes
    ----------
    squared : float
        max_v ‖Λ_r^{-1/2} Q_rᵀ v‖² (floating point).
    upper : float
        ``squared`` × (1 + ``allowance``): an upper bound that covers rounding.
    allowance : float
        64 d ε_mach κ, a first-order bound (with a safety constant) on the relative error of
        the quadratic forms for an eigendecomposition that is backward stable: the computed
        factors are exact for Σ + E with ‖E‖ ≲ d ε_mach ‖Σ‖, which moves vᵀΣ⁺v by a relative
        κ‖E‖/‖Σ‖ at most to first order (κ the condition number of Σ on its range).
    rank : int
        Numerical rank (eigenvalues above :data:`RANK_TOL` × the largest).
    residual : float
        max_v ‖v − Q_r Q_rᵀ v‖ / max_v ‖v‖: distance of the generators from range(Σ).
    negative : float
        The most negative eigenvalue relative to the largest (0 if none).
    """

    squared: float
    upper: float
    allowance: float
    rank: int
    residual: float
    negative: float


DISTINCT_ROWS_FROM = 1_000
"""Generators above which :func:`mahalanobis_sensitivity` works on the distinct rows (a Semi-DP space of the census
plan lists 538,571 moves of 15 cells, 471 distinct: 0.5 s a call, 0.09 s with the hashing)."""


def mahalanobis_sensitivity(sigma: np.ndarray, vectors: np.ndarray) -> MahalanobisSensitivity:
    """The Mahalanobis sensitivity of N(0, Σ) over ``vectors`` (rows), by eigendecomposition."""
    w, q = np.linalg.eigh(sigma)
    top = float(w.max())
    if not top > 0:
        return MahalanobisSensitivity(math.inf, math.inf, math.inf, 0, math.inf, 0.0)
    keep = w > RANK_TOL * top
    qr, wr = q[:, keep], w[keep]
    v = np.atleast_2d(np.asarray(vectors, dtype=float))
    if v.shape[0] > DISTINCT_ROWS_FROM:  # the maxima below are over rows: equal rows give equal terms
        first, _ = row_groups(v + 0.0)  # + 0.0: −0 and 0 are one row
        v = v[np.sort(first)]
    coords = v @ qr
    residual = float(np.linalg.norm(v - coords @ qr.T, axis=1).max() / np.linalg.norm(v, axis=1).max())
    squared = float(np.max(np.sum(coords**2 / wr, axis=1)))
    allowance = 64.0 * sigma.shape[0] * np.finfo(float).eps * top / float(wr.min())
    negative = float(max(0.0, -w.min()) / top)
    return MahalanobisSensitivity(squared, squared * (1.0 + allowance), allowance, int(keep.sum()), residual, negative)


def covariance_checks(sigma: np.ndarray, vectors: np.ndarray, space: SensitivitySpace, privacy: Privacy) -> list[Check]:
    """The range check and the privacy check of N(0, Σ) on ``space`` (see the module docstring)."""
    sens = mahalanobis_sensitivity(sigma, vectors)
    symmetric = bool(np.array_equal(sigma, sigma.T))
    range_ok = (
        symmetric
        and sens.rank == space.rank
        and sens.residual <= RANGE_TOL
        and sens.negative <= RANK_TOL
    )
    range_check = Check(
        "covariance.range",
        f"eigendecomposition of Σ: symmetric, Σ ⪰ 0 (eigenvalues ≥ −{RANK_TOL:g}·max), numerical rank "
        f"= rank of the sensitivity space, every generator in range(Σ) (relative residual ≤ {RANGE_TOL:g})",
        range_ok,
        f"symmetric={symmetric}, rank {sens.rank} vs {space.rank}, residual {sens.residual:.3g}, "
        f"most negative eigenvalue {sens.negative:.3g}·max",
    )
    if not math.isfinite(sens.upper):
        return [range_check, Check("privacy", "Mahalanobis sensitivity", False, "Σ has no positive eigenvalue")]
    inner = gaussian_privacy_check(Fraction(sens.upper), 1.0, privacy)
    privacy_check = Check(
        "privacy",
        f"Mahalanobis sensitivity μ_Σ² = max over {np.atleast_2d(vectors).shape[0]} generators of vᵀΣ⁺v "
        f"by eigendecomposition, × (1 + {sens.allowance:.2g}) for rounding; N(0, Σ) is then exactly "
        f"μ_Σ-GDP (whitened noise of unit scale): {inner.method}",
        range_ok and inner.passed,
        f"μ_Σ = {math.sqrt(sens.squared):.17g} (upper {math.sqrt(sens.upper):.17g}); {inner.detail}",
    )
    return [range_check, privacy_check]


def table_shape(spec: Spec) -> tuple[int, ...] | None:
    """Levels per attribute when the query's coordinates are the cells of one table (read from
    the spec's query and attributes, without compiling the query)."""
    query = spec.query
    if query.kind == "histogram":
        return (len(spec.data.attributes[query.attribute]),)
    if query.kind == "contingency_table":
        return tuple(len(spec.data.attributes[a]) for a in query.attributes)
    return None


def _generators(space: SensitivitySpace) -> np.ndarray:
    try:
        return space.vectors()
    except ValueError as exc:
        raise CalibrationError(f"the optimal covariance needs the generators of the sensitivity space: {exc}") from None


def _json_float(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


class GaussianOptimalMechanism(Mechanism):
    """Gaussian noise N(0, Σ) with Σ optimal for the spec's quadratic utility.

    Parameters
    ----------
    covariance : ndarray, shape (d, d)
        Σ (symmetric, positive semidefinite, range(Σ) = span of the sensitivity space).
    space : SensitivitySpace
    design : dict, optional
        How Σ was obtained (objective, method, constraint counts, scale factor, duality
        gap, comparison with isotropic and projected Gaussian noise); recorded, not used
        to rebuild Σ.
    """

    family = "gaussian_optimal"
    title = "Gaussian, optimal covariance (convex program)"
    noise_in_span = True

    def __init__(self, covariance: np.ndarray, space: SensitivitySpace, design: dict | None = None):
        self.covariance = np.asarray(covariance, dtype=float)
        self.dimension = int(space.dimension)
        self.rank = int(space.rank)
        self.design_info = dict(design or {})
        w, q = np.linalg.eigh(self.covariance)
        keep = w > RANK_TOL * w.max()
        self._eigenvalues = w[keep]
        self._range = q[:, keep]
        self._factor = q[:, keep] * np.sqrt(w[keep])

    # ---------------------------------------------------------------- facts
    @classmethod
    def supports(cls, problem: Problem) -> str | None:
        spec, space = problem.spec, problem.space
        if spec.privacy.definition not in _TARGETS:
            return f"Gaussian noise with a designed covariance serves gdp, zcdp and approx targets, not {spec.privacy.definition}"
        if spec.utility.metric not in OBJECTIVES:
            return (
                f"the covariance is optimised for {', '.join(OBJECTIVES)}; '{spec.utility.metric}' is not "
                "a convex function of the covariance"
            )
        if space.dimension > MAX_DIMENSION:
            return f"dimension {space.dimension} exceeds {MAX_DIMENSION} (Σ is stored densely in the certificate)"
        return None

    @classmethod
    def design(cls, problem: Problem) -> GaussianOptimalMechanism:
        """Solve for Σ, certify it, and scale it by the factor the certification needs.

        Raises
        ------
        CalibrationError
            No generators listed, a problem too large, or a Σ the check cannot certify.
        SolverError
            The convex program failed.
        """
        spec, space = problem.spec, problem.space
        vectors = _generators(space)
        objective = Objective.for_utility(spec.utility, space.dimension)
        mu = target_mu(spec.privacy)
        result = optimal_covariance(vectors, space.span.basis(), objective, mu, table_shape=table_shape(spec))
        base = result.covariance
        first = mahalanobis_sensitivity(base, vectors)
        if not math.isfinite(first.upper):
            raise CalibrationError("the optimised covariance is zero")

        def certified(factor: float) -> bool:
            return all(c.passed for c in covariance_checks(base * factor, vectors, space, spec.privacy))

        factor = float(nudge_until(first.upper * (1.0 + 2.0 * first.allowance) / (mu * mu), certified, up=True))
        sigma = base * factor
        value = objective.value(sigma, space.rank)
        info = {
            "objective": objective.description,
            "method": result.method,
            "constraints": result.constraints,
            "target_mu": mu,
            "scale_factor": factor,
            "objective_value": value,
            "dual_bound": _json_float(result.dual_bound),
            "duality_gap": _json_float(objective.gap(value, result.dual_bound)),
            "workload_floor": result.regularized,
            **cls._baselines(objective, space, mu, value),
        }
        return cls(sigma, space, info)

    @staticmethod
    def _baselines(objective: Objective, space: SensitivitySpace, mu: float, value: float) -> dict:
        """The utility of isotropic σ²I and projected σ²P noise (σ = Δ₂/μ), and our ratio to each."""
        sigma2 = float(space.l2_squared) / (mu * mu)
        basis = space.span.basis()
        out = {}
        for name, cov in (("isotropic", sigma2 * np.eye(space.dimension)), ("projected", sigma2 * basis @ basis.T)):
            if name == "projected" and not space.rank_deficient:
                continue
            ref = objective.value(cov, space.rank)
            ratio = math.exp(0.5 * (value - ref)) if objective.kind == "log_det" else value / ref
            out[f"vs_{name}"] = {"utility": ref, "ratio": ratio}
        return out

    @classmethod
    def from_parameters(cls, parameters: dict, space: SensitivitySpace) -> GaussianOptimalMechanism:
        sigma = np.asarray(parameters["covariance"], dtype=float)
        if sigma.shape != (space.dimension, space.dimension):
            raise ValueError(f"covariance has shape {sigma.shape}, the query dimension is {space.dimension}")
        if not np.all(np.isfinite(sigma)):
            raise ValueError("covariance has non-finite entries")
        return cls(sigma, space, parameters.get("design"))

    @property
    def parameters(self) -> dict:
        return {"covariance": self.covariance.tolist(), "rank": self.rank, "design": self.design_info}

    def noise_law(self) -> ProductLaw:
        """The law of the emitted noise, for the second route of ``dpopt verify`` (:mod:`dpopt.noise.law`)."""
        w, q = np.linalg.eigh(np.asarray(self.covariance, dtype=float))
        keep = w > _EIGEN_RTOL * w.max()
        return ProductLaw(tuple(GaussianMarginal(float(np.sqrt(x))) for x in w[keep]), self.dimension, q[:, keep], None,
                          f"N(0, Σ) in the eigenbasis of Σ ({int(keep.sum())} positive eigenvalues)")

    def _sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return rng.standard_normal((size, self._factor.shape[1])) @ self._factor.T

    def _privacy_checks(self, space: SensitivitySpace, privacy: Privacy) -> list[Check]:
        if privacy.definition not in _TARGETS:
            return [Check("privacy", "Gaussian noise, designed covariance", False,
                          f"cannot meet a {privacy.definition} target")]
        return covariance_checks(self.covariance, _generators(space), space, privacy)

    def privacy_summary(self, space: SensitivitySpace) -> dict:
        mu = math.sqrt(mahalanobis_sensitivity(self.covariance, _generators(space)).squared)
        return {
            "mu": mu,
            "rho": mu * mu / 2.0,
            "epsilon_at_delta": {f"{delta:g}": gaussian_epsilon(delta, mu) for delta in (1e-5, 1e-6, 1e-10)},
            "conversion": "exact: μ = max_v ‖Σ^{+1/2}v‖ (Mahalanobis sensitivity), analytic-Gaussian (ε, δ) profile",
        }

    def notes(self) -> list[str]:
        out = super().notes()
        if self.rank < self.dimension:
            out.append(
                f"noise lies in the {self.rank}-dimensional span of the sensitivity space; the component of "
                "the answer orthogonal to it is released exactly (it is the same on every dataset the "
                "adjacency connects)"
            )
        info = self.design_info
        if info:
            gap = info.get("duality_gap")
            out.append(
                f"Σ minimises {info.get('objective')} ({info.get('method')}); the solver's Σ was scaled by "
                f"{info.get('scale_factor'):.17g} so that the independent check holds; certified "
                + ("duality gap " + f"{gap:.3g}" if gap is not None else "no duality bound available")
                + (" (log units)" if "log pdet" in str(info.get("objective")) else " (relative)")
            )
            if info.get("workload_floor"):
                out.append(
                    "the workload does not see every direction of the span; those directions get the noise "
                    "that a floor of 1e-6 × the mean workload weight assigns (the infimum is not attained)"
                )
        return out

    # ------------------------------------------------------------ utilities
    def noise_covariance(self) -> np.ndarray:
        """Σ (for :mod:`dpopt.stats.inference`)."""
        return self.covariance

    def _expected_l2(self, workload: np.ndarray | None) -> float:
        if workload is None:
            return float(np.trace(self.covariance))
        return float(np.sum((workload @ self.covariance) * workload))

    def _variances(self) -> np.ndarray:
        return np.maximum(np.diag(self.covariance), 0.0)

    def _expected_l1(self) -> float:
        return expected_l1(np.sqrt(self._variances()))

    def _usefulness(self, gamma: float) -> float:
        return mean_usefulness(np.sqrt(self._variances()), gamma)

    def _max_variance(self) -> float:
        return float(self._variances().max())

    def _ci_volume(self, alpha: float) -> float:
        return ci_volume(self.rank, float(np.sum(np.log(self._eigenvalues))), alpha)

    def _whitened_shift(self, alternative: np.ndarray) -> np.ndarray | None:
        """Λ^{-1/2}Qᵀη, or None when part of η lies off range(Σ) (that part is released exactly)."""
        coords = self._range.T @ alternative
        off = alternative - self._range @ coords
        if np.linalg.norm(off) > 1e-9 * max(1.0, float(np.linalg.norm(alternative))):
            return None
        return coords / np.sqrt(self._eigenvalues)

    def _test_power(self, alternative: np.ndarray, alpha: float) -> float:
        a = self._whitened_shift(alternative)
        return 1.0 if a is None else power_from_noncentrality(float(np.linalg.norm(a)), alpha)

    def _inference_draws(self, metric, z, alpha, alternative) -> np.ndarray:
        """``test_power``: rejections of the LR test on η + Z (ηᵀΣ⁺(η + Z)/λ > z₁₋α, λ² = ηᵀΣ⁺η);
        ``ci_volume``: importance weights 1{ZᵀΣ⁺Z ≤ t}/p(Z) (p the N(0, Σ) density on its range),
        whose mean is the region's volume. Both from the whitened draws Λ^{-1/2}QᵀZ."""
        white = (z @ self._range) / np.sqrt(self._eigenvalues)
        if metric == "test_power":
            a = self._whitened_shift(alternative)
            if a is None:
                return np.ones(z.shape[0])
            statistic = (a @ a + white @ a) / np.linalg.norm(a)
            return (statistic > normal.ndtri(1.0 - alpha)).astype(float)
        q = np.sum(white**2, axis=1)
        return region_importance_weights(q, self.rank, float(np.sum(np.log(self._eigenvalues))), alpha)
