"""The spec of a synthetic-microdata release: a ``synthesize:`` block instead of one ``query``.

.. code-block:: yaml

    dpopt: 1
    name: Adult, synthetic records
    data: {attributes: {age: [...], sex: [female, male], ...}}   # categorical attributes only
    adjacency: add_remove                    # or replace_one
    privacy: {zcdp: {rho: 0.1}}              # fixed selection: any target the marginal families meet
    synthesize:
      all_of_size: 2                         # the default; or marginals: [[a, b], [c, d, e]]
      selection: fixed                       # or adaptive (MST-style, zCDP only)
      records: 1000                          # optional: default data.n when public, else the tables' total
      exact: true                            # the default: records fitted to the denoised noisy tables, the
                                             # published tables their tabulations (matched exactly);
                                             # false: the same records, the measurements' tables published;
                                             # [[sex, income]]: denoised, then exact on these published tables
      split: {one_way: "1/3", selection: "1/3", selected: "1/3"}   # adaptive only (default MST's thirds)
      rounds: 5                              # adaptive only (default: attributes - 1, a spanning tree)

``fixed`` measures the listed marginals (:mod:`dpopt.synthesis.measure`) with the certified design;
``adaptive`` measures every one-way marginal, selects ``rounds`` two-way marginals among the listed
pairs by the exponential mechanism and measures them (McKenna, Miklau & Sheldon 2021, MST).
"""

from __future__ import annotations

from fractions import Fraction
from itertools import combinations
from pathlib import Path
from typing import Annotated, Any, Literal, Mapping, Union

from pydantic import Field, StrictBool, StrictFloat, StrictInt, StrictStr, field_validator, model_validator

from dpopt.errors import SpecError
from dpopt.spec.load import load_composite
from dpopt.spec.models import (
    AddRemove,
    Count,
    Data,
    Family,
    FormatVersion,
    Name,
    NumericAttribute,
    Privacy,
    ReplaceOne,
    Spec,
    _Model,
)

SPLIT_PARTS = ("one_way", "selection", "selected")
"""The three parts of an adaptive budget: one-way marginals, the selection rounds, the selected marginals."""


def _fraction(value: object) -> Fraction:
    """A share written as a number or as text such as ``"1/3"``."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"{value!r} is not a number or a fraction such as '1/3'")
    try:
        return Fraction(str(value))
    except (ValueError, ZeroDivisionError):
        raise ValueError(f"{value!r} is not a number or a fraction such as '1/3'") from None


Share = Union[StrictInt, StrictFloat, StrictStr]
"""A share of ρ: a number, or an exact fraction written as text (``"1/3"``)."""


class Split(_Model):
    """The fractions of ρ spent on the one-way marginals, the selection and the selected marginals: each
    positive, summing to 1 exactly (as fractions: ``"1/3"`` three times)."""

    one_way: Share = "1/3"
    selection: Share = "1/3"
    selected: Share = "1/3"

    @model_validator(mode="after")
    def _sums_to_one(self) -> "Split":
        shares = self.fractions()
        if any(s <= 0 for s in shares.values()):
            raise ValueError("every share must be positive")
        if sum(shares.values()) != 1:
            raise ValueError(f"the shares must sum to 1 exactly (got {sum(shares.values())})")
        return self

    def fractions(self) -> dict[str, Fraction]:
        """Each part's share as an exact fraction."""
        return {part: _fraction(getattr(self, part)) for part in SPLIT_PARTS}


class Synthesize(_Model):
    """What is measured and how it is chosen (module docstring)."""

    marginals: Annotated[list[Annotated[list[Name], Field(min_length=1)]], Field(min_length=1)] | None = None
    all_of_size: Annotated[Count, Field(ge=1)] | None = None
    selection: Literal["fixed", "adaptive"] = "fixed"
    records: Count | None = None
    exact: StrictBool | Annotated[list[Annotated[list[Name], Field(min_length=1, max_length=2)]],
                                  Field(min_length=1)] | None = None
    """None or True: the records are fitted to the noisy tables shrunk toward independence (:mod:`dpopt.synth.denoise`)
    and the published tables are their tabulations, so the records match every published table exactly; False: the
    same records, the measurements' own post-processed tables published (matched by none); a list of measured one-
    and two-way marginals whose pairs hold no cycle: the same fit, then the records repaired to match exactly the
    listed tables of the measurements and the one-way margins of their attributes only (``fixed`` selection)."""
    split: Split | None = None
    rounds: Count | None = None

    @model_validator(mode="after")
    def _one_form(self) -> "Synthesize":
        if self.marginals is not None and self.all_of_size is not None:
            raise ValueError("give marginals (the groups) or all_of_size (every group of that size), not both")
        if self.selection == "fixed" and (self.split is not None or self.rounds is not None):
            raise ValueError("split and rounds go with selection: adaptive")
        return self

    def groups(self, names: list[str]) -> list[list[str]]:
        """The marginals listed (adaptive: the candidates), ``all_of_size`` (default 2) expanded over ``names``."""
        if self.marginals is not None:
            return [list(g) for g in self.marginals]
        return [list(g) for g in combinations(names, self.all_of_size or 2)]


class SynthesisSpec(_Model):
    """A synthetic-microdata release from certified marginals."""

    dpopt: FormatVersion
    name: Annotated[str, Field(min_length=1)]
    description: str | None = None
    data: Data
    adjacency: Union[AddRemove, ReplaceOne] = Field(discriminator="kind")
    privacy: Privacy
    mechanism: Union[Literal["auto"], Family, Annotated[list[Family], Field(min_length=1)]] = "auto"
    sampler: Literal["exact", "floating_point"] | None = None
    synthesize: Synthesize

    _adjacency = field_validator("adjacency", mode="before")(Spec._adjacency_shorthand.__func__)

    @property
    def attributes(self) -> list[str]:
        """The attributes in domain order (the columns of the synthetic file)."""
        return list(self.data.attributes)

    def groups(self) -> list[list[str]]:
        """The marginals of the workload (adaptive: the candidate pairs), in the listed order."""
        return self.synthesize.groups(self.attributes)

    @property
    def split(self) -> Split:
        return self.synthesize.split or Split()

    @property
    def rounds(self) -> int:
        """Adaptive: the selection rounds (default: one fewer than the attributes the candidates touch)."""
        if self.synthesize.rounds is not None:
            return self.synthesize.rounds
        return len({a for g in self.groups() for a in g}) - 1


def is_synthesis_document(document: Any) -> bool:
    """True for a spec (not a certificate) with a ``synthesize`` block."""
    return isinstance(document, Mapping) and "synthesize" in document and "spec_sha256" not in document


def load_synthesis_spec(source: str | Path | Mapping[str, Any] | SynthesisSpec) -> SynthesisSpec:
    """Load and validate a synthesis spec.

    Raises
    ------
    SpecError
        Naming the first bad field (``synthesize.marginals[1]`` ...).
    """
    return load_composite(source, SynthesisSpec, _check_references)


def _check_exact(spec: SynthesisSpec, groups: list[list[str]]) -> None:
    """``exact`` as a list: fixed selection, each entry a measured marginal, their pairs a forest."""
    held = spec.synthesize.exact
    if not isinstance(held, list):
        return
    if spec.synthesize.selection != "fixed":
        raise SpecError("synthesize.exact", "a list of tables held exact goes with selection: fixed (the tables "
                                            "adaptive selects are not known in advance)")
    measured = {frozenset(g) for g in groups}
    parent = {a: a for a in spec.data.attributes}

    def find(x: str) -> str:
        while parent[x] != x:
            x = parent[x]
        return x

    for i, table in enumerate(held):
        if frozenset(table) not in measured or len(set(table)) != len(table):
            raise SpecError(f"synthesize.exact[{i}]", f"{table} is not a marginal of synthesize.marginals")
        if len(table) == 2:
            a, b = find(table[0]), find(table[1])
            if a == b:
                raise SpecError(f"synthesize.exact[{i}]", "the tables held exact close a cycle of attributes: a record "
                                                          "file matches a forest of pairs exactly, not a cycle")
            parent[a] = b


def _check_references(spec: SynthesisSpec) -> None:
    """Categorical attributes only, no privacy unit; every marginal names distinct known attributes;
    adaptive: pairs, zCDP, rounds that a spanning forest of the pairs can hold."""
    attributes = spec.data.attributes
    for name, levels in attributes.items():
        if isinstance(levels, NumericAttribute):
            raise SpecError(f"data.attributes.{name}", "synthetic records have categorical attributes only "
                                                       "(list the levels of a numeric attribute's bins)")
    if spec.data.privacy_unit is not None:
        raise SpecError("data.privacy_unit", "synthesis protects one record (add_remove or replace_one); "
                                             "person-level synthesis is not supported")
    if spec.synthesize.all_of_size is not None and spec.synthesize.all_of_size > len(attributes):
        raise SpecError("synthesize.all_of_size", f"{spec.synthesize.all_of_size} is more than the "
                                                  f"{len(attributes)} attributes")
    groups = spec.groups()
    for i, group in enumerate(groups):
        field = f"synthesize.marginals[{i}]"
        unknown = [a for a in group if a not in attributes]
        if unknown:
            raise SpecError(field, f"'{unknown[0]}' is not an attribute of data.attributes")
        if len(set(group)) != len(group):
            raise SpecError(field, "an attribute is listed twice")
    if len({tuple(sorted(g)) for g in groups}) != len(groups):
        raise SpecError("synthesize.marginals", "a marginal is listed twice")
    _check_exact(spec, groups)
    if spec.synthesize.selection != "adaptive":
        return
    if spec.privacy.definition != "zcdp":
        raise SpecError("privacy", "selection: adaptive composes its steps exactly in zCDP: give {zcdp: {rho: ...}}")
    if any(len(g) != 2 for g in groups):
        raise SpecError("synthesize.marginals", "selection: adaptive chooses among two-way marginals (pairs)")
    touched = len({a for g in groups for a in g})
    if spec.rounds < 1 or spec.rounds > touched - 1:
        raise SpecError("synthesize.rounds", f"{spec.rounds} rounds: a spanning forest of pairs over {touched} "
                                             f"attributes has 1 to {touched - 1} of them")
