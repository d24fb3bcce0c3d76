"""The public geography of a hierarchical release: its units and their parents, declared, never read from the data.

A release publishes one table per unit of every level. Taking the units from the data would publish
which units have records, and how many each level has, which no certificate covers (under add/remove
a unit with one person appears or not with that person). The units therefore come from the spec
(``geography.units``) or from a public file (``dpopt release --groups FILE``: a column per level, one row
per unit of the finest level, with the codes of its parents); a record whose unit is not declared, or
whose units disagree with the declared parents, is refused in one line; a declared unit without records
gets the table of an empty data set.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dpopt.errors import DataError, SpecError
from dpopt.release import sources
from dpopt.spec.models import Spec


@dataclass(frozen=True)
class DeclaredGeography:
    """The units of each level (canonical order) and, per level, the index of each unit's parent.

    Attributes
    ----------
    keys : tuple of ndarray
        The codes of each level (text), sorted.
    parents : tuple of ndarray of int
        For each level, the position of each unit's parent among the keys of the level above (the first
        level's parent is the nation, 0).
    description : str
        Where the units come from (recorded in the release's ``hierarchy`` block).
    """

    keys: tuple[np.ndarray, ...]
    parents: tuple[np.ndarray, ...]
    description: str


def declared_geography(spec: Spec, public: str | Path | None = None) -> DeclaredGeography:
    """The geography of ``spec`` from ``geography.units`` or the public file ``public``.

    Raises
    ------
    SpecError
        Neither is given, both are, or the file's parents contradict each other.
    DataError
        The file cannot be read or lacks a level's column.
    """
    levels, units = spec.geography.levels, spec.geography.units
    if units is not None and public is not None:
        raise SpecError("--groups", "the spec declares its geography (geography.units): drop --groups")
    if units is None and public is None:
        raise SpecError("geography.units", "the units of each level are not declared: list them in the spec "
                                           "(geography.units) or give the public geography file (--groups FILE, "
                                           "a column per level); which units the data hold is private")
    if units is not None:
        parent_of = [{code: "" for code in units[levels[0]]}] + [dict(units[level]) for level in levels[1:]]
        return _indexed(levels, parent_of, "declared in the spec (geography.units)")
    source = sources.open_source(public)
    con = sources.connect()
    sources.require_columns(con, source, levels)
    names = ", ".join(f"CAST({sources.quote_identifier(c)} AS VARCHAR)" for c in levels)
    rows = con.execute(f"SELECT DISTINCT {names} FROM {source.sql}").fetchall()
    parent_of: list[dict] = [{} for _ in levels]
    for row in rows:
        if any(code is None or not code.strip() for code in row):
            raise DataError(f"{source}: a unit code is missing or blank (columns {', '.join(levels)})")
        for depth, code in enumerate(row):
            parent = row[depth - 1] if depth else ""
            if parent_of[depth].setdefault(code, parent) != parent:
                raise SpecError("--groups", f"{source}: {levels[depth]} {code!r} lies in both "
                                            f"{parent_of[depth][code]!r} and {parent!r}")
    return _indexed(levels, parent_of, f"public file ({Path(public).name})")


def _indexed(levels: list[str], parent_of: list[dict], description: str) -> DeclaredGeography:
    keys, parents = [], []
    for depth, mapping in enumerate(parent_of):
        codes = sources.canonical_keys(np.array(list(mapping), dtype=str))
        keys.append(codes)
        if depth == 0:
            parents.append(np.zeros(len(codes), dtype=np.int64))
        else:
            parents.append(sources.key_index(keys[depth - 1], np.array([mapping[c] for c in codes], dtype=str)))
    return DeclaredGeography(tuple(keys), tuple(parents), description)


def check_data_parents(con, source, levels: list[str], geography: DeclaredGeography) -> None:
    """Every record's units are declared and agree with the declared parents.

    Raises
    ------
    DataError
        A record in a unit that is not declared, or whose unit of one level is not the declared parent of
        its unit of the next.
    """
    for depth in range(1, len(levels)):
        upper, lower = sources.quote_identifier(levels[depth - 1]), sources.quote_identifier(levels[depth])
        pairs = con.execute(f"SELECT DISTINCT CAST({lower} AS VARCHAR) AS child, CAST({upper} AS VARCHAR) AS parent "
                            f"FROM {source.sql}").fetchall()
        child = np.array([c for c, _ in pairs], dtype=str)
        parent = np.array([p for _, p in pairs], dtype=str)
        found_child = sources.key_index(geography.keys[depth], child)
        found_parent = sources.key_index(geography.keys[depth - 1], parent)
        for level, codes, found in ((levels[depth], child, found_child), (levels[depth - 1], parent, found_parent)):
            if np.any(found < 0):
                raise DataError(f"{source}: {level} {str(codes[np.argmax(found < 0)])!r} is not a declared unit "
                                f"of the geography ({geography.description})")
        wrong = np.flatnonzero(geography.parents[depth][found_child] != found_parent)
        if len(wrong):
            i = wrong[0]
            raise DataError(f"{source}: a record in {levels[depth]} {str(child[i])!r} has {levels[depth - 1]} "
                            f"{str(parent[i])!r}, which is not its declared parent ({geography.description})")
