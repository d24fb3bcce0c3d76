"""Errors that name the typo: unknown keys at any depth first, with the closest valid key;
values outside a fixed list with the closest valid value and the list (difflib)."""

from __future__ import annotations

import copy

import pytest
import yaml
from conftest import ROOT, make_spec

import dpopt
from dpopt.cli import main
from dpopt.core.families import family_names
from dpopt.errors import SpecError


def _rename(raw: dict, dotted: str, new: str) -> dict:
    out = copy.deepcopy(raw)
    *parents, key = dotted.split(".")
    node = out
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    node[new] = node.pop(key)
    return out


KEY_TYPOS = {
    # (key renamed, its new name) -> the line the user gets
    ("privacy", "privcy"): "unknown key 'privcy' (did you mean 'privacy'?)",
    ("query.attributes", "atributes"): "query: unknown key 'atributes' (did you mean 'attributes'?)",
    ("privacy.gdp.mu", "mux"): "privacy.gdp: unknown key 'mux' (did you mean 'mu'?)",
    ("data.attributes.income.max", "maxx"): "data.attributes.income: unknown key 'maxx' (did you mean 'max'?)",
    ("adjacency.kind", "knd"): "adjacency: unknown key 'knd' (did you mean 'kind'?)",
}


@pytest.mark.parametrize("rename, line", KEY_TYPOS.items(), ids=[new for _, new in KEY_TYPOS])
def test_unknown_key_names_the_closest_valid_key(rename, line):
    with pytest.raises(SpecError) as info:
        dpopt.load_spec(_rename(make_spec(), *rename))
    assert str(info.value) == line


def test_unknown_key_is_reported_before_other_problems():
    # 'privcy' also leaves 'privacy' missing (pydantic's first error): the typo comes first
    raw = _rename(make_spec(invariants=[{"kind": "margins", "attributes": ["race"]}]), "privacy", "privcy")
    raw["invariants"][0]["atributes"] = raw["invariants"][0].pop("attributes")
    with pytest.raises(SpecError) as info:
        dpopt.load_spec(raw)
    assert str(info.value) == "unknown key 'privcy' (did you mean 'privacy'?)"


def test_unknown_key_without_a_close_match_lists_the_valid_keys():
    with pytest.raises(SpecError, match=r"unknown key 'colour' \(valid keys: dpopt, name, "):
        dpopt.load_spec(make_spec(colour="blue"))


def test_invalid_family_lists_the_families_and_suggests_one():
    with pytest.raises(SpecError) as info:
        dpopt.load_spec(make_spec(mechanism="gausian"))
    assert info.value.field == "mechanism"
    assert "unknown value 'gausian' (did you mean 'gaussian'?)" in info.value.problem
    assert all(f in info.value.problem for f in ("auto",) + family_names())
    with pytest.raises(SpecError, match=r"mechanism\[1\]: unknown value 'lapace' \(did you mean 'laplace'\?\)"):
        dpopt.load_spec(make_spec(mechanism=["gaussian", "lapace"]))


@pytest.mark.parametrize("field, value, expected, line", [
    ("query", {"kind": "contingncy_table", "attributes": ["race", "sex"]}, "query.kind",
     "unknown kind 'contingncy_table' (did you mean 'contingency_table'?); valid: count, histogram, "),
    ("adjacency", {"kind": "replace_on"}, "adjacency.kind",
     "unknown kind 'replace_on' (did you mean 'replace_one'?); valid: add_remove, replace_one, hamming"),
    ("adjacency", "add_remov", "adjacency.kind", "unknown kind 'add_remov' (did you mean 'add_remove'?)"),
    ("utility", {"metric": "usefulnes", "gamma": 1}, "utility.metric",
     "unknown value 'usefulnes' (did you mean 'usefulness'?); valid: l1, l2, usefulness"),
])
def test_literal_fields_suggest_the_closest_value(field, value, expected, line):
    with pytest.raises(SpecError) as info:
        dpopt.load_spec(make_spec(**{field: value}))
    assert info.value.field == expected and line in info.value.problem


def test_cli_prints_the_suggestion_on_one_line(tmp_path, capsys):
    raw = yaml.safe_load((ROOT / "specs" / "table_replace_gdp.yaml").read_text())
    path = tmp_path / "typo.yaml"
    path.write_text(yaml.safe_dump(_rename(raw, "privacy", "privcy")))
    assert main(["solve", str(path)]) == 2
    err = capsys.readouterr().err
    assert err == "dpopt: error: unknown key 'privcy' (did you mean 'privacy'?)\n"
