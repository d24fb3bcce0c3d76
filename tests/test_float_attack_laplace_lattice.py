"""Mironov's support attack (CCS 2012) on the Laplace lattice families ``marginal_laplace`` and
``kronecker_laplace``: it breaks ``sampler: floating_point`` and learns nothing beyond ε from the exact path — the
same test on both.

The floating-point release is φ(X) + Z with Z = g(z) a floating-point function of numpy's Laplace draws z (the
least squares applied to the noise alone). On a count (``marginal_laplace``: one measured marginal, the total) and on
the first prefix count of a 3-level attribute (``kronecker_laplace``: the identity factor is optimal there, so the
first answer's noise is one draw scaled), Z is g(z) of a single draw, and the set S of doubles it can take is
the image of the 2⁵³ outputs of numpy's sampler (``test_float_attack.sampler_output``): sparse. At the answer 0
every release lies in S; at the neighbour 1 the double 1 + Z mostly does not. Membership is decided by inverting g
approximately (z ≈ r/g(1)), inverting the sampler to its integer k, and re-running the mechanism's own arithmetic on
the neighbouring k through a stand-in generator whose ``laplace`` returns those draws — so the test does not model g,
it calls it. For an ε-DP release P₁(E) ≤ e^ε P₀(E) for every event E; here P₀(E) = 0 < P₁(E), so no ε holds. The
exact release (integer measurements plus discrete Laplace noise, post-processed) gives the same event probabilities
within e^ε of each other (Clopper–Pearson limits at level 10⁻⁴ each; 2,000 releases per neighbour).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from test_float_attack import TWO53, clopper_pearson, sampler_output

import dpopt

RELEASES = 2000
EPSILON = 0.5
WINDOW = 6
"""Integers k tried on each side of the inverted one (the inversion through g and the sampler's log is off by at
most a few units here; the self-check ``e0 == 0`` below fails if it were not enough)."""


def spec(family: str, sampler: str) -> dict:
    base = {"dpopt": 1, "name": "attack", "adjacency": "add_remove", "privacy": {"pure": {"epsilon": EPSILON}},
            "utility": "l2", "mechanism": family, "sampler": sampler}
    if family == "marginal_laplace":
        return base | {"data": {"attributes": {"a": ["x", "y"]}}, "query": {"kind": "count"}}
    return base | {"data": {"attributes": {"age": ["1", "2", "3"]}},
                   "query": {"kind": "kronecker", "terms": [{"age": "prefix"}]}}


def truth(family: str, x: int, n: int) -> np.ndarray:
    """n copies of the answers at the neighbour x (0: no record; 1: one record in the first cell)."""
    answers = [x] if family == "marginal_laplace" else [x, x, x]  # prefix counts of one record at level 1
    return np.tile(np.array(answers, dtype=float), (n, 1))


class _Draws:
    """A stand-in generator: ``laplace`` hands out the given draws, one per release, along the draws axis."""

    def __init__(self, draws: np.ndarray, axis: int):
        self.draws, self.axis, self.used = draws, axis, 0

    def laplace(self, loc, scale, size):
        n = size[self.axis]
        block = self.draws[self.used:self.used + n]
        self.used += n
        shape = [1] * len(size)
        shape[self.axis] = n
        return np.broadcast_to(block.reshape(shape), size).copy()


def noise_map(mechanism, family: str):
    """g: the first answer's noise as the mechanism computes it from single draws z (its own arithmetic)."""
    axis = 0 if family == "marginal_laplace" else len(mechanism.factors)

    def g(z: np.ndarray) -> np.ndarray:
        return mechanism.release(truth(family, 0, z.size), _Draws(np.asarray(z, dtype=float), axis))[:, 0]

    return g


def outside_support(released: np.ndarray, g, scale: float) -> int:
    """How many releases are not g(z) for any output z of numpy's Laplace sampler (module docstring)."""
    unit = float(g(np.array([1.0]))[0])
    candidates, owners = [], []
    for i, r in enumerate(released.tolist()):
        if not math.isfinite(r):
            continue
        z = r / unit
        u = math.exp(z / scale) / 2.0 if z <= 0 else 1.0 - math.exp(-z / scale) / 2.0
        k0 = int(round(u * TWO53))
        for k in range(max(1, k0 - WINDOW), min(2**53, k0 + WINDOW + 1)):
            candidates.append(sampler_output(k, scale))
            owners.append(i)
    images = g(np.array(candidates))
    inside = {i for i, value in zip(owners, images.tolist()) if value == released[i]}
    return released.size - len(inside)


@pytest.mark.parametrize("family", ["marginal_laplace", "kronecker_laplace"])
def test_support_attack_breaks_the_floating_point_lattice_laplace_and_not_the_exact_path(family):
    floating = dpopt.solve(spec(family, "floating_point")).mechanism
    exact = dpopt.solve(spec(family, "exact")).mechanism
    assert floating.sampler == "floating_point" and exact.sampler == "exact"
    g = noise_map(floating, family)
    flags = {}
    for name, mechanism in (("floating_point", floating), ("exact", exact)):
        for x in (0, 1):
            released = mechanism.release(truth(family, x, RELEASES), np.random.default_rng(500 + x))[:, 0]
            flags[name, x] = outside_support(released, g, floating.scale)
    # floating point: at 0 the release is g(z) itself (never flagged); at 1 it is flagged in most releases
    assert flags["floating_point", 0] == 0
    assert clopper_pearson(flags["floating_point", 1], RELEASES, upper=False) > 0.1, flags
    # exact: the same event within the DP bound both ways
    f0, f1 = flags["exact", 0], flags["exact", 1]
    for a, b in ((f0, f1), (f1, f0)):
        assert clopper_pearson(a, RELEASES, upper=False) <= math.exp(EPSILON) * clopper_pearson(b, RELEASES, upper=True)
