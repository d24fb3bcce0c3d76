"""Grouped releases: one certificate, the guarantee per group and composed, vectorized block noise.

Expected counts come from ``collections.Counter`` over the records; composed guarantees from
the composition theorems written out in each test; noise laws from the mechanism's own
closed forms (variances), with 5-standard-error tolerances derived in the comments.
"""

from __future__ import annotations

import json
import math
from collections import Counter

import duckdb
import numpy as np
import pytest
from conftest import ROOT, make_spec
from release_data import RACES, SEXES, make_records, public_groups, write_csv, write_parquet

import dpopt
from dpopt.cli import main
from dpopt.errors import SpecError, UnsupportedSpecError
from dpopt.release import release_groups

BLOCKS_SPEC = ROOT / "specs" / "block_tables_discrete_zcdp.yaml"
BLOCKS_DATA = ROOT / "specs" / "data" / "blocks.csv"
BLOCK_LIST = ROOT / "specs" / "data" / "block_list.csv"


@pytest.fixture(scope="module")
def records():
    return make_records(n=3000, groups=40)


@pytest.fixture(scope="module")
def parquet_file(records, tmp_path_factory):
    return write_parquet(tmp_path_factory.mktemp("g") / "records.parquet", records)


def _expected(records, column):
    count = Counter((r[column], r["race"], r["sex"]) for r in records)
    keys = sorted({r[column] for r in records})
    return keys, np.array([[count[(k, race, sex)] for race in RACES for sex in SEXES] for k in keys])


def test_every_group_gets_its_table(records, parquet_file):
    # μ = 1e6: the noise has σ = √2/1e6, so the release equals the Counter counts to 1e-4
    spec = make_spec(privacy={"gdp": {"mu": 1e6}})
    rel = release_groups(spec, parquet_file, ["block", "tract"], groups=public_groups(), seed=1, insecure_seed=True)
    for column in ("block", "tract"):
        keys, expected = _expected(records, column)
        level = rel.level(column)
        assert [k.item() if hasattr(k, "item") else k for k in level.keys] == keys
        assert np.allclose(level.values, expected, atol=1e-4)
        assert level.records == len(records)
    assert rel.labels[0] == "race=white,sex=f" and rel.randomness["kind"] == "insecure_seed"


@pytest.mark.parametrize(
    "privacy,columns,adjacency,expected",
    [
        # one grouping column, one record: parallel composition, the per-group guarantee
        ({"gdp": {"mu": 1.0}}, ["block"], {"kind": "replace_one"}, {"mu": 1.0}),
        # two columns: G_μ ⊗ G_μ = G_{√2 μ} (Dong, Roth & Su 2022, Cor. 3.3)
        ({"gdp": {"mu": 1.0}}, ["block", "tract"], {"kind": "add_remove"}, {"mu": math.sqrt(2)}),
        # zCDP adds up (Bun & Steinke 2016, Lemma 2.3)
        ({"zcdp": {"rho": 0.25}}, ["block", "tract"], {"kind": "add_remove"}, {"rho": 0.5}),
        # pure ε adds up; Hamming distance 2 changes up to 2 records, so up to 2 × 2 groups
        (
            {"pure": {"epsilon": 0.5}},
            ["block", "tract"],
            {"kind": "hamming", "distance": 2},
            {"epsilon": 2.0},
        ),
        (
            {"approx": {"epsilon": 0.5, "delta": 1e-6}},
            ["block", "tract"],
            {"kind": "add_remove"},
            {"epsilon": 1.0, "delta": 2e-6},
        ),
    ],
)
def test_the_certificate_composes_over_the_groups_a_record_touches(
    privacy, columns, adjacency, expected, parquet_file
):
    spec = make_spec(privacy=privacy, adjacency=adjacency)
    rel = release_groups(spec, parquet_file, columns, groups=public_groups(), seed=2, insecure_seed=True)
    block = rel.certificate["groups"]
    assert block["columns"] == columns and rel.certificate["guarantee"]["definition"] == next(iter(privacy))
    for name, value in expected.items():
        assert block["composition"][name] == pytest.approx(value, rel=1e-15)
        assert block["composition"][name] >= value * (1 - 1e-16)  # rounded up
    assert dpopt.verify(rel.certificate).passed


def test_verify_catches_a_tampered_composition(parquet_file):
    rel = release_groups(
        make_spec(adjacency={"kind": "add_remove"}),
        parquet_file,
        ["block", "tract"],
        groups=public_groups(),
        seed=2,
        insecure_seed=True,
    )
    data = json.loads(rel.certificate.to_json())
    data["groups"]["composition"]["mu"] = 1.0  # claims the per-group μ for the whole release
    result = dpopt.verify(data)
    assert not result.passed and "groups.composition" in {c.claim for c in result.failed}
    data = json.loads(rel.certificate.to_json())
    data["groups"]["columns"] = ["block"]  # hides a grouping column
    assert not dpopt.verify(data).passed


def test_scope_says_where_the_groups_come_from(parquet_file, tmp_path, records):
    # groups found in the data only would publish which groups exist: refused, saying how to declare them
    with pytest.raises(SpecError, match=r"groups of block are not declared public: list them in the spec "
                                        r"\(data.attributes.block"):
        release_groups(make_spec(adjacency={"kind": "add_remove"}), parquet_file, "block", seed=3, insecure_seed=True)
    replace = release_groups(make_spec(), parquet_file, "block", groups=public_groups(), seed=3,
                             insecure_seed=True).certificate["groups"]
    assert "caveat" not in replace["levels"][0] and "group sizes are not protected" in replace["adjacency"]
    public = release_groups(
        make_spec(adjacency={"kind": "add_remove"}),
        parquet_file,
        "block",
        groups={"block": range(45)},
        seed=3,
        insecure_seed=True,
    )
    assert (
        public.level("block").values.shape == (45, 6)
        and "caveat" not in public.certificate["groups"]["levels"][0]
    )


def test_groups_declared_in_the_spec_are_the_domain(tmp_path, records):
    rows = [{**r, "block": f"b{r['block']}"} for r in records]
    data = write_csv(tmp_path / "r.csv", rows)
    declared = [f"b{i}" for i in range(42)]
    spec = make_spec(
        data={"attributes": {**make_spec()["data"]["attributes"], "block": declared}},
        privacy={"gdp": {"mu": 1e6}},
    )
    rel = release_groups(spec, data, "block", seed=4, insecure_seed=True)
    level = rel.level("block")
    assert list(level.keys) == declared and np.allclose(level.values[40:], 0, atol=1e-4)
    assert level.domain == "declared in the spec (data.attributes.block)"


def test_specs_a_grouped_release_cannot_serve_are_refused(parquet_file):
    with pytest.raises(SpecError, match="data.n"):
        release_groups(
            make_spec(data={**make_spec()["data"], "n": 3000}),
            parquet_file,
            "block",
            seed=1,
            insecure_seed=True,
        )
    numeric_group = make_spec(
        data={"attributes": {**make_spec()["data"]["attributes"], "block": {"min": 0, "max": 9}}}
    )
    with pytest.raises(UnsupportedSpecError, match="grouping column must be categorical"):
        release_groups(numeric_group, parquet_file, "block", seed=1, insecure_seed=True)
    with pytest.raises(SpecError, match="listed twice"):
        release_groups(make_spec(), parquet_file, ["block", "block"], seed=1, insecure_seed=True)
    person = make_spec(data={**make_spec()["data"], "privacy_unit": {"id": "block", "max_rows": 2}})
    with pytest.raises(SpecError, match="block is the privacy unit's id"):  # one table per person: refused
        release_groups(person, parquet_file, "block", groups=public_groups(), seed=1, insecure_seed=True)


def test_noise_of_a_block_depends_only_on_its_stream(tmp_path, records):
    # Same seed, same public groups, different records in groups 8..39: with 8 groups per stream the
    # released tables of groups 0..7 (stream (0, 0)) are identical, the others differ.
    changed = [r for r in records if r["block"] < 8 or r["block"] % 2 == 0]
    spec = make_spec(adjacency={"kind": "add_remove"}, mechanism="gaussian")
    kwargs = {"groups": {"block": range(40)}, "seed": 5, "insecure_seed": True, "block": 8}
    a = release_groups(spec, write_parquet(tmp_path / "a.parquet", records), "block", **kwargs).level("block")
    b = release_groups(spec, write_parquet(tmp_path / "b.parquet", changed), "block", **kwargs).level("block")
    assert np.array_equal(a.values[:8], b.values[:8]) and not np.array_equal(a.values[8:], b.values[8:])


def test_projected_gaussian_noise_over_many_groups_has_its_law(tmp_path):
    # replace_one table, μ = 1: projected Gaussian with σ² = Δ₂²/μ² = 2 on the sum-zero subspace of R^6,
    # so each cell's noise has variance σ²(1 - 1/6) = 5/3 and each group's noise sums to 0 exactly.
    # 3000 groups × 6 cells: the sample variance of 3000 draws has SE ≈ var·√(2/3000); 5 SE allowed.
    records = make_records(n=6000, seed=8, groups=3000)
    data = write_parquet(tmp_path / "many.parquet", records)
    rel = release_groups(
        make_spec(mechanism="projected_gaussian"),
        data,
        "block",
        groups={"block": range(3000)},
        seed=6,
        insecure_seed=True,
    )
    _, true = _expected(records, "block")
    present = sorted({r["block"] for r in records})
    noise = rel.level("block").values[present] - true
    assert rel.mechanism.family == "projected_gaussian"
    assert np.allclose(noise.sum(axis=1), 0.0, atol=1e-9)
    var = 2.0 * (1 - 1 / 6)
    se = var * math.sqrt(2 / noise.shape[0])
    assert np.all(np.abs(noise.var(axis=0) - var) <= 5 * se)


def test_discrete_noise_keeps_grouped_counts_integer():
    rel = release_groups(
        BLOCKS_SPEC, BLOCKS_DATA, "block", groups={"block": BLOCK_LIST}, seed=7, insecure_seed=True
    )
    level = rel.level("block")
    # zCDP counts: the discrete Gaussian, or the isotropic Gaussian measured exactly on the lattice (the same law)
    assert rel.mechanism.family in ("discrete_gaussian", "gaussian") and rel.mechanism.integer_noise
    assert level.values.dtype == np.int64
    assert len(level.keys) == 40 and level.keys[-1] == "B040"  # the public, empty block is released


def test_cli_grouped_release_writes_parquet_tables_and_a_certificate(tmp_path, capsys):
    out = tmp_path / "out"
    argv = [
        "release",
        str(BLOCKS_SPEC),
        "--data",
        str(BLOCKS_DATA),
        "--group-by",
        "block",
        "--group-by",
        "tract",
        "--groups",
        str(BLOCK_LIST),
        "--seed",
        "9",
        "--insecure-seed",
        "--out",
        str(out),
    ]
    assert main(argv) == 0
    doc = json.loads((out / "release.json").read_text())
    assert doc["groups"]["composition"]["rho"] == 1.0 and "records" not in doc
    table = duckdb.sql(
        f"SELECT * FROM read_parquet('{out / 'release_tract.parquet'}') ORDER BY tract"
    ).fetchall()
    # the tract key, then per cell (6 cells) its value, standard error, 95% margin of error and 95% interval
    assert [row[0] for row in table] == ["T01", "T02", "T03", "T04"] and len(table[0]) == 1 + 5 * 6
    low, high = table[0][4::5], table[0][5::5]
    assert all(lo <= v + m and hi >= v - m for lo, hi, v, m in zip(low, high, table[0][1::5], table[0][3::5]))
    assert main(["verify", str(out / "certificate.json")]) == 0
    capsys.readouterr()
    assert main(argv[:-2]) == 0  # without --out: the document with the values on stdout
    printed = json.loads(capsys.readouterr().out)
    assert printed["release"]["tract"]["T01"] == dict(zip(doc["labels"], table[0][1::5]))


def test_cli_refuses_group_options_without_group_by(capsys):
    assert main(["release", str(BLOCKS_SPEC), "--data", str(BLOCKS_DATA), "--groups", str(BLOCKS_DATA)]) == 2
    assert "--group-by" in capsys.readouterr().err
    assert main(["release", str(BLOCKS_SPEC), "--data", str(BLOCKS_DATA), "--scheduler", "tcp://x:1"]) == 2
    assert "--engine dask" in capsys.readouterr().err
