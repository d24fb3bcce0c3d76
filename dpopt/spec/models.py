"""The spec: a frozen, validated description of one release.

Every model forbids unknown keys and is immutable once loaded. The meaning of a
``kind`` never changes; new behaviour gets a new kind (the stability rule of
dp_accounting's ``DpEvent``).
"""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

FAMILIES: tuple[str, ...] = (
    "gaussian",
    "projected_gaussian",
    "james_stein",
    "gaussian_optimal",
    "laplace",
    "k_norm",
    "generalized_gaussian",
    "staircase",
    "r2dp",
    "discrete_gaussian",
    "discrete_laplace",
)
"""Every mechanism family name the spec format reserves (DESIGN.md)."""

Family = Literal[
    "gaussian",
    "projected_gaussian",
    "james_stein",
    "gaussian_optimal",
    "laplace",
    "k_norm",
    "generalized_gaussian",
    "staircase",
    "r2dp",
    "discrete_gaussian",
    "discrete_laplace",
]

PositiveFinite = Annotated[float, Field(gt=0, allow_inf_nan=False)]
Probability = Annotated[float, Field(gt=0, lt=1, allow_inf_nan=False)]
Matrix = list[list[Annotated[float, Field(allow_inf_nan=False)]]]


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def _rectangular(matrix: list[list[float]]) -> list[list[float]]:
    if not matrix or not matrix[0]:
        raise ValueError("must be a non-empty matrix (a list of rows)")
    if len({len(row) for row in matrix}) != 1:
        raise ValueError("rows must all have the same length")
    return matrix


# --------------------------------------------------------------------------- data
class NumericAttribute(_Model):
    """A bounded numeric attribute, ``{min: a, max: b}`` with a < b."""

    min: Annotated[float, Field(allow_inf_nan=False)]
    max: Annotated[float, Field(allow_inf_nan=False)]

    @model_validator(mode="after")
    def _ordered(self) -> "NumericAttribute":
        if not self.min < self.max:
            raise ValueError(f"min must be below max (got min={self.min}, max={self.max})")
        return self


Levels = Annotated[list[str], Field(min_length=1)]


class Data(_Model):
    """Record domain: categorical attributes (their levels) and bounded numeric ones."""

    attributes: dict[str, Union[Levels, NumericAttribute]]
    n: Annotated[int, Field(ge=1)] | None = None

    @field_validator("attributes", mode="before")
    @classmethod
    def _levels_as_strings(cls, value: object) -> object:
        if isinstance(value, dict):
            return {
                name: [str(level) for level in levels] if isinstance(levels, list) else levels
                for name, levels in value.items()
            }
        return value

    @field_validator("attributes")
    @classmethod
    def _non_empty_unique(cls, value: dict) -> dict:
        if not value:
            raise ValueError("the record domain needs at least one attribute")
        for name, levels in value.items():
            if isinstance(levels, list) and len(set(levels)) != len(levels):
                raise ValueError(f"attribute '{name}' lists a level twice")
        return value


# ------------------------------------------------------------------------ queries
class CountQuery(_Model):
    kind: Literal["count"]


class HistogramQuery(_Model):
    kind: Literal["histogram"]
    attribute: str


class ContingencyTableQuery(_Model):
    kind: Literal["contingency_table"]
    attributes: Annotated[list[str], Field(min_length=1)]


class MarginalsQuery(_Model):
    kind: Literal["marginals"]
    attributes: Annotated[list[Annotated[list[str], Field(min_length=1)]], Field(min_length=1)]


class LinearQuery(_Model):
    kind: Literal["linear"]
    attribute: str
    matrix: Matrix

    _rect = field_validator("matrix")(_rectangular)


class SumQuery(_Model):
    kind: Literal["sum"]
    attribute: str


class MeanQuery(_Model):
    kind: Literal["mean"]
    attribute: str


Query = Annotated[
    Union[
        CountQuery,
        HistogramQuery,
        ContingencyTableQuery,
        MarginalsQuery,
        LinearQuery,
        SumQuery,
        MeanQuery,
    ],
    Field(discriminator="kind"),
]


# --------------------------------------------------------------------- invariants
class TotalInvariant(_Model):
    kind: Literal["total"]


class MarginsInvariant(_Model):
    kind: Literal["margins"]
    attributes: Annotated[list[str], Field(min_length=1)]


class LinearInvariant(_Model):
    """``C · φ(X) = t`` for the query's answer φ(X); ``value`` is t when known."""

    kind: Literal["linear"]
    matrix: Matrix
    value: list[float] | None = None

    _rect = field_validator("matrix")(_rectangular)


Invariant = Annotated[
    Union[TotalInvariant, MarginsInvariant, LinearInvariant], Field(discriminator="kind")
]


# ---------------------------------------------------------------------- adjacency
class AddRemove(_Model):
    """Neighbours differ by adding or removing one record."""

    kind: Literal["add_remove"]


class ReplaceOne(_Model):
    """Neighbours have the same size and differ in one record."""

    kind: Literal["replace_one"]


class Hamming(_Model):
    """Datasets of the same size that differ in at most ``distance`` records."""

    kind: Literal["hamming"]
    distance: Annotated[int, Field(ge=1)]


Adjacency = Annotated[Union[AddRemove, ReplaceOne, Hamming], Field(discriminator="kind")]


# ------------------------------------------------------------------------ privacy
class PureTarget(_Model):
    epsilon: PositiveFinite


class ApproxTarget(_Model):
    epsilon: PositiveFinite
    delta: Probability


class GDPTarget(_Model):
    mu: PositiveFinite


class ZCDPTarget(_Model):
    rho: PositiveFinite


class PDPTarget(_Model):
    epsilon: PositiveFinite
    delta: Probability


class Privacy(_Model):
    """Exactly one of ``pure``, ``approx``, ``gdp``, ``zcdp``, ``pdp``."""

    pure: PureTarget | None = None
    approx: ApproxTarget | None = None
    gdp: GDPTarget | None = None
    zcdp: ZCDPTarget | None = None
    pdp: PDPTarget | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> "Privacy":
        given = [name for name in PRIVACY_DEFINITIONS if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError(
                "give exactly one of " + ", ".join(PRIVACY_DEFINITIONS) + f" (got {given or 'none'})"
            )
        return self

    @property
    def definition(self) -> str:
        """The name of the definition given: ``pure``, ``approx``, ``gdp``, ``zcdp`` or ``pdp``."""
        return next(name for name in PRIVACY_DEFINITIONS if getattr(self, name) is not None)

    @property
    def parameters(self) -> dict[str, float]:
        """The target's parameters, e.g. ``{"epsilon": 1.0, "delta": 1e-6}``."""
        return getattr(self, self.definition).model_dump()


PRIVACY_DEFINITIONS: tuple[str, ...] = ("pure", "approx", "gdp", "zcdp", "pdp")


# ------------------------------------------------------------------------ utility
class Utility(_Model):
    """The utility metric the design optimises.

    ``l2``: E‖W·noise‖₂² (W the optional ``workload``, identity by default);
    ``l1``: E‖noise‖₁; ``usefulness``: P(|noise| ≤ γ) per coordinate.
    """

    metric: Literal["l1", "l2", "usefulness", "ci_volume", "test_power", "max_variance"]
    gamma: PositiveFinite | None = None
    alpha: Probability | None = None
    workload: Matrix | None = None

    @field_validator("workload")
    @classmethod
    def _workload_rect(cls, value: Matrix | None) -> Matrix | None:
        return None if value is None else _rectangular(value)

    @model_validator(mode="after")
    def _options_fit_metric(self) -> "Utility":
        if self.metric == "usefulness" and self.gamma is None:
            raise ValueError("metric 'usefulness' needs gamma (the accuracy radius)")
        if self.workload is not None and self.metric != "l2":
            raise ValueError("a workload goes with metric 'l2' only")
        return self


# --------------------------------------------------------------------------- spec
class Spec(_Model):
    """One release: domain, query, invariants, adjacency, privacy target, design choices."""

    dpopt: Literal[1]
    name: Annotated[str, Field(min_length=1)]
    description: str | None = None
    data: Data
    query: Query
    invariants: list[Invariant] = []
    adjacency: Adjacency
    privacy: Privacy
    mechanism: Union[Literal["auto"], Family, Annotated[list[Family], Field(min_length=1)]] = "auto"
    utility: Utility = Utility(metric="l2")

    @field_validator("adjacency", mode="before")
    @classmethod
    def _adjacency_shorthand(cls, value: object) -> object:
        return {"kind": value} if isinstance(value, str) else value

    @field_validator("utility", mode="before")
    @classmethod
    def _utility_shorthand(cls, value: object) -> object:
        return {"metric": value} if isinstance(value, str) else value

    @property
    def families(self) -> tuple[str, ...]:
        """The families the design may use (``auto`` means all of them)."""
        if self.mechanism == "auto":
            return FAMILIES
        if isinstance(self.mechanism, str):
            return (self.mechanism,)
        return tuple(dict.fromkeys(self.mechanism))

