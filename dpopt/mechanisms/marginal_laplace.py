r"""Pure ε for marginal workloads: Laplace noise on weighted marginals, answered by least squares (``marginal_laplace``).

The strategy (McKenna et al.'s marginal template, :mod:`dpopt.optimize.marginal_strategy`)
measures :math:`y_S = \theta_S M_S x + z_S`, :math:`z_S` i.i.d. Laplace(b) on the cells of
marginal S, for the marginals of the domain with θ_S > 0 (supersets of the workload's tables included), and releases
:math:`W\hat x`, :math:`\hat x = (A^\top A)^+A^\top y`, :math:`A = [\theta_S M_S]_S`.

**Privacy** (from the stored θ and b only): the measurement is the Laplace mechanism on Ax,
ε = Δ₁(A)/b with :math:`\Delta_1(A) = k\sum_S\theta_S` (add/remove: a record adds θ_S to one
cell of every measured marginal) or :math:`2k\sum_{S\ \mathrm{moving}}\theta_S` (replace-one:
records that differ in every attribute move two cells of each marginal with an attribute of
≥ 2 levels; Hamming-k sums k replacements), checked in exact rational arithmetic; the
release is post-processing. Under replace-one the grand total (the same on neighbours) gets
no noise.

**Noise** (additive, independent of the answer: the estimator is linear and unbiased on the
workload): in the ANOVA algebra :math:`A^\top A = \sum_T\kappa_T E_T` and the T-component of
:math:`\hat x - x` is :math:`\sum_{S\supseteq T}\theta_S \prod_{k\notin S}n_k\,
\mathrm{center}_T(\mathrm{marg}_{S\to T} z_S)/\kappa_T`, assembled into the released marginals
like ``marginal_gaussian``'s noise (nothing of domain size). Its covariance is
:math:`2b^2\,W(\sum_T\kappa_T E_T)^+W^\top`, so the closed forms of ``marginal_gaussian`` apply
with :math:`a_T = \kappa_T/(2b^2)`: :math:`E\|Z\|^2 = 2b^2\sum_T m_T\lambda_T/\kappa_T`, and the
variance of each released cell is :func:`~dpopt.mechanisms.marginal_gaussian.cell_variances` at those
a_T (:meth:`MarginalLaplaceMechanism.cell_law_groups`). Permuting the levels of any attribute permutes
the cells of every measured marginal (whose noise is i.i.d.) and commutes with the least squares, so
every cell of one released table has the same noise law: the per-cell margin of error is a Monte Carlo
quantile pooled over the table's cells, the standard error exact.

**Exact measurement** (``sampler: exact``, the default; :mod:`dpopt.mechanisms.laplace_lattice`). Measuring
θ_S M_S x + Laplace(b) is measuring the integer counts M_S x with Laplace(b/θ_S) and weighting by θ_S. On the lattice
y_S = M_S x + η_S, η_S i.i.d. discrete Laplace of scale t_S = b/θ_S rounded up to p/2^k (p ≤ 2^16), sampled in
integer arithmetic; neighbours shift y_S by integer vectors of l1 norm k (add/remove) or 2k (replace-one, S
moving), so ε = k Σ_S c_S/t_S ≤ Δ₁/b exactly. The least squares reads the weighted θ_S y_S (post-processing); its
T-component needs only the integers u_{S,T} = marg_{S→T} y_S = M_T x + marg_{S→T} η_S, formed in int64 from
the T-marginal of the answers (the same integers as y_S would give: the release is a function of the y_S, and no
S-marginal beyond the answers is needed). With per-cell variance w_S = θ_S² Var η_S of the weighted noise, the
noise's covariance is W Σ_T (ν_T/κ_T²) E_T Wᵀ with ν_T = Σ_{S⊇T} θ_S² ∏_{k∉S} n_k w_S, i.e. the closed forms
above at a_T = κ_T²/ν_T (ν_T = 2b²κ_T for Laplace(b)); Var η_S = 2r/(1 − r)², r = e^{−1/t_S}.

**Lower bounds** (:mod:`dpopt.optimize.marginal_pure_bound`): the design records, beside its error, a
bound valid for every unbiased ε-DP mechanism of the workload and one for every strategy with Laplace
noise, and their ratios; the ``utility.lower_bound`` claim re-derives both and the error (in exact
rational arithmetic from the stored weights and scale) at every verification.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from dpopt.core.checks import Check
from dpopt.core.rounding import nudge_until
from dpopt.domain.marginal_algebra import MarginalWorkload, Subset, subsets
from dpopt.domain.queries import CountingQuery
from dpopt.mechanisms.base import Mechanism
from dpopt.mechanisms.laplace import laplace_privacy_check
from dpopt.mechanisms.laplace_lattice import (
    EXACT_LAPLACE_NOTE,
    lattice_pure_check,
    lattice_scale,
    lattice_variance_weights,
    pure_epsilon,
    sample_blocks,
)
from dpopt.mechanisms.marginal_gaussian import (
    MARGINAL_KINDS,
    cell_variances,
    exact_marginal_release,
    positive_by_set,
    synthesize_noise,
    workload_from_parameters,
    workload_parameters,
    workload_scope_check,
)
from dpopt.optimize.marginal_covariance import components, expected_error
from dpopt.optimize.marginal_pure_bound import pure_lower_bounds
from dpopt.optimize.marginal_strategy import moving, optimal_weights, precisions
from dpopt.optimize.strategy_goals import goal_weights
from dpopt.optimize.table_goals import TableGoals, goals_check, table_errors
from dpopt.privacy.laplace import laplace_epsilon
from dpopt.problem import Problem
from dpopt.sensitivity.plain import hamming_factor
from dpopt.sensitivity.space import SensitivitySpace
from dpopt.spec.models import Privacy


CHECK_VARIATES = 20_000_000
"""Laplace variates the ``utility.sampler`` claim draws at most."""

MIN_CHECK_DRAWS = 300


class MarginalLaplaceMechanism(Mechanism):
    """Laplace(b) on the weighted marginals θ_S M_S x, then least squares onto the workload.

    Parameters
    ----------
    attributes : tuple of str
    workload : MarginalWorkload
    replace : bool
    multiplier : int
        The Hamming distance (capped at a public n), else 1.
    weights : dict
        θ_S > 0 per measured marginal S.
    scale : float
        b, the Laplace scale on every measured cell.
    design : dict, optional
        How θ and b were obtained (recorded, not used to rebuild).
    sampler : {"floating_point", "exact"}
        ``exact``: the discrete Laplace measurement of the module docstring.
    lattice : dict, optional
        t_S per measured marginal (exact only; default: b/θ_S rounded up by
        :func:`~dpopt.mechanisms.laplace_lattice.lattice_scale`).
    """

    family = "marginal_laplace"
    title = "Laplace noise on weighted marginals, least squares (marginal strategy)"
    noise_in_span = True
    fixed: tuple[Subset, ...] = ()

    def __init__(self, attributes: tuple[str, ...], workload: MarginalWorkload, replace: bool, multiplier: int,
                 weights: dict[Subset, float], scale: float, design: dict | None = None,
                 sampler: str = "floating_point", lattice: dict[Subset, Fraction] | None = None):
        self.attributes = tuple(attributes)
        self.workload = workload
        self.replace = bool(replace)
        self.multiplier = int(multiplier)
        self.weights = {tuple(s): float(w) for s, w in weights.items()}
        self.scale = float(scale)
        self.design_info = dict(design or {})
        self.dimension = workload.dimension
        self.components = components(workload, self.replace)
        self.kappa = precisions(workload, self.weights, self.components)
        if not all(k > 0 for k in self.kappa.values()):
            raise ValueError("the measured marginals do not cover every component of the workload")
        if sampler not in ("floating_point", "exact"):
            raise ValueError(f"sampler {sampler!r} (floating_point or exact)")
        self.sampler = sampler
        self.needs_integer_answers = sampler == "exact"
        self.lattice = {} if sampler != "exact" else (
            {s: Fraction(t) for s, t in lattice.items()} if lattice is not None
            else {s: lattice_scale(Fraction(self.scale) / Fraction(w)) for s, w in self.weights.items()})
        if set(self.lattice) - set(self.weights) or (self.lattice and set(self.lattice) != set(self.weights)):
            raise ValueError("the lattice scales are not those of the measured marginals")
        if not all(t > 0 for t in self.lattice.values()):
            raise ValueError("a lattice scale is not positive")

    # ---------------------------------------------------------------- facts
    @classmethod
    def supports(cls, problem: Problem) -> str | None:
        spec, query = problem.spec, problem.query
        if spec.data.privacy_unit is not None:
            return "the marginal strategy assumes one row per person (use laplace with a privacy_unit)"
        if spec.privacy.definition != "pure":
            return f"this Laplace strategy is calibrated for pure ε, not {spec.privacy.definition}"
        if not isinstance(query, CountingQuery) or query.kind not in MARGINAL_KINDS:
            return f"the marginal strategy answers stacks of marginals ({', '.join(MARGINAL_KINDS)}), not a {query.kind} query"
        if spec.utility.metric != "l2" or spec.utility.workload is not None or spec.utility.weights is not None:
            return "the strategy weights are optimised for the unweighted l2 error of the marginals"
        if spec.invariants:
            return "invariants are not served by the Laplace marginal strategy"
        return None

    @classmethod
    def utility_bound(cls, problem: Problem) -> float | None:
        """2 B₁ k² / ε²: no strategy with Laplace noise does better (:mod:`dpopt.optimize.marginal_pure_bound`;
        closed forms in the algebra, no design)."""
        spec = problem.spec
        if cls.supports(problem) is not None:
            return None
        return pure_lower_bounds(problem.query.workload, spec.privacy.parameters["epsilon"],
                                 spec.adjacency.kind != "add_remove", hamming_factor(spec)).laplace_strategies

    @classmethod
    def design(cls, problem: Problem) -> MarginalLaplaceMechanism:
        """Optimise θ (restarts, best kept), then b = Δ₁(θ)/ε, nudged until the exact check holds."""
        spec, space = problem.spec, problem.space
        workload = problem.query.workload
        replace = spec.adjacency.kind != "add_remove"
        k = hamming_factor(spec)
        attributes = tuple(problem.query.attributes)
        epsilon = spec.privacy.parameters["epsilon"]
        goals = TableGoals.of(spec.utility, attributes, workload)
        ts = components(workload, replace)
        found = (optimal_weights(workload, ts, replace) if goals.plain
                 else goal_weights(workload, ts, replace, goals, epsilon * epsilon / (2.0 * k * k), attributes))
        l1 = _l1(workload, found.weights, replace, k)

        def at(scale: float) -> MarginalLaplaceMechanism:
            return cls(attributes, workload, replace, k, found.weights, scale)

        scale = float(nudge_until(float(l1) / epsilon, lambda b: all(
            c.passed for c in at(b).privacy_checks(space, spec.privacy)), up=True))
        error = at(scale)._expected_l2(None)
        sampler = "floating_point" if spec.sampler == "floating_point" else "exact"
        final = cls(attributes, workload, replace, k, found.weights, scale, None, sampler)
        bounds = pure_lower_bounds(workload, epsilon, replace, k)
        per_cell = 2.0 * (float(space.l1) / epsilon) ** 2  # Var of Laplace(Δ₁/ε) on every released cell
        largest = max(len(s) for s in workload.sets)
        info = {
            "method": f"marginal template: {found.candidates} candidate marginals, {len(found.weights)} measured "
                      f"({sum(len(s) > largest for s in found.weights)} larger than the workload's tables); "
                      f"L-BFGS-B with the analytic gradient from {found.starts} starts (the workload's blocks, "
                      "seeded random points), best kept",
            "l1_sensitivity": str(l1),
            "expected_l2": error,
            "lower_bounds": bounds.to_dict(),
            "ratio_to_lower_bound": error / bounds.unbiased,
            "ratio_to_laplace_strategies_bound": error / bounds.laplace_strategies,
            "baselines": {"laplace": per_cell * workload.dimension, "laplace_least_squares": per_cell * space.rank},
            "sampler": sampler if sampler == "exact" else "floating_point: the spec asks for sampler: floating_point",
        }
        if sampler == "exact":
            info["lattice_error_ratio"] = final._expected_l2(None) / error
        if spec.utility.table_goals:
            info["tables"] = goals.to_dict(attributes, workload, table_errors(workload, final.variance_coefficients()))
            info["method"] += {"total": "; weighted total", "max": "; largest weighted table error"}[goals.objective] + (
                "" if goals.targets_absent else ", subject to the tables' targets")
        return cls(attributes, workload, replace, k, found.weights, scale, info, sampler)

    @classmethod
    def from_parameters(cls, parameters: dict, space: SensitivitySpace) -> MarginalLaplaceMechanism:
        attributes, workload = workload_from_parameters(parameters, space)
        weights = positive_by_set(attributes, parameters["strategy"], "marginal", "weight")
        scale = float(parameters["scale"])
        if not (math.isfinite(scale) and scale > 0):
            raise ValueError(f"scale {parameters['scale']!r}")
        sampler = parameters.get("sampler", "floating_point")
        lattice = None
        if sampler == "exact":
            try:
                lattice = {tuple(sorted(attributes.index(a) for a in entry["marginal"])): Fraction(str(entry["scale"]))
                           for entry in parameters["lattice"]}
            except (KeyError, TypeError) as exc:
                raise ValueError(f"lattice: each entry needs a marginal of the attributes and a scale ({exc})") from None
        return cls(attributes, workload, parameters["adjacency"] == "replace_one", int(parameters["multiplier"]),
                   weights, scale, parameters.get("design"), sampler, lattice)

    @property
    def parameters(self) -> dict:
        names = self.attributes
        return {
            **workload_parameters(self),
            "strategy": [{"marginal": [names[k] for k in s], "weight": w} for s, w in self.weights.items()],
            "scale": self.scale,
            "sampler": self.sampler,
            **({"lattice": [{"marginal": [names[k] for k in s], "scale": str(t)} for s, t in self.lattice.items()]}
               if self.sampler == "exact" else {}),
            "design": self.design_info,
        }

    def scope_checks(self, problem: Problem) -> list[Check]:
        checks = [workload_scope_check(problem, self), self._bound_check(problem)]
        if problem.spec.utility.table_goals or "tables" in self.design_info:
            checks.append(goals_check(problem.spec.utility, self.attributes, self.workload,
                                      self.variance_coefficients(), self.design_info.get("tables")))
        return checks

    def variance_coefficients(self) -> dict[Subset, float]:
        """a_T = κ_T / 2b² (Laplace(b)), on the lattice κ_T²/ν_T: the noise's covariance is W(Σ_T a_T E_T)⁺Wᵀ
        (module docstring)."""
        if self.sampler != "exact":
            return {t: k / (2.0 * self.scale**2) for t, k in self.kappa.items()}
        return lattice_variance_weights(self.kappa, self.weights, self.workload.algebra, self.lattice)

    def _lattice_terms(self) -> list[tuple[Fraction, Fraction]]:
        """(Δ_S, t_S) per measured marginal: Δ_S = k (add/remove), 2k for a moving S (replace-one), else 0."""
        return [((2 if moving(self.workload, s) else 0) * self.multiplier if self.replace else self.multiplier, t)
                for s, t in self.lattice.items()]

    def _bound_check(self, problem: Problem) -> Check:
        """``utility.lower_bound``: the recorded bounds, ratios, error and l1 sensitivity re-derived; the bounds
        lie below the error."""
        info = self.design_info
        recorded = info.get("lower_bounds")
        if recorded is None:
            return Check("utility.lower_bound", "no lower bound recorded", True, "the design records none")
        bounds = pure_lower_bounds(self.workload, problem.spec.privacy.parameters["epsilon"], self.replace,
                                   self.multiplier)
        error = self.exact_error()
        again = bounds.to_dict()
        expected = {**{f"lower_bounds.{k}": v for k, v in again.items()},
                    "ratio_to_lower_bound": float(error) / bounds.unbiased,
                    "ratio_to_laplace_strategies_bound": float(error) / bounds.laplace_strategies,
                    "expected_l2": float(error)}
        if self.sampler == "exact":
            expected["lattice_error_ratio"] = self._expected_l2(None) / float(error)
        got = {**({f"lower_bounds.{k}": v for k, v in recorded.items()} if isinstance(recorded, dict) else {}),
               **{k: info.get(k) for k in ("ratio_to_lower_bound", "ratio_to_laplace_strategies_bound", "expected_l2",
                                           "lattice_error_ratio")}}
        off = [k for k, v in expected.items() if not (
            got.get(k) == v or (isinstance(v, float) and isinstance(got.get(k), float)
                                and math.isclose(got[k], v, rel_tol=1e-9)))]
        if info.get("l1_sensitivity") != str(_l1(self.workload, self.weights, self.replace, self.multiplier)):
            off.append("l1_sensitivity")
        below = Fraction(bounds.laplace_strategies) <= error and Fraction(bounds.unbiased) <= error
        return Check("utility.lower_bound",
                     "the lower bounds for every unbiased ε-DP mechanism and for every strategy with Laplace noise "
                     f"re-derived ({bounds.method}); the error 2b² Σ_T m_T λ_T / κ_T recomputed in rational "
                     "arithmetic from the stored weights and scale; each bound ≤ that error; the recorded bounds, "
                     "ratios, error and l1 sensitivity are the re-derived ones"
                     + ("; the lattice error ratio (the discrete Laplace variances' error over that error) re-derived"
                        if self.sampler == "exact" else ""),
                     not off and below,
                     f"error {float(error):.10g}, bounds {bounds.unbiased:.10g} (unbiased ε-DP) and "
                     f"{bounds.laplace_strategies:.10g} (Laplace strategies): ratio {float(error) / bounds.unbiased:.4g}"
                     + (f"; recorded values differ: {', '.join(off)}" if off else ""))

    def exact_error(self) -> Fraction:
        """2b² Σ_T m_T λ_T / κ_T with κ_T = Σ_{S⊇T} θ_S² ∏_{k∉S} n_k, in rational arithmetic from the stored floats."""
        alg = self.workload.algebra
        weights = {s: Fraction(w) for s, w in self.weights.items()}
        kappa: dict[Subset, Fraction] = {}
        for s, w in weights.items():
            term = w * w * alg.co_size(s)
            for t in subsets(s):
                kappa[t] = kappa.get(t, Fraction(0)) + term
        total = sum((Fraction(alg.multiplicity(t)) * self.workload.gram_eigenvalue(t) / kappa[t]
                     for t in self.components), Fraction(0))
        return 2 * Fraction(self.scale) ** 2 * total

    def _privacy_checks(self, space: SensitivitySpace, privacy: Privacy) -> list[Check]:
        if self.sampler == "exact":
            return [lattice_pure_check(
                self._lattice_terms(), privacy,
                f"t_S the stored scales of the {len(self.lattice)} measured marginals and Δ_S = "
                + ("k" if not self.replace else "2k for a marginal with an attribute of ≥ 2 levels, else 0")
                + f" (k = {self.multiplier})")]
        l1 = _l1(self.workload, self.weights, self.replace, self.multiplier)
        inner = laplace_privacy_check(l1, self.scale, privacy)
        return [Check("privacy",
                      f"Laplace mechanism on the {len(self.weights)} weighted marginals: Δ₁ = "
                      + ("Σ_S θ_S" if not self.replace else "2 Σ_{S moving} θ_S")
                      + (f" × {self.multiplier} (Hamming)" if self.multiplier != 1 else "")
                      + f" = {float(l1):.17g} exactly from the stored weights; the release is post-processing: "
                      + inner.method, inner.passed, inner.detail)]

    def privacy_summary(self, space: SensitivitySpace) -> dict:
        if self.sampler == "exact":
            eps = pure_epsilon(self._lattice_terms())
            return {"epsilon": float(eps), "epsilon_exact": str(eps),
                    "conversion": "exact: ε = Σ_S Δ_S/t_S for independent discrete Laplace blocks under integer "
                                  "shifts, then post-processing"}
        l1 = _l1(self.workload, self.weights, self.replace, self.multiplier)
        return {"epsilon": float(laplace_epsilon(l1, self.scale)),
                "conversion": "Laplace mechanism on the strategy A x, ε = Δ₁(A)/b (exact), then post-processing"}

    def noise_law(self) -> str:
        return ("a linear image (least squares) of i.i.d. Laplace noise on the measured marginals: not a product "
                "law on the released cells")

    def notes(self) -> list[str]:
        out = [EXACT_LAPLACE_NOTE] if self.sampler == "exact" else super().notes()
        if self.sampler == "exact":
            out.append(f"discrete Laplace error against Laplace noise at the design's scales: "
                       f"{self.design_info.get('lattice_error_ratio', math.nan):.9g}× the expected squared error")
        if self.replace:
            out.append("the grand total is the same on neighbouring datasets and is released exactly")
        bounds = self.design_info.get("lower_bounds")
        if bounds:
            out.append(f"lower bound on E‖Z‖² for every unbiased ε-DP mechanism of this workload: "
                       f"{bounds['unbiased_pure']:.6g} (this design: {self.design_info['ratio_to_lower_bound']:.3g}× "
                       f"it); for every strategy with Laplace noise: {bounds['laplace_strategies']:.6g}")
        return out

    # ------------------------------------------------------------ noise
    def cell_law_groups(self) -> tuple[np.ndarray, np.ndarray]:
        """Var Z_i = 2b² diag W(Σ_T κ_T E_T)⁺Wᵀ per released cell (closed form), and the block of each cell:
        the cells of one table have one noise law (module docstring)."""
        variances = cell_variances(self.workload, self.variance_coefficients())
        offsets = self.workload.offsets
        groups = np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))
        return variances, groups

    def variates_per_draw(self) -> int:
        """Laplace variates one draw of the noise takes: the cells of every measured marginal."""
        return sum(self.workload.algebra.size(s) for s in self.weights)

    def sampler_check_draws(self, default: int) -> int:
        r"""At most :data:`CHECK_VARIATES` Laplace variates, at least :data:`MIN_CHECK_DRAWS` draws: one draw of
        :math:`\|Z\|^2` sums many independent terms, so a few hundred draws already estimate its standard error
        (the claim's 5-SE tolerance) reliably."""
        return min(default, max(MIN_CHECK_DRAWS, CHECK_VARIATES // max(1, self.variates_per_draw())))

    def _sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        alg = self.workload.algebra
        sums: dict[Subset, np.ndarray] = {}
        lattice = self._lattice_noise(rng, size) if self.sampler == "exact" else {}
        for s, w in self.weights.items():
            z = (w * lattice[s] if self.sampler == "exact"
                 else rng.laplace(0.0, self.scale, (size,) + alg.table_shape(s)))
            for t in self.components:
                if set(t) <= set(s):
                    part = (w * alg.co_size(s)) * alg.center(alg.marginal(z, s, t), len(t))
                    sums[t] = part if t not in sums else sums[t] + part
        return synthesize_noise(self.workload, {t: c / self.kappa[t] for t, c in sums.items()}, size)

    def _lattice_noise(self, rng: np.random.Generator, size: int) -> dict[Subset, np.ndarray]:
        """η_S: ``size`` int64 S-tables of i.i.d. discrete Laplace(t_S) per measured marginal."""
        alg = self.workload.algebra
        return sample_blocks(rng, self.lattice, {s: alg.table_shape(s) for s in self.lattice}, size)

    def _release(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Floating point: φ(X) + Z. Exact: T-component Σ_{S⊇T} θ_S² ∏_{k∉S} n_k centre_T(u_{S,T})/κ_T of the
        integers u_{S,T} = M_T x + marg_{S→T} η_S (int64), public components from the answers (module docstring)."""
        if self.sampler != "exact":
            return values + self._sample(rng, values.shape[0])
        alg = self.workload.algebra
        noise = self._lattice_noise(rng, values.shape[0])

        def component(t: Subset, marginal: np.ndarray) -> np.ndarray | None:
            if t not in self.kappa:
                return None
            total = None
            for s, w in self.weights.items():
                if set(t) <= set(s):
                    u = marginal + alg.marginal(noise[s], s, t)  # integers: the T-marginal of y_S
                    term = (w * w * alg.co_size(s)) * alg.center(u, len(t))
                    total = term if total is None else total + term
            return total / self.kappa[t]

        return exact_marginal_release(self.workload, values, component)

    def _expected_l2(self, workload: np.ndarray | None) -> float | None:
        if workload is not None:
            return None
        return expected_error(self.workload, self.variance_coefficients())


def _l1(workload: MarginalWorkload, weights: dict[Subset, float], replace: bool, multiplier: int) -> Fraction:
    """Δ₁ of A = [θ_S M_S] under the adjacency, exact from the float weights."""
    if replace:
        total = sum((2 * Fraction(w) for s, w in weights.items() if moving(workload, s)), Fraction(0))
    else:
        total = sum((Fraction(w) for w in weights.values()), Fraction(0))
    return total * multiplier
