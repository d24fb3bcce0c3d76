"""The spec of a person-level release with private group keys and private quantiles.

A document with a ``releases`` list (instead of one ``query``) describes releases from records with
several rows per person (``data.privacy_unit`` is required):

- ``{kind: count, by: COLUMN, epsilon, delta, selection: optimal | laplace_threshold |
  gaussian_threshold}``: row counts per key of a column whose keys are **private**
  (``{keys: private, declared: [...]}`` in ``data.attributes``): declared keys are always released
  (noisy, zero when absent), any other key only through differentially private partition selection;
- ``{kind: quantile, attribute: NUMERIC, q: [0.5], grid: {step: 1} | {points: [...]}, by: CATEGORICAL,
  epsilon}``: quantiles by the exponential mechanism, per declared group when ``by`` is given;
- ``{kind: mean, attribute: NUMERIC, by: COLUMN, epsilon}``: means per key of a private-key column,
  released only for the keys the spec's count release with the same ``by`` (listed before it) releases:
  its declared keys and those its partition selection keeps (no selection of its own).

Each release is bounded and computed on its own; their guarantees compose by basic composition
(ε and δ add up) under the spec's ``privacy`` target (``pure`` or ``approx``). Adjacency: add or
remove one person with all their rows.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Annotated, Any, Literal, Mapping, Union

from pydantic import Discriminator, Field, Tag, field_validator, model_validator

from dpopt.core.decimals import written
from dpopt.errors import SpecError
from dpopt.spec.load import is_selection_document, load_composite
from dpopt.spec.models import (
    AddRemove,
    Finite,
    FormatVersion,
    Levels,
    Name,
    NumericAttribute,
    Output,
    PositiveFinite,
    Privacy,
    PrivacyNumber,
    PrivacyProbability,
    PrivacyUnit,
    Probability,
    Spec,
    _Model,
    attribute_form,
    levels_as_text,
)

class PrivateKeys(_Model):
    """A grouping column whose keys are not listed: ``{keys: private, declared: [...]}``.

    ``declared`` keys are public: always released (with noise, zero when the data have none); any
    other key found in the data is released only when partition selection keeps it.
    """

    keys: Literal["private"]
    declared: list[Name] = []

    @field_validator("declared")
    @classmethod
    def _unique(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError("a declared key is listed twice")
        return value


class SelectionData(_Model):
    """Record domain: categorical (levels), bounded numeric and private-key attributes; the privacy unit."""

    attributes: dict[Name, Annotated[Union[Annotated[Levels, Tag("levels")], Annotated[NumericAttribute, Tag("bounds")],
                                           Annotated[PrivateKeys, Tag("private_keys")]], Discriminator(attribute_form)]]
    privacy_unit: PrivacyUnit

    @field_validator("attributes", mode="before")
    @classmethod
    def _levels_as_text(cls, value: object) -> object:
        """Levels and declared keys written as numbers are read as their text; a list, a mapping, a boolean or
        null is refused (:func:`dpopt.spec.models.levels_as_text`)."""
        if not isinstance(value, dict):
            return value
        declared = {name: spec["declared"] for name, spec in value.items()
                    if isinstance(spec, dict) and isinstance(spec.get("declared"), list)}
        keys = levels_as_text(declared)
        return {name: {**spec, "declared": keys[name]} if name in keys else spec
                for name, spec in levels_as_text(value).items()}

    @field_validator("attributes")
    @classmethod
    def _unique_levels(cls, value: dict) -> dict:
        for name, levels in value.items():
            if isinstance(levels, list) and len(set(levels)) != len(levels):
                raise ValueError(f"attribute '{name}' lists a level twice")
        return value


class CountRelease(_Model):
    """Row counts per key of a private-key column (see the module). ``selection_share``: the fraction of
    ``epsilon`` spent on the optimal selection (the rest on the counts' noise)."""

    kind: Literal["count"]
    name: Annotated[str, Field(min_length=1)] | None = None
    by: str
    epsilon: PrivacyNumber
    delta: PrivacyProbability
    selection: Literal["optimal", "laplace_threshold", "gaussian_threshold"] = "optimal"
    selection_share: Probability | None = None

    @model_validator(mode="after")
    def _share(self) -> "CountRelease":
        if self.selection_share is not None and self.selection != "optimal":
            raise ValueError("selection_share goes with selection: optimal only (a threshold releases the "
                             "noisy count it selects with)")
        return self

    @property
    def share(self) -> str:
        """The selection's share of ε as exact decimal text (default 1/2)."""
        return "0.5" if self.selection_share is None else repr(self.selection_share)


class Grid(_Model):
    """The candidate outputs of a quantile: ``{step: s}`` (min, min + s, … ≤ max) or ``{points: [...]}``."""

    step: PositiveFinite | None = None
    points: Annotated[list[Finite], Field(min_length=2)] | None = None

    @model_validator(mode="after")
    def _one(self) -> "Grid":
        if (self.step is None) == (self.points is None):
            raise ValueError("give exactly one of step and points")
        return self


class QuantileRelease(_Model):
    """Quantiles ``q`` of a bounded numeric attribute on a grid, per level of ``by`` (a categorical
    attribute) when given; ``epsilon`` is split equally over the q's."""

    kind: Literal["quantile"]
    name: Annotated[str, Field(min_length=1)] | None = None
    attribute: str
    q: Annotated[list[Probability], Field(min_length=1)]
    grid: Grid
    by: str | None = None
    epsilon: PrivacyNumber


class MeanRelease(_Model):
    """The mean of a bounded numeric attribute per key of a private-key column ``by``, for the keys released by
    the count release with the same ``by`` (see the module); pure ε."""

    kind: Literal["mean"]
    name: Annotated[str, Field(min_length=1)] | None = None
    attribute: str
    by: str
    epsilon: PrivacyNumber


Release = Annotated[Union[CountRelease, QuantileRelease, MeanRelease], Field(discriminator="kind")]


class SelectionSpec(_Model):
    """Person-level releases with private group keys and quantiles (see the module)."""

    dpopt: FormatVersion
    name: Annotated[str, Field(min_length=1)]
    description: str | None = None
    data: SelectionData
    releases: Annotated[list[Release], Field(min_length=1)]
    adjacency: AddRemove
    privacy: Privacy
    output: Output | None = None
    """As :attr:`Spec.output`: the published numbers rounded (post-processing), stated in the certificate."""

    _adjacency = field_validator("adjacency", mode="before")(Spec._adjacency_shorthand.__func__)

    @field_validator("releases", mode="before")
    @classmethod
    def _default_names(cls, value: object) -> object:
        if isinstance(value, list):
            return [{**r, "name": r.get("name") or f"r{i + 1}"} if isinstance(r, dict) else r
                    for i, r in enumerate(value)]
        return value

    @model_validator(mode="after")
    def _budget(self) -> "SelectionSpec":
        names = [r.name for r in self.releases]
        if len(set(names)) != len(names):
            raise ValueError("release names must be distinct")
        definition = self.privacy.definition
        if definition not in ("pure", "approx"):
            raise ValueError("the privacy target of a release with private keys or quantiles is pure or approx "
                             f"(basic composition), not {definition}")
        target = self.privacy.parameters
        epsilon, delta = spent(self)
        if epsilon > written(target["epsilon"]):
            raise ValueError(f"the releases spend ε = {float(epsilon):.17g} in all, above the target "
                             f"ε = {target['epsilon']!r}")
        if delta > written(target.get("delta", 0)):
            raise ValueError(f"the releases spend δ = {float(delta):.17g} in all, above the target "
                             f"δ = {target.get('delta', 0)!r}"
                             + (" (a count with private keys needs approx)" if definition == "pure" else ""))
        return self


def spent(spec: SelectionSpec) -> tuple[Fraction, Fraction]:
    """(Σ ε, Σ δ) of the releases (basic composition), exact on the decimals written
    (:func:`dpopt.core.decimals.written`: 0.1 + 0.2 spends exactly 0.3)."""
    return (sum((written(r.epsilon) for r in spec.releases), Fraction(0)),
            sum((written(r.delta) for r in spec.releases if isinstance(r, CountRelease)), Fraction(0)))


def keys_from(spec: SelectionSpec, i: int) -> CountRelease:
    """The count release whose released keys the mean release ``i`` is computed on: the one count release of the
    spec with the same ``by``, listed before it.

    Raises
    ------
    SpecError
        No such count release, or more than one.
    """
    by = spec.releases[i].by
    counts = [r for r in spec.releases[:i] if isinstance(r, CountRelease) and r.by == by]
    if len(counts) != 1:
        raise SpecError(f"releases[{i}].by", f"a mean per private key of '{by}' is released on the keys of one count "
                                             f"release with by: {by} listed before it (partition selection); found "
                                             f"{len(counts)}")
    return counts[0]


def load_selection_spec(source: str | Path | Mapping[str, Any] | SelectionSpec) -> SelectionSpec:
    """Load and validate a spec with private keys or quantiles.

    Raises
    ------
    SpecError
        Naming the first bad field (``releases[0].by`` ...).
    """
    return load_composite(source, SelectionSpec, _check_references)


def _check_references(spec: SelectionSpec) -> None:
    attributes = spec.data.attributes
    unit = spec.data.privacy_unit
    if unit.id in attributes:
        raise SpecError("data.privacy_unit.id", f"'{unit.id}' is also an attribute; the id column is not released")
    for i, release in enumerate(spec.releases):
        field = f"releases[{i}]"
        if isinstance(release, CountRelease):
            if not isinstance(attributes.get(release.by), PrivateKeys):
                raise SpecError(f"{field}.by", f"'{release.by}' is not an attribute with private keys ({{keys: "
                                               "private}); counts over listed levels are a contingency_table spec")
            if unit.max_groups is None and unit.max_rows is None:
                raise SpecError("data.privacy_unit", "partition selection needs max_groups or max_rows (how many "
                                                     "keys one person may contribute to)")
            continue
        if not isinstance(attributes.get(release.attribute), NumericAttribute):
            raise SpecError(f"{field}.attribute", f"'{release.attribute}' is not a bounded numeric attribute")
        if isinstance(release, MeanRelease):
            if not isinstance(attributes.get(release.by), PrivateKeys):
                raise SpecError(f"{field}.by", f"'{release.by}' is not an attribute with private keys ({{keys: "
                                               "private}); a mean over listed levels is a grouped mean spec")
            keys_from(spec, i)
            continue
        if release.by is not None and not isinstance(attributes.get(release.by), list):
            raise SpecError(f"{field}.by", f"'{release.by}' is not a categorical attribute with listed levels "
                                           "(quantiles per private key are not supported)")
        domain = attributes[release.attribute]
        points = release.grid.points
        if points is not None and (min(points) < domain.min or max(points) > domain.max):
            raise SpecError(f"{field}.grid.points", f"grid points must lie within [{domain.min:g}, {domain.max:g}]")
        if release.grid.step is not None and (domain.max - domain.min) / release.grid.step >= 10**6:
            raise SpecError(f"{field}.grid.step", "the grid would have more than 10⁶ points")
