"""The mechanism families: one table of what each serves, read without importing any family.

Each row of :data:`FAMILIES` declares a family by its spec name: the module that defines it
(imported on first look-up by :func:`dpopt.mechanisms.registry`, so that a command pays only for
the families it uses), the privacy definitions, query kinds, utility metrics and sizes it serves,
and the key of its cheap a-priori utility bound (:mod:`dpopt.design.capabilities` evaluates it
from the target and the sensitivity norms alone). ``auto`` screens every family against its row
before importing it, and compares them in the table's order; ``docs/howto/choose-mechanism.md``
shows the table (generated from it). A family's own ``supports`` stays the last word: the row
only rules out what it declares.

Adding a family is one row here (and its module). A family defined anywhere else joins the list of
names when its class is created (:meth:`dpopt.mechanisms.Mechanism.__init_subclass__` calls
:func:`register_family`) with a row that declares nothing (every spec reaches its ``supports``).
The spec layer validates ``mechanism:`` against :func:`family_names` without importing a family.
"""

from __future__ import annotations

from dataclasses import dataclass

GAUSSIAN_TARGETS = ("gdp", "zcdp", "approx")
"""Targets of the families that add Gaussian noise with a designed covariance."""
CONVERTED_TARGETS = ("pure", "approx", "zcdp", "gdp", "pdp")
"""Targets a pure ε₀-DP family meets through :func:`dpopt.privacy.pure_conversion.pure_epsilon_for`."""
MARGINAL_QUERIES = ("marginals", "contingency_table", "histogram", "count")
"""Query kinds the marginal algebra expresses (stacks of marginals of one table)."""
INTEGER_QUERIES = ("count", "histogram", "contingency_table", "marginals")
"""Query kinds whose answers are integers (discrete noise keeps them so)."""
LOCAL_METRICS = ("l1", "l2", "usefulness", "max_variance", "kl", "renyi", "mallows")
"""Metrics of one coordinate's noise (every metric but the joint ``ci_volume`` and ``test_power``)."""

HULL_MAX_RANK = 16
"""Largest rank at which ``k_norm`` builds K = Hull(S) (within its deterministic work budget,
:data:`dpopt.mechanisms.k_norm.HULL_BUDGET`); above, K is a norm ball.
Measured (:mod:`dpopt.geometry.polytope`): rank 9 (4×4 table, 264 vectors) takes 54–153 s by gift
wrapping, 2 s up to its symmetry group; rank 16 (5×5 table) was not done after 600 s."""

CROSS_MAX_RANK = 1024
"""Largest rank at which ``k_norm`` on a counting query, when K is not the hull, measures exactly with the lattice
cross-polytope (:mod:`dpopt.mechanisms.k_norm_cross`); above, the floating-point norm ball (no listing of S).
Measured (``benchmarks/bench_k_norm_cross.py``): its echelon basis, sampler and exact checks cost no more than the
ball's design and checks (a 200-cell replace-one histogram: solve 3.5 s, verify 2.7 s against 11.2 s, 10.1 s for
the ball before this tree's faster lower bound, load 2–3 on 2 cores; at load 7, add/remove on 500 cells 9.1 s,
5.0 s against 9.6 s, 5.1 s, and on 2,000 cells, solve 73 s against 154 s). 64 before, when one elimination over
all of S in rationals made the cross-polytope's basis cost 8 s at 200 cells (0.2–0.3 s now). The cap is kept
for ``auto``: up to it the ``k_norm_ball`` quick bound of a listable space is the cross-polytope's
s/(2 sinh²(ε₀/2)), which does not grow with Δ₂ and so no longer skips the family on large marginal workloads
without listing S (all 3-way marginals of 5 attributes, rank 2,036, keep the ball's bound). A replace-one
histogram above 271 cells cannot list S (20·10⁶ entries) and keeps the ball whatever the rank."""


@dataclass(frozen=True)
class Capability:
    """What one family serves, declared without importing it.

    Attributes
    ----------
    name, module : str
        The spec name and the module that defines the family.
    definitions : tuple of str
        The privacy definitions whose targets it can meet.
    queries : tuple of str or None
        The query kinds it serves (``spec.query.kind``); None: every kind.
    metrics : tuple of str or None
        The utility metrics it predicts; None: every metric (closed form or Monte Carlo).
    workload : bool
        Whether it serves a utility ``workload`` or per-cell ``weights``.
    tables : bool
        Whether it serves per-table weights, targets or the largest table error (``utility.tables``,
        ``utility.objective``; :mod:`dpopt.optimize.table_goals`).
    invariants : bool
        Whether it serves a spec with invariants (its noise stays in the sensitivity span).
    integer : bool
        Whether it needs an integer-valued query (:data:`INTEGER_QUERIES`).
    privacy_unit : bool
        Whether it serves a person with several rows (``data.privacy_unit``).
    max_dimension : int or None
        The largest query dimension it serves (a dense d × d object in its certificate).
    bound : str or None
        The key of its cheap a-priori bound (:data:`dpopt.design.capabilities.QUICK_BOUNDS`).
    exact : str
        When its noise is sampled exactly (no floating-point noise touches the release,
        :mod:`dpopt.mechanisms.lattice`); empty: never (its certificate notes idealized numerics).
    inexact : str
        For a family that is never exact: why, in one short clause (the docs table shows it).
    serves : str
        One line for the docs table: what it is best at.
    """

    name: str
    module: str
    definitions: tuple[str, ...] = CONVERTED_TARGETS
    queries: tuple[str, ...] | None = None
    metrics: tuple[str, ...] | None = None
    workload: bool = True
    tables: bool = False
    invariants: bool = False
    integer: bool = False
    privacy_unit: bool = True
    max_dimension: int | None = None
    bound: str | None = None
    exact: str = ""
    inexact: str = ""
    serves: str = ""


_M = "dpopt.mechanisms."

FAMILIES: tuple[Capability, ...] = (
    Capability("gaussian", _M + "exact_sum", ("gdp", "zcdp", "approx", "pdp"),
               exact="zcdp, gdp, approx; counting queries (ci_volume at any number of cells at a small σ_ℤ², up to "
                     "about 2,000 at a large one, beyond 66 on a coarser grid whose volume excess is stated, and "
                     "test_power of a whole-number shift, from the discrete law; on a proper span a region of "
                     "proven coverage, its cost stated), and bounded sums and means on a dyadic lattice (ci_volume "
                     "the discrete law's interval; not test_power); linear queries with decimal weights on the "
                     "decimal lattice D·W (D the weights' common denominator, up to 2^20; every metric, ci_volume "
                     "the discrete law's region on the full span, test_power of an alternative on (1/D)ℤ; "
                     "a privacy unit; "
                     "no invariants); pdp on counting queries with listed integer moves or derived move patterns (a "
                     "person's moves on tables and marginal workloads, within an enumeration budget; beyond it, the "
                     "sub-Gaussian bound at the exact max ‖v‖², which bounds every move's level) and on "
                     "decimal weights (the discrete "
                     "law's exact pDP level per move pattern of the integer shifts), and on bounded sums and means "
                     "(every integer move up to Δ_u, the worst Δ_u); the lattice's cost stated (exact_cost)",
               serves="isotropic Gaussian noise on every coordinate"),
    Capability("projected_gaussian", _M + "gaussian", ("gdp", "zcdp", "approx", "pdp"), invariants=True,
               exact="zcdp, gdp, approx; counting queries; sum-zero, margin-kernel or marginal-workload spans (the "
                     "public part (I − P_V)x in exact rationals, up to 4·10⁶ block-cell × component terms); metrics l2, "
                     "max_variance (closed form), l1, usefulness (Monte Carlo of the exact sampler), ci_volume (the "
                     "exact law of ‖P_Vη‖² on the sum-zero span at σ_ℤ² up to about 200, else the full-d region's "
                     "radius, beyond 66 cells on a coarser grid; coverage proven, its cost stated); pdp on listed integer moves or "
                     "derived move patterns (a person's moves on marginal workloads; the loss of P_V y is that of y)",
               serves="Gaussian noise projected on the sensitivity span (invariants, rank-deficient spaces)"),
    Capability("james_stein", _M + "james_stein", GAUSSIAN_TARGETS, metrics=("l2",),
               exact="zcdp, gdp, approx; counting queries (the measurement; shrinkage is post-processing; rotated on "
                     "a span with an exact public part, as projected_gaussian's)",
               serves="James–Stein shrinkage of a Gaussian release (requested by name unless it gains ≥ 1%)"),
    Capability("marginal_gaussian", _M + "marginal_gaussian", GAUSSIAN_TARGETS, MARGINAL_QUERIES, ("l2",),
               workload=False, tables=True, invariants=True, privacy_unit=False,
               exact="zcdp, gdp, approx (lattice variances ≤ 2⁶⁰; gdp, approx ≤ 2²⁸)",
               serves="the optimal Gaussian strategy for marginal workloads at any domain size"),
    Capability("marginal_laplace", _M + "marginal_laplace", ("pure",), MARGINAL_QUERIES, ("l2",),
               workload=False, tables=True, privacy_unit=False,
               exact="pure (discrete Laplace on the integer marginals; every marginal workload)",
               serves="weighted marginal strategy with Laplace noise (pure ε)"),
    Capability("kronecker_gaussian", _M + "kronecker_gaussian", GAUSSIAN_TARGETS, ("kronecker",), ("l2",),
               workload=False, exact="zcdp, gdp, approx (integer factors of full column rank on each support; "
               "lattice variances ≤ 2⁴² under zcdp, the sampler serving 2⁶⁰ beyond int64; gdp, approx ≤ 2²⁸)",
               serves="Kronecker strategy for range/prefix × marginal workloads"),
    Capability("kronecker_laplace", _M + "kronecker_laplace_blocks", ("pure",), ("kronecker",), ("l2",), workload=False,
               exact="pure (the terms' factors integer of full column rank); when a term sums an ordered "
                     "attribute, a block design of its own (whole integer factors, totals and the parts beside them, "
                     "each block's data determined by the answers), its cost against the continuous design stated "
                     "(lattice_error_ratio)",
               serves="Kronecker strategy with Laplace noise (pure ε) for range/prefix × marginal workloads"),
    Capability("gaussian_optimal", _M + "gaussian_optimal", GAUSSIAN_TARGETS, None,
               ("l2", "max_variance", "ci_volume"), invariants=True, max_dimension=120,
               exact="zcdp, gdp, approx; counting queries; sum-zero, margin-kernel, marginal-workload or full spans; "
                     "metrics l2, "
                     "max_variance, and ci_volume (the strategy's region, proven coverage; beyond rank 66 on a coarser "
                     "grid whose volume excess is stated); linear "
                     "queries with decimal weights on the decimal lattice D·W (D up to 2^20; l2, max_variance, "
                     "ci_volume on the full span); bounded sums and means as the isotropic Gaussian on the sum's "
                     "dyadic lattice (the one-dimensional optimum); the integer strategy's rounding cost stated "
                     "(exact_cost, re-derived by verify)",
               serves="Gaussian noise with an SDP-optimised covariance (small queries, any workload)"),
    Capability("laplace", _M + "exact_sum", ("pure", "approx", "zcdp", "gdp"), bound="iid",
               exact="pure, approx, zcdp, gdp on counting queries (discrete Laplace of a dyadic scale t ≥ b, the "
                     "discrete law's guarantee: under gdp, zcdp a larger t than b); pure, approx, zcdp on bounded "
                     "sums and means, and gdp through ε (discrete Laplace on a dyadic lattice; the cost stated); "
                     "linear queries with decimal weights on the decimal lattice D·W (D up to 2^20, listed moves, a "
                     "privacy unit too; pure, approx, zcdp, gdp; l1, l2, usefulness, max_variance; the cost stated)",
               serves="Laplace noise on every coordinate"),
    Capability("k_norm", _M + "k_norm", invariants=True, bound="k_norm_ball",
               exact="every target (through pure ε′); counting queries; K = Hull(S) with an integral echelon basis "
                     "of span(S) (the lattice law P ∝ e^{−ε′‖z‖_K}); metrics l2, l1, usefulness, max_variance (importance "
                     "sampling with ≥ 1,000 guaranteed effective draws and ≤ 10⁹ gauge multiply-adds, ≤ 10⁵ "
                     "proposals per draw; else, rank ≥ 2, the cone sampler when its half-open decomposition is "
                     "proven in integers, with a Monte Carlo of its exact draws: the 4×4 table with margins) and "
                     f"ci_volume (proven coverage); when the hull is not built, up to rank {CROSS_MAX_RANK}, K the "
                     "cross-polytope of the lattice coordinates (a product of discrete Laplace laws; l2, max_variance "
                     "in closed form; ci_volume by convolving the coordinates' laws, proven coverage; its cost "
                     "against the floating-point ball in the certificate); above rank "
                     f"{CROSS_MAX_RANK}, or when S cannot be listed and states no generators of its hull (a person's "
                     "marginals state the images of the contribution polytope's vertices up to 2·10⁶ numbers), the "
                     "norm ball keeps floating point; bounded sums and means (no invariants; not ci_volume, test_power): K = [−Δ, "
                     "Δ], the discrete Laplace on a dyadic lattice through pure ε′, its cost stated; "
                     "linear queries with decimal weights on the decimal lattice D·W (D up to 2^20): the counting "
                     "design for the integer moves D·WΔ, released as (k + z)/D (metrics l2, l1, usefulness, "
                     "max_variance, ci_volume; no invariants; its cost stated)",
               serves="K-norm noise on the span; the optimal K = Hull(S) up to rank 16, else a norm ball"),
    Capability("generalized_gaussian", _M + "generalized_gaussian_sum", ("pure", "pdp", "approx", "zcdp", "gdp"),
               bound="iid_zcdp",
               exact="every target on counting queries (discrete GG on ℤ: pure by Δ₁/s at p = 1; pdp and approx at "
                     "p = 2, 3, 4 by the exact lattice pDP level and (ε, δ) profile of each move pattern, any number "
                     "of moving cells within the convolution's limit; approx, zcdp, gdp at p = 1 as the discrete "
                     "Laplace and zcdp, gdp at p = 2 as the discrete Gaussian); pure on a bounded mean with public n "
                     "and bounds that are multiples of the lattice (the truncated discrete GG on the lattice box); the "
                     "best exact option is kept, its cost against the best floating-point one stated; not zcdp or "
                     "gdp at p ≥ 3 (no guarantee at any scale), or the boundary-inflated variants; bounded sums and "
                     "means (no invariants; not ci_volume, test_power): the discrete GG on ℤ at the lattice shift Δ_u "
                     "on a dyadic lattice, for the targets and shapes it serves on counts (p = 4 under pdp, approx on a "
                     "coarser lattice), its cost stated; "
                     "linear queries with decimal weights on the decimal lattice D·W (D up to 2^20): the counting "
                     "design for the integer moves D·WΔ, released as (k + z)/D (metrics l2, l1, usefulness, "
                     "max_variance, kl, renyi, mallows; no invariants; its cost stated)",
               serves="generalized Gaussian noise, p chosen; truncated to a public box where one is known"),
    Capability("staircase", _M + "staircase_lattice", metrics=LOCAL_METRICS, bound="iid",
               exact="on counting queries (the discrete staircase on ℤ, integer steps): approx, zcdp, gdp on listed "
                     "moves or a person's derived move patterns calibrated on its own exact privacy-loss distribution, else through ε-DP; on bounded sums "
                     "and means every target through ε-DP (on a dyadic lattice, the step the lattice sensitivity "
                     "Δ_u); metrics l1, l2, usefulness, max_variance, and kl, renyi, mallows on counts (summed over "
                     "the discrete law); the cost against the continuous design stated "
                     "(a two-cell histogram under zcdp or gdp, where the continuous steps 1/3 and 1/4 beat the "
                     "integer step: +15% and +26% in variance under zcdp and gdp); linear queries with decimal "
                     "weights on the decimal lattice D·W (D up to 2^20, listed moves; every target as on counts; l1, "
                     "l2, usefulness, max_variance, and kl, renyi, mallows at the prior times D)",
               serves="staircase noise per coordinate (optimal one-dimensional pure-ε noise)"),
    Capability("r2dp", _M + "r2dp_sum", metrics=LOCAL_METRICS, bound="iid",
               exact="pure, approx, zcdp, gdp, pdp (through ε) on counting queries: a mixture of discrete Laplace "
                     "laws of dyadic scales with integer weights, optimised by the LP on ℤ; metrics l1, l2, "
                     "max_variance, usefulness, kl, renyi; mallows by the least exact Mallows distance of the discrete "
                     "Laplace and the l1/l2 LP mixtures; bounded sums and means (no invariants; l1, l2, max_variance, "
                     "usefulness): the LP mixture on ℤ at the lattice shift Δ_u on a dyadic lattice, its cost stated; "
                     "linear queries with decimal weights on the decimal lattice D·W (D up to 2^20): the counting "
                     "design for the integer moves D·WΔ, released as (k + z)/D (metrics l2, l1, usefulness, "
                     "max_variance, kl, renyi, mallows; no invariants; its cost stated)",
               serves="R²DP: Laplace with a randomised scale"),
    Capability("discrete_gaussian", _M + "discrete_gaussian", ("zcdp", "approx", "pdp"), integer=True, exact="always",
               serves="discrete Gaussian noise on integer answers"),
    Capability("discrete_laplace", _M + "discrete_laplace", ("pure", "approx", "zcdp", "gdp"), integer=True,
               bound="iid", exact="always", serves="discrete Laplace (geometric) noise on integer answers"),
    Capability("query_scaling", _M + "query_scaling", GAUSSIAN_TARGETS,
               metrics=("ci_volume", "test_power", "l2"), invariants=True,
               exact="zcdp, gdp, approx; counting queries; metrics l2, ci_volume, test_power (a whole-number "
                     "shift; region and test from the discrete law; a region of unequal variances by groups of equal "
                     "variance, distinct variances × support ≤ 2^24, its grid's volume excess stated); "
                     "linear queries with decimal weights on the decimal lattice D·W (D up to 2^20, listed moves, a "
                     "privacy unit too; l2, ci_volume, test_power of an alternative on (1/D)ℤ; the cost stated)",
               serves="Shoham–Rinott query scaling: Gaussian noise σ²Diag(ξ)⁻¹"),
)
"""Every family of this package, in the order ``auto`` compares them (ties go to the first)."""

CAPABILITIES: dict[str, Capability] = {row.name: row for row in FAMILIES}
"""The rows by family name (a family registered late has a row that declares nothing)."""

FAMILY_MODULES: dict[str, str] = {row.name: row.module for row in FAMILIES}
"""The module that defines each family, in :data:`FAMILIES` order."""


def family_names() -> tuple[str, ...]:
    """Every family name the spec accepts, in :data:`FAMILY_MODULES` order."""
    return tuple(FAMILY_MODULES)


def capability(name: str) -> Capability:
    """The row of ``name``; a family registered without a row declares nothing (every spec reaches it)."""
    return CAPABILITIES.get(name) or Capability(name, FAMILY_MODULES.get(name, ""))


def register_family(name: str, module: str) -> None:
    """Declare a family defined in ``module`` (a no-op for the families declared above)."""
    FAMILY_MODULES.setdefault(name, module)
