"""Utility at equal privacy (Liu 2019, §3): tails, equal-tail ε, dispersion, pDP vs (ε, δ)-DP scales.

Expected values: the digest (``papers/002_generalized_gaussian.md`` §6–7, §9.2 cases 10–12),
and closed-form limits derived there.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

import dpopt
from dpopt.design.equal_privacy import (
    equal_privacy_table,
    equal_tail_epsilon,
    equal_tail_ratio_limit,
    lemma11_threshold,
    meaningful,
    pdp_to_classical_ratio,
    tail_ratio,
    variance_ratio,
    variance_ratio_threshold,
)


def test_lemma11():
    # digest §6: 2Φ(−√2) = 0.157299; ratios at δ = 0.01 … 0.25; exact thresholds δ*(ε)
    assert lemma11_threshold() == pytest.approx(0.157299, abs=1e-6)
    expected = {
        0.1: [3.367263, 1.970412, 1.402326, 1.050848, 0.870469, 0.710773],
        1.0: [3.801005, 2.394629, 1.818401, 1.458594, 1.272054, 1.105096],
        2.0: [4.258746, 2.832467, 2.241226, 1.867580, 1.671633, 1.494356],
    }
    for eps, row in expected.items():
        got = [variance_ratio(eps, d) for d in (0.01, 0.05, 0.1, 0.157, 0.2, 0.25)]
        np.testing.assert_allclose(got, row, atol=1e-6)
    for eps, threshold in ((0.1, 0.167938), (0.5, 0.215925), (1.0, 0.288844), (2.0, 0.479500)):
        assert variance_ratio_threshold(eps) == pytest.approx(threshold, abs=1e-6)
        assert variance_ratio(eps, variance_ratio_threshold(eps)) == pytest.approx(
            1.0, abs=1e-12
        )  # exact threshold


@pytest.mark.parametrize(
    "eps, delta, minimum, at, back",
    [
        (1.0, 0.05, 0.270846, 3.9169, 7.6408),
        (0.1, 0.10, 0.582351, 19.8349, 38.6859),
        (2.0, 0.20, 0.478516, 1.2521, 2.4414),
    ],
)
def test_fig4_tail_ratio(eps, delta, minimum, at, back):
    # digest §7 Fig. 4 table (t grid step 1e-4, Δ = 1)
    t = np.arange(1, 600_001) * 1e-4
    ratio = tail_ratio(t, eps, delta)
    i = int(np.argmin(ratio))
    assert ratio[i] == pytest.approx(minimum, abs=1e-6)
    assert t[i] == pytest.approx(at, abs=2e-4)
    crossing = t[i:][np.argmax(ratio[i:] >= 1.0)]
    assert crossing == pytest.approx(back, abs=2e-4)
    assert tail_ratio(1e-9, eps, delta) == pytest.approx(1.0, abs=1e-6)  # both tails are 1 at t = 0


def test_fig4_gray_region():
    # ε = 1, δ = 0.01: non-gray up to t = 10.7270 (digest §7), where the Gaussian tail reaches 1e-4
    assert meaningful(10.72, 1.0, 0.01) and not meaningful(10.74, 1.0, 0.01)


def test_fig5_equal_tail_epsilon():
    # digest §9.2 case 12 and the §7 Fig. 5 table
    assert equal_tail_epsilon(1.0, 1.0, 0.05) == pytest.approx(2.170262, abs=1e-6)
    assert equal_tail_ratio_limit(1.0, 0.05) == pytest.approx(
        math.pi / 4 + 1.959964 * math.sqrt(math.pi / 2), abs=1e-6
    )
    assert equal_tail_epsilon(1e-6, 1.0, 0.05) == pytest.approx(equal_tail_ratio_limit(1.0, 0.05), rel=1e-5)
    assert equal_tail_epsilon(5.0 / 2.0, 2.0, 0.10) / 2.0 == pytest.approx(1.185016, abs=1e-6)
    assert equal_tail_epsilon(9.21 / 0.1, 0.1, 0.01) / 0.1 == pytest.approx(1.097010, abs=1e-5)
    # where ε₂ = ε₁ the tails match: the Fig. 5 crossing is the Fig. 4 one (ε = 1, δ = 0.05: t = 7.6408)
    assert equal_tail_epsilon(7.6408, 1.0, 0.05) == pytest.approx(1.0, abs=1e-4)


def test_fig3_pdp_over_classical_ratio():
    # digest §4.4 table column σ_pDP/σ_aDP, and §7: the ratio lies in [0.504, 0.910] and is < 1 on the grid
    assert pdp_to_classical_ratio(0.1, 0.01) == pytest.approx(0.835104, abs=1e-6)
    assert pdp_to_classical_ratio(0.5, 0.25) == pytest.approx(0.745375, abs=1e-6)
    grid = [
        pdp_to_classical_ratio(e, d)
        for e in np.linspace(0.01, 0.99, 50)
        for d in np.linspace(0.001, 0.499, 50)
    ]
    assert min(grid) == pytest.approx(0.504263, abs=1e-5) and max(grid) == pytest.approx(0.909484, abs=1e-5)


def test_equal_privacy_table():
    table = equal_privacy_table(1.0, 0.05, t=3.0)
    # digest §7 experiment table (ε = 1, δ = 0.05): E|e| Laplace 1, Gaussian-pDP 1.7461, GGM-3 2.3567 (sd 2.8486)
    assert table["laplace"]["mean_abs"] == 1.0 and table["laplace"]["tail"] == pytest.approx(math.exp(-3))
    assert table["gaussian_pdp"]["mean_abs"] == pytest.approx(1.7461, abs=1e-4)
    assert table["gg3_pdp"]["mean_abs"] == pytest.approx(2.3567, abs=1e-4)
    assert math.sqrt(table["gg3_pdp"]["variance"]) == pytest.approx(2.8486, abs=1e-4)
    sigma = table["gaussian_pdp"]["scale"] / math.sqrt(2)
    assert table["gaussian_pdp"]["tail"] == pytest.approx(2 * stats.norm.sf(3.0 / sigma), rel=1e-12)
    if "staircase" in dpopt.registry():
        # Geng & Viswanath (2016): at ε = 1, Δ = 1, the l1-optimal staircase has E|X| = e^{ε/2}/(e^ε − 1),
        # the l2-optimal one E X² = (2^{-2/3} b^{2/3} (1 + b)^{2/3} + b)/(1 − b)², b = e^{−ε}; both beat Laplace
        b = math.exp(-1.0)
        assert table["staircase"]["mean_abs"] == pytest.approx(math.exp(0.5) / (math.e - 1), rel=1e-9)
        l2_optimal = (2 ** (-2 / 3) * b ** (2 / 3) * (1 + b) ** (2 / 3) + b) / (1 - b) ** 2
        assert table["staircase"]["variance"] == pytest.approx(l2_optimal, rel=1e-9)
        assert table["staircase"]["mean_abs"] < table["laplace"]["mean_abs"]
        assert table["staircase"]["variance"] < table["laplace"]["variance"]
    else:
        assert "staircase" not in table
