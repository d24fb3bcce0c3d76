"""Fuzz battery for the newer spec kinds (issue 35): mutated specs through the CLI, each in its own process.

Five classes, each a small valid spec: ``marginal`` (all two-way marginals, Hamming 2), ``kronecker`` (ranges
× identity and prefix terms), ``privacy_unit`` (person-level marginals), ``selection`` (counts per private key)
and ``releases`` (a ``releases:`` list of a quantile, a count and a mean, their budgets adding up). Every
mutation of :func:`mutations` (a key dropped or added; a value replaced by null, a boolean, a string, a
blank name, an empty or nested list, an empty mapping, 0, −1, 2.5, 1e15, ±1e308, 1e-300, NaN; a list entry
duplicated) is written as JSON and given to ``dpopt solve`` in a subprocess with a time limit and an
address-space limit. The contract (``dpopt/cli.py``, ``docs/reference/behaviour.md``): exit 0, or exit 2 with
exactly one line ``dpopt: error: ...`` on stderr; never a traceback, never a hang.

The default run takes a fixed sample (two mutations per class, seeded; about 40 s of wall time at load 12 on
two shared cores, 9 s of CPU); ``-m slow`` runs every mutation (1,380: about 22 minutes at load 5 to 8) and
prints the counts per class (accepted, refused in one line, tracebacks, hangs).
"""

from __future__ import annotations

import copy
import json
import os
import random
import resource
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from conftest import ROOT

TIMEOUT = 120
"""Seconds one case may take (a hang): the slowest accepted base spec solves in about 2 s of CPU."""

ADDRESS_SPACE = 4 * 1024**3
"""Bytes of address space a case may map: a structure the size guards miss fails with MemoryError (a traceback
here) instead of taking the machine."""

BASES: dict[str, dict] = {
    "marginal": {
        "dpopt": 1, "name": "m", "data": {"attributes": {"a": ["x", "y", "z"], "b": ["p", "q"], "c": ["r", "s"]},
                                          "n": 100},
        "query": {"kind": "marginals", "all_of_size": 2}, "adjacency": {"kind": "hamming", "distance": 2},
        "privacy": {"zcdp": {"rho": 0.5}}, "mechanism": "marginal_gaussian", "utility": {"metric": "l2"}},
    "kronecker": {
        "dpopt": 1, "name": "k", "data": {"attributes": {"age": ["0", "1", "2", "3"], "sex": ["f", "m"]}, "n": 100},
        "query": {"kind": "kronecker", "terms": [{"age": {"ranges": 2}, "sex": "identity"}, {"age": "prefix"}]},
        "adjacency": {"kind": "replace_one"}, "privacy": {"gdp": {"mu": 1}}, "mechanism": "kronecker_gaussian"},
    "privacy_unit": {
        "dpopt": 1, "name": "p",
        "data": {"attributes": {"g": ["a", "b", "c"], "h": ["x", "y"]},
                 "privacy_unit": {"id": "pid", "max_rows": 3, "max_rows_per_group": 2}},
        "query": {"kind": "marginals", "attributes": [["g"], ["h"]]}, "adjacency": {"kind": "add_remove"},
        "privacy": {"zcdp": {"rho": 0.5}}, "mechanism": "gaussian"},
    "selection": {
        "dpopt": 1, "name": "s",
        "data": {"attributes": {"clinic": {"keys": "private", "declared": ["north", "south"]}},
                 "privacy_unit": {"id": "pid", "max_rows": 2, "max_groups": 1}},
        "releases": [{"kind": "count", "by": "clinic", "epsilon": 1.0, "delta": 1e-6}],
        "adjacency": {"kind": "add_remove"}, "privacy": {"approx": {"epsilon": 1.0, "delta": 1e-6}}},
    "releases": {
        "dpopt": 1, "name": "r",
        "data": {"attributes": {"clinic": {"keys": "private", "declared": ["north"]}, "age": ["0", "1"],
                                "d": {"min": 0, "max": 10}},
                 "privacy_unit": {"id": "pid", "max_rows": 2, "max_groups": 1}},
        "releases": [
            {"name": "med", "kind": "quantile", "attribute": "d", "q": [0.5], "grid": {"step": 1}, "by": "age",
             "epsilon": 0.5},
            {"kind": "count", "by": "clinic", "epsilon": 0.5, "delta": 1e-6, "selection": "laplace_threshold"},
            {"kind": "mean", "attribute": "d", "by": "clinic", "epsilon": 0.5}],
        "adjacency": {"kind": "add_remove"}, "privacy": {"approx": {"epsilon": 1.5, "delta": 1e-6}}},
}

VALUES = {
    "number": [None, True, "2", "", 0, -1, 2.5, 10**15, 1e308, -1e308, 1e-300, float("nan")],
    "text": [None, True, "", " ", 5, ["x"], {"x": 1}, "zz"],
    "list": [None, [], "x", [None], [[]], {"x": 1}],
    "mapping": [None, {}, [], "x", 1],
}
"""Replacements by the kind of the value replaced."""


def _kind(value) -> str:
    if isinstance(value, bool) or isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "text"
    return "list" if isinstance(value, list) else "mapping"


def _paths(node, path=()):
    """Every position of the document: (path, value), the root excluded."""
    children = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, value in children:
        yield path + (key,), value
        yield from _paths(value, path + (key,))


def _set(document: dict, path: tuple, value) -> dict:
    out = copy.deepcopy(document)
    node = out
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return out


def _apply(document: dict, path: tuple, action: str, value=None) -> dict:
    out = copy.deepcopy(document)
    node = out
    for key in path[:-1]:
        node = node[key]
    if action == "drop":
        del node[path[-1]]
    elif action == "unknown_key":
        node[path[-1]]["zzz"] = 1
    elif action == "duplicate":
        node[path[-1]].append(copy.deepcopy(node[path[-1]][-1]))
    return out


def mutations(base: dict) -> list[tuple[str, dict]]:
    """(description, mutated spec) for every position of ``base`` and every mutation of its kind."""
    out = []
    for path, value in _paths(base):
        where = ".".join(str(p) for p in path)
        for replacement in VALUES[_kind(value)]:
            if replacement is value or (type(replacement) is type(value) and replacement == value):
                continue
            out.append((f"{where} = {replacement!r}", _set(base, path, replacement)))
        if isinstance(path[-1], str):
            out.append((f"{where} dropped", _apply(base, path, "drop")))
        if isinstance(value, dict):
            out.append((f"{where} + unknown key", _apply(base, path, "unknown_key")))
        if isinstance(value, list) and value:
            out.append((f"{where} last entry twice", _apply(base, path, "duplicate")))
    return out


def _limits() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


def run_case(spec: dict, folder: Path) -> tuple[str, str]:
    """(outcome, stderr) of ``dpopt solve`` on ``spec``: ``accepted``, ``refused`` (exit 2, one line),
    ``traceback``, ``hang``, or ``bad-exit`` (any other exit code or message form)."""
    path = folder / "spec.json"
    path.write_text(json.dumps(spec))  # NaN written as NaN: the strict JSON reader must refuse it in one line
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    command = [sys.executable, "-c", "import sys; from dpopt.cli import main; sys.exit(main())",
               "solve", str(path), "--quiet"]
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=TIMEOUT,
                              preexec_fn=_limits, cwd=folder)
    except subprocess.TimeoutExpired:
        return "hang", ""
    err = done.stderr
    if "Traceback" in err:
        return "traceback", err
    lines = err.strip().splitlines()
    if done.returncode == 0:
        return "accepted", err
    if done.returncode == 2 and len(lines) == 1 and lines[0].startswith("dpopt: error: "):
        return "refused", err
    return "bad-exit", f"exit {done.returncode}: {err}"


def _battery(kind: str, cases: list[tuple[str, dict]], folder: Path) -> Counter:
    counts, failures = Counter(), []
    for description, spec in cases:
        outcome, err = run_case(spec, folder)
        counts[outcome] += 1
        if outcome not in ("accepted", "refused"):
            failures.append(f"{kind}: {description}: {outcome}: {err.strip()[-400:]}")
    print(f"{kind}: {len(cases)} mutations: " + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())))
    assert not failures, "\n".join(failures)
    return counts


def test_every_base_spec_is_accepted(tmp_path):
    # the mutations are of valid specs: a base that did not solve would make every refusal meaningless
    for kind, base in BASES.items():
        assert run_case(base, tmp_path)[0] == "accepted", kind


def test_the_mutations_cover_every_position_and_kind():
    for kind, base in BASES.items():
        described = [d for d, _ in mutations(base)]
        assert len(described) == len(set(described)), kind
        assert all(any(d.startswith(".".join(map(str, p)) + " ") for d in described)
                   for p, _ in _paths(base)), kind


@pytest.mark.parametrize("kind", sorted(BASES))
def test_a_sample_of_mutations_is_refused_in_one_line_or_solved(kind, tmp_path):
    cases = random.Random(35).sample(mutations(BASES[kind]), 2)
    _battery(kind, cases, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(BASES))
def test_every_mutation_is_refused_in_one_line_or_solved(kind, tmp_path):
    _battery(kind, mutations(BASES[kind]), tmp_path)
