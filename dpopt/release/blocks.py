"""Noise block by block: groups of rank [bB, (b+1)B) of grouping column l from stream (l, b).

The single-machine release (:mod:`dpopt.release.batch`) and the Dask one
(:mod:`dpopt.release.distributed`) both add noise here, so a fixed seed gives bitwise
identical releases on either engine.
"""

from __future__ import annotations

import numpy as np

from dpopt.mechanisms import Mechanism
from dpopt.rng import RandomSource

BLOCK_GROUPS = 65_536
"""Groups per random stream: block b of a grouping column holds the groups of rank [bB, (b+1)B)."""


def noisy_block(mechanism: Mechanism, answers: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The family's release of each row of ``answers`` (n × d) from ``rng``: one call to the public
    :meth:`Mechanism.release`, the one release path. Integer noise keeps integer answers integer
    (int64; the float sum is exact below 2⁵³); a lattice sum or mean stays as released
    (:attr:`Mechanism.integer_release`)."""
    released = mechanism.release(answers, rng)
    if mechanism.integer_release:
        return np.rint(released).astype(np.int64)
    return released


def add_noise(
    mechanism: Mechanism, answers: np.ndarray, randomness: RandomSource, level: int, block: int = BLOCK_GROUPS
) -> np.ndarray:
    """The noisy answers of one grouping column: block b from stream (level, b); no loop per group."""
    integer = mechanism.integer_release
    out = np.empty(answers.shape, dtype=np.int64 if integer else float)
    for b, start in enumerate(range(0, answers.shape[0], block)):
        out[start : start + block] = noisy_block(
            mechanism, answers[start : start + block], randomness.stream(level, b)
        )
    return out
