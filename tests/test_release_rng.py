"""Secure randomness: AES-128-CTR from OS entropy by default, seeds only when explicitly insecure."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import ROOT

from dpopt.cli import main
from dpopt.rng import (
    InsecureSeedError,
    RandomSource,
    aes_generator,
    random_source,
    secure_generator,
)

TABLE = ROOT / "specs" / "table_replace_gdp.yaml"
DATA = ROOT / "specs" / "data" / "survey.csv"


def test_the_generator_is_aes128_in_counter_mode():
    # The AES-128 encryption of the all-zero block under the all-zero key is
    # 66e94bd4 ef8a2c3b 884cfa59 ca342b2e (the AES known-answer value every implementation reproduces);
    # read as two little-endian 64-bit words.
    words = aes_generator(0).bit_generator.random_raw(2)
    assert [int(w) for w in words] == [0x3B2C8AEFD44BE966, 0x2E2B34CA59FA4C88]


def test_the_stream_is_aes_ecb_of_the_counter_blocks_under_openssl():
    # An independent AES (OpenSSL through `cryptography`): block i = AES_k(i as 16 little-endian bytes).
    ciphers = pytest.importorskip("cryptography.hazmat.primitives.ciphers")
    key = 0x0F1E2D3C4B5A69788796A5B4C3D2E1F0
    encrypt = ciphers.Cipher(
        ciphers.algorithms.AES(key.to_bytes(16, "little")), ciphers.modes.ECB()
    ).encryptor()
    expected = np.frombuffer(
        b"".join(encrypt.update(i.to_bytes(16, "little")) for i in range(5)), dtype="<u8"
    )
    assert np.array_equal(aes_generator(key).bit_generator.random_raw(10), expected)


def test_a_seed_is_refused_unless_insecure_seeding_is_asked_for():
    with pytest.raises(InsecureSeedError, match="--insecure-seed"):
        random_source(seed=1)
    with pytest.raises(InsecureSeedError, match="needs --seed"):
        random_source(insecure_seed=True)
    with pytest.raises(InsecureSeedError, match="non-negative"):
        random_source(seed=-3, insecure_seed=True)
    assert random_source(seed=1, insecure_seed=True).seeded


def test_streams_are_keyed_by_seedsequence_children():
    source = random_source(seed=42, insecure_seed=True)
    child = np.random.SeedSequence(42, pool_size=8).spawn(3)[1].spawn(5)[4]
    low, high = (int(w) for w in child.generate_state(2, np.uint64))
    assert np.array_equal(source.stream(1, 4).random(8), aes_generator(low | high << 64).random(8))
    assert not np.array_equal(source.stream(1, 4).random(8), source.stream(1, 3).random(8))
    assert np.array_equal(source.stream().random(4), random_source(42, True).stream().random(4))


def test_secure_sources_differ_and_never_record_their_entropy():
    a, b = random_source(), random_source()
    assert not np.array_equal(a.stream(0, 0).random(4), b.stream(0, 0).random(4))
    described = a.describe()
    assert described["kind"] == "csprng" and "AES-128-CTR" in described["generator"]
    assert "seed" not in described and str(a._entropy) not in repr(a) + str(described)
    assert isinstance(a, RandomSource)
    assert random_source(seed=3, insecure_seed=True).describe()["kind"] == "insecure_seed"


def test_default_sampling_uses_the_csprng():
    g = secure_generator()
    assert type(g.bit_generator).__name__ == "AESCounter"


@pytest.mark.parametrize(
    "flags,message", [(["--seed", "1"], "--insecure-seed"), (["--insecure-seed"], "needs --seed")]
)
def test_cli_refuses_insecure_seeding_in_one_line(flags, message, capsys):
    assert main(["release", str(TABLE), "--data", str(DATA), *flags]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and err.startswith("dpopt: error:")


def test_cli_release_without_a_seed_uses_the_csprng(capsys):
    assert main(["release", str(TABLE), "--data", str(DATA)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert "seed" not in doc and doc["randomness"]["kind"] == "csprng" and "records" not in doc


def test_sampling_without_a_generator_draws_from_the_csprng(monkeypatch):
    import dpopt
    import dpopt.mechanisms.base as base_module

    calls = []

    def counted():
        calls.append(1)
        return secure_generator()

    monkeypatch.setattr(base_module, "secure_generator", counted)
    mechanism = dpopt.solve(TABLE).mechanism
    mechanism.release(np.zeros(6))
    assert calls == [1]
