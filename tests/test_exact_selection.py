"""Exact sampling on the person-level paths with private keys (issue 39): the keep decisions' Bernoulli law by
enumeration of the words it reads, and the discrete Gaussian threshold's certificate."""

from __future__ import annotations

import copy
import itertools
import json
import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from dpopt.certificate.model import Certificate
from dpopt.noise.bernoulli import bernoulli_rational
from dpopt.selection.design import certify
from dpopt.selection.verify import verify_selection
from dpopt.spec.load import read_document


class _Exhausted(Exception):
    pass


class ScriptedWords:
    """A stand-in for numpy's Generator whose ``integers`` replays a fixed list of words (the enumeration below)."""

    def __init__(self, words: list[int]):
        self.words, self.used = list(words), 0

    def integers(self, low, high, size=None, dtype=None):
        count = 1 if size is None else size
        if self.used + count > len(self.words):
            raise _Exhausted
        out = self.words[self.used:self.used + count]
        self.used += count
        return np.array(out, dtype=np.uint64) if size is not None else np.uint64(out[0])


def enumerated_keep_probability(p: Fraction, bits: int, depth: int) -> tuple[Fraction, Fraction]:
    """P[keep] of one draw by enumerating every word sequence the sampler reads (each word uniform on 2^bits
    values), to ``depth`` words: (the probability of the sequences that end in a keep, the mass not yet decided)."""
    keep, pending = Fraction(0), Fraction(0)
    frontier = [[]]
    for level in range(1, depth + 1):
        grown = []
        for prefix in frontier:
            for w in range(1 << bits):
                words = prefix + [w]
                try:
                    decided = bool(bernoulli_rational(ScriptedWords(words), [p], np.array([0]), bits=bits)[0])
                except _Exhausted:
                    grown.append(words)
                    continue
                keep += Fraction(int(decided), 1 << (bits * level))
        frontier = grown
    pending = Fraction(len(frontier), 1 << (bits * depth))
    return keep, pending


@pytest.mark.parametrize("p, bits", [(Fraction(5, 16), 2), (Fraction(1, 3), 2), (Fraction(2, 7), 3),
                                     (Fraction(1e-10), 3), (Fraction(0), 2), (Fraction(1), 2)])
def test_keep_decision_law_is_exactly_p(p, bits):
    # the law of the sampler's output, enumerated over every sequence of words it can read: exactly p when the
    # expansion ends (5/16 = 0.0101 in binary: two 2-bit words), else within the undecided mass 2^{−bits·depth}
    keep, pending = enumerated_keep_probability(p, bits, depth=12)
    assert keep <= p <= keep + pending
    assert pending <= Fraction(1, 1 << (bits * 11))
    if p.denominator in (1, 16):
        assert pending == 0 and keep == p


# ------------------------------------------------------------------------ gaussian_threshold on the integers
SPEC = Path(__file__).resolve().parents[1] / "specs" / "visits_private_clinics.yaml"


def _gaussian_threshold_certificate() -> dict:
    raw = read_document(SPEC)
    raw["releases"][0] = {**raw["releases"][0], "selection": "gaussian_threshold"}
    return json.loads(certify(raw).to_json())


def test_discrete_gaussian_counts_privacy_loss_within_the_claim():
    # δ(ε) of N_ℤ(0, σ²)^g against the same shifted by every contribution v a person may make (≤ t rows in each of
    # ≤ g keys, ≤ R in all), by enumerating the product law on |y_i| ≤ 45σ (the rest below e^{−1000}): the
    # privacy loss of y is Σ_i (v_i² − 2v_i y_i)/(2σ²), δ(ε) = E_P[(1 − e^{ε − L})₊]
    data = _gaussian_threshold_certificate()
    block = data["releases"][0]
    sigma2, sens, noise = Fraction(block["noise"]["sigma2"]), block["sensitivity"], block["noise"]
    epsilon = float(Fraction(noise["epsilon"]))
    s2 = float(sigma2)
    top = int(45 * math.sqrt(s2))
    y = np.arange(-top, top + 1, dtype=float)
    pmf = np.exp(-y * y / (2 * s2))
    pmf /= pmf.sum()
    worst = 0.0
    assert sens["keys"] == 2
    for v in itertools.product(range(sens["per_key"] + 1), repeat=2):
        if sum(v) > sens["rows"] or not any(v):
            continue
        loss = [(vi * vi - 2 * vi * y) / (2 * s2) for vi in v]
        total = loss[0][:, None] + loss[1][None, :]
        worst = max(worst, float(np.sum(np.outer(pmf, pmf) * -np.expm1(np.minimum(0.0, epsilon - total)))))
    assert worst <= noise["delta"]
    assert worst > 0.5 * noise["delta"]  # the claim is not vacuous: the effective variance is tight to ~1e-4


@pytest.mark.parametrize("tamper, claims", [
    (lambda b: b["noise"].__setitem__("sigma2", str(Fraction(b["noise"]["sigma2"]) / 2)),
     {"recorded", "releases[0].noise"}),
    (lambda b: b["partition_selection"].__setitem__("threshold", b["partition_selection"]["threshold"] - 3),
     {"recorded", "releases[0].selection.delta"}),
])
def test_verify_rejects_a_forged_discrete_gaussian(tamper, claims):
    data = _gaussian_threshold_certificate()
    assert verify_selection(Certificate.from_dict(copy.deepcopy(data))).passed
    tamper(data["releases"][0])
    failed = {c.claim for c in verify_selection(Certificate.from_dict(data)).failed}
    assert claims <= failed
