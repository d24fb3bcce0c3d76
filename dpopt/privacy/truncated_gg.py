r"""Pure ε-DP generalized Gaussian noise on a bounded box: truncated and boundary-inflated.

When every answer :math:`s_k` lies in a public, data-independent interval
:math:`[c_{k0}, c_{k1}]` (width :math:`R_k`), two bounded GG mechanisms are ε-DP for p ≥ 1
(Liu 2019, Definitions 5–6):

* **truncated** (Def. 5): :math:`s^*_k` is drawn from GG(s_k, b, p) restricted to the box,
  density :math:`g_b(s^*_k - s_k)/A(s_k)` with :math:`A(s) = \Pr(c_0 \le s^* \le c_1)`;
* **boundary-inflated truncated (BIT)** (Def. 6): out-of-box draws of GG(s_k, b, p) are moved to
  the nearest bound, so the output has point masses at the bounds.

Calibrations:

* the paper's Eq. 7 (and the looser Eq. 8), certified in exact rational arithmetic:

  .. math:: b^p \ge \frac{2}{\varepsilon}\Big(\sum_k\sum_{j=1}^{p-1}\binom{p}{j}
            R_k^{p-j}\Delta_{1,k}^j + \Delta_p^p\Big);

* a numerically tight calibration, certified by a bound on the worst-case loss (digest §3.3
  shows Eq. 7 is about 3× conservative for p ≥ 2).

**The certified per-coordinate bound.** Shift the box to [0, R]. For the truncated GG the loss
:math:`L(s^*) = [|s^*-s'|^p - |s^*-s|^p]/b^p + \log A(s') - \log A(s)` is monotone in
:math:`s^*` (p ≥ 1), so its supremum is at :math:`s^* \in \{0, R\}`, where it equals
:math:`F(s') - F(s)` with :math:`F(x) = (x/b)^p + \log A(x)` (and the mirror image at R).
Hence the worst loss of one coordinate moved by at most D is the oscillation

.. math:: \ell(D) = \sup_{x,y \in [0,R],\ |x-y| \le D} |F(x) - F(y)|
          \;\le\; \max_{|i-j| \le \lfloor D/h\rfloor + 1} |F(x_i) - F(x_j)| + \mathrm{Lip}(F)\,h

on a grid of step h, with :math:`\mathrm{Lip}(F) \le pR^{p-1}/b^p + g_b(0)/A(0)` (A is smallest
at the bounds). For BIT the supremum has a closed form: the interior density ratio gives
:math:`(R^p - (R-D)^p)/b^p` and the point masses, whose log is concave (the GG density is
log-concave for p ≥ 1), give :math:`\log Q(1/p, ((R-D)/b)^p) - \log Q(1/p, (R/b)^p)`; the
larger of the two is ℓ(D). A neighbour moving coordinates by |v_k| changes the loss by at
most :math:`\sum_k \ell_k(|v_k|)`; the worst case over the space is the maximum over the rows
of :class:`dpopt.sensitivity.lp.DifferenceMagnitudes`.

BIT at p = 1 is Laplace noise followed by clamping: post-processing of the ε-DP Laplace
mechanism, so b = Δ₁/ε (digest §3.3 table).

References
----------
.. [1] F. Liu, "Generalized Gaussian mechanism for differential privacy", IEEE TKDE 2019,
   Definitions 5–6, Eqs. 6–12, Appendix C (digest ``papers/002_generalized_gaussian.md`` §3.3–3.4).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from dpopt._lazy import lazy_module
from dpopt.errors import CalibrationError
from dpopt.noise.generalized_gaussian import GeneralizedGaussian

mpmath = lazy_module("mpmath")
optimize = lazy_module("scipy.optimize")
special = lazy_module("scipy.special")

VARIANTS = ("truncated", "boundary_inflated")
_GRID_PER_SENSITIVITY = 2000
_MAX_GRID = 400_000
_FLOAT_SLACK = 1e-9


def grid_points(width: float, shift: float) -> int | None:
    """Grid size for the truncated bound (about 2000 points per sensitivity), None if too large."""
    n = math.ceil(_GRID_PER_SENSITIVITY * width / shift) if shift > 0 else 2
    n = max(n, 4000)
    return n if n <= _MAX_GRID else None


def _grid_size(width: float, shift: float, points: int | None = None) -> int:
    """``points``, else :func:`grid_points`; a CalibrationError when the box is too wide for the grid."""
    n = points or grid_points(width, shift)
    if n is None:
        raise CalibrationError(
            f"the box is {width / shift:.3g} sensitivities wide: too wide to certify the truncated "
            f"bound on a grid of at most {_MAX_GRID} points"
        )
    return n


# ----------------------------------------------------------- paper's Eq. 7/8
def paper_scale_power(epsilon, p: int, widths, per_coordinate, lp_power, loose: bool = False) -> Fraction:
    r"""The right side of Eq. 7 (or Eq. 8 when ``loose``): the smallest admissible :math:`b^p`, exactly.

    Parameters
    ----------
    widths, per_coordinate : sequences of float
        :math:`R_k = c_{k1} - c_{k0}` and :math:`\Delta_{1,k}`.
    lp_power : Fraction or float
        :math:`\Delta_p^p` (ignored by Eq. 8, which bounds it by :math:`\sum_k\Delta_{1,k}^p`).
    """
    p = int(p)
    total = Fraction(0)
    top = p if loose else p - 1
    for width, d in zip(widths, per_coordinate):
        w, s = Fraction(width), Fraction(d)
        total += sum((math.comb(p, j) * w ** (p - j) * s**j for j in range(1, top + 1)), Fraction(0))
    if not loose:
        total += Fraction(lp_power)
    return 2 * total / Fraction(epsilon)


def paper_scale(epsilon, p: int, widths, per_coordinate, lp_power, loose: bool = False) -> float:
    """Eq. 7 (or 8): the smallest float b with :math:`b^p` ≥ the exact right side."""
    need = paper_scale_power(epsilon, p, widths, per_coordinate, lp_power, loose)
    b = float(need) ** (1.0 / p)
    while Fraction(b) ** int(p) < need:
        b = math.nextafter(b, math.inf)
    return b


# ------------------------------------------------------------- loss bounds
@dataclass(frozen=True)
class CoordinateLoss:
    """A certified bound on one coordinate's worst-case privacy loss.

    Attributes
    ----------
    value : float
        The bound (grid maximum + Lipschitz remainder + float slack, or the closed form).
    method : str
    grid_max, remainder : float
        For the grid bound: its two parts (0 for closed forms).
    argmax : tuple of float
        For the grid bound: the grid pair (x, y) with F(y) − F(x) = ``grid_max``.
    """

    value: float
    method: str
    grid_max: float = 0.0
    remainder: float = 0.0
    argmax: tuple[float, float] = (0.0, 0.0)


def _log_mass(g: GeneralizedGaussian, width: float, x: np.ndarray) -> np.ndarray:
    """log A(x) = log Pr(−x ≤ X ≤ R − x) for X ~ GG(0, b, p)."""
    return np.log(g.interval_probability(-x, width - x))


def _window_oscillation(values: np.ndarray, span: int) -> tuple[float, int, int]:
    """max |F_i − F_j| over |i − j| ≤ span, with the maximizing pair (sparse-table window max/min)."""
    n = values.size
    length = min(span + 1, n)
    level = 1
    hi, lo = values.copy(), values.copy()
    while 2 * level <= length:
        hi = np.maximum(hi[:-level], hi[level:])
        lo = np.minimum(lo[:-level], lo[level:])
        level *= 2
    starts = n - length + 1
    offset = length - level
    window_max = np.maximum(hi[:starts], hi[offset : offset + starts])
    window_min = np.minimum(lo[:starts], lo[offset : offset + starts])
    i = int(np.argmax(window_max - window_min))
    block = values[i : i + length]
    return float(window_max[i] - window_min[i]), i + int(np.argmax(block)), i + int(np.argmin(block))


def truncated_loss_function(scale: float, p: float, width: float):
    r"""F(x) = (x/b)^p + log A(x) on [0, R] (vectorized), the function whose oscillation is the loss."""
    g = GeneralizedGaussian(p, scale)

    def f(x):
        x = np.asarray(x, dtype=float)
        return (x / scale) ** p + _log_mass(g, width, x)

    return f


def truncated_coordinate_loss(
    scale: float, p: float, width: float, shift: float, points: int | None = None
) -> CoordinateLoss:
    r"""Certified bound on :math:`\sup_{|x-y|\le D}|F(x)-F(y)|` for the truncated GG (module docstring).

    Parameters
    ----------
    scale, p : float
        b and p ≥ 1.
    width, shift : float
        The box width R and the largest move D of the coordinate.
    points : int, optional
        Grid size (default :func:`grid_points`).

    Raises
    ------
    CalibrationError
        When the box is too wide relative to D for a fine enough grid.
    """
    shift = min(shift, width)
    if shift <= 0:
        return CoordinateLoss(0.0, "coordinate does not move")
    n = _grid_size(width, shift, points)
    g = GeneralizedGaussian(p, scale)
    x = np.linspace(0.0, width, n + 1)
    h = width / n
    values = truncated_loss_function(scale, p, width)(x)
    span = math.floor(shift / h) + 1
    grid_max, top, bottom = _window_oscillation(values, span)
    a_min = float(g.interval_probability(0.0, width))
    lipschitz = p * width ** (p - 1) / scale**p + float(g.pdf(0.0)) / a_min
    remainder = lipschitz * h
    slack = _FLOAT_SLACK * (1.0 + float(np.max(np.abs(values))))
    return CoordinateLoss(
        grid_max + remainder + slack,
        f"oscillation of F on a {n + 1}-point grid + Lipschitz remainder {remainder:.3g}",
        grid_max,
        remainder,
        (float(x[bottom]), float(x[top])),
    )


def _log_upper_gamma(a: float, x: float) -> float:
    """log Q(a, x), falling back to mpmath where the float value underflows."""
    q = float(special.gammaincc(a, x))
    if q > 1e-280:
        return math.log(q)
    return float(mpmath.log(mpmath.gammainc(a, x, mpmath.inf, regularized=True)))


def bit_coordinate_loss(scale: float, p: float, width: float, shift: float) -> CoordinateLoss:
    r"""The exact worst-case loss of one BIT coordinate moved by at most D (module docstring).

    .. math:: \ell(D) = \max\Big(\frac{R^p - (R-D)^p}{b^p},\;
              \log\frac{Q(1/p, ((R-D)/b)^p)}{Q(1/p, (R/b)^p)}\Big).
    """
    shift = min(shift, width)
    if shift <= 0:
        return CoordinateLoss(0.0, "coordinate does not move")
    interior = (width**p - (width - shift) ** p) / scale**p
    a = 1.0 / p
    mass = _log_upper_gamma(a, ((width - shift) / scale) ** p) - _log_upper_gamma(a, (width / scale) ** p)
    return CoordinateLoss(
        max(interior, mass), "closed form (interior density ratio, log-concave boundary masses)"
    )


def bit_coordinate_loss_mp(scale: float, p: float, width: float, shift: float) -> mpmath.mpf:
    """:func:`bit_coordinate_loss` evaluated in 60-digit arithmetic (the certificate check)."""
    with mpmath.workdps(60):
        b, pp, w = mpmath.mpf(scale), mpmath.mpf(p), mpmath.mpf(width)
        d = min(mpmath.mpf(shift), w)
        if d <= 0:
            return mpmath.mpf(0)
        interior = (w**pp - (w - d) ** pp) / b**pp
        a = 1 / pp
        mass = mpmath.log(mpmath.gammainc(a, ((w - d) / b) ** pp, mpmath.inf, regularized=True)) - mpmath.log(
            mpmath.gammainc(a, (w / b) ** pp, mpmath.inf, regularized=True)
        )
        return max(interior, mass)


def truncated_loss_mp(scale: float, p: float, width: float, x: float, y: float) -> mpmath.mpf:
    """F(y) − F(x) for the truncated GG in 60-digit arithmetic (spot check of the float grid)."""
    with mpmath.workdps(60):
        b, pp, w = mpmath.mpf(scale), mpmath.mpf(p), mpmath.mpf(width)
        a = 1 / pp

        def big_f(t):
            t = mpmath.mpf(t)
            half = lambda u: mpmath.gammainc(a, 0, (u / b) ** pp, regularized=True) / 2
            return (t / b) ** pp + mpmath.log(half(t) + half(w - t))

        return big_f(y) - big_f(x)


@dataclass(frozen=True)
class MovePattern:
    """How the rows move the coordinates: the distinct (box width, move) pairs, and per entry which one.

    Attributes
    ----------
    pairs : numpy.ndarray
        Shape (u, 2): distinct (R_k, |v_k|) with |v_k| > 0.
    index : numpy.ndarray
        Shape (m, d), int: the pair of each entry of the rows, −1 where the coordinate does not move.
    """

    pairs: np.ndarray
    index: np.ndarray


def move_pattern(widths, rows) -> MovePattern:
    """The :class:`MovePattern` of ``rows`` (moves capped at the box widths: both answers lie in the box)."""
    widths = np.asarray(widths, dtype=float)
    rows = np.minimum(np.atleast_2d(np.asarray(rows, dtype=float)), widths)
    keys = np.stack([np.broadcast_to(widths, rows.shape).ravel(), rows.ravel()], axis=1)
    moving = keys[:, 1] > 0
    pairs, inverse = np.unique(keys[moving], axis=0, return_inverse=True)
    index = np.full(keys.shape[0], -1)
    index[moving] = inverse.reshape(-1)
    return MovePattern(pairs, index.reshape(rows.shape))


def worst_case_loss(
    variant: str, scale: float, p: float, widths, rows, points: int | None = None, proxy: bool = False
) -> tuple[float, str]:
    r"""Certified bound on the worst-case loss: :math:`\max_{\text{rows}}\sum_k \ell_k(|v_k|)`.

    Parameters
    ----------
    variant : {'truncated', 'boundary_inflated'}
    widths : array of shape (d,)
        Box widths R_k.
    rows : array of shape (m, d)
        Difference magnitudes dominating S (:class:`dpopt.sensitivity.lp.DifferenceMagnitudes`).
    points : int, optional
        Grid size of the truncated bound (default :func:`grid_points`).
    proxy : bool
        Return the grid maxima only (no remainder): an estimate used to search, never to certify.
    """
    return pattern_loss(variant, scale, p, move_pattern(widths, rows), points, proxy)


def pattern_loss(
    variant: str, scale: float, p: float, pattern: MovePattern, points: int | None = None, proxy: bool = False
) -> tuple[float, str]:
    """:func:`worst_case_loss` for a precomputed :class:`MovePattern`."""
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS} (got {variant!r})")
    values, methods = [], set()
    for w, v in pattern.pairs:
        if variant == "truncated":
            loss = truncated_coordinate_loss(scale, p, float(w), float(v), points)
            values.append(loss.grid_max if proxy else loss.value)
        else:
            loss = bit_coordinate_loss(scale, p, float(w), float(v))
            values.append(loss.value)
        methods.add(loss.method)
    per_entry = np.append(np.asarray(values, dtype=float), 0.0)  # index −1: a coordinate that does not move
    totals = per_entry[pattern.index].sum(axis=1)
    return float(totals.max()), "; ".join(sorted(methods))


def tight_scale(epsilon: float, variant: str, p: float, widths, rows) -> float:
    """The smallest b (to about 0.1%) whose certified worst-case loss bound is ≤ ε.

    Bisection on a proxy of the bound (for the truncated GG: grid maxima on 4000 points, no
    remainder), then upward steps of 0.1% until the certified bound (:func:`worst_case_loss`)
    accepts. The certified bound, not the search, is what a certificate relies on.

    Raises
    ------
    CalibrationError
        If the bound cannot be certified (box too wide for the grid, or no scale found).
    """
    if variant == "boundary_inflated" and p == 1:
        raise CalibrationError("BIT at p = 1 is clamped Laplace noise: use b = Δ₁/ε (post-processing)")
    rows = np.atleast_2d(np.asarray(rows, dtype=float))
    pattern = move_pattern(widths, rows)
    if variant == "truncated":  # the certified bound's grid depends on R/D only: fail before searching
        for w, v in pattern.pairs:
            _grid_size(float(w), float(v))

    def proxy(b: float) -> float:
        return pattern_loss(variant, b, p, pattern, points=4000, proxy=True)[0]

    lo = hi = float(np.max(rows))
    while proxy(hi) > epsilon:
        hi *= 2.0
        if hi > lo * 2.0**40:
            raise CalibrationError(f"no {variant} GG scale found for epsilon={epsilon}")
    while proxy(lo) <= epsilon and lo > hi * 2.0**-40:
        lo /= 2.0
    for _ in range(45):
        mid = math.sqrt(lo * hi)
        if proxy(mid) <= epsilon:
            hi = mid
        else:
            lo = mid
    for _ in range(200):
        if pattern_loss(variant, hi, p, pattern)[0] <= epsilon:
            return hi
        hi *= 1.001
    raise CalibrationError(f"the {variant} GG scale could not be certified for epsilon={epsilon}")


def scale_lower_bound(epsilon: float, variant: str, p: float, widths, rows) -> float:
    r"""A b below every scale :func:`tight_scale` can return: a necessary condition on the
    certified bound, from loss values the worst case must reach (module docstring's notation).

    :func:`tight_scale` returns a b whose certified bound Σ_k ℓ_k(|v_k|) is ≤ ε for every row,
    and each certified ℓ_k is at least the true supremum of |F(x) − F(y)| over |x − y| ≤ D
    (truncated) or equals the closed form (BIT). The supremum is at least

    * BIT: the interior ratio (R^p − (R − D)^p)/b^p (a term of its closed form);
    * truncated: F(D') − F(0) ≥ (D'/b)^p with D' = min(D, R/2) (A(x), the mass of a window
      of width R around −x, grows as the window centres on 0, i.e. on [0, R/2]); and
      F(R) − F(R − D) ≥ (R^p − (R − D)^p)/b^p + log A(0), as A(R) = A(0) and A ≤ 1, with
      A(0) = ½ P(|X| ≤ R) = ½ P(1/p, (R/b)^p) (regularised lower incomplete gamma).

    Every one of these decreases in b, so the largest row sum of each family of terms, set
    equal to ε, gives a root (closed form, or Brent's method in log b for the term with
    log A(0)); the result is the larger root, rounded down by 1e-9 relative.
    """
    pattern = move_pattern(widths, rows)
    if pattern.pairs.size == 0:
        return 0.0
    width, shift = pattern.pairs[:, 0], pattern.pairs[:, 1]

    def row_sums(per_pair: np.ndarray) -> float:
        return float(np.append(per_pair, 0.0)[pattern.index].sum(axis=1).max())

    far = width**p - (width - shift) ** p  # times b^{−p}: the interior ratio at the far bound
    if variant == "boundary_inflated":
        return (row_sums(far) / epsilon) ** (1.0 / p) * (1 - 1e-9)
    near = np.minimum(shift, width / 2.0) ** p
    b_near = (row_sums(near) / epsilon) ** (1.0 / p)

    def excess(log_b: float) -> float:
        b = math.exp(log_b)
        log_mass = np.log(0.5 * special.gammainc(1.0 / p, (width / b) ** p))
        return row_sums(far / b**p + log_mass) - epsilon

    hi = math.log((row_sums(far) / epsilon) ** (1.0 / p))  # log A(0) < 0: the root lies below
    if excess(hi) > 0:
        return max(b_near, math.exp(hi)) * (1 - 1e-9)
    lo = hi
    for _ in range(200):
        lo -= math.log(2.0)
        if excess(lo) > 0:
            break
    else:
        return b_near * (1 - 1e-9)
    return max(b_near, math.exp(optimize.brentq(excess, lo, hi, xtol=1e-12))) * (1 - 1e-9)
