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

**Exact measurement** (``sampler: exact``, the default for counting queries under ρ-zCDP, μ-GDP and (ε, δ) with
the ``l2``, ``max_variance`` or ``ci_volume`` metric, when the component off the span is a function of integer sums
no neighbour moves): y = Mx + η with the integer strategy M = round(c·Σ^{+1/2}) and η i.i.d. discrete Gaussian,
released by least squares (post-processing); its privacy is certified from M's exact integer sensitivity
max‖Mδ‖² and the lattice variance (:mod:`dpopt.mechanisms.integer_strategy`). The released noise has covariance
Var N_ℤ(0, σ_ℤ²)·B(BᵀMᵀMB)⁻¹Bᵀ, not Σ: the rounding's cost is stated in the design record
(``lattice_cost_ratio``, and ``exact_cost``: the objective at the released covariance against its value at Σ,
:func:`dpopt.mechanisms.exact_cost.exact_cost`) and in a note, whatever it is (largest under μ-GDP at small
noise, where the certified slope's range caps c); it is never a reason to keep the floating-point sampler.
``dpopt verify`` re-derives that statement (claim ``mechanism.exact_cost``): the continuous value from the recorded
Σ, the exact value as this mechanism's prediction, their ratio.

A ``linear`` query with decimal weights (``l2``, ``max_variance``, and ``ci_volume`` on the full span) is measured
on its decimal lattice
(:mod:`dpopt.mechanisms.decimal_lattice`): the strategy measures the integers k = D·Wx, y = Mk + η, with M designed
for the covariance D²Σ of k and certified from max‖M·D·WΔ‖² in integers over the shifts D·WΔ of k
(:meth:`~dpopt.mechanisms.decimal_lattice.DecimalScale.integer_shifts`); the least squares are divided by D, so the
released covariance is Var N_ℤ(0, σ_ℤ²)·B(BᵀMᵀMB)⁻¹Bᵀ/D². D is recorded (``lattice_scale``) and re-derived by
``dpopt verify`` (:func:`~dpopt.mechanisms.decimal_lattice.scale_check`). Its region is that of the scaled answers,
{κ : ‖M(κ − k̂)‖² ≤ σ_ℤ² r}, mapped by θ = κ/D: the same coverage, the volume times D^-k (:func:`_released_region`).

Under ``ci_volume`` the prediction is the region {θ ∈ x̂ + V : ‖M(θ − x̂)‖² ≤ σ_ℤ² r} of the k = dim V i.i.d.
coordinates of η, of proven coverage and exact-integer volume (:mod:`dpopt.mechanisms.strategy_regions`); on a
proper span the strategy has k rows, M = round(c·Λ_k^{-1/2}Q_kᵀ), so that the release is a bijection of y and no
residual of y goes unobserved. Its cost is the region's volume against the ellipsoid of N(0, Σ); more than 66
noisy coordinates at a large σ_ℤ² take a coarser grid, whose bound on the volume's excess the method states.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from fractions import Fraction

import numpy as np

from dpopt.core import normal
from dpopt.core.checks import Check
from dpopt.core.rounding import nudge_until
from dpopt.core.rows import row_groups
from dpopt.domain.queries import NumericQuery
from dpopt.errors import CalibrationError, DataError, UnsupportedSpecError
from dpopt.mechanisms.base import Mechanism, UtilityValue
from dpopt.mechanisms.decimal_lattice import NOT_COUNTS, DecimalScale, lattice_scale, scale_check, scaled_answers
from dpopt.mechanisms.exact_cost import EXACT_COST_CLAIM, EXACT_COST_KEY, exact_cost, stated_cost_check
from dpopt.mechanisms.exact_sum import LatticeSumGaussian
from dpopt.mechanisms.gaussian import counting_query, lattice_scope_check
from dpopt.mechanisms.integer_strategy import design_strategy, reconstruction, rounding_note, strategy_sensitivity
from dpopt.mechanisms.strategy_regions import StrategyRegion, integer_span_basis, strategy_region
from dpopt.mechanisms.lattice import (
    EXACT_MEASUREMENT_NOTE,
    GDP_RANGE_REFUSAL,
    GDP_TARGETS,
    check_draws,
    discrete_variance,
    effective_variance,
    exact_refusal,
    integer_answers,
    lattice_privacy_check,
    lattice_privacy_summary,
)
from dpopt.noise.discrete_gaussian import sample_discrete_gaussian
from dpopt.noise.gaussian import GaussianMarginal, expected_l1, mean_usefulness
from dpopt.noise.law import ProductLaw
from dpopt.optimize.covariance import OBJECTIVES, Objective, optimal_covariance, target_mu
from dpopt.privacy.gaussian import gaussian_epsilon
from dpopt.privacy.gaussian_calibration import gaussian_privacy_check
from dpopt.problem import Problem
from dpopt.sensitivity.integer_complement import IntegerComplementSpan
from dpopt.sensitivity.space import SensitivitySpace
from dpopt.spec.models import Privacy, Spec, Utility
from dpopt.stats.inference import ci_volume, log_ci_volume, power_from_noncentrality, region_importance_weights

_EIGEN_RTOL = 1e-12
"""Eigenvalues of a covariance below this fraction of the largest are taken as 0 in the noise law."""

MAX_DIMENSION = 120
"""Largest query dimension served (Σ is stored densely in the certificate)."""

RANK_TOL = 1e-10
"""Eigenvalues of Σ at most this fraction of the largest are its null space."""

RANGE_TOL = 1e-9
"""Largest relative distance of a generator from range(Σ) accepted by the range check."""

_TARGETS = ("gdp", "zcdp", "approx")

PROPER_SPAN_REGION = ("on the decimal lattice the strategy's region is derived on the full span only (its strategy "
                      "is square there, not one row per dimension of the span)")

EXACT_METRICS = ("l2", "max_variance", "ci_volume")
"""Metrics predicted on the lattice: ``l2`` and ``max_variance`` are functions of the released covariance alone;
``ci_volume`` is the region of the strategy's k i.i.d. discrete Gaussian coordinates, of proven coverage
(:mod:`dpopt.mechanisms.strategy_regions`). ``test_power`` is of Gaussian noise (the lattice noise is not)."""



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
plan listed 538,571 moves of 15 cells, 471 distinct: 0.5 s a call, 0.09 s with the hashing; the Semi-DP space now
lists its distinct vectors itself)."""


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


def _complement(span) -> np.ndarray | None:
    return span.complement() if isinstance(span, IntegerComplementSpan) else None


def _public_statistics_checks(recorded: np.ndarray | None, space: SensitivitySpace) -> list[Check]:
    """The recorded C equals the one re-derived from the spec, and Cδ = 0 in integers for every listed δ (so the
    public component Cᵀ(CCᵀ)⁻¹Cx is the same on neighbours); nothing when neither records nor derives one."""
    derived = _complement(space.span)
    if recorded is None and derived is None:
        return []
    what = "the public statistics Cx (C an integer basis of the span's orthogonal complement)"
    if recorded is None or derived is None:
        return [Check("privacy.public_statistics", what, False,
                      "the certificate records no C" if recorded is None else "the spec's span derives no C")]
    same = recorded.shape == derived.shape and bool(np.array_equal(recorded, derived))
    generators = np.atleast_2d(_generators(space))
    integral = bool(np.array_equal(generators, np.round(generators)))
    products = [int(x) for x in (np.round(generators).astype(object) @ recorded.astype(object).T).ravel()] \
        if integral else [1]
    moved = sum(x != 0 for x in products)
    return [Check("privacy.public_statistics",
                  f"{what}: the recorded C equals the canonical one re-derived from the listed moves, and Cδ = 0 "
                  f"in exact integers for all {generators.shape[0]} listed δ",
                  same and integral and moved == 0,
                  f"C {'equals' if same else 'differs from'} the re-derived {derived.shape[0]} x {derived.shape[1]}; "
                  f"{moved} of {len(products)} entries of Cδ non-zero" + ("" if integral else "; δ not integer"))]


def _integer_basis(space: SensitivitySpace) -> np.ndarray:
    """An integer basis A of the span (d × k): I on ℝ^d, else independent generators
    (:func:`~dpopt.mechanisms.strategy_regions.integer_span_basis`)."""
    if not space.rank_deficient:
        return np.eye(space.dimension, dtype=np.int64)
    return integer_span_basis(_generators(space), space.rank)


def _released_region(region: StrategyRegion | str, unit: int) -> StrategyRegion | str:
    """The strategy's region in the released units: on the decimal lattice (``unit`` = D) the region of the scaled
    answers k = D·Wx mapped by θ = κ/D, its volume times D^-k (k its dimension), the coverage the same."""
    if isinstance(region, str) or unit == 1:
        return region
    return replace(region, log_volume=region.log_volume - len(region.region.sigma2s) * math.log(unit))


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

    def __init__(self, covariance: np.ndarray, space: SensitivitySpace, design: dict | None = None,
                 strategy: np.ndarray | None = None, lattice_sigma2: Fraction | None = None,
                 strategy_sensitivity_squared: int | None = None, target: str = "zcdp", refusal: str | None = None,
                 public_statistics: np.ndarray | None = None, decimal: DecimalScale | None = None):
        self.covariance = np.asarray(covariance, dtype=float)
        self.dimension = int(space.dimension)
        self.rank = int(space.rank)
        self.span = space.span
        self.public_statistics = _complement(space.span) if public_statistics is None else public_statistics
        """C of an :class:`~dpopt.sensitivity.integer_complement.IntegerComplementSpan` (the statistics Cx
        computing the public component), as derived or as a certificate records it; None for other spans."""
        self.design_info = dict(design or {})
        self.refusal = refusal
        self.sampler = "floating_point" if strategy is None else "exact"
        self.target = "gdp" if target in GDP_TARGETS else "zcdp"
        self.needs_integer_answers = strategy is not None
        self.decimal = decimal if strategy is not None else None
        """The decimal lattice (D) of a linear query with decimal weights, whose integers D·Wx the strategy measures
        (the release is divided by D); None on integer counts."""
        self._space = space
        self._regions: dict[float, StrategyRegion | str] = {}
        released = self.covariance
        if strategy is not None:
            self.strategy = np.asarray(strategy)
            if (self.strategy.ndim != 2 or self.strategy.shape[0] not in (self.dimension, self.rank)
                    or self.strategy.shape[1] != self.dimension or self.strategy.dtype.kind not in "iu"):
                raise ValueError(f"the strategy must be an integer {self.dimension} x {self.dimension} matrix, or "
                                 f"{self.rank} x {self.dimension} (one row per dimension of the span)")
            if lattice_sigma2 is None or strategy_sensitivity_squared is None:
                raise ValueError("an exact design needs its lattice variance and its strategy sensitivity")
            self.lattice_sigma2 = Fraction(lattice_sigma2)
            if self.lattice_sigma2 <= 0:
                raise ValueError("the lattice variance must be positive")
            self.strategy_sensitivity_squared = int(strategy_sensitivity_squared)
            self._reconstruction, unit = reconstruction(self.strategy, space.span.basis())
            released = discrete_variance(self.lattice_sigma2) * unit / self._unit() ** 2
        self.released_covariance = released
        """The covariance of the released noise: Σ, or on the lattice Var N_ℤ(0, σ_ℤ²)·B(BᵀMᵀMB)⁻¹Bᵀ (divided by D²
        on the decimal lattice)."""
        w, q = np.linalg.eigh(released)
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
        sum_refusal = None
        if isinstance(problem.query, NumericQuery):  # one dimension: the isotropic Gaussian (OptimalSumGaussian)
            routed = OptimalSumGaussian.design(problem)
            if isinstance(routed, OptimalSumGaussian):
                return routed
            sum_refusal = routed.refusal
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
        refusal, decimal = cls._lattice_refusal(problem)
        if sum_refusal is not None:
            refusal, decimal = f"on the sum's lattice: {sum_refusal}", None
        if refusal is None:
            region = spec.utility.metric == "ci_volume"
            cost = cls._strategy_cost(objective, space.rank, region)
            if decimal is not None:
                found = cls._decimal_strategy(decimal, sigma, space, mu, spec.privacy.definition, cost)
            else:
                found = design_strategy(sigma, vectors, space.span.basis(), mu, spec.privacy.definition, cost,
                                        rows=region and space.rank_deficient)
            if not isinstance(found, str) and region:
                found = cls._region_cost(found, space, spec.utility.alpha, value, info,
                                         1 if decimal is None else decimal.scale)
            if isinstance(found, str):
                refusal = found
            else:
                if not region:
                    info["lattice_cost_ratio"] = found.cost_ratio
                    info[EXACT_COST_KEY] = exact_cost(spec.utility.metric, value * found.cost_ratio, value)
                return cls(sigma, space, info, found.strategy, found.lattice_sigma2, found.sensitivity_squared,
                           spec.privacy.definition, decimal=decimal)
        return cls(sigma, space, info, refusal=refusal)

    @staticmethod
    def _decimal_strategy(decimal: DecimalScale, sigma: np.ndarray, space: SensitivitySpace, mu: float, target: str,
                          cost):
        """The integer strategy on the decimal lattice: the scaled answers k = D·Wx move by the integer shifts
        D·WΔ (:meth:`~dpopt.mechanisms.decimal_lattice.DecimalScale.integer_shifts`) and the design's noise on k
        is N(0, D²Σ), so :func:`~dpopt.mechanisms.integer_strategy.design_strategy` is run on those (its cost ratio
        is scale-free: the objectives are linear in the covariance's scale); or why there is none."""
        where = f"{NOT_COUNTS}; on the decimal lattice D = {decimal.scale}"
        try:
            shifts = decimal.integer_shifts(space)
            return design_strategy(sigma * float(decimal.scale) ** 2, shifts, space.span.basis(), mu, target, cost)
        except np.linalg.LinAlgError:
            return (f"{where}: the rounded strategy is singular (its entries are about c·μ/Δ_D with Δ_D² = "
                    f"{decimal.l2_squared}: too coarse at the sampler's scales)")
        except ValueError as exc:
            return f"{where}: {exc}"

    @staticmethod
    def _strategy_cost(objective: Objective, rank: int, region: bool):
        """The objective :func:`~dpopt.mechanisms.integer_strategy.design_strategy` scales with the lattice variance:
        the design's (a trace, a maximum variance), or for the region the geometric mean of the covariance's
        eigenvalues on the span, pdet^{1/k} (the squared volume's k-th root up to the radius: linear in scale)."""
        if region:
            return lambda cov: math.exp(objective.value(cov, rank) / rank)
        return lambda cov: objective.value(cov, rank)

    @staticmethod
    def _region_cost(found, space: SensitivitySpace, alpha: float, log_det: float, info: dict, unit: int = 1):
        """The strategy's region (:mod:`~dpopt.mechanisms.strategy_regions`) and its cost stated in ``info``: its
        volume (in the released units: ``unit`` = D on the decimal lattice) against the continuous design's
        ellipsoid V_k t^{k/2} √pdet Σ; or why there is no region."""
        region = _released_region(strategy_region(found.strategy, found.lattice_sigma2, lambda: _integer_basis(space),
                                                   alpha), unit)
        if isinstance(region, str):
            return region
        cost = exact_cost("ci_volume", region.volume, ci_volume(space.rank, log_det, alpha))
        info["lattice_cost_ratio"] = cost["ratio"]
        info[EXACT_COST_KEY] = cost
        return found

    @staticmethod
    def _lattice_refusal(problem: Problem) -> tuple[str | None, DecimalScale | None]:
        """Why the design keeps the floating-point sampler before any strategy is tried (None: it may not), and the
        decimal lattice of a linear query with decimal weights (:func:`~dpopt.mechanisms.decimal_lattice.
        lattice_scale`; None on integer counts)."""
        spec, space = problem.spec, problem.space
        if spec.sampler == "floating_point":
            return "the spec asks for sampler: floating_point", None
        if spec.utility.metric not in EXACT_METRICS:
            return (f"the {spec.utility.metric} prediction is of Gaussian noise (the lattice noise is not "
                    "Gaussian)", None)
        reason, decimal = exact_refusal(spec.privacy.definition, counting_query(problem)), None
        if reason == NOT_COUNTS:
            found = lattice_scale(problem)
            if isinstance(found, str):
                reason = f"{NOT_COUNTS}; no decimal lattice: {found}"
            elif spec.utility.metric == "ci_volume" and space.rank_deficient:
                reason = f"{NOT_COUNTS}; {PROPER_SPAN_REGION}"
            else:
                reason, decimal = None, found
        if reason is None and space.span.invariant_component(np.zeros((1, space.dimension))) is None:
            reason = (f"the component off the {space.span.name} span is not a function of integer sums the "
                      "neighbours keep")
        return reason, decimal

    def _region(self, alpha: float) -> StrategyRegion | str:
        """The exact measurement's confidence region at level 1 − α (:func:`~dpopt.mechanisms.strategy_regions.
        strategy_region`), or why there is none."""
        if alpha not in self._regions:
            self._regions[alpha] = _released_region(strategy_region(self.strategy, self.lattice_sigma2,
                                                                    lambda: _integer_basis(self._space), alpha),
                                                    self._unit())
        return self._regions[alpha]

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
        if "sum_lattice" in parameters:
            return OptimalSumGaussian.from_parameters(parameters, space)
        sigma = np.asarray(parameters["covariance"], dtype=float)
        if sigma.shape != (space.dimension, space.dimension):
            raise ValueError(f"covariance has shape {sigma.shape}, the query dimension is {space.dimension}")
        if not np.all(np.isfinite(sigma)):
            raise ValueError("covariance has non-finite entries")
        if parameters.get("sampler", "floating_point") != "exact":
            return cls(sigma, space, parameters.get("design"))
        strategy = parameters["strategy"]
        if not all(isinstance(x, int) and not isinstance(x, bool) for row in strategy for x in row):
            raise ValueError("the strategy must be a matrix of integers")
        recorded = parameters.get("public_statistics")
        if recorded is not None:
            if not all(isinstance(x, int) and not isinstance(x, bool) for row in recorded for x in row):
                raise ValueError("public_statistics must be a matrix of integers")
            recorded = np.array(recorded, dtype=np.int64).reshape(len(recorded), space.dimension)
        return cls(sigma, space, parameters.get("design"), np.array(strategy, dtype=np.int64),
                   Fraction(parameters["lattice_sigma2"]), parameters["strategy_sensitivity_squared"],
                   parameters.get("lattice_privacy", "zcdp"), public_statistics=recorded,
                   decimal=DecimalScale.from_parameters(parameters))

    @property
    def parameters(self) -> dict:
        out = {"covariance": self.covariance.tolist(), "rank": self.rank, "design": self.design_info}
        if self.sampler == "exact":
            out.update({"sampler": "exact", "strategy": self.strategy.tolist(),
                        "strategy_sensitivity_squared": self.strategy_sensitivity_squared,
                        "lattice_sigma2": str(self.lattice_sigma2)})
            if self.public_statistics is not None:
                out["public_statistics"] = self.public_statistics.tolist()
            if self.target == "gdp":
                out["lattice_privacy"] = "gdp"
            if self.decimal is not None:
                out.update(self.decimal.parameters())
        return out

    def scope_checks(self, problem: Problem) -> list[Check]:
        """On the lattice: the query is a counting query (:func:`~dpopt.mechanisms.gaussian.lattice_scope_check`), or
        on the decimal lattice D and Δ_D² re-derived from the spec (:func:`~dpopt.mechanisms.decimal_lattice.
        scale_check`), a region (``ci_volume``) on the full span only; and the stated cost of exactness re-derived
        (:meth:`_cost_checks`)."""
        if self.sampler != "exact":
            return []
        metric = problem.spec.utility.metric
        scope = lattice_scope_check(problem) if self.decimal is None else scale_check(problem, self.decimal)
        if self.decimal is not None and metric == "ci_volume":
            scope = Check(scope.claim, scope.method + "; a region on the full span", scope.passed and not
                          problem.space.rank_deficient, scope.detail + ("; " + PROPER_SPAN_REGION
                                                                         if problem.space.rank_deficient else ""))
        return [scope, *self._cost_checks(problem.spec.utility)]

    def _cost_checks(self, utility: Utility) -> list[Check]:
        """The design's ``exact_cost`` re-derived: its continuous value is the spec's objective at the recorded Σ
        (symmetric; for ``ci_volume`` the ellipsoid V_k t^{k/2} √pdet Σ), recomputed here; its exact value this
        mechanism's prediction and its ratio the two values' (:func:`~dpopt.mechanisms.exact_cost.
        stated_cost_check`); the recorded ``lattice_cost_ratio`` is that ratio (10⁻⁹ relative)."""
        stated = self.design_info.get(EXACT_COST_KEY)
        objective = Objective.for_utility(utility, self.dimension)
        with np.errstate(invalid="ignore", divide="ignore"):  # a hostile Σ gives nan: the check then fails
            continuous = objective.value(self.covariance, self.rank)
        if utility.metric == "ci_volume":
            continuous = ci_volume(self.rank, continuous, utility.alpha) if math.isfinite(continuous) else math.nan
        recorded = stated.get("continuous") if isinstance(stated, dict) else None
        ratio = self.design_info.get("lattice_cost_ratio")
        symmetric = bool(np.array_equal(self.covariance, self.covariance.T))
        same = (symmetric and isinstance(recorded, (int, float)) and math.isclose(recorded, continuous, rel_tol=1e-9)
                and isinstance(ratio, (int, float)) and math.isclose(ratio, stated.get("ratio", math.nan),
                                                                     rel_tol=1e-9))
        check = stated_cost_check(stated if isinstance(stated, dict) else {}, utility.metric,
                                  self.expected_utility(utility).value)
        return [Check(EXACT_COST_CLAIM, check.method + "; the continuous value re-derived from the recorded Σ "
                      "(symmetric; the spec's objective at Σ), and lattice_cost_ratio equal to the stated ratio",
                      check.passed and same, f"{check.detail}; continuous re-derived {continuous:.9g}, recorded "
                      f"{recorded!r}; lattice_cost_ratio {ratio!r}" + ("" if symmetric else "; Σ is not symmetric"))]

    def noise_law(self) -> ProductLaw | str:
        """The law of the emitted noise, for the second route of ``dpopt verify`` (:mod:`dpopt.noise.law`); on the
        lattice the reason there is none."""
        if self.sampler == "exact":
            return ("the exact measurement's released noise Rη is a linear image of independent discrete Gaussians, "
                    "not a product law; its privacy is the exact check's (the strategy's integer sensitivity, CKS "
                    "2020, Theorem 14; the certified GDP slope)")
        w, q = np.linalg.eigh(np.asarray(self.covariance, dtype=float))
        keep = w > _EIGEN_RTOL * w.max()
        return ProductLaw(tuple(GaussianMarginal(float(np.sqrt(x))) for x in w[keep]), self.dimension, q[:, keep], None,
                          f"N(0, Σ) in the eigenbasis of Σ ({int(keep.sum())} positive eigenvalues)")

    def _lattice_noise(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """η ~ N_ℤ(0, σ_ℤ²) i.i.d., one row of the strategy's length (its rows) per draw."""
        s2 = self.lattice_sigma2
        rows = self.strategy.shape[0]
        return sample_discrete_gaussian(rng, s2.numerator, s2.denominator, size * rows).reshape(size, rows)

    def _unit(self) -> int:
        """D on the decimal lattice (the released noise is Rη/D), else 1."""
        return 1 if self.decimal is None else self.decimal.scale

    def _sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """N(0, Σ) draws F z; on the lattice the released noise Rη (Rη/D on the decimal lattice), η ~ N_ℤ(0, σ_ℤ²)
        on the strategy's rows."""
        if self.sampler == "exact":
            return self._lattice_noise(rng, size).astype(float) @ self._reconstruction.T / self._unit()
        return rng.standard_normal((size, self._factor.shape[1])) @ self._factor.T

    def sampler_check_draws(self, default: int) -> int:
        """On the lattice: :func:`~dpopt.mechanisms.lattice.check_draws` (a variate per row of M a draw)."""
        return check_draws(default, self.strategy.shape[0]) if self.sampler == "exact" else default

    def _release(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Exact: y = Mx + η in int64, then x̂ = (I − P_V)x + R(y − M(I − P_V)x) (module docstring of
        :mod:`~dpopt.mechanisms.integer_strategy`), the public part from integer sums no neighbour moves. On the
        decimal lattice x is the integers k = D·Wx recovered exactly (:func:`~dpopt.mechanisms.decimal_lattice.
        scaled_answers`) and the result is divided by D (post-processing)."""
        if self.sampler != "exact":
            return values + self._sample(rng, values.shape[0])
        counts = integer_answers(values) if self.decimal is None else scaled_answers(values, self.decimal.scale)
        if float(np.abs(counts).sum(axis=1).max(initial=0)) * float(np.abs(self.strategy).max(initial=0)) >= 2.0**62:
            raise DataError("the counts are too large for the exact strategy measurement in int64 "
                            "(set `sampler: floating_point` to use the floating-point noise)")
        measured = counts @ self.strategy.T + self._lattice_noise(rng, counts.shape[0])
        public = self.span.invariant_component(counts)
        return (public + (measured - public @ self.strategy.T.astype(float)) @ self._reconstruction.T) / self._unit()

    def _privacy_checks(self, space: SensitivitySpace, privacy: Privacy) -> list[Check]:
        if privacy.definition not in _TARGETS:
            return [Check("privacy", "Gaussian noise, designed covariance", False,
                          f"cannot meet a {privacy.definition} target")]
        if self.sampler == "exact":
            return self._lattice_checks(space, privacy)
        return covariance_checks(self.covariance, _generators(space), space, privacy)

    def _lattice_checks(self, space: SensitivitySpace, privacy: Privacy) -> list[Check]:
        """The strategy's sensitivity re-derived in integers, the reconstruction R M B = B, and the target from
        μ² = Δ_M²/v (:func:`~dpopt.mechanisms.lattice.lattice_privacy_check`). On the decimal lattice the shifts
        are D·WΔ (:meth:`~dpopt.mechanisms.decimal_lattice.DecimalScale.integer_shifts`)."""
        try:
            shifts = _generators(space) if self.decimal is None else self.decimal.integer_shifts(space)
            sens = strategy_sensitivity(self.strategy, shifts)
        except ValueError as exc:
            return [Check("privacy", "exact lattice measurement of an integer strategy", False, str(exc))]
        stated = self.strategy_sensitivity_squared
        basis = space.span.basis()
        gap = float(np.abs(self._reconstruction @ self.strategy.astype(float) @ basis - basis).max())
        checks = [*_public_statistics_checks(self.public_statistics, space),
            Check("privacy.strategy_sensitivity",
                  f"max over {np.atleast_2d(shifts).shape[0]} generators δ of ‖Mδ‖² in exact integer "
                  "arithmetic (convex in δ: the hull's maximum is at a generator) equals the stated Δ_M²"
                  + ("" if self.decimal is None else f" (δ = D·WΔ, D = {self.decimal.scale}: the shifts of the scaled "
                     "answers, whose largest ‖δ‖² is the recorded Δ_D²)"),
                  sens == stated, f"recomputed {sens} vs stated {stated}"),
            Check("mechanism.reconstruction", "the least-squares map R = B(BᵀMᵀMB)⁻¹BᵀMᵀ recovers the span: "
                  "max |R M B − B| ≤ 1e-9 (the release is then x + Rη)", gap <= 1e-9, f"max |RMB − B| = {gap:.3g}"),
        ]
        variance = effective_variance(self.lattice_sigma2, privacy.definition)
        if variance is None:
            return checks + [Check("privacy", "exact lattice measurement", False, GDP_RANGE_REFUSAL)]
        return checks + [lattice_privacy_check(Fraction(max(sens, stated)) / variance, privacy,
                                                f"Δ_M²/v (Δ_M² = {max(sens, stated)}, σ_ℤ² = {self.lattice_sigma2}, "
                                                f"v = {variance})")]

    def privacy_summary(self, space: SensitivitySpace) -> dict:
        if self.sampler == "exact":
            out = lattice_privacy_summary(Fraction(self.strategy_sensitivity_squared), self.lattice_sigma2,
                                          self.target)
            out["conversion"] = out["conversion"].replace("Δ₂", "Δ_M") + " (Δ_M² = max‖Mδ‖², the integer strategy's)"
            return out
        mu = math.sqrt(mahalanobis_sensitivity(self.covariance, _generators(space)).squared)
        return {
            "mu": mu,
            "rho": mu * mu / 2.0,
            "epsilon_at_delta": {f"{delta:g}": gaussian_epsilon(delta, mu) for delta in (1e-5, 1e-6, 1e-10)},
            "conversion": "exact: μ = max_v ‖Σ^{+1/2}v‖ (Mahalanobis sensitivity), analytic-Gaussian (ε, δ) profile",
        }

    def sub_gaussian_cell_proxies(self) -> tuple[np.ndarray, np.ndarray, str] | None:
        r"""On the lattice cell i's noise is :math:`\sum_k R_{ik}\eta_k`: variance (RRᵀ)_ii Var N_ℤ and sub-Gaussian
        proxy (RRᵀ)_ii σ_ℤ² (CKS 2020, Corollary 9); None otherwise."""
        if self.sampler != "exact":
            return None
        weights = np.sum(self._reconstruction**2, axis=1) / self._unit() ** 2
        return (weights * discrete_variance(self.lattice_sigma2), weights * float(self.lattice_sigma2),
                "the release is x + Rη, R = B(BᵀMᵀMB)⁻¹BᵀMᵀ, η i.i.d. N_ℤ(0, σ_ℤ²)"
                + ("" if self.decimal is None else f", divided by D = {self.decimal.scale} (x + Rη/D)"))

    def notes(self) -> list[str]:
        if self.sampler == "exact":
            square = self.strategy.shape[0] == self.dimension
            root = "Σ^(+1/2)" if square else f"Λ^(-1/2)Qᵀ) of {self.rank} rows (whitening on the span"
            out = [EXACT_MEASUREMENT_NOTE + f" (the integer strategy M = round(c·{root}), max‖Mδ‖² = "
                   f"{self.strategy_sensitivity_squared}, lattice variance σ_ℤ² = {self.lattice_sigma2}; the least "
                   "squares back to the cells is post-processing)"]
            if self.decimal is not None:
                out.append(f"decimal lattice: the strategy measures the integers k = D·Wx (D = {self.decimal.scale}, "
                           "the least common denominator of the query's decimal weights), y = Mk + η, and the least "
                           "squares are divided by D (post-processing); the privacy is M's integer sensitivity over "
                           "the shifts D·WΔ of the scaled answers (their largest ‖D·WΔ‖² is "
                           f"{self.decimal.l2_squared})")
            ratio, cost = self.design_info.get("lattice_cost_ratio"), self.design_info.get(EXACT_COST_KEY)
            if ratio is not None:
                out.append(rounding_note(float(ratio), cost.get("metric") if isinstance(cost, dict) else None))
        else:
            out = super().notes() + ([f"no exact lattice measurement: {self.refusal}"] if self.refusal else [])
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
        """The released noise's covariance (Σ; on the lattice :attr:`released_covariance`), for
        :mod:`dpopt.stats.inference`."""
        return self.released_covariance

    def cell_variances(self) -> np.ndarray | None:
        """On the lattice: the diagonal of :attr:`released_covariance` (no law being stated); None otherwise."""
        return self._variances() if self.sampler == "exact" else None

    def _expected_l2(self, workload: np.ndarray | None) -> float:
        if workload is None:
            return float(np.trace(self.released_covariance))
        return float(np.sum((workload @ self.released_covariance) * workload))

    def _variances(self) -> np.ndarray:
        return np.maximum(np.diag(self.released_covariance), 0.0)

    def _expected_l1(self) -> float:
        return expected_l1(np.sqrt(self._variances()))

    def _usefulness(self, gamma: float) -> float:
        return mean_usefulness(np.sqrt(self._variances()), gamma)

    def _max_variance(self) -> float:
        return float(self._variances().max())

    def _log_ci_volume(self, alpha: float) -> float:
        """log V_k t^{k/2} √pdet Σ (:func:`~dpopt.stats.inference.log_ci_volume`: finite beyond the double range)."""
        return log_ci_volume(self.rank, float(np.sum(np.log(self._eigenvalues))), alpha)

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

    def _utility(self, utility: Utility) -> UtilityValue | None:
        """On the lattice, ``ci_volume``: the strategy's region, of proven coverage (:meth:`_region`)."""
        if self.sampler != "exact" or utility.metric != "ci_volume":
            return None
        found = self._region(utility.alpha)
        if isinstance(found, str):
            raise UnsupportedSpecError("utility.metric", f"on the lattice: {found}")
        return UtilityValue.volume(found.log_volume, found.describe())

    def _inference_draws(self, metric, z, alpha, alternative) -> np.ndarray:
        """``test_power``: rejections of the LR test on η + Z (ηᵀΣ⁺(η + Z)/λ > z₁₋α, λ² = ηᵀΣ⁺η);
        ``ci_volume``: importance weights 1{ZᵀΣ⁺Z ≤ t}/p(Z) (p the N(0, Σ) density on its range),
        whose mean is the region's volume. Both from the whitened draws Λ^{-1/2}QᵀZ. On the lattice, ``ci_volume``:
        the region's terms (:meth:`~dpopt.mechanisms.strategy_regions.StrategyRegion.terms`, η = Mz)."""
        if self.sampler == "exact" and metric == "ci_volume":
            found = self._region(alpha)
            if isinstance(found, str):
                raise UnsupportedSpecError("utility.metric", f"on the lattice: {found}")
            return found.terms(self.strategy, z * self._unit())  # the draws Rη/D in units of k
        white = (z @ self._range) / np.sqrt(self._eigenvalues)
        if metric == "test_power":
            a = self._whitened_shift(alternative)
            if a is None:
                return np.ones(z.shape[0])
            statistic = (a @ a + white @ a) / np.linalg.norm(a)
            return (statistic > normal.ndtri(1.0 - alpha)).astype(float)
        q = np.sum(white**2, axis=1)
        return region_importance_weights(q, self.rank, float(np.sum(np.log(self._eigenvalues))), alpha)


class OptimalSumGaussian(LatticeSumGaussian):
    r"""``gaussian_optimal`` on a bounded sum or mean, measured on the sum's dyadic lattice.

    In one dimension the convex program has one variable: the l2, max_variance and ci_volume objectives all grow
    with Σ = s², and the constraint Δ²/s² ≤ μ² (Δ the sensitivity, μ the target's) is tight at the optimum, so
    Σ = Δ²/μ² is the isotropic Gaussian's σ² (:func:`~dpopt.optimize.covariance.target_mu` is 1/σ at unit
    sensitivity). The design is therefore :class:`~dpopt.mechanisms.exact_sum.LatticeSumGaussian`'s (the integer
    sum N on g = 2^e plus N_ℤ(0, σ_ℤ²), its parameters, checks and ``exact_cost``), stated under this family's
    name; :class:`GaussianOptimalMechanism` routes scalar sums here (``design``, and ``from_parameters`` of a
    record with ``sum_lattice``), and keeps the continuous design with the lattice's reason when it refuses.
    """

    family = "gaussian_optimal"
    title = GaussianOptimalMechanism.title
    registered = False
