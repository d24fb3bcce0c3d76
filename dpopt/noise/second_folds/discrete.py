"""A finite second fold: the law the LP over mixture weights returns (Bernoulli, Laplace)."""

from __future__ import annotations

import math

import numpy as np

from dpopt._lazy import lazy_module
from dpopt.noise.second_folds.base import SecondFold, as_array, mp_exact

mpmath = lazy_module("mpmath")


class DiscreteFold(SecondFold):
    """A finite law: t = atoms[i] with probability weights[i] (normalised).

    One atom is the Laplace mechanism (t ≡ ε/Δ, Thm B.1); two atoms the Bernoulli fold
    (Example 3.1). Every extreme point of the LP over mixture weights has at most two atoms.
    """

    kind = "discrete"

    def __init__(self, atoms, weights=None):
        atoms = np.atleast_1d(np.asarray(atoms, dtype=float))
        weights = np.ones_like(atoms) if weights is None else np.atleast_1d(np.asarray(weights, dtype=float))
        if atoms.ndim != 1 or atoms.size == 0 or weights.shape != atoms.shape:
            raise ValueError("atoms and weights must be non-empty lists of the same length")
        if not (np.all(np.isfinite(atoms)) and np.all(atoms > 0)):
            raise ValueError("atoms (values of 1/b) must be finite and positive")
        if not (np.all(np.isfinite(weights)) and np.all(weights >= 0) and weights.sum() > 0):
            raise ValueError("weights must be non-negative with a positive sum")
        keep = weights > 0
        self.atoms = atoms[keep]
        self.weights = weights[keep] / weights[keep].sum()
        self._log_w = np.log(self.weights)

    def log_mgf(self, u) -> np.ndarray:
        z = self._log_w + np.multiply.outer(as_array(u), self.atoms)
        top = z.max(axis=-1)
        return top + np.log(np.exp(z - top[..., None]).sum(axis=-1))

    def dlog_mgf(self, u) -> np.ndarray:
        u = as_array(u)
        z = self._log_w + np.multiply.outer(u, self.atoms)
        z = z - z.max(axis=-1, keepdims=True)
        e = np.exp(z)
        return (e @ self.atoms) / e.sum(axis=-1)

    def mgf_mp(self, u):
        return mpmath.fsum(mp_exact(w) * mpmath.exp(u * mp_exact(t)) for t, w in zip(self.atoms, self.weights))

    def mgf_prime_mp(self, u):
        return mpmath.fsum(mp_exact(w) * mp_exact(t) * mpmath.exp(u * mp_exact(t)) for t, w in zip(self.atoms, self.weights))

    def mean(self) -> float:
        return float(self.weights @ self.atoms)

    def _inverse_moment_closed(self, p: float) -> float:
        return float(self.weights @ self.atoms ** (-p))

    @property
    def small_ball_exponent(self) -> float:
        return math.inf

    def sample(self, rng, size):
        return self.atoms[rng.choice(self.atoms.size, size=size, p=self.weights)]

    def scaled(self, c):
        return DiscreteFold(self.atoms * c, self.weights)

    @property
    def parameters(self) -> dict:
        return {"kind": self.kind, "atoms": self.atoms.tolist(), "weights": self.weights.tolist()}

    @property
    def is_degenerate(self) -> bool:
        """True for a single atom: the Laplace mechanism with scale 1/t."""
        return self.atoms.size == 1
