r"""A Kronecker strategy measured with Gaussian noise, answered by least squares (``kronecker_gaussian``).

For a ``kronecker`` query (a union of Kronecker products, e.g. prefix or range counts over an
ordered attribute crossed with marginals of others; :mod:`dpopt.domain.kronecker`) the family
measures :math:`Ax + z`, :math:`A = \bigotimes_k A_k`, :math:`z \sim N(0, s^2 I_N)`, and releases
:math:`W\hat x = Wx + WA^{-1}z` (least squares; A is square and invertible). The factors come
from :func:`dpopt.optimize.kronecker_strategy.optimal_kronecker` (each attribute's factor the
optimum of the 1-D strategy program given the others). Under add/remove, when some attributes are
*plain* (identity or summed out in every term), the strategy is instead
:math:`A = (\bigotimes_{k\in V}A_k)\otimes B` with :math:`B = \sum_T\sqrt{b_T}E_T` in the ANOVA
algebra of the plain attributes (:mod:`dpopt.optimize.kronecker_anova`; it contains the product
strategy, from which its alternation starts, so it is never worse). B is singular off the
components the workload sees (b_T = 0 there); the answers are then the least-squares
:math:`W(A^\top A)^+A^\top y`, whose noise is :math:`W A^+ z` with
:math:`A^+ = A_V^{-1}\otimes\sum_T b_T^{-1/2}E_T`.

**Privacy** (evaluated at the stored factors and s, independently of the design): the release is
a post-processing of :math:`Ax + z`, which is exactly :math:`\Delta_2(A)/s`-GDP with
:math:`\Delta_2(A)^2` the largest :math:`\|A\delta\|^2` over neighbouring differences
(columns under add/remove, column differences under replace-one, × k for Hamming k), recomputed
exactly in rationals from the stored floats (:func:`~dpopt.optimize.kronecker_strategy.strategy_sensitivity`)
and checked by :func:`~dpopt.privacy.gaussian_calibration.gaussian_privacy_check`.

**Sampling** (no N-sized array). Let :math:`L_k = A_k^{-1}`, :math:`q_k = L_k^\top\mathbf 1/\|L_k^\top\mathbf 1\|`,
:math:`O_k = [q_k, Q_k]` orthogonal and :math:`R_k = L_kO_k`. Then :math:`z = s(\bigotimes_k O_k)h`,
:math:`h\sim N(0, I_N)`, and :math:`A^{-1}z = s(\bigotimes_k R_k)h`; summing attribute k out multiplies
by :math:`\mathbf 1^\top R_k = (\|L_k^\top\mathbf 1\|, 0, \dots, 0)`, so the marginal over a term's
support S is :math:`M_SA^{-1}z = s\prod_{k\notin S}\|L_k^\top\mathbf 1\|\,(\bigotimes_{k\in S}R_k)h_S`
with :math:`h_S` the entries of h whose index is 0 outside S. Those entries, for all supports, are
the independent blocks :math:`g_T` (index ≥ 1 exactly on T) for T ⊆ some S, of
:math:`\prod_{k\in T}(n_k-1)` entries each: only they are drawn, and the term's noise is
:math:`(\bigotimes_{k\in S}W_{t,k}R_k)` applied to :math:`h_S`.

**Sampling, ANOVA form**: :math:`M_SE_Tz` depends on z only through its centred T-marginal, which is
:math:`\sqrt{\prod_{k\in P\setminus T}n_k}` times a centred standard normal T-table
(:mod:`dpopt.domain.marginal_algebra`); one such table g_T per component and per level of the ordered
attributes is drawn, scaled by :math:`s\,b_T^{-1/2}`, a term's marginal is synthesized from its
components and :math:`W_{t,k}A_k^{-1}` is applied along each ordered axis.

**Exact measurement** (``sampler: exact``, the default, product strategy): the blocks of the rotated strategy are
measured as integers with discrete Gaussian noise (:mod:`dpopt.mechanisms.kronecker_lattice`); the release is
post-processing of those integers, and the certificate's privacy claim is evaluated from the integer factors.

**Errors** in closed form: :math:`E\|Z\|^2 = s^2\sum_t\prod_k\mathrm{tr}(G_{t,k}X_k^{-1})`;
a cell's variance is :math:`s^2\prod_k (W_{t,k}X_k^{-1}W_{t,k}^\top)_{rr}`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from fractions import Fraction
from functools import cached_property

import numpy as np

from dpopt.core.checks import Check
from dpopt.core.rounding import nudge_until
from dpopt.domain.kronecker import KroneckerWorkload, apply_along, factor_matrix
from dpopt.domain.marginal_algebra import Subset, subsets
from dpopt.domain.queries import KroneckerQuery
from dpopt.mechanisms.base import MONTE_CARLO_SEED, Mechanism, UtilityValue
from dpopt.mechanisms.kronecker_lattice import (
    KroneckerLattice,
    block_family,
    calibrate,
    choose_divisors,
    choose_scales,
    lattice_check,
    unrounded_error,
    range_cap,
    recoverable_terms,
)
from dpopt.mechanisms.lattice import (
    EXACT_MEASUREMENT_NOTE,
    GDP_TARGETS,
    MAX_WIDE_LATTICE_SIGMA2,
    MIN_LATTICE_SIGMA2,
    check_draws,
    discrete_variance,
    effective_variance,
    exact_refusal,
    integer_answers,
    lattice_privacy_summary,
)
from dpopt.mechanisms.marginal_gaussian import positive_by_set
from dpopt.noise.gaussian import GaussianMarginal
from dpopt.noise.law import ProductLaw
from dpopt.optimize.kronecker_anova import AnovaSplit, anova_sensitivity, anova_unit_error, from_product, optimal_anova
from dpopt.optimize.kronecker_strategy import (
    identity_unit_error,
    optimal_kronecker,
    strategy_sensitivity,
    svd_bound,
    unit_error,
)
from dpopt.privacy.gaussian import gaussian_epsilon
from dpopt.privacy.gaussian_calibration import gaussian_privacy_check, gaussian_sigma
from dpopt.problem import Problem
from dpopt.sensitivity.plain import hamming_factor
from dpopt.sensitivity.space import SensitivitySpace
from dpopt.spec.models import Privacy
from dpopt.spec.models_workload import MatrixFactor, RangesFactor

_TARGETS = ("gdp", "zcdp", "approx")

BASE_ROOM = 4**6
"""The finest factors may be 64 times finer than the range cap allows the largest block: the blocks with room keep
them, the others divide them (:func:`~dpopt.mechanisms.kronecker_lattice.choose_divisors`)."""

CHUNK = 250
"""Noise draws per chunk of the l2 Monte Carlo check."""

CHECK_NORMALS = 40_000_000
"""Standard normal variates the ``utility.sampler`` claim draws at most (:meth:`KroneckerGaussianMechanism.sampler_check_draws`)."""

MIN_CHECK_DRAWS = 200
"""Fewest draws of that claim."""

MAX_LAW_CELLS = 4096
"""Largest domain (and query dimension ≤ 1500) whose noise law is stated densely for ``dpopt verify``'s
second route; above it the law is described in words."""


def _factor_record(name: str, matrix: np.ndarray | None) -> object:
    """A workload factor as the spec writes it (the certificate's ``terms``)."""
    if name.startswith("ranges<="):
        return {"ranges": int(name[len("ranges<="):])}
    if name == "matrix":
        return {"matrix": matrix.tolist()}
    return name


def _factor_spec(record: object) -> object:
    """The spec factor of a recorded one (inverse of :func:`_factor_record`)."""
    if isinstance(record, dict) and "ranges" in record:
        return RangesFactor(ranges=record["ranges"])
    if isinstance(record, dict):
        return MatrixFactor(matrix=record["matrix"])
    if record not in ("identity", "total", "prefix", "ranges"):
        raise ValueError(f"unknown factor {record!r}")
    return record


def terms_record(attributes: tuple[str, ...], workload: KroneckerWorkload) -> list[dict]:
    """The workload's terms as ``{attribute: factor}`` maps (totals left out)."""
    return [{a: _factor_record(n, f) for a, n, f in zip(attributes, names, term) if n != "total"}
            for names, term in zip(workload.names, workload.terms)]


def workload_from_record(attributes: tuple[str, ...], levels: tuple[int, ...], terms: list) -> KroneckerWorkload:
    """The workload of recorded terms (raises ValueError on a malformed record)."""
    factors, names = [], []
    for i, term in enumerate(terms):
        if not isinstance(term, dict) or set(term) - set(attributes):
            raise ValueError(f"term {i} names an attribute outside {list(attributes)}")
        row, row_names = [], []
        for a, n in zip(attributes, levels):
            factor = _factor_spec(term.get(a, "total"))
            matrix, _, name = factor_matrix(factor, n, f"terms[{i}].{a}")
            row.append(None if factor == "total" else matrix)
            row_names.append(name)
        factors.append(tuple(row))
        names.append(tuple(row_names))
    return KroneckerWorkload(tuple(levels), tuple(factors), tuple(names))


def recorded_workload(parameters: dict, space: SensitivitySpace) -> tuple[tuple[str, ...], KroneckerWorkload]:
    """The attributes and workload a Kronecker family recorded (``attributes``, ``levels``, ``terms``), checked
    against the query dimension, and its ``adjacency`` checked (ValueError on a malformed record)."""
    attributes = tuple(str(a) for a in parameters["attributes"])
    levels = tuple(int(n) for n in parameters["levels"])
    if len(levels) != len(attributes) or min(levels, default=1) < 1:
        raise ValueError("attributes and levels do not match")
    workload = workload_from_record(attributes, levels, parameters["terms"])
    if workload.dimension != space.dimension:
        raise ValueError(f"the terms have {workload.dimension} answers, the query dimension is {space.dimension}")
    if parameters["adjacency"] not in ("add_remove", "replace_one"):
        raise ValueError(f"adjacency {parameters['adjacency']!r}")
    return attributes, workload


def finite_factors(factors: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
    """The recorded strategy factors, refused (ValueError) when an entry is not finite."""
    if not all(np.all(np.isfinite(a)) for a in factors):
        raise ValueError("a strategy factor has a non-finite entry")
    return factors


def kronecker_scope_check(problem: Problem, mechanism) -> Check:
    """``mechanism.workload``: the attributes, levels, terms, adjacency and Hamming multiplier a Kronecker family
    recorded are the compiled spec's."""
    query, spec = problem.query, problem.spec
    ok = (isinstance(query, KroneckerQuery) and tuple(query.attributes) == mechanism.attributes
          and query.kron.sizes == mechanism.workload.sizes
          and terms_record(tuple(query.attributes), query.kron) == terms_record(mechanism.attributes, mechanism.workload)
          and (spec.adjacency.kind != "add_remove") == mechanism.replace and hamming_factor(spec) == mechanism.multiplier)
    return Check("mechanism.workload",
                 "attributes, levels, Kronecker terms, adjacency and Hamming multiplier of the parameters equal "
                 "the compiled spec's", ok,
                 f"{len(mechanism.workload.terms)} terms over {len(mechanism.attributes)} attributes, "
                 f"{'replace' if mechanism.replace else 'add/remove'}, multiplier {mechanism.multiplier}")


class KroneckerGaussianMechanism(Mechanism):
    """Gaussian noise s·W A⁻¹ z, z ~ N(0, I_N), A = ⊗A_k, on a ``kronecker`` query W.

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
        A_k per attribute (n_k × n_k, invertible); with ``coefficients``, per ordered attribute only.
    sigma : float
        s, the standard deviation of each measurement.
    design : dict, optional
        How the factors were obtained (recorded for the reader, not used to rebuild).
    coefficients : dict, optional
        b_T > 0 of B = Σ_T √b_T E_T on the plain attributes (keys: subsets of their local indices;
        :mod:`dpopt.optimize.kronecker_anova`), add/remove only; None for the product strategy.
    lattice : KroneckerLattice, optional
        The exact measurement (``sampler: exact``): the integer factors and block variances; None for the
        floating-point sampler.
    lattice_target : {"zcdp", "gdp"}
        The privacy the block variances serve: zCDP at σ_T², μ-GDP and (ε, δ) at the effective variances 1/m_T².
    """

    family = "kronecker_gaussian"
    title = "Gaussian, Kronecker strategy measured and answered by least squares (range/prefix × marginals)"

    def __init__(self, attributes: tuple[str, ...], workload: KroneckerWorkload, replace: bool, multiplier: int,
                 factors: tuple[np.ndarray, ...], sigma: float, design: dict | None = None,
                 coefficients: dict[Subset, float] | None = None, lattice: KroneckerLattice | None = None,
                 lattice_target: str = "zcdp"):
        self.attributes = tuple(attributes)
        self.workload = workload
        self.replace = bool(replace)
        self.multiplier = int(multiplier)
        self.factors = tuple(np.asarray(a, dtype=float) for a in factors)
        self.sigma = float(sigma)
        self.design_info = dict(design or {})
        self.dimension = workload.dimension
        self.split = AnovaSplit.of(workload)
        self.coefficients = None if coefficients is None else {tuple(t): float(b) for t, b in coefficients.items()}
        owners = workload.sizes if self.coefficients is None else tuple(workload.sizes[k] for k in self.split.ordered)
        if len(self.factors) != len(owners) or any(a.shape != (n, n) for a, n in zip(self.factors, owners)):
            raise ValueError("one square factor per attribute (per ordered attribute with ANOVA coefficients), "
                             "of its number of levels")
        if self.coefficients is not None and (self.replace or set(self.coefficients) != set(self.split.components(workload))
                                              or not all(math.isfinite(b) and b > 0 for b in self.coefficients.values())):
            raise ValueError("ANOVA coefficients: add/remove only, one positive finite b_T per component of the "
                             "plain attributes' marginals")
        if not (math.isfinite(self.sigma) and self.sigma > 0):
            raise ValueError(f"sigma {sigma!r} (positive, finite)")
        if lattice is not None and lattice.workload is not workload:
            raise ValueError("a lattice measurement serves this workload")
        self.lattice = lattice
        self.sampler = "floating_point" if lattice is None else "exact"
        self.needs_integer_answers = lattice is not None
        if lattice_target not in ("zcdp", "gdp"):
            raise ValueError(f"lattice privacy {lattice_target!r} (zcdp or gdp)")
        self.lattice_target = lattice_target

    # ---------------------------------------------------------------- facts
    @classmethod
    def supports(cls, problem: Problem) -> str | None:
        spec, query = problem.spec, problem.query
        if not isinstance(query, KroneckerQuery):
            return "Kronecker strategies serve kronecker queries (a union of Kronecker products of per-attribute matrices)"
        if spec.privacy.definition not in _TARGETS:
            return (f"Gaussian noise serves gdp, zcdp and approx targets, not {spec.privacy.definition} "
                    "(pure ε needs Laplace-type noise)")
        if spec.utility.metric != "l2" or spec.utility.workload is not None or spec.utility.weights is not None:
            return f"the strategy minimises the unweighted l2 error of the query, not '{spec.utility.metric}' or a workload"
        return None

    @classmethod
    def utility_bound(cls, problem: Problem) -> float | None:
        """Under add/remove, the SVD bound (valid for every Gaussian strategy), at the target's μ."""
        if cls.supports(problem) is not None or problem.spec.adjacency.kind != "add_remove":
            return None
        bound = svd_bound(problem.query.kron)
        return None if bound is None else bound * gaussian_sigma(Fraction(1), problem.spec.privacy) ** 2

    @classmethod
    def design(cls, problem: Problem) -> KroneckerGaussianMechanism:
        """Optimise the factors, then the smallest s the exact check accepts.

        Raises
        ------
        CalibrationError
            Factors whose sensitivity cannot be searched, or an s that cannot be certified.
        """
        spec, space, query = problem.spec, problem.space, problem.query
        workload = query.kron
        replace = spec.adjacency.kind != "add_remove"
        k = hamming_factor(spec)
        found = optimal_kronecker(workload)
        split = AnovaSplit.of(workload)
        unit = gaussian_sigma(Fraction(1), spec.privacy) ** 2  # s² at unit sensitivity
        method = ("block coordinate descent over the attributes, each factor the optimum of the 1-D strategy "
                  "program (closed form for αI + βJ, else its certified Lagrange dual)")
        anova = extra = None
        if not replace and split.plain:
            anova = optimal_anova(workload, split, from_product(split, workload, found))
            squared = anova_sensitivity(split, anova.factors, anova.coefficients) * k * k
            method = (f"A_ordered ⊗ B with B in the ANOVA algebra of the {len(split.plain)} plain attributes: "
                      f"{anova.rounds} round(s) alternating the closed-form B (b_T ∝ √λ_T) and each ordered factor "
                      f"(the 1-D program), from the product strategy ({method})")
            extra = {"product_strategy": found.unit_error * unit * k * k}
        else:
            squared = strategy_sensitivity(found.factors, replace) * k * k
        attributes = tuple(query.attributes)

        def build(sigma: float, info: dict | None = None) -> KroneckerGaussianMechanism:
            if anova is None:
                return cls(attributes, workload, replace, k, found.factors, sigma, info)
            return cls(attributes, workload, replace, k, anova.factors, sigma, info, anova.coefficients)

        sigma = nudge_until(gaussian_sigma(squared, spec.privacy),
                            lambda s: gaussian_privacy_check(squared, s, spec.privacy).passed, up=True)
        error = sigma * sigma * (found.unit_error if anova is None else anova.unit_error)
        bound = svd_bound(workload) if not replace else None
        info = {
            "method": method,
            "sweeps": found.sweeps,
            "strategy_sensitivity_squared": str(squared),
            "expected_l2": error,
            "svd_lower_bound": None if bound is None else bound * unit * k * k,
            "gap_to_svd_bound": None if bound is None else max(0.0, 1.0 - bound * unit * k * k / error),
            "baselines": {
                "direct_least_squares": float(space.l2_squared) * unit * space.rank,
                "identity_strategy": (2.0 if replace else 1.0) * k * k * unit * identity_unit_error(workload),
                **(extra or {}),
            },
        }
        refusal = cls.exact_reason(problem, None if anova is None else anova.coefficients)
        lattice = None
        continuous = found.factors if anova is None else anova.factors
        plain = None if anova is None else (split, anova.coefficients)
        if refusal is None:
            cap = range_cap(spec.privacy.definition)
            scales = choose_scales(workload, continuous, replace, k, unit, cap * BASE_ROOM, plain)
            for attempt in range(4):  # the divisors' estimate of τ² may fall short: a tighter cap
                divisors = choose_divisors(workload, continuous, scales, replace, k, unit, cap / 2**attempt, plain)
                lattice = calibrate(workload, continuous, replace, k, spec.privacy, scales, plain, divisors)
                if not isinstance(lattice, str):
                    break
            if isinstance(lattice, str):
                refusal, lattice = lattice, None
        if lattice is None:
            info["sampler"] = f"floating_point: {refusal}"
            return build(sigma, info)
        target = "gdp" if spec.privacy.definition in GDP_TARGETS else "zcdp"
        coefficients = None if anova is None else anova.coefficients
        exact = cls(attributes, workload, replace, k, continuous, sigma, None, coefficients, lattice, target)
        exact_error = exact._expected_l2(None)
        info.update({"sampler": "exact", "continuous_expected_l2": error, "expected_l2": exact_error,
                     "lattice_scales": list(scales),
                     "lattice_divisors": sorted({lattice.divisor(t) for t in lattice.variances}),
                     "lattice_mu_squared": str(exact._lattice_mu_squared()),
                     "lattice_error_ratio": exact_error / error,
                     "lattice_rounding_ratio": exact_error / unrounded_error(workload, continuous, replace, k, unit, plain)})
        return cls(attributes, workload, replace, k, continuous, sigma, info, coefficients, lattice, target)

    @staticmethod
    def exact_reason(problem: Problem, coefficients: dict | None) -> str | None:
        """Why the design keeps the floating-point sampler (None: it measures exactly on the lattice)."""
        spec, query = problem.spec, problem.query
        if spec.sampler == "floating_point":
            return "the spec asks for sampler: floating_point"
        reason = exact_refusal(spec.privacy.definition, query.is_integer_valued)
        if reason is not None:
            return reason
        if coefficients is not None:
            split = AnovaSplit.of(query.kron)
            parts = {tuple(i for i, k in enumerate(split.plain) if k in t) for t in block_family(query.kron)}
            if parts - set(coefficients):
                return "a plain attribute has a single level (a block with no ANOVA coefficient)"
        found = recoverable_terms(query.kron)
        return found if isinstance(found, str) else None

    @classmethod
    def from_parameters(cls, parameters: dict, space: SensitivitySpace) -> KroneckerGaussianMechanism:
        attributes, workload = recorded_workload(parameters, space)
        by_name = {f["attribute"]: np.asarray(f["matrix"], dtype=float) for f in parameters["strategy"]}
        coefficients = None
        owners = attributes
        if parameters.get("anova") is not None:
            split = AnovaSplit.of(workload)
            plain = tuple(attributes[k] for k in split.plain)
            owners = tuple(attributes[k] for k in split.ordered)
            coefficients = positive_by_set(plain, parameters["anova"], "attributes", "coefficient")
        if set(by_name) != set(owners):
            raise ValueError(f"the strategy factors are for {sorted(by_name)}, expected {list(owners)}")
        factors = finite_factors(tuple(by_name[a] for a in owners))
        lattice = None
        if parameters.get("sampler", "floating_point") == "exact":
            lattice = lattice_from_record(attributes, workload, parameters["lattice"],
                                          parameters["adjacency"] == "replace_one")
        elif parameters.get("sampler", "floating_point") != "floating_point":
            raise ValueError(f"sampler {parameters['sampler']!r} (floating_point or exact)")
        return cls(attributes, workload, parameters["adjacency"] == "replace_one", int(parameters["multiplier"]),
                   factors, float(parameters["sigma"]), parameters.get("design"), coefficients, lattice,
                   parameters["lattice"].get("privacy", "zcdp") if lattice is not None else "zcdp")

    @property
    def parameters(self) -> dict:
        return {
            "attributes": list(self.attributes),
            "levels": list(self.workload.sizes),
            "terms": terms_record(self.attributes, self.workload),
            "adjacency": "replace_one" if self.replace else "add_remove",
            "multiplier": self.multiplier,
            "sigma": self.sigma,
            "strategy": [{"attribute": a, "matrix": f.tolist()} for a, f in zip(self._owners(), self.factors)],
            **({} if self.coefficients is None else {"anova": [
                {"attributes": [self.attributes[self.split.plain[i]] for i in t], "coefficient": b}
                for t, b in self.coefficients.items()]}),
            "sampler": self.sampler,
            **({} if self.lattice is None else {"lattice": {**lattice_record(self.attributes, self.lattice),
                                                            "privacy": self.lattice_target}}),
            "design": self.design_info,
        }

    def _owners(self) -> tuple[str, ...]:
        """The attributes of the stored factors: all, or the ordered ones with ANOVA coefficients."""
        return self.attributes if self.coefficients is None else tuple(self.attributes[k] for k in self.split.ordered)

    def scope_checks(self, problem: Problem) -> list[Check]:
        """The attributes, levels, terms, adjacency and multiplier recorded are the compiled spec's; the design
        record's sensitivity and expected error are those of the stored factors and σ."""
        return [kronecker_scope_check(problem, self), self._design_check()]

    def _design_check(self) -> Check:
        """``design.recorded``: ``strategy_sensitivity_squared`` equals Δ₂(A)²·k² in rationals, ``expected_l2``
        equals s² times the closed-form unit error (to 1e-9 relative, the float sums' rounding)."""
        info = self.design_info
        if not info:
            return Check("design.recorded", "no design record", True, "the parameters record none")
        error = self._expected_l2(None)
        off = [name for name, same in (
            ("strategy_sensitivity_squared", info.get("strategy_sensitivity_squared") == str(self._sensitivity_squared)),
            ("expected_l2", isinstance(info.get("expected_l2"), float)
             and math.isclose(info["expected_l2"], error, rel_tol=1e-9)),
            *((("lattice_mu_squared", info.get("lattice_mu_squared") == str(self._lattice_mu_squared())),
               ("continuous_expected_l2", isinstance(info.get("continuous_expected_l2"), float)
                and math.isclose(info["continuous_expected_l2"], self._continuous_l2(), rel_tol=1e-9)))
              if self.lattice is not None else ())) if not same]
        return Check("design.recorded", "the design record's strategy sensitivity (exact, from the stored factors) "
                     "and expected l2 error (closed form at the stored σ"
                     + ("; on the lattice, at the block variances, with the lattice's μ² and the continuous design's "
                        "error" if self.lattice is not None else "") + ") re-derived", not off,
                     f"Δ₂(A)²k² = {float(self._sensitivity_squared):.17g}, E‖Z‖² = {error:.10g}"
                     + (f"; recorded values differ: {', '.join(off)}" if off else ""))

    @cached_property
    def _sensitivity_squared(self) -> Fraction:
        """Δ₂(A)² × k², exact (evaluated once per instance)."""
        if self.coefficients is not None:
            return anova_sensitivity(self.split, self.factors, self.coefficients) * self.multiplier ** 2
        return strategy_sensitivity(self.factors, self.replace) * self.multiplier ** 2

    def _lattice_mu_squared(self) -> Fraction | None:
        """μ² of the lattice measurement at the effective variances of its target (zCDP's σ_T², GDP's 1/m_T²)."""
        effective = {t: effective_variance(s2, self.lattice_target) for t, s2 in self.lattice.variances.items()}
        if None in effective.values():
            return None
        return self.lattice.mu_squared(effective, self.replace, self.multiplier)[0]

    def _lattice_claim(self) -> Check:
        """``mechanism.lattice``: integer factors P̃_k, dyadic block variances in the exact sampler's range, one per
        block of the supports' down-closure (the total public only under replace-one), answers recoverable."""
        lat = self.lattice
        blocks = set(block_family(self.workload))
        public = {()} if self.replace else set()
        ok = (all(f.dtype == np.int64 for f in lat.factors) and set(lat.public) == public
              and set(lat.variances) == blocks - public
              and all(MIN_LATTICE_SIGMA2 <= v <= MAX_WIDE_LATTICE_SIGMA2 and v.denominator & (v.denominator - 1) == 0
                      for v in lat.variances.values())
              and not isinstance(recoverable_terms(self.workload), str))
        return Check("mechanism.lattice", "exact measurement: integer factors P̃_k, dyadic σ_T² in [2^-9, 2^60] for "
                     "every block T ⊆ a term's support (the total public under replace-one only), each support's "
                     "marginal determined by integer answers of full column rank", ok,
                     f"{len(lat.variances)} noisy blocks, σ_T² from {float(min(lat.variances.values())):.6g} to "
                     f"{float(max(lat.variances.values())):.6g}; integer factors of {[f.shape for f in lat.factors]}")

    def _privacy_checks(self, space: SensitivitySpace, privacy: Privacy) -> list[Check]:
        if self.lattice is not None:
            claim = self._lattice_claim()
            check = lattice_check(self.lattice, privacy, self.replace, self.multiplier)
            return [claim, Check("privacy", "the release is a post-processing of the integer measurements "
                                 "ỹ_T = (⊗_{k∈T} P̃_k) x_T + N_ℤ(0, σ_T²) (kronecker_lattice); " + check.method,
                                 claim.passed and check.passed, check.detail)]
        conditions = [float(np.linalg.cond(a)) for a in self.factors]
        invertible = Check("strategy.invertible", "every factor A_k is invertible (condition number < 1e12), so "
                                                  "x̂ = A⁻¹y is the least-squares estimate",
                           all(c < 1e12 for c in conditions), f"largest condition number {max(conditions, default=1.0):.3g}")
        if privacy.definition not in _TARGETS:
            return [invertible, Check("privacy", "Gaussian noise", False, f"cannot meet a {privacy.definition} target")]
        squared = self._sensitivity_squared
        inner = gaussian_privacy_check(squared, self.sigma, privacy)
        how = ("Π_k max_j (A_kᵀA_k)_jj" if self.coefficients is None and not self.replace else
               "Π_(k ordered) max_j (A_kᵀA_k)_jj × Σ_T b_T m_T/N_P (every diagonal entry of BᵀB = Σ_T b_T E_T)"
               if not self.replace else
               "max over pairs of cells of ‖A(e_i − e_j)‖², searched over the distinct entries of each A_kᵀA_k")
        check = Check("privacy",
                      f"the release is a post-processing of Ax + N(0, s²I); exact Δ₂(A)² = {how}"
                      + (f", × {self.multiplier}² (Hamming)" if self.multiplier != 1 else "")
                      + f", in rational arithmetic from the stored factors: {inner.method}",
                      invertible.passed and inner.passed, f"Δ₂(A)² = {float(squared):.17g}; {inner.detail}")
        return [invertible, check]

    def privacy_summary(self, space: SensitivitySpace) -> dict:
        if self.lattice is not None:
            mu2 = self._lattice_mu_squared()
            if self.lattice_target == "zcdp":  # ρ = μ²/2: the helper at Δ₂² = μ², σ² = 1
                return lattice_privacy_summary(mu2, Fraction(1), "zcdp")
            mu = math.sqrt(float(mu2))
            return {"mu": mu, "rho": mu * mu / 2.0,
                    "epsilon_at_delta": {f"{d:g}": gaussian_epsilon(d, mu) for d in (1e-5, 1e-6, 1e-10)},
                    "conversion": "exact: μ² = max over neighbours of Σ_T ‖Δ_T‖² m_T² on the lattice (m_T the certified "
                                  "GDP slope of N_ℤ(0, σ_T²)), analytic-Gaussian (ε, δ) profile"}
        mu = math.sqrt(float(self._sensitivity_squared)) / self.sigma
        return {
            "mu": mu,
            "rho": mu * mu / 2.0,
            "epsilon_at_delta": {f"{delta:g}": gaussian_epsilon(delta, mu) for delta in (1e-5, 1e-6, 1e-10)},
            "conversion": "exact: μ = Δ₂(A)/s of the measurement Ax + N(0, s²I), analytic-Gaussian (ε, δ) profile",
        }

    def notes(self) -> list[str]:
        info = self.design_info
        out = [EXACT_MEASUREMENT_NOTE] if self.lattice is not None else super().notes()
        if self.lattice is not None and "lattice_error_ratio" in info:
            out.append(f"the lattice costs {100 * (info['lattice_error_ratio'] - 1):+.4g}% total squared error against "
                       f"the continuous design (E‖Z‖² {info['expected_l2']:.8g} against "
                       f"{info['continuous_expected_l2']:.8g}): only the blocks the workload reads measured"
                       + (", the total published from the integer total (replace-one)" if self.replace else "")
                       + f"; of it, {100 * (info['lattice_rounding_ratio'] - 1):+.4g}% is the rotated factors rounded "
                       f"to integers at scales {info['lattice_scales']}"
                       + (f" (divided by up to {max(info['lattice_divisors'])} in the largest blocks, to stay in the "
                          "range of the lattice variances)" if max(info.get("lattice_divisors") or [1]) > 1 else "")
                       + " and the discrete noise (against the same blocks with unrounded factors and continuous noise)")
        if self.lattice is None and str(info.get("sampler", "")).startswith("floating_point:"):
            out.append(f"no exact lattice measurement: {info['sampler'].split(': ', 1)[1]}")
        if info.get("gap_to_svd_bound") is not None:
            out.append(f"expected l2 error {info['expected_l2']:.6g}, {100 * info['gap_to_svd_bound']:.3g}% above the "
                       "SVD lower bound (valid for every Gaussian strategy under add/remove; generally not attained)")
        return out

    # ------------------------------------------------------------ noise
    def _rotations(self) -> list[tuple[np.ndarray, float]]:
        """Per attribute: R_k = L_k [q_k, Q_k] (n × n) and ‖L_kᵀ1‖ (module docstring)."""
        out = []
        for a in self.factors:
            inverse = np.linalg.inv(a)
            ones = inverse.T @ np.ones(a.shape[0])
            norm = float(np.linalg.norm(ones))
            basis, _ = np.linalg.qr(np.column_stack([ones / norm, np.eye(a.shape[0])]))
            basis = basis[:, : a.shape[0]]
            basis[:, 0] = ones / norm  # the QR may flip its sign
            out.append((inverse @ basis, norm))
        return out

    def _term_noise(self, rng: np.random.Generator, size: int) -> Iterator[np.ndarray]:
        """Each term's noise block (size × rows), in order: h ~ N(0, I_N) in the basis ⊗[q_k, Q_k] is drawn
        only where its index is 0 outside some support S (the g_T, T ⊆ S); a term's noise is
        s Π_{k∉S}‖L_kᵀ1‖ (⊗_{k∈S} W_{t,k}R_k) h_S."""
        rotations = self._rotations()
        sizes = self.workload.sizes
        supports = [self.workload.support(t) for t in range(len(self.workload.terms))]
        needed = sorted({t for s in supports for t in subsets(s)}, key=lambda t: (len(t), t))
        draws = {t: rng.standard_normal((size,) + tuple(sizes[k] - 1 for k in t)) for t in needed}
        blocks = {}
        for support in dict.fromkeys(supports):
            h = np.empty((size,) + tuple(sizes[k] for k in support))
            for t in subsets(support):
                h[(slice(None),) + tuple(slice(1, None) if k in t else 0 for k in support)] = draws[t]
            blocks[support] = h
        for term, support in enumerate(supports):
            scale = self.sigma * math.prod(rotations[k][1] for k in range(len(sizes)) if k not in support)
            table = blocks[support]
            for i, k in enumerate(support):
                table = apply_along(table, scale * self.workload.terms[term][k] @ rotations[k][0] if i == 0
                                    else self.workload.terms[term][k] @ rotations[k][0], 1 + i)
            yield table.reshape(size, -1) if support else scale * table.reshape(size, -1)

    def _anova_term_noise(self, rng: np.random.Generator, size: int) -> Iterator[np.ndarray]:
        """Each term's noise block with B = Σ_T √b_T E_T (module docstring): c_T = s √(∏_{k∈P∖T} n_k / b_T) ×
        the centred g_T ~ N(0, I) on (ordered levels × T-levels) tables; a term's noise is its marginal
        synthesized from the c_T, T ⊆ S, with W_{t,k}A_k⁻¹ applied along each ordered axis."""
        split, alg, work = self.split, self.split.algebra, self.workload
        lead = (size,) + tuple(work.sizes[k] for k in split.ordered)
        parts = {t: self.sigma * math.sqrt(alg.co_size(t) / b)
                 * alg.center(rng.standard_normal(lead + alg.table_shape(t)), len(t)) for t, b in self.coefficients.items()}
        inverses = [np.linalg.inv(a) for a in self.factors]
        for term in range(len(work.terms)):
            s = split.local_support(work, term)
            table = alg.synthesize({t: parts[t] for t in subsets(s) if t in parts}, s)
            for i, (k, inverse) in enumerate(zip(split.ordered, inverses)):
                table = apply_along(table, work.factor(term, k) @ inverse, 1 + i)
            labels = list(split.ordered) + [split.plain[i] for i in s]
            keep = [j for j, k in enumerate(labels) if work.terms[term][k] is not None]
            table = table.reshape((size,) + tuple(table.shape[1 + j] for j in keep))  # drops summed-out axes (length 1)
            order = np.argsort([labels[j] for j in keep])
            yield np.transpose(table, (0,) + tuple(1 + int(o) for o in order)).reshape(size, -1)

    def _sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        if self.lattice is not None:
            return self.lattice.estimate({t: e.astype(float) for t, e in self.lattice.noise(rng, size).items()}, size)
        return np.concatenate(list(self._noise_blocks(rng, size)), axis=1)

    def _release(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Floating point: φ(X) + Z. Exact: the integer measurements ỹ_T from the integer answers (their
        support marginals), then W Õ⁺ ỹ (post-processing)."""
        if self.lattice is None:
            return values + self._sample(rng, values.shape[0])
        blocks = self.lattice.measure(integer_answers(values), rng)
        return self.lattice.estimate({t: y.astype(float) for t, y in blocks.items()}, values.shape[0])

    def _noise_blocks(self, rng: np.random.Generator, size: int) -> Iterator[np.ndarray]:
        """The terms' noise blocks of the stored strategy (product or ANOVA form)."""
        return self._term_noise(rng, size) if self.coefficients is None else self._anova_term_noise(rng, size)

    def _dense_inverse(self) -> np.ndarray:
        """A⁻¹ densely (small domains): ⊗A_k⁻¹, or Σ_T b_T^{-1/2} ⊗_k (A_k⁻¹ ordered, P¹/P⁰ plain by T)."""
        if self.coefficients is None:
            out = np.ones((1, 1))
            for a in self.factors:
                out = np.kron(out, np.linalg.inv(a))
            return out
        inverses = dict(zip(self.split.ordered, (np.linalg.inv(a) for a in self.factors)))
        local = {k: i for i, k in enumerate(self.split.plain)}
        total = 0.0
        for t, b in self.coefficients.items():
            term = np.ones((1, 1))
            for k, n in enumerate(self.workload.sizes):
                mean = np.full((n, n), 1.0 / n)
                term = np.kron(term, inverses[k] if k in inverses else np.eye(n) - mean if local[k] in t else mean)
            total = total + term / math.sqrt(b)
        return total

    def noise_law(self) -> ProductLaw | str:
        """s W A⁻¹ z densely (its SVD) for small domains, else a description."""
        if self.lattice is not None:
            return ("the exact lattice measurement's noise is a linear image of independent discrete Gaussians, not a "
                    "product law in an orthonormal basis; its privacy is the exact check's")
        n = self.workload.cells
        if n > MAX_LAW_CELLS or self.dimension > 1500:
            return (f"the noise law is stated densely up to {MAX_LAW_CELLS} cells and 1500 answers (this query has "
                    f"{n} cells, {self.dimension} answers); its covariance is s² W (AᵀA)⁺ Wᵀ in closed form")
        u, sv, _ = np.linalg.svd(self.sigma * self.workload.dense() @ self._dense_inverse(), full_matrices=False)
        keep = sv > 1e-10 * sv.max()
        return ProductLaw(tuple(GaussianMarginal(float(s)) for s in sv[keep]), self.dimension, u[:, keep], None,
                          "s W A⁻¹ z, z ~ N(0, I_N): Gaussian on the left singular vectors of s W A⁻¹")

    def cell_variances(self) -> np.ndarray:
        """s² Π_k (W_{t,k} X_k⁻¹ W_{t,k}ᵀ)_rr per answer of term t (module docstring); with B in the ANOVA
        algebra the plain part is the same in every cell of the S-marginal: Σ_{T⊆S} b_T⁻¹ (M_S E_T M_Sᵀ)_rr
        = Σ_{T⊆S} b_T⁻¹ ∏_{k∈T}(1 − 1/n_k) ∏_{k∈S∖T} n_k⁻¹ ∏_{k∈P∖S} n_k."""
        if self.lattice is not None:
            return self.lattice.cell_variances({t: discrete_variance(s2) for t, s2 in self.lattice.variances.items()})
        if self.coefficients is not None:
            return self._anova_cell_variances()
        inverses = [np.linalg.inv(a.T @ a) for a in self.factors]
        out = []
        for t in range(len(self.workload.terms)):
            diag = np.ones(1)
            for k, inverse in enumerate(inverses):
                f = self.workload.factor(t, k)
                values = np.einsum("ij,jk,ik->i", f, inverse, f)
                diag = np.kron(diag, values) if k in self.workload.support(t) else diag * values[0]
            out.append(diag)
        return self.sigma**2 * np.concatenate(out)

    def sub_gaussian_cell_proxies(self) -> tuple[np.ndarray, np.ndarray, str] | None:
        """On the lattice the release is linear in the ỹ_T: each cell's variance and sub-Gaussian proxy are the
        closed-form cell variances at Var N_ℤ(0, σ_T²) and at σ_T²."""
        if self.lattice is None:
            return None
        return (self.cell_variances(), self.lattice.cell_variances({t: float(s2) for t, s2 in self.lattice.variances.items()}),
                "closed form: the release W Õ⁺ ỹ is linear in the lattice blocks; Σ_T v_T ⊗_k (squared rows of "
                "W_{t,k}Õ_k⁺ on the block's columns), v_T = Var N_ℤ(0, σ_T²) (the proxy: σ_T²)")

    def _anova_cell_variances(self) -> np.ndarray:
        return self.sigma**2 * anova_cell_variances(self.split, self.factors, self.workload, self.coefficients)

    def _normals_per_draw(self) -> int:
        """Standard normal variates one draw of the sampler takes (its independent blocks g_T)."""
        if self.coefficients is not None:
            lead = math.prod(self.workload.sizes[k] for k in self.split.ordered)
            return lead * sum(self.split.algebra.size(t) for t in self.coefficients)
        supports = [self.workload.support(t) for t in range(len(self.workload.terms))]
        return sum(math.prod(self.workload.sizes[k] - 1 for k in t) for t in {u for s in supports for u in subsets(s)})

    def sampler_check_draws(self, default: int) -> int:
        r"""At most :data:`CHECK_NORMALS` normal variates, at least :data:`MIN_CHECK_DRAWS` draws.

        The claim compares the closed-form :math:`E\|Z\|^2` with the mean of :math:`\|Z\|^2` over the draws,
        within 5 standard errors estimated from the draws. One draw of :math:`\|Z\|^2` is a sum of many
        independent squared Gaussians (:math:`\mathrm{Var}\|Z\|^2 = 2\,\mathrm{tr}\,\Sigma^2`, small next to
        :math:`(\mathrm{tr}\,\Sigma)^2` when the noise has high rank), so 200 draws give a reliable SE and
        a tight test: on the 175,270-answer example the SE is about 0.1% of the error, so a sampler whose
        scale is off by 0.5% (error off by 1%) fails (``tests/test_kronecker_anova.py``)."""
        if self.lattice is not None:
            return check_draws(default, self.lattice.variates())
        return min(default, max(MIN_CHECK_DRAWS, CHECK_NORMALS // max(1, self._normals_per_draw())))

    def _monte_carlo(self, metric: str, workload, gamma, draws: int | None = None, alpha=None,
                     alternative=None) -> UtilityValue:
        """The base estimate, with the l2 metric's draws taken in chunks of :data:`CHUNK` from the sampler's
        term blocks (:meth:`_term_noise`, which :meth:`_sample` concatenates), so that 2,000 draws of 10⁵
        answers never sit in memory at once."""
        if metric != "l2" or workload is not None or draws is None or self.lattice is not None:
            return super()._monte_carlo(metric, workload, gamma, draws, alpha, alternative)
        rng = np.random.default_rng(MONTE_CARLO_SEED)
        per = np.concatenate([sum(np.einsum("ij,ij->i", block, block) for block in self._noise_blocks(rng, min(CHUNK, draws - done)))
                              for done in range(0, draws, CHUNK)])
        mean, se = float(per.mean()), float(per.std(ddof=1) / math.sqrt(per.size))
        return UtilityValue(metric, mean, f"Monte Carlo, {draws} draws, seed {MONTE_CARLO_SEED}",
                            (mean - 1.96 * se, mean + 1.96 * se))

    def _expected_l2(self, workload: np.ndarray | None) -> float | None:
        if workload is not None:
            return None
        if self.lattice is not None:
            return float(self.cell_variances().sum())
        return self._continuous_l2()

    def _continuous_l2(self) -> float:
        """s² times the closed-form unit error of the stored continuous strategy (the design the lattice rounds)."""
        if self.coefficients is not None:
            return self.sigma**2 * anova_unit_error(self.workload, self.split, self.factors, self.coefficients)
        return self.sigma**2 * unit_error(self.workload, self.factors)


def anova_cell_variances(split, factors, work, weights: dict, covariances: list | None = None) -> np.ndarray:
    r"""Each workload answer's variance per unit of noise variance for a strategy of ordered factors A_k ⊗ the
    ANOVA components weighted by ``weights`` (b_T): in every cell of term t,
    :math:`\sum_{T\subseteq S_t} b_T^{-1}\prod_{k\in T}(1-1/n_k)\prod_{k\in S_t\setminus T}n_k^{-1}
    \prod_{k\in P\setminus S_t}n_k` times, per ordered attribute, the diagonal of F_k(A_kᵀA_k)⁻¹F_kᵀ
    (the workload's factor F_k; F_k C_k F_kᵀ when ``covariances`` gives the estimator's C_k per ordered attribute
    instead). Built factor by factor: nothing of domain size."""
    alg = split.algebra
    inverses = dict(zip(split.ordered, covariances if covariances is not None else
                        (np.linalg.inv(a.T @ a) for a in factors)))
    out = []
    for t in range(len(work.terms)):
        s = split.local_support(work, t)
        plain = sum(math.prod(1 - 1 / alg.sizes[i] for i in u) / alg.size(tuple(i for i in s if i not in u))
                    * alg.co_size(s) / weights[u] for u in subsets(s) if u in weights)
        diag = np.full(1, plain)
        for k, n in enumerate(work.sizes):
            if k in inverses:
                f = work.factor(t, k)
                values = np.einsum("ij,jk,ik->i", f, inverses[k], f)
                diag = np.kron(diag, values) if work.terms[t][k] is not None else diag * values[0]
            elif work.terms[t][k] is not None:
                diag = np.kron(diag, np.ones(n))
        out.append(diag)
    return np.concatenate(out)


def lattice_record(attributes: tuple[str, ...], lattice: KroneckerLattice) -> dict:
    """The lattice as the certificate carries it: integer factors, block variances (exact fractions), public blocks."""
    return {"factors": [{"attribute": a, "matrix": f.tolist()} for a, f in zip(attributes, lattice.factors)],
            "blocks": [{"attributes": [attributes[k] for k in t], "sigma2": str(v), "gain": lattice.gain(t),
                        "divisor": lattice.divisor(t)} for t, v in lattice.variances.items()],
            "rounded": [attributes[k] for k in lattice.rounded],
            "public": [[attributes[k] for k in t] for t in lattice.public]}


def lattice_from_record(attributes: tuple[str, ...], workload: KroneckerWorkload, record: dict,
                        replace: bool) -> KroneckerLattice:
    """The lattice of a certificate (ValueError on a malformed record: a non-integer entry, a bad fraction)."""
    index = {a: k for k, a in enumerate(attributes)}
    by_name = {}
    for f in record["factors"]:
        matrix = np.asarray(f["matrix"], dtype=object)
        if matrix.ndim != 2 or not all(type(v) is int and abs(v) < 2**31 for v in matrix.reshape(-1)):
            raise ValueError(f"the lattice factor of {f['attribute']!r} is not a matrix of integers below 2^31")
        by_name[f["attribute"]] = matrix.astype(np.int64)
    if set(by_name) != set(attributes):
        raise ValueError(f"the lattice factors are for {sorted(by_name)}, expected {list(attributes)}")

    def block(names) -> Subset:
        if any(a not in index for a in names):
            raise ValueError(f"a lattice block names an attribute outside {list(attributes)}")
        return tuple(sorted(index[a] for a in names))

    variances, gains, divisors = {}, {}, {}
    for b in record["blocks"]:
        variances[block(b["attributes"])] = Fraction(str(b["sigma2"]))
        gains[block(b["attributes"])] = b.get("gain", 1)
        divisors[block(b["attributes"])] = b.get("divisor", 1)
    return KroneckerLattice(workload, tuple(by_name[a] for a in attributes), variances,
                            tuple(block(p) for p in record["public"]), gains, block(record.get("rounded", [])),
                            divisors if any(d != 1 for d in divisors.values()) else None)
