"""A floating-point support attack (Mironov, CCS 2012) on neighbouring counts: it breaks the floating-point
Laplace release and learns nothing from the exact (integer) release — the same test on both.

numpy's ``Generator.laplace(0, b)`` draws U = k·2⁻⁵³ (53 random bits) and returns b·log(2U) for U < ½ and
−b·log((2 − U) − U) otherwise, in double precision; ``laplace`` releases the double x + Z. The set S of doubles
that sampler can return is sparse among all doubles: at x = 0 every release lies in S, while at the neighbour
x = 1 the double 1 + Z rounds off S most of the time. The attack answers "x = 1" exactly when the release is
not in S (membership is decided by inverting the sampler and re-running its arithmetic on the nearby k, in
Python floats: IEEE double arithmetic and the same C ``log``). For an ε-DP release, P₁(E) ≤ e^ε P₀(E) for every
event E; here P₀(E) = 0 and P₁(E) > 0, so no ε holds. On the exact path (``laplace`` by default on a count:
integer counts plus discrete Laplace noise, and ``discrete_laplace``) the same event has the same probability under
both neighbours, within the DP bound.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

import dpopt
from dpopt.rng import aes_generator

TWO53 = 2.0**53
RELEASES = 3000
EPSILON = 0.5


def count_spec(mechanism: str) -> dict:
    return {"dpopt": 1, "name": "a count", "data": {"attributes": {"a": ["x", "y"]}}, "query": {"kind": "count"},
            "adjacency": "add_remove", "privacy": {"pure": {"epsilon": EPSILON}}, "mechanism": mechanism,
            "utility": {"metric": "l1"}}


def sampler_output(k: int, scale: float) -> float:
    """What numpy's Laplace sampler returns for U = k·2⁻⁵³ (numpy/random/src/distributions: random_laplace)."""
    u = k / TWO53
    if u >= 0.5:
        return 0.0 - scale * math.log(2.0 - u - u)
    return 0.0 + scale * math.log(u + u)


def in_support(value: float, scale: float, window: int = 4) -> bool:
    """Whether the double ``value`` is an output of numpy's Laplace sampler of this scale (the k near its inverse)."""
    if not math.isfinite(value):
        return False
    u = math.exp(value / scale) / 2.0 if value <= 0 else 1.0 - math.exp(-value / scale) / 2.0
    k0 = int(round(u * TWO53))
    return any(sampler_output(k, scale) == value for k in range(max(1, k0 - window), min(2**53, k0 + window + 1)))


def event_rates(mechanism, scale: float, rng_factory) -> tuple[int, int]:
    """How many of ``RELEASES`` releases at x = 0 and at x = 1 fall outside the sampler's support S."""
    out = []
    for x in (0.0, 1.0):
        released = mechanism.release(np.full((RELEASES, 1), x), rng_factory(int(x))).ravel()
        out.append(sum(not in_support(float(v), scale) for v in released))
    return out[0], out[1]


def test_the_support_test_recognises_the_samplers_own_draws():
    """The membership test itself: every raw draw of numpy's Laplace is in S (so x = 0 is never flagged)."""
    draws = np.random.default_rng(3).laplace(0.0, 2.0, size=2000)
    assert all(in_support(float(z), 2.0) for z in draws)


def clopper_pearson(k: int, n: int, upper: bool, level: float = 1e-4) -> float:
    if upper:
        return 1.0 if k == n else float(stats.beta.ppf(1 - level, k + 1, n - k))
    return 0.0 if k == 0 else float(stats.beta.ppf(level, k, n - k + 1))


def test_support_attack_breaks_the_floating_point_laplace_and_not_the_exact_path():
    rngs = {"pcg64": lambda i: np.random.default_rng(100 + i), "aes": lambda i: aes_generator(200 + i)}
    floating = dpopt.solve(dict(count_spec("laplace"), sampler="floating_point")).mechanism
    assert not floating.exact_noise
    for family in ("laplace", "discrete_laplace"):  # the default laplace release is exact on a count
        exact = dpopt.solve(count_spec(family)).mechanism
        assert exact.exact_noise and exact.scale == floating.scale == 1 / EPSILON  # the same scale: 2 is dyadic
        _attack_both(floating, exact, rngs)


def _attack_both(floating, exact, rngs) -> None:
    """The attack on the floating-point and the exact release, with the same streams and the same event."""
    for name, factory in rngs.items():
        e0, e1 = event_rates(floating, floating.scale, factory)
        # at x = 0 the release is the draw itself: never outside S; at x = 1 it is, most of the time
        assert e0 == 0, name
        assert clopper_pearson(e1, RELEASES, upper=False) > 0.1, (name, e1)
        f0, f1 = event_rates(exact, float(exact.scale), factory)
        # the exact release is an integer: both rates are the same (here: every integer is outside S), and the
        # DP bound P(E | one) ≤ e^ε P(E | other) holds within the Clopper–Pearson limits (level 1e-4 each)
        for a, b in ((f0, f1), (f1, f0)):
            assert clopper_pearson(a, RELEASES, upper=False) <= math.exp(EPSILON) * clopper_pearson(b, RELEASES, upper=True)


def test_support_attack_learns_nothing_beyond_gdp_from_the_exact_gaussian():
    """The same event on the exact μ-GDP Gaussian count (integer count plus discrete Gaussian noise at the certified
    slope, dpopt.privacy.discrete_gaussian_gdp): for μ-GDP every event obeys P₁(E) ≤ Φ(Φ⁻¹(P₀(E)) + μ) (the
    trade-off function G_μ, Dong, Roth & Su 2022), checked both ways within Clopper–Pearson limits (level 1e-4)."""
    spec = dict(count_spec("gaussian"), privacy={"gdp": {"mu": EPSILON}}, utility={"metric": "l2"})
    exact = dpopt.solve(spec).mechanism
    assert exact.parameters["sampler"] == "exact"
    scale = 1.0  # the Laplace sampler's support at scale 1: integers other than 0 fall outside it
    f0, f1 = event_rates(exact, scale, lambda i: aes_generator(300 + i))
    for a, b in ((f0, f1), (f1, f0)):
        bound = stats.norm.cdf(stats.norm.ppf(clopper_pearson(b, RELEASES, upper=True)) + EPSILON)
        assert clopper_pearson(a, RELEASES, upper=False) <= bound
