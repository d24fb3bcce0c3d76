"""Means per private key (``kind: mean`` of a spec with ``releases``), on the keys a count release released.

Expected values come from (a) brute-force enumeration written here: every allowed set of one person's
rows over three keys and three values (the bounds' extremes and an inner value), its stacked vector
(Σ(x − m), rows) per key computed from its definition, the largest l1 and the largest privacy loss
Σ|S_j|/b_S + n_j/b_n taken over all of them; (b) exact means of a data set written here whose persons are
within the bounds (no truncation), against the release at a large ε (tolerance derived in the test);
(c) the released keys of the count release of the same run. The CLI cycle solve/verify/release/report
with the mean is in ``tests/test_selection.py``.
"""

from __future__ import annotations

import itertools
import json
from fractions import Fraction
from pathlib import Path

import pytest

from dpopt.rng import random_source
from dpopt.selection.design import certify
from dpopt.selection.release import release_selection
from dpopt.spec.load import read_document
from test_person_level import write_csv

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "specs" / "visits_private_clinics.yaml"
MEAN = 2  # the index of the mean release in SPEC


def spec_with(unit: dict, low: float, high: float, epsilon: float = 0.5) -> dict:
    raw = read_document(SPEC)
    raw["data"]["privacy_unit"] = {"id": "person_id", **unit}
    raw["data"]["attributes"]["duration"] = {"min": low, "max": high}
    raw["releases"][MEAN]["epsilon"] = epsilon
    raw["privacy"]["approx"]["epsilon"] = 1.5 + epsilon
    return raw


def brute_force(unit: dict, values: list[Fraction], keys: int = 3) -> list[tuple[tuple[Fraction, int], ...]]:
    """Every allowed contribution of one person: per key a multiset of values (≤ c rows), ≤ g keys, ≤ k rows."""
    k, g, c = unit.get("max_rows"), unit.get("max_groups"), unit.get("max_rows_per_group")
    most = min(n for n in (k, None if c is None or g is None else c * g, None if c is None else c * keys)
               if n is not None)
    per_key = [combo for size in range(min(c or most, most) + 1)
               for combo in itertools.combinations_with_replacement(values, size)]
    out = []
    for rows in itertools.product(per_key, repeat=keys):
        used = sum(1 for r in rows if r)
        total = sum(len(r) for r in rows)
        if (g is None or used <= g) and (k is None or total <= k):
            out.append(tuple((sum(rows[j], Fraction(0)), len(rows[j])) for j in range(keys)))
    return out


@pytest.mark.parametrize("unit, low, high", [
    ({"max_rows": 4, "max_groups": 2, "max_rows_per_group": 3}, 0, 120),
    ({"max_rows": 3, "max_rows_per_group": 2}, -1, 3),
    ({"max_groups": 2, "max_rows_per_group": 2}, -5, -1),
    ({"max_rows": 2}, 0.5, 2.5),
])
def test_sensitivity_and_privacy_loss_against_brute_force(unit, low, high):
    cert = certify(spec_with(unit, low, high))
    block = cert["releases"][MEAN]
    assert cert.passed
    a, b = Fraction(repr(low)), Fraction(repr(high))
    m = (a + b) / 2
    contributions = brute_force(unit, [a - m, (3 * a + b) / 4 - m, b - m])
    l1 = max(sum(abs(s) + n for s, n in v) for v in contributions)
    step = Fraction(block["noise"]["centred_sum"]["step"])  # the sums' lattice: these values lie on it
    assert all(s % step == 0 for v in contributions for s, _ in v)
    scale_sum = Fraction(block["noise"]["centred_sum"]["scale"])  # in lattice steps
    scale_count = Fraction(block["noise"]["count"]["scale"])
    loss = max(sum(abs(s) / step / scale_sum + n / scale_count for s, n in v) for v in contributions)
    assert Fraction(block["sensitivity"]["l1"]) == l1
    assert loss == Fraction("0.5")  # the privacy loss of the two Laplace noises reaches ε exactly, never above


def test_means_of_unbounded_persons_at_a_large_epsilon(tmp_path):
    # 40 persons, each with 1 row in north and 1 in south (within k = 4, g = 2, c = 3: nothing is dropped), so the
    # true means are those written here. ε = 1000: b_S = R·h/(ε/2) = 4·60/500 = 0.48, b_n = 4/500 = 0.008; the
    # count's noise is non-zero with probability 2r/(1 + r) < 1e-50 (r = e^{−125}), and |Z_S| > 20·b_S = 9.6 with
    # probability below e^{−20} (discrete Laplace on the lattice 2⁻¹⁴ℤ, whose rounding moves a value by ≤ 2⁻¹⁵):
    # each mean is within 9.6/40 + 2⁻¹⁵ < 0.24 of the truth
    rows = [(f"P{p}", "18-39", "north", 10 + p) for p in range(40)]
    rows += [(f"P{p}", "18-39", "south", 100 - p) for p in range(40)]
    path = write_csv(tmp_path / "d.csv", rows)
    raw = read_document(SPEC)
    raw["releases"][MEAN]["epsilon"] = 1000.0
    raw["privacy"]["approx"]["epsilon"] = 1001.5
    _, document, _ = release_selection(raw, path, random_source(8, insecure_seed=True))
    means = document["releases"][MEAN]["values"]
    assert list(means) == ["north", "south", "airport"]
    assert means["north"] == pytest.approx(10 + 39 / 2, abs=0.24)
    assert means["south"] == pytest.approx(100 - 39 / 2, abs=0.24)
    assert document["releases"][MEAN]["pairs"]["airport"]["count"] == 0 and means["airport"] is None


def test_a_key_not_selected_is_not_in_the_means(tmp_path):
    # "big" has 200 users: π_200 = 1 (π_n = 1 from n = 101 at ε′ = 0.25, δ′ = 5e-7, a table checked against
    # google's closed form by the certificate), so it is
    # released by both; "lone-…" keys have 1 user each: kept with probability π_1 = δ′ = 5e-7 each
    rows = [(f"B{p}", "18-39", "big", 30) for p in range(200)]
    rows += [(f"L{p}", "18-39", f"lone-{p}", 90) for p in range(30)]
    path = write_csv(tmp_path / "d.csv", rows)
    _, document, _ = release_selection(SPEC, path, random_source(9, insecure_seed=True))
    counts, means = document["releases"][0], document["releases"][MEAN]
    assert counts["selected"] == ["big"]
    assert list(means["values"]) == ["north", "south", "airport", "big"]
    assert "lone-" not in json.dumps(document)
