r"""``kronecker_laplace`` measured exactly when a term sums over an ordered attribute: blocks of whole integer
factors, totals and the parts beside them (a pure-ε design of its own, whose cost against the continuous design the
certificate states).

The lattice design of :mod:`dpopt.mechanisms.kronecker_laplace` measures :math:`(\bigotimes_k\tilde A_k\otimes
M_S)x`, which needs the (ordered × S)-marginals of the cells; a term that sums an ordered attribute k publishes
only its total along k, so the answers do not determine them. Along such an attribute three parts are available:
the whole integer factor :math:`\tilde A_k`, the total :math:`\mathbf 1^\top`, and the part beside it

.. math:: \tilde P_k = \tilde A_k(n_kI - J)/\gcd \ (\text{kernel } \mathbf 1) \quad\text{or}\quad
          \tilde A_k \text{ with column } j \text{ set to } 0 \ (\text{kernel } e_j),

integer of rank :math:`n_k - 1`, kernel span(v). A **block** B = (A, U) reads the summed attributes of A whole,
those of U beside their total, the other summed ones through their total, and the ordered attributes that no term
sums whole; it measures :math:`y_{B,S} = (\bigotimes\text{parts}\otimes M_S)x + \eta_{B,S}` in int64,
:math:`\eta_{B,S}` i.i.d. discrete Laplace of scale :math:`t_{B,S}` (:mod:`dpopt.mechanisms.laplace_lattice`).

**Why blocks decouple.** :math:`\mathbb R^{n_k} = \mathrm{span}(v)\oplus\mathbf 1^\perp`: :math:`\mathbf 1^\top`
vanishes on :math:`\mathbf 1^\perp`, :math:`\tilde P_k` on span(v) and is injective on :math:`\mathbf 1^\perp`,
so the total and the part beside it measure complementary components, and the plain attributes' ANOVA components
are orthogonal: each (ordered part, component T) is measured by one block, whose least squares (the parent's
ANOVA least squares within the block; along k, :math:`\tilde A_k^+`, :math:`v/\mathbf 1^\top v` on the total, the
least squares of the component in :math:`\mathbf 1^\perp` beside it) estimates it whatever the other blocks' noise.

**Which blocks** (:func:`block_plan`). For a component T, the terms that read it (T ⊆ S_t) keep some summed
attributes K_t; A_T is the intersection of the maximal K_t, and T is served by the blocks (A_T, U), U ⊆ K ∖ A_T for
a maximal K. A term t that sums k reads :math:`\mathbf 1^\top\hat x` along k, and :math:`\mathbf 1^\top` of the
part beside the total is 0, so it reads only blocks with U ⊆ K_t, which are served; each block's data, the
(unsplit ∪ A_T ∪ U ∪ T)-marginal of the cells, is a marginal of the support of a term with a maximal K, which its
answers determine (:func:`~dpopt.mechanisms.kronecker_lattice.cell_marginals`). The continuous design's marginals θ_S
are cut to the attributes of the components a block serves (:func:`projected_theta`).

**Privacy, in rationals.** A record in cell j moves block (B, S) by :math:`\bigotimes\text{parts}\,e_{j_k}\otimes
M_Se_j`, of l1 norm the product of the parts' column norms (a total's is 1). The loss
:math:`\sum_{B,S}\|\cdot\|_1/t_{B,S}` is at most :math:`\sum_{B,S}L_B/t_{B,S}`, :math:`L_B` the product of the
parts' largest column norms, attained when one column is largest in every part of each attribute
(:meth:`KroneckerLaplaceBlocks.attained`); twice that under replace-one (triangle inequality), k times for Hamming
k. ``dpopt verify`` recomputes it from the recorded integer factors, references and scales.

**Scales.** :math:`t_{B,S} = \tau_B/\theta'_S` rounded up; :math:`\tau_B` minimises :math:`\sum_Be_B\tau_B^2`
(:math:`e_B` the block's squared error per unit :math:`\tau_B^2`, Laplace variances :math:`2t^2`) subject to
:math:`\sum_BL_B\sum_S\theta'_S/\tau_B = \varepsilon`: by Lagrange :math:`\tau_B\propto(L_B\sum\theta'/e_B)^{1/3}`;
each summed attribute's kernel (1 or a level) is the one of least predicted error; then the exact check, the scales
moved up by 2^-20 until it passes.

**Errors** in closed form: :math:`E\|Z\|^2 = \sum_B\sum_t\prod_k\mathrm{tr}(G_{t,k}C_{k,B})\prod_{k\in P\setminus
S_t}n_k\sum_{T\subseteq S_t}m_T\nu_{B,T}/\kappa_{B,T}^2` with :math:`C = EE^\top` of each part's estimator E and
:math:`\nu_{B,T}, \kappa_{B,T}` the parent's :math:`\nu_T, \kappa_T` at the block's marginals and scales.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from dpopt.core.checks import Check
from dpopt.domain.kronecker import KroneckerWorkload, apply_along
from dpopt.domain.marginal_algebra import Subset, subsets
from dpopt.errors import DataError
from dpopt.mechanisms.kronecker_gaussian import anova_cell_variances, finite_factors, recorded_workload
from dpopt.mechanisms.kronecker_lattice import cell_marginals
from dpopt.mechanisms.kronecker_laplace import (
    INT_LIMIT,
    SUMMED_ORDERED,
    KroneckerLaplaceMechanism,
    integer_column_l1,
    integer_factor,
)
from dpopt.mechanisms.laplace_lattice import lattice_pure_check, lattice_scale, lattice_variance_weights, sample_blocks
from dpopt.mechanisms.lattice import integer_answers
from dpopt.mechanisms.marginal_gaussian import positive_by_set
from dpopt.optimize.kronecker_anova import AnovaSplit
from dpopt.problem import Problem
from dpopt.sensitivity.space import SensitivitySpace
from dpopt.spec.models import Privacy

Block = tuple[tuple[int, ...], tuple[int, ...]]
"""(A, U): the positions (in ``split.ordered``) of the split attributes measured by their whole factor Ã (A) and by
their part P̃ beside the total (U); the other split attributes by their total 1ᵀ."""

NUDGES = 40
"""Times the block scales are moved up by 2^-20 before the design gives up (the exact check never passed)."""


def summed_positions(workload: KroneckerWorkload) -> tuple[int, ...]:
    """The positions i of the ordered attributes (``AnovaSplit.ordered[i]``) that some term sums over."""
    split = AnovaSplit.of(workload)
    return tuple(i for i, k in enumerate(split.ordered)
                 if any(workload.terms[t][k] is None for t in range(len(workload.terms))))


def block_plan(base: KroneckerLaplaceMechanism, positions: tuple[int, ...]) -> dict[Block, tuple[Subset, ...]]:
    """The blocks and the ANOVA components T each serves (module docstring): for T, the sets K_t of split positions
    kept by the terms that read T (T ⊆ S_t); A_T = the intersection of the maximal ones, measured whole; the blocks
    (A_T, U) for every U ⊆ K∖A_T, K maximal. Term t reads T from (A_T, U) only when U ⊆ K_t, and the data of that
    block, the (unsplit ∪ A_T ∪ U ∪ T)-marginal, is one of the support of the maximal K's term."""
    work, split = base.workload, base.split
    plan: dict[Block, list[Subset]] = {}
    for t in base.kappa:
        kept = {frozenset(i for i in positions if work.terms[term][split.ordered[i]] is not None)
                for term in range(len(work.terms)) if set(t) <= set(split.local_support(work, term))}
        maximal = [k for k in kept if not any(k < other for other in kept)]
        whole = frozenset.intersection(*maximal)
        for u in {u for k in maximal for u in subsets(tuple(sorted(k - whole)))}:
            plan.setdefault((tuple(sorted(whole)), u), []).append(t)
    return {b: tuple(ts) for b, ts in sorted(plan.items(), key=lambda e: (len(e[0][0]) + len(e[0][1]), e[0]))}


def projected_theta(theta: dict[Subset, float], served: tuple[Subset, ...]) -> dict[Subset, float]:
    """A block's marginals: each S of θ cut to the attributes of the components the block serves (S' = S ∩ ∪T), the
    weights of the S that share an S' added (one measurement of weight Σθ costs the privacy of the several and
    carries at least their information, (Σθ)² ≥ Σθ²); an S' that holds no served component is dropped."""
    keep = {i for t in served for i in t}
    out: dict[Subset, float] = {}
    for s, w in theta.items():
        cut = tuple(i for i in s if i in keep)
        if any(set(t) <= set(cut) for t in served):
            out[cut] = out.get(cut, 0.0) + w
    return out


def centred_factor(a: np.ndarray, reference: int | None) -> np.ndarray:
    """P̃ in int64 with kernel span(v), rank n − 1 when Ã has full column rank: Ã(nI − J) = nÃ − (Ã1)1ᵀ divided by
    the gcd of its entries (v = 1) for ``reference`` None, else Ã with column ``reference`` set to 0 (v = e_j)."""
    a = np.asarray(a, dtype=np.int64)
    if reference is None:
        out = a.shape[1] * a - a.sum(axis=1, keepdims=True)
        divisor = math.gcd(*(int(x) for x in out.reshape(-1)))
        return out // divisor if divisor > 1 else out
    out = a.copy()
    out[:, reference] = 0
    return out


def kernel_vector(n: int, reference: int | None) -> np.ndarray:
    """v (int64): 1 for the centred factor, e_j for a reference level j."""
    if reference is None:
        return np.ones(n, dtype=np.int64)
    v = np.zeros(n, dtype=np.int64)
    v[reference] = 1
    return v


@dataclass(frozen=True)
class Part:
    """One ordered attribute's factor in one block: the integer rows measured, the least squares' estimator
    (n × rows) and its covariance per unit noise variance C = E Eᵀ."""

    integer: np.ndarray
    estimator: np.ndarray
    covariance: np.ndarray
    kind: str


def _parts(integer_factors: tuple[np.ndarray, ...], references: dict[int, int | None], block: Block) -> list[Part]:
    """The parts of ``block`` = (A, U): Ã (unsplit, or in A), P̃ (in U) or the total 1ᵀ (other split positions).
    Estimators (module docstring): Ã⁺; B(BᵀP̃ᵀP̃B)⁻¹BᵀP̃ᵀ with B = [I; −1ᵀ] a basis of 1^⊥ (the least squares of the
    component in 1^⊥, whatever the other blocks' weights); v/(1ᵀv) on the total."""
    whole, u = block
    out = []
    for i, a in enumerate(integer_factors):
        n = a.shape[1]
        if i not in references or i in whole:
            estimator = np.linalg.pinv(a.astype(float))
            out.append(Part(a, estimator, estimator @ estimator.T, "whole"))
        elif i in u:
            f = centred_factor(a, references[i])
            basis = np.vstack([np.eye(n - 1), -np.ones((1, n - 1))])
            fb = f.astype(float) @ basis
            estimator = basis @ np.linalg.solve(fb.T @ fb, fb.T)
            out.append(Part(f, estimator, estimator @ estimator.T, "beside"))
        else:
            v = kernel_vector(n, references[i]).astype(float) / float(kernel_vector(n, references[i]).sum())
            out.append(Part(np.ones((1, n), dtype=np.int64), v[:, None], np.outer(v, v), "total"))
    return out


class KroneckerLaplaceBlocks(KroneckerLaplaceMechanism):
    """``kronecker_laplace`` on the lattice in blocks of totals and centred factors (module docstring).

    Parameters
    ----------
    attributes, workload, replace, multiplier, factors, theta, scale, design
        As :class:`~dpopt.mechanisms.kronecker_laplace.KroneckerLaplaceMechanism` (the continuous design's
        strategy, kept to state the cost).
    integer_factors : tuple of numpy.ndarray
        Ã_k (int64) per ordered attribute, full column rank.
    references : dict
        Per split position, the kernel of its P̃: None for v = 1 (centred), j for v = e_j (:func:`centred_factor`).
    blocks : dict
        t_{B,S'} per measured block B = (A, U) and projected marginal S' (:func:`projected_theta`).
    """

    family = "kronecker_laplace"  # registered in place of KroneckerLaplaceMechanism, whose design it refines

    @classmethod
    def design(cls, problem: Problem) -> KroneckerLaplaceMechanism:
        """:meth:`KroneckerLaplaceMechanism.design`; where a term sums over an ordered attribute and the spec allows
        the lattice, the block design on its strategy instead (:meth:`calibrated`), its cost against the continuous
        design in ``lattice_error_ratio``; if the block design fails, the continuous one and the reason."""
        base = KroneckerLaplaceMechanism.design(problem)
        info = base.design_info
        if info.get("sampler") != f"floating_point: {SUMMED_ORDERED}":
            return base
        try:
            blocks = cls.calibrated(base, float(problem.spec.privacy.parameters["epsilon"]), problem.spec.privacy)
        except ValueError as exc:
            info["sampler"] = f"floating_point: the block design for a summed ordered attribute failed ({exc})"
            return base
        info["sampler"] = "exact"
        info["lattice_error_ratio"] = blocks._expected_l2(None) / info["expected_l2"]
        info["lattice_blocks"] = len(blocks.blocks)
        blocks.design_info = info
        return blocks

    def __init__(self, attributes, workload, replace, multiplier, factors, theta, scale, design,
                 integer_factors: tuple[np.ndarray, ...], references: dict[int, int | None],
                 blocks: dict[Block, dict[Subset, Fraction]]):
        super().__init__(attributes, workload, replace, multiplier, factors, theta, scale, design)
        self.sampler = "exact"
        self.needs_integer_answers = True
        self.integer_factors = tuple(np.asarray(a, dtype=np.int64) for a in integer_factors)
        sizes = tuple(workload.sizes[k] for k in self.split.ordered)
        if len(self.integer_factors) != len(sizes) or any(
                a.ndim != 2 or a.shape[1] != n or np.abs(a).max() >= 2**31
                for a, n in zip(self.integer_factors, sizes)):
            raise ValueError("one integer factor per ordered attribute (entries below 2^31), one column per level")
        self.positions = summed_positions(workload)
        self.references = {int(i): (None if r is None else int(r)) for i, r in references.items()}
        if set(self.references) != set(self.positions) or not all(
                r is None or 0 <= r < self.integer_factors[i].shape[1] for i, r in self.references.items()):
            raise ValueError("one reference (None or a level) per summed ordered attribute")
        self.blocks = {(tuple(a), tuple(u)): {tuple(s): Fraction(t) for s, t in scales.items()}
                       for (a, u), scales in blocks.items()}
        self.plan = block_plan(self, self.positions)
        if set(self.blocks) != set(self.plan):
            raise ValueError(f"blocks: the workload's blocks are {sorted(self.plan)}, not {sorted(self.blocks)}")
        self.needed = self.plan
        self.block_theta = {u: projected_theta(self.theta, self.needed[u]) for u in self.blocks}
        if not all(set(self.blocks[u]) == set(self.block_theta[u]) and all(t > 0 for t in self.blocks[u].values())
                   for u in self.blocks):
            raise ValueError("blocks: one positive scale per projected marginal of each block")
        self.block_kappa = {u: {t: sum(w * w * self.split.algebra.co_size(s) for s, w in self.block_theta[u].items()
                                       if set(t) <= set(s)) for t in self.needed[u]} for u in self.blocks}
        self._ls = tuple(a.astype(float) for a in self.integer_factors)
        self.parts = {u: _parts(self.integer_factors, self.references, u) for u in self.blocks}

    # ---------------------------------------------------------------- design
    @classmethod
    def calibrated(cls, base: KroneckerLaplaceMechanism, epsilon: float, privacy: Privacy) -> KroneckerLaplaceBlocks:
        """The block design on ``base``'s strategy: the integer factors, the scales by the module docstring's
        Lagrange rule, then the exact check (scales moved up by 2^-20 until it passes).

        Raises
        ------
        ValueError
            If the check never passes.
        """
        integer = tuple(integer_factor(a) for a in base.factors)
        positions = summed_positions(base.workload)
        unit = {b: {s: Fraction(1) for s in projected_theta(base.theta, served)}
                for b, served in block_plan(base, positions).items()}
        spread = (2 if base.replace else 1) * base.multiplier

        def probe(references: dict) -> KroneckerLaplaceBlocks:
            return cls(base.attributes, base.workload, base.replace, base.multiplier, base.factors, base.theta,
                       base.scale, None, integer, references, unit)

        references: dict[int, int | None] = {i: None for i in positions}
        for i in positions:  # one pass over the split attributes: the kernel of least predicted error
            options = [None, *range(integer[i].shape[1])]
            references[i] = min(options, key=lambda r: probe({**references, i: r})._lagrange(spread / epsilon)[0])
        best = probe(references)
        _, tau = best._lagrange(spread / epsilon)
        tau = {u: t * (1 + 1e-9) for u, t in tau.items()}
        for _ in range(NUDGES):
            blocks = {u: {s: lattice_scale(Fraction(t) / Fraction(w)) for s, w in best.block_theta[u].items()}
                      for u, t in tau.items()}
            mechanism = cls(base.attributes, base.workload, base.replace, base.multiplier, base.factors, base.theta,
                            base.scale, None, integer, references, blocks)
            if lattice_pure_check(mechanism._lattice_terms(), privacy, "").passed:
                return mechanism
            tau = {u: t * (1 + 2.0**-20) for u, t in tau.items()}
        raise ValueError("no block scales passed the exact privacy check")

    def _lagrange(self, per_epsilon: float) -> tuple[float, dict[Block, float]]:
        """(the predicted E‖Z‖², τ_U per block) of the module docstring's rule at Laplace variances 2t², for
        ε/(replace × Hamming factor) = 1/``per_epsilon``: min Σ e_U τ_U² subject to Σ L'_U/τ_U = ε' is
        (Σ_U e_U^{1/3} L'_U^{2/3})³/ε'² at τ_U = λ(L'_U/e_U)^{1/3}, L'_U = L_U Σ_S θ_S (blocks that no answer reads
        its served components only)."""
        loads = {u: self._shift(u) * sum(self.block_theta[u].values()) for u in self.blocks}
        errors = {u: self._block_error(u, {t: k / 2.0 for t, k in self.block_kappa[u].items()}) for u in self.blocks}
        if not all(e > 0 for e in errors.values()):
            raise ValueError("a block that no answer reads")
        total = sum(loads[u] ** (2 / 3) * errors[u] ** (1 / 3) for u in self.blocks)
        lam = total * per_epsilon
        return total**3 * per_epsilon**2, {u: lam * (loads[u] / errors[u]) ** (1 / 3) for u in self.blocks}

    def _shift(self, u: Block) -> int:
        """L_U = ∏ max_j ‖(part) e_j‖₁ over the ordered attributes (a total's is 1), an integer."""
        return math.prod(integer_column_l1(p.integer) for p in self.parts[u])

    def _block_error(self, u: Block, weights: dict[Subset, float]) -> float:
        """Σ_t ∏_k tr(G_{t,k}C_{k,U})·∏_{k∈P∖S_t}n_k Σ_{T⊆S_t, T read from u} m_T/b_T (module docstring)."""
        alg, work = self.split.algebra, self.workload
        parts = self.parts[u]
        needed = set(self.needed[u])
        total = 0.0
        for t in range(len(work.terms)):
            s = self.split.local_support(work, t)
            plain = alg.co_size(s) * sum(alg.multiplicity(v) / weights[v] for v in subsets(s)
                                         if v in needed and v in weights)
            ordered = math.prod(float(np.sum(work.gram(t, k) * p.covariance))
                                for k, p in zip(self.split.ordered, parts))
            total += ordered * plain
        return total

    # ---------------------------------------------------------------- records
    @classmethod
    def from_parameters(cls, parameters: dict, space: SensitivitySpace) -> KroneckerLaplaceMechanism:
        """The block design a certificate records (ValueError on a malformed record); any other record is
        :class:`KroneckerLaplaceMechanism`'s."""
        if parameters.get("sampler") != "exact" or "blocks" not in parameters.get("lattice", {}):
            return KroneckerLaplaceMechanism.from_parameters(parameters, space)
        attributes, workload = recorded_workload(parameters, space)
        split = AnovaSplit.of(workload)
        owners = tuple(attributes[k] for k in split.ordered)
        plain = tuple(attributes[k] for k in split.plain)
        by_name = {f["attribute"]: np.asarray(f["matrix"], dtype=float) for f in parameters["strategy"]["ordered"]}
        if set(by_name) != set(owners):
            raise ValueError(f"the ordered factors are for {sorted(by_name)}, expected {list(owners)}")
        theta = positive_by_set(plain, parameters["strategy"]["marginals"], "marginal", "weight")
        try:
            record = parameters["lattice"]
            ints = {f["attribute"]: np.asarray(f["matrix"], dtype=object) for f in record["factors"]}
            if not all(type(v) is int for m in ints.values() for v in m.reshape(-1)):
                raise ValueError("the integer factors must hold integers")
            integer = tuple(ints[a].astype(np.int64) for a in owners)
            references = {owners.index(e["attribute"]): e["reference"] for e in record["references"]}
            blocks: dict[Block, dict[Subset, Fraction]] = {}
            for entry in record["blocks"]:
                key = (tuple(sorted(owners.index(a) for a in entry["whole"])),
                       tuple(sorted(owners.index(a) for a in entry["beside"])))
                s = tuple(sorted(plain.index(a) for a in entry["marginal"]))
                blocks.setdefault(key, {})[s] = Fraction(str(entry["scale"]))
        except (KeyError, TypeError) as exc:
            raise ValueError(f"lattice: integer factors per ordered attribute and a scale per block ({exc})") from None
        return cls(attributes, workload, parameters["adjacency"] == "replace_one", int(parameters["multiplier"]),
                   finite_factors(tuple(by_name[a] for a in owners)), theta, float(parameters["scale"]),
                   parameters.get("design"), integer, references, blocks)

    @property
    def parameters(self) -> dict:
        out = super().parameters
        owners = [self.attributes[k] for k in self.split.ordered]
        plain = [self.attributes[k] for k in self.split.plain]
        out["sampler"] = "exact"
        out["lattice"] = {
            "factors": [{"attribute": a, "matrix": f.tolist()} for a, f in zip(owners, self.integer_factors)],
            "references": [{"attribute": owners[i], "reference": r} for i, r in self.references.items()],
            "blocks": [{"whole": [owners[i] for i in b[0]], "beside": [owners[i] for i in b[1]],
                        "marginal": [plain[i] for i in s], "weight": self.block_theta[b][s], "scale": str(t)}
                       for b, scales in self.blocks.items() for s, t in scales.items()],
        }
        return out

    # --------------------------------------------------------------- privacy
    def _lattice_terms(self) -> list[tuple[int, Fraction]]:
        """(Δ, t_{B,S}) per measured block: Δ = L_B, × 2 under replace-one, × k (module docstring)."""
        spread = (2 if self.replace else 1) * self.multiplier
        return [(self._shift(u) * spread, t) for u, scales in self.blocks.items() for t in scales.values()]

    def attained(self) -> bool:
        """Whether Σ L_B/t_B is attained by a cell (else an upper bound): for every ordered attribute, one column
        is largest in l1 norm in each of its parts that the blocks use (the products are then all largest at once)."""
        for i in range(len(self.integer_factors)):
            kinds = {p.kind: p.integer for parts in self.parts.values() for j, p in enumerate(parts) if j == i}
            tops = [set(np.flatnonzero(np.abs(m).sum(axis=0) == np.abs(m).sum(axis=0).max())) for m in kinds.values()]
            if not set.intersection(*tops):
                return False
        return True

    def _privacy_checks(self, space: SensitivitySpace, privacy: Privacy) -> list[Check]:
        ranks = all(int(np.linalg.matrix_rank(a)) == a.shape[1] for a in self._ls)
        missing = set(block_plan(self, self.positions)) - set(self.blocks)
        covered = all(k > 0 for k in self.kappa.values())
        estimable = Check(
            "strategy.estimable",
            "every integer ordered factor has full column rank (so each centred factor Ã(nI − J) has rank n − 1 and "
            "kernel span(1)), every block some answer reads is measured, and the marginals cover every ANOVA "
            "component (κ_T > 0): the least-squares answers are unbiased",
            ranks and not missing and covered,
            f"{len(self.blocks)} block(s) measured" + (f"; missing {sorted(missing)}" if missing else ""))
        inner = lattice_pure_check(self._lattice_terms(), privacy, (
            "Δ_B = ∏ max_j ‖(part) e_j‖₁ over the ordered attributes (the stored integer factor Ã whole, P̃ derived "
            "from it beside the total, or the total 1ᵀ): a record's loss Σ_B ∏ ‖(part) e_{j_k}‖₁/t_B is at most "
            "that, " + ("attained (one column is largest in every part of each attribute)" if self.attained() else
                        "an upper bound (no column is largest in every part of some attribute)")
            + (" × 2 (replace-one, triangle inequality)" if self.replace else "")
            + (f" × {self.multiplier} (Hamming)" if self.multiplier != 1 else "")
            + f" and t_B the stored scales of the {sum(len(s) for s in self.blocks.values())} measured blocks"))
        return [estimable, Check("privacy", inner.method, estimable.passed and inner.passed, inner.detail)]

    def notes(self) -> list[str]:
        owners = [self.attributes[self.split.ordered[i]] for i in self.positions]
        return [*super().notes(),
                f"a term sums over {', '.join(owners)}: measured in {len(self.blocks)} block(s) (whole integer "
                "factors, totals, and the parts beside the totals) whose data the answers determine (a pure-ε "
                "design of its own; the ratio above is its cost against the continuous design)"]

    # --------------------------------------------------------------- noise
    def _block_noise(self, rng: np.random.Generator, size: int) -> dict[tuple[Block, Subset], np.ndarray]:
        """η_{U,S} (int64), laid out (rows of each part, ``size``, cells of S)."""
        alg = self.split.algebra
        scales, shapes = {}, {}
        for u, by_s in self.blocks.items():
            rows = tuple(p.integer.shape[0] for p in self.parts[u])
            for s, t in by_s.items():
                scales[(u, s)], shapes[(u, s)] = t, rows + alg.table_shape(s)
        drawn = sample_blocks(rng, scales, shapes, size)
        return {key: np.moveaxis(z, 0, len(self.integer_factors)) for key, z in drawn.items()}

    def _components(self, noise: dict, size: int, cells: dict | None) -> dict[Subset, np.ndarray]:
        """The least squares' plain components summed over the blocks (ordered levels, draws, cells of T), from
        the integers u_{U,S,T} = (⊗ parts ⊗ M_T)x + marg_{S→T} η_{U,S} (x = 0 when ``cells`` is None: the noise)."""
        alg = self.split.algebra
        out: dict[Subset, np.ndarray] = {}
        for u, by_s in self.blocks.items():
            parts = self.parts[u]
            for t in self.needed[u]:
                data = None if cells is None else self._data(cells, u, t)
                total = None
                for s in by_s:
                    if not set(t) <= set(s):
                        continue
                    z = alg.marginal(noise[(u, s)], s, t)
                    v = (z if data is None else data + z).astype(float)  # the integers, then floats
                    for i, p in enumerate(parts):
                        v = apply_along(v, p.estimator, i)
                    w = self.block_theta[u][s]
                    term = (w * w * alg.co_size(s)) * alg.center(v, len(t))
                    total = term if total is None else total + term
                part = total / self.block_kappa[u][t]
                out[t] = part if t not in out else out[t] + part
        return out

    def _data(self, cells: dict, u: Block, t: Subset) -> np.ndarray:
        """(⊗ parts ⊗ M_T)x in int64, laid out (rows of each part, m, cells of T), from the (unsplit ∪ U ∪ T)-
        marginal of the cells (a total's axis is the marginal's summed one, kept with one level)."""
        split = self.split
        present = [i for i, p in enumerate(self.parts[u]) if p.kind != "total"]
        block = tuple(sorted({split.ordered[i] for i in present} | {split.plain[j] for j in t}))
        x = cells[block]
        order = ([1 + block.index(split.ordered[i]) for i in present] + [0]
                 + [1 + block.index(split.plain[j]) for j in t])
        x = np.transpose(x, order)
        for i in range(len(self.integer_factors)):
            if i not in present:
                x = np.expand_dims(x, i)
        parts = self.parts[u]
        rows = math.prod(int(np.abs(p.integer).sum(axis=1).max()) for p in parts)
        if int(np.abs(x).max(initial=0)) * rows >= INT_LIMIT // 2:
            raise DataError("the exact (lattice) release: the counts are beyond the int64 measurement's range")
        for i in present:
            x = np.moveaxis(np.moveaxis(x, i, -1) @ parts[i].integer.T, -1, i)
        return x

    def _release(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The least squares of the integers u_{U,S,T} (module docstring), assembled into the answers."""
        counts = integer_answers(values)
        m = counts.shape[0]
        components = self._components(self._block_noise(rng, m), m, cell_marginals(self.workload, counts))
        return np.concatenate(list(self._assemble(components, m)), axis=1)

    def _term_noise(self, rng: np.random.Generator, size: int) -> Iterator[np.ndarray]:
        return self._assemble(self._components(self._block_noise(rng, size), size, None), size)

    # --------------------------------------------------------------- errors
    def _block_weights(self, u: Block) -> dict[Subset, float]:
        """κ_T²/ν_{U,T} of block u's components at its discrete Laplace variances."""
        return lattice_variance_weights(self.block_kappa[u], self.block_theta[u], self.split.algebra, self.blocks[u])

    def _variances(self) -> np.ndarray:
        """Var Z_i per answer: the blocks' ANOVA variances (independent blocks add)."""
        return sum(anova_cell_variances(self.split, self._ls, self.workload, self._block_weights(u),
                                        [p.covariance for p in self.parts[u]]) for u in self.blocks)

    def _expected_l2(self, workload: np.ndarray | None) -> float | None:
        if workload is not None:
            return None
        return float(sum(self._block_error(u, self._block_weights(u)) for u in self.blocks))


__all__ = ["KroneckerLaplaceBlocks", "block_plan", "centred_factor", "summed_positions"]
