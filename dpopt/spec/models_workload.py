"""Spec models of workloads that are unions of Kronecker products (``kind: kronecker``).

A table's domain is the product of its attributes' levels; a *term* of the workload names,
for some attributes, the small matrix applied along that attribute (every attribute a term
leaves out is summed over). The released vector stacks the terms' answers, each
row-major over its attributes in the order they are written, the first slowest.

Per-attribute factors:

* ``identity`` — every level (a margin over that attribute);
* ``total`` — the sum over the levels (the same as leaving the attribute out);
* ``prefix`` — the cumulative counts ``x_0 + … + x_i`` over the levels in their order;
* ``ranges`` — every range ``x_i + … + x_j`` (i ≤ j), or ``{ranges: w}``: those of width ≤ w;
* ``{matrix: [[...]]}`` — a user's matrix with one column per level.

Two forms, exactly one of them: ``terms`` (a list of ``{attribute: factor}`` maps), or the
sugar ``all_of_size: k`` (every group of k attributes among ``over``, default every
categorical attribute not named in ``crossed_with``, each an identity factor), each group
crossed with the factors of ``crossed_with`` (e.g. ``{age: prefix}``).
"""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import BaseModel, ConfigDict, Discriminator, Field, StrictInt, Tag, model_validator

Finite = Annotated[float, Field(allow_inf_nan=False, strict=True, ge=-1e100, le=1e100)]
"""A finite number of magnitude at most 1e100 (an integer or a float; not a string or a boolean; the bound of
:data:`dpopt.spec.models.MAX_MAGNITUDE`, which this module cannot import)."""


class _Model(BaseModel):
    """Frozen, no unknown keys (as :class:`dpopt.spec.models._Model`; this module is imported by
    :mod:`dpopt.spec.models` for its Query union, so it cannot import from it)."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class RangesFactor(_Model):
    """Every range of at most ``ranges`` consecutive levels."""

    ranges: Annotated[StrictInt, Field(ge=1)]


class MatrixFactor(_Model):
    """A user's matrix over the levels of one attribute (one column per level, equal-length rows)."""

    matrix: Annotated[list[Annotated[list[Finite], Field(min_length=1)]], Field(min_length=1)]

    @model_validator(mode="after")
    def _rectangular(self) -> "MatrixFactor":
        if len({len(row) for row in self.matrix}) != 1:
            raise ValueError("rows must all have the same length")
        return self


def _factor_form(value: object) -> str:
    """Which form a factor takes (a name, ``{ranges: w}`` or ``{matrix: ...}``), so that an error names the
    problem of that form only."""
    if isinstance(value, (dict, RangesFactor, MatrixFactor)):  # a mapping read, or a model serialised
        return "{ranges: w}" if isinstance(value, RangesFactor) or "ranges" in value else "{matrix: rows}"
    return "name"


Factor = Annotated[Union[Annotated[Literal["identity", "total", "prefix", "ranges"], Tag("name")],
                         Annotated[RangesFactor, Tag("{ranges: w}")],
                         Annotated[MatrixFactor, Tag("{matrix: rows}")]],
                   Discriminator(_factor_form)]
Term = Annotated[dict[str, Factor], Field(min_length=1)]


class KroneckerQuery(_Model):
    """A union of Kronecker products of per-attribute matrices (module docstring)."""

    kind: Literal["kronecker"]
    terms: Annotated[list[Term], Field(min_length=1)] | None = None
    all_of_size: Annotated[StrictInt, Field(ge=0)] | None = None
    over: Annotated[list[str], Field(min_length=1)] | None = None
    crossed_with: dict[str, Factor] | None = None

    @model_validator(mode="after")
    def _one_form(self) -> "KroneckerQuery":
        if (self.terms is None) == (self.all_of_size is None):
            raise ValueError("give exactly one of terms (a list of {attribute: factor} maps) and all_of_size "
                             "(every group of that size, crossed with crossed_with)")
        if self.terms is not None and (self.over is not None or self.crossed_with is not None):
            raise ValueError("over and crossed_with go with all_of_size only")
        return self
