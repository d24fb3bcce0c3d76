"""The draw stage of a count release with private keys does the same work whatever the number of keys (issue 35).

The running time of ``laplace_threshold`` revealed the number of candidate keys (one noise draw per key found in
the data). The release now draws and compares over whole blocks of padded slots (:mod:`dpopt.selection.timing`).
The test releases two data sets, one undeclared key and 300, with the same seed, and records every call the count
release makes on its draw streams (method and sizes, through a spy around the CSPRNG's generators): the two call
sequences must be equal (the same requests of the same sizes from the same streams give the same work; the
sampler's inner rejection loops depend on the seed, not on the data), and the noise is drawn for the d declared
keys and one block of :data:`~dpopt.selection.timing.SLOTS` slots. The released values are then checked to belong
to the keys they name (a padded slot never becomes a key).
"""

from __future__ import annotations

import numpy as np
import pytest

from dpopt.rng import random_source
from dpopt.selection.design import certify
from dpopt.selection.release import DRAWS, release_selection
from dpopt.selection.timing import SLOTS, TIMING, padded_slots
from dpopt.selection.verify import verify_selection
from test_person_level import write_csv

SPEC = {
    "dpopt": 1, "name": "visits per clinic", "adjacency": "add_remove",
    "data": {"attributes": {"age_group": ["0-17", "18-39"], "clinic": {"keys": "private", "declared": ["north"]},
                            "duration": {"min": 0, "max": 120}},
             "privacy_unit": {"id": "person_id", "max_rows": 2, "max_groups": 1}},
    "releases": [{"name": "visits", "kind": "count", "by": "clinic", "epsilon": 1.0, "delta": 1e-6}],
    "privacy": {"approx": {"epsilon": 1.0, "delta": 1e-6}},
}


class _Spy:
    """A generator that records each call of its methods: (name, sizes) with the sizes of array arguments and the
    ``size`` given."""

    def __init__(self, generator, calls: list):
        self._generator, self._calls = generator, calls

    def __getattr__(self, name):
        attribute = getattr(self._generator, name)
        if not callable(attribute):
            return attribute

        def call(*args, **kwargs):
            sizes = [np.shape(a) for a in args if isinstance(a, np.ndarray)] + [kwargs.get("size", args[-1:])]
            self._calls.append((name, repr(sizes)))
            return attribute(*args, **kwargs)
        return call


class _Recording:
    """A RandomSource whose draw streams of the first release are spied on."""

    def __init__(self, source):
        self.source, self.calls = source, []

    def stream(self, *path):
        generator = self.source.stream(*path)
        return _Spy(generator, self.calls) if path[:2] == (DRAWS, 0) else generator

    def describe(self):
        return self.source.describe()


def _release(tmp_path, selection: str, undeclared: int):
    rows = [(f"P{p}", "0-17", "north", "10") for p in range(20)]
    rows += [(f"Q{k}", "18-39", f"c{k}", "12") for k in range(undeclared)]
    spec = {**SPEC, "releases": [{**SPEC["releases"][0], "selection": selection}]}
    randomness = _Recording(random_source(7, insecure_seed=True))
    certificate, document, _ = release_selection(spec, write_csv(tmp_path / f"{undeclared}.csv", rows), randomness)
    return certificate, document["releases"][0], randomness.calls


@pytest.mark.parametrize("selection", ["optimal", "laplace_threshold", "gaussian_threshold"])
def test_the_draw_stage_does_the_same_work_for_1_and_300_keys(tmp_path, selection):
    certificate, one, calls_one = _release(tmp_path, selection, 1)
    _, many, calls_many = _release(tmp_path, selection, 300)
    assert calls_one == calls_many
    # noise for 1 declared key and one block of slots: draws of at least that many values in all (the discrete
    # Gaussian's envelope sampler reads its words in blocks of at most 65,536)
    assert sum(int(n) for _, sizes in calls_one for n in sizes.strip("[]").split(",") if n.strip()) >= 1 + SLOTS
    for counts in (one, many):
        assert set(counts["values"]) == {"north", *counts["selected"]}
        assert set(counts["selected"]) <= {f"c{k}" for k in range(300)}
    assert certificate["releases"][0]["timing"] == TIMING and verify_selection(certificate).passed


def test_slots_come_in_whole_blocks():
    assert [padded_slots(n) for n in (0, 1, SLOTS, SLOTS + 1, 3 * SLOTS)] == [SLOTS, SLOTS, SLOTS, 2 * SLOTS,
                                                                              3 * SLOTS]


def test_an_edited_timing_statement_fails_verify():
    certificate = certify(SPEC)
    certificate.data["releases"][0]["timing"]["covered"] = "the release runs in constant time"
    assert not verify_selection(certificate).passed
