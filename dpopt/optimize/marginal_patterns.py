r"""Replace-one disagreement patterns of the ANOVA algebra, reduced by the symmetry of the coefficients.

Under replace-one the Mahalanobis sensitivity of :math:`G = \sum_T a_T E_T` is
(:mod:`dpopt.optimize.marginal_covariance`)

.. math:: \mu_\Sigma^2 = \max_{D} f_D(b),\qquad f_D(b) = 2\sum_T b_T\Big(1 - \prod_{k\in T\cap D}\rho_k\Big),
          \qquad b_T = a_T m_T/N,\ \rho_k = \frac{-1}{n_k-1},

over the disagreement patterns D ⊆ {k : n_k ≥ 2} (the attributes on which two records differ).

**No monotone or greedy shortcut.** Adding k ∈ T to D multiplies :math:`\prod_{T\cap D}\rho` by
ρ_k ∈ [−1, 0): the term of T grows when the product was positive and shrinks when it was negative,
so f_D is not monotone in D (two binary attributes, b on T = {1, 2} only: f_{1} = 4b, f_{1,2} = 0).
Writing x_k = [k ∈ D], :math:`\prod_{k\in T\cap D}\rho_k = \prod_{k\in T}(1-(1-\rho_k)x_k)`, so
f is a multilinear polynomial whose pair terms are :math:`-2 b_{kl}(1-\rho_k)(1-\rho_l)x_kx_l \le 0`:
for 2-way workloads f is submodular, and maximising it over binary attributes is weighted
max-cut on the pair weights b_kl (y_k = 1 − 2x_k ∈ {±1}: f = const − 2Σ b_k y_k − 2Σ b_kl y_k y_l),
NP-hard in general. Exactness at many attributes comes instead from symmetry.

**Reduction by symmetry (exact).** Call attributes k and l interchangeable when n_k = n_l and the
transposition (k l) maps every component T with a coefficient to a component with the same
coefficient. The symmetries of b form a group, and if (k l) and (l m) are in it so is
(k m) = (k l)(l m)(k l): interchangeability is an equivalence relation, its classes
C_1, …, C_r, and b is invariant under :math:`S_{C_1}\times\dots\times S_{C_r}`. The orbit of T is
the set of all T′ with the same *type* :math:`t_c = |T\cap C_c|` (S_C acts transitively on the
t-subsets of C), b is constant on it (:math:`b_t`), and f_D depends on D only through
:math:`d_c = |D \cap C_c|`:

.. math:: f_d = 2\Big(\sum_t b_t\prod_c\tbinom{m_c}{t_c} - h_d\Big),\qquad
          h_d = \sum_t b_t \prod_c K_c[t_c, d_c],\qquad
          K_c[t, d] = \sum_j \tbinom{d}{j}\tbinom{m_c-d}{t-j}\rho_c^{\,j},

(:math:`K_c[t,d]` sums :math:`\rho_c^{|T_c\cap D_c|}` over the t-subsets T_c of a class of
m_c attributes, j of them in D). The maximum over all :math:`2^p` patterns is the maximum over the
:math:`\prod_c (m_c+1)` count vectors d, computed by one mode product per class (a class of one
attribute has :math:`K = \begin{pmatrix}1&1\\1&\rho\end{pmatrix}`, the butterfly of the
unreduced transform). The exact maximum is evaluated in integers: with L the common denominator
of the :math:`b_t` and :math:`K_c (n_c-1)^{\bar t_c}` integer (:math:`\bar t_c` the largest
:math:`t_c`), :math:`h_d L \prod_c (n_c-1)^{\bar t_c}` is an integer tensor.

All 2-way marginals of 30 attributes in 5 size classes of 6 have :math:`7^5 = 16{,}807` count
vectors instead of :math:`2^{30}`; attributes of 30 different sizes have no symmetry and
:math:`2^{30}` patterns: refused above :data:`MAX_PATTERNS`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property

import numpy as np

from dpopt.domain.marginal_algebra import Subset

MAX_PATTERNS = 2**22
"""Largest number of reduced disagreement patterns ∏_c (m_c + 1) the exact check evaluates (as many
as 22 attributes without any symmetry)."""

EXACT_PATTERNS = 2**15
"""Up to this many reduced patterns every one is evaluated in integers; above, a float screen picks the
candidates for the maximum, evaluated exactly (:meth:`PatternClasses._screened_max_load`)."""

_SCREEN = 1e-12
"""Relative margin of the float screen (the rounding error it covers is below 10⁻¹² · Σ_t B_t)."""

_MAX_CANDIDATES = 4096

Type = tuple[int, ...]
"""|T ∩ C_c| per class: the orbit of a component T."""


def interchangeable(sizes: tuple[int, ...], values: Mapping[Subset, object], k: int, l: int) -> bool:
    """Whether the transposition (k l) maps every keyed component to a keyed component of equal value."""
    if sizes[k] != sizes[l]:
        return False
    for t, value in values.items():
        if (k in t) == (l in t):
            continue
        image = tuple(sorted(l if i == k else k if i == l else i for i in t))
        if values.get(image) != value:
            return False
    return True


@dataclass(frozen=True)
class PatternClasses:
    """The interchangeable classes of the moving attributes and the reduced pattern space.

    Attributes
    ----------
    classes : tuple of tuple of int
        The attributes with ≥ 2 levels, grouped into classes of interchangeable attributes.
    levels : tuple of int
        n_c, the common number of levels of each class.
    depth : tuple of int
        t̄_c, the largest |T ∩ C_c| over the keyed components.
    """

    classes: tuple[tuple[int, ...], ...]
    levels: tuple[int, ...]
    depth: tuple[int, ...]

    @classmethod
    def of(cls, sizes: tuple[int, ...], values: Mapping[Subset, object],
           still: tuple[int, ...] = ()) -> PatternClasses:
        """The classes of :func:`interchangeable` attributes for the keyed ``values`` (components → value);
        the attributes ``still`` never disagree (pairs of records that agree on them) and are in no class."""
        groups: list[list[int]] = []
        for k, n in enumerate(sizes):
            if n < 2 or k in still:
                continue
            for group in groups:
                if interchangeable(sizes, values, group[0], k):
                    group.append(k)
                    break
            else:
                groups.append([k])
        classes = tuple(tuple(g) for g in groups)
        depth = tuple(max((sum(1 for k in t if k in c) for t in values), default=0) for c in classes)
        return cls(classes, tuple(sizes[c[0]] for c in classes), depth)

    @property
    def shape(self) -> tuple[int, ...]:
        """(m_c + 1)_c: the count vectors d."""
        return tuple(len(c) + 1 for c in self.classes)

    @property
    def count(self) -> int:
        """∏_c (m_c + 1), the number of reduced patterns (the empty pattern included)."""
        return math.prod(self.shape)

    @property
    def attributes(self) -> int:
        return sum(len(c) for c in self.classes)

    def type_of(self, t: Subset) -> Type:
        return tuple(sum(1 for k in t if k in c) for c in self.classes)

    def orbit_size(self, kind: Type) -> int:
        """∏_c C(m_c, t_c), the number of components of that type."""
        return math.prod(math.comb(len(c), t) for c, t in zip(self.classes, kind))

    def index(self, counts: Type) -> int:
        """The flat (C-order) index of a count vector."""
        return int(np.ravel_multi_index(counts, self.shape)) if self.classes else 0

    @property
    def full(self) -> int:
        """The index of the pattern on which the records differ everywhere."""
        return self.count - 1

    @property
    def singletons(self) -> list[int]:
        """The indices of the patterns with one disagreeing attribute."""
        return [self.index(tuple(int(i == j) for i in range(len(self.classes)))) for j in range(len(self.classes))]

    # ------------------------------------------------------------------ kernels
    def kernel(self, c: int) -> np.ndarray:
        """K_c[t, d] / C(m_c, t) in floats: the mean of ρ_c^{|T_c ∩ D_c|} over the t-subsets T_c."""
        m, rho = len(self.classes[c]), -1.0 / (self.levels[c] - 1)
        return np.array([[sum(math.comb(d, j) * math.comb(m - d, t - j) * rho ** j for j in range(t + 1))
                          / math.comb(m, t) for d in range(m + 1)] for t in range(self.depth[c] + 1)])

    def integer_kernel(self, c: int) -> np.ndarray:
        """K_c[t, d] (n_c − 1)^{t̄_c}: Python integers (an object array)."""
        m, n, top = len(self.classes[c]), self.levels[c], self.depth[c]
        return np.array([[sum(math.comb(d, j) * math.comb(m - d, t - j) * (-1) ** j * (n - 1) ** (top - j)
                              for j in range(t + 1)) for d in range(m + 1)] for t in range(top + 1)], dtype=object)

    @cached_property
    def _kernels(self) -> tuple[np.ndarray, ...]:
        return tuple(self.kernel(c) for c in range(len(self.classes)))

    @staticmethod
    def _mode_products(tensor: np.ndarray, kernels, transpose: bool = False) -> np.ndarray:
        """tensor ×_c kernel_c for every class (kernel_c indexed [t, d]; its transpose with ``transpose``)."""
        for c, k in enumerate(kernels):
            tensor = np.moveaxis(np.tensordot(tensor, k.T if transpose else k, axes=([c], [0])), -1, c)
        return tensor

    # ------------------------------------------------------------------ floats (the optimiser)
    def _type_tensor(self, kinds: list[Type], totals: np.ndarray) -> np.ndarray:
        tensor = np.zeros(tuple(t + 1 for t in self.depth))
        for kind, value in zip(kinds, totals):
            tensor[kind] += value
        return tensor

    def loads(self, kinds: list[Type], totals: np.ndarray) -> np.ndarray:
        """f_d for every count vector d (flat), of orbit totals B_t = Σ_{T of type t} b_T on b constant on orbits."""
        h = self._mode_products(self._type_tensor(kinds, totals), self._kernels)
        return 2.0 * (float(np.sum(totals)) - h.reshape(-1))

    def rows(self, kinds: list[Type], patterns: list[int]) -> np.ndarray:
        """∂f_d/∂B_t = 2(1 − Π_c K_c[t_c, d_c]/C(m_c, t_c)) for the given pattern indices (rows) and types."""
        out = np.empty((len(patterns), len(kinds)))
        for i, flat in enumerate(patterns):
            d = np.unravel_index(flat, self.shape) if self.classes else ()
            for j, kind in enumerate(kinds):
                out[i, j] = 2.0 * (1.0 - math.prod(self._kernels[c][t, d[c]] for c, t in enumerate(kind)))
        return out

    def transposed(self, nu: np.ndarray, kinds: list[Type]) -> np.ndarray:
        """(Aᵀν)_t = 2 Σ_d ν_d (1 − Π_c K_c[t_c, d_c]/C(m_c, t_c)) for each type."""
        h = self._mode_products(np.asarray(nu, dtype=float).reshape(self.shape), self._kernels, transpose=True)
        return np.array([2.0 * (float(np.sum(nu)) - h[kind]) for kind in kinds])

    # ------------------------------------------------------------------ exact (the privacy check)
    def exact_max_load(self, b: Mapping[Subset, Fraction]) -> Fraction:
        """max_D f_D(b) exactly, for b constant on the orbits of these classes (as :meth:`of` b gives).

        Raises
        ------
        ValueError
            When b is not constant on an orbit (the classes are not symmetries of b).

        Attributes in no class never disagree: f_D depends on b only through
        b̃_U = Σ_{T : T ∩ classes = U} b_T, which is what is evaluated.
        """
        inside = {k for c in self.classes for k in c}
        projected: dict[Subset, Fraction] = {}
        for t, value in b.items():
            u = tuple(k for k in t if k in inside)
            projected[u] = projected.get(u, Fraction(0)) + value
        per_type: dict[Type, Fraction] = {}
        for t, value in projected.items():
            kind = self.type_of(t)
            if per_type.setdefault(kind, value) != value:
                raise ValueError(f"b is not constant on the orbit of {t}")
        if not per_type:
            return Fraction(0)
        total = sum((v * self.orbit_size(kind) for kind, v in per_type.items()), Fraction(0))
        if self.count > EXACT_PATTERNS:
            return self._screened_max_load(per_type, total)
        common = math.lcm(*(v.denominator for v in per_type.values()))
        tensor = np.zeros(tuple(t + 1 for t in self.depth), dtype=object)
        tensor[...] = 0
        for kind, value in per_type.items():
            tensor[kind] += value.numerator * (common // value.denominator)
        h = self._mode_products(tensor, [self.integer_kernel(c) for c in range(len(self.classes))])
        scale = common * math.prod((n - 1) ** top for n, top in zip(self.levels, self.depth))
        return 2 * (total - Fraction(int(np.min(h)), scale))

    def _screened_max_load(self, per_type: dict[Type, Fraction], total: Fraction) -> Fraction:
        r"""max_d f_d exactly, by a float screen of every count vector and exact rationals on the few near the top.

        In floats, h_d = Σ_t B_t Π_c K̃_c[t_c, d_c] (B_t = b_t ∏ C(m_c, t_c) ≥ 0, the normalised kernels
        |K̃| ≤ 1) is a sum of products each rounded at most n ≤ Σ_c (2 m_c + 5) ≤ 7p times (p attributes), so
        :math:`|\mathrm{fl}(f_d) - f_d| \le 2\gamma_n \sum_t B_t`, :math:`\gamma_n = nu/(1 - nu)` (Higham,
        *Accuracy and Stability of Numerical Algorithms*, §3.1, for any order of summation). The true
        maximiser's float value is within twice that of the float maximum; the margin
        8 · :data:`_SCREEN` · Σ_t B_t covers it while 4γ_n < 8 · 10⁻¹², i.e. n < 18,000 (p < 2,500), so the
        maximiser is among the candidates, which are evaluated exactly.

        Raises
        ------
        ValueError
            More than :data:`_MAX_CANDIDATES` count vectors within the margin.
        """
        kinds = list(per_type)
        totals = np.array([float(v * self.orbit_size(kind)) for kind, v in per_type.items()])
        loads = self.loads(kinds, totals)
        margin = 8.0 * _SCREEN * float(total)
        candidates = np.flatnonzero(loads >= loads.max() - margin)
        if len(candidates) > _MAX_CANDIDATES:
            raise ValueError(f"{len(candidates)} disagreement patterns within the float screen's margin "
                             f"(at most {_MAX_CANDIDATES} are evaluated exactly)")
        kernels = [self.exact_kernel(c) for c in range(len(self.classes))]
        lowest = min(sum((v * math.prod(kernels[c][t][d[c]] for c, t in enumerate(kind)) for kind, v in per_type.items()),
                         Fraction(0))
                     for d in (np.unravel_index(int(i), self.shape) for i in candidates))
        return 2 * (total - lowest)

    def exact_kernel(self, c: int) -> list[list[Fraction]]:
        """K_c[t, d] = Σ_j C(d, j) C(m_c − d, t − j) ρ_c^j in Fractions."""
        m, rho = len(self.classes[c]), Fraction(-1, self.levels[c] - 1)
        return [[sum((math.comb(d, j) * math.comb(m - d, t - j) * rho ** j for j in range(t + 1)), Fraction(0))
                 for d in range(m + 1)] for t in range(self.depth[c] + 1)]
