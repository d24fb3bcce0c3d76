"""Input read strictly: what is not read exactly as written is a one-line error (issue 31).

Expected readings come from the YAML 1.2.2 specification, §10.3.2 (the core schema: booleans
are ``true``/``false`` in three spellings, integers ``[-+]?[0-9]+``, floats need no dot before
an exponent, everything else is a string), narrowed as :mod:`dpopt.spec.yaml12` documents
(``0x``/``0o`` integers are strings, so a number field refuses them). Each error must be one
line and must not be a traceback.
"""

from __future__ import annotations

import json
import re
import tracemalloc

import pytest

import dpopt
from dpopt.certificate.model import Certificate
from dpopt.cli import main
from dpopt.core.documents import MAX_DEPTH
from dpopt.errors import CertificateError, SpecError

COUNT = """dpopt: 1
name: count
data:
  attributes:
    a: [x, y]
query: {kind: count}
adjacency: add_remove
privacy: {pure: {epsilon: 1}}
"""


def _spec(tmp_path, text: str, name: str = "spec.yaml"):
    path = tmp_path / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def _error(tmp_path, text, name: str = "spec.yaml") -> str:
    with pytest.raises(SpecError) as caught:
        dpopt.load_spec(_spec(tmp_path, text, name))
    message = str(caught.value)
    assert "\n" not in message
    return message


# ------------------------------------------------------------------ duplicate keys
def test_a_key_given_twice_in_yaml_is_an_error_naming_it_and_its_line(tmp_path):
    # the case: privacy given twice, epsilon 0.1 then 50, was certified at 50
    text = COUNT.replace("privacy: {pure: {epsilon: 1}}", "privacy: {pure: {epsilon: 0.1}}\nprivacy: {pure: {epsilon: 50}}")
    message = _error(tmp_path, text)
    assert "'privacy' is given twice" in message and "line 9" in message


def test_a_key_given_twice_inside_a_flow_mapping_is_an_error(tmp_path):
    message = _error(tmp_path, COUNT.replace("{epsilon: 1}", "{epsilon: 0.1, epsilon: 50}"))
    assert "'epsilon' is given twice" in message and "line 8" in message


def test_a_key_given_twice_in_a_json_spec_is_an_error_naming_its_path(tmp_path):
    text = '{"dpopt": 1, "privacy": {"pure": {"epsilon": 0.1, "epsilon": 50}}}'
    message = _error(tmp_path, text, "spec.json")
    assert "gives the key 'epsilon' twice in privacy.pure" in message


def test_a_key_given_twice_in_a_certificate_is_an_error(tmp_path):
    path = _spec(tmp_path, '{"mechanism": {"family": "gaussian"}, "mechanism": {"family": "laplace"}}', "c.json")
    with pytest.raises(CertificateError, match="gives the key 'mechanism' twice at the top level"):
        Certificate.from_file(path)


def test_a_key_given_twice_inside_a_list_names_its_index(tmp_path):
    """The path is spelled as documents._where does: keys joined by dots, list indices in brackets."""
    path = _spec(tmp_path, '{"checks": [{"claim": "a"}, {"claim": "b", "claim": "c"}]}', "c.json")
    with pytest.raises(CertificateError, match=re.escape("gives the key 'claim' twice in checks[1]")):
        Certificate.from_file(path)


# ---------------------------------------------------------- YAML 1.2 core schema
@pytest.mark.parametrize("written", ["1:30", "0x10", "0o10", "1_000", "yes", "on", "true", "false", "'1'", "1e400",
                                     ".nan", ".inf"])
def test_epsilon_that_is_not_a_finite_number_is_refused(tmp_path, written):
    # YAML 1.1 read 1:30 as 90, 0x10 as 16, 1_000 as 1000, yes/on/true as 1; YAML 1.2 reads them as strings
    # (or booleans), which are not numbers; 1e400 is +inf in binary64
    message = _error(tmp_path, COUNT.replace("epsilon: 1}", f"epsilon: {written}}}"))
    assert message.startswith("privacy.pure.epsilon:")


@pytest.mark.parametrize(("written", "value"), [("1e-5", 1e-5), ("2E+1", 20.0), (".5", 0.5), ("3.", 3.0), ("010", 10.0),
                                                ("+2", 2.0)])
def test_numbers_read_by_the_core_schema(tmp_path, written, value):
    # 1e-5 needs no dot (DESIGN.md); 010 is decimal ten in YAML 1.2 (octal 8 in YAML 1.1)
    spec = dpopt.load_spec(_spec(tmp_path, COUNT.replace("epsilon: 1}", f"epsilon: {written}}}")))
    assert spec.privacy.pure.epsilon == value


def test_yes_no_on_off_are_level_names_not_booleans(tmp_path):
    spec = dpopt.load_spec(_spec(tmp_path, COUNT.replace("[x, y]", "[yes, no, on, off, y, n]")))
    assert spec.data.attributes["a"] == ["yes", "no", "on", "off", "y", "n"]


def test_a_date_is_a_string(tmp_path):
    # YAML 1.1 reads 2020-01-01 as a date (!!timestamp); the core schema has no timestamp
    spec = dpopt.load_spec(_spec(tmp_path, COUNT.replace("name: count", "name: 2020-01-01")))
    assert spec.name == "2020-01-01"


@pytest.mark.parametrize("tag", ["!!binary aGk=", "!!set {a, b}", "!!python/object:os.getcwd []", "!custom x"])
def test_tags_outside_the_core_schema_are_refused(tmp_path, tag):
    assert "could not determine a constructor" in _error(tmp_path, COUNT.replace("name: count", f"name: {tag}"))


@pytest.mark.parametrize(("path", "value"), [("privacy.pure.epsilon", True), ("privacy.pure.epsilon", "1"),
                                             ("data.n", True), ("dpopt", True), ("data.n", 1.5)])
def test_booleans_and_strings_are_never_numbers_in_a_dict_either(path, value):
    raw = {"dpopt": 1, "name": "c", "data": {"attributes": {"a": ["x", "y"]}}, "query": {"kind": "count"},
           "adjacency": "add_remove", "privacy": {"pure": {"epsilon": 1}}}
    *parents, last = path.split(".")
    node = raw
    for key in parents:
        node = node[key]
    node[last] = value
    with pytest.raises(SpecError) as caught:
        dpopt.load_spec(raw)
    assert caught.value.field == path


def test_a_boolean_field_takes_booleans_only(tmp_path):
    message = _error(tmp_path, COUNT + "postprocess: {integer: yes}\n")
    assert message.startswith("postprocess.integer:")


def test_levels_that_are_lists_are_an_error_not_strings(tmp_path):
    # the issue: [[1, 2], [3]] became the levels "[1, 2]" and "[3]"
    assert "level [1, 2] is not a name or a number" in _error(tmp_path, COUNT.replace("[x, y]", "[[1, 2], [3]]"))
    assert "is not a name or a number" in _error(tmp_path, COUNT.replace("[x, y]", "[x, null]"))


def test_levels_written_as_numbers_are_their_text(tmp_path):
    spec = dpopt.load_spec(_spec(tmp_path, COUNT.replace("[x, y]", "[1, 2, 3]")))
    assert spec.data.attributes["a"] == ["1", "2", "3"]


def test_a_huge_integer_is_a_one_line_error(tmp_path):
    # n = 10^400: above 2^53, the largest count a spec takes; the message does not print 401 digits
    message = _error(tmp_path, COUNT.replace("    a: [x, y]", "    a: [x, y]\n  n: 1" + "0" * 400))
    assert message.startswith("data.n:") and "9007199254740992" in message and len(message) < 200
    assert "too long" in _error(tmp_path, COUNT.replace("epsilon: 1}", "epsilon: 1" + "0" * 5000 + "}"))


# ------------------------------------------------------------------------- aliases
def test_an_alias_of_a_level_list_is_read(tmp_path):
    text = COUNT.replace("    a: [x, y]", "    a: &levels [x, y]\n    b: *levels")
    assert dpopt.load_spec(_spec(tmp_path, text)).data.attributes["b"] == ["x", "y"]


def _alias_bomb() -> str:
    """The "billion laughs" in a spec's description: 9 levels of 9 aliases, 9^9 = 387,420,489 strings."""
    lines = ['l0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"l{i}: &l{i} [" + ",".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, 9)]
    return COUNT.replace("name: count", "name: count\ndescription:\n  " + "\n  ".join(lines))


def test_an_alias_bomb_is_a_one_line_error_in_bounded_memory(tmp_path):
    text = _alias_bomb()
    assert len(text) < 1000
    tracemalloc.start()
    try:
        message = _error(tmp_path, text)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert "aliases that expand" in message
    # the composed document is a few hundred nodes; expanded it would be 387 million strings (> 3 GB)
    assert peak < 20 * 1024**2


def test_an_alias_inside_itself_is_an_error(tmp_path):
    assert "alias inside the node it names" in _error(tmp_path, COUNT.replace("[x, y]", "&a [x, *a]"))


# ----------------------------------------------------------- encoding and nesting
def test_a_spec_that_is_not_utf8_is_a_one_line_error(tmp_path):
    message = _error(tmp_path, COUNT.encode().replace(b"name: count", b"name: caf\xe9"))
    assert "is not UTF-8 text: byte 0xe9" in message and "line 2" in message


def test_a_certificate_that_is_not_utf8_is_a_one_line_error(tmp_path):
    path = _spec(tmp_path, b'{"spec_sha256": "\xff"}', "c.json")  # the 0xff is byte 17 (from 0)
    with pytest.raises(CertificateError, match="is not UTF-8 text: byte 0xff at offset 17"):
        Certificate.from_file(path)


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 1_000, 100_000])
@pytest.mark.parametrize("name", ["spec.yaml", "spec.json"])
def test_deep_nesting_is_a_one_line_error(tmp_path, depth, name):
    text = COUNT.replace("name: count", "name: count\ndescription: " + "[" * depth + "]" * depth)
    if name.endswith(".json"):
        text = '{"dpopt": 1, "description": ' + "[" * depth + "]" * depth + "}"
    # LibYAML itself refuses more than 1,000 levels ("exceeded maximum nesting depth")
    assert re.search(f"nests containers deeper than {MAX_DEPTH} levels|exceeded maximum nesting depth",
                     _error(tmp_path, text, name))


def test_nesting_up_to_the_limit_is_read(tmp_path):
    # the description is nested MAX_DEPTH - 1 lists inside the top-level mapping: MAX_DEPTH containers
    depth = MAX_DEPTH - 1
    text = COUNT.replace("name: count", "name: count\ndescription: " + "[" * depth + "]" * depth)
    with pytest.raises(SpecError, match="^description: Input should be a valid string"):
        dpopt.load_spec(_spec(tmp_path, text))


def test_the_cli_prints_one_line_and_exits_2_for_each_class(tmp_path, capsys):
    cases = {
        "dup.yaml": COUNT + "privacy: {pure: {epsilon: 50}}\n",
        "bomb.yaml": _alias_bomb(),
        "deep.yaml": "[" * 1_000 + "]" * 1_000,
        "latin1.yaml": COUNT.encode().replace(b"count", b"caf\xe9"),
        "bool.yaml": COUNT.replace("epsilon: 1}", "epsilon: true}"),
    }
    for name, text in cases.items():
        assert main(["solve", str(_spec(tmp_path, text, name))]) == 2, name
        err = capsys.readouterr().err
        assert err.startswith("dpopt: error: ") and err.count("\n") == 1 and "Traceback" not in err, err


def test_verify_of_a_malformed_certificate_is_one_line(tmp_path, capsys):
    deep = _spec(tmp_path, "[" * 1_000 + "]" * 1_000, "deep.json")
    assert main(["verify", str(deep)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nests containers deeper" in err
    good = dpopt.solve(COUNT_DICT).certificate.to_json()
    twice = _spec(tmp_path, good.replace('{\n  "dpopt_version"', '{\n  "spec_sha256": "0",\n  "dpopt_version"', 1),
                  "twice.json")
    assert main(["verify", str(twice)]) == 2
    assert "gives the key 'spec_sha256' twice" in capsys.readouterr().err


COUNT_DICT = json.loads(json.dumps({"dpopt": 1, "name": "count", "data": {"attributes": {"a": ["x", "y"]}},
                                    "query": {"kind": "count"}, "adjacency": "add_remove",
                                    "privacy": {"gdp": {"mu": 1.0}}, "mechanism": "gaussian"}))


# ------------------------------------------------------------------ types are types (issue 35)
def _set_path(raw: dict, path: str, value) -> dict:
    *parents, last = path.split(".")
    node = raw
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    node[last] = value
    return raw


def _marginals() -> dict:
    return {"dpopt": 1, "name": "m", "data": {"attributes": {"a": ["x", "y"], "b": ["p", "q"]}, "n": 10},
            "query": {"kind": "marginals", "all_of_size": 1}, "adjacency": {"kind": "hamming", "distance": 2},
            "privacy": {"zcdp": {"rho": 0.5}}}


@pytest.mark.parametrize(("path", "value"), [
    ("query.all_of_size", True),  # was read as 1: silently every one-way marginal
    ("query.all_of_size", "2"), ("query.all_of_size", 2.0), ("data.n", 10.0), ("adjacency.distance", "2"),
    ("adjacency.distance", 2.0), ("dpopt", 1.0), ("dpopt", "1"),
])
def test_an_integer_field_takes_integers_only(path, value):
    with pytest.raises(SpecError) as caught:
        dpopt.load_spec(_set_path(_marginals(), path, value))
    assert caught.value.field == path and "integer" in caught.value.problem


def test_a_kronecker_all_of_size_takes_integers_only():
    raw = {"dpopt": 1, "name": "k", "data": {"attributes": {"a": ["x", "y"], "b": ["p", "q"]}, "n": 10},
           "query": {"kind": "kronecker", "all_of_size": True}, "adjacency": "replace_one",
           "privacy": {"gdp": {"mu": 1}}}
    with pytest.raises(SpecError) as caught:
        dpopt.load_spec(raw)
    assert caught.value.field == "query.all_of_size"


@pytest.mark.parametrize(("attributes", "field"), [
    ({"": ["x", "y"]}, "data.attributes."), ({"  ": ["x", "y"]}, "data.attributes.  "),
    ({"a": ["x", ""]}, "data.attributes.a[1]"), ({"a": ["x", " "]}, "data.attributes.a[1]"),
])
def test_empty_or_blank_attribute_and_level_names_are_refused(attributes, field):
    raw = _set_path(_marginals(), "data.attributes", attributes)
    raw["query"] = {"kind": "count"}
    with pytest.raises(SpecError) as caught:
        dpopt.load_spec(raw)
    assert caught.value.field == field and "empty or blank" in caught.value.problem


@pytest.mark.parametrize(("path", "value", "message"), [
    ("dpopt", True, "integer"),
    ("data.attributes.age", ["0", ["1"]], "level ['1'] is not a name or a number"),
    ("data.attributes.age", ["0", None], "level None is not a name or a number"),
    ("data.attributes.clinic.declared", [None], "level None is not a name or a number"),
    ("data.attributes.clinic.declared", [" "], "empty or blank"),
    ("data.privacy_unit.id", "", "empty or blank"),
])
def test_a_selection_spec_reads_types_strictly(path, value, message):
    from dpopt.spec.selection import load_selection_spec

    raw = {"dpopt": 1, "name": "s",
           "data": {"attributes": {"clinic": {"keys": "private", "declared": ["north"]}, "age": ["0", "1"]},
                    "privacy_unit": {"id": "pid", "max_rows": 2, "max_groups": 1}},
           "releases": [{"kind": "count", "by": "clinic", "epsilon": 1.0, "delta": 1e-6}],
           "adjacency": "add_remove", "privacy": {"approx": {"epsilon": 1.0, "delta": 1e-6}}}
    with pytest.raises(SpecError, match=re.escape(message)):
        load_selection_spec(_set_path(raw, path, value))


@pytest.mark.parametrize(("path", "value", "message"), [
    ("data.attributes.income.max", 1e308, "data.attributes.income.max: Input should be at most 1e+100"),
    ("privacy.gdp.mu", 1e300, "privacy.gdp.mu: Input should be at most 1e+100"),
    ("privacy.gdp.mu", 1e-300, "privacy.gdp.mu: Input should be at least 1e-100"),
])
def test_numbers_beyond_the_float_range_of_derived_quantities_are_refused_in_short_form(path, value, message):
    raw = {"dpopt": 1, "name": "s", "data": {"attributes": {"income": {"min": 0, "max": 10}}, "n": 10},
           "query": {"kind": "sum", "attribute": "income"}, "adjacency": "replace_one", "privacy": {"gdp": {"mu": 1}}}
    with pytest.raises(SpecError) as caught:
        dpopt.load_spec(_set_path(raw, path, value))
    assert str(caught.value).startswith(message)


def test_a_privacy_unit_bound_beyond_what_is_derived_is_refused():
    raw = {"dpopt": 1, "name": "p", "data": {"attributes": {"a": ["x", "y"]},
                                             "privacy_unit": {"id": "pid", "max_rows": 10**15}},
           "query": {"kind": "histogram", "attribute": "a"}, "adjacency": "add_remove", "privacy": {"gdp": {"mu": 1}}}
    with pytest.raises(SpecError) as caught:
        dpopt.load_spec(raw)
    assert caught.value.field == "data.privacy_unit.max_rows" and "1000" in caught.value.problem
