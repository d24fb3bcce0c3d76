r"""The staircase mechanism (Geng & Viswanath 2016): the optimal pure-ε additive noise.

The staircase law of parameters ε₀ (per step), step width Δ₀ and g ∈ [0, 1]
(:mod:`dpopt.noise.staircase`, its density, moments and sampler) has ln f dropping by ε₀
exactly at ±(g + k)Δ₀, Δ₀ apart on each side: a shift by m changes ln f(x) by at most
ε₀·⌈m/Δ₀⌉, attained for some x, so one coordinate with shift |s| ≤ Δ₀ is ε₀-DP.

**Vector queries (derived).** With i.i.d. staircase noise per coordinate the privacy loss
of a difference vector v is Σ_i ε₀⌈|v_i|/Δ₀⌉ (independent coordinates; each worst case
is attainable simultaneously), so the exact guarantee is

.. math:: \varepsilon = \varepsilon_0 \max_{v\in S} \sum_i \lceil |v_i|/\Delta_0 \rceil .

It is *not* ε₀‖v‖₁/Δ₀ as for Laplace: a shift of 0.1Δ₀ costs a full ε₀. Budgeting the l1
norm like Laplace (ε₀ = ε, Δ₀ = Δ₁) would be ε·max‖v‖₀ — wrong as soon as a neighbour
moves two coordinates (a histogram under replace-one: 2ε). The design picks Δ₀ among the
distinct |v_i| divided by 1…4, sets ε₀ = ε/K(Δ₀), and the certificate re-checks
ε₀·K ≤ ε in exact rational arithmetic over every difference vector.

Costs (closed forms, per coordinate; G&V Thms 4–5 for the optima):

* E|X| and E X² in closed form (:class:`~dpopt.noise.staircase.StaircaseNoise`);
* l1-optimal g* = 1/(1 + e^{ε₀/2}), E|X| = Δ₀e^{ε₀/2}/(e^{ε₀} − 1);
* l2-optimal g* = −b/(1−b) + (b − 2b² + 2b⁴ − b⁵)^{1/3}/(2^{1/3}(1−b)²),
  E X² = Δ₀²(2^{−2/3}b^{2/3}(1+b)^{2/3} + b)/(1−b)²;
* usefulness P(|X| ≤ γ): g = γ/Δ₀ for γ ≤ Δ₀ (U = r(1−b)/(r + (1−r)b), r = γ/Δ₀), the
  optimum over *all* ε-DP additive noise (G&V: the staircase is optimal for symmetric
  costs increasing in |x|, here 1{|x| > γ}); a numerical search over g otherwise.

**(ε, δ), ρ-zCDP and μ-GDP targets (derived).** The generic conversions (ε₁-DP ⇒ the target through
randomized response, the worst ε₁-DP mechanism) are loose for the staircase: its privacy loss lives
on ε₀ℤ, and its exact profile, Rényi divergences and trade-off function follow from a finite pmf
(:mod:`dpopt.privacy.staircase_profile`). When every difference vector is listed, ``design`` starts
from the generic ε₀ and raises it (bisection, with the metric-optimal g at each ε₀) to the largest ε₀
whose exact δ(ε) meets (ε, δ), whose Kullback–Leibler limit meets ρ, or whose trade-off function
lies above G_μ, over every move; the certificate re-computes the profile for every move pattern in 60
digits, certifies D_α ≤ ρα over all orders on Arb balls, or T ≥ G_μ by branch and bound (the generic
conversion is the fallback). Moves over several coordinates
gain most: a replace-one histogram's two one-step coordinates add their divergences instead of
costing one two-step loss.

Density, tail, moments and sampler: :mod:`dpopt.noise.staircase`.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from dpopt._lazy import lazy_module
from dpopt.core.checks import Check
from dpopt.core.decimals import float_below
from dpopt.core.rounding import nudge_until
from dpopt.errors import CalibrationError, SpecError
from dpopt.mechanisms.base import Mechanism, UtilityValue
from dpopt.mechanisms.iid_floor import symmetric_iid_bound
from dpopt.noise.law import ProductLaw
from dpopt.noise.marginal import NoiseObjectMarginal
from dpopt.noise.prior_metrics import kl_divergence, mallows_distance, renyi_divergence
from dpopt.noise.staircase import StaircaseNoise
from dpopt.privacy.pure_conversion import PURE_TARGETS, pure_epsilon_for, pure_privacy_check
from dpopt.privacy.gdp_check import gdp_margin, mu_of_tradeoff
from dpopt.privacy import staircase_search as search
from dpopt.privacy.staircase_profile import (
    LossPMFTradeOff,
    staircase_delta_mp,
    staircase_kl,
    staircase_move_pmf,
    staircase_renyi_ball,
)
from dpopt.privacy.zcdp import renyi_zcdp_holds
from dpopt.problem import Problem
from dpopt.sensitivity.patterns import ShiftPattern, coordinatewise_reason, move_multisets, shift_pattern
from dpopt.sensitivity.space import SensitivitySpace
from dpopt.spec.models import Privacy, Utility

mpmath = lazy_module("mpmath")
optimize = lazy_module("scipy.optimize")

PRIOR_METRICS = ("kl", "renyi", "mallows")
"""Metrics that need a prior (``utility.prior``), computed by quadrature of the noise tail."""


# ------------------------------------------------------------ optimal steps
def l1_optimal_g(epsilon0: float) -> float:
    """g* = 1/(1 + e^{ε/2}) (Geng & Viswanath 2016, Thm 4)."""
    return 1.0 / (1.0 + math.exp(epsilon0 / 2.0))


def l2_optimal_g(epsilon0: float) -> float:
    """g* = −b/(1−b) + (b − 2b² + 2b⁴ − b⁵)^{1/3} / (2^{1/3}(1−b)²), b = e^{−ε} (G&V, Thm 5)."""
    b = math.exp(-epsilon0)
    return -b / (1 - b) + (b - 2 * b**2 + 2 * b**4 - b**5) ** (1 / 3) / (2 ** (1 / 3) * (1 - b) ** 2)


def _best_g(value, higher: bool, coarse: int = 41) -> float:
    grid = np.linspace(0.0, 1.0, coarse)
    vals = np.array([value(g) for g in grid])
    vals = -vals if higher else vals
    i = int(np.argmin(vals))
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, coarse - 1)]
    res = optimize.minimize_scalar(lambda g: -value(g) if higher else value(g), bounds=(lo, hi),
                                   method="bounded", options={"xatol": 1e-9})
    return float(res.x) if res.fun < vals[i] else float(grid[i])


def usefulness_optimal_g(epsilon0: float, step: float, gamma: float) -> float:
    """g = γ/Δ₀ when γ ≤ Δ₀ (G&V optimality for the 0/1 loss); a search over g otherwise."""
    if gamma <= step:
        return gamma / step
    return _best_g(lambda g: StaircaseNoise(epsilon0, step, g).usefulness(gamma), higher=True)


def metric_optimal_g(epsilon0: float, step: float, utility: Utility) -> tuple[float, str]:
    """The g-policy for a metric, and its name (recorded in the certificate)."""
    metric = utility.metric
    if metric == "l1":
        return l1_optimal_g(epsilon0), "l1-optimal"
    if metric in ("l2", "max_variance"):
        return l2_optimal_g(epsilon0), "l2-optimal"
    if metric == "usefulness":
        return usefulness_optimal_g(epsilon0, step, utility.gamma), f"usefulness-optimal at γ = {utility.gamma:g}"
    if metric == "mallows":
        order = utility.order
        if order in (1, 2):
            g = l1_optimal_g(epsilon0) if order == 1 else l2_optimal_g(epsilon0)
            return g, f"l{int(order)}-optimal (the Mallows bound E|X|^p)"
        return _best_g(lambda g: StaircaseNoise(epsilon0, step, g).abs_moment(order), higher=False), \
            f"E|X|^{order:g}-optimal (the Mallows bound)"
    # kl / renyi: to second order in the noise both are proportional to E X² (each cell
    # contributes ≈ E Z²/(2c) to the KL), so the l2-optimal step is used; a search over g
    # would cost one quadrature of the staircase tail per trial
    return l2_optimal_g(epsilon0), f"l2-optimal (second-order proxy for {metric})"


def prior_metric(noise, utility: Utility) -> float:
    """A prior-dependent metric (kl, renyi, mallows) of one coordinate law, over the prior."""
    if utility.metric == "kl":
        return kl_divergence(noise, utility.prior, utility.floor)
    if utility.metric == "renyi":
        return renyi_divergence(noise, utility.prior, utility.floor, utility.order)
    return mallows_distance(noise, utility.prior, utility.order)


def check_prior(utility: Utility, dimension: int) -> None:
    """The prior of a prior-dependent metric must have one entry per coordinate."""
    if utility.metric in PRIOR_METRICS and len(utility.prior) != dimension:
        raise SpecError("utility.prior", f"has {len(utility.prior)} entries but the query has dimension {dimension}")


# -------------------------------------------------------------- exact budget
def steps_per_shift(pattern: ShiftPattern, step: float) -> int:
    """K(Δ₀) = max_v Σ_i ⌈|v_i|/Δ₀⌉, exactly (Fractions)."""
    d0 = Fraction(step)
    return int(pattern.worst([math.ceil(m / d0) for m in pattern.magnitudes]))


def _candidate_steps(pattern: ShiftPattern) -> list[float]:
    if len(pattern.counts) == 1 and pattern.counts.sum() == 1:
        return [float(pattern.magnitudes[0])]  # one coordinate moves: Δ₀ = Δ is optimal
    mags = pattern.magnitudes[-16:]
    return sorted({float(m) / j for m in mags for j in (1, 2, 3, 4)}, reverse=True)  # ties: the widest step


def _calibrate(pattern: ShiftPattern, epsilon: float, step: float) -> tuple[float, float, int]:
    """(ε₀, Δ₀, K) with ε₀·K(Δ₀) ≤ ε exactly; Δ₀ nudged up so that rounding never adds a step."""
    target = steps_per_shift(pattern, step)
    step = nudge_until(step, lambda s: steps_per_shift(pattern, s) <= target, up=True)
    k = steps_per_shift(pattern, step)
    eps0 = nudge_until(epsilon / k, lambda e: Fraction(e) * k <= Fraction(epsilon), up=False)
    return eps0, step, k


MAX_MOVES = 64
"""Distinct move patterns above which (ε, δ), zCDP and GDP targets keep the generic conversion."""

_RAISE_BISECTIONS = 40
"""Bisection steps raising ε₀ on the exact profile (relative precision about 2⁻⁴⁰ of the bracket)."""


def exact_moves(space: SensitivitySpace) -> list[tuple[Fraction, ...]] | None:
    """The distinct multisets {|v_i| ≠ 0} of the difference vectors (at most :data:`MAX_MOVES`), or None
    unless the space lists every one of them: a mean's or a sum's space holds a continuum of shifts and
    lists only its extremes, and the staircase's δ(ε) and D_α are not known to be monotone in the shift
    (its pure loss ε₀⌈m/Δ₀⌉ is, which is why the generic conversion stays valid there)."""
    return move_multisets(space, MAX_MOVES)


def exact_delta(epsilon: float, epsilon0: float, step: float, g: float, moves) -> tuple[mpmath.mpf, tuple]:
    """max over ``moves`` of the exact δ(ε) (:func:`~dpopt.privacy.staircase_profile.staircase_delta_mp`),
    and the worst move."""
    return max(((staircase_delta_mp(epsilon, epsilon0, step, g, m), m) for m in moves), key=lambda t: t[0])


def exact_zcdp(rho: float, epsilon0: float, step: float, g: float, moves) -> tuple[bool, str]:
    """D_α ≤ ρα for every order and every move, from each move's exact pmf
    (:func:`~dpopt.privacy.staircase_profile.staircase_renyi_ball`, certified on intervals of orders by
    :func:`~dpopt.privacy.zcdp.renyi_zcdp_holds`; the largest loss of a move is ε₀ max j)."""
    detail = ""
    for move in moves:
        law = staircase_move_pmf(epsilon0, step, g, move)
        top = Fraction(epsilon0) * max(j for j, mass in law.items() if mass > 0)
        passed, detail = renyi_zcdp_holds(staircase_renyi_ball(law, epsilon0), top, rho)
        if not passed:
            return False, f"move |v| = {tuple(float(t) for t in move)}: {detail}"
    return True, f"{len(moves)} move pattern(s); the last: {detail}"


def exact_gdp(mu: float, epsilon0: float, step: float, g: float, moves) -> tuple[bool, str]:
    """T ≥ G_μ for every move, T the piecewise-linear trade-off of the move's exact loss pmf
    (:class:`~dpopt.privacy.staircase_profile.LossPMFTradeOff`), certified by the branch and bound of
    :func:`~dpopt.privacy.gdp_check.gdp_margin`."""
    detail = ""
    for move in moves:
        margin = gdp_margin(LossPMFTradeOff(staircase_move_pmf(epsilon0, step, g, move), epsilon0), mu)
        detail = f"{margin.method}; μ observed {margin.mu_observed:.17g}"
        if not margin.passed:
            return False, f"move |v| = {tuple(float(t) for t in move)}: {detail}"
    return True, f"{len(moves)} move pattern(s); the last: {detail}"


_UNDECIDED = {"approx": 1e-11, "zcdp": 1e-11, "gdp": 1e-9}
"""Relative distance to the target within which a double-precision profile value does not decide a step of
the search (:func:`_profile_test` with ``exact``): the 60-digit profile does. The double-precision δ(ε) and
KL sums carry relative errors near 10⁻¹⁵ (:mod:`dpopt.privacy.staircase_search`; measured against the
60-digit profile in tests/test_staircase_profile.py); the μ estimate maximises over α, its margin is wider."""


def _profile_test(step: float, moves, privacy: Privacy, utility: Utility, exact: bool):
    """ε₀ ↦ does the staircase (ε₀, Δ₀ = ``step``, the metric-optimal g) meet the target over every move?

    (ε, δ): max_v δ_v(ε) ≤ δ (the certificate's own test, :func:`exact_delta`, at ε and δ read as the
    decimals written, :func:`~dpopt.core.decimals.float_below`). ρ-zCDP: the Kullback–Leibler limit
    max_v E_P[L] ≤ ρ(1 − 10⁻⁸) (where sup_α D_α/α sits for these pmfs, as for randomized response); μ-GDP:
    the estimate max_v μ(T_v) ≤ μ(1 − 10⁻⁹) (:func:`~dpopt.privacy.gdp_check.mu_of_tradeoff`). Each value
    is first computed in double precision; with ``exact`` the 60-digit pmfs decide whenever it lies within
    :data:`_UNDECIDED` (relative) of the target, so the answers are those of the 60-digit profile.
    """
    target, definition = privacy.parameters, privacy.definition
    if definition == "approx":
        epsilon, bound = float_below(target["epsilon"]), float_below(target["delta"])

        def fast(e0, g):
            return max(search.delta(epsilon, e0, search.move_pmf(e0, step, g, m)) for m in moves)

        def slow(e0, g):
            return exact_delta(epsilon, e0, step, g, moves)[0] <= bound
    elif definition == "gdp":
        bound = target["mu"] * (1 - 1e-9)

        def fast(e0, g):
            return max(mu_of_tradeoff(LossPMFTradeOff.in_double_precision(search.move_pmf(e0, step, g, m), e0))
                       for m in moves)

        def slow(e0, g):
            return max(mu_of_tradeoff(LossPMFTradeOff(staircase_move_pmf(e0, step, g, m), e0))
                       for m in moves) <= bound
    else:
        bound = target["rho"] * (1 - 1e-8)

        def fast(e0, g):
            return max(search.kl(e0, search.move_pmf(e0, step, g, m)) for m in moves)

        def slow(e0, g):
            return max(staircase_kl(staircase_move_pmf(e0, step, g, m), e0) for m in moves) <= bound

    def holds(e0: float) -> bool:
        g, _ = metric_optimal_g(e0, step, utility)
        value = fast(e0, g)
        if exact and abs(value - bound) <= _UNDECIDED[definition] * bound:
            return bool(slow(e0, g))
        return value <= bound

    return holds


def _raise_epsilon0(epsilon0: float, step: float, moves, privacy: Privacy, utility: Utility,
                    exact: bool = True) -> float:
    """The largest ε₀ ≥ ``epsilon0`` (to 2⁻⁴⁰ of the bracket, by bisection) whose exact profile with the
    metric-optimal g meets the target over every move (:func:`_profile_test`); ``epsilon0`` (generic
    conversion) meets it already. Without ``exact`` every step is decided in double precision (a
    search among steps Δ₀); with it, as the 60-digit profile decides. Under ρ-zCDP and μ-GDP the result
    is kept only if :func:`exact_zcdp` or :func:`exact_gdp` certifies it; else ``epsilon0``.
    """
    holds = _profile_test(step, moves, privacy, utility, exact)
    lo, hi = epsilon0, 2.0 * epsilon0
    for _ in range(8):  # ε₀ at most 2⁸ times the generic one; δ(ε) → P[L > ε] as ε₀ grows
        if not holds(hi):
            break
        lo, hi = hi, 2.0 * hi
    else:
        return lo
    for _ in range(_RAISE_BISECTIONS):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if holds(mid) else (lo, mid)
    if not exact:
        return lo
    target = privacy.parameters
    g = metric_optimal_g(lo, step, utility)[0]
    if privacy.definition == "zcdp" and not exact_zcdp(target["rho"], lo, step, g, moves)[0]:
        return epsilon0
    if privacy.definition == "gdp" and not exact_gdp(float_below(target["mu"]), lo, step, g, moves)[0]:
        return epsilon0
    return lo


EXACT_TARGETS = ("approx", "zcdp", "gdp")
"""Targets for which the staircase is calibrated on its own exact privacy-loss distribution."""


class StaircaseMechanism(Mechanism):
    """i.i.d. staircase noise on each coordinate, ε₀ = ε / max_v Σ_i ⌈|v_i|/Δ₀⌉."""

    family = "staircase"
    title = "Staircase (Geng & Viswanath)"

    def __init__(self, epsilon0: float, step: float, g: float, dimension: int, policy: str = "user"):
        self.noise = StaircaseNoise(epsilon0, step, g)
        self.dimension = int(dimension)
        self.policy = policy

    @classmethod
    def supports(cls, problem: Problem) -> str | None:
        spec, space = problem.spec, problem.space
        if spec.privacy.definition not in PURE_TARGETS:
            return f"no conversion from ε-DP to a {spec.privacy.definition} target for staircase noise"
        if spec.utility.metric in ("ci_volume", "test_power"):
            return f"no '{spec.utility.metric}' prediction for staircase noise"
        return coordinatewise_reason(space)

    @classmethod
    def utility_bound(cls, problem: Problem) -> float | None:
        """Under ρ-zCDP and μ-GDP with every move listed, for ``l2`` (no workload or weights) and ``max_variance``:
        :func:`~dpopt.mechanisms.iid_floor.symmetric_iid_bound`. Every staircase design, continuous or on a lattice
        (ℤ, or (1/D)ℤ in answer units), adds i.i.d. noise symmetric about 0, so none meeting the target does better.
        None elsewhere (other targets and metrics; a sum's or mean's lattice measurement, whose design is cheap)."""
        return None if cls.supports(problem) is not None else symmetric_iid_bound(problem)

    @classmethod
    def design(cls, problem: Problem) -> StaircaseMechanism:
        return cls.design_with_value(problem)[0]

    @classmethod
    def design_with_value(cls, problem: Problem) -> tuple[StaircaseMechanism, float]:
        """The designed staircase and its predicted metric (the step Δ₀ with the best metric
        among the candidates, each with its metric-optimal g)."""
        spec, space = problem.spec, problem.space
        check_prior(spec.utility, space.dimension)
        pattern = shift_pattern(space)
        epsilon = pure_epsilon_for(spec.privacy)
        steps = _candidate_steps(pattern)
        if spec.utility.metric in PRIOR_METRICS:
            steps = [float(pattern.largest)]  # each prior metric evaluation is a quadrature
        moves = exact_moves(space) if spec.privacy.definition in EXACT_TARGETS else None
        metric = spec.utility

        def designed(step: float, exact: bool) -> tuple[float, StaircaseMechanism]:
            eps0, step0, _ = _calibrate(pattern, epsilon, step)
            if moves is not None:
                eps0 = _raise_epsilon0(eps0, step0, moves, spec.privacy, metric, exact)
            g, policy = metric_optimal_g(eps0, step0, metric)
            candidate = cls(eps0, step0, g, space.dimension, policy)
            return candidate.expected_utility(metric).value, candidate

        def rank(value: float) -> float:
            return -value if metric.metric == "usefulness" else value

        # each step searched in double precision; then, best first, again as the 60-digit profile decides (a
        # step whose raised ε₀ is not certified falls back to the generic one), until no step left can win
        found = sorted(((designed(step, exact=moves is None), step) for step in steps), key=lambda t: rank(t[0][0]))
        if not found:
            raise CalibrationError("no staircase step meets the target")
        if moves is None:
            return found[0][0][1], found[0][0][0]
        best = None
        for (value, _), step in found:
            if best is not None and rank(value) > rank(best[0]) + 1e-9 * abs(best[0]):
                break
            exact = designed(step, exact=True)
            if best is None or rank(exact[0]) < rank(best[0]):
                best = exact
        return best[1], best[0]

    @classmethod
    def from_parameters(cls, parameters: dict, space: SensitivitySpace) -> StaircaseMechanism:
        return cls(parameters["epsilon0"], parameters["step"], parameters["g"], space.dimension,
                   parameters.get("g_policy", "user"))

    @property
    def parameters(self) -> dict:
        return {"epsilon0": self.noise.epsilon0, "step": self.noise.step, "g": self.noise.g,
                "g_policy": self.policy}

    def noise_law(self) -> ProductLaw:
        """The law of the emitted noise, for the second route of ``dpopt verify`` (:mod:`dpopt.noise.law`)."""
        n = self.noise
        marginal = NoiseObjectMarginal(n, ("staircase", n.epsilon0, n.step, n.g), n.typical_scale, log_concave=False)
        return ProductLaw.iid(marginal, self.dimension, f"staircase^d (ε₀ = {n.epsilon0:.17g}, Δ₀ = {n.step:.17g}, "
                                                     f"g = {n.g:.17g})")

    def _sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return self.noise.sample(rng, (size, self.dimension))

    def _privacy_checks(self, space: SensitivitySpace, privacy: Privacy) -> list[Check]:
        reason = coordinatewise_reason(space)
        if reason is not None:
            return [Check("privacy", "staircase noise, per coordinate", False, reason)]
        moves = exact_moves(space) if privacy.definition in EXACT_TARGETS else None
        if moves is not None:
            exact = self._exact_profile_check(moves, privacy)
            if exact.passed:
                return [exact]
        k = steps_per_shift(shift_pattern(space), self.noise.step)
        total = Fraction(self.noise.epsilon0) * k
        return [pure_privacy_check(
            total, privacy,
            "exact rational product ε₀·max_v Σ_i ⌈|v_i|/Δ₀⌉ over every difference vector (ln f drops by ε₀ at "
            "step boundaries Δ₀ apart; Geng & Viswanath 2016; i.i.d. coordinates)",
            f"ε₀ = {self.noise.epsilon0:.17g}, Δ₀ = {self.noise.step:.17g}, K = {k}: ε₀K = {float(total):.17g}",
        )]

    def _exact_profile_check(self, moves, privacy: Privacy) -> Check:
        n, target = self.noise, privacy.parameters
        method = ("exact staircase privacy-loss distribution on ε₀ℤ (per coordinate from the piecewise-constant "
                  "density, convolved over the coordinates of each listed move; dpopt.privacy.staircase_profile)")
        if privacy.definition == "gdp":
            passed, detail = exact_gdp(float_below(target["mu"]), n.epsilon0, n.step, n.g, moves)
            return Check("privacy", f"{method}: its piecewise-linear trade-off function T ≥ G_μ",
                         passed, f"ε₀ = {n.epsilon0:.17g}, Δ₀ = {n.step:.17g}, g = {n.g:.17g}; {detail}")
        if privacy.definition == "zcdp":
            passed, detail = exact_zcdp(target["rho"], n.epsilon0, n.step, n.g, moves)
            return Check("privacy", f"{method}: its Rényi divergences D_α ≤ ρα, certified on intervals of orders "
                                    "(Arb balls)", passed, f"ε₀ = {n.epsilon0:.17g}, Δ₀ = {n.step:.17g}, "
                                                           f"g = {n.g:.17g}; {detail}")
        delta, worst = exact_delta(float_below(target["epsilon"]), n.epsilon0, n.step, n.g, moves)
        return Check(
            "privacy",
            f"{method}, δ(ε) in 60 digits, against ε and δ as written (each the largest float not above its "
            "decimal)",
            bool(delta <= float_below(target["delta"])),
            f"ε₀ = {n.epsilon0:.17g}, Δ₀ = {n.step:.17g}, g = {n.g:.17g}; {len(moves)} move pattern(s), the worst "
            f"|v| = {tuple(float(t) for t in worst)}: δ(ε={target['epsilon']}) = {mpmath.nstr(delta, 17)} "
            f"vs δ = {target['delta']}",
        )

    def privacy_summary(self, space: SensitivitySpace) -> dict:
        k = steps_per_shift(shift_pattern(space), self.noise.step)
        return {"epsilon": self.noise.epsilon0 * k, "steps_per_worst_shift": k,
                "conversion": "ε = ε₀ · max_v Σ_i ⌈|v_i|/Δ₀⌉ (exact)"}

    refusal: str | None = None
    """Why a counting query or a bounded sum or mean keeps the floating-point sampler
    (:mod:`dpopt.mechanisms.staircase_lattice`)."""

    def notes(self) -> list[str]:
        return super().notes() + [f"staircase step g-policy: {self.policy}"] + (
            [f"no exact lattice measurement: {self.refusal}"] if self.refusal else [])

    def _utility(self, utility: Utility) -> UtilityValue | None:
        if utility.metric in PRIOR_METRICS:
            check_prior(utility, self.dimension)
            return UtilityValue(utility.metric, prior_metric(self.noise, utility),
                                "quadrature of the staircase tail (dpopt.noise.prior_metrics)")
        return None

    def _expected_l1(self) -> float:
        return self.dimension * self.noise.abs_moment(1)

    def _expected_l2(self, workload: np.ndarray | None) -> float:
        frob = self.dimension if workload is None else float(np.sum(workload**2))
        return self.noise.abs_moment(2) * frob

    def _usefulness(self, gamma: float) -> float:
        return self.noise.usefulness(gamma)

    def _max_variance(self) -> float:
        return self.noise.abs_moment(2)


__all__ = [
    "StaircaseMechanism",
    "l1_optimal_g",
    "l2_optimal_g",
    "metric_optimal_g",
    "steps_per_shift",
    "usefulness_optimal_g",
]
