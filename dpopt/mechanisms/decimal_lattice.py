r"""A ``linear`` query with decimal weights measured exactly on a scaled lattice.

The spec's weights count as the decimals written (:func:`dpopt.core.decimals.written`), so W = M/D with M an
integer matrix and D the least common denominator of the entries (:func:`dpopt.domain.queries.decimal_scale`,
D ≤ 2^20). On whole counts x the scaled answers k = D·Wx = Mx are integers and neighbouring ones differ by the
integer vectors MΔ. The measurement is

.. math:: \tilde y = Mx + \eta, \quad \eta \sim N_\mathbb{Z}(0, \sigma_\mathbb{Z}^2)^d,
          \qquad \text{released as } \tilde y / D \ \text{(post-processing)},

with σ_ℤ² ≥ D²σ² (:func:`~dpopt.mechanisms.lattice.target_lattice_variance` at scale D: the dyadic rounding under
ρ-zCDP, the certified GDP slope under μ-GDP and (ε, δ)). Its privacy is the isotropic lattice check at the integer
sensitivity Δ_D² = max ‖MΔ‖² = D²Δ₂² (:func:`~dpopt.mechanisms.lattice.lattice_isotropic_check`; Canonne, Kamath &
Steinke 2020, Theorem 14, and the certified slope), derived on the integer matrix M by the sensitivity layer
(:func:`dpopt.sensitivity.plain.derive_plain`), so no rounding of the weights enters it. The released noise η/D has
variance Var N_ℤ(0, σ_ℤ²)/D² per coordinate; its ratio to σ² is stated as ``exact_cost``.

The release recovers k exactly from the floating answers (:func:`scaled_answers`): dpopt computes a decimal
linear query's answers as k/D correctly rounded from the integers k = Mh
(:meth:`dpopt.domain.queries.CountingQuery.answers`), and from such a value a = fl(k/D) with |k| ≤ 2^51,
fl(a·D) is within |k|·2u ≤ 1/4 of k (u = 2^-53), so rounding gives k; no other integer k' has fl(k'/D) = a (they
would differ by at most 1/4). An answer that is not of that form is refused (a DataError), never rounded.

``dpopt verify`` re-derives D and Δ_D² from the spec (:func:`decimal_scope_check`) and re-checks the privacy at
the recorded σ_ℤ² and Δ_D²: a forged ``lattice_scale``, ``lattice_l2_squared`` or ``lattice_sigma2`` fails.
Scope: no invariants; a privacy unit's Δ_D² is the person-level one of M (the sensitivity layer derives both);
every metric (``test_power`` of an alternative on the decimal lattice: :func:`scaled_utility`).

**pDP.** The loss of ỹ = k + η under a move of k by the integer vector MΔ is that of the counts' lattice with the
move MΔ (:mod:`dpopt.mechanisms.lattice_pdp`), and the release ỹ/D is a bijection of ỹ, so it keeps that loss:
σ_ℤ² is bisected on the exact pDP level of the move patterns of the shifts D·WΔ (:meth:`DecimalScale.integer_shifts`)
from D²σ², and checked on them.

**ci_volume.** The discrete law's region for the d i.i.d. coordinates of η (:func:`~dpopt.mechanisms.lattice.
lattice_inference`), {θ : Σ_i (ỹ_i − Dθ_i)² ≤ σ_ℤ² r}, has the same proven coverage for θ = Wx, and its volume in
the released units is the lattice region's times D^-d.

``gaussian_optimal`` measures the same integers k = D·Wx with its integer strategy (l2 and max_variance): it
records D here too, takes the shifts D·WΔ of k from :meth:`DecimalScale.integer_shifts` and is checked by
:func:`scale_check` (D and Δ_D² re-derived, no isotropic σ).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from fractions import Fraction

import numpy as np

from dpopt.core.checks import Check
from dpopt.core.decimals import written
from dpopt.domain.queries import MAX_DECIMAL_SCALE, MAX_SCALED_ANSWER, CountingQuery
from dpopt.errors import DataError
from dpopt.mechanisms.base import UtilityValue
from dpopt.mechanisms.exact_cost import EXACT_COST_KEY, same_cost
from dpopt.mechanisms.lattice import (
    EXACT_TARGETS,
    GDP_TARGETS,
    exact_refusal,
    lattice_isotropic_check,
    target_lattice_variance,
)
from dpopt.mechanisms.lattice_pdp import lattice_pdp_check
from dpopt.privacy.discrete_gaussian_gdp import MAX_SIGMA2
from dpopt.problem import Problem
from dpopt.sensitivity.plain import derive_plain
from dpopt.sensitivity.space import SensitivitySpace, exact_norms
from dpopt.spec.models import Privacy, Utility

NOT_COUNTS = "the query's answers are not integer counts"
"""Why a query keeps off the unit lattice (:func:`~dpopt.mechanisms.lattice.exact_refusal`)."""

DECIMAL_LAW_NOTE = ("no noise law stated on the decimal lattice: the released noise η/D lives on (1/D)ℤ "
                    "(its variance and tails are the discrete Gaussian's, scaled)")

SPACE_TOLERANCE = Fraction(1, 10**9)
"""Relative agreement required between D² times a space's l2² (of the float weights) and the recorded integer
sensitivity Δ_D²: the privacy check is of the release whose space it is given (a stacked or other space fails)."""


@dataclass(frozen=True)
class DecimalScale:
    """The decimal lattice of a linear query: D and the integer sensitivity Δ_D² = max ‖D·WΔ‖² of its moves."""

    scale: int
    l2_squared: Fraction

    def parameters(self) -> dict:
        """The certificate's keys: ``lattice_scale`` (D) and ``lattice_l2_squared`` (Δ_D², exact)."""
        return {"lattice_scale": self.scale, "lattice_l2_squared": str(self.l2_squared)}

    def record(self, cost: dict) -> dict:
        """:meth:`parameters` and, unless its ratio is 1, the measurement's cost of exactness under ``exact_cost``
        (:func:`~dpopt.mechanisms.exact_cost.exact_cost`; ``dpopt verify`` re-derives it)."""
        return self.parameters() | ({} if cost["ratio"] == 1.0 else {EXACT_COST_KEY: cost})

    @classmethod
    def from_parameters(cls, parameters: dict) -> DecimalScale | None:
        """The recorded scale, or None when the parameters have no ``lattice_scale``.

        Raises
        ------
        ValueError
            A scale that is not a whole number of at least 2, or a malformed sensitivity.
        """
        scale = parameters.get("lattice_scale")
        if scale is None:
            return None
        if isinstance(scale, bool) or not isinstance(scale, int) or scale < 2:
            raise ValueError(f"lattice_scale {scale!r} (a whole number ≥ 2)")
        return cls(scale, Fraction(parameters["lattice_l2_squared"]))

    def privacy_check(self, space: SensitivitySpace, sigma2: Fraction, privacy: Privacy) -> Check:
        """:func:`~dpopt.mechanisms.lattice.lattice_isotropic_check` at Δ_D² against σ_ℤ² (under pDP
        :func:`~dpopt.mechanisms.lattice_pdp.lattice_pdp_check` on the integer shifts D·WΔ, :meth:`integer_shifts`:
        the counts' pDP path on the scaled space), holding only when the
        recorded Δ_D² belongs to ``space``: D² times its l2² (of the float weights) within :data:`SPACE_TOLERANCE`
        (the check is of the release whose space it is given; a stacked or other space fails it)."""
        mine = Fraction(space.l2_squared) * self.scale * self.scale
        own = abs(mine - self.l2_squared) <= SPACE_TOLERANCE * self.l2_squared
        if privacy.definition == "pdp":
            try:
                check = lattice_pdp_check(self.pdp_shifts(space), sigma2, privacy)
            except ValueError as exc:
                check = Check("privacy", "pDP level of the discrete Gaussian on the decimal lattice", False, str(exc))
        else:
            check = lattice_isotropic_check(self.l2_squared, sigma2, privacy)
        return Check(check.claim, f"decimal lattice D = {self.scale}, integer sensitivity Δ_D² = {self.l2_squared} "
                     "(D²·Δ₂² of the space agrees to 10⁻⁹): " + check.method, check.passed and own,
                     check.detail + ("" if own else f"; D²·Δ₂² = {float(mine):.17g} is not Δ_D²"))

    def pdp_shifts(self, space: SensitivitySpace) -> np.ndarray:
        """:meth:`integer_shifts` of a space that lists every neighbouring difference: the pDP level is summed per
        move, so the extreme contributions a privacy unit lists (enough for a convex norm) do not do.

        Raises
        ------
        ValueError
            A space that does not list every difference, or as :meth:`integer_shifts`.
        """
        if not space.complete:
            raise ValueError("the neighbouring differences are not all listed (a privacy unit whose contributions "
                             "are too many to list states its extreme ones only; the pDP level is summed per move)")
        return self.integer_shifts(space)

    def integer_shifts(self, space: SensitivitySpace) -> np.ndarray:
        """The integer shifts D·WΔ of the scaled answers k = D·Wx (int64 rows): the space's listed generators WΔ
        times D, rounded, where each is within 10⁻⁶ (relative) of its integer and the largest ‖D·WΔ‖² is the
        recorded Δ_D² exactly (in Python integers), so they are the moves of the spec's integer matrix D·W
        (:func:`lattice_scale` re-derives D and Δ_D² from the spec).

        Raises
        ------
        ValueError
            A generator that is not a point of the decimal lattice, or shifts whose largest norm is not Δ_D².
        """
        scaled = np.atleast_2d(np.asarray(space.vectors(), dtype=float)) * float(self.scale)
        k = np.rint(scaled)
        if not np.all(np.abs(scaled - k) <= 1e-6 * np.maximum(1.0, np.abs(k))) or np.abs(k).max(initial=0) > 2.0**62:
            raise ValueError(f"the neighbouring differences times D = {self.scale} are not integer vectors")
        shifts = k.astype(np.int64)
        largest = max((sum(int(s) * int(s) for s in row) for row in shifts.tolist()), default=0)
        if largest != self.l2_squared:
            raise ValueError(f"the largest ‖D·WΔ‖² of the space is {largest}, not the recorded Δ_D² = "
                             f"{self.l2_squared}")
        return shifts

    def scaled_space(self, space: SensitivitySpace) -> SensitivitySpace:
        """The sensitivity space of the scaled answers k = D·Wx: the integer shifts D·WΔ of ``space``
        (:meth:`integer_shifts`, which ties them to the recorded Δ_D²) with their exact norms, the same span (D ≠ 0)
        and completeness; computed once per space and lattice (:meth:`~dpopt.sensitivity.space.SensitivitySpace.memo`). The counts families (discrete Laplace, staircase, query scaling) run their integer
        machinery on it: its move patterns are integer.

        Raises
        ------
        ValueError
            The space does not list its differences, or they are not points of the decimal lattice (as
            :meth:`integer_shifts`).
        """
        def scaled() -> SensitivitySpace:
            shifts = self.integer_shifts(space).astype(float)
            l1, l2_squared, linf = exact_norms(shifts)
            # a stated hull (a subset of the listed moves, :meth:`SensitivitySpace.hull_vectors`) scales with them
            hull = np.rint(space.hull_vectors() * float(self.scale)) if space.states_hull else None
            return replace(space, l1=l1, l2_squared=l2_squared, linf=linf, _vectors=lambda: shifts, _extremes=None,
                           _hull=None if hull is None else lambda: hull,
                           method=f"{space.method}; times D = {self.scale} (the decimal lattice's integer shifts)")

        return space.memo(f"decimal lattice {self.scale}, {self.l2_squared}", scaled)

    def note(self, noise: str = "the discrete Gaussian noise") -> str:
        """The certificate's sentence on the scaled measurement (``noise``: the integer noise added to D·Wx)."""
        return (f"decimal lattice: the answers Wx are measured as the integers D·Wx (D = {self.scale}, the least "
                f"common denominator of the query's decimal weights) plus {noise}, and released "
                f"divided by D (post-processing); privacy at the integer sensitivity Δ_D² = {self.l2_squared}")


def scaled_utility(utility: Utility, scale: int) -> Utility:
    r"""The spec's utility restated for the integers k = D·Wx, whose noise z is D times the released noise z/D.

    Each metric of the release (k + z)/D is the scaled design's at the restated options, divided by D to
    :func:`unit_power`:

    - ``usefulness``: |z/D| ≤ γ iff |z| ≤ γD (γ times D);
    - ``test_power``: the hypotheses θ₀ and θ₀ + a on the release are Dθ₀ and Dθ₀ + Da on k + z, and y ↦ y/D is a
      bijection, so the most powerful tests correspond and have the same power (a times D, exactly: the
      alternative's decimals as written, :func:`~dpopt.core.decimals.written`, times D; a whole number when a lies
      on the decimal lattice (1/D)ℤ, the shift the discrete law's test needs);
    - ``kl`` and ``renyi``: the release max(c + z/D, τ) of a prior count c is (1/D)·max(Dc + z, Dτ), so the prior
      and the floor times D give r' = D·r and C' = Σ Dc = D·C: the proportions p = c/C and q = r/C, and with them
      both divergences, are the same draw by draw (prior and floor times D);
    - ``mallows``: W_p(Dμ, Dν) = D·W_p(μ, ν) (the map x ↦ Dx carries couplings to couplings and scales every
      distance by D), so the distance between the prior values times D and their scaled release is D times the
      release's (prior times D, power 1).
    """
    update: dict = {}
    if utility.gamma is not None:
        update["gamma"] = utility.gamma * scale
    if utility.alternative is not None:
        update["alternative"] = scaled_shift(utility.alternative, scale)
    if utility.prior is not None:
        update["prior"] = [float(written(c) * scale) for c in utility.prior]
    if utility.floor is not None:
        update["floor"] = float(written(utility.floor) * scale)
    return utility.model_copy(update=update) if update else utility


def scaled_shift(alternative, scale: int) -> list[float]:
    """A ``test_power`` alternative a in units of k = D·Wx: D·a exactly (the decimals of a as written,
    :func:`~dpopt.core.decimals.written`, times D), so a point of the decimal lattice (1/D)ℤ gives whole numbers."""
    return [float(written(float(a)) * scale) for a in alternative]


def unit_power(metric: str, rank: int) -> int:
    """The power of D by which the scaled design's ``metric`` exceeds the release's (:func:`scaled_utility`; the
    noise z/D: E‖WZ‖² and max Var divided by D², E‖Z‖₁ by D, a region's volume of dimension ``rank`` by D^rank)."""
    return {"l2": 2, "max_variance": 2, "l1": 1, "usefulness": 0, "ci_volume": rank, "test_power": 0, "kl": 0,
            "renyi": 0, "mallows": 1}[metric]


def in_answer_units(value: UtilityValue, scale: int, rank: int) -> UtilityValue:
    """A scaled design's predicted utility in answer units: divided by D to :func:`unit_power`."""
    power = unit_power(value.metric, rank)
    how = value.method + ("" if power == 0 else f"; of the integers k = D·Wx, divided by D^{power} (D = {scale})")
    if value.log_value is not None:  # a volume, in the log domain: log D^power subtracted
        shift = power * math.log(scale)
        log_ci = None if value.log_ci is None else (value.log_ci[0] - shift, value.log_ci[1] - shift)
        return UtilityValue.volume(value.log_value - shift, how, log_ci)
    factor = float(scale) ** power
    ci = None if value.ci is None else (value.ci[0] / factor, value.ci[1] / factor)
    return UtilityValue(value.metric, value.value / factor, how, ci)


def lattice_scale(problem: Problem) -> DecimalScale | str:
    """The decimal lattice of the problem's linear query (:class:`DecimalScale`), or why there is none."""
    spec, query = problem.spec, problem.query
    if not isinstance(query, CountingQuery) or query.user_matrix is None:
        return "not a linear query"
    if spec.invariants:
        return "the decimal lattice serves no invariants"
    found = query.scale
    if found is None:
        return (f"the weights' least common denominator exceeds {MAX_DECIMAL_SCALE} (2^20), or D·W an entry "
                "beyond 2^31")
    scale, integer = found
    if scale == 1:
        return "whole weights (the unit lattice)"
    if spec.data.n is not None and spec.data.n * int(np.abs(integer).max()) > MAX_SCALED_ANSWER:
        return f"D·Wx could exceed 2^51 at n = {spec.data.n}"
    scaled = derive_plain(spec, replace(query, user_matrix=integer.astype(float)))
    return DecimalScale(scale, Fraction(scaled.l2_squared))


def counts_lattice(problem: Problem) -> DecimalScale | str:
    """The decimal lattice on which a counts family (``laplace``, ``staircase``, ``query_scaling``) measures a
    non-counting linear query, running its counts path on :func:`~dpopt.mechanisms.decimal_counts.scaled_problem`, or why it keeps the
    floating-point sampler (a reason that starts with :data:`NOT_COUNTS`). Besides :func:`lattice_scale`'s scope:
    the neighbouring differences must be listed (their integer move patterns are the privacy checks' input). The
    metrics map to the integers k as :func:`scaled_utility` derives (``query_scaling``'s region and test: the
    volume times D^-r, the alternative times D)."""
    found = lattice_scale(problem)
    if isinstance(found, DecimalScale) and problem.space.listed() is None:
        found = "the neighbouring differences are too many to list"
    return f"{NOT_COUNTS}; no decimal lattice: {found}" if isinstance(found, str) else found


def scale_check(problem: Problem, scale: DecimalScale) -> Check:
    """``dpopt verify``'s check of a recorded decimal lattice without an isotropic σ (``gaussian_optimal``'s
    integer strategy): D and Δ_D² re-derived from the spec (:func:`lattice_scale`) equal the recorded ones."""
    again = lattice_scale(problem)
    detail = (again if isinstance(again, str) else f"D = {again.scale}, Δ_D² = {again.l2_squared} re-derived vs "
              f"D = {scale.scale}, Δ_D² = {scale.l2_squared} recorded")
    return Check("mechanism.lattice", "exact measurement on the decimal lattice: D (the least common denominator "
                 "of the query's decimal weights) and the integer sensitivity Δ_D² re-derived from the spec",
                 isinstance(again, DecimalScale) and again == scale, detail)


def decimal_lattice(problem: Problem, sigma: float) -> DecimalScale | str:
    """The decimal lattice on which the isotropic Gaussian design N(0, σ²I) of a non-counting linear query
    measures exactly, or why it keeps the floating-point sampler (a reason that starts with :data:`NOT_COUNTS`)."""
    spec = problem.spec
    definition = spec.privacy.definition
    reason = None
    if definition not in EXACT_TARGETS and definition != "pdp":
        reason = exact_refusal(definition, True)
    found = lattice_scale(problem) if reason is None else reason
    if isinstance(found, str):
        return f"{NOT_COUNTS}; no decimal lattice: {found}"
    if target_lattice_variance(Fraction(sigma) ** 2, found.scale, definition) is None:
        return (f"{NOT_COUNTS}; no decimal lattice: D²σ² (D = {found.scale}) is outside the exact sampler's range "
                "(2^-9 to 2^60)" + (f", or above {MAX_SIGMA2} where the GDP slope is certified"
                                    if definition in GDP_TARGETS else ""))
    return found


def scaled_answers(values: np.ndarray, scale: int) -> np.ndarray:
    """The integers k = D·Wx of answers computed as k/D correctly rounded (module docstring), as int64.

    Raises
    ------
    DataError
        An answer that is not fl(k/D) for an integer |k| ≤ 2^51.
    """
    values = np.asarray(values, dtype=float)
    k = np.rint(values * float(scale))
    if (not np.all(np.isfinite(k)) or np.any(np.abs(k) > MAX_SCALED_ANSWER)
            or np.any(k / float(scale) != values)):
        raise DataError(f"the exact (decimal lattice) release needs each answer as k/{scale} correctly rounded for "
                        "a whole number |k| ≤ 2^51, as dpopt computes a decimal linear query from whole counts "
                        "(`problem.query.answers(counts)`); got another number (set `sampler: floating_point` to "
                        "use the floating-point noise)")
    return k.astype(np.int64)


def decimal_scope_check(problem: Problem, scale: DecimalScale, sigma: float, cost: dict,
                        stated: dict | None) -> Check:
    """``dpopt verify``'s check of a decimal lattice: D and Δ_D² re-derived from the spec
    (:func:`decimal_lattice`) equal the recorded ones, and the stated ``exact_cost`` is the re-derived one
    (absent only when its ratio is 1)."""
    return _scope_check(decimal_lattice(problem, sigma), scale, cost, stated)


def counts_scope_check(problem: Problem, scale: DecimalScale, cost: dict | None, stated: dict | None) -> Check:
    """``dpopt verify``'s check of a counts family's decimal lattice: D and Δ_D² re-derived from the spec
    (:func:`counts_lattice`) equal the recorded ones, and the stated ``exact_cost`` is ``cost``, recomputed from the
    recorded parameters (absent only when its ratio is 1). ``cost`` None: the family's cost is re-derived with
    its recorded laws (the staircase's ``exact_cost``, compared by ``mechanism.parameters``)."""
    return _scope_check(counts_lattice(problem), scale, cost, stated)


def _scope_check(again: DecimalScale | str, scale: DecimalScale, cost: dict | None, stated: dict | None) -> Check:
    same = isinstance(again, DecimalScale) and again == scale
    if cost is None:
        costs, stated_text = True, "re-derived with the recorded laws"
    else:
        costs = same_cost(stated, cost, rel_tol=1e-12) if stated is not None else cost["ratio"] == 1.0
        stated_text = (f"{cost['ratio']:.9g} re-derived vs {None if stated is None else stated.get('ratio')!r} "
                       "stated")
    detail = (again if isinstance(again, str) else
              f"D = {again.scale}, Δ_D² = {again.l2_squared} re-derived vs D = {scale.scale}, Δ_D² = "
              f"{scale.l2_squared} recorded; exact_cost {stated_text}")
    return Check("mechanism.lattice", "exact measurement on the decimal lattice: D (the least common denominator "
                 "of the query's decimal weights) and the integer sensitivity Δ_D² re-derived from the spec, and "
                 "the cost of exactness re-derived", same and costs, detail)
