"""No tracebacks at the edges (issue 35): inputs that raised IndexError, OverflowError or a NaN conversion.

Each case went through ``dpopt solve`` to a traceback (or a candidate row naming an internal exception);
now it is certified, or refused in one line (exit 2) naming the field.
"""

from __future__ import annotations

import json

import pytest

import dpopt
from dpopt.certificate.verify import verify
from dpopt.cli import main

MIXED = {"dpopt": 1, "name": "mixed", "data": {"attributes": {"a": ["x", "y", "z"], "b": ["p", "q"],
                                                              "c": ["r", "s", "t"]}, "n": 100},
         "query": {"kind": "marginals", "attributes": [["a", "b"], ["c"]]}, "adjacency": "replace_one",
         "privacy": {"pure": {"epsilon": 1}}, "mechanism": "marginal_laplace"}


def test_marginal_laplace_on_marginals_of_different_sizes_is_certified():
    # the per-cell error's orbits read every label as cells of one table: "a=x,b=p" and "c=r" have 2 and 1 parts
    solution = dpopt.solve(MIXED)
    assert solution.mechanism.family == "marginal_laplace"
    assert verify(solution.certificate).passed


@pytest.mark.parametrize(("path", "value", "field"), [
    (("data", "attributes", "c"), {"min": -1e308, "max": 1e308}, "data.attributes.c.min"),
    (("privacy", "pure", "epsilon"), 1e300, "privacy.pure.epsilon"),
    (("privacy", "pure", "epsilon"), 1e-300, "privacy.pure.epsilon"),
])
def test_extreme_numbers_are_one_line_naming_the_field(tmp_path, capsys, path, value, field):
    spec = json.loads(json.dumps(MIXED))
    node = spec
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    if path[-1] == "c":
        spec["query"] = {"kind": "sum", "attribute": "c"}
        spec["mechanism"] = "auto"
    file = tmp_path / "spec.json"
    file.write_text(json.dumps(spec))
    assert main(["solve", str(file)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"dpopt: error: {field}:")


def test_a_plan_weight_of_1e308_is_one_line(tmp_path, capsys):
    plan = {"dpopt": 1, "name": "plan", "data": {"attributes": {"a": ["x", "y"]}, "n": 10},
            "queries": [{"query": {"kind": "count"}, "weight": 1e308}, {"query": {"kind": "histogram",
                                                                                  "attribute": "a"}}],
            "adjacency": "replace_one", "privacy": {"zcdp": {"rho": 0.5}}}
    file = tmp_path / "plan.json"
    file.write_text(json.dumps(plan))
    assert main(["solve", str(file)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "queries[0].weight: Input should be at most 1e+100" in err


def test_a_refusal_after_numpy_warnings_is_still_one_line(tmp_path):
    # μ = 10¹⁵: the GDP second route divides by a δ_μ that underflows to 0 ("divide by zero" warnings), then
    # the family is refused; the warnings used to precede the error line on stderr
    import subprocess
    import sys

    from conftest import ROOT

    spec = {"dpopt": 1, "name": "k", "data": {"attributes": {"age": ["0", "1", "2", "3"], "sex": ["f", "m"]},
                                              "n": 100},
            "query": {"kind": "kronecker", "terms": [{"age": {"ranges": 2}, "sex": "identity"}, {"age": "prefix"}]},
            "adjacency": {"kind": "replace_one"}, "privacy": {"gdp": {"mu": 10**15}},
            "mechanism": "kronecker_gaussian"}
    file = tmp_path / "spec.json"
    file.write_text(json.dumps(spec))
    done = subprocess.run([sys.executable, "-c", "import sys; from dpopt.cli import main; sys.exit(main())",
                           "solve", str(file)], capture_output=True, text=True, timeout=300,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("dpopt: error: no mechanism can meet this spec")
