"""Report polish of issue 27: cell names instead of indices, exact numbers for people, a checks table that
adds up to the headline's claim count. Expected strings are written out by hand from the inputs."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import yaml
from solved_specs import SPECS, solved

import dpopt
from dpopt.certificate.verify import STRUCTURAL_CLAIMS
from dpopt.report.reading import checks_sentence, claim_counts, name_cells
from dpopt.report.render import render_markdown
from dpopt.report.words import exact_number


def test_log_labels_and_lattice_bars_without_mathtext_or_patches():
    from dpopt.report.plots import _lattice_bars, _plain_text

    # matplotlib's LogFormatterSciNotation strings, written by hand, and their plain-text forms
    assert _plain_text(r"$\mathdefault{10^{-5}}$") == "10⁻⁵"
    assert _plain_text(r"$\mathdefault{2\times10^{-3}}$") == "2×10⁻³"
    assert _plain_text(r"$\mathdefault{10^{12}}$") == "10¹²"
    assert _plain_text("0.5") == "0.5"
    # bars of width 0.8 at −1, 0, 2 with heights 0.25, 0.5, 0.25: edges v ± 0.4, zero over the gaps
    steps, edges = _lattice_bars(np.array([-1.0, 0.0, 2.0]), np.array([0.25, 0.5, 0.25]))
    np.testing.assert_allclose(edges, [-1.4, -0.6, -0.4, 0.4, 1.6, 2.4])
    np.testing.assert_allclose(steps, [0.25, 0, 0.5, 0, 0.25])


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
    path = next(p for p in SPECS if p.stem == "census_2020_states")
    cert = solved(path).certificate
    text = render_markdown(cert)
    # the exact (lattice) census states no noise law, so its second route names no difference; the floating-point
    # design of the same spec does, by cell label
    assert "worst difference" not in text
    floating = dpopt.solve({**yaml.safe_load(path.read_text()), "sampler": "floating_point"}).certificate
    named = render_markdown(floating)
    assert not re.search(r"worst difference \{\d", named)
    assert "worst difference {state=" in named
    claims, _ = claim_counts(cert.data)
    assert f"{claims} claims for `dpopt verify` to re-derive" in text  # the first paragraph
    assert checks_sentence(cert.data).startswith(f"{claims} claims in all") and checks_sentence(cert.data) in text
    recorded = re.search(r"the (\d+) recorded checks below", text).group(1)
    assert int(recorded) + len(STRUCTURAL_CLAIMS) == claims  # + the claims verify re-derives from the spec


def test_cell_orbits_follow_the_symmetries_of_the_differences():
    from dpopt.certificate.per_cell import cell_orbits

    labels = ["a=x,b=u", "a=x,b=v", "a=y,b=u", "a=y,b=v"]
    plus_minus = np.vstack([np.eye(4), -np.eye(4)])  # add/remove one record: every level swap is a symmetry
    assert len(set(cell_orbits(labels, plus_minus).tolist())) == 1
    lopsided = np.vstack([np.eye(4), -np.eye(4), [[2.0, 0, 0, 0]]])  # cell 0 moves further: no swap keeps the set
    assert len(set(cell_orbits(labels, lopsided).tolist())) == 4
    assert cell_orbits(["count"], np.ones((1, 1))) is None  # not attribute=level labels


def test_k_norm_cells_made_equal_by_symmetry_get_the_exact_standard_error():
    # the continuous law, whose l2 is a closed form (the lattice law's, the default on counts, is Monte Carlo: below)
    spec = dpopt.load_spec(next(p for p in SPECS if p.stem == "table_3x4_margins_pure"))
    cert = dpopt.solve(spec.model_copy(update={"sampler": "floating_point"})).certificate
    cells = cert["utility"]["per_cell"]["cells"]
    # swapping two tenure levels or two size levels keeps the margins-kernel differences: one orbit of 12 cells,
    # so each E Z_i² is E‖Z‖²/12 with E‖Z‖² the certificate's l2 (re-derived by integration in dpopt verify)
    se = [c["standard_error"] for c in cells]
    assert se == pytest.approx([math.sqrt(cert["utility"]["value"] / 12)] * 12, rel=1e-12)
    assert "exact by symmetry" in cert["utility"]["per_cell"]["method"]


def test_k_norm_lattice_cells_agree_with_its_monte_carlo_l2():
    """The lattice law keeps the symmetry (one orbit, E Z_i² = E‖Z‖²/12), but both numbers are Monte Carlo: the
    l2's 95% half-width is 0.49% (certificate), 0.25% on its square root (SE 0.125%); the pooled per-cell
    estimate's relative SE is about √(Var Z²/(12·20,000))/E Z² ≈ √(2/240,000) ≈ 0.3%, 0.15% on SE. Four combined
    standard errors: 4·√(0.125² + 0.15²)% ≈ 0.8%."""
    cert = solved(next(p for p in SPECS if p.stem == "table_3x4_margins_pure")).certificate
    se = [c["standard_error"] for c in cert["utility"]["per_cell"]["cells"]]
    assert len(set(se)) == 1
    assert se[0] == pytest.approx(math.sqrt(cert["utility"]["value"] / 12), rel=0.008)
