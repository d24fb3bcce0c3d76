r"""Ed25519 signatures of certificate files (optional: ``pip install 'dpopt[sign]'``).

An agency signs the exact bytes of a certificate file with its private key
(``dpopt sign CERT --key KEY.pem`` writes ``CERT.sig``: the 64-byte Ed25519 signature,
base64, RFC 8032); anyone checks it with the agency's public key
(``dpopt verify CERT --public-key PUB.pem``). Any edit of the file, one byte included,
fails the signature. The keys are PEM files: the private key PKCS #8 (unencrypted, written
owner-only), the public key SubjectPublicKeyInfo (``dpopt keygen KEY.pem`` writes both,
the public one as ``KEY.pub.pem``). The library is `cryptography
<https://cryptography.io>`_, imported only by these commands.

A certificate is the same file for every release of one spec: what a release publishes is signed
as a folder (``dpopt sign DIR``, :mod:`dpopt.release.signature`), with the keys and the
primitives here (:func:`sign_bytes`, :func:`valid_signature`).
"""

from __future__ import annotations

import base64
import binascii
import os
from pathlib import Path

from dpopt.core.checks import Check
from dpopt.errors import CertificateError, UnsupportedSpecError


def _crypto():
    """The ``cryptography`` modules used here (an optional dependency)."""
    try:
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ed25519
    except ImportError:
        raise UnsupportedSpecError("signature", "signing needs the cryptography package: "
                                                "pip install 'dpopt[sign]'") from None
    return ed25519, serialization, InvalidSignature


def signature_path(certificate: str | Path) -> Path:
    """Where the signature of ``certificate`` is kept: ``CERT.sig`` beside it."""
    return Path(f"{certificate}.sig")


def public_key_path(private: str | Path) -> Path:
    """The public key file :func:`generate_keys` writes beside ``private``: ``KEY.pub.pem``."""
    private = Path(private)
    stem = private.name[:-4] if private.name.endswith(".pem") else private.name
    return private.with_name(f"{stem}.pub.pem")


def _read(path: str | Path, what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise CertificateError(f"cannot read {what} {path}: {exc.strerror or exc}") from None


def generate_keys(private: str | Path) -> tuple[Path, Path]:
    """Write a new Ed25519 key pair: ``private`` (PKCS #8 PEM, mode 0600) and its public key.

    Raises
    ------
    CertificateError
        A file of that name exists (keys are never overwritten).
    """
    ed25519, serialization, _ = _crypto()
    private, public = Path(private), public_key_path(private)
    for path in (private, public):
        if path.exists():
            raise CertificateError(f"{path} exists: keys are never overwritten")
    key = ed25519.Ed25519PrivateKey.generate()
    secret = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                               serialization.NoEncryption())
    fd = os.open(private, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(secret)
    public.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                     serialization.PublicFormat.SubjectPublicKeyInfo))
    return private, public


def private_key(path: str | Path):
    """The Ed25519 private key in the PEM file ``path``.

    Raises
    ------
    CertificateError
        An unreadable file, or a key that is not an unencrypted Ed25519 private key.
    """
    ed25519, serialization, _ = _crypto()
    try:
        key = serialization.load_pem_private_key(_read(path, "private key"), password=None)
    except (ValueError, TypeError) as exc:
        raise CertificateError(f"{path} is not an unencrypted PEM private key ({exc})") from None
    if not isinstance(key, ed25519.Ed25519PrivateKey):
        raise CertificateError(f"{path} is not an Ed25519 key")
    return key


def public_key(path: str | Path):
    """The Ed25519 public key in the PEM file ``path``.

    Raises
    ------
    CertificateError
        The public key cannot be read or is not an Ed25519 public key.
    """
    ed25519, serialization, _ = _crypto()
    try:
        key = serialization.load_pem_public_key(_read(path, "public key"))
    except (ValueError, TypeError) as exc:
        raise CertificateError(f"{path} is not a PEM public key ({exc})") from None
    if not isinstance(key, ed25519.Ed25519PublicKey):
        raise CertificateError(f"{path} is not an Ed25519 public key")
    return key


def sign_bytes(data: bytes, private: str | Path) -> str:
    """The Ed25519 signature (RFC 8032) of ``data`` by the key in ``private``, base64."""
    return base64.b64encode(private_key(private).sign(data)).decode("ascii")


def valid_signature(signature: str, data: bytes, key) -> bool:
    """True when ``signature`` (base64) is the Ed25519 signature of ``data`` under the public ``key``
    (:func:`public_key`); a malformed signature is not valid."""
    _, _, invalid = _crypto()
    try:
        key.verify(base64.b64decode(signature.strip(), validate=True), data)
    except (invalid, binascii.Error, UnicodeDecodeError, ValueError, AttributeError, TypeError):
        return False
    return True


def sign_file(certificate: str | Path, private: str | Path) -> Path:
    """Sign the bytes of ``certificate`` with the Ed25519 key in ``private``; write ``CERT.sig``.

    Raises
    ------
    CertificateError
        Unreadable files, or a key that is not an unencrypted Ed25519 private key.
    """
    data = _read(certificate, "certificate")
    out = signature_path(certificate)
    out.write_text(sign_bytes(data, private) + "\n", encoding="ascii")
    return out


def signature_check(certificate: str | Path, public: str | Path) -> Check:
    """The claim ``signature``: ``CERT.sig`` is the Ed25519 signature of the certificate's exact
    bytes under the public key in ``public``.

    Raises
    ------
    CertificateError
        The public key cannot be read or is not an Ed25519 public key.
    """
    key = public_key(public)
    method = f"Ed25519 signature (RFC 8032) of the file's bytes under {Path(public).name}"
    path = signature_path(certificate)
    if not path.is_file():
        return Check("signature", method, False, f"no signature file {path.name}")
    try:
        signature = path.read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError):
        signature = ""
    if not valid_signature(signature, _read(certificate, "certificate"), key):
        return Check("signature", method, False, f"{path.name} is not a valid signature of these bytes by this key")
    return Check("signature", method, True, f"valid ({path.name})")
