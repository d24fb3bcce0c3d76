"""Draws of a few output coordinates (:meth:`Mechanism.sample_coordinates`) and the report's noise panels built on
them.

Sources of the expected values:

* the full sampler :meth:`Mechanism.sample` itself: over every block of a marginal workload the restricted draws
  are the full draws, number for number, from the same seed (the same parts drawn in the same order);
* the per-cell variances in closed form (:meth:`cell_variances`, checked against the dense covariance in
  ``tests/test_marginal_gaussian.py``): the restricted draws of a few cells have those variances, and are
  uncorrelated across blocks with no common part but the grand total.
"""

from __future__ import annotations

import numpy as np
import pytest

import dpopt
from dpopt.report import data as report_data

ATTRS = {"a": ["1", "2", "3"], "b": ["x", "y"], "c": ["p", "q", "r", "s"]}
MIXED = {"kind": "marginals", "attributes": [["c"], ["b", "a"], ["a"]]}


def _mechanism(sampler: str, privacy: dict | None = None):
    return dpopt.solve({"dpopt": 1, "name": "coordinates", "data": {"attributes": ATTRS}, "query": MIXED,
                        "adjacency": "add_remove", "privacy": privacy or {"zcdp": {"rho": 1.0}},
                        "mechanism": "marginal_gaussian", "sampler": sampler}).mechanism


@pytest.mark.parametrize("sampler", ["exact", "floating_point"])
def test_every_block_is_the_full_sampler_draw_for_draw(sampler):
    mechanism = _mechanism(sampler)
    coords = [12, 0, 5, 11, 4]  # blocks c (0–3), ba (4–9) and a (10–12), out of order and blocks repeated
    full = mechanism.sample(50, np.random.default_rng(3))
    np.testing.assert_array_equal(mechanism.sample_coordinates(coords, 50, np.random.default_rng(3)),
                                  full[:, coords])


@pytest.mark.parametrize("sampler", ["exact", "floating_point"])
def test_a_few_cells_have_their_closed_form_variances(sampler):
    mechanism = _mechanism(sampler, {"gdp": {"mu": 1.0}})
    variances = mechanism.cell_variances()
    n = 20_000
    coords = [1, 11]  # a cell of block c and one of block a: only the parts ∅, c and a are drawn
    z = mechanism.sample_coordinates(coords, n, np.random.default_rng(5))
    # the sample variance of n draws of a (near-)Gaussian cell has standard error v·√(2/n) (1.0% here); the
    # discrete Gaussians' excess kurtosis is below 1e-3 at these σ_ℤ² (≥ 50): 4 standard errors
    for k, i in enumerate(coords):
        assert abs(np.var(z[:, k]) - variances[i]) < 4 * variances[i] * np.sqrt(2 / n)


def test_noise_panels_draw_the_noisiest_cells_only():
    mechanism = _mechanism("exact")
    variances = mechanism.cell_variances()
    seen = []
    original = mechanism.sample_coordinates

    def spy(coords, size, rng):
        seen.append(list(coords))
        return original(coords, size, rng)

    mechanism.sample_coordinates = spy
    mechanism.sample = None  # every cell drawn would fail
    panels = report_data.noise_panels(mechanism, None, None, draws=2_000)
    top = sorted(range(len(variances)), key=lambda i: -variances[i])[:3]
    assert seen == [top]
    assert len(panels) == 3 and all(len(p["samples"]) == p["draws"] == 2_000 for p in panels)
