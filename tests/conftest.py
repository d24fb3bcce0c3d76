"""Shared fixtures: spec builders and the example specs."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SPECS = sorted((ROOT / "specs").glob("*.yaml"))


def make_spec(**overrides) -> dict:
    """A valid spec dict (3×2 table, replace-one, μ = 1) with fields overridden."""
    spec = {
        "dpopt": 1,
        "name": "test",
        "data": {"attributes": {"race": ["white", "black", "other"], "sex": ["f", "m"],
                                "income": {"min": 0, "max": 100}}},
        "query": {"kind": "contingency_table", "attributes": ["race", "sex"]},
        "adjacency": {"kind": "replace_one"},
        "privacy": {"gdp": {"mu": 1.0}},
    }
    spec.update(overrides)
    return spec


@pytest.fixture
def spec_dict():
    return make_spec()
