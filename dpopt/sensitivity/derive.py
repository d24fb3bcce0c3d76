"""The sensitivity space of a spec: Semi-DP with invariants, the closed forms without.

:func:`derive_space` is the sensitivity stage of :func:`dpopt.compile`: from the compiled
query and the invariant domain it dispatches between
:func:`dpopt.sensitivity.semi_space.derive_semi` (invariants, Cho & Awan) and
:func:`dpopt.sensitivity.plain.derive_plain` (the closed forms of the plain adjacencies),
which the Semi-DP derivation itself builds on. :func:`derive` runs the three stages on a
spec, for callers that need the space alone.
"""

from __future__ import annotations

from dpopt.domain.queries import CountingQuery, NumericQuery, compile_query
from dpopt.sensitivity.invariants import InvariantDomain, invariant_stage
from dpopt.sensitivity.plain import derive_plain
from dpopt.sensitivity.semi_space import derive_semi
from dpopt.sensitivity.space import SensitivitySpace
from dpopt.spec.models import Spec


def derive_space(spec: Spec, query: CountingQuery | NumericQuery,
                 domain: InvariantDomain | None) -> SensitivitySpace:
    """The sensitivity space of the spec's compiled query under its adjacency and invariants.

    Parameters
    ----------
    spec : Spec
        Read for its adjacency, invariants and semi-adjacency reading.
    query : CountingQuery or NumericQuery
        :func:`dpopt.domain.queries.compile_query` of the spec.
    domain : InvariantDomain or None
        :func:`dpopt.sensitivity.invariants.invariant_stage` of the spec.

    Raises
    ------
    UnsupportedSpecError
        A mean under add/remove; a query that does not change between neighbours;
        invariants the Semi-DP derivation (:func:`dpopt.sensitivity.semi_space.derive_semi`)
        cannot serve.
    """
    return derive_semi(spec, query, domain) if spec.invariants else derive_plain(spec, query)


def derive(spec: Spec) -> SensitivitySpace:
    """Derive the sensitivity space of the spec's query under its adjacency (and invariants).

    Compiles the query and the invariant domain on the way; the pipeline keeps them in a
    :class:`dpopt.Problem` (:func:`dpopt.compile`) instead.

    Raises
    ------
    SpecError, UnsupportedSpecError
        As :func:`dpopt.domain.queries.compile_query`,
        :func:`dpopt.sensitivity.invariants.invariant_stage` and :func:`derive_space`.
    """
    query = compile_query(spec)
    return derive_space(spec, query, invariant_stage(spec, query))
