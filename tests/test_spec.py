"""Spec loading: YAML / JSON / dict, and one clear error per class of bad input."""

from __future__ import annotations

import copy
import json

import pytest
import yaml

import dpopt
from conftest import make_spec
from dpopt.cli import main
from dpopt.errors import SpecError


def test_yaml_json_and_dict_give_the_same_spec(tmp_path):
    raw = make_spec(privacy={"approx": {"epsilon": 1.0, "delta": 1e-5}})
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(raw))
    (tmp_path / "s.json").write_text(json.dumps(raw))
    from_yaml = dpopt.load_spec(tmp_path / "s.yaml")
    assert from_yaml == dpopt.load_spec(tmp_path / "s.json") == dpopt.load_spec(raw)
    assert from_yaml.privacy.approx.delta == 1e-5


def test_yaml_exponent_without_dot_is_a_number(tmp_path):
    # PyYAML (YAML 1.1) reads `1e-5` as a string; dpopt must read it as 1e-05.
    text = yaml.safe_dump(make_spec()).replace("gdp:\n    mu: 1.0", "approx:\n    epsilon: 2e0\n    delta: 1e-5")
    (tmp_path / "s.yaml").write_text(text)
    spec = dpopt.load_spec(tmp_path / "s.yaml")
    assert spec.privacy.approx.delta == 1e-5 and spec.privacy.approx.epsilon == 2.0


def test_spec_is_frozen_and_shorthands_expand():
    spec = dpopt.load_spec(make_spec(adjacency="add_remove", utility="l1"))
    assert spec.adjacency.kind == "add_remove" and spec.utility.metric == "l1"
    with pytest.raises(Exception):
        spec.name = "other"


def _set(path: str, value):
    def mutate(raw: dict) -> dict:
        raw = copy.deepcopy(raw)
        *parents, last = path.split(".")
        node = raw
        for key in parents:
            node = node[key]
        if value is _DELETE:
            del node[last]
        else:
            node[last] = value
        return raw

    return mutate


_DELETE = object()

BAD = {
    "epsilon zero": (_set("privacy", {"pure": {"epsilon": 0}}), "privacy.pure.epsilon"),
    "epsilon negative": (_set("privacy", {"approx": {"epsilon": -1, "delta": 1e-6}}), "privacy.approx.epsilon"),
    "delta one": (_set("privacy", {"approx": {"epsilon": 1, "delta": 1}}), "privacy.approx.delta"),
    "delta zero": (_set("privacy", {"approx": {"epsilon": 1, "delta": 0}}), "privacy.approx.delta"),
    "epsilon infinite": (_set("privacy", {"pure": {"epsilon": float("inf")}}), "privacy.pure.epsilon"),
    "mu negative": (_set("privacy", {"gdp": {"mu": -0.5}}), "privacy.gdp.mu"),
    "rho zero": (_set("privacy", {"zcdp": {"rho": 0}}), "privacy.zcdp.rho"),
    "two definitions": (_set("privacy", {"gdp": {"mu": 1}, "zcdp": {"rho": 1}}), "privacy"),
    "no definition": (_set("privacy", {}), "privacy"),
    "empty domain": (_set("data.attributes", {}), "data.attributes"),
    "empty levels": (_set("data.attributes.race", []), "data.attributes.race"),
    "repeated level": (_set("data.attributes.sex", ["f", "f"]), "data.attributes"),
    "numeric bounds reversed": (_set("data.attributes.income", {"min": 5, "max": 5}), "data.attributes.income"),
    "n zero": (_set("data.n", 0), "data.n"),
    "unknown query kind": (_set("query", {"kind": "median"}), "query.kind"),
    "unknown attribute": (_set("query", {"kind": "contingency_table", "attributes": ["age"]}),
                          "query.attributes[0]"),
    "numeric attribute in table": (_set("query", {"kind": "histogram", "attribute": "income"}),
                                   "query.attribute"),
    "categorical in a sum": (_set("query", {"kind": "sum", "attribute": "race"}), "query.attribute"),
    "matrix width": (_set("query", {"kind": "linear", "attribute": "sex", "matrix": [[1, 0, 1]]}),
                     "query.matrix"),
    "ragged matrix": (_set("query", {"kind": "linear", "attribute": "sex", "matrix": [[1, 0], [1]]}),
                      "query.matrix"),
    "unknown key": (_set("colour", "blue"), ""),  # the spec itself: "unknown key 'colour' (valid keys: ...)"
    "missing adjacency": (_set("adjacency", _DELETE), "adjacency"),
    "unknown adjacency": (_set("adjacency", {"kind": "swap"}), "adjacency.kind"),
    "hamming zero": (_set("adjacency", {"kind": "hamming", "distance": 0}), "adjacency.distance"),
    "unknown family": (_set("mechanism", "cauchy"), "mechanism"),
    "usefulness without gamma": (_set("utility", {"metric": "usefulness"}), "utility"),
    "workload with l1": (_set("utility", {"metric": "l1", "workload": [[1]]}), "utility"),
    "format version": (_set("dpopt", 2), "dpopt"),
}


@pytest.mark.parametrize("mutate, field", BAD.values(), ids=BAD.keys())
def test_bad_spec_names_the_field(mutate, field):
    with pytest.raises(SpecError) as info:
        dpopt.load_spec(mutate(make_spec()))
    assert info.value.field == field
    assert "\n" not in str(info.value)


def test_mean_needs_public_n():
    raw = make_spec(query={"kind": "mean", "attribute": "income"})
    with pytest.raises(SpecError) as info:
        dpopt.solve(raw)
    assert info.value.field == "data.n"


@pytest.mark.parametrize("mutate, field", list(BAD.values())[:6], ids=list(BAD)[:6])
def test_cli_bad_spec_exits_2_with_one_line(mutate, field, tmp_path, capsys):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(mutate(make_spec())))
    assert main(["solve", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and field in err and "Traceback" not in err


@pytest.mark.parametrize("content", ["dpopt: [1, 2", "- just\n- a list\n"])
def test_unreadable_spec_file_is_one_line(content, tmp_path, capsys):
    path = tmp_path / "bad.yaml"
    path.write_text(content)
    assert main(["solve", str(path)]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_missing_spec_file(capsys):
    assert main(["solve", "/nonexistent/spec.yaml"]) == 2
    assert "cannot read spec file" in capsys.readouterr().err
