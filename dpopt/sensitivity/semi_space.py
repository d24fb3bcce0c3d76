r"""The Semi-DP sensitivity space of a spec with invariants (Cho & Awan 2024, §3–4).

.. math::

    S_{\mathrm{Semi}} = \{\varphi(X) - \varphi(X') : X, X' \in \mathcal{D}_t,\ d(X, X') \le a\}

for every value t the invariants can take, a = max_t a(t) (:mod:`.semi_adjacency`). A
mechanism calibrated to it is (D_t, A_a, f)-DP for every t, hence (D_t, A_{a(t)}, f)-DP:
Semi-DP in the sense of Definition 12 with the semi-adjacent parameter of Definition 13.

Routes, each recorded in ``method``:

* only the total invariant: replacing a record keeps n, so a(t) = 1 and S_Semi is the
  replace-one space (:func:`dpopt.sensitivity.derive.derive`);
* margins over disjoint attribute groups, any table size: S_Semi = A·M(a)
  (:mod:`.table_moves`); norms exact on a reduced table; span = the tables whose
  invariant margins vanish, projected implicitly (:class:`.MarginSubspace`), or
  range(A P Aᵀ) for another counting query;
* other invariants (linear, overlapping margins) on small domains: M(a) listed from the
  integer invariant map, span by SVD;
* invariant values fixed by the spec: the conforming histograms of n records enumerated
  and every pair within distance a differenced.

Naive baselines for comparison (Prop. 24): a·S_DP (design for A_1 with f^{∘a}) and
S_Group (adjacency A_a on the whole dataspace).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from fractions import Fraction

import numpy as np

from dpopt.core.rows import row_groups
from dpopt.domain.marginal_algebra import subsets
from dpopt.domain.queries import CountingQuery, NumericQuery
from dpopt.errors import UnsupportedSpecError
from dpopt.sensitivity.integer_complement import IntegerComplementSpan
from dpopt.sensitivity.invariants import InvariantDomain, conforming_histograms
from dpopt.sensitivity.margin_subspace import MarginSubspace
from dpopt.sensitivity.marginal_span import MarginalSpan, workload_column
from dpopt.sensitivity.plain import derive_plain
from dpopt.sensitivity.semi_adjacency import SemiAdjacentParameter, semi_adjacent_parameter
from dpopt.sensitivity.space import SensitivitySpace, exact_norms
from dpopt.sensitivity.subspace import DenseSubspace, FullSpace, Subspace, canonical_basis, span_of
from dpopt.sensitivity.table_moves import count_multisets, kernel_moves, margin_moves, reduced_shape
from dpopt.spec.models import Hamming, Spec, TotalInvariant

_MAX_LISTED_MULTISETS = 2_000_000

_KEPT_BYTES = 64 * 2**20
"""A listed Semi-DP space up to this size is computed once per space (the design, the selection
and the certificate each list it; the 15 age ranges of ``specs/census_plan_gdp.yaml`` hold
10⁵ moves)."""
_BLOCK = 1 << 14
"""Moves multiplied by the query matrix at a time (:func:`_images`)."""


@dataclass(frozen=True)
class SemiSensitivitySpace(SensitivitySpace):
    """A :class:`SensitivitySpace` under invariants, with the Semi-DP record.

    Attributes
    ----------
    semi : SemiAdjacentParameter
        a, its reading, how it was obtained.
    baselines : dict
        Norms of the naive spaces a·S_DP and S_Group (Prop. 24), exact as strings.
    determined_by_invariants : bool
        True when the noise-free component of the release (orthogonal to the span) is a
        function of the invariants alone; False when it can reveal more (the conforming
        space is then not connected by protected steps, digest pitfall 16).
    """

    semi: SemiAdjacentParameter | None = None
    baselines: dict = field(default_factory=dict, compare=False)
    determined_by_invariants: bool = True

    def summary(self) -> dict:
        out = super().summary()
        out["semi_dp"] = {
            "semi_adjacent_parameter": self.semi.to_dict(),
            "space": "S_Semi = {φ(X) − φ(X′) : X, X′ ∈ D_t, d(X, X′) ≤ a} over every invariant value t",
            "noise_free_component_determined_by_invariants": self.determined_by_invariants,
            "baselines": self.baselines,
        }
        return out


def semi_adjacency_description(a: int) -> str:
    return (f"replace up to {a} records between datasets of n records with the same invariant "
            f"values (Semi-DP adjacency A_{a} on D_t)")


def derive_semi(spec: Spec, query: CountingQuery | NumericQuery,
                domain: InvariantDomain | None) -> SemiSensitivitySpace:
    """The Semi-DP sensitivity space of a spec with invariants, from its compiled query and its
    invariant domain (:func:`dpopt.sensitivity.invariants.invariant_stage`; None for a sum or
    mean with the total only).

    Raises
    ------
    UnsupportedSpecError
        Adjacency other than replace_one; invariants that leave nothing to protect
        (a = 0) or determine the query; domains too large for the route the invariants need.
    """
    reading = spec.semi_adjacency.reading if spec.semi_adjacency is not None else "worst_case"
    if all(isinstance(inv, TotalInvariant) for inv in spec.invariants):
        return _total_only(spec, query, reading)
    a = semi_adjacent_parameter(domain, reading)
    if a.value == 0:
        raise UnsupportedSpecError(
            "invariants",
            "a(t) = 0: the invariants determine the dataset, nothing is left to protect (Cho & Awan, Example 3)",
        )
    if domain.known_values:
        space = _enumerated(domain, a)
    elif domain.margins_only and domain.disjoint_margins:
        space = _margins(domain, a)
    else:
        space = _listed_moves(domain, a)
    if space.l2_squared == 0:
        raise UnsupportedSpecError(
            "query",
            f"the query is the same on all datasets with equal invariants within distance a = {a.value}: "
            "the invariants determine it, so it can be published exactly",
        )
    return replace(space, baselines=_baselines(spec, query, a.value))


# ------------------------------------------------------------------ routes
def _total_only(spec: Spec, query: CountingQuery | NumericQuery, reading: str) -> SemiSensitivitySpace:
    base = derive_plain(_plain(spec), query)
    a = SemiAdjacentParameter(
        1, reading, "closed form: replacing one record keeps the total n, so a(t) = 1 (Def. 13)", True
    )
    values = {f.name: getattr(base, f.name) for f in fields(SensitivitySpace) if f.init}
    values.update(
        method=f"{base.method}; S_Semi = S_DP: the total is fixed under replace-one",
        adjacency=semi_adjacency_description(1),
        semi_adjacent_parameter=1,
    )
    return SemiSensitivitySpace(**values, semi=a, baselines=_baselines(spec, query, 1))


def _margins(domain: InvariantDomain, a: SemiAdjacentParameter) -> SemiSensitivitySpace:
    shape, groups, degree = domain.shape, domain.margin_groups, a.value
    closed = marginal_closed_form(domain, degree) if domain.query.kind == "marginals" else None
    extremes = listed = None
    if closed is not None:
        (l1, l2sq, linf), span, how, extremes = closed
    else:
        fixed = frozenset(domain.query_axes[0]) if domain.query.kind == "linear" else frozenset()
        small = reduced_shape(shape, domain.covered_axes, fixed, degree)
        reduced = replace(domain, levels=tuple(lv[:k] for lv, k in zip(domain.levels, small)))
        try:
            moves = margin_moves(small, groups, degree)
        except ValueError as exc:
            raise UnsupportedSpecError("invariants", f"the Semi-DP norms need the moves of a reduced "
                                                     f"{'x'.join(map(str, small))} table: {exc}") from None
        zero = (Fraction(0), Fraction(0), Fraction(0))
        images = _images(reduced.query_matrix(), moves)
        l1, l2sq, linf = exact_norms(images) if len(moves) else zero
        if small == shape:  # the reduced table is the table: these are the listed vectors
            listed = _distinct(_with_zero(images))
        kernel = MarginSubspace(shape, groups)
        span = kernel if domain.query_is_table else _image_span(domain, kernel)
        kind = "tables with zero invariant margins (implicit projector)" if span is kernel else "A·(that kernel)"
        how = f"norms exact on the reduced {'x'.join(map(str, small))} table; span: {kind}"
    listable = sum(count_multisets(domain.cells, s, _MAX_LISTED_MULTISETS) for s in range(1, degree + 1)) \
        <= _MAX_LISTED_MULTISETS

    kept = [listed] if listable and listed is not None and listed.nbytes <= _KEPT_BYTES else []

    def vectors() -> np.ndarray:
        """S_Semi, listed once and kept when it fits :data:`_KEPT_BYTES` (a copy each call)."""
        if not listable:
            raise ValueError("too many Semi-DP sensitivity vectors to list for this table")
        if kept:
            return kept[0].copy()
        out = _distinct(_with_zero(_images(domain.query_matrix(), margin_moves(shape, groups, degree))))
        if out.nbytes <= _KEPT_BYTES:
            kept.append(out)
        return out.copy()

    if isinstance(span, DenseSubspace):  # A·(that kernel): its public component from the listed integer moves
        span = IntegerComplementSpan(span.basis(), vectors)
    return SemiSensitivitySpace(
        dimension=domain.query.dimension,
        span=span,
        l1=l1,
        l2_squared=l2sq,
        linf=linf,
        method=(
            f"structural: S_Semi = A·M({degree}), M(a) = moves z with zero invariant margins and "
            f"‖z‖₁ ≤ 2a (rectangles and longer cycles); {how}"
        ),
        adjacency=semi_adjacency_description(degree),
        complete=listable,
        semi_adjacent_parameter=degree,
        _vectors=vectors,
        _extremes=extremes,
        listable=listable,
        semi=a,
        determined_by_invariants=True,
    )


def marginal_closed_form(domain: InvariantDomain, a: int):
    r"""Exact Semi-DP norms and span of a marginals query under margins over disjoint groups, or None.

    Let :math:`I` be the query's attributes in an invariant group and call a table *free* when
    it holds an attribute outside :math:`I` with two levels or more. A move
    :math:`z \in M(a)` has zero invariant margins, so :math:`M_S z = 0` for a table
    :math:`S` inside one group; every other table has :math:`\|M_S z\|_1 \le \|z\|_1 \le 2a`
    and, :math:`M_S z` summing to zero, :math:`\|M_S z\|_2^2 \le 2a^2`,
    :math:`\|M_S z\|_\infty \le a`. When no table lies inside :math:`I` across two groups or
    more, the non-zero tables are the :math:`g` free ones, and :math:`z = a(e_x - e_y)` with
    cells :math:`x, y` equal on :math:`I` and different on every other attribute (a copies of
    y replaced by x: the same invariant values, distance a ≤ n) attains all three bounds:

    .. math:: \Delta_1 = 2ag,\quad \Delta_2^2 = 2a^2 g,\quad \Delta_\infty = a\ (g > 0).

    The span is :math:`W` applied to the tables with zero invariant margins: the ANOVA
    components of the workload's closure that lie in no invariant group (and are not the
    total), a :class:`~dpopt.sensitivity.marginal_span.MarginalSpan`. Returns the norms, the span,
    the method in words and that extreme :math:`Wz` (a callable); None when a table
    lies inside :math:`I` across two groups (e.g. sex × region with both margins invariant),
    whose moves by crossed records have no closed form here.
    """
    query = domain.query
    workload = query.workload
    sizes = workload.algebra.sizes
    position = {name: i for i, name in enumerate(query.attributes)}
    groups = [tuple(sorted(position[domain.attributes[k]] for k in g if domain.attributes[k] in position))
              for g in domain.margin_groups]
    invariant = {k for g in groups for k in g}
    free = [any(k not in invariant and sizes[k] >= 2 for k in s) for s in workload.sets]
    inside_one = [any(set(s) <= set(g) for g in groups) for s in workload.sets]
    crossed = [not f and not one and workload.algebra.size(s) >= 2
               for f, one, s in zip(free, inside_one, workload.sets)]
    if any(crossed):
        return None
    g = sum(free)
    fixed = {()} | {t for group in groups for t in subsets(group)}
    span = MarginalSpan(workload, without=tuple(t for t in workload.closure if t in fixed))
    how = (f"closed form: {g} table(s) hold an attribute outside the invariant margins, each moved by at most "
           f"‖z‖₁ ≤ 2a, attained by a records replaced by a copies of one cell agreeing on the invariant "
           f"attributes; span: the ANOVA components in no invariant group (implicit)")
    far = tuple(0 if k in invariant else n - 1 for k, n in enumerate(sizes))
    extreme = a * (workload_column(workload, (0,) * len(sizes)) - workload_column(workload, far))
    return (Fraction(2 * a * g), Fraction(2 * a * a * g), Fraction(a if g else 0)), span, how, lambda: extreme


def _listed_moves(domain: InvariantDomain, a: SemiAdjacentParameter) -> SemiSensitivitySpace:
    C = domain.invariant_matrix()
    try:
        moves = kernel_moves(C, a.value)
    except ValueError:
        raise UnsupportedSpecError(
            "invariants", f"the record domain ({domain.cells} cells) is too large to list the moves of these invariants"
        ) from None
    vectors = _with_zero(_images(domain.query_matrix(), moves))
    return _from_vectors(
        domain, a, vectors, C,
        f"structural: S_Semi = A·M({a.value}), M(a) = integer z with C z = 0 and ‖z‖₁ ≤ 2a "
        "(C the invariant map), listed; span by SVD",
    )


def _enumerated(domain: InvariantDomain, a: SemiAdjacentParameter) -> SemiSensitivitySpace:
    n = domain.n
    A = domain.query_matrix()
    found = []
    count = 0
    for _, H in conforming_histograms(domain, n):
        count += len(H)
        close = np.abs(H[:, None, :] - H[None, :, :]).sum(axis=2) <= 2 * a.value
        i, j = np.nonzero(close)
        found.append(np.unique(H[i] - H[j], axis=0))
    vectors = _with_zero(_images(A, np.vstack(found)))
    return _from_vectors(
        domain, a, vectors, domain.invariant_matrix(),
        f"enumeration: every pair of the {count} conforming histograms of n = {n} records within distance {a.value}",
    )


def _from_vectors(domain, a, vectors, C, method) -> SemiSensitivitySpace:
    vectors = np.unique(vectors, axis=0)
    l1, l2sq, linf = exact_norms(vectors)
    span = span_of(vectors.T)
    if isinstance(span, DenseSubspace):
        span = IntegerComplementSpan(span.basis(), lambda: vectors)
    from scipy.linalg import null_space  # imported where used (start-up of `dpopt verify`)

    kernel = null_space(C.astype(float))
    image = domain.query_matrix() @ kernel
    reachable = np.linalg.matrix_rank(image) if image.size else 0
    return SemiSensitivitySpace(
        dimension=domain.query.dimension,
        span=span,
        l1=l1,
        l2_squared=l2sq,
        linf=linf,
        method=method,
        adjacency=semi_adjacency_description(a.value),
        complete=True,
        semi_adjacent_parameter=a.value,
        _vectors=lambda: vectors,
        semi=a,
        determined_by_invariants=bool(span.rank == reachable),
    )


# --------------------------------------------------------------- helpers
def _image_span(domain: InvariantDomain, kernel: MarginSubspace) -> Subspace:
    """range(A P Aᵀ) = A·ker, with P applied implicitly (d projections of length m)."""
    A = domain.query_matrix()
    projected = kernel.project(A.toarray())
    gram = np.asarray(A @ projected.T)
    values, vecs = np.linalg.eigh((gram + gram.T) / 2)
    keep = values > 1e-10 * max(values.max(initial=0.0), 1e-300)
    if keep.sum() == A.shape[0]:
        return FullSpace(A.shape[0])
    # eigh's basis of a repeated eigenvalue depends on the BLAS build and thread count: canonical_basis
    # makes it the span's own; its entries err by ~ε_mach·λ_max/λ_min (Davis–Kahan), times a margin
    kept = values[keep]
    error = 64.0 * A.shape[0] * np.finfo(float).eps * float(kept.max() / kept.min()) if kept.size else None
    return DenseSubspace(canonical_basis(vecs[:, keep], error))


def _images(A, moves: np.ndarray) -> np.ndarray:
    """The rows A·z for the rows z of ``moves`` ((A·Mᵀ)ᵀ), a block of :data:`_BLOCK` moves at a time.

    The sparse product reads its dense factor row by row: Mᵀ of 10⁵ moves is a transposed copy out of
    cache, one block's transpose is not. Each entry is the same sum in the same order as in one product."""
    out = np.empty((moves.shape[0], A.shape[0]))
    for lo in range(0, moves.shape[0], _BLOCK):
        out[lo:lo + _BLOCK] = (A @ moves[lo:lo + _BLOCK].T.astype(float)).T
    return out


def _distinct(rows: np.ndarray) -> np.ndarray:
    """The rows without repeats, each at its first occurrence: S_Semi is a set, and A maps many moves to one
    vector (the census example's 538,571 moves of 15 age ranges give 471 vectors), which every consumer would
    otherwise carry (maxima, hulls, pattern searches)."""
    first, _ = row_groups(rows + 0.0)  # + 0.0: −0 and 0 are one row
    return rows[np.sort(first)]


def _with_zero(rows: np.ndarray) -> np.ndarray:
    out = np.zeros((rows.shape[0] + 1, rows.shape[1]))
    out[1:] = rows
    return out


def _plain(spec: Spec) -> Spec:
    return spec.model_copy(update={"invariants": [], "semi_adjacency": None})


def _norms(space: SensitivitySpace, factor: int = 1) -> dict:
    l1, l2sq, linf = space.l1 * factor, space.l2_squared * factor * factor, space.linf * factor
    return {"l1": float(l1), "l2": math.sqrt(float(l2sq)), "linf": float(linf),
            "l1_exact": str(l1), "l2_squared_exact": str(l2sq), "linf_exact": str(linf)}


def _baselines(spec: Spec, query: CountingQuery | NumericQuery, a: int) -> dict:
    """Norms of a·S_DP and S_Group (Cho & Awan, Prop. 24: S_Semi ⊆ S_Group ⊆ a·Hull(S_DP))."""
    plain = _plain(spec)
    dp = derive_plain(plain, query)
    group = derive_plain(plain.model_copy(update={"adjacency": Hamming(kind="hamming", distance=int(a))}),
                         query) if a > 1 else dp
    return {
        "group_scaling": {"description": f"{a}·S_DP: calibrate for replace-one, then group privacy f^∘{a}",
                          **_norms(dp, a)},
        "s_group": {"description": f"S_Group: adjacency A_{a} on every dataset of the dataspace",
                    **_norms(group)},
    }
