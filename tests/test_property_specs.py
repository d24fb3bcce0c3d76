"""Property suite (issue 26): a random spec within the schema gives a certificate that
``dpopt verify`` accepts, or a :class:`dpopt.DpoptError` with a one-line message — never a
traceback, never a certificate that fails its own re-check.

Small and fast by default (a few examples over small domains, the default profile); run with
``--hypothesis-seed`` or a larger ``max_examples`` to search more.
"""

from __future__ import annotations

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import dpopt  # noqa: E402
from dpopt.certificate.verify import verify  # noqa: E402

FAMILIES = ["auto", "gaussian", "laplace", "k_norm", "staircase", "discrete_laplace", "discrete_gaussian",
            "projected_gaussian", "r2dp"]

privacy = st.one_of(
    st.builds(lambda e: {"pure": {"epsilon": e}}, st.sampled_from([0.3, 1.0, 2.5])),
    st.builds(lambda e, d: {"approx": {"epsilon": e, "delta": d}}, st.sampled_from([0.5, 1.0]),
              st.sampled_from([1e-9, 1e-5])),
    st.builds(lambda r: {"zcdp": {"rho": r}}, st.sampled_from([0.01, 0.5, 3.0])),
    st.builds(lambda m: {"gdp": {"mu": m}}, st.sampled_from([0.2, 1.0])),
)


@st.composite
def specs(draw) -> dict:
    levels = draw(st.integers(2, 4))
    other = draw(st.integers(2, 3))
    attributes = {"a": [f"a{i}" for i in range(levels)], "b": [f"b{i}" for i in range(other)]}
    query = draw(st.sampled_from([
        {"kind": "count"},
        {"kind": "histogram", "attribute": "a"},
        {"kind": "contingency_table", "attributes": ["a", "b"]},
        {"kind": "marginals", "attributes": [["a"], ["b"]]},
    ]))
    spec = {"dpopt": 1, "name": "random", "data": {"attributes": attributes}, "query": query,
            "adjacency": {"kind": draw(st.sampled_from(["add_remove", "replace_one"]))},
            "privacy": draw(privacy), "mechanism": draw(st.sampled_from(FAMILIES)),
            "utility": {"metric": draw(st.sampled_from(["l2", "l1"]))}}
    if query["kind"] == "contingency_table" and draw(st.booleans()):
        spec["invariants"] = [{"kind": "margins", "attributes": ["a"]}]
        spec["adjacency"] = {"kind": "replace_one"}
        spec["data"]["n"] = 50
    return spec


@settings(max_examples=12, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(specs())
def test_random_spec_certifies_or_says_why_in_one_line(spec):
    try:
        solution = dpopt.solve(spec)
    except dpopt.DpoptError as exc:
        message = str(exc)
        assert message and "\n" not in message and "Traceback" not in message
        return
    result = verify(solution.certificate)
    assert result.passed, [c.claim for c in result.failed]
