r"""A certified "is μ-GDP" check of a trade-off function (:mod:`dpopt.privacy.tradeoff`).

:func:`gdp_margin` certifies :math:`T \ge G_\mu` on all of [0, 1] by branch and bound:
on each interval [a, b] of a grid, T lies above its tangent lines at a and b (every
trade-off function is convex, Dong, Roth & Su Prop. 2.2) and :math:`G_\mu` lies below
its chord (it is convex), so

.. math:: \min_{[a,b]} (T - G_\mu) \ \ge\ \min_{x \in [a,b]} \big(\max(\ell_a, \ell_b)(x) - c(x)\big),

a piecewise-linear minimum attained at a, b or where the tangents cross. Intervals whose
bound does not clear a relative floating-point allowance (10⁻¹¹ of the magnitudes
involved) are split until every one does (pass), or a grid point with
:math:`T - G_\mu` below its allowance is found, or the budget runs out (fail). Where T
and G are near 1 they are compared as 1 − T and 1 − G, each computed directly (e.g.
:math:`1 - G_\mu(\alpha) = \Phi(\mu + \Phi^{-1}(\alpha))`), so no accuracy is lost at
tiny α or large μ. An exact touch at a grid point (T(0) = G(0) = 1) is accepted; a
tangency elsewhere cannot be certified, so calibrations leave a margin of ~10⁻¹⁰.
When T and :math:`G_\mu` are both symmetric (T = T⁻¹), checking α ≤ Φ(−μ/2), the fixed
point of :math:`G_\mu`, suffices: a point (α, G(α)) below the diagonal is the mirror
image of one above it, and f(α′) ≥ G(α′) = α implies f(α) ≥ α′ for a symmetric,
decreasing f.

References
----------
.. [1] J. Dong, A. Roth and W. Su, "Gaussian differential privacy", JRSS-B 84 (2022).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dpopt.core import normal
from dpopt.core.rounding import nudge_until
from dpopt.privacy.tradeoff import GaussianTradeOff, TradeOff

_REL_ALLOWANCE = 1e-11
_MAX_ROUNDS = 60
_MAX_NODES = 100_000


@dataclass(frozen=True)
class GDPMargin:
    """The outcome of :func:`gdp_margin`: is T ≥ G_μ on [0, 1]?

    Attributes
    ----------
    mu : float
    passed : bool
        True only when every interval's certified lower bound on T − G_μ cleared the
        floating-point allowance.
    lower_bound : float
        The smallest certified lower bound on T − G_μ over the intervals (≥ 0 when passed).
    observed_min : float
        T(α) − G_μ(α) at the grid point where T comes closest to G_μ in the μ sense (see
        ``mu_observed``).
    argmin : float
        That grid point α.
    mu_observed : float
        The largest Φ⁻¹(1 − α) − Φ⁻¹(T(α)) over the grid points: the μ the curve T
        reaches there (≤ μ when T ≥ G_μ at the grid points).
    nodes : int
        Grid points evaluated.
    method : str
    """

    mu: float
    passed: bool
    lower_bound: float
    observed_min: float
    argmin: float
    mu_observed: float
    nodes: int
    method: str


def _split(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    geometric = (a > 0) & (b > 4.0 * a) & (b <= 0.5)
    upper = (a >= 0.5) & ((1.0 - a) > 4.0 * (1.0 - b)) & (b < 1.0)
    mid = 0.5 * (a + b)
    mid = np.where(geometric, np.sqrt(a * b), mid)
    return np.where(upper, 1.0 - np.sqrt((1.0 - a) * (1.0 - b)), mid)


def _values(tradeoff: TradeOff, gauss: GaussianTradeOff, x: np.ndarray) -> np.ndarray:
    """Rows T, 1 − T, G, 1 − G and a subgradient of T (NaN if none) at the points x."""
    g = tradeoff._subgradient(x)
    return np.vstack([tradeoff._evaluate(x), tradeoff._complement(x), gauss._evaluate(x),
                      gauss._complement(x), np.full_like(x, np.nan) if g is None else g])


def _node_view(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """T − G at each point, computed from whichever of (T, G) or (1 − T, 1 − G) is smaller,
    and the rounding allowance of that difference."""
    T, CT, G, CG = v[0], v[1], v[2], v[3]
    direct = T + G <= 1.0
    diff = np.where(direct, T - G, CG - CT)
    return diff, _REL_ALLOWANCE * np.where(direct, np.abs(T) + np.abs(G), np.abs(CT) + np.abs(CG))


def _interval_bounds(x: np.ndarray, v: np.ndarray, has_slope: bool):
    """Certified lower bounds of T − G on each [x_i, x_{i+1}], and the same less rounding.

    Returns (lb, slack): an interval is certified when its slack is ≥ 0. Each interval is
    computed in one representation, T − G = F − H with (F, H) = (T, G) when T + G ≤ 1 at
    its left end and (F, H) = (T − 1, G − 1) = (−(1 − T), −(1 − G)) otherwise, so that
    no small difference is taken between numbers close to 1. At a grid point the bound is
    the value itself, so an exact touch (T(0) = G(0) = 1) is accepted.
    """
    a, b = x[:-1], x[1:]
    direct = v[0, :-1] + v[2, :-1] <= 1.0
    Fa = np.where(direct, v[0, :-1], -v[1, :-1])
    Fb = np.where(direct, v[0, 1:], -v[1, 1:])
    Ha = np.where(direct, v[2, :-1], -v[3, :-1])
    Hb = np.where(direct, v[2, 1:], -v[3, 1:])
    w = b - a
    err_a = _REL_ALLOWANCE * (np.abs(Fa) + np.abs(Ha))
    err_b = _REL_ALLOWANCE * (np.abs(Fb) + np.abs(Hb))
    if not has_slope:  # T decreasing: T ≥ T(b); G decreasing: G ≤ G(a)
        lb = Fb - Ha
        return lb, lb - _REL_ALLOWANCE * (np.abs(Fb) + np.abs(Ha))
    ga, gb = v[4, :-1], v[4, 1:]
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        fin_a, fin_b = np.isfinite(ga), np.isfinite(gb)
        sa = np.where(fin_a, np.abs(ga), 0.0) * w
        sb = np.where(fin_b, np.abs(gb), 0.0) * w
        end_a, end_b = Fa - Ha, Fb - Hb
        slack_ends = np.minimum(end_a - err_a, end_b - err_b)
        # both tangents: the piecewise-linear bound is smallest at a, b or where they cross
        cross = (Fb - Fa + ga * a - gb * b) / (ga - gb)
        inside = fin_a & fin_b & (ga < gb) & (cross > a) & (cross < b)
        t = np.where(inside, (cross - a) / w, 0.0)
        at_cross = Fa + ga * (cross - a) - (Ha + (Hb - Ha) * t)
        err_cross = err_a + err_b + _REL_ALLOWANCE * (sa + sb)
        # one tangent only (an infinite slope at the other end, e.g. G-like curves at 0)
        b_only = Fb + gb * (a - b) - Ha
        a_only = Fa + ga * w - Hb
        lb = np.where(fin_a & fin_b, np.where(inside, np.minimum(np.minimum(end_a, end_b), at_cross),
                                              np.minimum(end_a, end_b)),
                      np.where(fin_b, np.minimum(b_only, end_b),
                               np.where(fin_a, np.minimum(end_a, a_only), Fb - Ha)))
        slack = np.where(fin_a & fin_b, np.where(inside, np.minimum(slack_ends, at_cross - err_cross), slack_ends),
                         np.where(fin_b, np.minimum(b_only - err_a - _REL_ALLOWANCE * sb, end_b - err_b),
                                  np.where(fin_a, np.minimum(end_a - err_a, a_only - err_b - _REL_ALLOWANCE * sa),
                                           Fb - Ha - err_a - err_b)))
    bad = np.isnan(lb) | np.isnan(slack)
    return np.where(bad, -np.inf, lb), np.where(bad, -np.inf, slack)


def _mu_at(alpha: np.ndarray, T: np.ndarray, CT: np.ndarray) -> np.ndarray:
    """Φ⁻¹(1 − α) − Φ⁻¹(T(α)), each inverse taken on the accurate side."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return -normal.ndtri(alpha) - np.where(T <= 0.5, normal.ndtri(T), -normal.ndtri(CT))


def gdp_margin(tradeoff: TradeOff, mu: float) -> GDPMargin:
    """Certify T ≥ G_μ on [0, 1] by branch and bound (see the module docstring).

    A :class:`GaussianTradeOff` is compared exactly (G_ν ≥ G_μ iff ν ≤ μ).

    Parameters
    ----------
    tradeoff : TradeOff
        A convex trade-off function, ideally with a subgradient (else a monotone bound is
        used, which converges slowly).
    mu : float
        The GDP parameter to certify.

    Returns
    -------
    GDPMargin
    """
    if not (mu > 0 and math.isfinite(mu)):
        raise ValueError(f"mu must be positive and finite (got {mu})")
    if isinstance(tradeoff, GaussianTradeOff):
        ok = tradeoff.mu <= mu
        return GDPMargin(mu, ok, 0.0 if ok else -math.inf, 0.0 if ok else -math.inf, 0.0, tradeoff.mu, 0,
                         "exact: G_ν ≥ G_μ iff ν ≤ μ (Dong, Roth & Su 2022, eq. 3)")
    gauss = GaussianTradeOff(mu)
    if tradeoff.symmetric:
        top = float(np.nextafter(normal.ndtr(-mu / 2.0), 1.0))
        x = np.unique(np.concatenate([np.logspace(-300, math.log10(top), 200), np.linspace(0.0, top, 200)]))
        x = x[x <= top]
        how = f"T and G_μ symmetric: α ∈ [0, Φ(−μ/2) = {top:.6g}] suffices"
    else:
        x = np.unique(np.concatenate([np.logspace(-300, math.log10(0.5), 200), np.linspace(0.0, 1.0, 201),
                                      1.0 - np.logspace(-15, math.log10(0.5), 100)]))
        how = "α ∈ [0, 1]"
    v = _values(tradeoff, gauss, x)
    has_slope = not np.all(np.isnan(v[4]))
    for _ in range(_MAX_ROUNDS):
        lb, slack = _interval_bounds(x, v, has_slope)
        fail = slack < 0
        # a grid point that cannot itself be certified (T < G there, or T − G below the
        # rounding allowance) ends the search: no refinement can help
        diff, err = _node_view(v)
        if not fail.any() or np.any(diff - err < 0) or x.size > _MAX_NODES:
            break
        new = _split(x[:-1][fail], x[1:][fail])
        x = np.concatenate([x, new])
        order = np.argsort(x, kind="stable")
        x, v = x[order], np.hstack([v, _values(tradeoff, gauss, new)])[:, order]
    lb, slack = _interval_bounds(x, v, has_slope)
    diff, _ = _node_view(v)
    interior = np.flatnonzero((x > 0) & (x < 1))  # T(0) = G(0) = 1 and T(1) = G(1) = 0 always
    mu_seen = _mu_at(x[interior], v[0, interior], v[1, interior])
    worst = int(interior[np.nanargmax(mu_seen)])
    return GDPMargin(
        mu=float(mu),
        passed=bool(np.all(slack >= 0)),
        lower_bound=float(lb.min()),
        observed_min=float(diff[worst]),
        argmin=float(x[worst]),
        mu_observed=float(np.nanmax(mu_seen)),
        nodes=int(x.size),
        method=("branch and bound on T − G_μ: tangent lines of the convex T against chords of the convex "
                f"G_μ on {x.size} grid points, relative allowance {_REL_ALLOWANCE:g}; {how}"),
    )


def is_gdp(tradeoff: TradeOff, mu: float) -> bool:
    """True when :func:`gdp_margin` certifies T ≥ G_μ."""
    return gdp_margin(tradeoff, mu).passed


def mu_of_tradeoff(tradeoff: TradeOff) -> float:
    r"""The smallest μ with :math:`G_\mu \le T`, estimated: :math:`\sup_\alpha\, \Phi^{-1}(1-\alpha) - \Phi^{-1}(T(\alpha))`.

    :math:`G_\mu(\alpha) \le T(\alpha)` iff :math:`\mu \ge \Phi^{-1}(1-\alpha) - \Phi^{-1}(T(\alpha))`,
    so μ(T) is the supremum over α of that difference (Lee et al. 2022, Sec. 3.3, μ_b).
    Maximised on a log grid and refined by bounded Brent; for a symmetric T only
    α ≤ its fixed point is searched. Use :func:`certified_mu` for a certified value.
    """

    def mu_at(log_a):
        a = np.exp(np.asarray(log_a, dtype=float))
        return _mu_at(a, tradeoff._evaluate(a), tradeoff._complement(a))

    top = tradeoff.fixed_point() if tradeoff.symmetric else 1.0 - 1e-15
    grid = np.linspace(-690.0, math.log(top), 2000)
    values = mu_at(grid)
    i = int(np.argmax(values))
    if not math.isfinite(values[i]):
        return float(values[i])
    from scipy import optimize  # imported where used (start-up of `dpopt verify`)

    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)]
    res = optimize.minimize_scalar(lambda v: -float(mu_at(v)), bounds=(lo, hi), method="bounded",
                                   options={"xatol": 1e-13})
    return max(float(values[i]), -float(res.fun))


def certified_mu(tradeoff: TradeOff) -> float:
    """The estimate of :func:`mu_of_tradeoff`, raised until :func:`gdp_margin` certifies it.

    Raises
    ------
    CalibrationError
        If no nearby μ can be certified.
    """
    estimate = mu_of_tradeoff(tradeoff)
    if not math.isfinite(estimate):
        return math.inf
    if isinstance(tradeoff, GaussianTradeOff):
        return tradeoff.mu
    return nudge_until(max(estimate, 1e-300) * (1.0 + 1e-12), lambda m: is_gdp(tradeoff, m), up=True)
