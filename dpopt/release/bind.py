r"""Binding a release to its certificate, and checking a release folder as a whole.

A release document (``release.json``) names the SHA-256 of the exact bytes of its
certificate file(s) (``certificate_sha256``: one digest, or ``{file: digest}`` for the
certificates of a hierarchy's levels) and of the tables written beside it
(``files_sha256``), so that a certificate cannot be swapped, nor a table edited, without the
folder failing :func:`verify_folder`. The guarantee, mechanism and composition blocks the
document repeats must be the certificate's.

A seeded release (``--seed N --insecure-seed``) publishes no seed: the document says only
that the noise came from a caller's seed, and its certificate carries ``test_release: true``
(:mod:`dpopt.certificate.recorded`), which ``dpopt verify`` reports as a test release, not
for publication.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from dpopt.certificate.model import Certificate
from dpopt.certificate.recorded import is_test_release
from dpopt.certificate.second_route import is_not_available
from dpopt.core.documents import decode, parse_json
from dpopt.errors import CertificateError, DpoptError
from dpopt.release.interval_check import CLAIM, monte_carlo_line

RELEASE_FILE = "release.json"
TEST_RELEASE = "TEST RELEASE — not for publication (noise drawn from a caller's seed)"


def sha256_bytes(data: bytes) -> str:
    """The hexadecimal SHA-256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def certificate_sha256(certificate: Certificate) -> str:
    """The SHA-256 of the certificate file's bytes, as :meth:`Certificate.write` writes them."""
    return sha256_bytes(certificate.to_json().encode("utf-8"))


def as_test_release(certificate: Certificate, seeded: bool) -> Certificate:
    """The certificate, marked ``test_release: true`` when the release's noise came from a seed."""
    if not seeded:
        return certificate
    return Certificate({**certificate.data, "test_release": True})


def is_seeded(randomness) -> bool:
    """True for the ``randomness`` record of a seeded release (:meth:`dpopt.rng.RandomSource.describe`)."""
    return isinstance(randomness, dict) and randomness.get("kind") == "insecure_seed"


def bind(document: dict, certificate: Certificate) -> tuple[dict, Certificate]:
    """An ungrouped release's document naming its certificate's SHA-256, and the certificate
    (marked as a test release when the document's randomness is a seed)."""
    certificate = as_test_release(certificate, is_seeded(document.get("randomness", {})))
    return {**document, "certificate_sha256": certificate_sha256(certificate)}, certificate


# ------------------------------------------------------------------ folder verification
@dataclass(frozen=True)
class FileCheck:
    """One line of :func:`verify_folder`: a file, whether it holds, and why."""

    file: str
    passed: bool
    detail: str


def _read_json(path: Path) -> dict:
    try:
        data = parse_json(decode(path.read_bytes()))
    except (OSError, DpoptError) as exc:
        raise CertificateError(f"{path}: not readable JSON ({exc})") from None
    if not isinstance(data, dict):
        raise CertificateError(f"{path}: not a JSON object")
    return data


def certificate_files(document: dict) -> dict[str, str | None]:
    """The certificate files a release document names, with the digest it records for each."""
    digest = document.get("certificate_sha256")
    hierarchy = document.get("hierarchy")
    if isinstance(hierarchy, dict):
        names = [row.get("certificate") for row in hierarchy.get("levels", []) if isinstance(row, dict)]
        digests = digest if isinstance(digest, dict) else {}
        return {str(name): digests.get(name) for name in names}
    return {"certificate.json": digest if isinstance(digest, str) else None}


def _repeated_blocks(document: dict, certificate: dict) -> list[str]:
    """The blocks the release document repeats from its certificate that differ from it."""
    bad = [k for k in ("spec_sha256", "hierarchy") if k in document and document[k] != certificate.get(k)]
    guarantee = document.get("guarantee")
    if isinstance(guarantee, dict) and "per_group" in guarantee:  # a grouped plan release
        if guarantee != {"per_group": certificate.get("guarantee"),
                         "whole_release": (certificate.get("groups") or {}).get("composition")}:
            bad.append("guarantee")
    elif "guarantee" in document and guarantee != certificate.get("guarantee"):
        bad.append("guarantee")
    groups = document.get("groups")
    if isinstance(groups, dict) and "composition" in groups and groups != certificate.get("groups"):
        bad.append("groups")
    mechanism, recorded = document.get("mechanism"), certificate.get("mechanism")
    if isinstance(mechanism, dict) and isinstance(recorded, dict) and "parameters" in mechanism:
        if any(mechanism.get(k) != recorded.get(k) for k in ("family", "parameters")):
            bad.append("mechanism")
    if "groups" in certificate and "groups" not in document:
        bad.append("groups (missing from the document)")
    return bad


def verify_folder(folder: str | Path, verify_certificate: Callable[[Certificate], object]) -> list[FileCheck]:
    """Check a release folder: every certificate it names verifies (``verify_certificate``
    returns an object with ``passed`` and ``failed``), the document names each certificate's
    SHA-256 and every table's, and repeats the certificate's blocks unchanged (its signature:
    :func:`dpopt.release.signature.release_signature_check`); Monte Carlo interval ends are re-derived from the
    published values (:mod:`dpopt.release.interval_check`).

    Raises
    ------
    CertificateError
        No ``release.json`` in the folder, or it is not a JSON object.
    """
    folder = Path(folder)
    if not (folder / RELEASE_FILE).is_file():
        raise CertificateError(f"{folder} holds no {RELEASE_FILE}: not a release folder (give a certificate file, "
                               f"e.g. {folder / 'certificate.json'})")
    document = _read_json(folder / RELEASE_FILE)
    lines: list[FileCheck] = []
    files = certificate_files(document)
    problems = []
    for name, digest in files.items():
        path = folder / name
        if not path.is_file():
            lines.append(FileCheck(name, False, "named by release.json but missing"))
            continue
        raw = path.read_bytes()
        if digest != sha256_bytes(raw):
            problems.append(f"{name}'s SHA-256 is not the one release.json names ({digest})")
        certificate = Certificate.from_dict(_read_json(path), source=str(path))
        result = verify_certificate(certificate)
        failed = [c.claim for c in result.failed]
        test = is_test_release(certificate.data)
        held = sum(1 for c in result.checks if not is_not_available(c))  # counted as `dpopt verify CERT` counts
        detail = f"{held} claims hold" if not failed else "FAILED: " + ", ".join(failed)
        lines.append(FileCheck(name, not failed, detail + (f"; {TEST_RELEASE}" if test else "")))
        found = None if failed else monte_carlo_line(document, certificate, getattr(result, "problem", None))
        if found is not None:  # interval ends simulated from the published values (dpopt.release.interval_check)
            lines.append(FileCheck(f"{RELEASE_FILE}: {CLAIM}", *found))
        problems += [f"its {block} differs from {name}'s" for block in _repeated_blocks(document, certificate.data)]
        if test != is_seeded(document.get("randomness", {})):
            problems.append(f"randomness and {name}'s test_release disagree")
    tables = document.get("files_sha256", {})
    listed = set(tables) if isinstance(tables, dict) else set()
    written = {p.name for pattern in ("release_*.parquet", "release*.csv") for p in folder.glob(pattern)}
    for name in sorted(listed | written):
        path = folder / name
        ok = name in listed and path.is_file() and sha256_bytes(path.read_bytes()) == tables[name]
        lines.append(FileCheck(name, ok, "SHA-256 named by release.json" if ok else
                               "not named by release.json, missing, or its SHA-256 differs"))
    if "seed" in document or isinstance(document.get("randomness"), dict) and "seed" in document["randomness"]:
        problems.append("it publishes a seed (the true answers are the release minus the seed's noise)")
    named = f"names the SHA-256 of {', '.join(files)}" + (f" and {len(listed)} table(s)" if listed else "")
    lines.insert(0, FileCheck(RELEASE_FILE, not problems,
                              "; ".join(problems) if problems else named + "; repeats their blocks unchanged"))
    return lines
