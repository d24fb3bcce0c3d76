"""Size guards: :func:`dpopt.core.memory.require_memory` refuses above the limit, with one line."""

from __future__ import annotations

import pytest

from dpopt.core.memory import DEFAULT_LIMIT, dense_bytes, format_bytes, memory_limit, require_memory
from dpopt.errors import MemoryLimitError, SpecError, UnsupportedSpecError


def test_default_limit_is_two_gib(monkeypatch):
    monkeypatch.delenv("DPOPT_MEMORY_LIMIT", raising=False)
    assert memory_limit() == DEFAULT_LIMIT == 2 * 1024**3


@pytest.mark.parametrize(("text", "expected"), [
    ("1073741824", 1024**3), ("500M", 500 * 1024**2), ("2g", 2 * 1024**3), ("1.5GiB", 3 * 1024**3 // 2),
    ("4T", 4 * 1024**4),
])
def test_limit_from_environment(monkeypatch, text, expected):
    monkeypatch.setenv("DPOPT_MEMORY_LIMIT", text)
    assert memory_limit() == expected


@pytest.mark.parametrize("text", ["lots", "-1G", "1 X", "1e9"])
def test_bad_limit_is_a_spec_error(monkeypatch, text):
    monkeypatch.setenv("DPOPT_MEMORY_LIMIT", text)
    with pytest.raises(SpecError, match="DPOPT_MEMORY_LIMIT"):
        memory_limit()


def test_helmert_basis_of_a_1000_by_1000_table_is_refused(monkeypatch):
    """Issue 31 measured the dense Helmert basis of a 1000 x 1000 table at 7.28 TiB:
    (10^6 - 1) x 10^6 float64 entries = 7,999,992,000,000 B = 7.276 TiB."""
    monkeypatch.delenv("DPOPT_MEMORY_LIMIT", raising=False)
    nbytes = dense_bytes(10**6 - 1, 10**6)
    assert nbytes == 7_999_992_000_000
    assert format_bytes(nbytes) == "7.28 TiB"
    with pytest.raises(MemoryLimitError) as caught:
        require_memory(nbytes, "the dense Helmert basis")
    assert isinstance(caught.value, UnsupportedSpecError)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("the dense Helmert basis: would take 7.28 TiB")
    assert "2 GiB" in message and "DPOPT_MEMORY_LIMIT" in message


def test_below_the_limit_passes(monkeypatch):
    monkeypatch.setenv("DPOPT_MEMORY_LIMIT", "1K")
    require_memory(1024, "a structure of exactly the limit")
    with pytest.raises(MemoryLimitError):
        require_memory(1025, "one byte more")


def test_dense_bytes_does_not_overflow():
    """Python integers: 10^12 x 10^12 float64 entries = 8 x 10^24 bytes exactly."""
    assert dense_bytes(10**12, 10**12) == 8 * 10**24
    assert dense_bytes(3, 4, itemsize=1) == 12
