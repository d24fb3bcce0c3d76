"""The numbers behind the report's figures: target trade-off curves, noise draws against
the stated law, the sensitivity hull in principal coordinates, utility against the budget."""

from __future__ import annotations

import copy

import numpy as np
from scipy import special

from dpopt.errors import DpoptError
from dpopt.mechanisms import Mechanism, registry
from dpopt.noise.law import GaugeLaw, PostProcessedLaw, ProductLaw
from dpopt.privacy.pld import profile_tradeoff
from dpopt.privacy.tradeoff import GaussianTradeOff, PureDPTradeOff
from dpopt.privacy.zcdp import zcdp_delta_cks
from dpopt.problem import Problem
from dpopt.sensitivity.space import SensitivitySpace
from dpopt.spec.load import load_spec, spec_document

NOISE_DRAWS = 20_000
NOISE_SEED = 20261124
MAX_HULL_POINTS = 20_000
MAX_HULL_DIMENSION = 400

BUDGET_PARAMETER = {"pure": "epsilon", "approx": "epsilon", "pdp": "epsilon", "gdp": "mu", "zcdp": "rho"}

SCALE_FAMILIES = {("k_norm", "pure"): 1.0,
                  ("marginal_gaussian", "gdp"): 1.0, ("marginal_gaussian", "zcdp"): 0.5,
                  ("kronecker_gaussian", "gdp"): 1.0, ("kronecker_gaussian", "zcdp"): 0.5,
                  ("gaussian_optimal", "gdp"): 1.0, ("gaussian_optimal", "zcdp"): 0.5}
"""(family, definition) → k: the family's design at budget b·s is its design at b with the noise divided by
s^k. K-norm under pure ε (Hardt & Talwar 2010): K = Hull(S), or the fallback ball, does not depend on ε, and
the noise is R·U with R ~ Gamma(r + 1, rate ε), so Z(sε) has the law of Z(ε)/s. Its hull is the costly part
of a design, so the utility curve scales the calibrated mechanism's prediction instead of re-designing.
The marginal and Kronecker Gaussian strategies are optimised for unit noise, independently of the budget,
then calibrated: σ = Δ/μ under μ-GDP (k = 1), σ = Δ/√(2ρ) under ρ-zCDP (k = 1/2; Bun & Steinke 2016,
Prop. 1.6). Re-designed at s = 0.5 and 2, the 10-attribute marginal and the Kronecker examples agree with
the scaled values to 1e-15 relative; their re-design was most of a report's time. The optimal covariance is
homogeneous the same way: the program min f(Σ) subject to vᵀΣ⁺v ≤ μ² over S has the solution Σ(μ) = Σ(1)/μ²
(substitute Σ = Σ'/μ²), μ = √(2ρ) under ρ-zCDP; its SDP (most of ``census_part2``'s report) solves it to the
solver's tolerance, so a re-design agrees with the scaled value to about 1e-8 (tests/test_report_statistician.py).
An exact design of either (a lattice measurement) is homogeneous only up to its lattice's cost, which the
certificate states (``exact_cost``; under 0.1% for ``gaussian_optimal``'s integer strategy on the examples): the curve is the continuous
design's, scaled. So is K-norm's lattice law (P ∝ e^{−ε′‖z‖_K} on span(S) ∩ ℤ^d, not homogeneous in ε): its curve
scales the value at the target, within the lattice law's distance from the continuous one at each budget (−8%
on the 2×2 table at ε = 1, about −1% on the larger examples: ``docs/concepts/exact-noise.md``)."""
METRIC_POWER = {"l2": 2, "max_variance": 2, "l1": 1}
"""metric → m: the metric of noise c·Z is c^m times that of Z."""


def target_tradeoff(guarantee: dict, alpha: np.ndarray) -> tuple[np.ndarray, str] | None:
    """The target's trade-off curve (Dong, Roth & Su 2022): G_μ; the ε-DP curve; f_{ε,δ};
    for ρ-zCDP the envelope of f_{ε,δ(ε)} over the CKS conversion δ(ε). None for pDP, which
    is not a trade-off guarantee."""
    d = guarantee["definition"]
    if d == "gdp":
        return GaussianTradeOff(guarantee["mu"])(alpha), f"G_μ, μ = {guarantee['mu']:g}"
    if d == "pure":
        return PureDPTradeOff(guarantee["epsilon"])(alpha), f"ε-DP, ε = {guarantee['epsilon']:g}"
    if d == "approx":
        e, delta = guarantee["epsilon"], guarantee["delta"]
        return profile_tradeoff(alpha, [e], [delta]), f"(ε, δ) = ({e:g}, {delta:g})"
    if d == "zcdp":
        rho = guarantee["rho"]
        eps = np.linspace(0.0, rho + 2.0 * np.sqrt(rho * np.log(1e12)), 120)
        deltas = [zcdp_delta_cks(float(e), rho) for e in eps]
        return profile_tradeoff(alpha, eps, deltas), f"ρ-zCDP, ρ = {rho:g} (CKS (ε, δ) envelope)"
    return None


PANEL_MIN_DRAWS = 1_000
"""Fewest draws of a noise panel when the family caps its sampler's draws (:meth:`Mechanism.sampler_check_draws`:
an exact lattice sampler costs about 1 µs a variate): a histogram of 1,000 draws still shows the law's shape."""


def noise_draws(dimension: int, draws: int = NOISE_DRAWS) -> int:
    """The draws :func:`noise_panels` takes: ``draws``, fewer for a large query (at most 4·10⁶ numbers, at
    least 2,000 draws: a histogram of three cells needs no more)."""
    return min(draws, max(2_000, 4_000_000 // max(1, dimension)))


def noise_panels(mechanism: Mechanism, law, labels=None, draws: int = NOISE_DRAWS,
                 seed: int = NOISE_SEED) -> list[dict]:
    """Up to three panels: the cells whose noise varies most (named by ``labels``, e.g.
    ``race=other,sex=male``) against the law's marginal density where the law states it per
    output coordinate; for a gauge law, ‖Z‖_K against its Gamma(s, rate ε) density. Each panel holds its
    ``draws``.

    Where the family states the cells' variances in closed form (:meth:`Mechanism.cell_variances`) the cells are
    chosen by them and only those cells are drawn (:meth:`Mechanism.sample_coordinates`: their law under the
    sampler, at the cost of their own noise, e.g. milliseconds for 3 of 10,325 marginal cells instead of seconds
    for every cell); otherwise every cell is drawn and the cells are chosen by their sample spread."""
    count = noise_draws(mechanism.dimension, draws)
    count = min(count, max(PANEL_MIN_DRAWS, mechanism.sampler_check_draws(count)))  # a costly sampler: fewer
    rng = np.random.default_rng(seed)
    inner = law.inner if isinstance(law, PostProcessedLaw) else law
    variances = None if isinstance(inner, GaugeLaw) else mechanism.cell_variances()
    if variances is not None:
        variances = np.where(np.isfinite(variances), variances, -1.0)
        coords = [int(i) for i in np.argsort(-variances, kind="stable")[:3] if variances[i] > 0]
        samples = dict(zip(coords, mechanism.sample_coordinates(coords, count, rng).T))
    else:
        z = mechanism.sample(count, rng)
        released = np.isfinite(z).all(axis=0)  # a coordinate a design does not release is NaN throughout
        spread = np.where(released, np.std(np.where(released, z, 0.0), axis=0), -1.0)
        coords = [int(i) for i in np.argsort(-spread)[:3] if spread[i] > 0]
        samples = {i: z[:, i] for i in coords}
    panels = []
    stage = "Gaussian stage, " if isinstance(law, PostProcessedLaw) else ""
    for i in coords[: 2 if isinstance(inner, GaugeLaw) else 3]:
        density, lattice = None, False
        lo, hi = np.nanquantile(samples[i], [0.002, 0.998])
        if isinstance(inner, ProductLaw) and inner.basis is None:
            m = inner.marginals[i]
            lattice = m.lattice
            grid = np.arange(np.floor(lo), np.ceil(hi) + 1.0) if lattice else np.linspace(lo, hi, 400)
            density = (grid, np.exp(m.log_density(grid)))
        elif isinstance(inner, ProductLaw) and inner.gaussian and inner.observed is None:
            # a linear image of independent Gaussians: coordinate i is N(0, Σ_k B_ik² σ_k²)
            sd = np.array([m.gaussian_sd for m in inner.marginals])
            var = float(np.asarray(inner.basis)[i] ** 2 @ sd**2)
            grid = np.linspace(lo, hi, 400)
            density = (grid, np.exp(-grid**2 / (2.0 * var)) / np.sqrt(2.0 * np.pi * var))
        cell = ", ".join(str(labels[i]).split(",")) if labels is not None else f"coordinate {i}"
        panels.append({"label": f"{stage}cell {cell}", "samples": samples[i], "density": density,
                       "draws": count, "xlabel": "noise added to the cell",
                       "lattice": lattice or bool(getattr(mechanism, "integer_noise", False))})
    if isinstance(inner, GaugeLaw):
        g = np.asarray(inner.gauge(z), dtype=float)
        grid = np.linspace(0.0, float(np.quantile(g, 0.998)), 400)
        panels.append({"label": "‖Z‖_K (radial part)", "samples": g, "lattice": False, "xlabel": "‖Z‖_K",
                       "draws": count, "density": (grid, _gamma_density(grid, inner.rank, inner.epsilon))})
    return panels


def _gamma_density(x: np.ndarray, shape: float, rate: float) -> np.ndarray:
    """The Gamma(shape, rate) density rateᵏ xᵏ⁻¹ e^(−rate·x) / Γ(k), k = shape, on x ≥ 0 (in logs)."""
    return np.exp(shape * np.log(rate) + special.xlogy(shape - 1.0, x) - rate * x - special.gammaln(shape))


def hull_points(space: SensitivitySpace) -> tuple[np.ndarray, int] | None:
    """The listed difference vectors in the coordinates of the leading principal directions of
    their span (right singular vectors), at most three; None when they cannot be listed, or the query
    has more than :data:`MAX_HULL_DIMENSION` coordinates (listing and projecting them would cost more
    than the whole design: seconds to minutes for a marginal workload of a few thousand cells)."""
    if space.dimension > MAX_HULL_DIMENSION:
        return None
    vectors = space.hull_vectors()
    if vectors is None or len(vectors) > MAX_HULL_POINTS or not vectors.any():
        return None
    _, _, vt = np.linalg.svd(vectors, full_matrices=False)
    k = min(3, space.rank, vt.shape[0])
    return vectors @ vt[:k].T, space.rank


def utility_curves(problem: Problem, families: list[str],
                   scales=(0.25, 0.5, 1.0, 2.0, 4.0), known: dict[str, float] | None = None,
                   progress=None) -> tuple[dict, str, float]:
    """Each family re-designed at the spec's privacy parameter times each scale (δ kept), on the
    compiled problem restated at each budget (:meth:`~dpopt.problem.Problem.restated`).

    ``known`` holds utilities already predicted at the target (scale 1), e.g. the
    certificate's candidates: those points are not re-designed. A family of
    :data:`SCALE_FAMILIES` with a known value and a metric of :data:`METRIC_POWER` is not
    re-designed at all: its value at scale s is the known value times s^(−k·m) (exact).
    ``progress`` (optional) is called with the name of each point as it is computed.

    Returns
    -------
    curves : dict
        family → (parameter values, predicted utilities); points a family cannot meet are left out.
    parameter : str
        ε, μ or ρ.
    target : float
        The spec's value of that parameter.
    """
    spec = problem.spec
    definition = spec.privacy.definition
    name = BUDGET_PARAMETER[definition]
    target = float(spec.privacy.parameters[name])
    document = spec_document(spec)
    curves: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for family in families:
        cls = registry().get(family)
        if cls is None:
            continue
        xs, ys = [], []
        power = METRIC_POWER.get(spec.utility.metric)
        k = SCALE_FAMILIES.get((family, definition))
        for scale in scales:
            if known and family in known and (scale == 1.0 or (k is not None and power is not None)):
                xs.append(target * scale)
                ys.append(known[family] * scale ** (-k * power) if scale != 1.0 else known[family])
                continue
            if progress is not None:
                progress(f"utility curve: {family} at {name} = {target * scale:g}")
            doc = copy.deepcopy(document)
            doc["privacy"][definition][name] = target * scale
            doc["mechanism"] = family
            try:
                scaled = problem.restated(load_spec(doc))
                if cls.supports(scaled) is not None:
                    continue
                value = cls.design_value(scaled)
            except (DpoptError, ValueError, ArithmeticError):
                continue
            if np.isfinite(value):
                xs.append(target * scale)
                ys.append(value)
        if xs:
            curves[family] = (np.array(xs), np.array(ys))
    return curves, {"epsilon": "ε", "mu": "μ", "rho": "ρ"}[name], target
