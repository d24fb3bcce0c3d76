r"""Numerical privacy-loss distributions with rigorous upper and lower brackets.

For a pair of output laws P (the release on a dataset X, noise W around 0) and Q (on a
neighbour, the same noise shifted by t), the privacy loss is L(y) = log p(y)/q(y) with
y ~ P, and every privacy notion is a functional of its law (the PLD; Meiser & Mohammadi
2018, Koskela et al. 2020, Google's ``dp_accounting.pld``):

.. math:: \delta(\varepsilon) = \mathbb E_P\big[(1 - e^{\varepsilon - L})_+\big],\qquad
          D_\alpha(P\|Q) = \tfrac{1}{\alpha-1}\log \mathbb E_P\big[e^{(\alpha-1)L}\big],

pure ε-DP is ess sup L ≤ ε, probabilistic DP bounds P(|L| > ε).

**Discretisation with a bracket.** The line is cut into intervals I on a window [−X, X]
with P(|W| > X) ≤ 2·10⁻¹⁸ (:data:`dpopt.noise.marginal.TAIL_FLOOR`); the mass of each
interval is exact (from the law's tail function) and the loss on it is bounded above and
below: by its values at the ends when the density is log-concave (L is then monotone),
otherwise by the unimodality of the density alone (log f on an interval is largest at
the point nearest 0 and smallest at an end). Intervals whose bracket is wider than the
loss grid's step are subdivided. The upper bound is rounded *up* to the grid and the
tails are put at +∞ (the **pessimistic** PLD); the lower bound is rounded *down* and the
tails put at −∞ (the **optimistic** PLD). Every functional above is monotone in L, so

    functional(optimistic) ≤ functional(true law) ≤ functional(pessimistic),

and for independent coordinates L = Σ L_k, so the brackets compose by convolution
(exact summation of non-negative terms; grids too long for that are first coarsened in
the safe direction). Lattice laws
(discrete noise) have no discretisation bracket: only the rounding to the grid.

This is the route ``dpopt verify`` uses to re-derive a privacy claim without the
family's closed forms (:mod:`dpopt.certificate.second_route`).

References
----------
.. [1] S. Meiser and E. Mohammadi, "Tight on budget? Tight bounds for r-fold approximate
   differential privacy", CCS 2018.
.. [2] A. Koskela, J. Jälkö and A. Honkela, "Computing tight differential privacy
   guarantees using FFT", AISTATS 2020.
.. [3] J. Dong, A. Roth and W. Su, "Gaussian differential privacy", JRSS-B 2022, Prop. 2.12.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dpopt.core.memory import dense_bytes, require_memory
from dpopt.noise.marginal import Marginal

DEFAULT_STEP = 1e-4
"""Loss grid step (and target width of a discretisation bracket), in nats."""

_DIRECT_LIMIT = 5e7
"""Convolutions of up to this many products are summed directly (exact, non-negative)."""

_MAX_POINTS = 3_000_000
"""Cap on the number of discretisation intervals of one marginal."""


@dataclass(frozen=True)
class DiscretePLD:
    """Masses on the loss grid (offset + i)·step, plus atoms at +∞ and −∞."""

    step: float
    offset: int
    masses: np.ndarray
    plus_infinity: float = 0.0
    minus_infinity: float = 0.0

    @property
    def losses(self) -> np.ndarray:
        return (self.offset + np.arange(self.masses.size)) * self.step

    @classmethod
    def from_losses(cls, losses: np.ndarray, masses: np.ndarray, step: float, up: bool,
                    plus_infinity: float = 0.0, minus_infinity: float = 0.0) -> DiscretePLD:
        """Bin ``masses`` at ``losses`` rounded up (``up``) or down to the grid; infinite losses go to the atoms."""
        losses = np.asarray(losses, dtype=float)
        masses = np.asarray(masses, dtype=float)
        finite = np.isfinite(losses)
        plus_infinity += float(masses[~finite & (losses > 0)].sum())
        minus_infinity += float(masses[~finite & (losses < 0)].sum())
        losses, masses = losses[finite], masses[finite]
        if losses.size == 0:
            return cls(step, 0, np.zeros(1), plus_infinity, minus_infinity)
        # a loss within 1e-7 steps (1e-11 nats at the default step) of a grid point is taken
        # as on it: float evaluation of the loss is itself accurate to ~1e-15 nats
        scaled = losses / step
        index = (np.ceil(scaled - 1e-7) if up else np.floor(scaled + 1e-7)).astype(np.int64)
        low = int(index.min())
        require_memory(dense_bytes(int(index.max()) - low + 1), f"the privacy-loss grid of step {step:g}")
        binned = np.bincount(index - low, weights=masses)
        return cls(step, low, binned, plus_infinity, minus_infinity)._trimmed()

    def _trimmed(self) -> DiscretePLD:
        nonzero = np.flatnonzero(self.masses > 0)
        if nonzero.size == 0:
            return DiscretePLD(self.step, 0, np.zeros(1), self.plus_infinity, self.minus_infinity)
        lo, hi = int(nonzero[0]), int(nonzero[-1])
        return DiscretePLD(self.step, self.offset + lo, self.masses[lo:hi + 1].copy(),
                           self.plus_infinity, self.minus_infinity)

    def coarsened(self, factor: int, up: bool) -> DiscretePLD:
        """The same PLD on a grid ``factor`` times coarser, each loss rounded up (``up``) or down."""
        index = self.offset + np.arange(self.masses.size)
        new = -((-index) // factor) if up else index // factor
        low = int(new.min())
        masses = np.bincount(new - low, weights=self.masses)
        return DiscretePLD(self.step * factor, low, masses, self.plus_infinity, self.minus_infinity)._trimmed()

    def _on_grid_of(self, other: DiscretePLD, up: bool) -> DiscretePLD:
        """This PLD on ``other``'s grid when that one is coarser (an integer multiple of this step),
        each loss rounded up (``up``) or down; else itself."""
        if other.step <= self.step:
            return self
        factor = round(other.step / self.step)
        if factor < 2 or abs(factor * self.step - other.step) > 1e-12 * other.step:
            raise ValueError(f"PLD grids of steps {self.step!r} and {other.step!r} are not nested")
        coarse = self.coarsened(factor, up)
        return DiscretePLD(other.step, coarse.offset, coarse.masses, coarse.plus_infinity, coarse.minus_infinity)

    def compose(self, other: DiscretePLD, up: bool) -> DiscretePLD:
        """The PLD of the sum of two independent losses (a product of two pairs).

        Summed exactly: over the non-zero masses when there are few (lattice laws), else by
        direct convolution; when both grids are too long for that, both are first coarsened
        (rounding in the direction ``up`` says, so the bracket stays valid). Two PLDs on
        different grids (one already coarsened by a composition) are first brought to the
        coarser one, rounded the same way. No FFT: its round-off would put spurious mass at
        large losses, which the Rényi and pure-ε functionals amplify.

        Raises
        ------
        ValueError
            When one step is not an integer multiple of the other.
        """
        a, b = self._on_grid_of(other, up), other._on_grid_of(self, up)
        while True:
            nza, nzb = np.flatnonzero(a.masses), np.flatnonzero(b.masses)
            if nza.size * nzb.size <= _DIRECT_LIMIT and nza.size * nzb.size < a.masses.size * b.masses.size / 4:
                masses = _sparse_convolve(a.masses, nza, b.masses, nzb)
                break
            if a.masses.size * b.masses.size <= _DIRECT_LIMIT:
                masses = np.convolve(a.masses, b.masses)
                break
            a, b = a.coarsened(2, up), b.coarsened(2, up)
        fa, fb = float(a.masses.sum()), float(b.masses.sum())
        plus = a.plus_infinity * (fb + b.plus_infinity) + fa * b.plus_infinity
        minus = a.minus_infinity * (fb + b.minus_infinity) + fa * b.minus_infinity
        if (a.plus_infinity + b.plus_infinity) * (a.minus_infinity + b.minus_infinity) > 0:
            raise ValueError("a PLD bracket side carries atoms at both +∞ and −∞")
        return DiscretePLD(a.step, a.offset + b.offset, masses, plus, minus)._trimmed()

    def delta(self, epsilon) -> np.ndarray:
        r"""δ(ε) = Σ m_i (1 − e^{ε − L_i})_+ + P(L = +∞), for an array of ε."""
        eps = np.atleast_1d(np.asarray(epsilon, dtype=float))
        losses, masses = self.losses, self.masses
        suffix_mass = np.concatenate([np.cumsum(masses[::-1])[::-1], [0.0]])
        weighted = masses * np.exp(-np.maximum(losses, -700.0))
        suffix_weighted = np.concatenate([np.cumsum(weighted[::-1])[::-1], [0.0]])
        first = np.searchsorted(losses, eps, side="right")
        with np.errstate(divide="ignore"):  # e^ε Σ_{L>ε} m e^{−L} ≤ Σ_{L>ε} m: no overflow in log-space
            value = suffix_mass[first] - np.exp(eps + np.log(suffix_weighted[first]))
        return np.maximum(value, 0.0) + self.plus_infinity

    def probability_above(self, threshold: float) -> float:
        """P(L > threshold), the atom at +∞ included."""
        return float(self.masses[self.losses > threshold].sum()) + self.plus_infinity

    def probability_below(self, threshold: float) -> float:
        """P(L < threshold), the atom at −∞ included."""
        return float(self.masses[self.losses < threshold].sum()) + self.minus_infinity

    def max_loss(self) -> float:
        """The largest finite loss with positive mass (the atoms at ±∞ are not looked at)."""
        positive = self.masses > 0
        return float(self.losses[positive].max()) if positive.any() else -math.inf

    def renyi(self, orders) -> np.ndarray:
        r"""D_α = log(Σ m_i e^{(α−1)L_i})/(α − 1) for an array of orders α > 1 (+∞ with a +∞ atom)."""
        from scipy import special  # imported where used (start-up of `dpopt verify`)

        alphas = np.atleast_1d(np.asarray(orders, dtype=float))
        if self.plus_infinity > 0:
            return np.full(alphas.shape, math.inf)
        keep = self.masses > 0
        log_m, losses = np.log(self.masses[keep]), self.losses[keep]
        return np.array([special.logsumexp(log_m + (a - 1.0) * losses) / (a - 1.0) for a in alphas])


@dataclass(frozen=True)
class PLDBracket:
    """A pessimistic and an optimistic PLD of the same pair (see the module docstring)."""

    upper: DiscretePLD
    lower: DiscretePLD

    def compose(self, other: PLDBracket) -> PLDBracket:
        return PLDBracket(self.upper.compose(other.upper, up=True), self.lower.compose(other.lower, up=False))


def _sparse_convolve(a: np.ndarray, nza: np.ndarray, b: np.ndarray, nzb: np.ndarray) -> np.ndarray:
    """np.convolve(a, b) from the non-zero entries only (blocks of at most 4·10⁶ products)."""
    out = np.zeros(a.size + b.size - 1)
    rows = max(1, 4_000_000 // max(1, nzb.size))
    for start in range(0, nza.size, rows):
        ia = nza[start:start + rows]
        np.add.at(out, (ia[:, None] + nzb[None, :]).ravel(), (a[ia][:, None] * b[nzb][None, :]).ravel())
    return out


def _interval_masses(marginal: Marginal, points: np.ndarray) -> np.ndarray:
    """P(a ≤ W ≤ c) on each interval [a, c] between consecutive ``points``, for a continuous
    symmetric law, from the tail on the far side (evaluated once per point)."""
    tail = marginal.tail(np.abs(points))
    a, c, ta, tc = points[:-1], points[1:], tail[:-1], tail[1:]
    right = ta - tc                  # 0 ≤ a
    left = tc - ta                   # c ≤ 0
    across = 1.0 - ta - tc           # a < 0 < c
    return np.maximum(np.where(a >= 0, right, np.where(c <= 0, left, across)), 0.0)


def _loss_bounds(marginal: Marginal, shift: float, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(upper, lower) bounds of L(y) = log f(y) − log f(y − t) on each interval of ``points`` (t ≥ 0).

    Log-concave f: L is non-increasing, so L(a) and L(c). Otherwise, f symmetric and
    non-increasing in |x|: log f on [a, c] is at most log f(0) if the interval holds 0, else
    the larger end value, and at least the smaller end value.
    """
    f = marginal.log_density
    with np.errstate(invalid="ignore"):
        here, there = f(points), f(points - shift)
        if marginal.log_concave:
            loss = here - there
            return loss[:-1], loss[1:]
        a, c = points[:-1], points[1:]
        peak = float(f(0.0))
        top = np.where((a < 0) & (c > 0), peak, np.maximum(here[:-1], here[1:]))
        top_shift = np.where((a - shift < 0) & (c - shift > 0), peak, np.maximum(there[:-1], there[1:]))
        return top - np.minimum(there[:-1], there[1:]), np.minimum(here[:-1], here[1:]) - top_shift


def _initial_grid(marginal: Marginal, top: float) -> np.ndarray:
    """Uniform at spacing s/64 on [−64s, 64s] (s the scale), geometric (ratio 1.01) beyond, to ±top."""
    s = marginal.scale
    inner = min(top, 64.0 * s)
    grid = np.linspace(0.0, inner, int(round(64.0 * inner / s)) + 1)
    if top > inner:
        outer = inner * 1.01 ** np.arange(1, int(math.ceil(math.log(top / inner) / math.log(1.01))) + 1)
        grid = np.concatenate([grid, np.minimum(outer, top)])
        grid = np.unique(grid)
    return np.concatenate([-grid[:0:-1], grid])


def _refine(points: np.ndarray, widths: np.ndarray, step: float) -> np.ndarray:
    """Split each interval into ⌈bracket/step⌉ equal parts (at most 512), within the point budget."""
    parts = np.clip(np.ceil(widths / step), 1, 512)
    parts[~np.isfinite(parts)] = 512
    total = parts.sum()
    if total > _MAX_POINTS:
        parts = np.maximum(1, np.floor(parts * _MAX_POINTS / total))
    parts = parts.astype(np.int64)
    a, c = points[:-1], points[1:]
    start = np.repeat(a, parts)
    within = np.arange(parts.sum()) - np.repeat(np.cumsum(parts) - parts, parts)
    fine = start + np.repeat((c - a) / parts, parts) * within
    return np.concatenate([fine, points[-1:]])


def marginal_pld(marginal: Marginal, shift: float, step: float = DEFAULT_STEP) -> PLDBracket:
    """The PLD bracket of one coordinate: P = law of W, Q = law of W + t (t = ``shift``).

    The law is symmetric, so the loss of a shift −t has the same distribution as that of t.

    Raises
    ------
    ValueError
        A lattice law with a non-integer shift (then P and Q have disjoint supports, the
        caller's business to report).
    """
    t = abs(float(shift))
    top = marginal.window()
    tails = 2.0 * float(marginal.tail(top))
    if marginal.lattice:
        if abs(t - round(t)) > 1e-9:
            raise ValueError(f"a lattice law shifted by a non-integer {t}")
        k = np.arange(-int(top), int(top) + 1, dtype=float)
        masses = np.exp(marginal.log_density(k))
        losses = marginal.log_density(k) - marginal.log_density(k - round(t))
        return PLDBracket(DiscretePLD.from_losses(losses, masses, step, up=True, plus_infinity=tails),
                          DiscretePLD.from_losses(losses, masses, step, up=False, minus_infinity=tails))
    if t == 0.0:
        inside = np.array([1.0 - tails])
        return PLDBracket(DiscretePLD(step, 0, inside, plus_infinity=tails),
                          DiscretePLD(step, 0, inside, minus_infinity=tails))
    points = _initial_grid(marginal, top)
    up, low = _loss_bounds(marginal, t, points)
    for _ in range(2):
        widths = up - low
        if not (widths > step).any():
            break
        points = _refine(points, widths, step)
        up, low = _loss_bounds(marginal, t, points)
    masses = _interval_masses(marginal, points)
    return PLDBracket(DiscretePLD.from_losses(up, masses, step, up=True, plus_infinity=tails),
                      DiscretePLD.from_losses(low, masses, step, up=False, minus_infinity=tails))


def product_pld(marginals, shifts, step: float = DEFAULT_STEP) -> PLDBracket:
    """The PLD bracket of independent coordinates W_k ~ ``marginals[k]`` shifted by ``shifts[k]``.

    Coordinates with zero shift contribute no loss and are skipped; identical (law, |shift|)
    pairs are computed once.
    """
    cache: dict[tuple, PLDBracket] = {}
    total: PLDBracket | None = None
    for marginal, t in zip(marginals, shifts):
        if t == 0:
            continue
        key = (marginal.key, abs(float(t)))
        if key not in cache:
            cache[key] = marginal_pld(marginal, t, step)
        total = cache[key] if total is None else total.compose(cache[key])
    if total is None:
        point = DiscretePLD(step, 0, np.array([1.0]))
        return PLDBracket(point, point)
    return total


def profile_tradeoff(alpha, epsilons, deltas) -> np.ndarray:
    r"""A lower bound on the trade-off curve of a pair that is (ε_j, δ_j)-DP in both orders.

    .. math:: f(\alpha) = \max_j \max\{0,\ 1 - \delta_j - e^{\varepsilon_j}\alpha,\
              e^{-\varepsilon_j}(1 - \delta_j - \alpha)\}

    (Dong, Roth & Su 2022, Prop. 2.12 and eq. 2.6: (ε, δ)-DP is f_{ε,δ}-DP, and an
    envelope of valid bounds is valid.) With δ_j from a pessimistic PLD the curve is a
    certified lower bound of the true trade-off.
    """
    a = np.atleast_1d(np.asarray(alpha, dtype=float))[:, None]
    e = np.asarray(epsilons, dtype=float)[None, :]
    d = np.asarray(deltas, dtype=float)[None, :]
    pieces = np.maximum(np.maximum(0.0, 1.0 - d - np.exp(e) * a), np.exp(-e) * (1.0 - d - a))
    return pieces.max(axis=1)
