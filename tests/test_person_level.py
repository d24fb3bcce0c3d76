"""Person-level privacy (``data.privacy_unit``): sensitivities, bounding on release, the audit.

Expected values come from (a) brute force written here: every contribution vector a person may
keep (counts per cell in 0..c, at most g non-zero, total at most k), listed with
``itertools.product`` over the cells — not through records as the certificate's claim does — and
the query applied with its matrix; (b) a pure-Python recount of the CSV with the ``csv`` module;
(c) the empirical audit on differences produced by the release path itself.
"""

from __future__ import annotations

import csv
import itertools
import json
from collections import Counter, defaultdict
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

import dpopt
from dpopt.audit import audit_mechanism
from dpopt.cli import main
from dpopt.domain.queries import compile_query
from dpopt.errors import SpecError
from dpopt.release import sources
from dpopt.release.bounding import bound_contributions
from dpopt.rng import random_source
from dpopt.sensitivity.enumerate import enumerate_persons
from dpopt.sensitivity.space import SensitivitySpace

ROOT = Path(__file__).resolve().parents[1]
VISITS_SPEC = ROOT / "specs" / "visits_person_level.yaml"
VISITS_DATA = ROOT / "specs" / "data" / "visits.csv"


def spec_of(query: dict, unit: dict, adjacency: str = "add_remove", attributes: dict | None = None) -> dict:
    return {"dpopt": 1, "name": "person-level", "adjacency": adjacency, "privacy": {"gdp": {"mu": 1.0}},
            "data": {"attributes": attributes or {"a": ["0", "1", "2"], "b": ["x", "y"], "s": {"min": -1, "max": 3}},
                     "privacy_unit": {"id": "pid", **unit}},
            "query": query}


def brute_norms(phi: np.ndarray, pairs: bool) -> tuple[Fraction, Fraction, Fraction]:
    """Exact (l1, l2², l∞) maxima over the rows of ``phi`` (pairs: over all differences of two rows), in
    int64 arithmetic (every entry is a small integer), the pairs a block of rows at a time."""
    phi = np.rint(phi).astype(np.int64)
    blocks = [phi[i:i + 64, None, :] - phi[None, :, :] for i in range(0, len(phi), 64)] if pairs else [phi]
    best = np.zeros(3, dtype=np.int64)
    for block in blocks:
        block = np.abs(block.reshape(-1, phi.shape[1]))
        best = np.maximum(best, [block.sum(axis=1).max(), (block**2).sum(axis=1).max(), block.max()])
    return tuple(Fraction(int(x)) for x in best)


def contributions(m: int, k: int | None, g: int | None, c: int | None) -> np.ndarray:
    """Every allowed per-cell count vector on m cells (brute force over 0..cap in each cell)."""
    cap = min(x for x in (k, c) if x is not None)
    out = [v for v in itertools.product(range(cap + 1), repeat=m)
           if (k is None or sum(v) <= k) and (g is None or sum(x > 0 for x in v) <= g)
           and (c is None or max(v) <= c)]
    return np.array(out, dtype=float)


def brute_space(spec: dict) -> tuple[Fraction, Fraction, Fraction]:
    query = compile_query(dpopt.load_spec(spec))
    unit = spec["data"]["privacy_unit"]
    v = contributions(query.cells, unit.get("max_rows"), unit.get("max_groups"), unit.get("max_rows_per_group"))
    phi = v @ query.dense().T
    return brute_norms(phi, pairs=spec["adjacency"] != "add_remove")


UNITS = [{"max_rows": 5, "max_groups": 3, "max_rows_per_group": 2}, {"max_rows": 4},
         {"max_rows_per_group": 2, "max_groups": 2}, {"max_rows_per_group": 3}, {"max_rows": 3, "max_groups": 1},
         {"max_rows": 7, "max_rows_per_group": 3}]
QUERIES = [{"kind": "contingency_table", "attributes": ["a", "b"]}, {"kind": "histogram", "attribute": "a"},
           {"kind": "count"}]


@pytest.mark.parametrize("adjacency", ["add_remove", "replace_one"])
@pytest.mark.parametrize("unit", UNITS)
@pytest.mark.parametrize("query", QUERIES)
def test_table_sensitivities_match_brute_force(query, unit, adjacency):
    spec = spec_of(query, unit, adjacency)
    space = dpopt.derive(dpopt.load_spec(spec))
    assert (space.l1, space.l2_squared, space.linf) == brute_space(spec)


def test_example_in_the_brief():
    # a person with ≤ 2 rows in each of ≤ 3 cells and ≤ 5 in all: l1 = min(5, 6) = 5, l2² = 2² + 2² + 1² = 9
    # (two full cells and the remainder), l∞ = min(2, 5) = 2 (the brief's closed forms, by hand)
    space = dpopt.derive(dpopt.load_spec(spec_of(QUERIES[0], UNITS[0])))
    assert (space.l1, space.l2_squared, space.linf) == (5, 9, 2)


@pytest.mark.parametrize("adjacency", ["add_remove", "replace_one"])
@pytest.mark.parametrize("unit", [{"max_rows": 3}, {"max_rows": 2, "max_groups": 2}])
def test_marginal_sensitivities_match_brute_force(unit, adjacency):
    attributes = {"a": ["0", "1"], "b": ["x", "y", "z"], "c": ["only"]}
    query = {"kind": "marginals", "attributes": [["a"], ["b"], ["c"], ["a", "b"]]}
    spec = spec_of(query, unit, adjacency, attributes)
    space = dpopt.derive(dpopt.load_spec(spec))
    assert (space.l1, space.l2_squared, space.linf) == brute_space(spec)


@pytest.mark.parametrize("adjacency, expected", [("add_remove", 3 * 3), ("replace_one", 3 * (3 + 1))])
def test_sum_sensitivity(adjacency, expected):
    # values in [−1, 3], ≤ min(k, c) = 3 rows: add/remove 3·max(|−1|, |3|) = 9; replace: one person's
    # 3 rows at 3 against another's 3 rows at −1: 3·(3 − (−1)) = 12 (by hand, and by enumeration below)
    spec = dpopt.load_spec(spec_of({"kind": "sum", "attribute": "s"}, {"max_rows": 5, "max_rows_per_group": 3},
                                   adjacency))
    space = dpopt.derive(spec)
    assert space.l1 == space.linf == expected
    brute = enumerate_persons(spec, compile_query(spec))
    assert brute.l1 == expected


@pytest.mark.parametrize("adjacency", ["add_remove", "replace_one"])
def test_certificate_enumeration_claim_agrees(adjacency):
    spec = dpopt.load_spec(spec_of(QUERIES[0], {"max_rows": 3, "max_rows_per_group": 2}, adjacency))
    brute = enumerate_persons(spec, compile_query(spec))
    space = dpopt.derive(spec)
    assert (brute.l1, brute.l2_squared, brute.linf, brute.rank) == (space.l1, space.l2_squared, space.linf,
                                                                    space.rank)


@pytest.mark.parametrize("change, field", [
    ({"data": {"privacy_unit": {"id": "a", "max_rows": 2}}}, "data.privacy_unit.id"),
    ({"data": {"privacy_unit": {"id": "pid", "max_groups": 2}}}, "data.privacy_unit"),
    ({"adjacency": {"kind": "hamming", "distance": 2}}, "adjacency"),
    ({"data": {"n": 10}}, "data.n"),
])
def test_spec_validation(change, field):
    spec = spec_of(QUERIES[0], {"max_rows": 2})
    for key, value in change.items():
        if key == "data":
            spec["data"] = {**spec["data"], **value}
        else:
            spec[key] = value
    with pytest.raises(SpecError) as info:
        dpopt.load_spec(spec)
    assert info.value.field.startswith(field)


# --------------------------------------------------------------------- bounding
def recount(path: Path) -> dict[str, Counter]:
    """Rows per person and (age_group, clinic) cell, with the csv module."""
    per_person: dict[str, Counter] = defaultdict(Counter)
    with path.open(newline="") as f:
        for row in csv.DictReader(f):
            per_person[row["person_id"]][(row["age_group"], row["clinic"])] += 1
    return per_person


def bounded_rows(spec, seed: int, data: Path = VISITS_DATA):
    con, source = sources.connect(), sources.open_source(data)
    bounded, report = bound_contributions(con, source, spec, compile_query(spec), random_source(seed, True))
    rows = con.execute(f"SELECT person_id, age_group, clinic FROM {bounded.sql}").fetchall()
    return rows, report


def test_truncation_counts_match_a_recount():
    spec = dpopt.load_spec(VISITS_SPEC)
    unit = spec.data.privacy_unit
    raw = recount(VISITS_DATA)
    rows, report = bounded_rows(spec, 3)
    kept: dict[str, Counter] = defaultdict(Counter)
    for pid, age, clinic in rows:
        kept[pid][(age, clinic)] += 1
    for pid, cells in raw.items():
        mine = kept[pid]
        assert all(mine[cell] <= min(n, unit.max_rows_per_group) for cell, n in mine.items())  # kept ⊂ raw, ≤ c
        assert len(mine) <= unit.max_groups and sum(mine.values()) <= unit.max_rows
        # maximal: as many cells as allowed, and in them as many rows as the bounds leave
        assert len(mine) == min(unit.max_groups, len(cells))
        assert sum(mine.values()) == min(unit.max_rows, sum(min(cells[c], unit.max_rows_per_group) for c in mine))
    total = sum(sum(c.values()) for c in raw.values())
    dropped = {pid for pid in raw if sum(kept[pid].values()) < sum(raw[pid].values())}
    assert report["rows"] == total and report["rows_kept"] == len(rows)
    assert report["rows_dropped"] == total - len(rows)
    assert report["persons"] == len(raw) and report["persons_truncated"] == len(dropped)
    assert "not covered by the certificate" in report["note"]


def write_csv(path: Path, rows: list[tuple]) -> Path:
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["person_id", "age_group", "clinic", "duration"])
        writer.writerows(rows)
    return path


def test_the_kept_row_is_uniform(tmp_path):
    # one person, 4 rows in one cell, max_rows_per_group 1: each row kept with probability 1/4. Over 200
    # seeds each count is Binomial(200, 1/4): mean 50, sd √37.5 ≈ 6.1; the χ² statistic (3 d.f.) exceeds
    # 16.3 with probability 10⁻³
    data = write_csv(tmp_path / "one.csv", [("P", "18-39", "north", d) for d in (10, 20, 30, 40)])
    spec = dpopt.load_spec({**dpopt.load_spec(VISITS_SPEC).model_dump(exclude_none=True),
                            "data": {**dpopt.load_spec(VISITS_SPEC).data.model_dump(exclude_none=True),
                                     "privacy_unit": {"id": "person_id", "max_rows_per_group": 1}}})
    con, source = sources.connect(), sources.open_source(data)
    counts = Counter()
    for seed in range(200):
        bounded, _ = bound_contributions(con, source, spec, compile_query(spec), random_source(seed, True))
        counts[con.execute(f"SELECT duration FROM {bounded.sql}").fetchone()[0]] += 1
    chi2 = sum((counts[str(d)] - 50) ** 2 / 50 for d in (10, 20, 30, 40))
    assert chi2 < 16.3, counts


# ------------------------------------------------------------------ end to end
def test_solve_verify_release_cli(tmp_path, capsys):
    assert main(["solve", str(VISITS_SPEC), "--out", str(tmp_path)]) == 0
    cert = json.loads((tmp_path / "certificate.json").read_text())
    scope = cert["guarantee"]["scope"]
    assert scope["privacy_unit"]["id"] == "person_id"
    assert "one person (id column person_id) with all their rows" in scope["adjacency_description"]
    # the spec's bounds k = 4, g = 2, c = 3: l2² = 3² + 1² = 10 (the spec's description, by hand)
    assert cert["sensitivity"]["l2_squared_exact"] == "10"
    capsys.readouterr()
    assert main(["verify", str(tmp_path / "certificate.json")]) == 0
    capsys.readouterr()
    operator = tmp_path / "operator.json"
    assert main(["release", str(VISITS_SPEC), "--data", str(VISITS_DATA), "--seed", "5", "--insecure-seed",
                 "--operator-report", str(operator)]) == 0
    document = json.loads(capsys.readouterr().out)
    assert set(document["bounding"]) == {"privacy_unit", "method", "note"} and "records" not in document
    report = json.loads(operator.read_text())  # the exact counts go to the operator only (issue 35)
    assert report["bounding"]["rows"] == sum(sum(c.values()) for c in recount(VISITS_DATA).values())
    assert report["records"] == report["bounding"]["rows_kept"]


def test_missing_id_is_one_line(tmp_path, capsys):
    data = tmp_path / "noid.csv"
    data.write_text(VISITS_DATA.read_text().replace("person_id", "pid", 1))
    assert main(["release", str(VISITS_SPEC), "--data", str(data)]) == 2
    err = capsys.readouterr().err
    assert "person_id" in err and len(err.strip().splitlines()) == 1


AUDIT_DRAWS = 40_000


def release_path_differences(tmp_path: Path, spec, truncate: bool, runs: int = 20) -> np.ndarray:
    """φ(bound(D ∪ P)) − φ(bound(D)) through the release path, P a heavy person (12 visits in one cell
    and 3 in another); without truncation, P's raw contribution."""
    base = [(f"Q{i}", age, clinic, 30) for i, (age, clinic) in
            enumerate(itertools.product(["0-17", "18-39", "40-64", "65+"], ["north", "south", "east", "west", "central"]))]
    heavy = [("P", "40-64", "east", 30)] * 12 + [("P", "65+", "west", 30)] * 3
    without = write_csv(tmp_path / "without.csv", base)
    with_p = write_csv(tmp_path / "with.csv", base + heavy)
    query = compile_query(spec)
    out = []
    for seed in range(runs):
        values = []
        for path in (without, with_p):
            con, source = sources.connect(), sources.open_source(path)
            if truncate:
                source, _ = bound_contributions(con, source, spec, query, random_source(seed, True))
            values.append(sources.answer(con, source, spec, query=query)[0])
        out.append(values[1] - values[0])
    return np.unique(np.array(out), axis=0)


def test_audit_on_the_release_path_does_not_refute(tmp_path):
    spec = dpopt.load_spec(VISITS_SPEC)
    sol = dpopt.solve(spec)
    differences = release_path_differences(tmp_path, spec, truncate=True)
    assert np.all(np.abs(differences).sum(axis=1) <= float(sol.problem.space.l1))
    observed = SensitivitySpace.from_vectors(np.vstack([differences, -differences]), method="release path",
                                             adjacency="add/remove person P", complete=True)
    result = audit_mechanism(sol.mechanism, observed, spec.privacy, draws=AUDIT_DRAWS)
    assert result.audited and result.passed, result.to_dict()


def test_audit_refutes_when_truncation_is_skipped(tmp_path):
    # P's 15 raw rows move the table by l2 = √(12² + 3²) ≈ 12.4, against the certified √10 ≈ 3.2
    spec = dpopt.load_spec(VISITS_SPEC)
    sol = dpopt.solve(spec)
    differences = release_path_differences(tmp_path, spec, truncate=False, runs=1)
    observed = SensitivitySpace.from_vectors(np.vstack([differences, -differences]), method="release path",
                                             adjacency="add/remove person P", complete=True)
    result = audit_mechanism(sol.mechanism, observed, spec.privacy, draws=AUDIT_DRAWS)
    assert result.audited and not result.passed, result.to_dict()


def test_out_of_bounds_values_are_clamped_and_counted(tmp_path):
    # durations 150 and 130 (above the bound 120) and −3 (below 0): three values clamped; nothing truncated
    # (max_rows 20 ≥ any person's rows), so the sum counted is the clamped sum by hand:
    # 10 + 120 + 120 + 0 + 50 = 300
    rows = [("A", "0-17", "north", 10), ("A", "0-17", "north", 150), ("B", "65+", "west", 130),
            ("B", "65+", "west", -3), ("C", "18-39", "east", 50)]
    data = write_csv(tmp_path / "out.csv", rows)
    base = dpopt.load_spec(VISITS_SPEC).model_dump(exclude_none=True)
    spec = dpopt.load_spec({**base, "query": {"kind": "sum", "attribute": "duration"},
                            "data": {**base["data"], "privacy_unit": {"id": "person_id", "max_rows": 20}}})
    con, source = sources.connect(), sources.open_source(data)
    bounded, report = bound_contributions(con, source, spec, compile_query(spec), random_source(1, True))
    assert report["clamped"] == {"duration": 3} and report["rows_dropped"] == 0
    value, records = sources.answer(con, bounded, spec)
    assert value.tolist() == [300.0] and records == 5


def test_a_value_that_is_not_a_number_is_still_refused(tmp_path, capsys):
    data = write_csv(tmp_path / "bad.csv", [("A", "0-17", "north", 10), ("B", "0-17", "north", "long")])
    assert main(["release", str(VISITS_SPEC), "--data", str(data)]) == 2
    err = capsys.readouterr().err
    assert "row 3" in err and "duration" in err and "not a number" in err


@pytest.mark.parametrize("adjacency", ["add_remove", "replace_one"])
@pytest.mark.parametrize("unit", [{"max_rows": 8, "max_rows_per_group": 3}, {"max_rows": 8, "max_groups": 30}])
def test_extreme_vectors_attain_the_norms_when_not_listed(unit, adjacency):
    # 40 cells: too many contributions to list, so the space states the vectors attaining its norms;
    # their norms, computed here exactly, are the derived ones (and each is an allowed difference)
    attributes = {"a": [str(i) for i in range(40)]}
    space = dpopt.derive(dpopt.load_spec(spec_of({"kind": "histogram", "attribute": "a"}, unit, adjacency,
                                                 attributes)))
    assert space.listed() is None
    extremes = space.extreme_vectors()
    assert brute_norms(extremes, pairs=False) == (space.l1, space.l2_squared, space.linf)
    parts = [np.clip(extremes, 0, None), np.clip(-extremes, 0, None)]  # the two persons' contributions
    for v in parts:
        assert np.all(v.sum(axis=1) <= 8) and np.all(v.max(axis=1) <= unit.get("max_rows_per_group", 8))
        assert np.all((v > 0).sum(axis=1) <= unit.get("max_groups", 40))
