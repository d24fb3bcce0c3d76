r"""Per-cell standard error and 95% margin of error of a release: what a statistician reads first.

For released cell i with noise Z_i (mean zero: every family's noise is symmetric),

* the **standard error** is :math:`\sqrt{\mathbb E Z_i^2}`, the root mean squared error of the
  cell (the noise's standard deviation);
* the **95% margin of error** is the smallest m with :math:`P(|Z_i| \le m) \ge 0.95`: the
  released cell is within m of the true count in 95% of releases. For Gaussian noise
  m = 1.959964·SE; for heavier-tailed noise (Laplace, K-norm) it is computed from the law.

How, in order of preference (each cell records its method):

1. the noise law is a product Z = B·W of independent marginals with B the identity: E W² by
   numerical integration of the marginal (:meth:`Marginal.abs_moment`, exact for Gaussians)
   and m from its tail, 2·P(W > m) = 0.05 (bisection; the smallest integer for a lattice law);
2. B·W with Gaussian W: coordinate i is N(0, Σ_k B_ik² σ_k²), a closed form; Gaussian noise too
   large to state as a law: the family's closed-form variances (:meth:`Mechanism.cell_variances`);
2''. **a declared linear image** Z = CW of independent lattice variates (:meth:`Mechanism.linear_noise_image`,
   e.g. an exact marginal measurement) whose rows are whole multiples of 1/D: the exact quantile of each cell by
   convolution of the pmfs (:mod:`dpopt.certificate.linear_tails`; the truncation mass added to the tail), the SE
   exact; otherwise path 2';
2'. **lattice noise that is a linear image of independent discrete Gaussians** (``sampler: exact`` designs whose
   noise is not i.i.d., :meth:`Mechanism.sub_gaussian_cell_proxies`; or a product law B·W whose marginals declare a
   ``sub_gaussian`` proxy): the law of Z_i has no closed form and 1.96·SE is not proven for it. Each
   N_ℤ(0, σ_k²) is sub-Gaussian with proxy σ_k², :math:`E e^{tW_k} \le e^{t^2\sigma_k^2/2}` (Canonne, Kamath &
   Steinke 2020, Corollary 9), so :math:`Z_i = \sum_k c_{ik} W_k` has
   :math:`E e^{tZ_i} \le e^{t^2 v_i/2}`, :math:`v_i = \sum_k c_{ik}^2\sigma_k^2` (independence), and Chernoff's
   bound gives :math:`P(|Z_i| \ge h) \le 2e^{-h^2/(2v_i)}`. The margin is the proven upper bound
   :math:`m_i = \sqrt{2 v_i \ln(2/(1 - L))}` (= 2.716·√v_i at L = 0.95; coverage ≥ L) and the SE is exact,
   √Var Z_i (the discrete Gaussians' variances, ≤ σ_k²); each cell records v_i (``sub_gaussian_proxy``);
3. noise that is a linear image of independent non-Gaussian noise whose per-cell law has no closed
   form but whose variances do (``marginal_laplace``: :meth:`Mechanism.cell_law_groups`): the SE is
   exact, √Var Z_i, and the margin is the 95% quantile of |Z_i| from a Monte Carlo of the sampler
   pooled over each group of cells that a symmetry of the family gives one law, with at most
   :data:`GROUP_VARIATES` noise variates in all (never the listed differences);
4. noise that is a linear image of independent *symmetric unimodal* noise (Laplace on a Kronecker strategy,
   :meth:`Mechanism.unimodal_cell_variances`): Z_i is a sum of independent symmetric unimodal variables, hence
   symmetric unimodal about 0 (Wintner, 1938: the convolution of symmetric unimodal laws is symmetric
   unimodal). The SE is exact, √Var Z_i, and the margin is the bound of Gauss's inequality for a unimodal law
   about its mode, :math:`P(|Z_i| \ge m) \le 4\,\mathrm{Var}\,Z_i/(9m^2)` for :math:`m \ge 2\,\mathrm{SE}/\sqrt3`:
   m = √(4/(9 · 0.05)) · SE = 2.981 · SE has coverage at least 95% (for comparison: 1.96 SE for a normal law,
   2.12 SE for one Laplace variate); no Monte Carlo;
5. otherwise (K-norm, families without a law) a Monte Carlo of the mechanism's own sampler
   (:data:`DRAWS` draws, fewer when d is large; seed :data:`SEED`), pooled over cells that a symmetry makes
   equal: a swap of two levels of one attribute that maps the listed neighbouring differences onto themselves
   maps the noise law onto itself (the law is built from those differences alone, e.g. K = their convex hull),
   so the cells of one orbit (:func:`cell_orbits`) have one law. When every cell is in one orbit
   and E‖Z‖² has a closed form, each cell's SE is exactly √(E‖Z‖²/d); otherwise each cell records the
   Monte Carlo standard error of its SE (``monte_carlo_se``, from the per-draw orbit means).

A post-processed release (e.g. James–Stein shrinkage) is described by its noise stage, and
says so: the error after the post-processing depends on the true answer.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from dpopt.certificate import linear_tails
from dpopt.core import normal
from dpopt.mechanisms import Mechanism
from dpopt.noise.law import PostProcessedLaw, ProductLaw
from dpopt.problem import Problem
from dpopt.spec.models import Utility

LEVEL = 0.95
Z_975 = float(normal.ndtri(0.975))  # 1.959963984540054
DRAWS = 20_000
SEED = 20261125
GROUP_VARIATES = 5_000_000
"""Noise variates (the sampler's own and the released cells) the pooled margin of path 3 draws at most."""
GROUP_MIN_DRAWS = 200


def _marginal_errors(marginal) -> tuple[float, float]:
    """(standard error, 95% margin of error) of one marginal law W."""
    if marginal.gaussian_sd is not None:
        return marginal.gaussian_sd, Z_975 * marginal.gaussian_sd
    se = math.sqrt(marginal.abs_moment(2.0))
    excess = (1.0 - LEVEL) / 2.0
    if marginal.lattice:
        return se, float(_lattice_quantile(marginal, excess))
    from scipy import optimize  # imported where used (start-up of `dpopt verify`)

    hi = marginal.scale
    while float(marginal.tail(hi)) > excess:
        hi *= 2.0
    return se, float(optimize.brentq(lambda x: float(marginal.tail(x)) - excess, 0.0, hi, xtol=1e-12, rtol=1e-12))


def _lattice_quantile(marginal, excess: float) -> int:
    """The smallest whole k ≥ 0 with P(W > k) ≤ ``excess`` for a lattice law (P(W > k) non-increasing in k): by
    doubling, then bisection on whole numbers (O(log k) tail evaluations, none of the law's size)."""
    if float(marginal.tail(0)) <= excess:
        return 0
    lo, hi = 0, 1  # invariant: P(W > lo) > excess ≥ P(W > hi) once hi is found
    while float(marginal.tail(hi)) > excess:
        lo, hi = hi, 2 * hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if float(marginal.tail(mid)) > excess:
            lo = mid
        else:
            hi = mid
    return hi


def _from_law(law: ProductLaw) -> tuple[np.ndarray, np.ndarray, str] | None:
    observed = np.ones(law.dimension, bool) if law.observed is None else np.asarray(law.observed, bool)
    if law.basis is None:
        cache: dict = {}
        se = np.full(law.dimension, np.nan)
        moe = np.full(law.dimension, np.nan)
        for i, m in enumerate(law.marginals):
            if observed[i]:
                se[i], moe[i] = cache.setdefault(m.key, _marginal_errors(m))
        if law.gaussian:
            return se, moe, f"closed form: cell i is N(0, σ_i²) under {law.description}; margin 1.96·SE"
        return se, moe, (f"from the noise law {law.description}: E W² by integration, the margin from its tail, "
                         "2·P(W > m) = 0.05")
    if law.gaussian:
        sd = np.array([m.gaussian_sd for m in law.marginals])
        se = np.sqrt(np.asarray(law.basis, dtype=float) ** 2 @ sd**2)
        se[~observed] = np.nan
        return se, Z_975 * se, f"closed form: cell i is N(0, Σ_k B_ik² σ_k²) under {law.description}; margin 1.96·SE"
    found = _sub_gaussian_image(law, np.asarray(law.basis, dtype=float))
    if found is None:
        return None
    se, proxies = found
    se[~observed] = proxies[~observed] = np.nan
    return (se, sub_gaussian_half_width(proxies, LEVEL),
            f"standard error exact, √(Σ_k B_ik² Var W_k) under {law.description}; " + SUB_GAUSSIAN_METHOD, proxies)


def _sub_gaussian_image(law: ProductLaw, matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(√Var, sub-Gaussian proxy) of each coordinate of matrix·W for the product law's W, when every marginal
    declares a proxy (path 2'); None otherwise."""
    if any(m.sub_gaussian is None for m in law.marginals):
        return None
    squared = matrix**2
    variances = np.array([m.gaussian_sd**2 if m.gaussian_sd is not None else m.abs_moment(2.0)
                          for m in law.marginals])
    return np.sqrt(squared @ variances), squared @ np.array([m.sub_gaussian for m in law.marginals])


def sub_gaussian_half_width(proxy, level: float):
    """The smallest h with 2·exp(−h²/(2v)) ≤ 1 − level: a proven bound on the ``level`` quantile of |Z| for Z
    sub-Gaussian with variance proxy v (path 2' of the module docstring)."""
    return np.sqrt(2.0 * np.asarray(proxy, dtype=float) * math.log(2.0 / (1.0 - level)))


SUB_GAUSSIAN_METHOD = (
    "margin: a proven upper bound with coverage ≥ 95%, the sub-Gaussian tail of a linear image Σ_k c_ik W_k of "
    "independent discrete Gaussians N_ℤ(0, σ_k²) (each sub-Gaussian with proxy σ_k², Canonne, Kamath & Steinke 2020, "
    "Corollary 9): P(|Z_i| ≥ m) ≤ 2 exp(−m²/(2 v_i)), v_i = Σ_k c_ik² σ_k² (each cell's sub_gaussian_proxy), "
    f"m = √(2 v_i ln 40) = {math.sqrt(2.0 * math.log(40.0)):.4f}·√v_i")


def image_half_widths(mechanism: Mechanism, level: float, chernoff: bool = True) -> tuple[np.ndarray, str] | None:
    """Proven half-widths at ``level`` of a family's declared linear noise image Z = CW
    (:meth:`Mechanism.linear_noise_image`, :func:`dpopt.certificate.linear_tails.half_widths`), or None."""
    image = mechanism.linear_noise_image()
    if image is None:
        return None
    return linear_tails.half_widths(image[0], image[1], level, chernoff)


def _from_image(mechanism: Mechanism) -> tuple[np.ndarray, np.ndarray, str] | None:
    """Path 2'' of the module docstring: the exact quantile of each cell of a declared linear image, when every
    cell's law convolves on a lattice; None otherwise (the sub-Gaussian bound of path 2' is then used)."""
    image = mechanism.linear_noise_image()
    if image is None:
        return None
    c, marginals = image
    proven = linear_tails.half_widths(c, marginals, LEVEL, chernoff=False)
    if proven is None:
        return None
    second: dict = {}
    variances = np.array([second.setdefault(m.key, m.gaussian_sd**2 if m.gaussian_sd is not None
                                            else m.abs_moment(2.0)) for m in marginals])
    return (np.sqrt(c**2 @ variances), proven[0],
            f"standard error exact, √(Σ_k C_ik² Var W_k) of the release map C (Z = CW, {c.shape[1]} independent "
            f"lattice variates); margin: {proven[1]}")


def _from_sub_gaussian(mechanism: Mechanism) -> tuple[np.ndarray, np.ndarray, str, np.ndarray] | None:
    """Path 2' of the module docstring from the family's declared proxies."""
    declared = mechanism.sub_gaussian_cell_proxies()
    if declared is None:
        return None
    variances, proxies, how = declared
    proxies = np.asarray(proxies, dtype=float)
    return (np.sqrt(np.asarray(variances, dtype=float)), sub_gaussian_half_width(proxies, LEVEL),
            f"standard error exact, √Var Z_i ({how}); " + SUB_GAUSSIAN_METHOD, proxies)


def _from_variances(mechanism: Mechanism) -> tuple[np.ndarray, np.ndarray, str] | None:
    variances = mechanism.cell_variances()
    if variances is None:
        return None
    se = np.sqrt(np.asarray(variances, dtype=float))
    return se, Z_975 * se, "closed form: cell i is N(0, Var Z_i) (the family's closed-form variances); margin 1.96·SE"


def _from_groups(mechanism: Mechanism) -> tuple[np.ndarray, np.ndarray, str] | None:
    """Path 3 of the module docstring: exact SE, margin pooled over the groups of cells with one law."""
    grouped = mechanism.cell_law_groups()
    if grouped is None:
        return None
    variances, groups = grouped
    per_draw = mechanism.variates_per_draw() + mechanism.dimension
    draws = min(DRAWS, max(GROUP_MIN_DRAWS, GROUP_VARIATES // per_draw))
    z = np.abs(mechanism.sample(draws, np.random.default_rng(SEED)))
    moe = np.empty(mechanism.dimension)
    for group in np.unique(groups):
        cells = np.flatnonzero(groups == group)
        moe[cells] = float(np.quantile(z[:, cells], LEVEL))
    se = np.sqrt(np.asarray(variances, dtype=float))
    return se, moe, (f"standard error exact, √Var Z_i (the family's closed-form variances); margin: the 95% quantile "
                     f"of |Z_i| by Monte Carlo of the sampler ({draws} draws, seed {SEED}) pooled over the cells of "
                     f"each of the {len(np.unique(groups))} groups that the family's symmetry gives one noise law")


GAUSS_FACTOR = math.sqrt(4.0 / (9.0 * (1.0 - LEVEL)))
"""m / SE of Gauss's inequality at the 95% level: P(|Z| ≥ m) ≤ 4 Var Z / (9 m²) = 0.05 (2.9814…)."""


def _from_unimodal(mechanism: Mechanism) -> tuple[np.ndarray, np.ndarray, str] | None:
    """Path 4 of the module docstring: exact SE, margin by Gauss's inequality."""
    variances = mechanism.unimodal_cell_variances()
    if variances is None:
        return None
    se = np.sqrt(np.asarray(variances, dtype=float))
    return se, GAUSS_FACTOR * se, (
        "standard error exact, √Var Z_i (closed form: the noise is a linear map of independent Laplace variates, "
        "Var Z_i = 2b² × the sum of the squared reconstruction weights); margin: an upper bound with coverage "
        "≥ 95%, Gauss's inequality for the symmetric unimodal law of Z_i (a sum of independent symmetric unimodal "
        f"variables), m = √(4/(9·0.05))·SE = {GAUSS_FACTOR:.4f}·SE")


def symmetric_differences(problem: Problem) -> Callable[[], np.ndarray | None] | None:
    """What lists the neighbouring differences when the design depends on them alone (no workload, weights
    or alternative in the utility, which could break their symmetries), for the per-cell pooling; else None.
    Called only by a Monte Carlo (listing them is domain-sized for a marginal workload)."""
    u = problem.spec.utility
    if u.workload is not None or u.weights is not None or u.alternative is not None:
        return None
    return problem.space.listed


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _mix(z: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser (Steele, Lea & Flood 2014) on 64-bit words, wrapping modulo 2⁶⁴: a bijection that
    scatters every input bit over the output."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def _entry_words(columns: np.ndarray, values: np.ndarray) -> np.ndarray:
    """A pseudo-random 64-bit word for each non-zero entry (column, value) of a difference. A row's hash is the sum of
    its entries' words modulo 2⁶⁴: equal rows have equal hashes, so a hash absent from a set proves the row absent;
    a hash present proves nothing (it only screens)."""
    return _mix(_mix(np.ascontiguousarray(values, dtype=float).view(np.uint64))
                + _mix(columns.astype(np.uint64) + _GOLDEN))


class _Differences:
    """The set S of the rounded rows of the neighbouring differences, indexed to test whether a permutation of the
    columns maps S onto itself (:func:`cell_orbits`): each row's hash, the rows sorted by hash, the entries of
    each column, and each column's profile."""

    def __init__(self, rounded: np.ndarray) -> None:
        self.rounded = rounded
        self.rows, self.columns = np.nonzero(rounded)
        self.values = rounded[self.rows, self.columns]
        self.words = _entry_words(self.columns, self.values)
        self.hashes = np.zeros(len(rounded), np.uint64)
        np.add.at(self.hashes, self.rows, self.words)
        self.order = np.argsort(self.hashes, kind="stable")
        self.known = self.hashes[self.order]
        by_column = np.argsort(self.columns, kind="stable")
        starts = np.searchsorted(self.columns[by_column], np.arange(rounded.shape[1] + 1)).tolist()
        self.in_column = [by_column[s:e] for s, e in zip(starts[:-1], starts[1:])]
        self.profiles = self._column_profiles()

    def _column_profiles(self) -> list[int] | None:
        """Each column's multiset of non-zero values over the distinct rows of S, hashed (the sum of the values'
        hashes modulo 2⁶⁴); None when two different rows share a hash (the rows' hashes then do not tell the
        distinct rows apart)."""
        tie = np.flatnonzero(self.known[1:] == self.known[:-1])
        if not np.all(self.rounded[self.order[tie + 1]] == self.rounded[self.order[tie]]):
            return None
        distinct = np.ones(len(self.rounded), bool)
        distinct[self.order[tie + 1]] = False  # each run of equal hashes holds copies of one row: keep its first
        keep = distinct[self.rows]
        profiles = np.zeros(self.rounded.shape[1], np.uint64)
        np.add.at(profiles, self.columns[keep], _mix(self.values[keep].view(np.uint64)))
        return profiles.tolist()

    def kept_by(self, moved: list[int], images: list[int]) -> bool:
        """Whether the permutation σ of the columns moving column moved[k] to images[k] maps S onto itself."""
        if self.profiles is not None and any(self.profiles[i] != self.profiles[j] for i, j in zip(moved, images)):
            return False
        image = np.arange(self.rounded.shape[1])
        image[moved] = images
        entries = np.concatenate([self.in_column[i] for i in moved])
        changed, at = np.unique(self.rows[entries], return_inverse=True)
        moved_hashes = self.hashes[changed]  # a fancy-indexed copy
        np.add.at(moved_hashes, at, _entry_words(image[self.columns[entries]], self.values[entries])
                  - self.words[entries])
        low = np.searchsorted(self.known, moved_hashes, "left")
        high = np.searchsorted(self.known, moved_hashes, "right")
        if np.any(low == high):
            return False
        swapped = np.empty((len(changed), len(image)))
        swapped[:, image] = self.rounded[changed]
        pending = np.ones(len(changed), bool)
        for offset in range(int(np.max(high - low, initial=0))):  # the rows of S with σ(v)'s hash, one at a time
            look = np.flatnonzero(pending & (low + offset < high))
            same = np.all(self.rounded[self.order[low[look] + offset]] == swapped[look], axis=1)
            pending[look[same]] = False
        return not pending.any()


def cell_orbits(labels, vectors: np.ndarray | None) -> np.ndarray | None:
    r"""The orbit of each cell under the swaps of two levels of one attribute that map the set of neighbouring
    differences onto itself.

    Parameters
    ----------
    labels : sequence of str
        The cells' labels, ``attribute=level`` lists of one length (``a=x,b=u``).
    vectors : array (m, d), optional
        The listed neighbouring differences (rows), compared after rounding to 9 decimals.

    Returns
    -------
    array of int, or None
        Cell i's orbit, named by one of its cells: the root of a union–find that, for each attribute and each pair
        of its levels (a, b) in the order they first appear, joins every cell i holding a or b to its image σ(i)
        (the cell with a and b exchanged) when σ maps the set S of rows onto itself. None when the labels are not
        such lists (marginals of different sizes, ``[[a, b], [c]]``, are not cells of one table) or the
        differences are not listed.

    Notes
    -----
    Why it is exact, and fast (work in the entries of the moved columns per swap tested, not a rebuilt set of
    m·d values). σ permutes the coordinates, a bijection of :math:`\mathbb R^d`, so σ(S) = S if and only if
    σ(v) ∈ S for every v ∈ S, and only for the rows with a non-zero entry in a moved column can σ(v) differ from v.
    Two screens reject a swap; each compares hashes that are equal whenever σ(S) = S, so neither rejects a
    symmetry:

    1. column i of S and column σ(i) of σ(S) = S hold the same multiset of values, so their hashed profiles
       (:meth:`_Differences._column_profiles`) must agree;
    2. each row's hash is the sum of 64-bit words of its non-zero entries (:func:`_entry_words`); a swap changes
       only the words of the entries in its moved columns, so the hashes of the σ(v) are updated from those
       entries alone, and each must be the hash of a row of S.

    A swap passing both is confirmed by comparing each σ(v) with the rows of S of its hash, value for value
    (rounded values, −0 as 0; a NaN equals no value, so no swap keeps a set holding one): a hash collision can
    cost time, never a wrong merge. A swap whose moved cells are each already in the orbit of their image would
    join nothing and is not tested: each swap confirmed merges two orbits at least, so at most d − 1 are
    confirmed. The unions made are those of testing every swap, in the same order, hence the same roots.
    """
    if vectors is None:
        return None
    try:
        cells = [tuple(part.split("=", 1)[1] for part in str(label).split(",")) for label in labels]
    except IndexError:
        return None
    index = {cell: i for i, cell in enumerate(cells)}
    if len(index) != len(cells) or vectors.shape[1] != len(cells) or len({len(c) for c in cells}) != 1:
        return None
    rounded = np.round(np.asarray(vectors, dtype=float), 9) + 0.0  # −0.0 + 0.0 = 0.0: equal values, equal bits
    if np.isnan(rounded).any():
        return np.arange(len(cells))
    differences = _Differences(rounded)
    parent = list(range(len(cells)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for axis in range(len(cells[0])):
        holding: dict = {}
        for i, c in enumerate(cells):
            holding.setdefault(c[axis], []).append(i)
        levels = list(holding)
        for a, b in ((a, b) for k, a in enumerate(levels) for b in levels[k + 1:]):
            swap = {a: b, b: a}
            moved = sorted(holding[a] + holding[b])
            images = [index.get(cells[i][:axis] + (swap[cells[i][axis]],) + cells[i][axis + 1:]) for i in moved]
            if None in images or all(root(i) == root(j) for i, j in zip(moved, images)):
                continue
            if differences.kept_by(moved, images):
                for i, j in zip(moved, images):
                    parent[root(i)] = root(j)
    return np.array([root(i) for i in range(len(cells))])


def _monte_carlo(mechanism: Mechanism, orbits: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray, str]:
    """(SE, margin, Monte Carlo SE of the SE, method) from the mechanism's sampler, pooled over ``orbits``."""
    d = mechanism.dimension
    draws = min(DRAWS, max(2_000, 40_000_000 // max(1, d)))  # at most ~4·10⁷ numbers
    z = mechanism.sample(draws, np.random.default_rng(SEED))
    orbits = np.arange(d) if orbits is None else orbits
    se, moe, mc = (np.full(d, np.nan) for _ in range(3))
    with np.errstate(invalid="ignore"):
        for orbit in np.unique(orbits):
            cells = np.flatnonzero(orbits == orbit)
            per_draw = np.mean(z[:, cells] ** 2, axis=1)
            se[cells] = math.sqrt(float(np.mean(per_draw)))
            mc[cells] = float(np.std(per_draw) / math.sqrt(draws) / (2.0 * se[cells[0]]))
            moe[cells] = float(np.quantile(np.abs(z[:, cells]), LEVEL))
    pooled = len(np.unique(orbits)) < d
    method = (f"Monte Carlo of the mechanism's sampler ({draws} draws, seed {SEED}): SE = √(mean Z_i²), margin = the "
              "95% quantile of |Z_i|" + (f", pooled over the {len(np.unique(orbits))} orbit(s) of cells that the "
                                         "symmetries of the neighbouring differences make equal" if pooled else ""))
    if np.all(orbits == orbits[0]) and np.all(np.isfinite(se)):
        exact = mechanism.expected_utility(Utility(metric="l2"))
        if exact.method.startswith("closed form"):
            se[:] = math.sqrt(exact.value / d)
            mc[:] = 0.0
            method = (f"exact by symmetry: every cell is in one orbit of the neighbouring differences' symmetries, "
                      f"so E Z_i² = E‖Z‖²/d ({exact.method}); margin: the 95% quantile of |Z_i| by Monte Carlo "
                      f"({draws} draws pooled over the cells, seed {SEED})")
    return se, moe, mc, method


def _column(values) -> list:
    """The values as Python floats, None where not finite (converted as one array: 175,270 cells in 0.02 s)."""
    array = np.asarray(values, dtype=float).reshape(-1)
    out = array.tolist()
    for i in np.flatnonzero(~np.isfinite(array)):
        out[i] = None
    return out


def _block(labels, se, moe, method: str, mc=None, proxies=None) -> dict:
    cells = [{"cell": str(label), "standard_error": s, "margin_of_error": m}
             for label, s, m in zip(labels, _column(se), _column(moe))]
    for key, extra in (("monte_carlo_se", mc), ("sub_gaussian_proxy", proxies)):
        if extra is not None:
            for cell, e in zip(cells, _column(extra)):
                cell[key] = e
    return {"level": LEVEL, "method": method, "cells": cells}


def _image(law, matrix: np.ndarray) -> np.ndarray:
    """C = M·B, the coefficients of each mapped cell on the law's independent variates W."""
    return matrix if law.basis is None else matrix @ np.asarray(law.basis, dtype=float)


def mapped_half_widths(mechanism: Mechanism, matrix, level: float) -> tuple[np.ndarray, str] | None:
    """A proven h_i with P(|(MZ)_i| > h_i) ≤ 1 − level for each row of M·Z, Z = B·W of a product law with
    non-Gaussian independent W (:func:`dpopt.certificate.linear_tails.half_widths`: exact lattice convolution
    for an integer image of lattice variates, else Chernoff), or None (a Gaussian law has its closed form; a law
    without a pmf or moment bound, a Monte Carlo)."""
    law = mechanism.noise_law()
    if not isinstance(law, ProductLaw) or law.observed is not None or law.gaussian:
        return None
    return linear_tails.half_widths(_image(law, np.atleast_2d(np.asarray(matrix, dtype=float))), law.marginals,
                                    level)


def mapped_per_cell_errors(mechanism: Mechanism, matrix, labels) -> dict:
    r"""The per-cell errors of M·Z, a linear post-processing of the mechanism's noise Z (e.g. a plan's
    query answered from a jointly released histogram), in the block format of :func:`per_cell_errors`.

    Noise Z = B·W with W independent:

    * Gaussian W ~ N(0, diag σ_k²): cell i of M·Z is N(0, Σ_k (MB)_ik² σ_k²), a closed form (margin 1.96·SE);
    * lattice W (discrete Laplace, discrete Gaussian): :func:`mapped_half_widths`, the exact margin by convolution
      of the pmfs where M·B is a whole multiple of 1/D (D ≤ 1,024), else the Chernoff bound (for discrete
      Gaussians, the sub-Gaussian bound of path 2');
    * otherwise sub-Gaussian W: the sub-Gaussian bound (path 2' of the module docstring);
    * otherwise W with a moment generating function (Laplace): the Chernoff bound
      (:mod:`dpopt.certificate.linear_tails`);

    the standard error exact, √(Σ_k (MB)_ik² Var W_k), in all these; otherwise a Monte Carlo of the mechanism's
    sampler mapped by M.
    """
    matrix = np.atleast_2d(np.asarray(matrix, dtype=float))
    law = mechanism.noise_law()
    if isinstance(law, ProductLaw) and law.gaussian and law.observed is None:
        sd = np.array([m.gaussian_sd for m in law.marginals])
        se = np.sqrt(_image(law, matrix) ** 2 @ sd**2)
        return _block(labels, se, Z_975 * se, f"closed form: cell i of M·Z is N(0, Σ_k (MB)_ik² σ_k²) under "
                                                f"{law.description}; margin 1.96·SE")
    if isinstance(law, ProductLaw) and law.observed is None:
        image = _image(law, matrix)
        found = None if all(m.lattice for m in law.marginals) else _sub_gaussian_image(law, image)
        if found is not None:
            se, proxies = found
            return _block(labels, se, sub_gaussian_half_width(proxies, LEVEL),
                          f"standard error exact, √(Σ_k (MB)_ik² Var W_k) under {law.description}; "
                          + SUB_GAUSSIAN_METHOD.replace("Σ_k c_ik W_k", "Σ_k (MB)_ik W_k"), proxies=proxies)
        proven = mapped_half_widths(mechanism, matrix, LEVEL)
        if proven is not None:
            variances = np.array([m.gaussian_sd**2 if m.gaussian_sd is not None else m.abs_moment(2.0)
                                  for m in law.marginals])
            return _block(labels, np.sqrt(image**2 @ variances), proven[0],
                          f"standard error exact, √(Σ_k (MB)_ik² Var W_k) under {law.description}; margin: "
                          f"{proven[1]}")
    z = mechanism.sample(DRAWS, np.random.default_rng(SEED)) @ matrix.T
    return _block(labels, np.sqrt(np.mean(z**2, axis=0)), np.quantile(np.abs(z), LEVEL, axis=0),
                  f"Monte Carlo of the mechanism's sampler mapped by M ({DRAWS} draws, seed {SEED}): "
                  "SE = √(mean (MZ)_i²), margin = the 95% quantile of |(MZ)_i|")


def per_cell_errors(mechanism: Mechanism, labels,
                    vectors: np.ndarray | Callable[[], np.ndarray | None] | None = None) -> dict:
    """Each released cell's standard error and 95% margin of error (see the module docstring).

    Parameters
    ----------
    mechanism : Mechanism
    labels : sequence of str
        The query's cell labels (``race=other,sex=male``), in the order of the release; each cell
        carries its label unchanged, the same string as the release's (:mod:`dpopt.release.cells`).
    vectors : array (m, d), or a function that lists them, optional
        The listed neighbouring differences, whose symmetries pool a Monte Carlo (:func:`cell_orbits`);
        a function is called only when a Monte Carlo is needed.

    Returns
    -------
    dict
        ``{"level": 0.95, "method", "cells": [{"cell", "standard_error", "margin_of_error"}]}``;
        a cell the design does not release has nulls. Cells also carry ``monte_carlo_se`` (path 5) or
        ``sub_gaussian_proxy`` (path 2') where those apply.
    """
    law = mechanism.noise_law()
    inner = law.inner if isinstance(law, PostProcessedLaw) else law
    found = _from_image(mechanism)  # a declared linear image first: exact quantiles where every cell convolves
    if found is None:  # then declared proxies: the cell may be an image of the law's noise
        found = _from_sub_gaussian(mechanism)
    if found is None:
        found = _from_law(inner) if isinstance(inner, ProductLaw) else _from_variances(mechanism)
    if found is None:
        found = _from_groups(mechanism)
    if found is None:
        found = _from_unimodal(mechanism)
    mc = proxies = None
    if found is not None:
        se, moe, method, *extra = found
        proxies = extra[0] if extra else None
    else:
        listed = vectors() if callable(vectors) else vectors
        se, moe, mc, method = _monte_carlo(mechanism, cell_orbits(labels, listed))
    if isinstance(law, PostProcessedLaw):
        method += f"; the noise stage, before the post-processing ({law.operation}), whose error depends on the answer"
    return _block(labels, se, moe, method, mc, proxies)
