r"""Randomness for releases: a CSPRNG from OS entropy by default, seeds only on request.

Every noise draw of a release comes from **AES-128 in counter mode** (the
``randomgen.AESCounter`` bit generator: block i of the stream is AES-128 of the
counter i under the key, as NIST's CTR_DRBG; hardware AES instructions where the CPU
has them, which also run in constant time) wrapped in a numpy :class:`~numpy.random.Generator`,
so any family's sampler works unchanged. AES-CTR was preferred to ChaCha20 (also in
randomgen) for speed: with AES-NI its normal draws stay within 2x of numpy's own PCG64
rate, ChaCha20's did not on this machine (``benchmarks/bench_release.py`` prints both).

Streams are independent per block of groups: the stream at path ``(l, b)`` (grouping
column l, block b) is keyed by 128 bits of the state of the SeedSequence child
``SeedSequence(entropy, spawn_key=(l, b))``, which is ``root.spawn(L)[l].spawn(B)[b]``;
the root itself (path ``()``) serves a release without groups.
The root entropy is 256 bits from the operating system (:mod:`secrets`) unless a seed
is given; a seed makes every draw predictable to anyone who knows it, so it is refused
unless the caller says ``insecure_seed`` (tests and reproductions).

A seeded numpy ``PCG64`` (``default_rng(seed)``) is not used for releases: its state
can be recovered from its outputs. AES-CTR keyed with secret entropy cannot be
predicted without the key. Floating-point samplers remain *idealized numerics* (the
certificate says so); the discrete families sample exactly in integer arithmetic.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field

import numpy as np

from dpopt.errors import DpoptError

ENTROPY_BITS = 256
_POOL_WORDS = ENTROPY_BITS // 32


def _description() -> str:
    from randomgen import AESCounter  # imported where used, as below (start-up of `dpopt verify`)

    hardware = "AES-NI" if AESCounter(key=0).use_aesni else "software AES (no AES-NI on this CPU)"
    return (
        f"AES-128-CTR CSPRNG (randomgen.AESCounter, {hardware}), keys from 256 bits of OS entropy; "
        "one stream per (grouping column, block of groups) (numpy SeedSequence children)"
    )


class InsecureSeedError(DpoptError):
    """A fixed seed was given without explicitly accepting predictable noise."""


def aes_generator(key: int) -> np.random.Generator:
    """A Generator drawing AES-128(key, counter) for counters 0, 1, 2, … (128-bit ``key``)."""
    from randomgen import AESCounter

    return np.random.Generator(AESCounter(key=key, counter=0))


def secure_generator() -> np.random.Generator:
    """A fresh AES-CTR Generator keyed with 128 bits of OS entropy."""
    return aes_generator(secrets.randbits(128))


@dataclass(frozen=True)
class RandomSource:
    """Independent AES-CTR streams, one per path, from one root entropy.

    Attributes
    ----------
    seeded : bool
        True when the entropy is a caller's seed (insecure: predictable noise).
    """

    _entropy: int = field(repr=False)
    seeded: bool

    def stream(self, *path: int) -> np.random.Generator:
        """The Generator at ``path``: AES-CTR keyed by the SeedSequence descendant ``spawn_key=path``."""
        child = np.random.SeedSequence(
            self._entropy, spawn_key=tuple(int(i) for i in path), pool_size=_POOL_WORDS
        )
        low, high = (int(w) for w in child.generate_state(2, np.uint64))
        return aes_generator(low | high << 64)

    def describe(self) -> dict:
        """What a release document records about its randomness (never the secret entropy)."""
        if self.seeded:
            return {  # the seed itself is never published: the release minus its noise is the true answer
                "kind": "insecure_seed",
                "generator": "AES-128-CTR (randomgen.AESCounter) keyed from a caller's seed (numpy SeedSequence)",
                "warning": "a test release: the noise is predictable to anyone who knows the seed, which is not "
                           "published; not for production",
            }
        return {"kind": "csprng", "generator": _description()}


def random_source(seed: int | None = None, insecure_seed: bool = False) -> RandomSource:
    """The randomness of a release: OS entropy unless a seed is explicitly accepted.

    Parameters
    ----------
    seed : int, optional
        A non-negative integer; refused unless ``insecure_seed`` is True.
    insecure_seed : bool
        The caller accepts that a seeded release is predictable (tests, reproductions).

    Raises
    ------
    InsecureSeedError
        A seed without ``insecure_seed``, ``insecure_seed`` without a seed, or a negative seed.
    """
    if seed is None:
        if insecure_seed:
            raise InsecureSeedError(
                "--insecure-seed needs --seed N (without a seed the noise comes from the OS CSPRNG)"
            )
        return RandomSource(secrets.randbits(ENTROPY_BITS), seeded=False)
    if not insecure_seed:
        raise InsecureSeedError(
            "--seed makes the noise predictable to anyone who knows it; releases draw from the OS CSPRNG "
            "by default. Add --insecure-seed (Python: insecure_seed=True) for tests and reproductions only"
        )
    if int(seed) != seed or seed < 0:
        raise InsecureSeedError(f"--seed must be a non-negative integer (got {seed})")
    return RandomSource(int(seed), seeded=True)
