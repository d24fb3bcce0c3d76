r"""Signed release folders: an Ed25519 signature of what is published (``dpopt sign DIR --key KEY.pem``).

A certificate is the same file for every release of one spec, so its signature says nothing
about the values a release publishes. A release folder is signed as a whole: the signer writes
:data:`SIGNATURE_FILE` holding a manifest and its Ed25519 signature (RFC 8032,
:mod:`dpopt.certificate.signing`). The manifest names

* ``files``: the SHA-256 of every file in the folder (``release.json`` with the released values
  and the digests it names, the certificates, every table; sub-folders included), the signature
  file itself excepted;
* ``mode``: ``production``, or ``test`` for a seeded release (noise drawn from a caller's seed:
  its document's ``randomness`` says so and its certificates carry ``test_release: true``).

The signed message is :data:`FORMAT`, a newline, and the manifest as canonical JSON (keys
sorted, no spaces, ASCII): it cannot be mistaken for a signed certificate's bytes.
:func:`release_signature_check` (``dpopt verify DIR --public-key PUB.pem``) fails when the
signature is not the key's, when any file is edited, added or removed, when the mode the
folder's content states is not the signed one, and for a test release unless the caller
accepts test releases (``--accept-seeded``): a seeded release never verifies as a production one.
"""

from __future__ import annotations

import json
from pathlib import Path

from dpopt.certificate.model import write_atomic
from dpopt.certificate.recorded import is_test_release
from dpopt.certificate.signing import public_key, sign_bytes, valid_signature
from dpopt.core.documents import decode, parse_json
from dpopt.errors import CertificateError, DpoptError
from dpopt.release.bind import RELEASE_FILE, FileCheck, certificate_files, is_seeded, sha256_bytes

SIGNATURE_FILE = "release.sig.json"
"""The signed manifest of a release folder."""

FORMAT = "dpopt signed release 1"
"""The format of :data:`SIGNATURE_FILE`, and the prefix of the signed message."""

PRODUCTION, TEST = "production", "test"


def folder_files(folder: Path) -> dict[str, str]:
    """``{path relative to folder: SHA-256}`` of every file in ``folder`` (recursively) but the signature file."""
    return {path.relative_to(folder).as_posix(): sha256_bytes(path.read_bytes()) for path in sorted(folder.rglob("*"))
            if path.is_file() and path.relative_to(folder) != Path(SIGNATURE_FILE)}


def _json(path: Path):
    try:
        return parse_json(decode(path.read_bytes()))
    except (OSError, DpoptError):
        return None


def release_mode(folder: Path) -> str:
    """:data:`TEST` when the release's noise came from a seed — its document's ``randomness`` says so, or a
    certificate it names carries ``test_release: true`` (a synthesis folder, which has no release document: its
    ``certificate.json``) — else :data:`PRODUCTION`."""
    document = _json(folder / RELEASE_FILE)
    synthesis = _json(folder / "certificate.json") if not (folder / RELEASE_FILE).exists() else None
    if isinstance(synthesis, dict) and synthesis.get("kind") == "synthesis":  # dpopt synthesize --out: no release.json
        return TEST if is_test_release(synthesis) else PRODUCTION
    if not isinstance(document, dict):
        raise CertificateError(f"{folder} holds no readable {RELEASE_FILE}: not a release folder")
    certificates = [_json(folder / name) for name in certificate_files(document)]
    seeded = is_seeded(document.get("randomness")) or any(is_test_release(c) for c in certificates)
    return TEST if seeded else PRODUCTION


def message(manifest: dict) -> bytes:
    """The bytes signed for ``manifest``: :data:`FORMAT`, a newline, the manifest as canonical JSON."""
    return (FORMAT + "\n" + json.dumps(manifest, sort_keys=True, separators=(",", ":"), ensure_ascii=True)).encode()


def sign_release(folder: str | Path, private: str | Path) -> Path:
    """Write :data:`SIGNATURE_FILE` in ``folder``: the manifest of its files and mode, signed by ``private``.

    Raises
    ------
    CertificateError
        Not a release folder, or a key that is not an unencrypted Ed25519 private key.
    """
    folder = Path(folder)
    manifest = {"mode": release_mode(folder), "files": folder_files(folder)}
    signed = {"format": FORMAT, "manifest": manifest, "signature": sign_bytes(message(manifest), private)}
    out = folder / SIGNATURE_FILE
    write_atomic(out, json.dumps(signed, indent=1, ensure_ascii=False) + "\n")
    return out


def _changes(signed: dict, found: dict) -> list[str]:
    edited = [n for n in sorted(set(signed) & set(found)) if signed[n] != found[n]]
    added, removed = sorted(set(found) - set(signed)), sorted(set(signed) - set(found))
    return ([f"edited: {', '.join(edited)}"] if edited else []) + ([f"added: {', '.join(added)}"] if added else []) \
        + ([f"removed: {', '.join(removed)}"] if removed else [])


def release_signature_check(folder: str | Path, public: str | Path, accept_test: bool = False) -> FileCheck:
    """The line of :data:`SIGNATURE_FILE` in ``dpopt verify DIR --public-key`` (module docstring).

    Raises
    ------
    CertificateError
        The public key cannot be read or is not an Ed25519 public key.
    """
    folder = Path(folder)
    key = public_key(public)
    path = folder / SIGNATURE_FILE
    if not path.is_file():
        return FileCheck(SIGNATURE_FILE, False, f"missing: the folder is not signed (dpopt sign {folder} --key KEY)")
    signed = _json(path)
    manifest = signed.get("manifest") if isinstance(signed, dict) else None
    well_formed = (isinstance(manifest, dict) and set(signed) == {"format", "manifest", "signature"}
                   and signed["format"] == FORMAT and isinstance(signed["signature"], str)
                   and set(manifest) == {"mode", "files"} and isinstance(manifest["files"], dict))
    if not well_formed:
        return FileCheck(SIGNATURE_FILE, False, f"not a signed manifest of the format {FORMAT!r}")
    if not valid_signature(signed["signature"], message(manifest), key):
        return FileCheck(SIGNATURE_FILE, False, f"not a valid signature of its manifest by {Path(public).name}")
    changes = _changes(manifest["files"], folder_files(folder))
    if changes:
        return FileCheck(SIGNATURE_FILE, False, "the folder is not the one signed: " + "; ".join(changes))
    mode = release_mode(folder)
    if manifest["mode"] != mode:
        return FileCheck(SIGNATURE_FILE, False, f"signed as a {manifest['mode']} release, but the folder is a {mode} "
                                                "release")
    signed_by = f"valid signature by {Path(public).name} of all {len(manifest['files'])} files"
    if mode == TEST:
        if not accept_test:
            return FileCheck(SIGNATURE_FILE, False, f"{signed_by}, signed as a TEST release (seeded noise): refused as "
                                                    "a publication (--accept-seeded to accept a test release)")
        return FileCheck(SIGNATURE_FILE, True, f"{signed_by}; mode: TEST release (seeded noise), accepted as asked")
    return FileCheck(SIGNATURE_FILE, True, f"{signed_by}; mode: production")
