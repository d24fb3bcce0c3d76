"""``exact`` as a list of published tables held exact (issue 38): fitted to other targets, then matched exactly on
those tables and the one-way margins of their attributes only.

Expected values: the published tables are tabulations of a seeded random record file (consistent whole numbers
that admit a record file by construction), the records' gaps are brute-force tabulations over the whole small
domain (:func:`test_synth_model.brute_force_l1`), the cycle is one a reader sees in the spec.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from dpopt.errors import SpecError
from dpopt.synth import synthesize_records
from test_synth_model import brute_force_l1, domain_of, random_records, tables_of

SPECS = Path(__file__).resolve().parents[1] / "specs"


def test_the_tables_held_and_their_one_way_margins_are_matched_exactly_from_other_targets():
    domain = domain_of([3, 2, 4, 2, 3])
    data = random_records(list(domain.values()), 60, seed=2)
    tables = tables_of(data, domain, itertools.combinations(domain, 2))
    # targets far from the tables (uniform): only the repair can make the held tables exact
    flat = {k: np.full(t.shape, 60 / t.size) for k, t in tables.items()}
    held = [("a0", "a2"), ("a2", "a4")]
    out = synthesize_records(domain, tables, 60, np.random.default_rng(0), exact=held, targets=flat)
    gaps = brute_force_l1(out.records, domain, tables)
    assert gaps == out.residual and all(gaps[k] == 0 for k in held)
    ones = tables_of(data, domain, [("a0",), ("a2",), ("a4",)])
    assert brute_force_l1(out.records, domain, ones) == {k: 0 for k in ones}
    assert "2 given tables held exact" in out.method


@pytest.mark.parametrize("held, message", [
    ([("a0", "a1"), ("a1", "a2"), ("a0", "a2")], "cycle"),  # a0-a1-a2-a0
    ([("a0", "a3")], "is not a given"),
])
def test_a_cycle_or_an_unknown_table_is_refused_in_one_line(held, message):
    domain = domain_of([2, 2, 2])
    tables = tables_of(random_records([2, 2, 2], 10, seed=0), domain, itertools.combinations(domain, 2))
    with pytest.raises(SpecError, match=message) as caught:
        synthesize_records(domain, tables, 10, np.random.default_rng(0), exact=held)
    assert str(caught.value).startswith("exact:") and "\n" not in str(caught.value)


def _survey(**synthesize) -> dict:
    import yaml

    document = yaml.safe_load((SPECS / "synthesize_survey.yaml").read_text())
    document["synthesize"].update(synthesize)
    return document


@pytest.mark.parametrize("synthesize, field, message", [
    ({"exact": [["race", "sex"], ["sex", "age_group"], ["age_group", "race"]]}, r"synthesize\.exact\[2\]", "cycle"),
    ({"exact": [["race", "nope"]]}, r"synthesize\.exact\[0\]", "not a marginal"),
    ({"exact": [["race", "sex", "disability"]]}, r"synthesize\.exact", ""),
    ({"exact": [["race", "sex"]], "selection": "adaptive"}, r"synthesize\.exact", "selection: fixed"),
])
def test_a_bad_list_names_the_field_in_one_line(synthesize, field, message):
    from dpopt.spec.synthesis import load_synthesis_spec

    with pytest.raises(SpecError, match=f"^{field}: .*{message}") as caught:
        load_synthesis_spec(_survey(**synthesize))
    assert "\n" not in str(caught.value)


def test_a_held_list_from_a_spec_matches_those_published_tables_and_verifies():
    # The survey example (1,000 records) through the real pipeline: records as many as the published total, the two
    # held tables' residuals 0 (their published tables are consistent whole numbers: a record file exists), the
    # certificate states both sources of the post-processing and verifies.
    import dpopt
    from dpopt.synthesis import verify_synthesis

    release = dpopt.synthesize(_survey(exact=[["race", "sex"], ["age_group", "disability"]]),
                               SPECS / "data" / "survey.csv", seed=3, insecure_seed=True)
    assert release.residual["race×sex"] == 0 and release.residual["age_group×disability"] == 0
    assert release.records.shape[0] == int(release.tables[("race", "sex")].sum())
    synthesis = release.certificate.data["synthesis"]
    assert synthesis["records_from"] == "the published tables' total"
    assert "noisy tables" in synthesis["post_processing"] and "and the published tables" in synthesis["post_processing"]
    assert verify_synthesis(release.certificate).passed
