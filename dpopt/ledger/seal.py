r"""Sealing a ledger with a key, so that a rewritten chain does not verify.

The hash chain of :mod:`dpopt.ledger.store` detects an edit of any byte, but not a **full
rewrite**: whoever can write the folder can recompute every hash (e.g. raise the budget from 3
to 100 and re-chain). A sealed ledger carries, in every document (the header and each entry),
``seal``: a tag on that document's ``sha256`` made with a key the writer of the folder does not
hold:

* ``hmac-sha256`` — HMAC-SHA256 (RFC 2104) under a secret key file of at least
  :data:`MIN_SECRET` bytes (e.g. ``head -c 32 /dev/urandom > ledger.key``); the same key seals
  and checks.
* ``ed25519`` — an Ed25519 signature (RFC 8032) with the private key of ``dpopt keygen``; anyone
  checks it with the public key (``KEY.pub.pem``), as ``dpopt sign`` / ``verify --public-key``.

The tag covers ``DOMAIN`` + the document's sha256 (which covers every other key of the
document, its ``previous_sha256`` and its certificate's sha256), so the seals of a chain cover
the whole chain. :func:`load_key` tells the two kinds of key file apart by their content: a PEM
private key is Ed25519, a PEM public key checks Ed25519 seals, anything else is an HMAC secret.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dpopt.errors import LedgerError, UnsupportedSpecError

METHODS = ("hmac-sha256", "ed25519")
"""Ways a ledger may be sealed."""

MIN_SECRET = 32
"""Bytes an HMAC key file must hold at least (256 bits, the output size of SHA-256)."""

DOMAIN = b"dpopt ledger seal 1\n"
"""Prefix of every sealed message, so that a seal is never valid as another dpopt signature."""


def _crypto() -> tuple[Any, Any, Any]:
    """``cryptography``'s Ed25519 and serialization modules and InvalidSignature (an optional dependency)."""
    try:
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ed25519
    except ImportError:
        raise UnsupportedSpecError("--key", "an Ed25519 seal needs the cryptography package: "
                                            "pip install 'dpopt[sign]'") from None
    return ed25519, serialization, InvalidSignature


@dataclass(frozen=True)
class Key:
    """A key that seals (``can_seal``) or only checks a ledger's seals.

    Attributes
    ----------
    method : str
        One of :data:`METHODS`.
    secret : Any
        The HMAC secret (bytes), the Ed25519 private key, or the Ed25519 public key.
    can_seal : bool
        False for a public key (it checks, it does not seal).
    """

    method: str
    secret: Any
    can_seal: bool

    def seal(self, digest: str) -> str:
        """The tag on a document whose ``sha256`` is ``digest``: hex HMAC, or base64 signature."""
        message = DOMAIN + digest.encode("ascii")
        if self.method == "hmac-sha256":
            return hmac.new(self.secret, message, hashlib.sha256).hexdigest()
        return base64.b64encode(self.secret.sign(message)).decode("ascii")

    def holds(self, digest: str, tag: Any) -> bool:
        """True when ``tag`` is this key's seal on ``digest`` (constant-time for HMAC)."""
        if not isinstance(tag, str):
            return False
        message = DOMAIN + digest.encode("ascii")
        if self.method == "hmac-sha256":
            return hmac.compare_digest(hmac.new(self.secret, message, hashlib.sha256).hexdigest(), tag)
        _, _, invalid = _crypto()
        public = self.secret.public_key() if self.can_seal else self.secret
        try:
            public.verify(base64.b64decode(tag, validate=True), message)
        except (invalid, binascii.Error, ValueError):
            return False
        return True


def load_key(path: str | Path) -> Key:
    """The key in the file ``path`` (module docstring).

    Raises
    ------
    LedgerError
        The file cannot be read, a PEM key that is not Ed25519, or an HMAC secret shorter than
        :data:`MIN_SECRET` bytes.
    """
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise LedgerError(f"cannot read the key {path}: {exc.strerror or exc}") from None
    if data.lstrip().startswith(b"-----BEGIN"):
        ed25519, serialization, _ = _crypto()
        public = b"PUBLIC KEY" in data.split(b"\n", 1)[0]
        try:
            key = (serialization.load_pem_public_key(data) if public
                   else serialization.load_pem_private_key(data, password=None))
        except (ValueError, TypeError) as exc:
            raise LedgerError(f"{path} is not an unencrypted PEM key ({exc})") from None
        kind = ed25519.Ed25519PublicKey if public else ed25519.Ed25519PrivateKey
        if not isinstance(key, kind):
            raise LedgerError(f"{path} is not an Ed25519 key (make one with `dpopt keygen KEY.pem`)")
        return Key("ed25519", key, not public)
    if len(data) < MIN_SECRET:
        raise LedgerError(f"{path} holds {len(data)} bytes: an HMAC key holds at least {MIN_SECRET} random bytes "
                          f"(head -c 32 /dev/urandom > {Path(path).name}), or give an Ed25519 PEM key")
    return Key("hmac-sha256", data, True)
