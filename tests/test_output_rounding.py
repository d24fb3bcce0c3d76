"""``output: {decimals: N}``: the published numbers rounded as post-processing, stated in the certificate's ``output``
block, and checked by ``dpopt verify`` (issue 37: values printed with 17 digits)."""

from __future__ import annotations

import copy
import csv
import json
import math
from decimal import ROUND_CEILING, ROUND_FLOOR
from pathlib import Path

import pytest
from conftest import make_spec

from dpopt.certificate.model import Certificate
from dpopt.certificate.verify import verify
from dpopt.cli import main
from dpopt.errors import SpecError
from dpopt.release.rounded import round_number
from dpopt.solve import solve
from dpopt.spec.load import load_spec

ROOT = Path(__file__).resolve().parents[1]
TABLE = {"data": {"attributes": {"race": ["white", "black", "other"], "sex": ["female", "male"]}, "n": 1000},
         "query": {"kind": "contingency_table", "attributes": ["race", "sex"]}, "mechanism": "projected_gaussian"}


@pytest.mark.parametrize("x, decimals, mode, expected", [
    # by hand, in decimal: the value and margin; ties go to the even digit (0.15 → 0.2, 0.25 → 0.2,
    # 2.5 → 2, 3.5 → 4); a margin or upper end up, a lower end down; 0 places give an int
    (27.108253112012957, 1, None, 27.1), (8.543284941589409, 1, ROUND_CEILING, 8.6), (0.15, 1, None, 0.2),
    (0.25, 1, None, 0.2), (2.5, 0, None, 2), (3.5, 0, None, 4), (-1.05, 1, ROUND_FLOOR, -1.1),
    (8.0000001, 2, ROUND_CEILING, 8.01), (12, 0, None, 12), (None, 2, None, None),
])
def test_round_number_by_hand(x, decimals, mode, expected):
    got = round_number(x, decimals) if mode is None else round_number(x, decimals, mode)
    assert got == expected and type(got) is type(expected)


@pytest.fixture(scope="module")
def certificate() -> dict:
    spec = load_spec(make_spec(**TABLE, output={"decimals": 1}))
    return json.loads(solve(spec).certificate.to_json())


def test_the_certificate_states_the_rounding_and_verify_checks_it(certificate):
    assert certificate["output"]["decimals"] == 1 and "post-processing" in certificate["output"]["method"]
    result = verify(Certificate(certificate))
    assert result.passed and "output" in [c.claim for c in result.checks]
    for edit in (lambda c: c["output"].update(decimals=3), lambda c: c.pop("output")):
        tampered = copy.deepcopy(certificate)
        edit(tampered)
        assert [c.claim for c in verify(Certificate(tampered)).failed] == ["output"]


def test_a_rounding_the_spec_does_not_state_is_refused(certificate):
    plain = json.loads(solve(load_spec(make_spec(**TABLE))).certificate.to_json())
    assert "output" not in plain and "output" not in [c.claim for c in verify(Certificate(plain)).checks]
    plain["output"] = certificate["output"]
    assert [c.claim for c in verify(Certificate(plain)).failed] == ["output"]


@pytest.mark.parametrize("output, message", [
    ({"decimals": -1}, "output.decimals"), ({"decimals": 2, "digits": 3}, "output: unknown key 'digits'"),
])
def test_bad_output_is_named(output, message):
    with pytest.raises(SpecError, match=message):
        load_spec(make_spec(**TABLE, output=output))


def test_release_writes_rounded_numbers_and_verifies(tmp_path, capsys):
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(make_spec(**TABLE, output={"decimals": 1})))
    out = tmp_path / "rel"
    assert main(["release", str(spec), "--data", str(ROOT / "specs" / "data" / "survey.csv"), "--seed", "2",
                 "--insecure-seed", "--out", str(out)]) == 0
    assert main(["verify", str(out)]) == 0
    cert = json.loads((out / "certificate.json").read_text())
    per_cell = {c["cell"]: c for c in cert["utility"]["per_cell"]["cells"]}
    rows = list(csv.DictReader((out / "release.csv").open(encoding="utf-8")))
    for row in rows:
        assert len(row["value"].split(".")[1]) <= 1
        # the certificate's margin rounded up to one place, computed here with math.ceil
        assert float(row["margin_of_error_95"]) == math.ceil(per_cell[row["label"]]["margin_of_error"] * 10) / 10
    document = json.loads((out / "release.json").read_text())
    assert document["release"][rows[0]["label"]] == float(rows[0]["value"])


def _places(text: str) -> int:
    return len(text.split(".")[1]) if "." in text else 0


def test_a_grouped_release_is_rounded_in_every_table(tmp_path):
    spec = tmp_path / "spec.json"
    document = make_spec(**{**TABLE, "query": {"kind": "histogram", "attribute": "sex"}, "mechanism": "gaussian",
                            "sampler": "floating_point"}, output={"decimals": 1})
    document["data"] = {"attributes": TABLE["data"]["attributes"]}  # a grouped release has no data.n
    spec.write_text(json.dumps(document))
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps({k: v for k, v in document.items() if k != "output"}))
    for path, out in ((spec, tmp_path / "g"), (plain, tmp_path / "p")):  # the same seed: the same noise
        assert main(["release", str(path), "--data", str(ROOT / "specs" / "data" / "survey.csv"), "--group-by",
                     "race", "--seed", "2", "--insecure-seed", "--out", str(out), "--format", "csv"]) == 0
    assert main(["verify", str(tmp_path / "g")]) == 0
    cert = json.loads((tmp_path / "g" / "certificate.json").read_text())
    assert cert["output"]["decimals"] == 1
    margins = {c["cell"]: c["margin_of_error"] for c in cert["utility"]["per_cell"]["cells"]}
    rounded = list(csv.DictReader((tmp_path / "g" / "release_race.csv").open(encoding="utf-8")))
    full = list(csv.DictReader((tmp_path / "p" / "release_race.csv").open(encoding="utf-8")))
    for row, raw in zip(rounded, full):
        for label, margin in margins.items():
            assert _places(row[label]) <= 1 and _places(row[f"{label} ci_95_low"]) <= 1
            # by hand: the value to the nearest tenth, the margin up (math.ceil), the interval's ends outward
            assert abs(float(row[label]) - float(raw[label])) <= 0.05 + 1e-9
            assert float(row[f"{label} margin_of_error_95"]) == math.ceil(margin * 10) / 10
            assert float(row[f"{label} ci_95_low"]) <= float(raw[f"{label} ci_95_low"])
            assert float(row[f"{label} ci_95_high"]) >= float(raw[f"{label} ci_95_high"])


def test_a_hierarchy_document_is_rounded_in_its_tables_and_rows():
    from dpopt.release.rounded import rounded_document

    document = {"tables": {"state": {"S1": {"a": 2.25, "b": 3}}}, "noisy": {"state": {"S1": {"a": 2.35, "b": -0.04}}},
                "hierarchy": {"levels": [{"share": "0.3333333333"}], "budget": 0.123456},
                "cells": {"rows": [{"level": "state", "unit": "S1", "label": "a", "value": 2.35, "standard_error": 1.04,
                                    "margin_of_error_95": 2.0384, "postprocessed": 2.25, "ci_99_low": 0.16,
                                    "ci_99_high": 4.54}]}}
    out = rounded_document(document, 1)
    # by hand: half to even in decimal (2.25 → 2.2, 2.35 → 2.4), margin and upper end up, lower end down (any level)
    assert out["tables"] == {"state": {"S1": {"a": 2.2, "b": 3.0}}}
    assert out["noisy"] == {"state": {"S1": {"a": 2.4, "b": -0.0}}}
    assert out["hierarchy"] == document["hierarchy"]  # the design is not a published number
    assert out["cells"]["rows"][0] == {"level": "state", "unit": "S1", "label": "a", "value": 2.4,
                                       "standard_error": 1.0, "margin_of_error_95": 2.1, "postprocessed": 2.2,
                                       "ci_99_low": 0.1, "ci_99_high": 4.6}


@pytest.mark.slow
def test_a_geography_release_is_rounded_at_every_level(tmp_path):
    import yaml

    document = yaml.safe_load((ROOT / "specs" / "hierarchy_topdown_zcdp.yaml").read_text()) | {
        "output": {"decimals": 0}}
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(document))
    out = tmp_path / "h"
    assert main(["release", str(spec), "--data", str(ROOT / "specs" / "data" / "hierarchy.csv"), "--seed", "3",
                 "--insecure-seed", "--out", str(out)]) == 0
    assert main(["verify", str(out)]) == 0
    for level in ("nation", "state", "county"):
        assert json.loads((out / f"certificate_{level}.json").read_text())["output"]["decimals"] == 0
    rows = list(csv.DictReader((out / "release.csv").open(encoding="utf-8")))
    assert {r["level"] for r in rows} == {"nation", "state", "county"}
    for row in rows:
        assert all("." not in row[k] for k in ("value", "standard_error", "margin_of_error_95", "ci_95_low",
                                                "ci_95_high"))


def test_a_plan_release_is_rounded_and_every_query_states_it(tmp_path):
    document = {"dpopt": 1, "name": "two tables", "data": TABLE["data"],
                "queries": [{"name": "race", "query": {"kind": "histogram", "attribute": "race"}},
                            {"name": "sex", "query": {"kind": "histogram", "attribute": "sex"}}],
                "adjacency": "replace_one", "privacy": {"zcdp": {"rho": 0.5}}, "mechanism": "projected_gaussian",
                "output": {"decimals": 1}}
    spec = tmp_path / "plan.json"
    spec.write_text(json.dumps(document))
    out = tmp_path / "p"
    assert main(["release", str(spec), "--data", str(ROOT / "specs" / "data" / "survey.csv"), "--seed", "3",
                 "--insecure-seed", "--out", str(out)]) == 0
    assert main(["verify", str(out)]) == 0
    cert = json.loads((out / "certificate.json").read_text())
    assert [q["certificate"]["output"]["decimals"] for q in cert["queries"]] == [1, 1]
    for row in csv.DictReader((out / "release.csv").open(encoding="utf-8")):
        assert all(_places(row[k]) <= 1 for k in ("value", "standard_error", "margin_of_error_95", "ci_95_low",
                                                   "ci_95_high"))
    tables = json.loads((out / "release.json").read_text())["tables"]
    assert all(_places(repr(v)) <= 1 for t in tables for v in t["release"].values())
    # the values are rounded, not the query targets: their shares still add up to the plan's ρ
    assert sum(t["target"]["zcdp"]["rho"] for t in tables) == pytest.approx(0.5, abs=1e-12)


def test_a_private_key_release_is_rounded_and_verify_checks_the_statement(tmp_path):
    spec = tmp_path / "keys.yaml"
    spec.write_text((ROOT / "specs" / "visits_private_clinics.yaml").read_text() + "output: {decimals: 1}\n")
    out = tmp_path / "k"
    assert main(["release", str(spec), "--data", str(ROOT / "specs" / "data" / "visits_clinics.csv"), "--seed", "3",
                 "--insecure-seed", "--out", str(out)]) == 0
    assert main(["verify", str(out)]) == 0
    rows = list(csv.DictReader((out / "release.csv").open(encoding="utf-8")))
    assert rows and all(_places(r[k]) <= 1 for r in rows for k in ("value", "standard_error", "ci_95_low") if r[k])
    cert = json.loads((out / "certificate.json").read_text())
    assert cert["output"]["decimals"] == 1
    tampered = copy.deepcopy(cert)
    tampered.pop("output")
    assert "recorded" in [c.claim for c in verify_any(tampered).failed]


def verify_any(data: dict):
    from dpopt.selection.verify import verify_selection

    return verify_selection(Certificate(data))
