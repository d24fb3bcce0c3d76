"""dpopt against OpenDP on the person-level visits (``benchmarks/compare_opendp_person.py``).

Skipped when OpenDP (with polars) is not installed: ``pip install 'dpopt[compare]'``; marked slow (about a
minute: OpenDP searches each scale by bisection). The reference values are OpenDP's own ``summarize`` scales
on the same data, bounds and budget; dpopt's are checked against them (at most theirs) and against the
closed forms worked by hand in the comments.
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

pytest.importorskip("opendp")
pytest.importorskip("polars")

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "compare_opendp_person.py"


@pytest.fixture(scope="module")
def compare():
    spec = importlib.util.spec_from_file_location("compare_opendp_person", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_noise_scales_at_most_opendps(compare):
    rows = {name.split(",")[0] + name.split(",")[1][:4]: (ours, theirs) for name, ours, theirs in compare.comparison()}
    for name, (ours, theirs) in rows.items():
        assert ours <= theirs * (1 + 1e-9)
    # sums per clinic through --group-by at the whole ρ = 0.5: the stacked clinics' sums move by
    # 120·√(3² + 1²) (≤ 3 rows in a clinic, ≤ 2 clinics, ≤ 4 rows), σ = 120·√10 ≈ 379.5; OpenDP's
    # 120·min(k, c√g) = 480 (the composition over 2 clinics gave 360/√0.5 ≈ 509.1)
    assert rows["sums per clinic rho"] == pytest.approx((120 * math.sqrt(10), 480.0), rel=1e-6)
    # counts per clinic: the same with 1 for 120 (σ = √10 against 4); ε = 1: the stacked l1 = min(k, c·g) = 4,
    # per clinic min(k, c) = 3 released at ε = 3/4, Laplace scale 4 for both
    assert rows["counts per clinic rho"] == pytest.approx((math.sqrt(10), 4.0), rel=1e-6)
    assert rows["counts per clinic eps"] == pytest.approx((4.0, 4.0), rel=1e-6)
    # counts per cell, ρ = 0.5: dpopt σ = l2 / √(2ρ) = √(3² + 1²) = √10 (greedy filling, k = 4, c = 3);
    # OpenDP's bound min(k, c√g) = min(4, 3√2) = 4
    ours, theirs = rows["counts per cell rho"]
    assert ours == pytest.approx(math.sqrt(10), rel=1e-9) and theirs == pytest.approx(4.0, rel=1e-6)
    # ε = 1: both l1 = min(k, c·g) = 4, the Laplace scale 4
    assert rows["counts per cell eps"] == pytest.approx((4.0, 4.0), rel=1e-6)
