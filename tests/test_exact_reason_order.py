"""``MarginalGaussianMechanism.exact_reason`` refuses a component outside the lattice sampler's range before it
certifies any GDP slope (``dpopt.privacy.discrete_gaussian_gdp``):
a GDP target only raises a component's lattice variance, so one already above ``MAX_SIGMA2`` at its first dyadic
variance can never be certified."""

from __future__ import annotations

from fractions import Fraction
from types import SimpleNamespace

import pytest

from dpopt.domain.marginal_algebra import MarginalAlgebra, MarginalWorkload
from dpopt.mechanisms import lattice
from dpopt.mechanisms.marginal_gaussian import MarginalGaussianMechanism
from dpopt.privacy.discrete_gaussian_gdp import MAX_SIGMA2

WORKLOAD = MarginalWorkload(MarginalAlgebra((2, 3)), ((0,), (1,)))


def _spec(definition: str) -> SimpleNamespace:
    return SimpleNamespace(sampler=None, privacy=SimpleNamespace(definition=definition))


def _coefficients(sigma2_of_first: Fraction) -> dict:
    """a_T with lattice variance σ² = co_size(T)/a_T · size(T)² (lattice.lattice_variance): 18 for (1,) (a = 1:
    2/1 · 3²), ``sigma2_of_first`` (a dyadic, so kept as it is) for (0,) (3/a · 2²)."""
    return {(1,): 1.0, (0,): float(Fraction(12) / sigma2_of_first)}


def test_a_component_above_the_gdp_range_is_refused_without_a_slope(monkeypatch):
    def no_slope(*args):
        raise AssertionError("a GDP slope was certified")

    monkeypatch.setattr(lattice, "effective_variance", no_slope)
    reason = MarginalGaussianMechanism.exact_reason(_spec("gdp"), _coefficients(2 * MAX_SIGMA2), WORKLOAD)
    assert reason is not None and "component (0,)" in reason and str(MAX_SIGMA2) in reason


@pytest.mark.parametrize("definition", ["gdp", "zcdp"])
def test_components_in_range_are_kept_on_the_lattice(definition):
    assert MarginalGaussianMechanism.exact_reason(_spec(definition), _coefficients(Fraction(64)), WORKLOAD) is None


def test_zcdp_keeps_a_variance_above_the_gdp_range():
    """Under ρ-zCDP the lattice runs up to 2³⁰ (no slope to certify): 2²³ stays exact."""
    assert MarginalGaussianMechanism.exact_reason(_spec("zcdp"), _coefficients(2 * MAX_SIGMA2), WORKLOAD) is None
