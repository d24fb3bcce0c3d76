"""The spec: a frozen, validated description of one release.

Every model forbids unknown keys and is immutable once loaded. The meaning of a
``kind`` never changes; new behaviour gets a new kind (the stability rule of
dp_accounting's ``DpEvent``).
"""

from __future__ import annotations

import itertools
from decimal import Decimal
from fractions import Fraction
from typing import Annotated, Literal, Union

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    StrictBool,
    Tag,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from dpopt.core.decimals import SpelledFloat, kept, written
from dpopt.core.families import family_names
from dpopt.spec.models_workload import KroneckerQuery


def _family(value: str) -> str:
    """A name of :func:`dpopt.core.families.family_names`, reported like a literal when it is not."""
    names = family_names()
    if value not in names:
        expected = ", ".join(f"'{n}'" for n in names[:-1]) + f" or '{names[-1]}'"
        raise PydanticCustomError("literal_error", "Input should be {expected}", {"expected": expected})
    return value


Family = Annotated[str, AfterValidator(_family)]
"""A mechanism family name (the registry's list, :mod:`dpopt.core.families`)."""


def _number(value: object) -> object:
    """Refuse a boolean or a string where a number is expected (pydantic's lax mode reads
    ``true`` as 1 and ``"1e-5"`` as a float); any other value goes on to the number check."""
    if isinstance(value, (bool, str)):
        raise PydanticCustomError("number_type", "Input should be a number, not a {kind}",
                                  {"kind": "boolean" if isinstance(value, bool) else "string"})
    return value


Number = BeforeValidator(_number)
"""Marks a numeric field that accepts numbers only (not ``true``, not ``"1"``)."""


def _integer(value: object) -> object:
    """Refuse anything but an integer (``true``, ``"1"`` and ``1.0`` are not) before a literal check."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise PydanticCustomError("int_type", "Input should be an integer")
    return value


FormatVersion = Annotated[Literal[1], BeforeValidator(_integer)]
"""The spec format version, ``dpopt: 1`` (an integer)."""

MAX_COUNT = 2**53
"""The largest integer a spec's count (``data.n``, a Hamming distance) may be: every integer
up to it is a float exactly, and no dataset is larger."""

MAX_MAGNITUDE = 1e100
"""The largest magnitude of a number in a spec (a bound, a matrix entry, a weight, a privacy parameter), and
1/MAX_MAGNITUDE the smallest positive parameter: the quantities derived from them (a sensitivity squared times
a dimension, a noise scale Δ/ε and its square) then stay far inside the float range (up to 1.8e308), where
1e308 overflowed to inf or nan and stopped a command with a traceback."""

PositiveFinite = Annotated[float, Number, Field(ge=1 / MAX_MAGNITUDE, le=MAX_MAGNITUDE, allow_inf_nan=False)]
Probability = Annotated[float, Number, Field(gt=0, lt=1, allow_inf_nan=False)]
Finite = Annotated[float, Number, Field(ge=-MAX_MAGNITUDE, le=MAX_MAGNITUDE, allow_inf_nan=False)]
Count = Annotated[int, Field(strict=True, ge=1, le=MAX_COUNT)]
"""A whole number of records, persons or attributes: an integer (not ``1.0``, ``"2"`` or ``true``)."""


def _kept_decimal(value: object) -> object:
    """Refuse a privacy number whose decimal a float does not keep (:mod:`dpopt.core.decimals`): the
    ledger and every exact composition read it as the decimal written, the calibration as the float.
    A :class:`~decimal.Decimal` or :class:`~fractions.Fraction` from Python is read as its value."""
    text = value.text if isinstance(value, SpelledFloat) else value
    if isinstance(value, (SpelledFloat, Decimal, Fraction)) and not kept(text):
        near = float(written(text)) if abs(written(text)) < 2 ** 1023 else "infinity"
        raise PydanticCustomError("decimal_kept", "{text} is not kept by a floating-point number (it would be "
                                  "read as {near}): write at most 15 significant digits",
                                  {"text": str(text), "near": repr(near)})
    return float(value) if isinstance(value, (Decimal, Fraction)) else value


PrivacyNumber = Annotated[float, BeforeValidator(_kept_decimal), Number,
                          Field(ge=1 / MAX_MAGNITUDE, le=MAX_MAGNITUDE, allow_inf_nan=False)]
"""A privacy parameter (ε, δ, μ, ρ): a number in [1/MAX_MAGNITUDE, MAX_MAGNITUDE] whose written decimal is its
float's repr."""
PrivacyProbability = Annotated[float, BeforeValidator(_kept_decimal), Number, Field(gt=0, lt=1, allow_inf_nan=False)]
"""A privacy probability (δ of (ε, δ) and pDP): in (0, 1), its written decimal its float's repr."""
Matrix = list[list[Finite]]


def _named(value: str) -> str:
    """Refuse an empty or blank name (of an attribute, a level, a column)."""
    if not value.strip():
        raise PydanticCustomError("blank_name", "must not be empty or blank")
    return value


Name = Annotated[str, Field(strict=True), AfterValidator(_named)]
"""The name of an attribute, a level or a column: text that is not empty or blank."""


class _Model(BaseModel):
    # defer_build: a model's validator is built on its first use, not at import (about half a
    # numpy import's time saved at the start of every command; `dpopt verify` never builds Plan's)
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


def _rectangular(matrix: list[list[float]]) -> list[list[float]]:
    if not matrix or not matrix[0]:
        raise ValueError("must be a non-empty matrix (a list of rows)")
    if len({len(row) for row in matrix}) != 1:
        raise ValueError("rows must all have the same length")
    return matrix


# --------------------------------------------------------------------------- data
def levels_as_text(value: object) -> object:
    """The levels of every attribute of ``data.attributes`` as text: a level written as a number
    (``[1, 2, 3]``) is read as its text; a level that is a list, a mapping, a boolean or null is
    refused (:class:`ValueError` naming the attribute), not turned into the text of a Python object."""
    if not isinstance(value, dict):
        return value
    for name, levels in value.items():
        for level in levels if isinstance(levels, list) else ():
            if isinstance(level, bool) or not isinstance(level, (str, int, float)):
                raise ValueError(f"attribute '{name}': level {level!r} is not a name or a number")
    return {name: [str(level) for level in levels] if isinstance(levels, list) else levels
            for name, levels in value.items()}


class NumericAttribute(_Model):
    """A bounded numeric attribute, ``{min: a, max: b}`` with a < b."""

    min: Finite
    max: Finite

    @model_validator(mode="after")
    def _ordered(self) -> "NumericAttribute":
        if not self.min < self.max:
            raise ValueError(f"min must be below max (got min={self.min}, max={self.max})")
        return self


Levels = Annotated[list[Name], Field(min_length=1)]


def attribute_form(value: object) -> str:
    """Which form an attribute's entry takes: ``levels`` (a list), ``private_keys`` (a mapping with ``keys``)
    or ``bounds`` (any other mapping), so that an error names the problem of that form only."""
    if isinstance(value, list):
        return "levels"
    keys = value if isinstance(value, dict) else type(value).model_fields if isinstance(value, BaseModel) else ()
    return "private_keys" if "keys" in keys else "bounds"  # a mapping read, or a model serialised


Attribute = Annotated[Union[Annotated[Levels, Tag("levels")], Annotated[NumericAttribute, Tag("bounds")]],
                      Discriminator(attribute_form)]
"""A categorical attribute (its levels) or a bounded numeric one (``{min, max}``)."""


MAX_PERSON_BOUND = 1000
"""The largest contribution bound of a privacy unit (rows in all, groups, rows per group). The person-level
derivations are exact by counting rows: a partition-selection threshold evaluates every row count up to the
bound (0.8 s of CPU at 1,000, 9 s at 10,000), the replace-one norms of marginals every pair of row counts
(quadratic), so a bound such as 10^15 ran without end."""

PersonBound = Annotated[Count, Field(le=MAX_PERSON_BOUND)]


class PrivacyUnit(_Model):
    """Who is protected when a person has several rows: the ``id`` column and the contribution bounds.

    ``max_rows`` (k) rows in all, ``max_groups`` (g) cells of the query's histogram, ``max_rows_per_group``
    (c) rows in any one cell; each optional, but k or c must be given (g alone leaves a person's rows
    unbounded). Rows beyond the bounds are dropped at random on release (:mod:`dpopt.release.bounding`).
    """

    id: Name
    max_rows: PersonBound | None = None
    max_groups: PersonBound | None = None
    max_rows_per_group: PersonBound | None = None

    @model_validator(mode="after")
    def _bounded(self) -> "PrivacyUnit":
        if self.max_rows is None and self.max_rows_per_group is None:
            raise ValueError("give max_rows or max_rows_per_group (max_groups alone does not bound a person's rows)")
        return self


class Data(_Model):
    """Record domain: categorical attributes (their levels) and bounded numeric ones; ``privacy_unit``
    when a person may have several rows."""

    attributes: dict[Name, Attribute]
    n: Count | None = None
    privacy_unit: PrivacyUnit | None = None

    @field_validator("attributes", mode="before")
    @classmethod
    def _levels_as_strings(cls, value: object) -> object:
        """Levels written as numbers (``[1, 2, 3]``) are read as their text; a level that is a
        list, a mapping, a boolean or null is an error, not the text of a Python object."""
        return levels_as_text(value)

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
    """Marginal tables: the groups listed in ``attributes``, or every group of ``all_of_size``
    attributes among ``over`` (default: every categorical attribute, in the order of
    ``data.attributes``), in the order of :func:`itertools.combinations`. Exactly one of
    ``attributes`` and ``all_of_size``."""

    kind: Literal["marginals"]
    attributes: Annotated[list[Annotated[list[str], Field(min_length=1)]], Field(min_length=1)] | None = None
    all_of_size: Annotated[Count, Field(ge=1)] | None = None
    over: Annotated[list[str], Field(min_length=1)] | None = None

    @model_validator(mode="after")
    def _one_form(self) -> "MarginalsQuery":
        if (self.attributes is None) == (self.all_of_size is None):
            raise ValueError("give exactly one of attributes (the groups) and all_of_size "
                             "(every group of that size)")
        if self.over is not None and self.all_of_size is None:
            raise ValueError("over goes with all_of_size only")
        return self

    def groups(self, data: Data) -> list[list[str]]:
        """The attribute group of each marginal table, ``all_of_size`` expanded over ``data``."""
        if self.attributes is not None:
            return [list(g) for g in self.attributes]
        over = self.over if self.over is not None else [
            name for name, levels in data.attributes.items() if not isinstance(levels, NumericAttribute)]
        return [list(g) for g in itertools.combinations(over, self.all_of_size)]


class LinearQuery(_Model):
    """``matrix · histogram(attribute)``; ``labels`` names its rows (one each, unique, non-blank), else
    :func:`dpopt.domain.queries.linear_row_labels` names them."""

    kind: Literal["linear"]
    attribute: str
    matrix: Matrix
    labels: list[str] | None = None

    _rect = field_validator("matrix")(_rectangular)

    @field_validator("labels")
    @classmethod
    def _labels(cls, labels: list[str] | None) -> list[str] | None:
        if labels is None:
            return None
        blank = [i for i, label in enumerate(labels) if not label.strip()]
        if blank:
            raise ValueError(f"label {blank[0]} is blank: name every row of the matrix")
        repeated = sorted({label for label in labels if labels.count(label) > 1})
        if repeated:
            raise ValueError(f"{repeated[0]!r} names more than one row: labels must be unique")
        return labels

    @model_validator(mode="after")
    def _one_label_per_row(self) -> "LinearQuery":
        if self.labels is not None and len(self.labels) != len(self.matrix):
            raise ValueError(f"labels: {len(self.labels)} labels for {len(self.matrix)} matrix rows (one per row)")
        return self


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
        KroneckerQuery,  # dpopt.spec.models_workload
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
    value: list[Finite] | None = None

    _rect = field_validator("matrix")(_rectangular)


Invariant = Annotated[
    Union[TotalInvariant, MarginsInvariant, LinearInvariant], Field(discriminator="kind")
]


class SemiAdjacency(_Model):
    """How the semi-adjacent parameter a(t) of Cho & Awan (2024, Def. 13) is read.

    ``worst_case`` (default, the reading behind the paper's numbers): the confidential
    dataset is fixed and only the other dataset is minimised over; ``literal``: the
    infimum runs over both datasets, as the definition is typeset.
    """

    reading: Literal["worst_case", "literal"] = "worst_case"


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
    distance: Count


Adjacency = Annotated[Union[AddRemove, ReplaceOne, Hamming], Field(discriminator="kind")]


# ------------------------------------------------------------------------ privacy
class PureTarget(_Model):
    epsilon: PrivacyNumber


class ApproxTarget(_Model):
    epsilon: PrivacyNumber
    delta: PrivacyProbability


class GDPTarget(_Model):
    mu: PrivacyNumber


class ZCDPTarget(_Model):
    rho: PrivacyNumber


class PDPTarget(_Model):
    epsilon: PrivacyNumber
    delta: PrivacyProbability


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
class TableGoal(_Model):
    """What one marginal table of the query should get (metric ``l2``, marginal queries).

    ``attributes``: the table (a group of the query, in any order); ``weight``: the weight of its
    expected squared error E‖noise‖² in the objective (default 1); ``target``: an upper bound on that error,
    summed over the table's cells (a cell's variance times the number of cells).
    """

    attributes: Annotated[list[Name], Field(min_length=1)]
    weight: PositiveFinite = 1.0
    target: PositiveFinite | None = None

    @model_validator(mode="after")
    def _distinct(self) -> "TableGoal":
        if len(set(self.attributes)) != len(self.attributes):
            raise ValueError(f"table {self.attributes}: an attribute is listed twice")
        return self


class Utility(_Model):
    """The utility metric the design optimises.

    ``l2``: E‖W·noise‖₂² (W the optional ``workload``, identity by default);
    ``l1``: E‖noise‖₁; ``usefulness``: P(|noise| ≤ γ) per coordinate;
    ``ci_volume``: volume of the smallest 1 − ``alpha`` confidence region for the
    protected component of the answer (its projection on the span of the sensitivity
    space), lower is better; ``test_power``: power of the most powerful level-``alpha``
    test of H0: φ(X) = θ₀ against H1: φ(X) = θ₀ + ``alternative`` (any θ₀: the noise is
    additive), higher is better. ``alpha`` defaults to 0.05 for these two metrics. A region's volume is carried
    as its logarithm (certificate ``utility.log_value``, compared by ``auto``): beyond the double range
    (≈ 1.8·10³⁰⁸, a few hundred dimensions) ``utility.value`` is null (:mod:`dpopt.stats.log_volume`).
    ``weights`` (with ``l2``, instead of a workload): Σ_i w_i E[noise_i²], the weighted
    per-coordinate error (the workload Diag(√w)).
    ``kl`` / ``renyi`` (with ``order``): divergence of the released histogram, clipped at
    ``floor``, from the ``prior`` histogram; ``mallows`` (with ``order`` p): Wasserstein-p
    distance between the distributions of the ``prior`` values and of the released ones
    (:mod:`dpopt.noise.prior_metrics`).
    ``tables`` (``l2``, marginal queries): a weight or an error target per table of the query;
    ``objective``: ``total`` minimises the weighted sum of the tables' errors Σ_S w_S E‖noise_S‖²
    (the default), ``max`` the largest weighted table error max_S w_S E‖noise_S‖², both subject to the
    tables' targets (:mod:`dpopt.optimize.table_goals`).
    """

    metric: Literal["l1", "l2", "usefulness", "ci_volume", "test_power", "max_variance", "kl", "renyi", "mallows"]
    gamma: PositiveFinite | None = None
    alpha: Probability | None = None
    alternative: Annotated[list[Finite], Field(min_length=1)] | None = None
    workload: Matrix | None = None
    weights: Annotated[list[Annotated[Finite, Field(ge=0)]], Field(min_length=1)] | None = None
    prior: Annotated[list[Finite], Field(min_length=1)] | None = None
    floor: PositiveFinite | None = None
    order: PositiveFinite | None = None
    tables: Annotated[list[TableGoal], Field(min_length=1)] | None = None
    objective: Literal["total", "max"] | None = None

    @model_validator(mode="before")
    @classmethod
    def _default_alpha(cls, value: object) -> object:
        if isinstance(value, dict) and value.get("metric") in ("ci_volume", "test_power") and "alpha" not in value:
            return {**value, "alpha": 0.05}
        return value

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
        if self.weights is not None:
            if self.metric != "l2" or self.workload is not None:
                raise ValueError("weights go with metric 'l2' only, instead of a workload")
            if not any(self.weights):
                raise ValueError("weights must not all be 0")
        if self.alpha is not None and self.metric not in ("ci_volume", "test_power"):
            raise ValueError("alpha goes with metrics 'ci_volume' and 'test_power' only")
        if self.metric == "test_power":
            if self.alternative is None:
                raise ValueError("metric 'test_power' needs alternative (the shift η the test must detect)")
            if not any(self.alternative):
                raise ValueError("alternative must differ from the null hypothesis (all entries are 0)")
        elif self.alternative is not None:
            raise ValueError("an alternative goes with metric 'test_power' only")
        self._check_prior_metric()
        if (self.tables is not None or self.objective is not None) and (
                self.metric != "l2" or self.workload is not None or self.weights is not None):
            raise ValueError("tables and objective go with metric 'l2' only, without a workload or weights")
        if self.tables is not None:
            keys = [frozenset(t.attributes) for t in self.tables]
            if len(set(keys)) != len(keys):
                raise ValueError("tables: a table is listed twice")
        return self

    @property
    def table_goals(self) -> bool:
        """Whether the spec weighs tables, sets table targets or asks for the largest table error."""
        return self.tables is not None or self.objective not in (None, "total")

    def _check_prior_metric(self) -> None:
        """``kl`` / ``renyi`` need a prior histogram (counts ≥ 0) and a floor; ``renyi`` an
        order ≠ 1; ``mallows`` prior values and an order ≥ 1 (R²DP's Table 1)."""
        prior_metric = self.metric in ("kl", "renyi", "mallows")
        if not prior_metric:
            if self.prior is not None or self.floor is not None or self.order is not None:
                raise ValueError("prior, floor and order go with metrics 'kl', 'renyi' and 'mallows' only")
            return
        if self.prior is None:
            raise ValueError(f"metric '{self.metric}' needs prior (the anticipated true answer)")
        if self.metric == "mallows":
            if self.floor is not None:
                raise ValueError("a floor goes with metrics 'kl' and 'renyi' only")
            if self.order is None or self.order < 1:
                raise ValueError("metric 'mallows' needs order ≥ 1 (the p of the Wasserstein-p distance)")
            return
        if self.floor is None:
            raise ValueError(f"metric '{self.metric}' needs floor (released counts are clipped at it, > 0)")
        if any(c < 0 for c in self.prior) or not any(self.prior):
            raise ValueError("prior counts must be non-negative with a positive total")
        if self.metric == "renyi" and (self.order is None or self.order == 1):
            raise ValueError("metric 'renyi' needs order > 0 and ≠ 1")
        if self.metric == "kl" and self.order is not None:
            raise ValueError("metric 'kl' takes no order")


# ------------------------------------------------------------------ post-processing
class Output(_Model):
    """How the published numbers are written: ``decimals`` N rounds every released value, standard error, margin
    and interval end to N decimal places (post-processing: no privacy cost; margins and interval ends outward),
    stated in the certificate's ``output`` block. Without it, every value is written in full (shortest
    round-trip decimal)."""

    decimals: Annotated[int, Field(ge=0, le=12)]


class Postprocess(_Model):
    """What the published table must satisfy after the release (:mod:`dpopt.postprocess`).

    ``consistent``: meet every invariant exactly and agree across queries (one table behind
    every released cell); ``nonnegative``: no negative count; ``integer``: whole counts,
    by controlled rounding that keeps every published sum.
    """

    nonnegative: StrictBool = True
    integer: StrictBool = True
    consistent: StrictBool = True


class Intervals(_Model):
    """The interval published beside every released value (:mod:`dpopt.certificate.intervals`).

    ``level``: the probability that a cell's interval covers the cell's true value (default 0.95; the
    columns are named from it, ``ci_95_low``/``ci_95_high`` at 0.95); ``simultaneous``: a family-wise
    level instead, every released cell of the table covered at once with that probability (Bonferroni).
    """

    level: Probability = 0.95
    simultaneous: StrictBool = False
    method: Literal["noise_stage", "monte_carlo"] = "noise_stage"
    """``noise_stage`` (default): around the unbiased noise-stage value, coverage proven. ``monte_carlo``: around the
    published post-processed value, from the errors of post-processed releases simulated at the published table
    (the Census Bureau's approach, arXiv:2503.19714); coverage approximate (:mod:`dpopt.postprocess.monte_carlo`)."""
    draws: Annotated[int, Field(ge=20, le=100_000)] = 200
    """Simulated releases of ``monte_carlo``."""


class Geography(_Model):
    """A geographic hierarchy: the nation (implicit), then one data column per level.

    ``levels`` name the columns holding each unit's code, coarsest first (e.g. ``[state,
    county]``); a unit of a level lies in exactly one unit of the level above. ``shares``:
    the fraction of the privacy budget spent on each level, nation first (exact rationals
    as strings such as ``"1/3"`` are accepted), or ``optimal`` (Gaussian noise under
    ``zcdp``/``gdp``: shares ∝ √w_l Δ_l, see :mod:`dpopt.certificate.hierarchy_budget`);
    ``weights``: the importance w_l of each level's error for ``optimal`` (default 1 each).
    ``exact_totals``: publish the total of the nation and of every unit exactly (as the Census
    publishes state populations); only under replace-one or Hamming adjacency, where a record
    keeps its unit and unit sizes are not protected.
    ``units``: the public geography, one entry per level in order: the first level's codes (a
    list), then for each finer level a mapping from each code to its parent's code (e.g. ``{state:
    [S1, S2], county: {S1C1: S1, S2C1: S2}}``). A release publishes a table for every declared unit
    (one without records too) and refuses a record whose unit is not declared; without ``units`` it
    needs the public geography as a file (``dpopt release --groups FILE``), as which units the data
    hold is private.
    """

    levels: Annotated[list[Name], Field(min_length=1)]
    shares: Union[Literal["optimal", "equal"], Annotated[list[Union[PositiveFinite, str]], Field(min_length=2)]] = "equal"
    weights: Annotated[list[PositiveFinite], Field(min_length=2)] | None = None
    exact_totals: StrictBool = False
    units: dict[Name, Union[Annotated[list[Name], Field(min_length=1)],
                            Annotated[dict[Name, Name], Field(min_length=1)]]] | None = None

    @model_validator(mode="after")
    def _sizes(self) -> "Geography":
        if len(set(self.levels)) != len(self.levels):
            raise ValueError("a geography level is listed twice")
        for name, given in (("shares", self.shares), ("weights", self.weights)):
            if isinstance(given, list) and len(given) != len(self.levels) + 1:
                raise ValueError(
                    f"{name} needs one entry per level, nation first ({len(self.levels) + 1}), got {len(given)}"
                )
        if self.weights is not None and self.shares != "optimal":
            raise ValueError("weights go with shares: optimal only")
        if self.units is not None:
            _check_units(self.levels, self.units)
        if isinstance(self.shares, list):
            for share in self.shares:
                try:
                    positive = Fraction(str(share)) > 0
                except (ValueError, ZeroDivisionError):
                    positive = False
                if not positive:
                    raise ValueError(f"share {share!r} is not a positive number or fraction such as '1/3'")
        return self


def _check_units(levels: list[str], units: dict) -> None:
    """``geography.units``: one entry per level, in order; the first a list of distinct codes, each finer
    one a mapping from code to a code of the level above."""
    if list(units) != levels:
        raise ValueError(f"units needs one entry per level, in the order of levels ({', '.join(levels)}), "
                         f"got {', '.join(units) or 'none'}")
    above = None
    for level in levels:
        given = units[level]
        if above is None:
            if not isinstance(given, list):
                raise ValueError(f"units.{level}: the first level is a list of its codes")
            if len(set(given)) != len(given):
                raise ValueError(f"units.{level}: a code is listed twice")
        else:
            if not isinstance(given, dict):
                raise ValueError(f"units.{level}: map each code to its parent's code ({{code: parent}})")
            stray = next((p for p in given.values() if p not in above), None)
            if stray is not None:
                raise ValueError(f"units.{level}: parent {stray!r} is not a declared unit of the level above")
        above = set(given)


# --------------------------------------------------------------------------- spec
class Spec(_Model):
    """One release: domain, query, invariants, adjacency, privacy target, design choices."""

    dpopt: FormatVersion
    name: Annotated[str, Field(min_length=1)]
    description: str | None = None
    data: Data
    query: Query
    invariants: list[Invariant] = []
    semi_adjacency: SemiAdjacency | None = None
    adjacency: Adjacency
    privacy: Privacy
    mechanism: Union[Literal["auto"], Family, Annotated[list[Family], Field(min_length=1)]] = "auto"
    utility: Utility = Field(default={"metric": "l2"}, validate_default=True)  # validated with the model
    postprocess: Postprocess | None = None
    output: Output | None = None
    intervals: Intervals | None = None
    geography: Geography | None = None
    sampler: Literal["exact", "floating_point"] | None = None
    """``exact`` (the default, also when absent, so that a spec without the key keeps its hash): families that
    can measure exactly on a lattice do (:mod:`dpopt.mechanisms.lattice`); ``floating_point`` keeps the
    floating-point samplers, whose certificate notes that the guarantee assumes idealized real arithmetic."""

    @field_validator("adjacency", mode="before")
    @classmethod
    def _adjacency_shorthand(cls, value: object) -> object:
        return {"kind": value} if isinstance(value, str) else value

    @field_validator("utility", mode="before")
    @classmethod
    def _utility_shorthand(cls, value: object) -> object:
        return {"metric": value} if isinstance(value, str) else value

    @model_validator(mode="after")
    def _monte_carlo_intervals_need_a_postprocessed_table(self) -> "Spec":
        if self.intervals is not None and self.intervals.method == "monte_carlo":
            if self.postprocess is None:
                raise ValueError("intervals.method: monte_carlo simulates the post-processing: the spec needs "
                                 "postprocess (without it, noise_stage is the interval of the published value)")
            if self.geography is not None or self.intervals.simultaneous:
                raise ValueError("intervals.method: monte_carlo is per cell, for a single post-processed table (not "
                                 "simultaneous, not a geography hierarchy)")
        return self

    @model_validator(mode="after")
    def _semi_adjacency_needs_invariants(self) -> "Spec":
        if self.semi_adjacency is not None and not self.invariants:
            raise ValueError("semi_adjacency applies to specs with invariants only")
        return self

    @model_validator(mode="after")
    def _tables_of_the_query(self) -> "Spec":
        if self.utility.tables is None:
            return self
        query = self.query
        if isinstance(query, MarginalsQuery):
            groups = query.groups(self.data)
        elif isinstance(query, ContingencyTableQuery):
            groups = [query.attributes]
        elif isinstance(query, HistogramQuery):
            groups = [[query.attribute]]
        else:
            raise ValueError(f"utility.tables: a {query.kind} query has no marginal tables to weigh "
                             "(marginals, contingency_table or histogram)")
        known = {frozenset(g) for g in groups}
        for i, table in enumerate(self.utility.tables):
            if frozenset(table.attributes) not in known:
                raise ValueError(f"utility.tables[{i}]: {table.attributes} is not a table of the query "
                                 f"(its tables: {', '.join(' × '.join(g) for g in groups[:8])}"
                                 f"{' …' if len(groups) > 8 else ''})")
        return self

    @property
    def families(self) -> tuple[str, ...]:
        """The families the design may use (``auto`` means all of them)."""
        if self.mechanism == "auto":
            return family_names()
        if isinstance(self.mechanism, str):
            return (self.mechanism,)
        return tuple(dict.fromkeys(self.mechanism))


# --------------------------------------------------------------------------- plan
class PlanQuery(_Model):
    """One query of a release plan (:class:`Plan`).

    ``name`` labels it (default ``q1``, ``q2`` …); ``weight`` w_i scales its utility in the
    plan's objective Σ w_i u_i; ``utility`` and ``mechanism`` override the plan's; ``share``
    fixes its fraction of the budget in the target's additive currency (ρ for zCDP, μ² for
    GDP and for the GDP design of an (ε, δ) target, ε for pure DP) instead of letting dpopt
    choose it.
    """

    name: Annotated[str, Field(min_length=1)] | None = None
    query: Query
    weight: PositiveFinite = 1.0
    utility: Utility | None = None
    mechanism: Union[Literal["auto"], Family, Annotated[list[Family], Field(min_length=1)]] | None = None
    share: Annotated[float, Number, Field(gt=0, le=1, allow_inf_nan=False)] | None = None

    @field_validator("utility", mode="before")
    @classmethod
    def _utility_shorthand(cls, value: object) -> object:
        return {"metric": value} if isinstance(value, str) else value


class Plan(_Model):
    """A release plan: several queries of the same records under one privacy target.

    ``data``, ``invariants``, ``adjacency`` and ``privacy`` apply to the whole plan;
    ``mechanism`` and ``utility`` are the defaults of its queries.
    """

    dpopt: FormatVersion
    name: Annotated[str, Field(min_length=1)]
    description: str | None = None
    data: Data
    queries: Annotated[list[PlanQuery], Field(min_length=1)]
    invariants: list[Invariant] = []
    semi_adjacency: SemiAdjacency | None = None
    adjacency: Adjacency
    privacy: Privacy
    mechanism: Union[Literal["auto"], Family, Annotated[list[Family], Field(min_length=1)]] = "auto"
    utility: Utility = Field(default={"metric": "l2"}, validate_default=True)  # validated with the model
    sampler: Literal["exact", "floating_point"] | None = None
    """As :attr:`Spec.sampler`, for every query of the plan."""
    intervals: Intervals | None = None
    """As :attr:`Spec.intervals`, for every query of the plan."""
    output: Output | None = None
    """As :attr:`Spec.output`, for every query of the plan (each query's certificate states it)."""

    _adjacency = field_validator("adjacency", mode="before")(Spec._adjacency_shorthand.__func__)
    _utility = field_validator("utility", mode="before")(Spec._utility_shorthand.__func__)

    @field_validator("queries", mode="before")
    @classmethod
    def _default_names(cls, value: object) -> object:
        if isinstance(value, list):
            return [
                {**q, "name": q.get("name") or f"q{i + 1}"} if isinstance(q, dict) else q
                for i, q in enumerate(value)
            ]
        return value

    @model_validator(mode="after")
    def _names_and_shares(self) -> "Plan":
        names = [q.name for q in self.queries]
        if len(set(names)) != len(names):
            raise ValueError("query names must be distinct")
        shares = [q.share for q in self.queries if q.share is not None]
        if sum(shares) > 1 + 1e-12:
            raise ValueError(f"the fixed shares sum to {sum(shares):.6g} > 1")
        if len(shares) == len(self.queries) and abs(sum(shares) - 1) > 1e-9:
            raise ValueError(f"every query has a fixed share, so they must sum to 1 (got {sum(shares):.6g})")
        if self.semi_adjacency is not None and not self.invariants:
            raise ValueError("semi_adjacency applies to plans with invariants only")
        return self
