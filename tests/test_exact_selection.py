"""Exact sampling on the person-level paths with private keys and in synthesis's adaptive selection (issue 39): the
keep decisions' Bernoulli law by enumeration of the words it reads, the discrete Gaussian threshold's privacy loss
and certificate, and the exponential mechanism's law by enumeration of its rejection loop."""

from __future__ import annotations

import copy
import itertools
import json
import math
from fractions import Fraction
from pathlib import Path

import mpmath
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


# ------------------------------------------------------------------ synthesis: the exponential mechanism, exact
class ScriptedBatches:
    """Stands in for the Generator and the Bernoulli(exp(−γ)) sampler of :mod:`dpopt.noise.exponential`: replays
    scripted proposals and acceptance patterns, and records the weight of the script (each proposal 1/c, each
    acceptance e^{−γ} or 1 − e^{−γ} at the γ the code passed, in 40 digits)."""

    def __init__(self, script, c):
        self.script, self.c, self.used = list(script), c, 0
        self.weight = mpmath.mpf(1)

    def integers(self, low, high, size=None, dtype=None):
        assert (low, high, size) == (0, self.c, (1, self.c))  # one draw, c proposals a round
        if self.used == len(self.script):
            raise _Exhausted
        self.weight /= mpmath.mpf(self.c) ** self.c
        return np.array([self.script[self.used][0]])

    def bernoulli(self, rng, whole, frac, den):
        pattern = self.script[self.used][1]
        self.used += 1
        for w, f, a in zip(whole.ravel(), frac.ravel(), pattern):
            p = mpmath.exp(-(mpmath.mpf(int(w)) + mpmath.mpf(int(f)) / den))
            self.weight *= p if a else 1 - p
        return np.array([pattern], dtype=bool)


def test_exponential_mechanism_law_by_enumerating_its_rejection_loop(monkeypatch):
    # every script of ≤ 2 batches (proposals × acceptances) the loop can read, weighted by its probability: the
    # law of the output given that it is decided within them must be the softmax exp(ε′q_i/(2·2^K Δ))/Σ, computed
    # here from the scores alone (the batches are i.i.d., so the decided law is the same at every depth)
    from dpopt.noise import exponential
    from dpopt.synthesis import adaptive

    with mpmath.workdps(40):
        q, epsilon, sensitivity = [5 << adaptive.SCORE_BITS, 3 << adaptive.SCORE_BITS, 0], Fraction(3, 4), 2
        c = len(q)
        batches = [(prop, pat) for prop in itertools.product(range(c), repeat=c)
                   for pat in itertools.product((0, 1), repeat=c)]
        rejecting = [b for b in batches if not any(b[1])]
        law, undecided = [mpmath.mpf(0)] * c, mpmath.mpf(0)
        for script in [[b] for b in batches] + [[r, b] for r in rejecting for b in batches]:
            fake = ScriptedBatches(script, c)
            monkeypatch.setattr(exponential, "bernoulli_exp_split", fake.bernoulli)
            try:
                i = adaptive.exponential_mechanism(q, epsilon, sensitivity, fake)
            except _Exhausted:
                if len(script) == 2:
                    undecided += fake.weight
                continue
            law[i] += fake.weight
        weights = [mpmath.exp(mpmath.mpf(epsilon.numerator) / epsilon.denominator * s / (2 * sensitivity * 2**10))
                   for s in q]
        softmax = [w / mpmath.fsum(weights) for w in weights]
        assert abs(mpmath.fsum(law) + undecided - 1) < mpmath.mpf(10) ** -30
        for got, want in zip(law, softmax):
            assert abs(got / (1 - undecided) - want) < mpmath.mpf(10) ** -30


def test_integer_scores_move_by_at_most_the_sensitivity():
    # neighbours (one record added to a cell of a 2 × 3 table): the integer score moves by ≤ 2^K·Δ, Δ = 1 — checked
    # on every cell and on a prediction with fractional entries
    from dpopt.synthesis.adaptive import SCORE_BITS, scores

    one_way = {"a": np.array([3.3, 5.1]), "b": np.array([2.2, 4.0, 2.2])}
    table = np.array([[1, 0, 2], [0, 3, 2]], dtype=float)
    base = scores({("a", "b"): table}, one_way, [("a", "b")])[0]
    for cell in itertools.product(range(2), range(3)):
        moved = table.copy()
        moved[cell] += 1
        assert abs(scores({("a", "b"): moved}, one_way, [("a", "b")])[0] - base) <= 1 << SCORE_BITS


def test_exponential_mechanism_privacy_loss_on_neighbours():
    # three candidate pairs over attributes a, b, c; a record added to one cell of each true table (every choice of
    # cells): the softmax laws at ε′ (40 digits, from the integer scores) differ by at most e^{ε′} ≤ e^ε, both ways
    from dpopt.synthesis.adaptive import exact_epsilon, scores

    one_way = {"a": np.array([3.3, 5.1]), "b": np.array([2.2, 4.0]), "c": np.array([1.5, 6.5])}
    pairs = [("a", "b"), ("a", "c"), ("b", "c")]
    truth = {("a", "b"): np.array([[1.0, 2], [3, 2]]), ("a", "c"): np.array([[0.0, 4], [1, 3]]),
             ("b", "c"): np.array([[2.0, 0], [2, 4]])}
    epsilon = exact_epsilon(0.7)
    assert epsilon <= Fraction(0.7)

    def law(q):
        with mpmath.workdps(40):
            w = [mpmath.exp(mpmath.mpf(epsilon.numerator) / epsilon.denominator * s / 2**11) for s in q]
            return [x / mpmath.fsum(w) for x in w]

    base = law(scores(truth, one_way, pairs))
    worst = 0.0
    for cells in itertools.product(itertools.product(range(2), range(2)), repeat=3):  # the record's cell per table
        moved = {p: t.copy() for p, t in truth.items()}
        for p, cell in zip(pairs, cells):
            moved[p][cell] += 1
        other = law(scores(moved, one_way, pairs))
        worst = max(worst, max(float(abs(mpmath.log(x / y))) for x, y in zip(base, other)))
    assert 0 < worst <= float(epsilon)


@pytest.mark.parametrize("tamper, claims", [
    (lambda b: b["noise"]["centred_sum"].__setitem__("scale", str(Fraction(b["noise"]["centred_sum"]["scale"]) / 2)),
     {"recorded", "releases[2].epsilon"}),
    (lambda b: b["sensitivity"].__setitem__("lattice_half_width", b["sensitivity"]["lattice_half_width"] // 2),
     {"recorded", "releases[2].sensitivity"}),
    (lambda b: b["noise"]["centred_sum"].__setitem__("step", "1/8192"), {"recorded", "releases[2].epsilon"}),
])
def test_verify_rejects_a_forged_mean_lattice(tamper, claims):
    data = json.loads(certify(SPEC).to_json())
    tamper(data["releases"][2])
    failed = {c.claim for c in verify_selection(Certificate.from_dict(data)).failed}
    assert claims <= failed


def test_a_half_width_off_the_lattice_is_rounded_outward():
    # bounds [0, 0.3]: h = 3/20; k = 20 − ⌈log₂ 0.15⌉ = 22 (0.15 = 2⁻²·0.6), H = ⌈0.15·2²²⌉ = ⌈629145.6⌉ = 629146
    raw = read_document(SPEC)
    raw["data"]["attributes"]["duration"] = {"min": 0, "max": 0.3}
    cert = certify(raw)
    block = cert["releases"][2]
    assert cert.passed
    assert block["sensitivity"]["lattice_step"] == "1/4194304" and block["sensitivity"]["lattice_half_width"] == 629146
    assert Fraction(block["noise"]["centred_sum"]["scale"]) == 4 * 629146 / Fraction(1, 2)  # R·H/(ε/2)


def test_a_large_sigma_is_certified_by_zcdp():
    # ε = 0.0001 on the counts: the continuous σ (3,089 at ε = 0.003, growing like 1/ε as ε → 0) has σ² far above
    # the GDP slope's certified 2²⁸ (σ = 16,384); the noise is then certified by ρ = Δ₂²/(2σ²) (CKS Thm 14) and the
    # CKS conversion, and a halved σ² fails
    raw = read_document(SPEC)
    raw["releases"][0] = {**raw["releases"][0], "selection": "gaussian_threshold", "epsilon": 0.0001}
    raw["privacy"]["approx"]["epsilon"] = 1.5001
    data = json.loads(certify(raw).to_json())
    noise = data["releases"][0]["noise"]
    assert noise["route"] == "zcdp" and Fraction(noise["sigma2"]) > 2**28
    assert verify_selection(Certificate.from_dict(copy.deepcopy(data))).passed
    noise["sigma2"] = str(Fraction(noise["sigma2"]) / 2)
    assert {"recorded", "releases[0].noise"} <= {c.claim for c in verify_selection(Certificate.from_dict(data)).failed}
