"""The report: the spec in words, the guarantee in every language, the sensitivity space,
candidates, figures (PNG), second route, audit; Markdown with PNG files, self-contained HTML.

Expected strings come from the spec files themselves (names, n, attributes) and from the
certificate's own numbers; the figures are checked as PNG files of plausible size.
"""

from __future__ import annotations

import base64
import json
import re
import struct

import pytest
from conftest import ROOT
from solved_specs import SPECS, solved

import dpopt
from dpopt.cli import main
from dpopt.report.document import Report, build_report
from dpopt.report.render import render_html, render_markdown, write_report
from dpopt.report.words import spec_in_words

PNG = b"\x89PNG\r\n\x1a\n"
HEADINGS = ["What is released", "The guarantee", "Sensitivity space", "Mechanism", "Candidates compared",
            "Second route", "Empirical audit", "Checks", "Caveats", "Provenance"]
# one spec per kind of noise law: Semi-DP Gaussian on a subspace, R²DP (mixture), K-norm (gauge),
# discrete Gaussian (lattice), correlated Gaussian, data-dependent GG (no law)
SAMPLE = ["table_3x3_margins_gdp", "r2dp_count_usefulness", "table_3x4_margins_pure",
          "block_tables_discrete_zcdp", "age_summary_ci_volume", "committee_mean_truncated_gg"]


def _path(stem):
    return next(p for p in SPECS if p.stem == stem)


def _png_size(data: bytes) -> tuple[int, int]:
    assert data.startswith(PNG)
    return struct.unpack(">II", data[16:24])


@pytest.fixture(scope="module")
def reports() -> dict[str, Report]:
    return {stem: build_report(solved(_path(stem)).certificate, audit_draws=20_000,
                               utility_families="selected", utility_scales=(0.5, 1.0, 2.0)) for stem in SAMPLE}


@pytest.mark.parametrize("stem", SAMPLE)
def test_markdown_has_every_section_and_figure(reports, stem):
    report = reports[stem]
    text = render_markdown(report)
    assert [h for h in HEADINGS if f"## {h}" not in text] == []
    names = {f.name for f in report.figures}
    assert {"tradeoff", "noise", "sensitivity", "utility"} <= names
    for f in report.figures:
        assert f"![{f.title}]({f.name}.png)" in text
        width, height = _png_size(f.png)
        assert 300 <= width <= 1400 and 250 <= height <= 800, (f.name, width, height)
    cert = report.certificate.data
    assert cert["spec"]["name"] in text and cert["spec_sha256"] in text
    assert text.count("\n| ") >= 4 + len(cert["checks"])  # guarantee, sensitivity, candidates, checks tables


@pytest.mark.parametrize("stem", SAMPLE)
def test_html_is_self_contained(reports, stem):
    page = render_html(reports[stem])
    assert page.startswith("<!doctype html>") and page.rstrip().endswith("</html>")
    assert not re.search(r"(src|href)\s*=\s*['\"](https?:|//)", page)  # nothing fetched from a network
    assert "<script" not in page and "<link" not in page
    images = re.findall(r"src='data:image/png;base64,([A-Za-z0-9+/=]+)'", page)
    assert len(images) == len(reports[stem].figures) >= 4
    assert all(base64.b64decode(data).startswith(PNG) for data in images)
    assert page.count("<table>") >= 5


def test_semi_dp_report_states_the_scope(reports):
    text = render_markdown(reports["table_3x3_margins_gdp"])
    # from specs/table_3x3_margins_gdp.yaml and its certificate
    assert "The number of records, n = 500, is public." in text
    assert "The margins over region; the margins over age." in text
    assert "semi-adjacent parameter a | 3 (exact, worst-case reading)" in text
    assert "**Not protected.** The invariants are published exactly" in text
    assert "| μ-GDP | μ = 1 |" in text and "| 1e-06 | **" in text  # the headline ε at δ = 1e-6
    assert "an ordinary-DP mechanism read under the invariants" in text and "μ = 3" in text


def test_r2dp_report_compares_and_audits(reports):
    report = reports["r2dp_count_usefulness"]
    text = render_markdown(report)
    assert "R²DP on counts: a mixture of discrete Laplace laws (exact sampler)" in text
    assert "optimising the usefulness P(|noise| ≤ γ) per coordinate, γ = 0.5" in text  # utility of the spec file
    assert "| pure ε-DP | ε = 5 |" in text
    assert report.audit is not None and report.audit.passed
    assert "**not refuted**" in text and f"ε ≥ {report.audit.lower_bound:.4g}" in text
    # the certificate's comparison: the geometric law at ε = 5, tanh(5/2) = 0.9866143, is the exact design and the
    # discrete Laplace; the staircase at ε = 5 (0.986614) bounds every continuous R²DP
    assert ("R²DP on ℤ 0.986614, discrete Laplace 0.986614, every continuous R²DP (staircase bound) 0.986614"
            in text)


def test_spec_in_words_from_the_spec_file():
    lines = spec_in_words(solved(_path("table_3x3_margins_gdp")).certificate)
    assert lines[0] == ("**Data.** Records with region (3 levels: north, centre, south); age (3 levels: young, middle, "
                        "old). The number of records, n = 500, is public.")
    assert lines[1].startswith("**Released.** The contingency table of region × age (9 cells, row-major")
    assert lines[4] == "**Target.** μ-Gaussian differential privacy with μ = 1."


def test_not_available_parts_are_said(reports):
    report = reports["committee_mean_truncated_gg"]
    text = render_markdown(report)
    assert "not available: the truncated generalized Gaussian's noise depends on the true answer" in text
    assert "trade-off of the mechanism: not drawn" in text
    # issue 37: the figure is titled and captioned for the one curve it draws, the target's
    figure = next(f for f in report.figures if f.name == "tradeoff")
    assert figure.title == "Trade-off curve of the target" and "mechanism" not in figure.caption
    # the audit itself runs on the release path (the noise is drawn around each neighbouring answer)
    assert report.audit is not None and report.audit.audited and report.audit.passed


def test_a_bare_certificate_still_renders():
    cert = solved(_path("table_replace_gdp")).certificate
    text = render_markdown(cert)
    assert "Not run for this document" in text and "![" not in text
    assert "<img" not in render_html(cert)


def test_an_audit_that_could_not_run_states_its_reason():
    # issue 37: the page `dpopt report CERT --out` wrote advised running that very command; it states the reason
    cert = solved(_path("table_replace_gdp")).certificate
    text = render_markdown(Report(cert, (), None, ("empirical audit: not run (needs 41 GB, more than the limit)",)))
    audit = text.split("## Empirical audit", 1)[1].split("\n## ", 1)[0]
    assert "Not run: needs 41 GB, more than the limit." in audit and "runs it" not in audit


def test_write_report_markdown_puts_pngs_next_to_it(tmp_path, reports):
    written = write_report(reports["table_3x3_margins_gdp"], tmp_path / "semi.md")
    assert written[0] == tmp_path / "semi.md"
    assert {p.name for p in written[1:]} == {f"semi_{n}.png" for n in ("tradeoff", "noise", "sensitivity", "utility",
                                                                             "intervals")}
    assert "](semi_tradeoff.png)" in (tmp_path / "semi.md").read_text()
    assert all(p.read_bytes().startswith(PNG) for p in written[1:])


def test_cli_report_from_certificate_and_spec(tmp_path, capsys):
    cert = tmp_path / "certificate.json"
    solved(_path("table_2x2_margins_pure")).certificate.write(cert)
    assert main(["report", str(cert), "--out", str(tmp_path / "r.html"), "--draws", "5000"]) == 0
    page = (tmp_path / "r.html").read_text()
    assert "data:image/png;base64," in page and "Empirical audit" in page
    assert capsys.readouterr().out.startswith(f"wrote {tmp_path / 'r.html'}")  # a success is said
    assert main(["report", str(_path("table_2x2_margins_pure")), "--no-audit"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# dpopt report:") and "figures: written with --out" in out


def test_cli_solve_out_writes_report_and_pngs(tmp_path):
    out = tmp_path / "out"
    assert main(["solve", str(_path("table_2x2_margins_gdp")), "--out", str(out), "--quiet"]) == 0
    text = (out / "report.md").read_text()
    for name in ("tradeoff", "noise", "sensitivity", "utility"):
        assert (out / f"{name}.png").read_bytes().startswith(PNG)
        assert f"]({name}.png)" in text
    assert json.loads((out / "certificate.json").read_text())["spec"]["name"] in text


@pytest.mark.slow
@pytest.mark.parametrize("path", SPECS, ids=[p.stem for p in SPECS])
def test_every_spec_renders(path, tmp_path):
    report = build_report(dpopt.solve(path).certificate, audit_draws=20_000)
    written = write_report(report, tmp_path / "report.md")
    assert all(p.stat().st_size > 0 for p in written)
    assert render_html(report).count("data:image/png;base64,") == len(report.figures) >= 3


def test_report_states_the_guarantee_of_a_grouped_release(tmp_path):
    # Grouping by block and by tract: one record changes one group of each, so m = 2 and the
    # whole release is 2 × 0.5 = 1-zCDP (zCDP composes additively; Bun & Steinke 2016, Lemma 2.3).
    from dpopt.certificate import Certificate

    spec = ROOT / "specs" / "block_tables_discrete_zcdp.yaml"
    data = ROOT / "specs" / "data" / "blocks.csv"
    assert main(["release", str(spec), "--data", str(data), "--group-by", "block", "--group-by", "tract",
                 "--groups", str(ROOT / "specs" / "data" / "block_list.csv"), "--out", str(tmp_path)]) == 0
    text = render_markdown(Certificate.from_file(tmp_path / "certificate.json"))
    assert "## Release by group" in text and "| block |" in text and "| tract |" in text
    assert "The whole release: zcdp with rho = 1.0" in text
