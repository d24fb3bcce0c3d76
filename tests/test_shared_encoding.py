"""One encoding of the per-cell block for certificate.json and mechanism.json (dpopt.certificate.model.dumps_sharing):
the same text as json.dumps of the whole document (the reference: the standard library's encoder)."""

from __future__ import annotations

import json

import pytest

from dpopt.certificate import model
from dpopt.certificate.model import Certificate, ascii_json, dumps_sharing


def _document():
    block = {"cells": [{"cell": "age<=16,région=Zürich", "standard_error": 1.5}], "method": "Φ⁻¹(0.975)·SE"}
    return {"family": "x", "nested": {"per_cell": block, "other": [1, 2.5, None]}, "tail": "é"}, block


@pytest.mark.parametrize("ascii_only", [True, False])
def test_shared_block_gives_the_whole_documents_encoding(ascii_only):
    doc, block = _document()
    text = json.dumps(block, ensure_ascii=ascii_only)
    assert dumps_sharing(doc, block, text, ensure_ascii=ascii_only) == json.dumps(doc, ensure_ascii=ascii_only)


def test_a_block_absent_or_given_twice_is_encoded_whole():
    doc, block = _document()
    text = "WRONG"  # never spliced in: the block is not found exactly once
    assert dumps_sharing(doc, {"per_cell": 1}, text) == json.dumps(doc)
    twice = {"a": block, "b": block}
    assert dumps_sharing(twice, block, text) == json.dumps(twice)
    impostor = {"x": model._SHARED, "per_cell": block}  # the stand-in string in the data: encoded whole
    assert dumps_sharing(impostor, block, text) == json.dumps(impostor)


def test_certificate_past_the_indented_size_writes_the_same_text_with_a_shared_block():
    doc, block = _document()
    cert = Certificate({"sensitivity": {"dimension": 10**6}, "utility": {"per_cell": block}, "other": doc})
    shared = (block, json.dumps(block, ensure_ascii=False))
    assert not cert.indented()
    assert cert.to_json(shared) == cert.to_json()


def test_ascii_form_of_a_unicode_encoding_is_jsons_own():
    """ensure_ascii=True's escapes (BMP and a surrogate pair beyond it) from the ensure_ascii=False text."""
    doc, _ = _document()
    doc["astral"] = "𝔼‖Z‖² ≤ \\ \"q\" \u2028"
    assert ascii_json(json.dumps(doc, ensure_ascii=False)) == json.dumps(doc)
