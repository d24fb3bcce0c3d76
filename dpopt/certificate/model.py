"""The certificate document and atomic file writing."""

from __future__ import annotations

import codecs
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dpopt.core.documents import decode, parse_json
from dpopt.core.output import umask
from dpopt.errors import CertificateError, DocumentError

REQUIRED_KEYS = (
    "dpopt_version",
    "spec_sha256",
    "spec",
    "guarantee",
    "sensitivity",
    "mechanism",
    "utility",
    "checks",
)


def write_atomic(path: str | Path, text: str | bytes) -> None:
    """Write ``text`` (UTF-8) or bytes to ``path`` atomically (a temporary file in the same folder, then rename).

    The file gets the permissions an ordinary ``open(path, "w")`` would give (0666 less the
    umask), not the owner-only mode of the temporary file.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.chmod(fd, 0o666 & ~umask())
        if isinstance(text, bytes):
            with os.fdopen(fd, "wb") as handle:
                handle.write(text)
        else:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


INDENTED_CELLS = 10_000
"""Released cells up to which certificate.json and mechanism.json are indented throughout."""

_SHARED = "\x00dpopt:shared-block\x00"
"""Stands for a shared block while the document around it is encoded (a string no document carries)."""


def _json_escapes(error: UnicodeEncodeError) -> tuple[str, int]:
    """The characters an ASCII encoding cannot write, as json's ``ensure_ascii`` writes them."""
    return "".join(json.dumps(c)[1:-1] for c in error.object[error.start:error.end]), error.end


codecs.register_error("dpopt-json-escape", _json_escapes)


def ascii_json(text: str) -> str:
    """The ``ensure_ascii=True`` form of a JSON text encoded with ``ensure_ascii=False``: each non-ASCII character
    (only inside strings) as json writes it, ``\\uXXXX`` (a surrogate pair beyond the BMP); the ASCII runs are
    copied by the codec (34 MB in 0.03 s, where a regular expression's scan took 0.25 s)."""
    return text.encode("ascii", errors="dpopt-json-escape").decode("ascii")


def dumps_sharing(value: Any, block: Any, text: str, ensure_ascii: bool = True) -> str:
    """``json.dumps(value, ensure_ascii=ensure_ascii)`` (one line) with the object ``block``, found by identity
    among nested dict values, written as ``text``: the block's own one-line encoding with the same option, made
    once for two documents that carry it (the per-cell errors of ``certificate.json`` and ``mechanism.json``).
    The same string as encoding ``value`` whole (which it is, once, where the block is absent); encoded whole when
    the block is found more than once or its stand-in string occurs elsewhere."""
    found = []

    def swap(node: Any) -> Any:
        if node is block:
            found.append(node)
            return _SHARED
        return {k: swap(v) for k, v in node.items()} if isinstance(node, dict) else node

    out = json.dumps(swap(value), ensure_ascii=ensure_ascii)
    if not found:
        return out
    token = json.dumps(_SHARED, ensure_ascii=ensure_ascii)
    if len(found) != 1 or out.count(token) != 1:
        return json.dumps(value, ensure_ascii=ensure_ascii)
    return out.replace(token, text, 1)


@dataclass(frozen=True)
class Certificate:
    """A certificate: the JSON document of the contract (see DESIGN.md), read-only."""

    data: dict[str, Any]

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    @property
    def passed(self) -> bool:
        return all(check["passed"] for check in self.data["checks"])

    def indented(self) -> bool:
        """Whether :meth:`to_json` indents throughout (up to :data:`INDENTED_CELLS` released cells)."""
        dimension = (self.data.get("sensitivity") or {}).get("dimension") if isinstance(self.data, dict) else None
        return not isinstance(dimension, int) or dimension <= INDENTED_CELLS

    def to_json(self, shared: tuple[Any, str] | None = None) -> str:
        """The certificate as JSON: indented for a person up to :data:`INDENTED_CELLS` released cells; past that one
        line per top-level block (json's C encoder: the indented encoder is pure Python, 13 s of CPU for the range
        example's 175,270 cells' errors). ``shared`` = (a block of the document, its one-line encoding with
        ``ensure_ascii=False``) writes that block from its encoding (:func:`dumps_sharing`; the same text)."""
        if self.indented():
            return json.dumps(self.data, indent=2, ensure_ascii=False) + "\n"
        blocks = (f"  {json.dumps(key, ensure_ascii=False)}: "
                  + (dumps_sharing(value, *shared, ensure_ascii=False) if shared is not None
                     else json.dumps(value, ensure_ascii=False))
                  for key, value in self.data.items())
        return "{\n" + ",\n".join(blocks) + "\n}\n"

    def write(self, path: str | Path, shared: tuple[Any, str] | None = None) -> None:
        write_atomic(path, self.to_json(shared))

    @classmethod
    def read(cls, certificate: "Certificate | dict | str | Path") -> "Certificate":
        """A certificate given as itself, a parsed dict or a file path (:meth:`from_file`)."""
        if isinstance(certificate, Certificate):
            return certificate
        if isinstance(certificate, (str, Path)):
            return cls.from_file(certificate)
        return cls.from_dict(certificate)

    @classmethod
    def from_file(cls, path: str | Path) -> "Certificate":
        """Read a certificate file.

        Raises
        ------
        CertificateError
            Unreadable, not UTF-8, not JSON, a key given twice, nested too deep
            (:func:`dpopt.core.documents.parse_json`), or missing a contract key.
        """
        try:
            raw = Path(path).read_bytes()
        except OSError as exc:
            raise CertificateError(f"cannot read certificate {path}: {exc.strerror or exc}") from None
        try:
            data = parse_json(decode(raw))
        except DocumentError as exc:
            raise CertificateError(f"{path} {exc}") from None
        return cls.from_dict(data, source=str(path))

    @classmethod
    def from_dict(cls, data: Any, source: str = "certificate") -> "Certificate":
        if not isinstance(data, dict):
            raise CertificateError(f"{source} is not a dpopt certificate (not a JSON object)")
        missing = [k for k in REQUIRED_KEYS if k not in data]
        if missing:
            raise CertificateError(f"{source} is not a dpopt certificate (missing {', '.join(missing)})")
        return cls(data)

    @classmethod
    def from_document(cls, document: Any, source: str = "certificate") -> "Certificate | None":
        """The certificate a parsed spec-or-certificate file holds, or None for a spec (a certificate
        records its spec's SHA-256; a spec does not)."""
        if isinstance(document, dict) and "spec_sha256" in document:
            return cls.from_dict(document, source)
        return None
