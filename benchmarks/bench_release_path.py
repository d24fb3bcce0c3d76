"""The one release path costs nothing: ``noisy_block`` (the family's public ``release``,
vectorised over groups) against the old ``answers + sample()`` shortcut, same stream.

For each family of the release battery (its small spec), 1,000,000 groups released in
blocks of 65,536 (the batch layer's block size), best of 3. Prints the time of both paths
and their ratio (the shortcut is the baseline; it is *wrong* for the bounded generalized
Gaussian and James–Stein, whose own release logic it skips, and is timed only as the cost floor).

Run: python benchmarks/bench_release_path.py [--groups 1000000]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from test_release_battery import CASES, spec_for, true_answer  # noqa: E402

import dpopt  # noqa: E402
from dpopt.release.blocks import BLOCK_GROUPS, noisy_block  # noqa: E402
from dpopt.rng import random_source  # noqa: E402


def best(fn, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--groups", type=int, default=1_000_000)
    args = parser.parse_args()
    randomness = random_source(1, insecure_seed=True)
    print(f"{'family':22s} {'release (s)':>12s} {'answer+sample (s)':>18s} {'ratio':>6s}")
    for family in sorted(CASES):
        spec = spec_for(family)
        mechanism = dpopt.solve(spec).mechanism
        truth = true_answer(spec)

        def blocks(step):
            for b, start in enumerate(range(0, args.groups, BLOCK_GROUPS)):
                rows = min(BLOCK_GROUPS, args.groups - start)
                step(np.tile(truth, (rows, 1)), randomness.stream(0, b))

        new = best(lambda: blocks(lambda a, rng: noisy_block(mechanism, a, rng)))
        old = best(lambda: blocks(lambda a, rng: a + mechanism.sample(a.shape[0], rng)))
        print(f"{family:22s} {new:12.3f} {old:18.3f} {new / old:6.2f}")


if __name__ == "__main__":
    main()
