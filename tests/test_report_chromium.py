"""The HTML report in a real browser: headless Chromium loads it from a file (no network, a
fresh profile) and must lay out its tables and decode and show its images.

Two views: ``--dump-dom`` of a copy with a probe script appended (the report itself has no
script), which records what the browser rendered; and a ``--screenshot`` of the report as
is, which must contain the plots' colours and, where the probe found the per-cell error table,
its text. Skipped where no browser is installed (``.ci/run`` installs Debian's ``chromium``), with a
warning in the default test output that says so.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
import warnings

import numpy as np
import pytest
from solved_specs import SPECS, solved

from dpopt.report.document import build_report
from dpopt.report.render import render_html

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
BROWSER = next((shutil.which(b) for b in BROWSERS if shutil.which(b)), None)
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars"]

NO_BROWSER = ("no Chromium or Chrome on PATH (Debian: apt-get install chromium; .ci/run installs it): "
              "the HTML report cannot be loaded in a browser here, so its browser tests are SKIPPED")
if BROWSER is None:  # a skip alone is one 's' in the default output; a warning is printed in full
    warnings.warn(NO_BROWSER, UserWarning, stacklevel=1)
pytestmark = pytest.mark.skipif(BROWSER is None, reason=NO_BROWSER)

PROBE = """<script>
addEventListener('load', () => {
  const shown = e => { const r = e.getBoundingClientRect(); return r.width > 0 && r.height > 0; };
  document.body.setAttribute('data-probe', JSON.stringify({
    images: [...document.images].map(i => [i.complete, i.naturalWidth, i.naturalHeight, shown(i)]),
    tables: [...document.querySelectorAll('table')].map(t => [t.rows.length, shown(t)]),
    headings: [...document.querySelectorAll('h2')].map(h => h.textContent),
    perCell: [...document.querySelectorAll('h2')].filter(h => h.textContent === 'Error of each cell').map(h => {
      let e = h.nextElementSibling;
      while (e && !e.querySelector('table')) e = e.nextElementSibling;
      const t = e.querySelector('table'), r = t.getBoundingClientRect();
      return {rows: [...t.rows].map(row => [...row.cells].map(c => c.textContent)),
              box: [r.left + scrollX, r.top + scrollY, r.width, r.height]};
    }),
  }));
});
</script>"""
STEMS = ["table_3x3_margins_gdp", "r2dp_count_usefulness", "table_3x4_margins_pure"]  # Semi-DP, R²DP, K-norm
WINDOW = (1280, 12000)


def _browse(tmp_path, *args) -> subprocess.CompletedProcess:
    return subprocess.run([BROWSER, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", *args],
                          capture_output=True, text=True, timeout=180, check=False)


@pytest.fixture(scope="module", params=STEMS)
def page(request, tmp_path_factory) -> tuple[str, str, dict]:
    path = next(p for p in SPECS if p.stem == request.param)
    report = build_report(solved(path).certificate, audit_draws=5_000, utility_families="selected",
                          utility_scales=(0.5, 1.0, 2.0))
    folder = tmp_path_factory.mktemp(request.param)
    target = folder / "report.html"
    target.write_text(render_html(report), encoding="utf-8")
    return str(folder), target.read_text(encoding="utf-8"), report.certificate.data


@pytest.fixture(scope="module")
def seen(page, tmp_path_factory) -> dict:
    """What the browser laid out: the probe's record of a copy of the page."""
    folder, text, _ = page
    probe = tmp_path_factory.mktemp("probe") / "probe.html"
    probe.write_text(text.replace("</body>", PROBE + "</body>"), encoding="utf-8")
    result = _browse(probe.parent, f"--window-size={WINDOW[0]},{WINDOW[1]}", "--virtual-time-budget=10000",
                     "--dump-dom", probe.as_uri())
    found = re.search(r'data-probe="([^"]*)"', result.stdout)
    assert found, result.stderr[-2000:]
    return json.loads(html.unescape(found.group(1)))


def test_browser_lays_out_tables_and_decodes_images(page, seen):
    _, text, _ = page
    assert len(seen["images"]) == text.count("data:image/png;base64,") >= 4
    assert all(done and w >= 300 and h >= 250 and shown for done, w, h, shown in seen["images"])
    assert len(seen["tables"]) == text.count("<table>") >= 5
    assert all(rows >= 2 and shown for rows, shown in seen["tables"])
    assert {"The guarantee", "Sensitivity space", "Candidates compared", "Empirical audit",
            "Error of each cell"} <= set(seen["headings"])


def test_browser_shows_each_cells_margin_of_error(page, seen):
    # the rows the browser laid out against the certificate's utility.per_cell, formatted as the report does
    _, _, cert = page
    cells = [c for c in cert["utility"]["per_cell"]["cells"] if c["standard_error"] is not None]
    (table,) = seen["perCell"]
    header, *rows = table["rows"]
    assert header[1:] == ["standard error", "95% margin of error"]
    shown = {row[0]: row[1:] for row in rows}
    if len(cells) > 1 and len({(round(c["standard_error"], 4), round(c["margin_of_error"], 4)) for c in cells}) == 1:
        c = cells[0]
        assert shown == {f"every released cell ({len(cells)} of {len(cells)})":
                         [f"{c['standard_error']:.3g}", f"± {c['margin_of_error']:.3g}"]}
    else:
        assert shown == {c["cell"]: [f"{c['standard_error']:.3g}", f"± {c['margin_of_error']:.3g}"] for c in cells}
        assert len(cells) == 1 or all("=" in label for label in shown)  # by cell, e.g. "tenure=owner, size=1"


def test_screenshot_shows_the_plots_and_the_per_cell_table(page, seen, tmp_path):
    from matplotlib import image

    folder, _, _ = page
    shot = tmp_path / "shot.png"
    _browse(tmp_path, f"--window-size={WINDOW[0]},{WINDOW[1]}", f"--screenshot={shot}", f"file://{folder}/report.html")
    pixels = image.imread(shot)[:, :, :3]
    ink = np.mean((pixels[:7000] < 0.9).any(axis=2))  # the first 7000 px: the page is shorter than the window
    blue = np.all(np.abs(pixels - np.array([31, 119, 180]) / 255) < 0.06, axis=2).sum()  # the mechanism's curve
    red = np.all(np.abs(pixels - np.array([214, 39, 40]) / 255) < 0.06, axis=2).sum()  # the target's, the law's
    assert ink > 0.03 and blue > 500 and red > 200, (ink, blue, red)
    # the per-cell table where the browser laid it out: inside the shot, with text and rules in it
    left, top, width, height = (int(round(v)) for v in seen["perCell"][0]["box"])
    assert top + height <= pixels.shape[0] and height >= 40
    region = pixels[top: top + height, left: left + width]
    dark = np.mean((region < 0.5).all(axis=2))  # glyphs (the table's rules are light grey)
    assert 0.01 < dark < 0.5, dark


# ------------------------------------------------------------- plan and hierarchy reports
EPSILON_PROBE = """<script>
addEventListener('load', () => {
  const h = [...document.querySelectorAll('h2')].find(h => h.textContent.includes('guarantee'));
  let e = h.nextElementSibling;
  while (e && !e.querySelector('table')) e = e.nextElementSibling;
  const t = e.querySelector('table'), r = t.getBoundingClientRect();
  document.body.setAttribute('data-probe', JSON.stringify({
    headings: [...document.querySelectorAll('h2')].map(h => h.textContent),
    tables: [...document.querySelectorAll('table')].map(t => t.rows.length),
    epsilon: {rows: [...t.rows].map(row => [...row.cells].map(c => c.textContent)),
              box: [r.left + scrollX, r.top + scrollY, r.width, r.height]},
  }));
});
</script>"""


@pytest.fixture(scope="module", params=["plan", "hierarchy"])
def composed_page(request, tmp_path_factory) -> tuple:
    """The HTML report of the survey plan's certificate, or of a hierarchical release's, written by ``dpopt report``."""
    from dpopt.cli import main

    root = SPECS[0].parents[1]
    folder = tmp_path_factory.mktemp(request.param)
    if request.param == "plan":
        assert main(["solve", str(root / "specs" / "survey_plan_zcdp.yaml"), "--out", str(folder), "--quiet"]) == 0
    else:
        assert main(["release", str(root / "specs" / "hierarchy_topdown_zcdp.yaml"), "--data",
                     str(root / "specs" / "data" / "hierarchy.csv"), "--out", str(folder), "--seed", "1",
                     "--insecure-seed", "--error-draws", "5"]) == 0
    assert main(["report", str(folder / "certificate.json"), "--out", str(folder / "report.html")]) == 0
    cert = json.loads((folder / "certificate.json").read_text())
    return folder, (folder / "report.html").read_text(encoding="utf-8"), cert


def test_plan_and_hierarchy_reports_in_the_browser(composed_page, tmp_path):
    from matplotlib import image

    folder, text, cert = composed_page
    probe = tmp_path / "probe.html"
    probe.write_text(text.replace("</body>", EPSILON_PROBE + "</body>"), encoding="utf-8")
    result = _browse(tmp_path, f"--window-size={WINDOW[0]},{WINDOW[1]}", "--virtual-time-budget=10000", "--dump-dom",
                     probe.as_uri())
    seen = json.loads(html.unescape(re.search(r'data-probe="([^"]*)"', result.stdout).group(1)))
    assert {"Error of each cell", "Checks"} <= set(seen["headings"]) and all(n >= 2 for n in seen["tables"])
    # the ε per δ table the browser laid out is the certificate's, one ε per δ
    header, *rows = seen["epsilon"]["rows"]
    assert header[:2] == ["δ", "ε of the whole release"]
    assert {r[0]: r[1] for r in rows} == {d: f"{e:.6g}" for d, e in cert["guarantee"]["epsilon_at_delta"].items()}
    shot = tmp_path / "shot.png"
    _browse(tmp_path, f"--window-size={WINDOW[0]},{WINDOW[1]}", f"--screenshot={shot}", f"file://{folder}/report.html")
    pixels = image.imread(shot)[:, :, :3]
    left, top, width, height = (int(round(v)) for v in seen["epsilon"]["box"])
    assert top + height <= pixels.shape[0] and height >= 40
    dark = np.mean((pixels[top: top + height, left: left + width] < 0.5).all(axis=2))  # the table's glyphs
    assert 0.01 < dark < 0.5, dark
