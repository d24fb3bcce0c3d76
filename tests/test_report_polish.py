"""Report polish of issue 27: cell names instead of indices, exact numbers for people, a checks table that
adds up to the headline's claim count. Expected strings are written out by hand from the inputs."""

from __future__ import annotations

import re

from solved_specs import SPECS, solved

from dpopt.report.reading import checks_sentence, claim_counts, name_cells
from dpopt.report.render import render_markdown
from dpopt.report.words import exact_number


def test_worst_difference_names_its_cells():
    d = {"utility": {"per_cell": {"cells": [{"cell": f"c{i}"} for i in range(100)]}}}
    assert name_cells("refuted; worst difference {94: 2, 95: -2}", d) == "refuted; worst difference {c94: 2, c95: -2}"
    assert name_cells("worst difference {3: 1, …}", d) == "worst difference {c3: 1, …}"
    assert name_cells("worst difference [1, -1]", d) == "worst difference [1, -1]"  # a short vector: by position


def test_exact_numbers_for_people():
    assert exact_number("1", root=True) == "1"  # not "√1 ≈ 1"
    assert exact_number("9/4", root=True) == "1.5 (exactly 3/2)"
    assert exact_number("2", root=True) == "√2 ≈ 1.41421"
    assert exact_number("195025/665857") == "0.292893 (exactly 195025/665857)"


def test_census_report_names_cells_and_counts_its_checks():
    cert = solved(next(p for p in SPECS if p.stem == "census_2020_states")).certificate
    text = render_markdown(cert)
    assert not re.search(r"worst difference \{\d", text)
    assert "worst difference {state=" in text
    claims, _ = claim_counts(cert.data)
    assert f"{claims} claims for `dpopt verify` to re-derive" in text  # the first paragraph
    assert checks_sentence(cert.data).startswith(f"{claims} claims in all") and checks_sentence(cert.data) in text
    recorded = re.search(r"the (\d+) recorded checks below", text).group(1)
    assert int(recorded) + 4 == claims  # + spec_sha256, guarantee, sensitivity, utility
