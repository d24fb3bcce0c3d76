r"""The per-row table of a release with private keys and quantiles (``release.csv``): every published number with
its standard error, 95% margin of error and interval where the noise law gives one, and a note.

One row per released number, keyed by ``release`` and ``key`` (the private key, or the quantile's group):

- **counts** (``label`` ``count``): the noisy count c̃ = c + Y. With discrete Laplace noise of scale b
  (P[Y = y] = (1 − r)/(1 + r)·r^{|y|}, r = e^{−1/b}), SE = √(2r)/(1 − r) and the margin is the smallest
  integer m with P(|Y| > m) = 2r^{m+1}/(1 + r) ≤ 0.05, so [c̃ − m, c̃ + m] holds c with probability ≥ 95%
  **exactly** (a lattice law: at least, not about); with discrete Gaussian noise N_ℤ(0, σ²), SE = √Var and m the
  smallest integer with P(|Y| > m) ≤ 0.05 (the pmf summed). The interval is cut
  at 0 (a count is never negative: no coverage is lost). A key selected
  by a threshold was released *because* its noisy count reached τ: the interval is the unconditional one,
  and the note says so. A count within its margin of zero is flagged (the key may hold no rows).
- **means** (``label`` ``mean``): clip(m₀ + S̃/ñ, a, b) from the noisy centred sum S̃ = step·(S + L) (S the
  lattice sum, L discrete Laplace b_S in lattice steps) and the noisy count ñ = n + Y (discrete Laplace b_n). By
  the delta method, at the released (S̃, ñ), Var ≈ (step²·Var L + (S̃/ñ)²·Var Y)/ñ², Var = 2r/(1 − r)² for each:
  the interval mean ± z₀.₉₇₅·SE, cut to [a, b] (the true mean lies in [a, b], so cutting loses no coverage) is
  **approximate** (the note says so). When ñ is within the count's margin of zero the mean rests on noise alone:
  no SE, the interval is [a, b], and the note flags it (the rule reads only released numbers: post-processing).
- **quantiles** (``label`` ``q=…``): the exponential mechanism's draw has no law free of the data: no SE or
  interval; the note gives the certified bound on its expected rank error.

Everything here reads the released values and the certificate's public noise parameters only: it is
post-processing, spends no budget, and is the same on every run.
"""

from __future__ import annotations

import math
from fractions import Fraction
from statistics import NormalDist

from dpopt.noise.discrete_gaussian import DiscreteGaussianMarginal, discrete_gaussian_moments

LEVEL = 0.95
"""The level of every margin and interval of the table."""
Z = NormalDist().inv_cdf(1 - (1 - LEVEL) / 2)
"""z₀.₉₇₅ = 1.959963984540054."""
KEYS = ("release", "key")
"""The key columns of the table, before :data:`COLUMNS`."""
COLUMNS = ("label", "value", "standard_error", "margin_of_error_95", "ci_95_low", "ci_95_high", "note")
"""The columns after :data:`KEYS`, in the order ``release.csv`` writes them."""


def discrete_laplace_errors(scale: str | Fraction | float) -> tuple[float, int]:
    r"""(SE, 95% margin) of the discrete Laplace of scale b: √(2r)/(1 − r), and the smallest integer m with
    2r^{m+1}/(1 + r) ≤ 0.05 (r = e^{−1/b}; Canonne, Kamath & Steinke 2020, the law of their Algorithm 2)."""
    r = math.exp(-1.0 / float(Fraction(scale)))
    excess = 1 - LEVEL
    m = max(0, math.ceil(math.log(excess * (1 + r) / 2) / math.log(r)) - 1)
    while m > 0 and 2 * r ** m / (1 + r) <= excess:  # the closed form's rounding, either way
        m -= 1
    while 2 * r ** (m + 1) / (1 + r) > excess:
        m += 1
    return math.sqrt(2 * r) / (1 - r), m


def discrete_gaussian_errors(sigma2: str | Fraction) -> tuple[float, int]:
    """(SE, 95% margin) of N_ℤ(0, σ²): √Var, and the smallest integer m with P(|Y| > m) = 2P(Y > m) ≤ 0.05, from the
    pmf summed in float64 (:class:`~dpopt.noise.discrete_gaussian.DiscreteGaussianMarginal`)."""
    law = DiscreteGaussianMarginal(float(Fraction(sigma2)))
    m = 0
    while 2 * float(law.tail(m)) > 1 - LEVEL:
        m += 1
    return math.sqrt(discrete_gaussian_moments(law.sigma2)["second_moment"]), m


def _count_errors(noise: dict) -> tuple[float, int]:
    if noise["family"] == "discrete_gaussian":
        return discrete_gaussian_errors(noise["sigma2"])
    return discrete_laplace_errors(noise["scale"])


def _row(release: str, key: str, label: str, value, se=None, moe=None, low=None, high=None, note: str = "") -> dict:
    return dict(zip(KEYS + COLUMNS, (release, key, label, value, se, moe, low, high, note)))


def count_rows(out: dict, block: dict) -> list[dict]:
    """The rows of a count release (``out``: its part of the release document; ``block``: its certificate block)."""
    se, moe = _count_errors(block["noise"])
    threshold = block["partition_selection"].get("threshold")
    rows = []
    for key, value in out["values"].items():
        notes = []
        if key in out["selected"]:
            notes.append(f"selected: its noisy count reached the threshold τ = {threshold:.6g}; the interval does "
                         "not account for that selection" if threshold is not None else
                         "selected by partition selection (independent of the count's noise)")
        if abs(value) <= moe:
            notes.append("within its margin of zero: the key may hold no rows")
        rows.append(_row(out["name"], key, "count", value, se, moe, max(0, value - moe), value + moe,
                         "; ".join(notes)))
    return rows


def mean_rows(out: dict, block: dict) -> list[dict]:
    """The rows of a mean release (see the module: delta method, approximate; noise alone near ñ = 0)."""
    low, high = block["bounds"]
    noise_sum = block["noise"]["centred_sum"]
    sum_se = discrete_laplace_errors(noise_sum["scale"])[0] * float(Fraction(noise_sum["step"]))
    count_se, count_moe = discrete_laplace_errors(block["noise"]["count"]["scale"])
    rows = []
    for key, value in out["values"].items():
        pair = out["pairs"][key]
        n, s = pair["count"], pair["centered_sum"]
        if value is None or n <= count_moe:
            rows.append(_row(out["name"], key, "mean", value, None, None, low, high,
                             f"noisy count {n} within its margin of zero (±{count_moe}): the mean rests on noise "
                             "alone; interval [a, b], the attribute's bounds"))
            continue
        se = math.sqrt(sum_se**2 + (s / n) ** 2 * count_se**2) / n
        rows.append(_row(out["name"], key, "mean", value, se, Z * se, max(low, value - Z * se),
                         min(high, value + Z * se), "approximate interval (delta method at the noisy sum and count)"))
    return rows


def quantile_rows(out: dict, block: dict) -> list[dict]:
    """The rows of a quantile release: values only; the note gives the expected rank error bound."""
    bounds = {repr(p["q"]): bound for p, bound in zip(block["per_q"], block["utility"]["value"])}
    return [_row(out["name"], group, f"q={q}", value, note=f"exponential mechanism: expected rank error beyond the "
                 f"best grid point ≤ {bounds[q]:.4g} rows; no interval (its law depends on the data)")
            for group, draws in out["values"].items() for q, value in draws.items()]


_ROWS = {"count": count_rows, "mean": mean_rows, "quantile": quantile_rows}


def selection_cells(released: list[dict], blocks: list[dict]) -> dict:
    """The ``cells`` block of a selection release document: ``keys``, ``columns``, ``level``, ``errors`` (how),
    ``rows`` (one per released number, the releases in spec order)."""
    rows = [row for out, block in zip(released, blocks) for row in _ROWS[out["kind"]](out, block)]
    return {"level": LEVEL, "keys": list(KEYS), "columns": list(COLUMNS),
            "errors": "counts: exact 95% intervals from the noise law (discrete Laplace quantiles, or z·σ); means: "
                      "delta method (approximate); quantiles: none (see note); post-processing of released values",
            "rows": rows}
