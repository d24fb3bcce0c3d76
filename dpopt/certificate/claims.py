"""The claims a certificate makes, evaluated from the compiled spec and the mechanism alone.

Used twice: when a certificate is issued, and again by ``dpopt verify``, which compiles
the spec of the certificate file itself (:func:`dpopt.compile`) and rebuilds the mechanism.
"""

from __future__ import annotations

import math

import numpy as np

from dpopt.certificate.second_route import second_route_claims
from dpopt.core.checks import Check
from dpopt.domain.workload import workload_matrix
from dpopt.mechanisms import Mechanism, UtilityValue
from dpopt.problem import Problem
from dpopt.sensitivity.enumerate import enumeration_claims
from dpopt.sensitivity.semi_enumerate import semi_sensitivity_claims
from dpopt.spec.models import Spec
from dpopt.stats.lattice_inference import EXACT_LAW
from dpopt.stats.log_volume import exp_or_inf, volume_text


def sensitivity_claims(problem: Problem) -> list[Check]:
    """The structural sensitivity re-derived by enumerating datasets, where the domain is small.

    Without invariants: :func:`dpopt.sensitivity.enumerate.enumeration_claims`; under
    invariants: by enumerating conforming datasets, and a(t) by graph search
    (:func:`dpopt.sensitivity.semi_enumerate.semi_sensitivity_claims`). Both evaluate the
    compiled query and invariants record by record, never through their matrices.
    """
    spec, query, space = problem.spec, problem.query, problem.space
    if spec.invariants:
        return semi_sensitivity_claims(spec, query, problem.domain, space)
    return enumeration_claims(spec, query, space)


def mechanism_claims(problem: Problem, mechanism: Mechanism) -> list[Check]:
    """Dimension agreement and the privacy guarantee at the mechanism's parameters."""
    spec, space = problem.spec, problem.space
    return [
        Check(
            "mechanism.dimension",
            "noise dimension equals the query dimension",
            mechanism.dimension == space.dimension,
            f"{mechanism.dimension} vs {space.dimension}",
        ),
        *mechanism.scope_checks(problem),
        *mechanism.privacy_checks(space, spec.privacy),
    ]


def utility_claims(spec: Spec, mechanism: Mechanism) -> list[Check]:
    """A closed-form utility agrees with a Monte Carlo of the mechanism's own sampler.

    Catches a wrong closed form and a sampler that does not draw the law it claims
    (e.g. an under-noised one). Tolerance: 5 standard errors of the Monte Carlo mean
    (fixed seed, so the check is reproducible). Skipped for utilities that are
    themselves Monte Carlo estimates and for ``max_variance``. Also run for an inference metric derived from the
    exact law of lattice noise (:data:`~dpopt.stats.lattice_inference.EXACT_LAW`): the draws check the test's
    power or the region's coverage.
    """
    predicted = mechanism.expected_utility(spec.utility)
    kinds = {"closed form": predicted.method == "closed form", "exact law": predicted.method.startswith(EXACT_LAW)}
    kind = next((k for k, holds in kinds.items() if holds), None)
    if kind is None or spec.utility.metric == "max_variance":
        return []
    workload = workload_matrix(spec.utility)
    draws = mechanism.sampler_check_draws(min(100_000, max(2_000, 4_000_000 // mechanism.dimension)))
    alternative = None if spec.utility.alternative is None else np.asarray(spec.utility.alternative, dtype=float)
    mc = mechanism._monte_carlo(spec.utility.metric, workload, spec.utility.gamma, draws=draws,
                                alpha=spec.utility.alpha, alternative=alternative)
    if predicted.log_value is not None:
        holds, detail = _volume_agreement(kind, predicted, mc)
    else:
        se = (mc.ci[1] - mc.ci[0]) / (2 * 1.96)
        holds = abs(mc.value - predicted.value) <= 5 * se + 1e-12 * abs(predicted.value)
        detail = f"{kind} {predicted.value:.8g}, Monte Carlo {mc.value:.8g} ± {se:.2g} (SE)"
    return [
        Check(
            "utility.sampler",
            f"{kind.replace(' ', '-')} {predicted.metric} vs Monte Carlo of the sampler ({draws} draws, fixed seed), "
            "5 SE",
            holds,
            detail,
        )
    ]


def _volume_agreement(kind: str, predicted: UtilityValue, mc: UtilityValue) -> tuple[bool, str]:
    """The 5-SE test of :func:`utility_claims` for a volume, in the log domain (a volume may exceed the double
    range): |V̂ − V| ≤ 5 SE + 10⁻¹² V divided by the Monte Carlo mean V̂, i.e. |V/V̂ − 1| ≤ 5 SE/V̂ + 10⁻¹² V/V̂,
    with V/V̂ = exp(log V − log V̂) and SE/V̂ = (exp(log of the CI's upper end − log V̂) − 1)/1.96."""
    relative_se = math.expm1(mc.log_ci[1] - mc.log_value) / 1.96
    ratio = exp_or_inf(predicted.log_value - mc.log_value)
    holds = abs(ratio - 1.0) <= 5 * relative_se + 1e-12 * ratio
    return holds, (f"{kind} {volume_text(predicted.log_value)} (log {predicted.log_value:.10g}), Monte Carlo "
                   f"{volume_text(mc.log_value)} ± {relative_se:.2g} relative (SE)")


def all_claims(problem: Problem, mechanism: Mechanism, second_route: bool = True) -> list[Check]:
    """Every claim: sensitivity, the family's own privacy checks, utility, and (unless
    ``second_route`` is False: left to ``dpopt verify``) the second route from the noise law
    (:mod:`dpopt.certificate.second_route`)."""
    return (
        sensitivity_claims(problem)
        + mechanism_claims(problem, mechanism)
        + utility_claims(problem.spec, mechanism)
        + (second_route_claims(problem.spec, problem.space, mechanism) if second_route else [])
    )
