"""The cost of exact sampling on the person-level paths with private keys and in synthesis's selection (issue 39).

Each exact sampler is timed (CPU time, best of three) against the floating-point draw it replaces, in the same run,
on the parameters of ``specs/visits_private_clinics.yaml``:

- the keep decisions of one padded block of 65,536 key slots (optimal selection): words against the rational π_n
  (``noise.bernoulli``) against ``random() < π_n``;
- the counts' noise of one block (``gaussian_threshold``): N_ℤ(0, σ²) against N(0, σ²), and the threshold τ on the
  integers against the continuous one (δ_new at the continuous σ, bisection to 10⁻⁴σ);
- the quantiles: 1,000 medians over the spec's 121 grid points (200 values), the exact exponential mechanism
  against inverting the softmax's CDF at a double-precision uniform;
- synthesis's selection: 1,000 draws over 91 candidate pairs (14 attributes) with the scores of a random table;
- the means: the certified standard deviation of a mean's numerator, lattice sum + discrete Laplace against the
  continuous Laplace of scale Rh/(ε/2).

Run: python benchmarks/bench_exact_selection.py
"""

from __future__ import annotations

import time
from fractions import Fraction
from pathlib import Path

import mpmath
import numpy as np

from dpopt.noise.bernoulli import bernoulli_rational
from dpopt.noise.discrete_gaussian import sample_discrete_gaussian
from dpopt.noise.exponential import sample_exponential
from dpopt.privacy import partition_selection as ps
from dpopt.privacy import quantile as qm
from dpopt.selection.design import certify
from dpopt.selection.timing import SLOTS
from dpopt.spec.load import read_document
from dpopt.synthesis.adaptive import SCORE_BITS, exact_epsilon

SPEC = Path(__file__).resolve().parents[1] / "specs" / "visits_private_clinics.yaml"


def cpu(run, repeat: int = 3) -> float:
    """Best CPU time of ``repeat`` runs."""
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        run()
        best = min(best, time.process_time() - start)
    return best


def line(what: str, exact: float, floating: float) -> None:
    print(f"{what:<58} exact {exact * 1e3:9.2f} ms   floating point {floating * 1e3:8.2f} ms   "
          f"ratio {exact / floating:7.1f}×")


def continuous_threshold(sigma: float, delta: float, rows: int, per_key: int, keys: int) -> float:
    """The least real τ (to 10⁻⁴σ) with δ_new ≤ δ·SAFETY under N(0, σ²) noise (the floating-point design)."""
    def excess(tau: float) -> float:
        return ps.new_keys_delta(lambda v: mpmath.ncdf((v - mpmath.mpf(tau)) / sigma), rows, per_key,
                                 keys)[0] - delta * ps.SAFETY

    low, high = float(per_key), float(per_key) + sigma
    while excess(high) > 0:
        low, high = high, per_key + 2 * (high - per_key)
    while high - low > 1e-4 * sigma:
        mid = (low + high) / 2
        low, high = (low, mid) if excess(mid) <= 0 else (mid, high)
    return high


def main() -> None:
    rng = np.random.default_rng(39)
    cert = certify(SPEC)
    count, quantile, mean = cert["releases"]

    pis = count["partition_selection"]["keep_probabilities"]
    users = rng.integers(0, len(pis), SLOTS)
    table = np.asarray(pis)
    line(f"keep decisions, {SLOTS:,} slots", cpu(lambda: bernoulli_rational(rng, pis, users)),
         cpu(lambda: rng.random(SLOTS) < table[users]))

    raw = read_document(SPEC)
    raw["releases"][0] = {**raw["releases"][0], "selection": "gaussian_threshold"}
    block = certify(raw)["releases"][0]
    sigma2, sens = Fraction(block["noise"]["sigma2"]), block["sensitivity"]
    sigma = block["noise"]["design_sigma"]
    line(f"gaussian_threshold counts, {SLOTS:,} slots (σ² = {float(sigma2):.2f})",
         cpu(lambda: sample_discrete_gaussian(rng, sigma2.numerator, sigma2.denominator, SLOTS)),
         cpu(lambda: rng.normal(0.0, sigma, SLOTS)))
    tau = continuous_threshold(sigma, block["partition_selection"]["delta"], sens["rows"], sens["per_key"],
                               sens["keys"])
    print(f"{'':<58} threshold τ = {block['partition_selection']['threshold']} (integers) against {tau:.2f} "
          f"(continuous); σ = {float(sigma2) ** 0.5:.5f} against {sigma:.5f}")

    per_q = quantile["per_q"][0]
    points = qm.grid(quantile["grid"]["low"], quantile["grid"]["high"], quantile["grid"]["step"])
    values = rng.uniform(0, 120, 200)
    scale, beta = Fraction(per_q["exact"]["scale"]), per_q["beta"]

    def float_medians():
        for _ in range(1000):
            u = -np.abs(np.searchsorted(np.sort(values), points, side="right") - 0.5 * len(values))
            p = np.exp(beta * (u - u.max()))
            cdf = np.cumsum(p / p.sum())
            points[min(int(np.searchsorted(cdf, rng.random() * cdf[-1], side="right")), len(points) - 1)]

    line(f"1,000 medians over {len(points)} grid points, one at a time",
         cpu(lambda: [qm.sample(values, points, 0.5, scale, rng) for _ in range(1000)], 1), cpu(float_medians, 1))

    pairs, epsilon = 91, exact_epsilon(0.2)
    q = rng.integers(0, 400, pairs) << SCORE_BITS
    lam = epsilon / (2 * 2**SCORE_BITS)
    line(f"synthesis selection, 1,000 draws over {pairs} pairs",
         cpu(lambda: [sample_exponential(q, lam, rng) for _ in range(1000)], 1),
         cpu(lambda: [int(np.argmax(float(lam) * q + rng.gumbel(size=pairs))) for _ in range(1000)], 1))

    noise = mean["noise"]["centred_sum"]
    step, b_sum = Fraction(noise["step"]), Fraction(noise["scale"])
    r = np.exp(-1 / float(b_sum))
    exact_sd = float(np.sqrt(2 * r) / (1 - r)) * float(step)
    continuous_sd = float(np.sqrt(2.0)) * 4 * float(Fraction(mean["sensitivity"]["half_width"])) / 0.5
    print(f"mean's centred sum: standard deviation {exact_sd:.9g} (discrete Laplace, {b_sum} steps of {step}) against "
          f"{continuous_sd:.9g} (Laplace 480): ratio {exact_sd / continuous_sd:.12f}")


if __name__ == "__main__":
    main()
