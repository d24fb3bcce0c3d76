r"""The discrete staircase law on ℤ and its exact sampler: the staircase density restricted to a lattice.

The staircase density of Geng & Viswanath (2016) (:mod:`dpopt.noise.staircase`, parameters ε, step Δ, g) is
f(x) ∝ b^{⌊(|x| + (1 − g)Δ)/Δ⌋}, b = e^{−ε}: flat on [jΔ, (j + g)Δ) at b^j and on [(j + g)Δ, (j + 1)Δ) at
b^{j+1}. On a lattice hℤ with Δ = m·h (m a positive integer) and the step boundary gΔ = r·h a lattice point
(g = r/m, r ∈ {1, …, m}), its restriction to x = kh is, in units of h,

.. math:: p(k) = \frac{b^{L(k)}}{Z}, \qquad L(k) = \left\lfloor \frac{|k| + m - r}{m} \right\rfloor, \qquad
          Z = \frac{2(r + (m - r)b)}{1 - b} - 1 :

each period j ≥ 0 of m magnitudes |k| = jm + i holds a part A (i < r, weight b^j) and a part B (r ≤ i < m,
weight b^{j+1}); the central flat part is {−(r − 1), …, r − 1}. (r = 0 is the law of r = m.)

**Privacy.** For integers k, t with |t| ≤ m, ||k − t| − |k|| ≤ |t| ≤ m, and L(k) = ⌊(|k| + m − r)/m⌋ is the floor
of a function of |k| that moves by at most 1 when |k| moves by at most m, so |L(k − t) − L(k)| ≤ 1 and
p(k − t)/p(k) ∈ [b, b⁻¹]: the shift is ε-DP, with equality for |t| = m (L(k + m) = L(k) + 1 for k ≥ 0). A shift
|t| ≤ Km moves L by at most K: Kε. This is the continuous argument with the boundaries ±(j + g)Δ on the lattice.

**Moments** (closed forms, geometric sums over the periods; floats, for predicted utilities): with
A₀ = r + (m − r)b, A₁ = Σ_{i<r} i + bΣ_{r≤i<m} i, A₂ = Σ_{i<r} i² + bΣ_{r≤i<m} i² (the weights of one period),
S₀ = 1/(1 − b), S₁ = b/(1 − b)², S₂ = b(1 + b)/(1 − b)³:
E|X| = 2(mA₀S₁ + A₁S₀)/Z, E X² = 2(m²A₀S₂ + 2mA₁S₁ + A₂S₀)/Z, and
P(|X| ≤ G) = (2Σ_{a=0}^{G} w(a) − 1)/Z with Σ_{a ≤ Jm+I} w(a) = A₀(1 − b^J)/(1 − b) + b^J(min(I + 1, r) +
b·max(0, I + 1 − r)).

**Sampler** (integers only, ε = s/t rational): a fair sign S; the period j ~ Geometric(1 − e^{−s/t}) on {0, 1, …}
(:func:`~dpopt.noise.discrete_laplace.sample_geometric`, CKS 2020 Algorithm 2's ⌊(U + tV)/s⌋); the position i
uniform on {0, …, m − 1}, kept if i < r (part A) and with probability e^{−s/t} if i ≥ r (part B: CKS Algorithm 1,
:func:`~dpopt.noise.discrete_laplace.bernoulli_exp`), so that part A is chosen ∝ r and B ∝ (m − r)b; the draw
−0 is rejected (0 would be counted from both signs). Rejected candidates are drawn again whole
(:func:`~dpopt.noise.discrete_laplace.redraw_rejected`): P(S, j, i accepted) ∝ (1 − b)b^j·(1 or b), which is
b^{L(Sk)} for k = S(jm + i). Magnitudes are capped at 2⁶² (reached with probability below e^{−ε·2⁶²/m}).

References
----------
.. [1] Q. Geng and P. Viswanath, "The optimal noise-adding mechanism in differential privacy", IEEE Trans.
   Inf. Theory 62(2), 2016 (the staircase; its discrete-setting analogue on integer queries).
.. [2] C. Canonne, G. Kamath and T. Steinke, "The discrete Gaussian for differential privacy", NeurIPS 2020
   (arXiv:2004.00010), Algorithms 1 and 2.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from dpopt.noise.discrete_laplace import bernoulli_exp, redraw_rejected, sample_geometric
from dpopt.noise.marginal import Marginal
from dpopt.noise.prior_metrics import lattice_mallows_distance, power_geometric_tail

MAX_STEP = 2**40
"""Largest step m (lattice points per period) served: j·m + i stays in int64 below the 2⁶² cap."""

TAIL_NEGLECTED = 1e-20
"""The probability and first absolute moment beyond the summation range of :meth:`DiscreteStaircase.
clipped_expectations` are below this."""

MAX_SUMMED = 10**7
"""Largest (cells × summed integers) of :meth:`DiscreteStaircase.clipped_expectations`: beyond, it refuses."""


class DiscreteStaircase:
    """The discrete staircase on ℤ of parameters ε (per step), step m and boundary r (module docstring).

    Parameters
    ----------
    epsilon : Fraction
        ε > 0, rational (the sampler's Bernoulli(e^{−ε}) and geometric work on its numerator and denominator).
    step : int
        m ≥ 1, lattice points per period.
    boundary : int
        r ∈ {1, …, m}: the step boundary g·Δ = r lattice points from the start of each period.
    """

    def __init__(self, epsilon: Fraction, step: int, boundary: int):
        self.epsilon, self.step, self.boundary = Fraction(epsilon), int(step), int(boundary)
        if not (self.epsilon > 0 and 1 <= self.step <= MAX_STEP and 1 <= self.boundary <= self.step):
            raise ValueError(f"the discrete staircase needs ε > 0, 1 ≤ m ≤ 2^40 and 1 ≤ r ≤ m (got ε = "
                             f"{self.epsilon}, m = {self.step}, r = {self.boundary})")
        if self.epsilon.numerator >= 2**62 or self.epsilon.denominator >= 2**62:
            raise ValueError(f"the discrete staircase's ε = {self.epsilon} needs a numerator and denominator "
                             "below 2^62")

    # ------------------------------------------------------------ law
    def level(self, k) -> np.ndarray:
        """L(k) = ⌊(|k| + m − r)/m⌋ (integers)."""
        return (np.abs(np.asarray(k, dtype=np.int64)) + self.step - self.boundary) // self.step

    def _period(self) -> tuple[float, float, float, float]:
        """(b, A₀, A₁, A₂): e^{−ε} and one period's weighted counts (module docstring), in floats."""
        b = math.exp(-float(self.epsilon))
        m, r = self.step, self.boundary
        low1, all1 = r * (r - 1) / 2, m * (m - 1) / 2
        low2, all2 = (r - 1) * r * (2 * r - 1) / 6, (m - 1) * m * (2 * m - 1) / 6
        return b, r + (m - r) * b, low1 + b * (all1 - low1), low2 + b * (all2 - low2)

    def normaliser(self) -> float:
        """Z = Σ_k b^{L(k)} = 2(r + (m − r)b)/(1 − b) − 1."""
        b, a0, _, _ = self._period()
        return 2 * a0 / -math.expm1(-float(self.epsilon)) - 1

    def pmf(self, k) -> np.ndarray:
        """p(k) = b^{L(k)}/Z (floats)."""
        return np.exp(-float(self.epsilon) * self.level(k)) / self.normaliser()

    def abs_moment(self, p: int) -> float:
        """E|X|^p for p = 1, 2 (closed forms of the module docstring), in units of the lattice."""
        b, a0, a1, a2 = self._period()
        one_minus_b = -math.expm1(-float(self.epsilon))
        s0, s1, s2 = 1 / one_minus_b, b / one_minus_b**2, b * (1 + b) / one_minus_b**3
        m = self.step
        if p == 1:
            total = m * a0 * s1 + a1 * s0
        elif p == 2:
            total = m * m * a0 * s2 + 2 * m * a1 * s1 + a2 * s0
        else:
            raise ValueError(f"closed forms for E|X|^p with p = 1, 2 only (got {p})")
        return 2 * total / self.normaliser()

    def within(self, bound: int) -> float:
        """P(|X| ≤ G) for an integer G (0 for G < 0)."""
        if bound < 0:
            return 0.0
        b, a0, _, _ = self._period()
        periods, rest = divmod(int(bound), self.step)
        bj = math.exp(-float(self.epsilon) * periods)
        r = self.boundary
        head = a0 * -math.expm1(-float(self.epsilon) * periods) / -math.expm1(-float(self.epsilon))
        partial = bj * (min(rest + 1, r) + b * max(0, rest + 1 - r))
        return (2 * (head + partial) - 1) / self.normaliser()

    def upper_tail(self, x) -> np.ndarray:
        """P(X > x) for x ≥ 0: Σ_{|k| > G} p(k)/2 with G = ⌊x⌋ = Jm + I, i.e. b^J(A₀/(1 − b) − min(I + 1, r) −
        b·max(0, I + 1 − r))/Z (the periods from J on, less the first I + 1 magnitudes of period J)."""
        b, a0, _, _ = self._period()
        periods, rest = np.divmod(np.floor(np.asarray(x, dtype=float)).astype(np.int64), self.step)
        r = self.boundary
        head = np.minimum(rest + 1, r) + b * np.maximum(0, rest + 1 - r)
        beyond = a0 / -math.expm1(-float(self.epsilon)) - head
        return np.exp(-float(self.epsilon) * periods) * beyond / self.normaliser()

    def truncation(self, order: float = 1.0) -> int:
        """K = Jm − 1 with P(|X| > K) and E|X|^p 1{|X| > K} both at most :data:`TAIL_NEGLECTED` (p = ``order`` ≥ 1):
        the periods j ≥ J (magnitudes jm + i ≤ (j + 1)m, 0 ≤ i < m, weight b^j·A₀ per period and sign) hold
        probability 2A₀b^J/((1 − b)Z) and p-th absolute moment at most 2A₀m^pΣ_{j≥J}(j + 1)^p b^j/Z
        = 2A₀m^p b⁻¹Σ_{i≥J+1} i^p b^i/Z (:func:`~dpopt.noise.prior_metrics.power_geometric_tail`)."""
        b, a0, _, _ = self._period()
        epsilon = float(self.epsilon)
        one_minus_b = -math.expm1(-epsilon)
        z = self.normaliser()
        periods = max(1, math.ceil(46.0 / epsilon))
        while True:
            moment = 2 * a0 * self.step**order * power_geometric_tail(order, epsilon, periods + 1) / (b * z)
            probability = 2 * a0 * math.exp(-epsilon * periods) / (one_minus_b * z)
            if max(moment, probability) <= TAIL_NEGLECTED:
                return periods * self.step - 1
            periods *= 2

    def clipped_expectations(self, h, counts, floor: float) -> np.ndarray:
        """E[h(max(c_i + X, τ))] for every count c_i: Σ_{|k| ≤ K} p(k) h(max(c_i + k, τ)), K = :meth:`truncation`
        (the neglected terms, for the h of :mod:`dpopt.noise.prior_metrics` — y, log y, y^{1−α} — are at most
        (|c_i| + τ + |log τ| + 1)·10⁻²⁰ by the two tail bounds), in floats.

        Raises
        ------
        ValueError
            More than :data:`MAX_SUMMED` terms (cells × integers summed).
        """
        c = np.asarray(counts, dtype=float)
        bound = self.truncation()
        if c.size * (2 * bound + 1) > MAX_SUMMED:
            raise ValueError(f"the discrete staircase's prior metric sums {2 * bound + 1} integers per cell "
                             f"(ε' = {self.epsilon}, m = {self.step}): more than {MAX_SUMMED:.0e} terms")
        k = np.arange(-bound, bound + 1)
        return h(np.maximum(np.add.outer(c, k.astype(float)), floor)) @ self.pmf(k)

    def mallows(self, values, order: float) -> float:
        """W_p between the distribution of ``values`` and of ``values`` plus this noise
        (:func:`~dpopt.noise.prior_metrics.lattice_mallows_distance`), the law cut at K = :meth:`truncation` for
        p = ``order`` with the mass beyond moved to 0: W_p changes by at most (E|X|^p 1{|X| > K})^{1/p} ≤ 10⁻²⁰/p.

        Raises
        ------
        ValueError
            More than :data:`MAX_SUMMED` atoms (values × integers).
        """
        bound = self.truncation(order)
        if len(values) * (2 * bound + 1) > MAX_SUMMED:
            raise ValueError(f"the discrete staircase's Mallows distance couples {2 * bound + 1} integers per value "
                             f"(ε' = {self.epsilon}, m = {self.step}): more than {MAX_SUMMED:.0e} atoms")
        pmf = self.pmf(np.arange(-bound, bound + 1))
        pmf[bound] += 1.0 - pmf.sum()
        return lattice_mallows_distance(pmf, values, order)

    # ------------------------------------------------------------ sampler
    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """``size`` exact draws (int64), in integer arithmetic (module docstring)."""
        eps = self.epsilon
        return redraw_rejected(lambda n: self._candidates(rng, eps.numerator, eps.denominator, n), int(size))

    def _candidates(self, rng: np.random.Generator, s: int, t: int, size: int) -> tuple[np.ndarray, np.ndarray]:
        m, r = self.step, self.boundary
        negative = rng.integers(0, 2, size=size, dtype=np.int8).astype(bool)
        period = sample_geometric(rng, t, s, size)
        position = rng.integers(0, m, size=size, dtype=np.int64)
        accepted = np.ones(size, dtype=bool)
        upper = np.flatnonzero(position >= r)
        if upper.size:
            accepted[upper] = bernoulli_exp(rng, np.full(upper.size, s, dtype=np.int64), t)
        cap = 2**62
        large = period >= (cap - m) // m
        magnitude = np.where(large, cap, np.where(large, 0, period) * m + position)
        accepted &= ~(negative & (magnitude == 0))
        return np.where(negative, -magnitude, magnitude), accepted


class DiscreteStaircaseMarginal(Marginal):
    """The discrete staircase as the second route reads a lattice law (:mod:`dpopt.noise.marginal`)."""

    lattice = True
    log_concave = False

    def __init__(self, law: DiscreteStaircase):
        self.law = law

    @property
    def key(self) -> tuple:
        return ("discrete_staircase", str(self.law.epsilon), self.law.step, self.law.boundary)

    @property
    def scale(self) -> float:
        return max(1.0, self.law.step * (1.0 + 1.0 / float(self.law.epsilon)))

    def log_density(self, x):
        return -float(self.law.epsilon) * self.law.level(np.asarray(x)) - math.log(self.law.normaliser())

    def tail(self, x):
        return self.law.upper_tail(x)
