"""The helpers that replaced repeated blocks: the listed vectors of a sensitivity space, the
spec-or-certificate test, and the release document's file form.

Expected values are the definitions themselves, read another way: ``vectors()`` for
``listed()``, a file written by ``Certificate.write`` for ``from_document``, ``json.loads``
for the release text.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
from conftest import make_spec

import dpopt
from dpopt.certificate.model import Certificate
from dpopt.release.batch import release_json, write_release
from dpopt.spec.load import read_document


def test_listed_is_the_vectors_as_floats_or_none_when_not_listed():
    space = dpopt.derive(dpopt.load_spec(make_spec()))
    np.testing.assert_array_equal(space.listed(), np.asarray(space.vectors(), dtype=float))
    assert space.listed().dtype == float
    unlisted = dataclasses.replace(space, _vectors=None)
    assert unlisted.listed() is None


def test_from_document_tells_a_certificate_from_a_spec(tmp_path):
    sol = dpopt.solve(make_spec(query={"kind": "count"}, adjacency={"kind": "add_remove"}))
    path = tmp_path / "certificate.json"
    sol.certificate.write(path)
    cert = Certificate.from_document(read_document(path), str(path))
    assert cert is not None and cert["spec_sha256"] == sol.certificate["spec_sha256"]
    assert Certificate.from_document(make_spec(), "spec") is None


def test_release_json_and_write_release(tmp_path):
    sol = dpopt.solve(make_spec(query={"kind": "count"}, adjacency={"kind": "add_remove"}))
    document = {"name": "ε test", "release": {"count": 1.5}}
    text = release_json(document)
    assert text.endswith("}\n") and "ε" in text and json.loads(text) == document
    written = write_release(document, sol.certificate, tmp_path)
    assert [p.name for p in written] == ["release.json", "certificate.json"]
    assert json.loads(written[0].read_text(encoding="utf-8")) == document
    assert Certificate.from_file(written[1])["spec_sha256"] == sol.certificate["spec_sha256"]
