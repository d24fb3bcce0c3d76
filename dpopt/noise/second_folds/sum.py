"""The sum of independent second folds (the paper's ensemble): MGFs multiply."""

from __future__ import annotations

from dpopt._lazy import lazy_module
from dpopt.noise.second_folds.base import SecondFold

mpmath = lazy_module("mpmath")


class SumFold(SecondFold):
    r"""t = X₁ + … + X_n with independent X_i (the paper's ensemble, Alg. 1, Cor. 4.2):
    :math:`M = \prod_i M_i`, :math:`M'/M = \sum_i M_i'/M_i`. Coefficients a_i ≥ 0 of the
    paper are the components' scales (a·Gamma(k, θ) = Gamma(k, aθ), …)."""

    kind = "sum"

    def __init__(self, components):
        components = list(components)
        if not components or not all(isinstance(c, SecondFold) for c in components):
            raise ValueError("a sum needs at least one second fold")
        self.components = components

    def log_mgf(self, u):
        return sum(c.log_mgf(u) for c in self.components)

    def dlog_mgf(self, u):
        return sum(c.dlog_mgf(u) for c in self.components)

    def mgf_mp(self, u):
        return mpmath.fprod(c.mgf_mp(u) for c in self.components)

    def mgf_prime_mp(self, u):
        values = [c.mgf_mp(u) for c in self.components]
        primes = [c.mgf_prime_mp(u) for c in self.components]
        total = mpmath.mpf(0)
        for i, p in enumerate(primes):
            total += p * mpmath.fprod(v for j, v in enumerate(values) if j != i)
        return total

    @property
    def small_ball_exponent(self):
        return sum(c.small_ball_exponent for c in self.components)

    def sample(self, rng, size):
        return sum(c.sample(rng, size) for c in self.components)

    def scaled(self, c):
        return SumFold([comp.scaled(c) for comp in self.components])

    @property
    def parameters(self):
        return {"kind": self.kind, "components": [c.parameters for c in self.components]}
