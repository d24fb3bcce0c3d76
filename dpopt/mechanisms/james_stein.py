r"""James–Stein shrinkage of the Gaussian mechanism (Lee, Kim, Kwak & Jung 2022, Sec. 2.3).

The release is a post-processing of an additive Gaussian stage x = Bᵀφ(X) + σZ_k:

.. math:: M(X) = \varphi(X) - BB^\top\varphi(X) + B\,\mathrm{shrink}(x),

with B = I (k = d) or B an orthonormal basis of the span of the sensitivity space
(k = its rank q; the component orthogonal to it is released exactly, as by the projected
Gaussian), and one of the paper's plain (not positive-part) James–Stein estimators:

* ``zero`` (M_JS0, eq. 8): shrink(x) = (1 − (k−2)σ²/‖x‖²) x, k ≥ 3;
* ``mean`` (M_JS, eq. 9): shrink(x) = x̄1 + (1 − (k−3)σ²/‖x − x̄1‖²)(x − x̄1), k ≥ 4;
* ``rotated`` (M_rJS, eq. 10): ``mean`` in the coordinates of B, k = q ≥ 4. For a
  contingency table B is the Helmert basis (Sec. 4.1) and the total is kept exactly.

Privacy is that of the Gaussian stage (post-processing, Lemma 3): μ = Δ₂/σ exactly; for
``rotated`` the noise σBZ has covariance σ²BBᵀ = σ²P_V, whose column space contains every
neighbouring difference (Lemma A.3), which a check confirms.

**Exact measurement** (``sampler: exact``, the default for counting queries under ρ-zCDP, μ-GDP and (ε, δ);
:mod:`dpopt.mechanisms.lattice`): the stage measures every count exactly on the lattice, y = φ(X) + η with η
i.i.d. N_ℤ(0, σ_ℤ²) (the isotropic lattice Gaussian of :mod:`dpopt.mechanisms.gaussian`, of the same privacy as
N(0, σ²I)); the shrinkage, in the coordinates Bᵀy, is post-processing of those integers (measure exactly,
post-process freely), and for ``rotated`` the component (I − BBᵀ)φ(X) = (I − P_V)φ(X), the same on every dataset
the adjacency connects, is :meth:`~dpopt.sensitivity.subspace.Subspace.invariant_component` of the integer answers
((1ᵀφ(X)/d)·1 from the integer total on the sum-zero span; exact rationals on a marginal span), on a span that has
one. The shrinkage and the cost use the noise variance v =
Var N_ℤ(0, σ_ℤ²) in place of σ²; the cost formula below is that of Gaussian noise, Bᵀη is Gaussian only
approximately (its moments up to the fourth agree with N(0, vI) to e^{−2π²σ_ℤ²} for σ_ℤ² ≥ 16), so the
certificate's ``utility.sampler`` claim checks it against the exact sampler by Monte Carlo.

The L2 cost depends on the data, through the non-centrality τ² of the shrunk part
(Lemma B.1–B.3; digest §2.6), with :math:`\rho_k(t) = E[1/\chi^2_k(t)] = {}_1F_1(1, k/2; -t/2)/(k-2)`:

* zero: :math:`(k - (k-2)^2\rho_k(\|y\|^2/\sigma^2))\,\sigma^2`,
* mean / rotated: :math:`(k - (k-3)^2\rho_{k-1}(\|y - \bar y 1\|^2/\sigma^2))\,\sigma^2`,

y = Bᵀφ(X). It is below kσ², the cost of the Gaussian stage, for every dataset (Thms 4–6)
and increases with τ². The prediction a certificate carries is therefore the **worst
case** over the datasets the spec allows: for a histogram or contingency table with a
public total n, the maximum of τ² over the tables with that total, attained at a table
with all n records in one cell (τ² is convex); without a public n, the supremum kσ².
A data-dependent, biased estimator is offered in a comparison only when that guaranteed
gain is at least :data:`MIN_GUARANTEED_GAIN` of the Gaussian stage's cost (request the
family by name to get it regardless).

:func:`truncate_at_zero` is the paper's truncation M^c (Prop. 8), a post-processing that
never increases the error of a non-negative statistic (it breaks the exact total).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from scipy import linalg, special

from dpopt.core.checks import Check
from dpopt.core.memory import dense_bytes, require_memory
from dpopt.errors import UnsupportedSpecError
from dpopt.mechanisms.base import MONTE_CARLO_SEED, Mechanism, UtilityValue
from dpopt.mechanisms.gaussian import MAX_IMAGE_CELLS, MAX_LAW_BASIS_ENTRIES, lattice_reason, lattice_scope_check
from dpopt.mechanisms.lattice import (
    EXACT_MEASUREMENT_NOTE,
    GDP_TARGETS,
    check_draws,
    discrete_variance,
    integer_answers,
    lattice_isotropic_check,
    lattice_privacy_summary,
    target_lattice_variance,
)
from dpopt.mechanisms.shrinkage import stage_candidates
from dpopt.noise.discrete_gaussian import DiscreteGaussianMarginal, sample_discrete_gaussian
from dpopt.noise.gaussian import GaussianMarginal
from dpopt.noise.law import PostProcessedLaw, ProductLaw
from dpopt.privacy.gaussian_calibration import gaussian_privacy_check, gaussian_sigma
from dpopt.problem import Problem
from dpopt.sensitivity.space import SensitivitySpace
from dpopt.sensitivity.subspace import SumZeroSpace
from dpopt.spec.models import Privacy, Spec, Utility

VARIANTS = ("zero", "mean", "rotated")
MIN_GUARANTEED_GAIN = 0.01
"""Relative L2 gain over the Gaussian stage below which ``auto`` does not propose James–Stein."""

_SHRINK_DEGREES = {"zero": 2, "mean": 3, "rotated": 3}
_TARGETS = ("gdp", "zcdp", "approx")


def inverse_chi2_mean(k, t):
    r""":math:`\rho_k(t) = E[1/X]`, X ~ χ²_k with non-centrality t (k > 2).

    :math:`\rho_k(t) = \tfrac12 e^{-t/2}\sum_\beta (t/2)^\beta/(\beta!\,(k/2+\beta-1))
    = {}_1F_1(1, k/2; -t/2)/(k-2)` (Kummer's transformation), evaluated with scipy's
    confluent hypergeometric function. ρ_k(0) = 1/(k − 2).
    """
    k = np.asarray(k, dtype=float)
    if np.any(k <= 2):
        raise ValueError("E[1/χ²_k] is finite only for k > 2")
    return special.hyp1f1(1.0, k / 2.0, -np.asarray(t, dtype=float) / 2.0) / (k - 2.0)


def _exact_complement(space: SensitivitySpace) -> bool:
    """Whether the span's (I − P_V)x has an exact form from integer sums
    (:meth:`~dpopt.sensitivity.subspace.Subspace.invariant_component`)."""
    return space.span.invariant_component(np.zeros((1, space.dimension))) is not None


def helmert_basis(p: int) -> np.ndarray:
    """U_θ: the last p − 1 columns of the Helmert matrix of order p (Lee et al. Sec. 4.1).

    Column k − 1 (k = 2..p) is [k(k−1)]^{-1/2}(1, …, 1, 1−k, 0, …, 0): an orthonormal
    basis of the vectors whose coordinates sum to zero. Refused before it is built when its
    construction (three dense p × p arrays in scipy) exceeds the memory limit.
    """
    require_memory(dense_bytes(3, p, p), f"the dense {p} x {p - 1} Helmert basis of the sum-zero span")
    return linalg.helmert(p, full=True).T[:, 1:]


def canonical_basis(space: SensitivitySpace) -> np.ndarray:
    """An orthonormal basis of span(S) that does not depend on the linear-algebra library.

    The Helmert basis for the sum-zero span of a table; otherwise Gram–Schmidt of the
    projected coordinate vectors P e₁, P e₂, … in order (a rotation of any SVD basis
    would change the cost of the ``rotated`` variant, digest §7.20).
    """
    if isinstance(space.span, SumZeroSpace):
        return helmert_basis(space.dimension)
    require_memory(dense_bytes(2, space.dimension, space.dimension),
                   f"the dense {space.dimension} x {space.dimension} orthonormal basis of the span")
    projected = space.span.project(np.eye(space.dimension))
    columns: list[np.ndarray] = []
    for j in range(space.dimension):
        v = projected[:, j].copy()
        for _ in range(2):  # re-orthogonalise once for stability
            for c in columns:
                v -= (c @ v) * c
        norm = float(np.linalg.norm(v))
        if norm > 1e-9:
            columns.append(v / norm)
        if len(columns) == space.rank:
            break
    return np.column_stack(columns)


def truncate_at_zero(release: np.ndarray) -> np.ndarray:
    """M^c = max(0, M) coordinate-wise (Lee et al. Prop. 8): post-processing, so just as
    private; for a non-negative statistic every coordinate's error can only shrink."""
    return np.maximum(np.asarray(release, dtype=float), 0.0)


def _shrink(x: np.ndarray, variant: str, sigma2: float) -> np.ndarray:
    """The plain James–Stein estimator of Definition 2 applied to each row of x (n × k)."""
    k = x.shape[1]
    if variant == "zero":
        centre, resid = np.zeros_like(x), x
    else:
        centre = np.repeat(x.mean(axis=1, keepdims=True), k, axis=1)
        resid = x - centre
    s = np.sum(resid**2, axis=1, keepdims=True)
    factor = 1.0 - (k - _SHRINK_DEGREES[variant]) * sigma2 / np.where(s > 0, s, np.inf)
    return centre + factor * resid


class JamesSteinMechanism(Mechanism):
    """James–Stein post-processing of the Gaussian mechanism: zero, mean or rotated (see module)."""

    family = "james_stein"
    title = "James–Stein shrinkage of the Gaussian mechanism"

    def __init__(self, sigma: float, space: SensitivitySpace, variant: str, public_total: int | None = None,
                 sampler: str = "floating_point", target: str = "zcdp", refusal: str | None = None):
        if variant not in VARIANTS:
            raise ValueError(f"variant must be one of {VARIANTS} (got {variant!r})")
        if sampler not in ("floating_point", "exact"):
            raise ValueError(f"sampler {sampler!r} (floating_point or exact)")
        self.sigma = float(sigma)
        self.sampler, self.refusal = sampler, refusal
        self.target = "gdp" if target in GDP_TARGETS else "zcdp"  # the lattice privacy stated by privacy_summary
        self.needs_integer_answers = sampler == "exact"
        self.lattice_sigma2 = target_lattice_variance(Fraction(self.sigma) ** 2, 1, self.target) if sampler == "exact" else None
        if sampler == "exact" and self.lattice_sigma2 is None:
            raise ValueError("the lattice variance is beyond the exact sampler's range")
        if sampler == "exact" and variant == "rotated" and not _exact_complement(space):
            raise ValueError(f"exact rotated James–Stein: the {space.span.name} span has no exact invariant component")
        self.span = space.span
        self.variance = discrete_variance(self.lattice_sigma2) if sampler == "exact" else self.sigma**2
        """The variance of one coordinate of the stage's noise (σ², or Var N_ℤ(0, σ_ℤ²) on the lattice)."""
        self.dimension = space.dimension
        self.variant = variant
        self.public_total = None if public_total is None else int(public_total)
        if variant == "rotated":
            self.basis = canonical_basis(space)
            self.basis_name = "helmert" if isinstance(space.span, SumZeroSpace) else "gram_schmidt"
        else:
            self.basis = None
            self.basis_name = "identity"
        self.k = self.dimension if self.basis is None else self.basis.shape[1]
        least = _SHRINK_DEGREES[variant] + 1
        if self.k < least:
            raise ValueError(f"the {variant} James–Stein estimator needs at least {least} dimensions (got {self.k})")

    # ------------------------------------------------------------------ design
    @classmethod
    def _variants(cls, space: SensitivitySpace) -> list[str]:
        out = []
        if space.dimension >= 3:
            out.append("zero")
        if space.dimension >= 4:
            out.append("mean")
        if space.rank_deficient and space.rank >= 4:
            out.append("rotated")
        return out

    @staticmethod
    def _public_total(spec: Spec) -> int | None:
        """n when every dataset the spec allows is a table with that total, else None."""
        table = spec.query.kind in ("histogram", "contingency_table")
        fixed = spec.adjacency.kind in ("replace_one", "hamming")
        return spec.data.n if table and fixed else None

    @classmethod
    def _best(cls, problem: Problem) -> JamesSteinMechanism:
        spec, space = problem.spec, problem.space
        sigma = gaussian_sigma(space.l2_squared, spec.privacy)
        n = cls._public_total(spec)
        refusal = lattice_reason(problem, sigma)
        options = []
        for variant in reversed(cls._variants(space)):
            why = refusal
            if why is None and variant == "rotated" and not _exact_complement(space):
                why = (f"the rotated variant's component off the {space.span.name} span would be computed in floating "
                       "point from the data")
            options.append(cls(sigma, space, variant, n, "exact" if why is None else "floating_point",
                               spec.privacy.definition, why))
        return min(options, key=lambda m: m._expected_l2(None))

    @classmethod
    def supports(cls, problem: Problem) -> str | None:
        spec, space = problem.spec, problem.space
        if spec.privacy.definition not in _TARGETS:
            return f"Gaussian noise cannot meet a {spec.privacy.definition} target"
        if spec.utility.metric != "l2" or spec.utility.workload is not None:
            return "James–Stein has a cost prediction for metric l2 without a workload only"
        if not cls._variants(space):
            return "James–Stein shrinkage needs at least 3 dimensions"
        if spec.mechanism == "james_stein":
            return None
        n = cls._public_total(spec)
        # without a public total the worst case is the Gaussian stage (gain 0): no variant is built
        best = None if n is None else cls._best(problem)
        gain = 0.0 if best is None else 1.0 - best._expected_l2(None) / best.stage_cost
        if gain < MIN_GUARANTEED_GAIN:
            why = ("no public total n: over unbounded tables the worst case equals the Gaussian stage"
                   if n is None else f"worst case over tables with total {n}")
            variant = "any variant" if best is None else best.variant
            return (f"guaranteed L2 gain of James–Stein ({variant}) over its Gaussian stage is "
                    f"{100 * gain:.3g}% < {100 * MIN_GUARANTEED_GAIN:g}% ({why}); the unbiased additive "
                    "mechanism is preferred (request james_stein by name to use it)")
        return None

    @classmethod
    def design(cls, problem: Problem) -> JamesSteinMechanism:
        return cls._best(problem)

    @classmethod
    def from_parameters(cls, parameters: dict, space: SensitivitySpace) -> JamesSteinMechanism:
        mech = cls(parameters["sigma"], space, parameters["variant"], parameters.get("public_total"),
                   parameters.get("sampler", "floating_point"), parameters.get("lattice_privacy", "zcdp"))
        if parameters.get("basis") != mech.basis_name:
            raise ValueError(f"basis {parameters.get('basis')!r} does not match this space ({mech.basis_name!r})")
        return mech

    @property
    def parameters(self) -> dict:
        out = {"sigma": self.sigma, "variant": self.variant, "basis": self.basis_name,
               "public_total": self.public_total, "sampler": self.sampler}
        if self.sampler == "exact" and self.target == "gdp":
            out["lattice_privacy"] = "gdp"
        return out

    def scope_checks(self, problem: Problem) -> list[Check]:
        """On the lattice: the query is a counting query (:func:`~dpopt.mechanisms.gaussian.lattice_scope_check`)."""
        return [lattice_scope_check(problem)] if self.sampler == "exact" else []

    # --------------------------------------------------------------- sampling
    def noise_law(self) -> PostProcessedLaw | str:
        """The law of the emitted noise, for the second route of ``dpopt verify`` (:mod:`dpopt.noise.law`).

        On the lattice the stage the shrinkage acts on is φ(X) + Pη, P = BBᵀ (P = I without a basis), η i.i.d.
        N_ℤ(0, σ_ℤ²): a projected product law (``projection``), whose neighbouring shifts v = Pv are the integer
        shifts of η, and whose cell i has variance P_ii Var N_ℤ and sub-Gaussian proxy P_ii σ_ℤ² (Σ_k P_ik² = P_ii);
        the d × d projection is stated up to :data:`~dpopt.mechanisms.gaussian.MAX_LAW_BASIS_ENTRIES` entries."""
        preimage = None if self.basis_name == "gram_schmidt" else self._preimage()
        if self.sampler == "exact":
            marginal = DiscreteGaussianMarginal(float(self.lattice_sigma2))
            if self.basis is None:
                stage = ProductLaw.iid(marginal, self.dimension,
                                       f"lattice measurement N_ℤ(0, σ_ℤ²)^d, σ_ℤ² = {self.lattice_sigma2}")
            elif self.dimension**2 > MAX_LAW_BASIS_ENTRIES:
                return (f"the {self.dimension} x {self.dimension} projection of the lattice stage is too large for the "
                        f"second route (more than {MAX_LAW_BASIS_ENTRIES} entries)")
            else:
                basis = np.asarray(self.basis, dtype=float)
                stage = ProductLaw((marginal,) * self.dimension, self.dimension, basis @ basis.T, None,
                                   f"lattice measurement projected on the shrunk span, Pη, P = BBᵀ ({self.basis_name} "
                                   f"B, rank {self.k}), η ~ N_ℤ(0, σ_ℤ²)^d, σ_ℤ² = {self.lattice_sigma2}", True)
            return PostProcessedLaw(stage, f"James–Stein shrinkage ({self.variant})", stage.description, preimage)
        basis = None if self.basis is None else np.asarray(self.basis, dtype=float)
        k = self.dimension if basis is None else basis.shape[1]
        stage = ProductLaw((GaussianMarginal(self.sigma),) * k, self.dimension, basis, None,
                           f"Gaussian stage N(0, σ²BBᵀ), σ = {self.sigma:.17g}, rank {k}")
        return PostProcessedLaw(stage, f"James–Stein shrinkage ({self.variant})", stage.description, preimage)

    def linear_noise_image(self) -> tuple[np.ndarray, tuple] | None:
        """On the lattice with a basis B (up to :data:`MAX_IMAGE_CELLS` cells): the stage noise Pη, C = P = BBᵀ,
        W = η i.i.d. N_ℤ(0, σ_ℤ²). For the Helmert basis P = I − J/d, whose entries are multiples of 1/d: the
        per-cell errors take the exact quantile. None otherwise."""
        if self.sampler != "exact" or self.basis is None or self.dimension > MAX_IMAGE_CELLS:
            return None
        basis = np.asarray(self.basis, dtype=float)
        return basis @ basis.T, (DiscreteGaussianMarginal(float(self.lattice_sigma2)),) * self.dimension

    def _preimage(self) -> dict:
        """The shrinkage's constant (k − c)·v, v the stage variance the release shrinks with (σ², or Var N_ℤ on
        the lattice), for the interval's stage preimage (:func:`stage_candidates`)."""
        return {"kind": "james_stein", "variant": self.variant, "basis": self.basis_name,
                "constant": (self.k - _SHRINK_DEGREES[self.variant]) * self.variance}

    def stage_candidates(self, published) -> tuple[np.ndarray, np.ndarray]:
        """:func:`stage_candidates` at this mechanism's variant, constant and basis."""
        return stage_candidates(published, self.variant, self._preimage()["constant"], self.basis)

    def _sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """Draws of the additive Gaussian stage σBZ (σZ for B = I); on the lattice, of the stage's noise Pη,
        η ~ N_ℤ(0, σ_ℤ²)^d (:meth:`latent_sample`), P = BBᵀ (η itself for B = I). The release (:meth:`_release`)
        shrinks Bᵀ(φ(X) + σBZ) (Bᵀ(φ(X) + η))."""
        if self.sampler == "exact":
            eta = self.latent_sample(size, rng)
            return eta if self.basis is None else (eta @ self.basis) @ self.basis.T
        z = rng.normal(0.0, self.sigma, size=(size, self.k))
        return z if self.basis is None else z @ self.basis.T

    def latent_sample(self, size: int, rng: np.random.Generator) -> np.ndarray:
        """On the lattice: η ~ N_ℤ(0, σ_ℤ²)^d, the measurement's noise before the projection (as floats)."""
        if self.sampler != "exact":
            return super().latent_sample(size, rng)
        s2 = self.lattice_sigma2
        return sample_discrete_gaussian(rng, s2.numerator, s2.denominator, size * self.dimension).reshape(
            size, self.dimension).astype(float)

    def sampler_check_draws(self, default: int) -> int:
        """On the lattice: :func:`~dpopt.mechanisms.lattice.check_draws` (d variates a draw)."""
        return check_draws(default, self.dimension) if self.sampler == "exact" else default

    def _release(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """M(X) = φ(X) − BBᵀφ(X) + B·shrink(Bᵀφ(X) + σZ) for each row φ(X) of ``values`` (m × d); on the lattice
        the shrinkage acts on Bᵀy, y = φ(X) + η computed in int64 (module docstring)."""
        if self.sampler == "exact":
            s2 = self.lattice_sigma2
            counts = integer_answers(values)
            noise = sample_discrete_gaussian(rng, s2.numerator, s2.denominator, values.size).reshape(values.shape)
            measured = (counts + noise).astype(float)
            if self.basis is None:
                return _shrink(measured, self.variant, self.variance)
            # (I − BBᵀ)φ = (I − P_V)φ from integer sums, the same on every dataset the adjacency connects (bit for
            # bit: no floating-point number formed from data that moves)
            public = self.span.invariant_component(counts)
            return public + _shrink(measured @ self.basis, self.variant, self.variance) @ self.basis.T
        y = values if self.basis is None else values @ self.basis
        x = y + rng.normal(0.0, self.sigma, size=y.shape)
        shrunk = _shrink(x, self.variant, self.variance)
        if self.basis is None:
            return shrunk
        return values + (shrunk - y) @ self.basis.T

    # ---------------------------------------------------------------- privacy
    def _privacy_checks(self, space: SensitivitySpace, privacy: Privacy) -> list[Check]:
        checks = [lattice_isotropic_check(space.l2_squared, self.lattice_sigma2, privacy) if self.sampler == "exact"
                  else gaussian_privacy_check(space.l2_squared, self.sigma, privacy)]
        if self.basis is not None:
            ortho = float(np.abs(self.basis.T @ self.basis - np.eye(self.k)).max())
            inside = float(np.abs(space.span.project(self.basis.T) - self.basis.T).max())
            ok = ortho <= 1e-12 and inside <= 1e-12 and self.k == space.rank
            checks.append(Check(
                "privacy.noise_span",
                "the noise covariance σ²BBᵀ has the span of the sensitivity space as column space "
                "(B orthonormal, B ⊂ span, rank equal), so every neighbouring difference is in it "
                "(Lee et al. 2022, Lemma A.3)",
                ok,
                f"max |BᵀB − I| = {ortho:.2g}, max |P_V B − B| = {inside:.2g}, rank {self.k} vs {space.rank}",
            ))
        return checks

    def privacy_summary(self, space: SensitivitySpace) -> dict:
        if self.sampler == "exact":
            return lattice_privacy_summary(space.l2_squared, self.lattice_sigma2, self.target)
        return {"mu": space.l2 / self.sigma,
                "conversion": "post-processing of the Gaussian stage (Lee et al. 2022, Lemma 3): μ = Δ₂/σ"}

    def notes(self) -> list[str]:
        if self.sampler == "exact":
            measured = [EXACT_MEASUREMENT_NOTE + f" (lattice variance σ_ℤ² = {self.lattice_sigma2}; the "
                        "James–Stein shrinkage is post-processing of those integers)"]
        else:
            measured = super().notes() + ([f"no exact lattice measurement: {self.refusal}"] if self.refusal else [])
        notes = measured + [
            f"James–Stein ({self.variant}) shrinks the Gaussian release: biased, its error depends on the "
            f"data; the l2 prediction is the worst case over "
            + (f"tables with total {self.public_total}" if self.public_total is not None
               else "all datasets (the supremum kσ², approached as the data grow)"),
        ]
        if self.basis is not None:
            notes.append(f"shrinkage in the {self.basis_name} basis of the sensitivity span; the component "
                         "orthogonal to it (e.g. the total under replace_one) is released exactly")
        return notes

    # ---------------------------------------------------------------- utility
    @property
    def stage_cost(self) -> float:
        """kv: the L2 cost of the Gaussian stage (the supremum of the James–Stein cost), v = σ² (or the lattice
        noise's variance)."""
        return self.k * self.variance

    def _coordinates(self, theta: np.ndarray) -> np.ndarray:
        theta = np.atleast_2d(np.asarray(theta, dtype=float))
        return theta if self.basis is None else theta @ self.basis

    def noncentrality(self, theta) -> np.ndarray:
        """τ² of the shrunk part for each row of ``theta`` (the true answers φ(X))."""
        y = self._coordinates(theta)
        if self.variant != "zero":
            y = y - y.mean(axis=1, keepdims=True)
        return np.sum(y**2, axis=1) / self.variance

    def expected_l2_at(self, theta):
        """E‖M(X) − φ(X)‖² at the true answer(s) φ(X) = ``theta``: the closed form of the module docstring."""
        tau2 = self.noncentrality(theta)
        c = self.k - _SHRINK_DEGREES[self.variant]
        dof = self.k if self.variant == "zero" else self.k - 1
        value = (self.k - c * c * inverse_chi2_mean(dof, tau2)) * self.variance
        return float(value[0]) if np.ndim(theta) == 1 else value

    def worst_case_answer(self) -> np.ndarray | None:
        """The table with total n that maximises τ² (all records in one cell), or None without n.

        The answer n·e_j has coordinates y = n·(row j of B); only its centred norm matters.
        """
        if self.public_total is None:
            return None
        if self.basis is None:  # B = I: every cell gives the same τ² (n² or n²(1 − 1/d))
            j = 0
        else:
            rows = self.basis if self.variant == "zero" else self.basis - self.basis.mean(axis=1, keepdims=True)
            j = int(np.argmax(np.sum(rows**2, axis=1)))
        answer = np.zeros(self.dimension)
        answer[j] = self.public_total
        return answer

    def _expected_l2(self, workload: np.ndarray | None) -> float | None:
        if workload is not None:
            return None
        worst = self.worst_case_answer()
        return self.stage_cost if worst is None else self.expected_l2_at(worst)

    def _utility(self, utility: Utility) -> None:
        """The worst-case l2 cost is the base's closed form; other metrics have no prediction.

        Raises
        ------
        UnsupportedSpecError
            For metrics other than l2, or a workload.
        """
        if utility.metric != "l2" or utility.workload is not None:
            raise UnsupportedSpecError("utility", "James–Stein has a cost prediction for metric l2 without a workload only")
        return None

    def _monte_carlo(self, metric: str, workload, gamma, draws: int | None = None, alpha=None,
                     alternative=None) -> UtilityValue:
        """Monte Carlo of ‖M(X) − φ(X)‖² at the worst-case answer (of ‖σBZ‖² without a public
        total, whose mean kσ² is the supremum), fixed seed, 95% CI."""
        if metric != "l2" or workload is not None:
            raise UnsupportedSpecError("utility", "James–Stein has a cost prediction for metric l2 without a workload only")
        draws = 200_000 if draws is None else int(draws)
        rng = np.random.default_rng(MONTE_CARLO_SEED)
        worst = self.worst_case_answer()
        if worst is None:
            z = self.sample(draws, rng)
            per = np.sum((z if self.basis is None else z @ self.basis) ** 2, axis=1)  # ‖Bᵀ·‖: the stage's part
        else:
            per = np.sum((self.release(np.tile(worst, (draws, 1)), rng) - worst) ** 2, axis=1)
        mean, se = float(per.mean()), float(per.std(ddof=1) / math.sqrt(per.size))
        return UtilityValue(metric, mean, f"Monte Carlo, {draws} draws, seed {MONTE_CARLO_SEED}",
                            (mean - 1.96 * se, mean + 1.96 * se))
