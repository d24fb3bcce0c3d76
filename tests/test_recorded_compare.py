"""Long lists in ``dpopt verify``'s comparison of recorded blocks (dpopt.certificate.recorded.difference).

Lists of ≥ RECORDS objects with the same keys (per-cell errors) and of ≥ RECORDS numbers (or equal-shaped lists of
numbers) are compared column by column with numpy. The reference is the element-by-element comparison itself
(RECORDS raised past every list's length): for every tampering below both must give the same verdict and the
same message (the first differing entry in row-major order).
"""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest

from dpopt.certificate import recorded

ROWS = 300


def _records(rng) -> list[dict]:
    return [{"cell": f"age={i % 17},sex={i % 2}", "standard_error": float(rng.uniform(1, 10)),
             "margin_of_error": float(rng.uniform(1, 30)), "rank": int(i)} for i in range(ROWS)]


def _numbers(rng) -> list:
    return [[float(x) for x in row] for row in rng.normal(0.0, 5.0, (ROWS, 3))]


TAMPER = {
    "none": lambda r: None,
    "a number beyond 1e-9 relative": lambda r: r[137].__setitem__("standard_error", r[137]["standard_error"] * (1 + 1e-8)),
    "a number within 1e-9 relative": lambda r: r[137].__setitem__("standard_error", r[137]["standard_error"] * (1 + 1e-10)),
    "two rows, the later first in its column": lambda r: (r[250].__setitem__("cell", "x"),
                                                          r[90].__setitem__("margin_of_error", 0.0)),
    "a string for a number": lambda r: r[12].__setitem__("rank", "12"),
    "a bool for a number": lambda r: r[0].__setitem__("rank", True),
    "a missing key": lambda r: r[200].pop("cell"),
    "a NaN": lambda r: r[5].__setitem__("margin_of_error", math.nan),
    "infinity": lambda r: r[299].__setitem__("standard_error", math.inf),
    "not an object": lambda r: r.__setitem__(3, [1, 2]),
}

NUMBER_TAMPER = {
    "none": lambda r: None,
    "beyond the tolerance": lambda r: r[41].__setitem__(2, r[41][2] + 1e-7),
    "within the list's tolerance (1e-9 of its largest)": lambda r: r[41].__setitem__(2, r[41][2] + 1e-12),
    "a bool": lambda r: r[100].__setitem__(0, False),
    "ragged": lambda r: r[7].append(1.0),
    "NaN recorded": lambda r: r[8].__setitem__(1, math.nan),
    "a string": lambda r: r[9].__setitem__(1, "1.0"),
}


def _both(monkeypatch, got, want):
    fast = recorded.difference(got, want)
    with monkeypatch.context() as m:
        m.setattr(recorded, "RECORDS", 10**9)
        slow = recorded.difference(got, want)
    return fast, slow


@pytest.mark.parametrize("case", list(TAMPER))
def test_records_compare_as_element_by_element(case, monkeypatch):
    rng = np.random.default_rng(7)
    want = _records(rng)
    got = copy.deepcopy(want)
    TAMPER[case](got)
    fast, slow = _both(monkeypatch, got, want)
    assert fast == slow
    assert (fast is None) == (case in ("none", "a number within 1e-9 relative"))


@pytest.mark.parametrize("case", list(NUMBER_TAMPER))
def test_number_arrays_compare_as_element_by_element(case, monkeypatch):
    rng = np.random.default_rng(8)
    want = _numbers(rng)
    got = copy.deepcopy(want)
    NUMBER_TAMPER[case](got)
    fast, slow = _both(monkeypatch, {"a": got}, {"a": want})
    assert fast == slow
    assert (fast is None) == (case in ("none", "within the list's tolerance (1e-9 of its largest)"))


def _largest_by_element(values: list) -> float:
    """The reference: the largest finite |x| number by number (``_numbers`` skips bools, strings and numpy's
    integers)."""
    return max((abs(x) for x in recorded._numbers(values) if math.isfinite(x)), default=0.0)


SCALES = {
    "floats": [1.5, -7.25, 3.0],
    "ints and floats": [2, -9, 4.5],
    "a NaN and an infinity": [math.nan, -math.inf, 2.0],
    "only non-finite": [math.nan, math.inf],
    "a bool": [True, 0.5],
    "numpy's integer (skipped)": [np.int64(40), 3.0],
    "numpy's float64 (a float)": [np.float64(-40.0), 3.0],
    "an integer beyond a float": [10**400, 1.0],
    "nested": [[1.0, -8.0], [2.0, 3.0]],
    "strings": ["a", 3.0],
    "empty": [],
}


@pytest.mark.parametrize("case", list(SCALES))
def test_the_largest_magnitude_at_once_is_the_element_by_element_one(case):
    values = SCALES[case]
    if case == "an integer beyond a float":  # float(10**400) overflows number by number too
        with pytest.raises(OverflowError):
            _largest_by_element(values)
        with pytest.raises(OverflowError):
            recorded._largest_finite(values)
        return
    assert recorded._largest_finite(values) == _largest_by_element(values)


FLAT_TAMPER = {
    "none": lambda r: None,
    "beyond the tolerance": lambda r: r.__setitem__(41, r[41] + 1e-7),
    "a bool": lambda r: r.__setitem__(100, True),
    "a string": lambda r: r.__setitem__(9, "1.0"),
    "NaN recorded": lambda r: r.__setitem__(8, math.nan),
}


@pytest.mark.parametrize("case", list(FLAT_TAMPER))
def test_flat_number_lists_compare_as_element_by_element(case, monkeypatch):
    rng = np.random.default_rng(9)
    want = [float(x) for x in rng.normal(0.0, 5.0, ROWS)]
    got = list(want)
    FLAT_TAMPER[case](got)
    fast, slow = _both(monkeypatch, {"a": got}, {"a": want})
    assert fast == slow
    assert (fast is None) == (case == "none")


JSON_VALUES = {
    "plain": {"a": [1, 2.5, None, True, "x", {"b": [math.nan, -math.inf, -0.0]}], "c": {}},
    "a tuple": {"a": (1, 2)},
    "numpy float64 (a float subclass)": {"a": [np.float64(1.5), 2]},
    "an integer key": {1: "x"},
    "a nested tuple": [{"a": [(1.0, 2.0)]}],
    "a string subclass": {"a": type("Label", (str,), {})("x")},
}


@pytest.mark.parametrize("case", list(JSON_VALUES))
def test_a_recomputed_value_compares_as_its_json(case):
    """verify._json skips the dump and parse of a value JSON gives back equal; the reference is the dump and
    parse itself, compared by recorded.difference (NaN equals NaN there) and by its JSON text."""
    import importlib
    import json

    verify_module = importlib.import_module("dpopt.certificate.verify")
    value = JSON_VALUES[case]
    reference = json.loads(json.dumps(value))
    got = verify_module._json(value)
    assert recorded.difference(reference, got) is None and recorded.difference(got, reference) is None
    assert json.dumps(got) == json.dumps(reference)
    assert (got is value) == (case == "plain")
