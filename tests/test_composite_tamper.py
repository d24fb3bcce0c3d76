"""The tamper battery of composite certificates (issues 35, 38): a hierarchical release's, a plan's, a selection's,
a synthesis's (adaptive: the budget's parts, the selection rounds, two embedded measurements).

Each is edited by the classes of issue 31's battery (:mod:`test_verify_tamper`) and each edit must be
rejected: the verifier returns not passed, or refuses the document (:class:`CertificateError`), never another
exception. The expected outcome is "rejected" by construction of the edit: a forged claim (the issue's
``epsilon = 0.0001``, recorded as passed) is not one verify re-derives; a recorded check removed, negated or
reworded is not the re-derived one; a key added or removed is not in the schema; a leaf value changed is no
longer its recomputation (a spec's leaf changes its SHA-256).

Echoed, not re-derived (:data:`ECHOED`; stated in ``docs/concepts/certificates.md``): ``dpopt_version``, a
plan's equal-split baseline and model fit (they need every query designed again), the solver's record and the
non-chosen candidates inside a level's, a query's or a measurement's own certificate (as for single
certificates: :mod:`test_verify_tamper`), a synthesis's method sentence. None of them states or weakens the
guarantee: an accepted edit outside them fails the test, and the counts per class are in the assertion message.

The default run takes a sample (the forged claims, every check edited once (every check of the selection
certificate by all four edits; the synthesis's under ``-m slow``), unknown keys at the top and in each block,
missing keys at the top, every leaf of the selection certificate, of the others' top-level blocks the first
:data:`PER_BLOCK` leaves outside the embedded certificates, and inside them each block once: mechanism,
sensitivity, utility, checks, candidates of a level's or a query's certificate, and share, privacy or target,
mechanism or parameters, sensitivity, utility of its row: :func:`_embedded_sample`); ``-m slow`` edits every leaf
of every kind.
"""

from __future__ import annotations

import copy
import json
import re

import numpy as np
import pytest

from conftest import edited
from dpopt.certificate.hierarchy_release import verify_hierarchy_release
from dpopt.certificate.model import Certificate
from dpopt.errors import CertificateError
from solved_specs import ROOT

FORGED = {"claim": "epsilon = 0.0001", "method": "the release is 0.0001-DP", "passed": True,
          "detail": "epsilon = 0.0001"}
"""The issue's forged claim."""

PLAN = {"dpopt": 1, "name": "plan", "data": {"attributes": {"a": ["x", "y", "z"]}},
        "queries": [{"query": {"kind": "count"}}, {"name": "by a", "query": {"kind": "histogram", "attribute": "a"}}],
        "adjacency": "add_remove", "privacy": {"zcdp": {"rho": 0.5}}, "mechanism": "gaussian"}

ECHOED = [
    re.compile(r"(.*\.)?dpopt_version"),
    re.compile(r"allocation\.(method|model_objective|exponents\.\d+)"),
    re.compile(r"candidates\.2\.(weighted_total|note)"),
    re.compile(r"(levels\.\w+|(queries|measurements)\.\d+\.certificate)\.candidates\.\d+\..*"),
    re.compile(r"synthesis\.method"),
    re.compile(r"measurements\.\d+\.certificate\.postprocess\.method\.(steps\.\d+|metric|exact_directions)"),
]
"""Leaves whose edit verify accepts, and why (module docstring): the version that wrote the file; how a plan's
shares were found (the shares themselves are re-derived: the composition, each query's certificate); the joint
design's row in a plan designed separately (the joint design is not made again); the non-chosen candidates of an
embedded certificate; how a synthesis's embedded measurement was post-processed (its steps, metric and exact
directions; the guarantee, the theorem and the options its post-processing block states are checked); a
synthesis's method sentence (the synthesizer's description of itself: what the records are is checked by ``dpopt
verify DIR`` against the files). A plan's two baseline totals are re-derived together (the kept one is the
certified total, the ratio and the rows repeat them), so an edit of one of them fails."""


SYNTHESIS = {"dpopt": 1, "name": "three attributes", "adjacency": "add_remove", "privacy": {"zcdp": {"rho": 1}},
             "data": {"attributes": {"a": ["x", "y", "z"], "b": ["0", "1"], "c": ["p", "q", "r", "s"]}},
             "mechanism": "marginal_gaussian", "synthesize": {"selection": "adaptive"}}
"""An adaptive synthesis (one-way marginals, two selection rounds, the selected pairs): every block a synthesis
certificate can hold."""

KINDS = ["hierarchy", "plan", "selection", "synthesis"]


@pytest.fixture(scope="module")
def kinds(tmp_path_factory) -> dict:
    """The four composite certificates, as JSON."""
    from dpopt.plan import solve_plan
    from dpopt.release.hierarchy_design import solve_hierarchy
    from dpopt.rng import random_source
    from dpopt.selection.design import certify
    from dpopt.synthesis.pipeline import synthesize

    rng = np.random.default_rng(0)
    data = tmp_path_factory.mktemp("synthesis") / "data.csv"
    rows = [",".join(rng.choice(levels) for levels in SYNTHESIS["data"]["attributes"].values()) for _ in range(300)]
    data.write_text("\n".join(["a,b,c", *rows]) + "\n")
    return {
        "hierarchy": json.loads(solve_hierarchy(ROOT / "specs" / "hierarchy_topdown_zcdp.yaml").certificate().to_json()),
        "plan": json.loads(solve_plan(PLAN).certificate.to_json()),
        "selection": json.loads(certify(ROOT / "specs" / "visits_private_clinics.yaml").to_json()),
        "synthesis": json.loads(synthesize(SYNTHESIS, data, randomness=random_source(7, insecure_seed=True))
                                .certificate.to_json()),
    }


def verification(kind: str, data: dict):
    from dpopt.plan import verify_plan
    from dpopt.selection import verify_selection
    from dpopt.synthesis import verify_synthesis

    if kind == "hierarchy":
        return verify_hierarchy_release(data)
    if kind == "synthesis":
        return verify_synthesis(data)
    return verify_plan(data) if kind == "plan" else verify_selection(Certificate(data))


def rejected(kind: str, data: dict) -> bool:
    try:
        return not verification(kind, data).passed
    except CertificateError:
        return True


def _leaves(obj, path=(), skip=(), first: int | None = None):
    """The paths of the scalar leaves of a JSON value, but those under ``skip``; of each list only the
    ``first`` entries when given."""
    if path in skip:
        return
    if isinstance(obj, dict):
        for key, value in obj.items():
            yield from _leaves(value, (*path, key), skip, first)
    elif isinstance(obj, list):
        for i, value in enumerate(obj[:first]):
            yield from _leaves(value, (*path, i), skip, first)
    else:
        yield path


def _dicts(obj, path=(), skip=()):
    if path in skip:
        return
    if isinstance(obj, dict):
        yield path
        for key, value in obj.items():
            yield from _dicts(value, (*path, key), skip)
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            yield from _dicts(value, (*path, i), skip)


def _get(obj, path):
    for key in path:
        obj = obj[key]
    return obj


def _embedded(kind: str, data: dict) -> tuple:
    """The paths of the certificates a composite embeds (verified by :func:`dpopt.verify`, battered by
    :mod:`test_verify_tamper`): skipped by the default sample."""
    if kind == "hierarchy":
        return tuple(("levels", name) for name in data["levels"])
    if kind == "plan":
        return tuple(("queries", i, "certificate") for i in range(len(data["queries"])))
    if kind == "synthesis":
        return tuple(("measurements", i, "certificate") for i in range(len(data["measurements"])))
    return ()


def _echoed(path) -> bool:
    return any(p.fullmatch(".".join(map(str, path))) for p in ECHOED)


# ------------------------------------------------------------------------------------ claims
@pytest.mark.parametrize("kind", KINDS)
def test_untampered_passes_and_the_issues_forged_claim_fails(kinds, kind):
    data = kinds[kind]
    assert verification(kind, data).passed
    forged = copy.deepcopy(data)
    forged["checks"].append(FORGED)
    assert not verification(kind, forged).passed


@pytest.mark.parametrize("kind", ["hierarchy", "plan", "synthesis"])
def test_a_claim_forged_in_an_embedded_block_fails(kinds, kind):
    """The hierarchy's block (carried by every level certificate alike), a plan query's own certificate, a
    synthesis's measurement certificate (its failed claims are named in the measurement's check)."""
    forged = copy.deepcopy(kinds[kind])
    if kind == "hierarchy":
        forged["hierarchy"]["checks"].append(FORGED)
        for level in forged["levels"].values():
            level["hierarchy"] = forged["hierarchy"]
        forged["checks"] = forged["hierarchy"]["checks"]
    elif kind == "plan":
        forged["queries"][1]["certificate"]["checks"].append(FORGED)
    else:
        forged["measurements"][1]["certificate"]["checks"].append(FORGED)
        failed = {c.claim: c.detail for c in verification(kind, forged).failed}
        assert "recorded:epsilon = 0.0001" in failed.get("measurements[1]", ""), failed
        return
    failed = [c.claim for c in verification(kind, forged).failed]
    assert any(claim.endswith("recorded:epsilon = 0.0001") for claim in failed), failed


def _check_edits(data: dict, every: bool):
    """Each recorded check removed, negated, reworded and repeated (``every``), or each check edited once, the
    four edits in turn (check i by edit i mod 4: the default run's sample, every edit class many times)."""
    for i, row in enumerate(data["checks"]):
        edits = (("removed", lambda c, i=i: c["checks"].pop(i)),
                 ("not passed", lambda c, i=i: c["checks"][i].update(passed=False)),
                 ("detail", lambda c, i=i: c["checks"][i].update(detail="ε = 0.0001 ≤ 1")),
                 ("twice", lambda c, i=i: c["checks"].append(c["checks"][i])))
        for label, edit in edits if every else edits[i % len(edits):][:1]:
            tampered = copy.deepcopy(data)
            edit(tampered)
            yield f"checks[{i}] {label}", tampered


@pytest.mark.parametrize("kind", KINDS)
def test_every_recorded_check_removed_negated_reworded_or_repeated_fails(kinds, kind):
    assert [label for label, t in _check_edits(kinds[kind], every=kind == "selection") if not rejected(kind, t)] == []


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["hierarchy", "plan", "synthesis"])
def test_every_recorded_check_fails_under_every_edit(kinds, kind):
    assert [label for label, t in _check_edits(kinds[kind], every=True) if not rejected(kind, t)] == []


# ------------------------------------------------------------------------------------ schema
def _key_edits(kind: str, data: dict, every: bool):
    skip = () if every else _embedded(kind, data)
    for path in _dicts(data, skip=skip):
        if not every and len(path) > 1:
            continue
        tampered = copy.deepcopy(data)
        _get(tampered, path)["x_unknown"] = 1
        yield "unknown key", ".".join(map(str, path)) or "(top)", tampered
        depth = 1 if every else 0  # the keys of the top level (sample), and of each block (every)
        for key in _get(data, path) if len(path) <= depth and path != ("spec",) else ():  # a spec's key may be a default
            tampered = copy.deepcopy(data)
            del _get(tampered, path)[key]
            yield "missing key", ".".join(map(str, (*path, key))), tampered


@pytest.mark.parametrize("kind", KINDS)
def test_unknown_and_missing_keys_are_rejected(kinds, kind):
    assert [f"{c}: {label}" for c, label, t in _key_edits(kind, kinds[kind], every=False) if not rejected(kind, t)] == []


# ------------------------------------------------------------------------------------ leaves
def _leaf_battery(kind: str, data: dict, every: bool) -> dict[str, list]:
    """{class: [cases, accepted echoed, accepted otherwise (their paths)]}, class = the top-level block."""
    counts: dict[str, list] = {}
    paths = list(_leaves(data) if every or kind == "selection" else _sample(kind, data))
    for path in paths:
        tampered = copy.deepcopy(data)
        _get(tampered, path[:-1])[path[-1]] = edited(_get(data, path))
        row = counts.setdefault(str(path[0]), [0, 0, []])
        row[0] += 1
        if not rejected(kind, tampered):
            if _echoed(path):
                row[1] += 1
            else:
                row[2].append(".".join(map(str, path)))
    return counts


PER_BLOCK = {"hierarchy": 2, "plan": 1, "synthesis": 2}
"""Leaves per top-level block in the default sample of a hierarchy's, a plan's and a synthesis's battery (a
verification takes 0.35 s of CPU, a plan's 0.6 s)."""


def _sample(kind: str, data: dict):
    """The first :data:`PER_BLOCK` leaves of each top-level block, outside the embedded certificates, the first
    entry of each list."""
    for key in data:
        yield from list(_leaves(data[key], (key,), _embedded(kind, data), first=1))[:PER_BLOCK[kind]]


def _assert_only_echoed(counts: dict[str, list]) -> None:
    print("leaf edits per block (cases / accepted as documented / accepted otherwise): "
          + ", ".join(f"{block} {row[0]}/{row[1]}/{len(row[2])}" for block, row in counts.items()))
    assert {block: row[2] for block, row in counts.items() if row[2]} == {}, counts


@pytest.mark.parametrize("kind", KINDS)
def test_every_leaf_outside_the_embedded_certificates_edited_is_rejected(kinds, kind):
    _assert_only_echoed(_leaf_battery(kind, kinds[kind], every=False))


EMBEDDED_BLOCKS = ("mechanism", "sensitivity", "utility", "checks", "candidates")
"""The blocks of an embedded certificate (a level's, a query's) the default sample edits."""
ROW_BLOCKS = ("share", "privacy", "target", "mechanism", "parameters", "sensitivity", "utility")
"""The blocks of a row that holds an embedded certificate (``hierarchy.levels[i]``, ``queries[i]``) it edits."""


def _embedded_sample(kind: str, data: dict):
    """Each block of :data:`EMBEDDED_BLOCKS` of the embedded certificates and of :data:`ROW_BLOCKS` of their rows,
    once, in turn: of container j the first leaf of its blocks b ≡ j (mod the number of containers)."""
    embedded = _embedded(kind, data)
    rows = ([("hierarchy", "levels", i) for i in range(len(data["hierarchy"]["levels"]))] if kind == "hierarchy"
            else [("queries", i) for i in range(len(data["queries"]))])
    for containers, names in ((embedded, EMBEDDED_BLOCKS), (rows, ROW_BLOCKS)):
        for j, path in enumerate(containers):
            block = _get(data, path)
            for b, key in enumerate(k for k in block if k in names):
                if b % len(containers) == j:
                    yield next(_leaves(block[key], (*path, key), first=1))


@pytest.mark.parametrize("kind", ["hierarchy", "plan"])
def test_each_block_of_the_embedded_certificates_edited_is_rejected(kinds, kind):
    """The default run's sample inside the embedded certificates (levels, queries) and their rows (shares,
    targets, mechanisms): :func:`_embedded_sample`; ``-m slow`` edits every leaf."""
    paths = list(_embedded_sample(kind, kinds[kind]))
    depth = 2 if kind == "hierarchy" else 3  # levels.NAME.BLOCK, queries.I.certificate.BLOCK
    assert {p[depth] for p in paths if p[depth - 1:depth] != ("levels",) and len(p) > depth} >= set(EMBEDDED_BLOCKS)
    accepted = []
    for path in paths:
        tampered = copy.deepcopy(kinds[kind])
        _get(tampered, path[:-1])[path[-1]] = edited(_get(kinds[kind], path))
        if not rejected(kind, tampered) and not _echoed(path):
            accepted.append(".".join(map(str, path)))
    assert accepted == [], f"{len(paths)} edits"


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["hierarchy", "plan", "synthesis"])
def test_every_leaf_edited_is_rejected(kinds, kind):
    _assert_only_echoed(_leaf_battery(kind, kinds[kind], every=True))


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_every_unknown_key_is_rejected(kinds, kind):
    assert [label for _, label, t in _key_edits(kind, kinds[kind], every=True) if not rejected(kind, t)] == []


@pytest.mark.parametrize("kind", ["hierarchy", "plan", "selection"])
def test_report_refuses_a_composite_certificate_that_does_not_verify(kinds, kind, tmp_path, capsys):
    """`dpopt report` printed the forged claim among the checks (the issue)."""
    from dpopt.cli import main

    path = tmp_path / "certificate.json"
    forged = copy.deepcopy(kinds[kind])
    forged["checks"].append(FORGED)
    path.write_text(json.dumps(forged))
    assert main(["report", str(path)]) == 2
    err = capsys.readouterr().err
    assert "does not verify (" in err and "recorded:epsilon = 0.0001" in err and err.count("\n") == 1
    path.write_text(json.dumps(kinds[kind]))
    assert main(["report", str(path)]) == 0
    # one count of claims everywhere, the verifier's (issue 37): the report states the number verify prints
    stated = re.findall(r"(\d+) claims hold, as `dpopt verify` counts them", capsys.readouterr().out)
    assert main(["verify", str(path)]) == 0
    derived = re.search(r"certificate holds: (\d+) claims re-derived", capsys.readouterr().out).group(1)
    assert stated and set(stated) == {derived}
