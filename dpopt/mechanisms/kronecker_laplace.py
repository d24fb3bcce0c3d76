r"""Pure ε for ``kronecker`` queries: Laplace noise on a Kronecker strategy, answered by least squares (``kronecker_laplace``).

For a union of Kronecker products W (range/prefix counts crossed with marginals;
:mod:`dpopt.domain.kronecker`) the family measures :math:`y = Ax + z`, :math:`z` i.i.d. Laplace(b) on
every row of :math:`A = (\bigotimes_{k\in V}A_k)\otimes[\theta_SM_S]_S` (ordered factors on the
attributes that are not plain, weighted marginals of the plain ones;
:mod:`dpopt.optimize.pure_kronecker`), and releases :math:`W\hat x`, :math:`\hat x = (A^\top A)^+A^\top y`.

**Privacy** (from the stored factors, θ and b only): the measurement is the Laplace mechanism on Ax,
ε = Δ₁(A)/b with :math:`\Delta_1(A) = \prod_{k\in V}\max_j\|A_ke_j\|_1\sum_S\theta_S` under add/remove
(exact), twice that under replace-one (an upper bound, by the triangle inequality), k times for Hamming k,
recomputed in rational arithmetic; the release is post-processing.

**Noise** (nothing of domain size is formed): per measured marginal S, a Laplace table of shape
(rows of each :math:`A_k`) × (cells of S) is drawn; :math:`A_k^+ = X_k^{-1}A_k^\top` is applied along each
ordered axis; in the ANOVA algebra of the plain attributes the T-component of :math:`\hat x - x` is
:math:`\kappa_T^{-1}\sum_{S\supseteq T}\theta_S\prod_{k\notin S}n_k\,\mathrm{center}_T(\mathrm{marg}_{S\to T}z_S)`
(as ``marginal_laplace``), a term's marginal is synthesized from its components and :math:`W_{t,k}` is
applied along each ordered axis.

**Exact measurement** (``sampler: exact``, the default where it applies;
:mod:`dpopt.mechanisms.laplace_lattice`). Each ordered factor is rounded to an integer matrix
:math:`\tilde A_k = \mathrm{round}(2^{e_k}A_k)` (entries up to about 2^13, full column rank), and the counts are
measured as :math:`y_S = (\bigotimes_k\tilde A_k\otimes M_S)x + \eta_S` in int64, :math:`\eta_S` i.i.d. discrete
Laplace of scale t_S. Under add/remove a record moves y_S by :math:`\bigotimes_k\tilde A_ke_{j_k}\otimes M_Se_j`,
of l1 norm :math:`\prod_k\|\tilde A_ke_{j_k}\|_1`, so ε = :math:`\tilde L\sum_S 1/t_S` with
:math:`\tilde L = \prod_k\max_j\|\tilde A_ke_j\|_1` (an integer), twice that under replace-one (triangle
inequality), k times for Hamming k; t_S is :math:`b\tilde L/(L\theta_S)` rounded up (L the continuous factors'
product of column maxima), so ε ≤ Δ₁/b. The least squares reads θ_S y_S with the factors :math:`\tilde A_k`
(post-processing); its T-component needs only the integers
:math:`u_{S,T} = (\bigotimes_k\tilde A_k\otimes M_T)x + \mathrm{marg}_{S\to T}\eta_S`, formed from the
(ordered × T)-marginal of the cells, which the answers determine when every term carries every ordered attribute
and the terms' factors are integer of full column rank (prefix, ranges, identity:
:func:`~dpopt.mechanisms.kronecker_lattice.cell_marginals`). When a term sums over an ordered attribute the design
measures blocks of whole factors, totals and the parts beside them instead
(:mod:`dpopt.mechanisms.kronecker_laplace_blocks`, a design of its own whose cost the certificate states). The noise's covariance is
:math:`\bigotimes_k(\tilde A_k^\top\tilde A_k)^{-1}\otimes\sum_T(\nu_T/\kappa_T^2)E_T`,
:math:`\nu_T = \sum_{S\supseteq T}\theta_S^4\prod_{k\notin S}n_k\,\mathrm{Var}\,\eta_S` (as ``marginal_laplace``).

**Errors** in closed form: :math:`E\|Z\|^2 = 2b^2\sum_t\prod_{k\in V}\mathrm{tr}(G_{t,k}X_k^{-1})
\prod_{k\in P\setminus S_t}n_k\sum_{T\subseteq S_t}m_T/\kappa_T`, recomputed from the stored strategy.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from fractions import Fraction

import numpy as np

from dpopt.core.checks import Check
from dpopt.core.rounding import nudge_until
from dpopt.domain.kronecker import KroneckerWorkload, apply_along
from dpopt.domain.marginal_algebra import Subset, subsets
from dpopt.domain.queries import KroneckerQuery
from dpopt.mechanisms.base import Mechanism
from dpopt.mechanisms.kronecker_gaussian import (
    anova_cell_variances,
    finite_factors,
    kronecker_scope_check,
    recorded_workload,
    terms_record,
)
from dpopt.mechanisms.kronecker_lattice import cell_marginals, recoverable_terms
from dpopt.mechanisms.laplace import laplace_privacy_check
from dpopt.mechanisms.laplace_lattice import (
    EXACT_LAPLACE_NOTE,
    lattice_pure_check,
    lattice_scale,
    lattice_variance_weights,
    pure_epsilon,
    sample_blocks,
)
from dpopt.mechanisms.lattice import integer_answers
from dpopt.mechanisms.marginal_gaussian import positive_by_set
from dpopt.optimize.kronecker_anova import AnovaSplit
from dpopt.optimize.kronecker_strategy import svd_bound
from dpopt.optimize.pure_kronecker import (
    Strategy,
    exact_column_l1,
    factor_traces,
    l1_sensitivity,
    measured_rows,
    optimal_strategy,
    plain_traces,
)
from dpopt.privacy.laplace import laplace_epsilon
from dpopt.problem import Problem
from dpopt.sensitivity.plain import hamming_factor
from dpopt.errors import DataError
from dpopt.sensitivity.space import SensitivitySpace
from dpopt.spec.models import Privacy

CHECK_LAPLACE = 10_000_000
"""Laplace variates the ``utility.sampler`` claim draws at most (:meth:`KroneckerLaplaceMechanism.sampler_check_draws`)."""

MIN_CHECK_DRAWS = 200
"""Fewest draws of that claim."""

CHUNK = 1000
"""Noise draws per chunk of the sampler."""

INTEGER_BITS = 13
"""The integer factors round 2^e A_k with e the largest exponent keeping every entry below 2^13 in magnitude."""

INT_LIMIT = 2**62
"""Largest magnitude of an int64 measurement."""


def integer_factor(a: np.ndarray) -> np.ndarray:
    """round(2^e A) (int64), 2^e·max|A| < 2^:data:`INTEGER_BITS` (e the largest such integer)."""
    top = float(np.abs(a).max())
    e = INTEGER_BITS - 1 - math.floor(math.log2(top)) if top > 0 else 0
    return np.rint(np.ldexp(a, e)).astype(np.int64)


def integer_column_l1(a: np.ndarray) -> int:
    """max_j ‖A e_j‖₁ of an integer matrix, exactly."""
    return int(np.abs(a.astype(object)).sum(axis=0).max())


def laplace_lower_bound(workload: KroneckerWorkload, epsilon: float) -> float | None:
    r""":math:`(2/\varepsilon^2)(\sum_i\sigma_i(W))^2/N` (add/remove): a lower bound on E‖Z‖² of every
    matrix mechanism with i.i.d. Laplace noise and a linear unbiased reconstruction
    (:mod:`dpopt.optimize.pure_kronecker`); None when the SVD of W is not available from its factors."""
    bound = svd_bound(workload)
    return None if bound is None else 2.0 * bound / (epsilon * epsilon)


SUMMED_ORDERED = ("a term sums over an ordered attribute: the strategy's rows need ordered × plain marginals the "
                  "answers do not determine (the exact block design of dpopt.mechanisms.kronecker_laplace_blocks "
                  "serves it)")
"""Why this class's own design keeps floating point on such a workload; the family's registered class,
:class:`~dpopt.mechanisms.kronecker_laplace_blocks.KroneckerLaplaceBlocks`, replaces it by the block design."""


class KroneckerLaplaceMechanism(Mechanism):
    """Laplace(b) on A x, A = (⊗_{k∈V} A_k) ⊗ [θ_S M_S]_S, answered by least squares on a ``kronecker`` query.

    Parameters
    ----------
    attributes : tuple of str
        The query's attributes (axis k ↔ ``attributes[k]``).
    workload : KroneckerWorkload
    replace : bool
        Replace-one (or Hamming) neighbours.
    multiplier : int
        The Hamming distance (capped at a public n), else 1.
    factors : tuple of numpy.ndarray
        A_k per ordered attribute (``AnovaSplit.of(workload).ordered``), m_k × n_k of full column rank.
    theta : dict
        θ_S > 0 per measured marginal S of the plain attributes (local indices of ``split.plain``).
    scale : float
        b, the Laplace scale on every measured row.
    design : dict, optional
        How the strategy was obtained (recorded for the reader, not used to rebuild).
    sampler : {"floating_point", "exact"}
    integer_factors : tuple of numpy.ndarray, optional
        Ã_k (int64), exact only.
    lattice : dict, optional
        t_S per measured marginal, exact only.
    """

    family = "kronecker_laplace"
    title = "Laplace noise on a Kronecker strategy, least squares (range/prefix × marginals, pure ε)"

    def __init__(self, attributes: tuple[str, ...], workload: KroneckerWorkload, replace: bool, multiplier: int,
                 factors: tuple[np.ndarray, ...], theta: dict[Subset, float], scale: float,
                 design: dict | None = None, sampler: str = "floating_point",
                 integer_factors: tuple[np.ndarray, ...] | None = None, lattice: dict[Subset, Fraction] | None = None):
        self.attributes = tuple(attributes)
        self.workload = workload
        self.replace = bool(replace)
        self.multiplier = int(multiplier)
        self.split = AnovaSplit.of(workload)
        self.factors = tuple(np.asarray(a, dtype=float) for a in factors)
        self.theta = {tuple(s): float(w) for s, w in theta.items()}
        self.scale = float(scale)
        self.design_info = dict(design or {})
        self.dimension = workload.dimension
        sizes = tuple(workload.sizes[k] for k in self.split.ordered)
        if len(self.factors) != len(sizes) or any(a.ndim != 2 or a.shape[1] != n for a, n in zip(self.factors, sizes)):
            raise ValueError("one factor per ordered attribute, with one column per level")
        if not all(np.all(np.isfinite(a)) for a in self.factors):
            raise ValueError("a strategy factor has a non-finite entry")
        if not all(math.isfinite(w) and w > 0 for w in self.theta.values()) or \
                not all(0 <= i < len(self.split.plain) for s in self.theta for i in s):
            raise ValueError("marginal weights: positive, finite, over the plain attributes")
        if not (math.isfinite(self.scale) and self.scale > 0):
            raise ValueError(f"scale {scale!r} (positive, finite)")
        self.kappa = {t: sum(w * w * self.split.algebra.co_size(s) for s, w in self.theta.items() if set(t) <= set(s))
                      for t in self.split.components(workload)}
        if sampler not in ("floating_point", "exact"):
            raise ValueError(f"sampler {sampler!r} (floating_point or exact)")
        self.sampler = sampler
        self.needs_integer_answers = sampler == "exact"
        self.integer_factors: tuple[np.ndarray, ...] = ()
        self.lattice: dict[Subset, Fraction] = {}
        if sampler == "exact":
            if integer_factors is None or lattice is None:
                raise ValueError("the exact sampler needs the integer factors and the lattice scales")
            self.integer_factors = tuple(np.asarray(a) for a in integer_factors)
            if len(self.integer_factors) != len(sizes) or any(
                    a.ndim != 2 or a.shape[1] != n or not np.all(a == np.rint(a)) or np.abs(a).max() >= 2**31
                    for a, n in zip(self.integer_factors, sizes)):
                raise ValueError("one integer factor per ordered attribute (entries below 2^31), one column per level")
            self.integer_factors = tuple(a.astype(np.int64) for a in self.integer_factors)
            self.lattice = {tuple(s): Fraction(t) for s, t in lattice.items()}
            if set(self.lattice) != set(self.theta) or not all(t > 0 for t in self.lattice.values()):
                raise ValueError("one positive lattice scale per measured marginal")
        self._ls = tuple(a.astype(float) for a in self.integer_factors) if sampler == "exact" else self.factors

    @property
    def strategy(self) -> Strategy:
        names = tuple(self.design_info.get("factor_names", ("",) * len(self.factors)))
        return Strategy(self.factors, names, self.theta)

    # ---------------------------------------------------------------- facts
    @classmethod
    def supports(cls, problem: Problem) -> str | None:
        spec, query = problem.spec, problem.query
        if not isinstance(query, KroneckerQuery):
            return "Kronecker strategies serve kronecker queries (a union of Kronecker products of per-attribute matrices)"
        if spec.privacy.definition != "pure":
            return f"this Laplace strategy is calibrated for pure ε, not {spec.privacy.definition}"
        if spec.utility.metric != "l2" or spec.utility.workload is not None or spec.utility.weights is not None:
            return f"the strategy minimises the unweighted l2 error of the query, not '{spec.utility.metric}' or a workload"
        return None

    @classmethod
    def utility_bound(cls, problem: Problem) -> float | None:
        """Under add/remove, the SVD bound for Laplace matrix mechanisms (:func:`laplace_lower_bound`)."""
        if cls.supports(problem) is not None or problem.spec.adjacency.kind != "add_remove":
            return None
        return laplace_lower_bound(problem.query.kron, float(problem.spec.privacy.parameters["epsilon"]))

    @classmethod
    def design(cls, problem: Problem) -> KroneckerLaplaceMechanism:
        """Optimise the strategy (:func:`~dpopt.optimize.pure_kronecker.optimal_strategy`), then
        b = Δ₁/ε nudged until the exact check holds."""
        spec, space, query = problem.spec, problem.space, problem.query
        workload = query.kron
        replace = spec.adjacency.kind != "add_remove"
        k = hamming_factor(spec)
        epsilon = float(spec.privacy.parameters["epsilon"])
        found = optimal_strategy(workload)
        s = found.strategy
        attributes = tuple(query.attributes)
        l1 = l1_sensitivity(s, replace, k)

        def at(scale: float, info: dict | None = None) -> KroneckerLaplaceMechanism:
            return cls(attributes, workload, replace, k, s.factors, s.theta, scale, info)

        scale = float(nudge_until(float(l1) / epsilon, lambda b: all(
            c.passed for c in at(b).privacy_checks(space, spec.privacy)), up=True))
        error = at(scale)._expected_l2(None)
        factor = 2.0 * (2 if replace else 1) ** 2 * k * k / epsilon**2  # E‖Z‖² per unit error at Δ₁ = 1
        bound = laplace_lower_bound(workload, epsilon) if not replace else None
        info = {
            "method": (f"A = (⊗ ordered factors) ⊗ (weighted marginals of the plain attributes): {found.rounds} "
                       "round(s) alternating θ (L-BFGS-B, fixed starts) and each ordered factor (best of identity, "
                       "binary hierarchy, p-Identity by L-BFGS-B with its gradient from fixed seeds); "
                       f"identity, hierarchical and p-Identity strategies scored beside it; chosen: {found.chosen}"),
            "factor_names": list(s.names),
            "l1_sensitivity": str(l1),
            "expected_l2": error,
            "laplace_lower_bound": bound,
            "ratio_to_lower_bound": None if bound is None else error / bound,
            "lower_bound_covers": None if bound is None else (
                "every matrix mechanism with i.i.d. Laplace noise and a linear unbiased reconstruction, add/remove "
                "(the SVD bound at Δ₂ ≤ Δ₁); not every ε-DP mechanism"),
            "baselines": {
                **{f"{name}_strategy": factor * value for name, value in found.scored.items()},
                "laplace_on_answers": 2.0 * (float(space.l1) / epsilon) ** 2 * workload.dimension,
            },
        }
        reason = cls.exact_reason(spec, workload, s.factors)
        info["sampler"] = "exact" if reason is None else f"floating_point: {reason}"
        if reason is not None:
            return at(scale, info)
        ordered = AnovaSplit.of(workload).ordered
        if any(workload.terms[t][j] is None for t in range(len(workload.terms)) for j in ordered):
            info["sampler"] = f"floating_point: {SUMMED_ORDERED}"
            return at(scale, info)
        integer = tuple(integer_factor(a) for a in s.factors)
        gain = Fraction(math.prod(integer_column_l1(a) for a in integer)) / math.prod(
            (exact_column_l1(a) for a in s.factors), start=Fraction(1))
        lattice = {m: lattice_scale(Fraction(scale) * gain / Fraction(w)) for m, w in s.theta.items()}
        exact = cls(attributes, workload, replace, k, s.factors, s.theta, scale, None, "exact", integer, lattice)
        info["lattice_error_ratio"] = exact._expected_l2(None) / error
        return cls(attributes, workload, replace, k, s.factors, s.theta, scale, info, "exact", integer, lattice)

    @staticmethod
    def exact_reason(spec, workload: KroneckerWorkload, factors: tuple[np.ndarray, ...]) -> str | None:
        """Why the design keeps the floating-point sampler (None: it measures exactly, module docstring)."""
        if spec.sampler == "floating_point":
            return "the spec asks for sampler: floating_point"
        found = recoverable_terms(workload)
        if isinstance(found, str):
            return found
        if any(np.linalg.matrix_rank(integer_factor(a).astype(float)) < a.shape[1] for a in factors):
            return "a strategy factor rounded to integers loses full column rank"
        return None

    @classmethod
    def from_parameters(cls, parameters: dict, space: SensitivitySpace) -> KroneckerLaplaceMechanism:
        attributes, workload = recorded_workload(parameters, space)
        split = AnovaSplit.of(workload)
        owners = tuple(attributes[k] for k in split.ordered)
        by_name = {f["attribute"]: np.asarray(f["matrix"], dtype=float) for f in parameters["strategy"]["ordered"]}
        if set(by_name) != set(owners) or len(by_name) != len(parameters["strategy"]["ordered"]):
            raise ValueError(f"the ordered factors are for {sorted(by_name)}, expected {list(owners)}")
        theta = positive_by_set(tuple(attributes[k] for k in split.plain), parameters["strategy"]["marginals"],
                                "marginal", "weight")
        sampler = parameters.get("sampler", "floating_point")
        integer = lattice = None
        if sampler == "exact":
            try:
                record = parameters["lattice"]
                ints = {f["attribute"]: np.asarray(f["matrix"]) for f in record["factors"]}
                integer = tuple(ints[a] for a in owners)
                plain = tuple(attributes[k] for k in split.plain)
                lattice = {tuple(sorted(plain.index(a) for a in e["marginal"])): Fraction(str(e["scale"]))
                           for e in record["scales"]}
            except (KeyError, TypeError) as exc:
                raise ValueError(f"lattice: integer factors per ordered attribute and a scale per marginal ({exc})") \
                    from None
        return cls(attributes, workload, parameters["adjacency"] == "replace_one", int(parameters["multiplier"]),
                   finite_factors(tuple(by_name[a] for a in owners)), theta, float(parameters["scale"]),
                   parameters.get("design"), sampler, integer, lattice)

    @property
    def parameters(self) -> dict:
        plain = [self.attributes[k] for k in self.split.plain]
        return {
            "attributes": list(self.attributes),
            "levels": list(self.workload.sizes),
            "terms": terms_record(self.attributes, self.workload),
            "adjacency": "replace_one" if self.replace else "add_remove",
            "multiplier": self.multiplier,
            "scale": self.scale,
            "strategy": {
                "ordered": [{"attribute": self.attributes[k], "matrix": a.tolist()}
                            for k, a in zip(self.split.ordered, self.factors)],
                "marginals": [{"marginal": [plain[i] for i in s], "weight": w} for s, w in self.theta.items()],
            },
            "sampler": self.sampler,
            **({"lattice": {
                "factors": [{"attribute": self.attributes[k], "matrix": a.tolist()}
                            for k, a in zip(self.split.ordered, self.integer_factors)],
                "scales": [{"marginal": [plain[i] for i in s], "scale": str(t)} for s, t in self.lattice.items()],
            }} if self.sampler == "exact" else {}),
            "design": self.design_info,
        }

    def scope_checks(self, problem: Problem) -> list[Check]:
        """The attributes, levels, terms, adjacency and multiplier recorded are the compiled spec's."""
        return [kronecker_scope_check(problem, self), self._bound_check(problem)]

    def _bound_check(self, problem: Problem) -> Check:
        """The recorded lower bound recomputed from the compiled workload and ε, and below the achieved error."""
        recorded = self.design_info.get("laplace_lower_bound")
        bound = None
        if problem.spec.privacy.definition == "pure" and not self.replace and isinstance(problem.query, KroneckerQuery):
            bound = laplace_lower_bound(problem.query.kron, float(problem.spec.privacy.parameters["epsilon"]))
        achieved = self._continuous_l2()
        same = (recorded is None and bound is None) or (
            recorded is not None and bound is not None and math.isclose(recorded, bound, rel_tol=1e-9))
        if self.design_info:  # the record's sensitivity (exact) and error (closed form) are the stored strategy's
            l1 = l1_sensitivity(self.strategy, self.replace, self.multiplier)
            error = self.design_info.get("expected_l2")
            same = same and self.design_info.get("l1_sensitivity") == str(l1) and isinstance(error, float) and \
                math.isclose(error, achieved, rel_tol=1e-9)
            if self.sampler == "exact":
                ratio = self.design_info.get("lattice_error_ratio")
                same = same and isinstance(ratio, float) and math.isclose(
                    ratio, self._expected_l2(None) / achieved, rel_tol=1e-9)
        return Check("utility.lower_bound",
                     "the recorded lower bound 2/ε²·(Σσ_i(W))²/N (Laplace matrix mechanisms, add/remove) equals its "
                     "recomputation from the workload's factors and is at most the achieved error; the recorded l1 "
                     "sensitivity (exact) and expected error (closed form) are the stored strategy's"
                     + ("; the lattice error ratio (discrete Laplace on the integer factors over that error) "
                        "re-derived" if self.sampler == "exact" else ""),
                     same and (bound is None or bound <= achieved),
                     "no bound (replace-one or Hamming)" if bound is None else
                     f"achieved {achieved:.8g} / bound {bound:.8g} = ratio {achieved / bound:.4g}")

    def _lattice_terms(self) -> list[tuple[int, Fraction]]:
        """(Δ_S, t_S) per measured marginal: Δ_S = L̃ = ∏_k max_j ‖Ã_k e_j‖₁, × 2 under replace-one, × k."""
        shift = math.prod(integer_column_l1(a) for a in self.integer_factors) * (2 if self.replace else 1) \
            * self.multiplier
        return [(shift, t) for t in self.lattice.values()]

    def _privacy_checks(self, space: SensitivitySpace, privacy: Privacy) -> list[Check]:
        ranks = [int(np.linalg.matrix_rank(a)) == a.shape[1] for a in self._ls]
        covered = all(k > 0 for k in self.kappa.values())
        estimable = Check("strategy.estimable",
                          "every ordered factor has full column rank and the measured marginals cover every ANOVA "
                          "component of the workload's marginals (κ_T > 0), so the least-squares answers are unbiased",
                          all(ranks) and covered, f"{len(self.factors)} factor(s), {len(self.kappa)} component(s)")
        if self.sampler == "exact":
            inner = lattice_pure_check(self._lattice_terms(), privacy, (
                f"Δ_S = ∏_k max_j ‖Ã_k e_j‖₁ of the stored integer factors"
                + (" × 2 (replace-one, triangle inequality)" if self.replace else "")
                + (f" × {self.multiplier} (Hamming)" if self.multiplier != 1 else "")
                + f" and t_S the stored scales of the {len(self.lattice)} measured marginals"))
            return [estimable, Check("privacy", inner.method, estimable.passed and inner.passed, inner.detail)]
        l1 = l1_sensitivity(self.strategy, self.replace, self.multiplier)
        inner = laplace_privacy_check(l1, self.scale, privacy)
        check = Check("privacy",
                      "Laplace mechanism on A x, A = (⊗ ordered factors) ⊗ [θ_S M_S]: Δ₁ = ∏_k max_j ‖A_k e_j‖₁ · Σ_S θ_S"
                      + (" × 2 (replace-one, triangle inequality)" if self.replace else "")
                      + (f" × {self.multiplier} (Hamming)" if self.multiplier != 1 else "")
                      + f" = {float(l1):.17g}, exactly in rationals from the stored floats; the release is "
                        "post-processing: " + inner.method,
                      estimable.passed and inner.passed, inner.detail)
        return [estimable, check]

    def privacy_summary(self, space: SensitivitySpace) -> dict:
        if self.sampler == "exact":
            eps = pure_epsilon(self._lattice_terms())
            return {"epsilon": float(eps), "epsilon_exact": str(eps),
                    "conversion": "exact: ε = Σ_S Δ_S/t_S for independent discrete Laplace blocks under integer "
                                  "shifts, then post-processing"}
        l1 = l1_sensitivity(self.strategy, self.replace, self.multiplier)
        return {"epsilon": float(laplace_epsilon(l1, self.scale)),
                "conversion": "Laplace mechanism on the strategy A x, ε = Δ₁(A)/b (exact), then post-processing"}

    def noise_law(self) -> str:
        return ("a linear image (least squares) of i.i.d. Laplace noise on the strategy's rows: not a product law "
                "on the released answers")

    def notes(self) -> list[str]:
        out = [EXACT_LAPLACE_NOTE] if self.sampler == "exact" else super().notes()
        info = self.design_info
        if self.sampler == "exact":
            out.append(f"discrete Laplace on the integer factors against Laplace noise on the design's factors: "
                       f"{info.get('lattice_error_ratio', math.nan):.9g}× the expected squared error")
        elif str(info.get("sampler", "")).startswith("floating_point: ") and "spec asks" not in info["sampler"]:
            out.append(f"no exact measurement: {info['sampler'].split(': ', 1)[1]}")
        if info.get("laplace_lower_bound"):
            out.append(f"expected l2 error: achieved {info['expected_l2']:.6g} / lower bound "
                       f"{info['laplace_lower_bound']:.6g} = ratio {info['ratio_to_lower_bound']:.4g}; the bound covers "
                       f"{info['lower_bound_covers']}")
        return out

    # ------------------------------------------------------------ noise

    def _pinv(self) -> list[np.ndarray]:
        """A_k⁺ = (A_kᵀA_k)⁻¹A_kᵀ of the least squares' factors (Ã_k on the lattice)."""
        return [np.linalg.solve(a.T @ a, a.T) for a in self._ls]

    def _lattice_noise(self, rng: np.random.Generator, size: int) -> dict[Subset, np.ndarray]:
        """η_S (int64), laid out (rows of each Ã_k, ``size``, cells of S), i.i.d. discrete Laplace(t_S)."""
        alg, rows = self.split.algebra, tuple(a.shape[0] for a in self.integer_factors)
        drawn = sample_blocks(rng, self.lattice, {s: rows + alg.table_shape(s) for s in self.lattice}, size)
        return {s: np.moveaxis(z, 0, len(rows)) for s, z in drawn.items()}

    def _term_noise(self, rng: np.random.Generator, size: int) -> Iterator[np.ndarray]:
        """Each term's noise block (size × rows), in order (module docstring). The tables are laid out with the
        ordered axes first and the draws next, so that each ordered factor applies as one matrix product."""
        alg = self.split.algebra
        pinv = self._pinv()
        lattice = self._lattice_noise(rng, size) if self.sampler == "exact" else {}
        sums: dict[Subset, np.ndarray] = {}
        for s, w in self.theta.items():
            z = (w * lattice[s] if self.sampler == "exact" else
                 rng.laplace(0.0, self.scale, tuple(a.shape[0] for a in self.factors) + (size,) + alg.table_shape(s)))
            for i, p in enumerate(pinv):
                z = apply_along(z, p, i)
            for t, centred in _centred_marginals(alg, z, s, [t for t in self.kappa if set(t) <= set(s)]).items():
                part = (w * alg.co_size(s)) * centred
                sums[t] = part if t not in sums else sums[t] + part
        return self._assemble({t: c / self.kappa[t] for t, c in sums.items()}, size)

    def _assemble(self, components: dict[Subset, np.ndarray], size: int) -> Iterator[np.ndarray]:
        """Each term's answers (size × rows) from the least squares' plain components (ordered axes first, then
        the draws, then the component's plain axes): synthesized per term and W_{t,k} applied along each ordered
        axis."""
        split, alg, work = self.split, self.split.algebra, self.workload
        v = len(self.factors)
        for term in range(len(work.terms)):
            s = split.local_support(work, term)
            present = {t: components[t] for t in subsets(s) if t in components}
            if present:
                table = alg.synthesize(present, s)
            else:  # every component of this marginal has multiplicity 0 (levels of one): no noise beyond V
                table = np.zeros(tuple(work.sizes[k] for k in split.ordered) + (size,) + alg.table_shape(s))
            for i, k in enumerate(split.ordered):
                table = apply_along(table, work.factor(term, k), i)
            table = np.moveaxis(table, v, 0)  # draws first, then the ordered axes, then the plain ones
            labels = list(split.ordered) + [split.plain[i] for i in s]
            keep = [j for j, k in enumerate(labels) if work.terms[term][k] is not None]
            table = table.reshape((size,) + tuple(table.shape[1 + j] for j in keep))
            order = np.argsort([labels[j] for j in keep])
            yield np.transpose(table, (0,) + tuple(1 + int(o) for o in order)).reshape(size, -1)

    def _release(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Floating point: φ(X) + Z. Exact: the least squares of the integers u_{S,T} = (⊗Ã_k ⊗ M_T)x +
        marg_{S→T} η_S (int64, from the cells' (ordered × T)-marginals recovered from the answers; module
        docstring)."""
        if self.sampler != "exact":
            return values + self._sample(rng, values.shape[0])
        split, alg = self.split, self.split.algebra
        counts = integer_answers(values)
        m = counts.shape[0]
        noise = self._lattice_noise(rng, m)
        cells = cell_marginals(self.workload, counts)
        pinv = self._pinv()
        rows = math.prod(int(np.abs(a).sum(axis=1).max()) for a in self.integer_factors)
        components = {}
        for t in self.kappa:
            block = tuple(sorted(set(split.ordered) | {split.plain[i] for i in t}))
            order = [1 + block.index(k) for k in split.ordered] + [0] + [1 + block.index(split.plain[i]) for i in t]
            x = np.transpose(cells[block], order)
            if int(np.abs(x).max(initial=0)) * rows >= INT_LIMIT // 2:
                raise DataError("the exact (lattice) release: the counts are beyond the int64 measurement's range")
            for i, a in enumerate(self.integer_factors):
                x = np.moveaxis(np.moveaxis(x, i, -1) @ a.T, -1, i)
            total = None
            for s, w in self.theta.items():
                if set(t) <= set(s):
                    u = (x + alg.marginal(noise[s], s, t)).astype(float)  # the integers u_{S,T}, then floats
                    for i, p in enumerate(pinv):
                        u = apply_along(u, p, i)
                    term = (w * w * alg.co_size(s)) * alg.center(u, len(t))
                    total = term if total is None else total + term
            components[t] = total / self.kappa[t]
        return np.concatenate(list(self._assemble(components, m)), axis=1)

    def _sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """Draws in chunks of at most :data:`CHUNK` (the Laplace tables of a chunk stay small)."""
        if size == 0:
            return np.zeros((0, self.dimension))
        return np.concatenate([np.concatenate(list(self._term_noise(rng, min(CHUNK, size - done))), axis=1)
                               for done in range(0, size, CHUNK)], axis=0)

    def sampler_check_draws(self, default: int) -> int:
        r"""At most :data:`CHECK_LAPLACE` Laplace variates, at least :data:`MIN_CHECK_DRAWS` draws: one draw of
        :math:`\|Z\|^2` is a sum over many answers of a linear image of many independent Laplace variates, so its
        spread is small next to its mean and a few hundred draws estimate the 5-SE tolerance reliably."""
        return min(default, max(MIN_CHECK_DRAWS, CHECK_LAPLACE // max(1, measured_rows(self.split, self.strategy))))

    def _plain_weights(self) -> dict[Subset, float]:
        """The weights b_T of :func:`~dpopt.mechanisms.kronecker_gaussian.anova_cell_variances` per unit of noise
        variance: κ_T/(2b²) for Laplace(b), κ_T²/ν_T on the lattice (module docstring)."""
        if self.sampler != "exact":
            return {t: k / (2.0 * self.scale**2) for t, k in self.kappa.items()}
        return lattice_variance_weights(self.kappa, self.theta, self.split.algebra, self.lattice)

    def _variances(self) -> np.ndarray:
        """Var Z_i per answer in closed form: :func:`~dpopt.mechanisms.kronecker_gaussian.anova_cell_variances`
        of the least squares' factors at :meth:`_plain_weights`."""
        return anova_cell_variances(self.split, self._ls, self.workload, self._plain_weights())

    def unimodal_cell_variances(self) -> np.ndarray | None:
        r"""Var Z_i = 2b² diag W(AᵀA)⁺Wᵀ per answer, exactly, with the Kronecker structure (nothing of domain
        size): :math:`(A^\top A)^+ = \bigotimes_{k\in V}X_k^{-1}\otimes\sum_T\kappa_T^{-1}E_T`, so an answer r of
        term t has :math:`2b^2\prod_{k\in V}(W_{t,k}X_k^{-1}W_{t,k}^\top)_{r_kr_k}` times the plain part, the same
        in every cell of the S_t-marginal: :math:`\sum_{T\subseteq S_t}\kappa_T^{-1}\prod_{k\in T}(1-1/n_k)
        \prod_{k\in S_t\setminus T}n_k^{-1}\prod_{k\in P\setminus S_t}n_k` (as ``kronecker_gaussian``'s
        ANOVA variances at b_T = κ_T). Z is a linear map of the independent Laplace variates, so these are exact.
        None on the lattice: a real-weighted sum of discrete Laplace variables is not unimodal in general
        (:meth:`cell_law_groups` serves it)."""
        return None if self.sampler == "exact" else self._variances()

    def cell_law_groups(self) -> tuple[np.ndarray, np.ndarray] | None:
        """On the lattice: the closed-form variances and, as groups, the answers of one term at one row of its
        ordered factors. Permuting the levels of a plain attribute permutes the cells of every measured marginal
        (whose noise is i.i.d.) and commutes with the least squares and the term's identity/sum factors, so the
        answers of a group have one noise law. None off the lattice (:meth:`unimodal_cell_variances`)."""
        if self.sampler != "exact":
            return None
        work, split = self.workload, self.split
        labels = []
        for term in range(len(work.terms)):
            kept = [k for k in range(len(work.sizes)) if work.terms[term][k] is not None]
            shape = tuple(work.factor(term, k).shape[0] for k in kept)
            grid = np.indices(shape).reshape(len(shape), -1)
            ordered = [grid[kept.index(k)] if k in kept else np.zeros(grid.shape[1], dtype=np.int64)
                       for k in split.ordered]  # a summed ordered attribute: its one row
            rows = tuple(work.factor(term, k).shape[0] for k in split.ordered)
            labels.append(np.ravel_multi_index(ordered, rows) * len(work.terms) + term if rows else
                          np.full(grid.shape[1], term))
        return self._variances(), np.unique(np.concatenate(labels), return_inverse=True)[1]

    def _continuous_l2(self) -> float:
        """2b² Σ_t ∏_k tr(G_{t,k}X_k⁻¹)·(plain trace) of the design's continuous factors and Laplace(b)."""
        traces = plain_traces(self.workload, self.split, self.theta)
        for k, a in zip(self.split.ordered, self.factors):
            traces = traces * factor_traces(self.workload, k, a)
        return 2.0 * self.scale**2 * float(np.sum(traces))

    def _expected_l2(self, workload: np.ndarray | None) -> float | None:
        """The closed form (module docstring); on the lattice with Ã_k and the plain trace
        ∏_{k∈P∖S_t} n_k Σ_{T⊆S_t} m_T ν_T/κ_T²."""
        if workload is not None:
            return None
        if self.sampler != "exact":
            return self._continuous_l2()
        alg, weights = self.split.algebra, self._plain_weights()
        traces = np.array([alg.co_size(s) * sum(alg.multiplicity(u) / weights[u] for u in subsets(s) if u in weights)
                           for s in (self.split.local_support(self.workload, t) for t in range(len(self.workload.terms)))])
        for k, a in zip(self.split.ordered, self._ls):
            traces = traces * factor_traces(self.workload, k, a)
        return float(np.sum(traces))


MAX_MAP_ENTRIES = 10_000_000
"""Largest dense map (cells of S × cells of the wanted T's) of :func:`_centred_marginals`."""


def _centred_marginals(alg, table: np.ndarray, s: Subset, wanted: list[Subset]) -> dict[Subset, np.ndarray]:
    r"""center_T(marg_{S→T} table) for each T of ``wanted`` (s-tables on the trailing axes). Both maps are
    linear, :math:`\bigotimes_{k\in S}(I - J/n_k\ \text{if}\ k\in T\ \text{else}\ \mathbf 1^\top)`, so they are
    applied as one matrix product when that matrix is small (:data:`MAX_MAP_ENTRIES`), else by sums and
    centring."""
    cells = alg.size(s)
    lead = table.shape[: table.ndim - len(s)]
    if cells * sum(alg.size(t) for t in wanted) > MAX_MAP_ENTRIES:
        return {t: alg.center(alg.marginal(table, s, t), len(t)) for t in wanted}
    maps = []
    for t in wanted:
        m = np.ones((1, 1))
        for k in s:
            n = alg.sizes[k]
            m = np.kron(m, np.eye(n) - 1.0 / n if k in t else np.ones((1, n)))
        maps.append(m)
    out = table.reshape(-1, cells) @ np.vstack(maps).T
    offsets = np.cumsum([0] + [m.shape[0] for m in maps])
    return {t: out[:, offsets[i]: offsets[i + 1]].reshape(lead + alg.table_shape(t)) for i, t in enumerate(wanted)}
