"""Automatic design: ``auto`` picks the best predicted family, the prediction matches simulation.

Checks, over a set of specs covering every metric: (1) the selected family has the best
predicted utility among the feasible candidates and the certificate carries the whole
comparison (family, parameters, predicted value, method; or the reason); (2) an
independent simulation of the selected mechanism (its own sampler, a seed other than the
predictor's) agrees with the prediction within 4 standard errors; (3) ``mechanism: [a, b]``
compares only those; (4) a family registered later joins without any change to the selector.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

import numpy as np
import pytest
from conftest import ROOT, make_spec
from scipy import special, stats

import dpopt
from dpopt.core import families
from dpopt.design.select import TIE_TOLERANCE
from dpopt.mechanisms import Mechanism, better, registry
from dpopt.mechanisms import base as mechanism_base
from dpopt.optimize import query_scaling
from dpopt.privacy.gaussian import gaussian_mu
from dpopt.privacy.gaussian_calibration import gaussian_privacy_check, gaussian_sigma

AGE = dpopt.load_spec(ROOT / "specs" / "age_summary_ci_volume.yaml").model_dump(
    mode="json", exclude_none=True
)

SPECS = {
    "table l2 (gdp)": make_spec(),
    "table l1 (approx)": make_spec(privacy={"approx": {"epsilon": 1.0, "delta": 1e-6}}, utility="l1"),
    "table usefulness (zcdp)": make_spec(
        privacy={"zcdp": {"rho": 0.5}}, utility={"metric": "usefulness", "gamma": 2.0}
    ),
    "count l1 (pure)": make_spec(
        query={"kind": "count"}, adjacency="add_remove", privacy={"pure": {"epsilon": 0.5}}, utility="l1"
    ),
    "table ci_volume (approx)": make_spec(
        privacy={"approx": {"epsilon": 1.0, "delta": 1e-6}}, utility="ci_volume"
    ),
    "age ci_volume": AGE,
    "age test_power": {**AGE, "utility": {"metric": "test_power", "alternative": [20, 180, 0]}},
    "age l2 workload": {**AGE, "utility": {"metric": "l2", "workload": [[1, 0, 0], [0, 1, 0], [1, 0, -1]]}},
    "age l2 workload (pure)": {**AGE, "privacy": {"pure": {"epsilon": 1.0}},
                               "utility": {"metric": "l2", "workload": [[1, 0, 0], [0, 1, 0], [1, 0, -1]]}},
}
SLOW = {"age l2 workload"}
"""Cases left to ``-m slow``: under (ε, δ) the staircase calibrates on its exact privacy-loss pmf over five move
patterns (about 20 s of CPU); the same workload under pure ε stays in the default run."""


@pytest.fixture(scope="module", ids=list(SPECS), params=[
    pytest.param(name, marks=pytest.mark.slow) if name in SLOW else name for name in SPECS])
def solved(request):
    return dpopt.solve(SPECS[request.param])


def test_auto_selects_the_best_prediction_and_records_the_comparison(solved):
    metric = solved.spec.utility.metric
    feasible = [c for c in solved.candidates if c.feasible]
    values = [c.utility.value for c in feasible]
    best = max(values) if better(metric) == "higher" else min(values)
    chosen = next(c for c in feasible if c.family == solved.mechanism.family)
    # a tie within TIE_TOLERANCE goes to the family listed first (count l1: the exact laplace and the unit-step
    # exact staircase are the same geometric law, their closed forms 1 ulp apart)
    assert chosen.utility.value == pytest.approx(best, rel=TIE_TOLERANCE, abs=0)
    # the comparison covers every registered family the spec allows, in FAMILIES order
    allowed = [f for f in families.family_names() if f in registry()]
    rows = solved.certificate["candidates"]
    assert [row["family"] for row in rows] == allowed
    for row in rows:
        if "utility" in row:
            assert {"value", "method", "metric"} <= set(row["utility"]) and isinstance(
                row["parameters"], dict
            )
        else:
            assert row["reason"]
    # the certificate's utility is the chosen candidate's, plus the per-cell errors reported beside it
    utility = {k: v for k, v in solved.certificate["utility"].items() if k != "per_cell"}
    assert utility == chosen.utility.to_dict()
    report = dpopt.render_markdown(solved.certificate)
    assert "| family | parameters | predicted" in report and "| method |" in report
    assert all(f"| {row['family']} |" in report for row in rows)


def _simulate(mechanism: Mechanism, spec, draws: int, rng) -> tuple[float, float]:
    """(mean, standard error) of the spec's metric over independent draws of the mechanism's noise.

    The statistics are written out here from their definitions, not taken from the library:
    l2, l1, usefulness per draw; for test_power the Neyman–Pearson rejection of η + Z with the
    mechanism's noise covariance; for ci_volume the coverage of the predicted region (whose
    volume is compared separately).
    """
    u = spec.utility
    z = mechanism.sample(draws, rng)
    if u.metric == "l2":
        w = np.eye(z.shape[1]) if u.workload is None else np.asarray(u.workload, dtype=float)
        per = np.sum((z @ w.T) ** 2, axis=1)
    elif u.metric == "l1":
        per = np.sum(np.abs(z), axis=1)
    elif u.metric == "usefulness":
        per = np.mean(np.abs(z) <= u.gamma, axis=1)
    elif u.metric == "test_power":
        eta = np.asarray(u.alternative, dtype=float)
        released = np.isfinite(z[0])
        cov = mechanism.noise_covariance()[np.ix_(released, released)]
        direction = np.linalg.pinv(cov) @ eta[released]
        lam = math.sqrt(float(eta[released] @ direction))
        per = ((eta[released] + z[:, released]) @ direction / lam > special.ndtri(1 - u.alpha)).astype(float)
    elif mechanism.family == "k_norm":  # ci_volume: coverage of {‖z‖_K ≤ t}, ‖Z‖_K ~ Gamma(s, rate ε)
        t = stats.gamma.ppf(1 - u.alpha, a=mechanism.rank, scale=1.0 / mechanism.epsilon)
        per = (mechanism.body.gauge(z) <= t).astype(float)
    else:  # ci_volume: coverage of the 1 − α region of the Gaussian noise on the sensitivity span
        space = dpopt.derive(spec)
        basis = space.span.basis()
        cov_v = basis.T @ mechanism.noise_covariance() @ basis
        coords = z @ basis
        q = np.einsum("ij,jk,ik->i", coords, np.linalg.inv(cov_v), coords)
        per = (q <= stats.chi2.isf(u.alpha, basis.shape[1])).astype(float)
    return float(per.mean()), float(per.std(ddof=1) / math.sqrt(draws))


def _simulate_lattice_test(mechanism: Mechanism, spec, predicted: dict) -> None:
    """The certified randomised test on lattice noise (statistic T = Σ w_i(y_i − θ0_i), reject T > c, and with
    probability γ at T = c; read from the certificate) simulated on the mechanism's draws: its rejection rate
    under H0 is at most α and under H1 is the predicted power, each within 4 SE of a proportion (the power is a
    proven lower bound within 10⁻³α of the exact one)."""
    found = re.search(r"w = \[([-0-9, ]+)\], reject T > (-?\d+) \(T = -?\d+: with probability ([0-9.]+)\)",
                      predicted["method"])
    weights = np.array([int(w) for w in found.group(1).split(",")])
    c, gamma = int(found.group(2)), float(found.group(3))
    z = mechanism.sample(100_000, np.random.default_rng(777))
    noisy = np.isfinite(z[0]) & (np.abs(z).max(axis=0) > 0)
    assert noisy.sum() == weights.size
    eta = np.asarray(spec.utility.alternative, dtype=float)[noisy]
    for shift, target in ((0.0 * eta, spec.utility.alpha), (eta, predicted["value"])):
        t = np.rint(shift + z[:, noisy]).astype(np.int64) @ weights
        rate = float(np.mean((t > c) + gamma * (t == c)))
        se = math.sqrt(target * (1 - target) / z.shape[0])
        if shift is eta:
            assert abs(rate - target) <= 4 * se + 1e-3 * spec.utility.alpha
        else:
            assert rate <= target + 4 * se


def test_the_prediction_agrees_with_an_independent_simulation(solved):
    spec, mech = solved.spec, solved.mechanism
    predicted = solved.certificate["utility"]
    if predicted["method"].startswith("exact law of the discrete noise") and spec.utility.metric == "test_power":
        _simulate_lattice_test(mech, spec, predicted)
        return
    if spec.utility.metric == "ci_volume" and mech.family == "k_norm" and mech.lattice is not None:
        # the lattice law's region {‖z‖_K ≤ r}, r read from the certificate: its coverage, simulated on the exact
        # sampler's draws with the floating-point hull's gauge, is at least 1 − α (the proven bound) within 4 SE
        r = float(Fraction(re.search(r"r = (\d+(?:/\d+)?), covers", predicted["method"]).group(1)))
        z = mech.sample(100_000, np.random.default_rng(777))
        covered = (mech.body.gauge(z) <= r + 1e-9).astype(float)
        assert covered.mean() >= 1 - spec.utility.alpha - 4 * covered.std(ddof=1) / math.sqrt(covered.size)
        assert mech.parameters["volume"] * r**mech.rank == pytest.approx(predicted["value"], rel=1e-12)
        return
    mean, se = _simulate(mech, spec, 100_000, np.random.default_rng(777))
    if spec.utility.metric == "ci_volume" and mech.family == "k_norm":
        # coverage is exactly 1 − α, and the region {‖z‖_K ≤ t} has volume t^s vol K (vol K as the hull records it)
        assert abs(mean - (1 - spec.utility.alpha)) <= 4 * se
        t = stats.gamma.ppf(1 - spec.utility.alpha, a=mech.rank, scale=1.0 / mech.epsilon)
        volume = mech.parameters["volume"] * t ** mech.rank
        assert volume == pytest.approx(predicted["value"], rel=1e-9)
        return
    if spec.utility.metric == "ci_volume":
        # coverage is exactly 1 − α, and the predicted volume is that of the region dpopt.stats builds
        assert abs(mean - (1 - spec.utility.alpha)) <= 4 * se
        basis = dpopt.derive(spec).span.basis()
        region = dpopt.stats.inference.confidence_region(
            np.zeros(mech.dimension), mech.noise_covariance(), spec.utility.alpha, span=basis
        )
        assert region.volume == pytest.approx(predicted["value"], rel=1e-9)
        return
    # a Monte Carlo prediction carries its own CI; add its standard error to the simulation's
    pred_se = 0.0 if "ci95" not in predicted else (predicted["ci95"][1] - predicted["ci95"][0]) / (2 * 1.96)
    assert abs(mean - predicted["value"]) <= 4 * math.hypot(se, pred_se) + 1e-12 * abs(predicted["value"])


def test_query_scaling_beats_the_plain_query_by_the_papers_factors():
    # the region acts as the box ψ = (1, 75, 1) for a diagonal scaling (its last generator dominates)
    psi = np.array([1.0, 75.0, 1.0])
    sol = dpopt.solve({**SPECS["age ci_volume"], "sampler": "floating_point"})  # the paper's continuous noise
    by = {c.family: c for c in sol.candidates if c.feasible}
    ratio = by["query_scaling"].utility.value / by["gaussian"].utility.value
    assert ratio == pytest.approx(query_scaling.volume_ratio(psi), rel=1e-9)  # Theorem 2.1's ratio
    sol = dpopt.solve({**SPECS["age test_power"], "sampler": "floating_point"})
    by = {c.family: c for c in sol.candidates if c.feasible}
    s = gaussian_mu(1.0, 1e-6)  # power of the one-coordinate query: 1 − Φ(z − s*|η_j|/ψ_j), j = 0
    assert by["query_scaling"].utility.value == pytest.approx(
        special.ndtr(s * 20.0 - special.ndtri(0.95)), rel=1e-9
    )
    # the plain query: λ = ‖η‖/σ with σ = Δ/s*, Δ² = 1 + 75² + 1
    plain = special.ndtr(s * math.hypot(20.0, 180.0) / math.sqrt(5627.0) - special.ndtri(0.95))
    assert by["gaussian"].utility.value == pytest.approx(plain, rel=1e-9)
    assert by["query_scaling"].utility.value > 0.99 and plain < 0.15


def test_correlated_optimal_noise_agrees_with_the_minimum_volume_adjustment():
    # two independent implementations of the same optimum (issue 11's SDP in the covariance, and
    # the minimum-volume ellipsoid here): equal volumes, both below the best diagonal scaling. The continuous
    # design's (the exact integer strategy's region states its cost against it: tests/test_strategy_regions.py)
    sol = dpopt.solve({**SPECS["age ci_volume"], "sampler": "floating_point"})
    by = {c.family: c for c in sol.candidates if c.feasible}
    if "gaussian_optimal" not in by:
        pytest.skip("no gaussian_optimal family in this build")
    vectors = sol.space.vectors()
    mvee = query_scaling.minimum_volume_adjustment(vectors)
    volume = math.exp(mvee.log_volume(gaussian_mu(1.0, 1e-6), 0.05))
    assert by["gaussian_optimal"].utility.value == pytest.approx(volume, rel=1e-6)
    assert by["gaussian_optimal"].utility.value < by["query_scaling"].utility.value


def test_a_list_of_families_compares_only_those():
    sol = dpopt.solve({**AGE, "mechanism": ["gaussian", "query_scaling"]})
    assert [c.family for c in sol.candidates] == ["gaussian", "query_scaling"]
    assert sol.mechanism.family == "query_scaling"
    sol = dpopt.solve({**AGE, "mechanism": ["gaussian"]})
    assert [c.family for c in sol.candidates] == ["gaussian"] and sol.mechanism.family == "gaussian"


@pytest.fixture
def late_family():
    """A family added after the selector was written: Gaussian noise 1.5× the isotropic σ, with
    no closed-form utility (so its prediction is a Monte Carlo with a CI). Defining the class is
    all it takes: its name joins the registry and the names the spec accepts
    (:mod:`dpopt.core.families`); the teardown removes it from both."""
    name = "late_gaussian_for_test"

    class LateFamily(Mechanism):
        family = name
        title = "late Gaussian (test)"

        def __init__(self, sigma: float, dimension: int):
            self.sigma, self.dimension = float(sigma), int(dimension)

        @classmethod
        def supports(cls, problem):
            return None if problem.spec.privacy.definition in ("gdp", "zcdp", "approx") else "Gaussian targets only"

        @classmethod
        def design(cls, problem):
            space = problem.space
            return cls(1.5 * gaussian_sigma(space.l2_squared, problem.spec.privacy), space.dimension)

        @classmethod
        def from_parameters(cls, parameters, space):
            return cls(parameters["sigma"], space.dimension)

        @property
        def parameters(self):
            return {"sigma": self.sigma}

        def _sample(self, rng, size):
            return rng.normal(0.0, self.sigma, size=(size, self.dimension))

        def _privacy_checks(self, space, privacy):
            return [gaussian_privacy_check(space.l2_squared, self.sigma, privacy)]

    try:
        yield name
    finally:
        mechanism_base._REGISTRY.pop(name, None)
        families.FAMILY_MODULES.pop(name, None)


def test_a_family_defined_in_one_module_is_a_name_the_spec_accepts(late_family):
    spec = dpopt.load_spec(make_spec(mechanism=late_family, privacy={"gdp": {"mu": 1.0}}))
    assert spec.families == (late_family,)
    assert late_family in families.family_names()
    assert dpopt.solve(spec).mechanism.family == late_family


def test_a_family_registered_later_joins_without_changing_the_selector(late_family):
    sol = dpopt.solve(make_spec(privacy={"approx": {"epsilon": 1.0, "delta": 1e-6}}))
    row = next(c for c in sol.certificate["candidates"] if c["family"] == late_family)
    assert row["utility"]["method"].startswith("Monte Carlo") and "ci95" in row["utility"]
    assert sol.mechanism.family != late_family  # 2.25× the variance of the isotropic Gaussian: never best
    report = dpopt.render_markdown(sol.certificate)
    assert "Monte Carlo" in report and "95% CI" in report
    assert dpopt.verify(sol.certificate).passed


def test_every_new_spec_solves_verifies_and_releases(tmp_path, capsys):
    from dpopt.cli import main

    for name in ("age_summary_ci_volume", "age_summary_test_power"):
        path = ROOT / "specs" / f"{name}.yaml"
        out = tmp_path / name
        assert (
            main(
                [
                    "release",
                    str(path),
                    "--data",
                    str(ROOT / "specs" / "data" / "survey.csv"),
                    "--seed",
                    "3",
                    "--insecure-seed",
                    "--out",
                    str(out),
                ]
            )
            == 0
        )
        released = __import__("json").loads((out / "release.json").read_text())["release"]
        assert len(released) == 3
        if name.endswith("test_power"):
            assert released["row 1"] is None and released["age_group=65+"] is None  # not asked (row 2: a run of ones)
        assert main(["verify", str(out / "certificate.json")]) == 0
    capsys.readouterr()
