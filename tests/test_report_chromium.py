"""The HTML report in a real browser: headless Chromium loads it from a file (no network, a
fresh profile) and must lay out its tables and decode and show its images.

Two views: ``--dump-dom`` of a copy with a probe script appended (the report itself has no
script), which records what the browser rendered; and a ``--screenshot`` of the report as
is, which must contain the plots' colours. Skipped, with the reason, where no browser is
installed (``.ci/run`` installs Debian's ``chromium``).
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess

import numpy as np
import pytest
from solved_specs import SPECS, solved

from dpopt.certificate.report import build_report, render_html

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
BROWSER = next((shutil.which(b) for b in BROWSERS if shutil.which(b)), None)
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars"]

pytestmark = pytest.mark.skipif(
    BROWSER is None,
    reason="no Chromium or Chrome on PATH (Debian: apt-get install chromium; .ci/run installs it): "
           "the HTML report cannot be loaded in a browser here",
)

PROBE = """<script>
addEventListener('load', () => {
  const shown = e => { const r = e.getBoundingClientRect(); return r.width > 0 && r.height > 0; };
  document.body.setAttribute('data-probe', JSON.stringify({
    images: [...document.images].map(i => [i.complete, i.naturalWidth, i.naturalHeight, shown(i)]),
    tables: [...document.querySelectorAll('table')].map(t => [t.rows.length, shown(t)]),
    headings: [...document.querySelectorAll('h2')].map(h => h.textContent),
  }));
});
</script>"""
STEMS = ["table_3x3_margins_gdp", "r2dp_count_usefulness"]  # Semi-DP and R²DP


def _browse(tmp_path, *args) -> subprocess.CompletedProcess:
    return subprocess.run([BROWSER, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", *args],
                          capture_output=True, text=True, timeout=180, check=False)


@pytest.fixture(scope="module", params=STEMS)
def page(request, tmp_path_factory) -> tuple[str, str]:
    path = next(p for p in SPECS if p.stem == request.param)
    report = build_report(solved(path).certificate, audit_draws=5_000, utility_families="selected",
                          utility_scales=(0.5, 1.0, 2.0))
    folder = tmp_path_factory.mktemp(request.param)
    target = folder / "report.html"
    target.write_text(render_html(report), encoding="utf-8")
    return str(folder), target.read_text(encoding="utf-8")


def test_browser_lays_out_tables_and_decodes_images(page, tmp_path):
    _, text = page
    probe = tmp_path / "probe.html"
    probe.write_text(text.replace("</body>", PROBE + "</body>"), encoding="utf-8")
    result = _browse(tmp_path, "--virtual-time-budget=10000", "--dump-dom", probe.as_uri())
    found = re.search(r'data-probe="([^"]*)"', result.stdout)
    assert found, result.stderr[-2000:]
    seen = json.loads(html.unescape(found.group(1)))
    assert len(seen["images"]) == text.count("data:image/png;base64,") >= 4
    assert all(done and w >= 300 and h >= 250 and shown for done, w, h, shown in seen["images"])
    assert len(seen["tables"]) == text.count("<table>") >= 5
    assert all(rows >= 2 and shown for rows, shown in seen["tables"])
    assert {"The guarantee", "Sensitivity space", "Candidates compared", "Empirical audit"} <= set(seen["headings"])


def test_screenshot_shows_the_plots(page, tmp_path):
    from matplotlib import image

    folder, _ = page
    shot = tmp_path / "shot.png"
    _browse(tmp_path, "--window-size=1280,7000", f"--screenshot={shot}", f"file://{folder}/report.html")
    pixels = image.imread(shot)[:, :, :3]
    ink = np.mean((pixels < 0.9).any(axis=2))
    blue = np.all(np.abs(pixels - np.array([31, 119, 180]) / 255) < 0.06, axis=2).sum()  # the mechanism's curve
    red = np.all(np.abs(pixels - np.array([214, 39, 40]) / 255) < 0.06, axis=2).sum()  # the target's, the law's
    assert ink > 0.03 and blue > 500 and red > 200, (ink, blue, red)
