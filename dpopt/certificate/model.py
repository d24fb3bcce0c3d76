"""The certificate document and atomic file writing."""

from __future__ import annotations

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


@dataclass(frozen=True)
class Certificate:
    """A certificate: the JSON document of the contract (see DESIGN.md), read-only."""

    data: dict[str, Any]

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    @property
    def passed(self) -> bool:
        return all(check["passed"] for check in self.data["checks"])

    def to_json(self) -> str:
        """The certificate as JSON: indented for a person up to :data:`INDENTED_CELLS` released cells; past that one
        line per top-level block (json's C encoder: the indented encoder is pure Python, 13 s of CPU for the range
        example's 175,270 cells' errors)."""
        dimension = (self.data.get("sensitivity") or {}).get("dimension") if isinstance(self.data, dict) else None
        if not isinstance(dimension, int) or dimension <= INDENTED_CELLS:
            return json.dumps(self.data, indent=2, ensure_ascii=False) + "\n"
        blocks = (f"  {json.dumps(key, ensure_ascii=False)}: {json.dumps(value, ensure_ascii=False)}"
                  for key, value in self.data.items())
        return "{\n" + ",\n".join(blocks) + "\n}\n"

    def write(self, path: str | Path) -> None:
        write_atomic(path, self.to_json())

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
