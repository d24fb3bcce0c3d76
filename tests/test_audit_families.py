"""The empirical audit over every family: never above the certified value for a correct
mechanism, above it for broken ones (a K-norm radius with the wrong Gamma shape, samplers
that draw too little noise).

A correct mechanism's lower bound exceeds the certified value with probability at most
1 − confidence per audit (the bound is Bonferroni-corrected over its pairs). The sweeps over
family runs ~13 audits, so it uses confidence 0.999 (a false refutation somewhere ≤ 1.3%;
every spec's certified mechanism is audited in tests/test_audit.py); the broken cases use the default 0.95. Seeds are fixed: every case is
deterministic.
"""

from __future__ import annotations

import numpy as np
import pytest
from solved_specs import SPECS, solved

import dpopt
from dpopt.audit import audit_answer, audit_mechanism
from dpopt.certificate.second_route import noise_law_of
from dpopt.cli import main
from dpopt.mechanisms import Mechanism, registry
from dpopt.mechanisms.k_norm import KNormMechanism

DRAWS = 60_000
SWEEP_CONFIDENCE = 0.999

SMALL_KRONECKER = {
    "dpopt": 1, "name": "Age prefix (6 bands) crossed with two one-way tables (pure ε)",
    "data": {"attributes": {"age": [f"a{k}" for k in range(6)], "sex": ["f", "m"], "region": ["n", "e", "s"]}},
    "query": {"kind": "kronecker", "all_of_size": 1, "crossed_with": {"age": "prefix"}},
    "adjacency": "add_remove", "privacy": {"pure": {"epsilon": 1}}, "mechanism": "kronecker_laplace", "utility": "l2",
}
"""The kind of ``specs/range_marginals_age_prefix_pure.yaml`` at 30 counts instead of 336: ``kronecker_laplace``
is audited here on it (the audit of 336 counts took 38 s); the example spec's own mechanism is audited in
``tests/test_audit.py``."""


UPGRADE_DIMENSION = 64
"""A family already audited without a noise law is designed again, for one with a law, only on queries of at most
this dimension (``gaussian_optimal`` takes about a minute to design the 94 counts of
``specs/kronecker_age_ranges_sex_region_gdp.yaml``)."""


def _first_supported() -> dict[str, tuple]:
    """For every registered family, an example spec it serves: (spec, space, mechanism).

    Specs are tried from the smallest query dimension up (cheap audits), and a design with a
    stated noise law is preferred to one without (whose audit statistic is only the projection on v), up to
    :data:`UPGRADE_DIMENSION`.
    """
    out: dict[str, tuple] = {}
    problems = sorted((dpopt.compile(p) for p in [*SPECS, SMALL_KRONECKER]), key=lambda problem: problem.space.dimension)
    for problem in problems:
        spec, space = problem.spec, problem.space
        for family, cls in registry().items():
            done = family in out and (not isinstance(noise_law_of(out[family][2]), str)
                                      or problem.space.dimension > UPGRADE_DIMENSION)
            if done or cls.supports(problem) is not None:
                continue
            try:
                mechanism = cls.design(problem)
            except dpopt.DpoptError:
                continue
            if family not in out or not isinstance(noise_law_of(mechanism), str):
                out[family] = (spec, space, mechanism)
    return out


@pytest.fixture(scope="module")
def families() -> dict[str, tuple]:
    return _first_supported()


def test_every_registered_family_is_audited_somewhere(families):
    # families that no example spec serves would escape the audit; say which
    assert set(families) == set(registry()), sorted(set(registry()) - set(families))


def test_no_family_is_refuted(families):
    for family, (spec, space, mechanism) in families.items():
        result = audit_mechanism(mechanism, space, spec.privacy, draws=DRAWS, confidence=SWEEP_CONFIDENCE,
                                 answer=audit_answer(spec, mechanism.needs_integer_answers))
        assert result.passed, (family, result.to_dict())
        assert result.audited


class _UnderNoised:
    """A mechanism whose release carries ``factor`` times the noise its certificate states.

    Only what the audit uses is forwarded: ``family``, ``dimension``, ``needs_integer_answers`` (a lattice
    measurement is audited at whole-number answers), ``noise_law`` (the stated law, unchanged) and ``release``
    (its deviation from the answer shrunk).
    """

    def __init__(self, mechanism: Mechanism, factor: float):
        self.inner, self.factor = mechanism, factor
        self.family, self.dimension = mechanism.family, mechanism.dimension
        self.needs_integer_answers = mechanism.needs_integer_answers

    def noise_law(self):
        return noise_law_of(self.inner)

    def release(self, values, rng=None):
        return values + self.factor * (self.inner.release(values, rng) - values)


def test_under_noised_samplers_are_caught_in_every_family(families):
    """Noise × 1/4: for a location family with sensitivity Δ that is the mechanism at 4Δ, so
    ε, μ become ~4× the certified value (ρ 16×). Families certified above ε = 2 are left out:
    4ε > 8 needs type-I errors below e^{-8} ≈ 3e-4·(1 − β), beyond what 60,000 draws resolve."""
    caught, skipped = [], []
    for family, (spec, space, mechanism) in families.items():
        if isinstance(noise_law_of(mechanism), str):
            skipped.append(family)
            continue
        broken = _UnderNoised(mechanism, 0.25)
        result = audit_mechanism(broken, space, spec.privacy, draws=DRAWS,
                                 answer=audit_answer(spec, broken.needs_integer_answers))
        if result.certified > 2.0:
            skipped.append(family)
            continue
        assert not result.passed, (family, result.to_dict())
        caught.append(family)
    assert len(caught) >= 8, (caught, skipped)


class _WrongGammaShape(KNormMechanism):
    """R ~ Gamma(s, rate ε) instead of Gamma(s + 1, rate ε): the density becomes
    ∝ ‖z‖_K^{-1} e^{−ε‖z‖_K} (E₁(ε‖z‖_K) up to constants), unbounded at 0, so the
    mechanism is not ε′-DP for any ε′ (module docstring of dpopt.mechanisms.k_norm)."""

    def _radius(self, rng, size):
        return rng.gamma(self.rank, 1.0 / self.epsilon, size=size)


@pytest.mark.parametrize("stem", ["table_2x2_margins_pure", "table_replace_pure"])
def test_k_norm_radius_with_the_wrong_gamma_shape_is_caught(stem):
    sol = solved(next(p for p in SPECS if p.stem == stem))
    m = sol.mechanism
    assert m.family == "k_norm"
    broken = audit_mechanism(_WrongGammaShape(m.epsilon, m.body, sol.space, m.fallback_reason),
                             sol.space, sol.spec.privacy, draws=DRAWS)
    assert not broken.passed and broken.lower_bound > broken.certified  # the correct one: test_audit.py


def test_answer_dependent_noise_is_audited_on_the_release_path(capsys):
    # the truncated GG draws its noise around the answer: the audit releases at x ± v/2 around the
    # centre of the box [0, 10] (through Mechanism.release), which the certified ε = 0.2 survives
    path = next(p for p in SPECS if p.stem == "committee_mean_truncated_gg")
    sol = solved(path)
    result = audit_mechanism(sol.mechanism, sol.space, sol.spec.privacy, draws=DRAWS, answer=[5.0])
    assert result.audited and result.passed and result.rows[0]["statistic"] == "projection on v"
    assert main(["audit", str(path), "--draws", "1000"]) == 0
    assert "not refuted" in capsys.readouterr().out


def test_audit_pairs_follow_the_noise_law():
    # A query-scaling design releases only the count (ξ = (ξ₁, 0, 0)): the audited pair is the
    # one the law sees as largest, and the test statistic uses only released coordinates.
    sol = solved(next(p for p in SPECS if p.stem == "age_summary_test_power"))
    result = audit_mechanism(sol.mechanism, sol.space, sol.spec.privacy, draws=DRAWS)
    assert result.rows[0]["statistic"] == "log-likelihood ratio"
    assert np.isfinite(result.lower_bound)
