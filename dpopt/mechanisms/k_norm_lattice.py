r"""The discrete K-norm mechanism: K = Hull(S) on the lattice L = span(S) ∩ ℤ^d (pure ε-DP, exact noise).

For a counting query the neighbouring differences S are integer vectors of the span V = span(S), so they lie
in the lattice L = V ∩ ℤ^d. The release is x + Z with Z ∈ L drawn from

.. math:: P[Z = z] \propto \exp(-\varepsilon' \|z\|_K), \qquad z \in L,

computed in integers (x the exact counts), so no floating-point number touches it; the component of x off V is
kept (Z ∈ V), as with the continuous K-norm.

**Privacy.** For neighbours with φ(X) − φ(X′) = δ ∈ S ⊂ L, translation by δ maps L onto itself and
P[Z = y − φ(X)]/P[Z = y − φ(X′)] = exp(ε′(‖y − φ(X′)‖_K − ‖y − φ(X)‖_K)) ≤ exp(ε′‖δ‖_K) ≤ e^{ε′} by the
triangle inequality of the gauge, a sublinear function (a maximum of linear forms): exactly ε′·sup_{v∈S}‖v‖_K-DP
for **any** list of rational facets, the sup checked exactly over the listed vectors. The normalising sum over L
is the same for both neighbours. The other targets follow from the pure guarantee by the conversions the
continuous family uses (:func:`~dpopt.privacy.pure_conversion.pure_implies`), unchanged.

**Basis.** The reduced row echelon form R (s × d) of the listed vectors, computed in exact rationals; when it is
integral, L = {cR : c ∈ ℤ^s} (a point z of V is z[J]·R, J the pivot columns, and z[J] is integral when z is), so
c = z[J] are the lattice coordinates, canonical and re-derived by ``dpopt verify``. A space whose echelon form is
not integral keeps the floating-point sampler.

**Facets.** K = Hull(S) in the coordinates c: each facet of the floating-point hull
(:class:`~dpopt.geometry.Polytope`) is re-solved exactly from the listed vectors on it (normal equations in
rationals, then ⟨a, p⟩ = 1 checked exactly on each of them); privacy needs only that every listed vector has
g(v) ≤ 1, which the exact check establishes. With M = max_{v∈S}‖v[J]‖₁, K ⊂ M·B₁ (a convex set contains the hull
of its points), so adding ‖c‖₁/M to the maximum changes nothing on Hull(S) and gives the sampler's bound
g(c) ≥ ‖c‖₁/M by construction (:mod:`dpopt.noise.k_norm_lattice`). That g is the gauge of Hull(S) itself rests
on the facet list being complete, which the floating-point hull's closed-boundary check
(``k_norm.cone_decomposition``) shows.

**ε′.** The ε₀ the target allows (:func:`~dpopt.privacy.pure_conversion.pure_epsilon_for`) rounded down to 21
significant bits (a dyadic rational; equal to it for targets like 0.5 or 1), recorded as a fraction.

**Utility.** At rank 1 the coordinate c is discrete Laplace of scale 1/(ε′κ), κ = ‖u‖_K for the basis vector u:
E‖WZ‖², E‖Z‖₁ and usefulness are exact closed forms. Above, they are **Monte Carlo estimates** by importance
sampling from the sampler's proposal (i.i.d. discrete Laplace coordinates of scale M/ε′): with weights
w(c) = exp(−(ε′g(c) − ‖c‖₁ε′/M)), E_p f = E_q[wf]/E_q[w], the 95% interval from the delta method, and E_q[w] is
the sampler's acceptance rate; the note gives the Kish effective sample size (Σw)²/Σw², at least Σw as w ≤ 1.
The family keeps the floating-point sampler when that estimate is out of its stated cost
(:func:`estimate_refusal`): fewer than :data:`MIN_EFFECTIVE_DRAWS` guaranteed effective draws (acceptance limit
below 10⁻³) or more than :data:`MAX_ESTIMATE_WORK` gauge multiply-adds. The 4×4 table with both margins fails
both (acceptance 2.1·10⁻⁴; 3,818 facets at rank 9: 3.4·10¹⁰, about a minute).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from dpopt.core.checks import Check
from dpopt.mechanisms.base import MONTE_CARLO_SEED, UtilityValue
from dpopt.mechanisms.integer_noise import dyadic_floor
from dpopt.noise.discrete_laplace import discrete_laplace_moments, sample_discrete_laplace
from dpopt.noise.k_norm_lattice import (
    LatticeGauge,
    acceptance_weights,
    proposal_scale,
    sample_lattice_k_norm,
)
from dpopt.sensitivity.space import SensitivitySpace

LATTICE_METRICS = ("l2", "l1", "usefulness")
"""Metrics predicted for the discrete law (exact at rank 1, importance sampling above)."""

PROPOSALS = 1_000_000
"""Proposals of the importance-sampling estimate (fixed seed :data:`~dpopt.mechanisms.base.MONTE_CARLO_SEED`),
drawn in batches of :data:`PROPOSAL_BATCH`."""

PROPOSAL_BATCH = 100_000
"""Proposals held at once (a batch of the 4×4 table: 100,000 × 9 coordinates and 16 cells)."""

MIN_EFFECTIVE_DRAWS = 1_000
"""Fewest effective draws the importance-sampling estimate may rest on. The weights are at most 1, so its Kish
effective sample size (Σw)²/Σw² is at least Σw = :data:`PROPOSALS` × the acceptance rate: the family needs a
large-scale acceptance vol K/vol(M·B₁) of at least 1,000/10⁶ = 10⁻³ (:func:`estimate_refusal`)."""

MAX_ESTIMATE_WORK = 10**9
"""Most integer multiply-adds of the gauge in the importance-sampling estimate, :data:`PROPOSALS` × F × s (F
rational facets, rank s): about 2 CPU seconds at the 1.7 ns per multiply-add measured for the 4×4 table's gauge
(0.58 s for 10⁴ proposals × 3,818 facets × 9 coordinates, load average about 9 on 2 cores)."""

_TIGHT = 1e-7
"""A listed vector p is taken as on the floating-point facet a when |⟨a, p⟩ − 1| ≤ 1e-7; the exact solve and
the exact check that follow decide."""

EXACT_K_NORM_NOTE = (
    "exact sampler: the noise is a point of the lattice span(S) ∩ ℤ^d drawn in integer arithmetic from "
    "P[z] ∝ exp(−ε′‖z‖_K) (discrete Laplace proposals and Bernoulli(exp(−rational)) acceptance, Canonne, Kamath & "
    "Steinke 2020, Algorithms 1–2) and added to the integer counts; no floating point touches the release. "
    "Randomness: the numpy Generator passed to release (dpopt release: AES-CTR CSPRNG keyed from OS entropy unless "
    "--insecure-seed). Not covered: timing (the rejection rounds depend on the noise drawn, not on the data)"
)


def lattice_epsilon(epsilon0: float) -> Fraction:
    """ε′: the float ε₀ rounded down to a dyadic rational of 21 significant bits."""
    return dyadic_floor(Fraction(epsilon0))


def estimate_refusal(rate: float, rank: int, facets: int | None = None) -> str | None:
    """Why the lattice law's utility cannot be estimated within the stated cost (None: it can): fewer than
    :data:`MIN_EFFECTIVE_DRAWS` guaranteed effective draws at the large-scale acceptance ``rate``, or more than
    :data:`MAX_ESTIMATE_WORK` multiply-adds of the gauge over ``facets`` rational facets (when known)."""
    if PROPOSALS * rate < MIN_EFFECTIVE_DRAWS:
        return (f"the exact sampler would accept about {rate:.2g} of its proposals (vol K/vol(M·B₁) at rank {rank}): "
                f"its {PROPOSALS:,} importance-sampling proposals would guarantee only {PROPOSALS * rate:.0f} "
                f"effective draws of the lattice law (at least {MIN_EFFECTIVE_DRAWS:,} needed)")
    if facets is not None and PROPOSALS * facets * rank > MAX_ESTIMATE_WORK:
        return (f"the importance-sampling estimate would cost {PROPOSALS * facets * rank:.2g} multiply-adds of the "
                f"gauge ({facets} rational facets, rank {rank}; at most {MAX_ESTIMATE_WORK:.0e})")
    return None


def echelon_lattice(vectors: np.ndarray) -> tuple[tuple[int, ...], np.ndarray] | str:
    """The pivot columns J and the integral reduced row echelon form R (s × d, int64) of the rows of ``vectors``
    (the lattice basis), or the reason there is none (not integer vectors, or a non-integral echelon form)."""
    from flint import fmpq, fmpq_mat  # imported where used: python-flint loads in ~0.1 s

    rows = np.unique(np.asarray(vectors, dtype=float), axis=0)
    if np.any(rows != np.round(rows)) or np.any(np.abs(rows) > 2.0**31):
        return "the neighbouring differences are not (small) integer vectors"
    n, d = rows.shape
    echelon, rank = fmpq_mat(n, d, [fmpq(int(x)) for x in rows.ravel()]).rref()
    entries = [[echelon[i, j] for j in range(d)] for i in range(rank)]
    if any(x.q != 1 for row in entries for x in row):
        return "the reduced echelon form of the sensitivity space is not integral (no canonical lattice basis)"
    columns = tuple(next(j for j in range(d) if row[j] != 0) for row in entries)
    return columns, np.array([[int(x.p) for x in row] for row in entries], dtype=np.int64).reshape(rank, d)


def rational_gauge(normals: np.ndarray, points: np.ndarray) -> LatticeGauge | str:
    """The :class:`~dpopt.noise.k_norm_lattice.LatticeGauge` of Hull(points) from the floating-point facet
    ``normals`` (rows a, ⟨a, y⟩ ≤ 1), each re-solved exactly on the integer ``points`` it holds; or the reason
    it cannot be built."""
    from flint import fmpq_mat, fmpz_mat  # imported where used

    points = np.asarray(points, dtype=np.int64)
    s = points.shape[1]
    facets: set[tuple[Fraction, ...]] = set()
    for a in np.asarray(normals, dtype=float):
        tight = points[np.abs(points @ a - 1.0) <= _TIGHT]
        if len(tight) < s:
            return "a facet of the floating-point hull holds fewer than s listed vectors"
        t = fmpz_mat(tight.tolist())
        gram = fmpq_mat(t.transpose() * t)
        if gram.rank() < s:
            return "a facet of the floating-point hull is not spanned by the listed vectors on it"
        solution = gram.solve(fmpq_mat(t.transpose() * fmpz_mat([[1]] * len(tight))))
        exact = tuple(Fraction(int(solution[i, 0].p), int(solution[i, 0].q)) for i in range(s))
        if any(sum(x * int(p) for x, p in zip(exact, row)) != 1 for row in tight.tolist()):
            return "a facet's listed vectors do not lie on one hyperplane in exact arithmetic"
        facets.add(exact)
    l1_bound = int(np.abs(points).sum(axis=1).max())
    denominator = math.lcm(l1_bound, *(x.denominator for a in facets for x in a))
    numerators = np.array([[int(x * denominator) for x in a] for a in sorted(facets)], dtype=np.int64)
    return LatticeGauge(numerators.reshape(-1, s), denominator, l1_bound)


@dataclass(frozen=True, eq=False)
class LatticeKNorm:
    """The discrete K-norm law on L = {cR : c ∈ ℤ^s}: c ~ P ∝ exp(−ε′ g(c)) (module docstring).

    Attributes
    ----------
    columns : tuple of int
        The pivot columns J (c = z[J]).
    echelon : ndarray of int64, shape (s, d)
        R, the integral reduced echelon form of S.
    gauge : LatticeGauge
        g on the coordinates c.
    epsilon : Fraction
        ε′.
    """

    columns: tuple[int, ...]
    echelon: np.ndarray
    gauge: LatticeGauge
    epsilon: Fraction
    _estimates: dict = field(default_factory=dict, repr=False)

    @classmethod
    def build(cls, vectors: np.ndarray, normals: np.ndarray, epsilon: Fraction,
              l1_bound: int | None = None) -> LatticeKNorm | str:
        """From the listed vectors and the hull's facet normals (in pivot coordinates); ``l1_bound`` a recorded
        M (default: the listed vectors' max ‖v[J]‖₁). A string: why there is no lattice law."""
        basis = echelon_lattice(vectors)
        if isinstance(basis, str):
            return basis
        columns, echelon = basis
        gauge = rational_gauge(normals, np.round(np.asarray(vectors)[:, list(columns)]).astype(np.int64))
        if isinstance(gauge, str):
            return gauge
        if l1_bound is not None and l1_bound != gauge.l1_bound:
            gauge = LatticeGauge(gauge.numerators * (math.lcm(gauge.denominator, l1_bound) // gauge.denominator),
                                 math.lcm(gauge.denominator, l1_bound), l1_bound)
        return cls(columns, echelon, gauge, Fraction(epsilon))

    @property
    def rank(self) -> int:
        return len(self.columns)

    def noise(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """``size`` exact draws of Z = cR (int64, shape (size, d))."""
        return sample_lattice_k_norm(rng, self.gauge, self.epsilon, size) @ self.echelon

    def describe(self) -> dict:
        return {"sampler": "exact", "lattice_epsilon": str(self.epsilon), "l1_bound": self.gauge.l1_bound,
                "lattice_basis": "reduced row echelon form of S (integral)", "pivot_columns": list(self.columns),
                "rational_facets": len(self.gauge.numerators), "facet_denominator": self.gauge.denominator}

    # ------------------------------------------------------------------ checks
    def sensitivity_check(self, space: SensitivitySpace) -> tuple[Fraction, Check]:
        """S ⊂ L and sup_{v∈S} g(v), exactly: the basis re-derived, v = v[J]·R in integers, g(v) = G(v)/D."""
        vectors = space.listed()
        claim = "k_norm.lattice"
        if vectors is None:
            return Fraction(0), Check(claim, "exact lattice K-norm", False, "the sensitivity space cannot be listed")
        basis = echelon_lattice(vectors)
        if isinstance(basis, str) or basis[0] != self.columns or not np.array_equal(basis[1], self.echelon):
            return Fraction(0), Check(claim, "exact lattice K-norm", False,
                                      "the recorded lattice basis is not the reduced echelon form of S")
        v = np.round(vectors).astype(np.int64)
        c = v[:, list(self.columns)]
        in_lattice = bool(np.array_equal(c @ self.echelon, v))
        top = int(self.gauge.scaled(c).max(initial=0))
        worst = Fraction(top, self.gauge.denominator)
        m = int(np.abs(c).sum(axis=1).max(initial=0))
        passed = in_lattice and worst <= 1 and m == self.gauge.l1_bound
        return worst, Check(
            claim,
            "exact lattice K-norm: the integral reduced echelon form R of S re-derived in rationals; every listed "
            "vector v = v[J]·R in integers (S ⊂ L); sup_{v∈S} ‖v‖_K = max G(v)/D over the rational facets and "
            "‖v[J]‖₁/M, in integers; M = max ‖v[J]‖₁ (so g(c) ≥ ‖c‖₁/M: every acceptance probability "
            "exp(−(ε′g(c) − ε′‖c‖₁/M)) is at most 1)",
            passed,
            f"{len(v)} listed vectors in L: {in_lattice}; {len(self.gauge.numerators)} rational facets, D = "
            f"{self.gauge.denominator}; max ‖v‖_K = {worst}; M = {self.gauge.l1_bound} (listed max {m}); "
            f"ε′ = {self.epsilon}, proposal scale M/ε′ = {proposal_scale(self.epsilon, self.gauge)}",
        )

    # ------------------------------------------------------------------ utility
    def utility(self, metric: str, workload: np.ndarray | None, gamma: float | None) -> UtilityValue:
        """The discrete law's ``metric`` (:data:`LATTICE_METRICS`): exact at rank 1, importance sampling above."""
        if self.rank == 1:
            return self._rank_one(metric, workload, gamma)
        key = (metric, gamma, None if workload is None else workload.tobytes())
        if key not in self._estimates:
            self._estimates[key] = self._importance(metric, workload, gamma)
        value, ci, rate, effective = self._estimates[key]
        return UtilityValue(metric, value, (f"Monte Carlo: importance sampling of the lattice law from {PROPOSALS} "
                                            f"discrete Laplace proposals, seed {MONTE_CARLO_SEED} (acceptance "
                                            f"rate {rate:.4g}, effective sample size {effective:.0f})"), ci)

    def acceptance_rate(self, metric: str = "l2", workload: np.ndarray | None = None,
                        gamma: float | None = None) -> float:
        """The sampler's acceptance rate: 1 at rank 1 (g(c) = |c|/M there: proposal and law agree), else E_q[w], a
        Monte Carlo estimate from :data:`PROPOSALS` proposals (the pass that estimates ``metric``)."""
        if self.rank == 1:
            return 1.0
        self.utility(metric, workload, gamma)
        return self._estimates[(metric, gamma, None if workload is None else workload.tobytes())][2]

    def _rank_one(self, metric: str, workload: np.ndarray | None, gamma: float | None) -> UtilityValue:
        kappa = Fraction(int(self.gauge.scaled(np.ones((1, 1), dtype=np.int64))[0]), self.gauge.denominator)
        moments = discrete_laplace_moments(float(1 / (self.epsilon * kappa)))
        u = self.echelon[0].astype(float)
        how = f"exact: c is discrete Laplace of scale 1/(ε′κ), κ = {kappa}, along the basis vector"
        if metric == "l2":
            image = u if workload is None else workload @ u
            return UtilityValue(metric, moments["second_moment"] * float(image @ image), how)
        if metric == "l1":
            return UtilityValue(metric, moments["mean_abs"] * float(np.abs(u).sum()), how)
        within = [1.0 if x == 0 else discrete_laplace_moments(float(1 / (self.epsilon * kappa)),
                                                               gamma / abs(x))["within"] for x in u]
        return UtilityValue(metric, float(np.mean(within)), how)

    def _importance(self, metric: str, workload: np.ndarray | None,
                    gamma: float | None) -> tuple[float, tuple[float, float], float, float]:
        """(E_p f, its 95% interval, E_q w, the Kish effective sample size (Σw)²/Σw²) from sums over the batches:
        Σw, Σwf, Σw²f, Σw²f², Σw²; the delta method's SE is √(Σw²(f − m)²)/Σw."""
        rng = np.random.default_rng(MONTE_CARLO_SEED)
        scale = proposal_scale(self.epsilon, self.gauge)
        sums = np.zeros(5)
        for start in range(0, PROPOSALS, PROPOSAL_BATCH):
            n = min(PROPOSAL_BATCH, PROPOSALS - start)
            c = sample_discrete_laplace(rng, scale.numerator, scale.denominator, n * self.rank).reshape(n, self.rank)
            num, den = acceptance_weights(self.gauge, self.epsilon, c)
            w = np.exp(-num.astype(float) / den)
            z = (c @ self.echelon).astype(float)
            if metric == "l2":
                wz = z if workload is None else z @ workload.T
                f = np.sum(wz**2, axis=1)
            elif metric == "l1":
                f = np.sum(np.abs(z), axis=1)
            else:
                f = np.mean(np.abs(z) <= gamma, axis=1)
            sums += [w.sum(), w @ f, (w * w) @ f, (w * w) @ (f * f), (w * w).sum()]
        total, weighted, w2f, w2f2, w2 = (float(x) for x in sums)
        mean = weighted / total
        se = math.sqrt(max(w2f2 - 2.0 * mean * w2f + mean * mean * w2, 0.0)) / total
        return mean, (mean - 1.96 * se, mean + 1.96 * se), total / PROPOSALS, total * total / w2
