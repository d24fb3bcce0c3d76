"""``dpopt synthesize`` and :func:`dpopt.synthesize`: the pipeline around the synthesizer.

The synthesizer (:func:`dpopt.synth.synthesize_records`) is replaced by ``tests/synth_fake.py`` (same
signature, independent columns), so that these tests check the pipeline — measurements, selection, budget,
certificate, verification, outputs, refusals — and not the synthesizer's accuracy. Expected values come from
the spec (the budget's shares, ε = √(8ρ) of the exponential mechanism: Cesar & Rogers 2021), from the data
file (its columns and levels) and from the definitions of the outputs, never from the code's own output.
"""

from __future__ import annotations

import csv
import importlib.util
import json
import math
import sys
from fractions import Fraction
from pathlib import Path

import duckdb
import numpy as np
import pytest

import synth_fake
from dpopt.cli import main

ATTRIBUTES = {"a": ["x", "y", "z"], "b": ["0", "1"], "c": ["p", "q", "r", "s"]}
RECORDS = 300


@pytest.fixture(autouse=True)
def fake_synthesizer(monkeypatch):
    """The fake stands in for dpopt.synth whether or not the real package is present."""
    if importlib.util.find_spec("dpopt.synth") is None:
        monkeypatch.setitem(sys.modules, "dpopt.synth", synth_fake)
    else:
        import dpopt.synth

        monkeypatch.setattr(dpopt.synth, "synthesize_records", synth_fake.synthesize_records)


def _spec(tmp_path: Path, selection: str = "fixed", **synthesize) -> Path:
    document = {"dpopt": 1, "name": "three attributes", "data": {"attributes": ATTRIBUTES},
                "adjacency": "add_remove", "privacy": {"zcdp": {"rho": 1}}, "mechanism": "marginal_gaussian",
                "synthesize": {"selection": selection, **synthesize}}
    path = tmp_path / f"spec_{selection}.json"
    path.write_text(json.dumps(document))
    return path


def _data(tmp_path: Path, rows: list[list[str]] | None = None, header=("a", "b", "c")) -> Path:
    rng = np.random.default_rng(0)
    if rows is None:
        rows = [[rng.choice(levels) for levels in ATTRIBUTES.values()] for _ in range(RECORDS)]
    path = tmp_path / "data.csv"
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def _run(*argv) -> int:
    return main(["synthesize", *map(str, argv), "--seed", "7", "--insecure-seed"])


@pytest.fixture(scope="module")
def adaptive_folder(tmp_path_factory):
    """One adaptive run through the CLI, shared by the checks of its outputs (about 5 s)."""
    tmp = tmp_path_factory.mktemp("adaptive")
    mp = pytest.MonkeyPatch()
    if importlib.util.find_spec("dpopt.synth") is None:
        mp.setitem(sys.modules, "dpopt.synth", synth_fake)
    else:
        import dpopt.synth

        mp.setattr(dpopt.synth, "synthesize_records", synth_fake.synthesize_records)
    try:
        assert _run(_spec(tmp, "adaptive"), "--data", _data(tmp), "--out", tmp / "out") == 0
    finally:
        mp.undo()
    return tmp / "out"


def test_the_folder_holds_the_synthetic_files_the_tables_the_certificate_and_the_report(adaptive_folder):
    assert sorted(p.name for p in adaptive_folder.iterdir()) == [
        "certificate.json", "marginals.json", "report.html", "report.md", "residual.png", "synthetic.csv",
        "synthetic.parquet"]


def test_synthetic_csv_and_parquet_have_the_input_columns_and_only_its_levels(adaptive_folder):
    rows = list(csv.reader((adaptive_folder / "synthetic.csv").open()))
    assert rows[0] == list(ATTRIBUTES)
    for j, name in enumerate(ATTRIBUTES):
        assert {r[j] for r in rows[1:]} <= set(ATTRIBUTES[name])
    parquet = duckdb.sql(f"SELECT * FROM read_parquet('{adaptive_folder / 'synthetic.parquet'}')").fetchall()
    assert [list(r) for r in parquet] == rows[1:]


def test_adaptive_certificate_verifies_and_states_each_step(adaptive_folder, capsys):
    assert main(["verify", str(adaptive_folder / "certificate.json")]) == 0
    cert = json.loads((adaptive_folder / "certificate.json").read_text())
    assert cert["kind"] == "synthesis"
    # two rounds (3 attributes: a spanning tree has 2 pairs), each a third of rho = 1 split in two, rounded
    # down to 12 significant digits: 1/6 -> 0.166666666666
    steps = cert["selection"]["steps"]
    assert [s["rho"] for s in steps] == ["0.166666666666"] * 2
    for s in steps:  # the exponential mechanism is eps^2/8-zCDP: eps = sqrt(8 rho), never above it
        assert s["epsilon"] == pytest.approx(math.sqrt(8 * 0.166666666666), rel=1e-15)
        assert Fraction(s["epsilon"]) ** 2 / 8 <= Fraction("0.166666666666")
        assert s["sensitivity"] == 1  # add/remove moves one count of a two-way table
    assert [s["candidates"] for s in steps] == [3, 2]  # 3 pairs; after one, the 2 that join the third attribute
    assert len({frozenset(s["selected"]) for s in steps}) == 2
    total = Fraction("0.333333333333") * 2 + Fraction("0.166666666666") * 2
    assert Fraction(cert["budget"]["total"]["rho"]) == total <= 1
    assert [m["part"] for m in cert["measurements"]] == ["one_way", "selected"]
    assert [m["marginals"] for m in cert["measurements"]][1] == [s["selected"] for s in steps]


def test_a_tampered_certificate_fails_verification(adaptive_folder, tmp_path, capsys):
    cert = json.loads((adaptive_folder / "certificate.json").read_text())
    edits = {
        "round epsilon": lambda c: c["selection"]["steps"][0].__setitem__("epsilon", 2 * c["selection"]["steps"][0][
            "epsilon"]),
        "budget total": lambda c: c["budget"]["total"].__setitem__("rho", "0.5"),
        "inner certificate": lambda c: c["measurements"][1]["certificate"]["mechanism"]["parameters"].__setitem__(
            "multiplier", 0.5),
        "selected pair": lambda c: c["measurements"][1].__setitem__("marginals", [["a", "b"], ["a", "c"], ["b", "c"]]),
        "post-processing claim": lambda c: c["synthesis"].__setitem__("post_processing", "free"),
    }
    for name, edit in edits.items():
        tampered = json.loads(json.dumps(cert))
        edit(tampered)
        path = tmp_path / "tampered.json"
        path.write_text(json.dumps(tampered))
        assert main(["verify", str(path)]) == 1, name


def test_no_exact_count_of_the_data_is_published(adaptive_folder):
    """The number of records (300) is private under add/remove: no file states it (the synthetic file has the
    released tables' noisy total), and no true table is written (the selection's scores stay inside)."""
    text = {p.name: p.read_text() for p in adaptive_folder.iterdir() if p.suffix in (".json", ".md", ".html", ".csv")}
    document = json.loads(text["marginals.json"])
    assert document["records"] == len(text["synthetic.csv"].splitlines()) - 1
    cert = json.loads(text["certificate.json"])
    for step in cert["selection"]["steps"]:  # the selected pair and its privacy, never a score of the data
        assert set(step) == {"round", "rho", "epsilon", "sensitivity", "candidates", "selected"}
    assert not any('"n": 300' in t or "records counted" in t for t in text.values())


def test_fixed_selection_from_python_measures_every_pair(tmp_path):
    import dpopt

    release = dpopt.synthesize(_spec(tmp_path), _data(tmp_path), seed=3, insecure_seed=True)
    cert = release.certificate.data
    assert cert["selection"] is None
    assert cert["measurements"][0]["marginals"] == [["a", "b"], ["a", "c"], ["b", "c"]]
    assert set(release.residual) == {"a×b", "a×c", "b×c"}
    assert release.records.shape[1] == 3 and release.records.dtype == np.int32
    from dpopt.synthesis import verify_synthesis

    assert verify_synthesis(release.certificate).passed


@pytest.mark.parametrize("rows, header, message", [
    ([["x", "0", "t"]], ("a", "b", "c"), "column c: 't' is not a level"),
    ([["x", "0"]], ("a", "b"), "missing column(s) c"),
    ([], ("a", "b", "c"), "has no records"),
])
def test_bad_data_is_one_line_and_nothing_is_written(tmp_path, capsys, rows, header, message):
    out = tmp_path / "out"
    assert _run(_spec(tmp_path), "--data", _data(tmp_path, rows, header), "--out", out) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert message in err[-1] and err[-1].startswith("dpopt: error:") and "Traceback" not in "\n".join(err)
    assert not out.exists() and not any(p.name.startswith(".out") for p in tmp_path.iterdir())


def test_a_bad_spec_names_the_field(tmp_path, capsys):
    spec = _spec(tmp_path, "adaptive", marginals=[["a", "b", "c"]])
    assert _run(spec, "--data", _data(tmp_path), "--out", tmp_path / "out") == 2
    assert "synthesize.marginals" in capsys.readouterr().err


def test_an_interrupted_write_leaves_the_earlier_folder(adaptive_folder, tmp_path, monkeypatch, capsys):
    """Atomicity: the run is interrupted while its folder is being written (the report, after the synthetic
    files); the folder from before is untouched and no staging folder is left."""
    import shutil

    import dpopt.synthesis.pipeline as pipeline

    out = tmp_path / "out"
    shutil.copytree(adaptive_folder, out)
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(pipeline, "synthesis_html", interrupted)
    assert _run(_spec(tmp_path), "--data", _data(tmp_path), "--out", out) == 130
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.csv", "out", "spec_fixed.json"]


def test_verify_of_the_folder_rederives_each_file_and_catches_an_edited_record(adaptive_folder, tmp_path, capsys):
    import shutil

    assert main(["verify", str(adaptive_folder)]) == 0
    out = capsys.readouterr().out
    assert all(f"PASS  {name}" in out for name in ("certificate.json", "marginals.json", "synthetic.csv",
                                                   "synthetic.parquet"))
    edited = tmp_path / "edited"
    shutil.copytree(adaptive_folder, edited)
    lines = (edited / "synthetic.csv").read_text().splitlines()
    first = lines[1].split(",")
    first[0] = next(level for level in ATTRIBUTES["a"] if level != first[0])  # another level of a: a record moved
    lines[1] = ",".join(first)
    (edited / "synthetic.csv").write_text("\n".join(lines) + "\n")
    assert main(["verify", str(edited)]) == 1
    assert "FAIL  synthetic.parquet" in capsys.readouterr().out  # the two files no longer hold the same rows
    shutil.copy(adaptive_folder / "synthetic.csv", edited / "synthetic.csv")
    document = json.loads((edited / "marginals.json").read_text())
    document["residual_l1"]["a"] += 2  # a residual the rows do not give
    (edited / "marginals.json").write_text(json.dumps(document))
    assert main(["verify", str(edited)]) == 1
    assert "FAIL  synthetic.csv" in capsys.readouterr().out


def test_a_signed_synthesis_folder_verifies_with_the_key_and_fails_when_a_record_changes(adaptive_folder, tmp_path,
                                                                                         capsys):
    # Ed25519 (RFC 8032) over the manifest of every file's SHA-256: any edited file leaves the folder unsigned.
    # The adaptive run is seeded, so the folder is signed as a TEST release (verified here with --accept-seeded;
    # the refusal without it is the release folders' code, tests/test_release_signature.py).
    import shutil

    pytest.importorskip("cryptography")
    from dpopt.release.signature import SIGNATURE_FILE

    folder = tmp_path / "signed"
    shutil.copytree(adaptive_folder, folder)
    assert main(["keygen", str(tmp_path / "agency.pem")]) == 0
    assert main(["sign", str(folder), "--key", str(tmp_path / "agency.pem")]) == 0
    manifest = json.loads((folder / SIGNATURE_FILE).read_text())["manifest"]
    assert manifest["mode"] == "test"
    assert set(manifest["files"]) == {p.name for p in adaptive_folder.iterdir()}
    public = str(tmp_path / "agency.pub.pem")
    capsys.readouterr()
    assert main(["verify", str(folder), "--public-key", public, "--accept-seeded"]) == 0
    assert f"PASS  {SIGNATURE_FILE}" in capsys.readouterr().out
    lines = (folder / "synthetic.csv").read_text().splitlines()
    first = lines[1].split(",")
    first[0] = next(level for level in ATTRIBUTES["a"] if level != first[0])
    lines[1] = ",".join(first)
    (folder / "synthetic.csv").write_text("\n".join(lines) + "\n")
    capsys.readouterr()
    assert main(["verify", str(folder), "--public-key", public, "--accept-seeded"]) == 1
    assert f"FAIL  {SIGNATURE_FILE}" in capsys.readouterr().out


def test_by_default_the_published_tables_are_the_records_tabulations_and_verify_holds_them_to_it(tmp_path, capsys):
    """``exact: true`` (the default): marginals.json holds, for every measured marginal, the synthetic records' own
    counts, tallied here from synthetic.csv with a Counter (the definition of a tabulation), so every residual is 0
    and the tables are consistent (a×b and a×c give a the same margin) and whole; the certificate says so; moving one
    count of a published table between two cells (still non-negative, same total) fails ``dpopt verify DIR``."""
    from collections import Counter

    out = tmp_path / "out"
    assert _run(_spec(tmp_path), "--data", _data(tmp_path), "--out", out) == 0
    document = json.loads((out / "marginals.json").read_text())
    rows = list(csv.DictReader((out / "synthetic.csv").open()))
    assert document["records"] == len(rows)
    for table in document["tables"]:
        counted = Counter(tuple(r[a] for a in table["attributes"]) for r in rows)
        a, b = table["levels"]
        assert table["counts"] == [[counted[(x, y)] for y in b] for x in a], table["attributes"]
    margins = {tuple(t["attributes"]): np.asarray(t["counts"]) for t in document["tables"]}
    assert np.array_equal(margins[("a", "b")].sum(axis=1), margins[("a", "c")].sum(axis=1))
    assert set(document["residual_l1"].values()) == {0}
    cert = json.loads((out / "certificate.json").read_text())
    assert "tabulation" in cert["synthesis"]["published_tables"]
    assert cert["synthesis"]["records_from"] == "the noisy tables' least-squares total"
    assert "postprocess" not in cert["measurements"][0]["certificate"]  # its tables are not published
    assert main(["verify", str(out)]) == 0
    counts = document["tables"][0]["counts"]
    moved = next((i, j) for i, row in enumerate(counts) for j, v in enumerate(row) if v > 0)
    counts[moved[0]][moved[1]] -= 1
    counts[moved[0]][1 - moved[1] if len(counts[0]) == 2 else 0] += 1
    (out / "marginals.json").write_text(json.dumps(document))
    capsys.readouterr()
    assert main(["verify", str(out)]) == 1
    assert "FAIL  synthetic.csv" in capsys.readouterr().out


def test_with_exact_false_the_measurements_tables_are_published_and_said_to_be(tmp_path):
    """``exact: false``: the published tables are the measurement's post-processed ones (its consistent
    whole tables: one total for all), not the records' counts; the certificate names that post-processing."""
    import dpopt

    release = dpopt.synthesize(_spec(tmp_path, exact=False), _data(tmp_path), seed=3, insecure_seed=True)
    assert release.certificate["synthesis"]["published_tables"].startswith("each measurement's consistent")
    totals = {float(t.sum()) for t in release.tables.values()}
    assert len(totals) == 1  # consistent: every table has the same total
    assert any(v > 0 for v in release.residual.values())  # the fake's independent columns match no noisy table
    assert release.certificate["measurements"][0]["certificate"]["postprocess"]["method"]["integer"] is True
    from dpopt.synthesis import verify_synthesis

    assert verify_synthesis(release.certificate).passed
