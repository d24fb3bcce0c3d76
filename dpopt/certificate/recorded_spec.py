"""The first steps of verifying a composite certificate (private keys and quantiles, synthesis) from its spec.

A selection certificate (:mod:`dpopt.selection.verify`) and a synthesis certificate
(:mod:`dpopt.synthesis.certificate`) are verified the same way before their own claims: the keys (a ``schema``
check the caller makes), the recorded spec loaded and validated again, the SHA-256 of its canonical JSON against
the recorded ``spec_sha256``, and every block the spec alone determines rebuilt and compared with the recorded one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from dpopt.core.checks import Check
from dpopt.errors import DpoptError

SpecT = TypeVar("SpecT")


def recorded_spec(data: dict, schema: Check, load: Callable[[Any], SpecT],
                  digest: Callable[[SpecT], str]) -> tuple[list[Check], SpecT | None]:
    """The checks ``schema``, ``spec`` (only when it fails) and ``spec_sha256``, and the loaded spec.

    Parameters
    ----------
    data : dict
        The certificate.
    schema : Check
        The caller's check of the certificate's keys; when it fails nothing else is read.
    load : callable
        The spec loader (``data["spec"]`` → spec; raises :class:`~dpopt.errors.DpoptError` on a bad spec).
    digest : callable
        spec → SHA-256 hex of its canonical JSON.

    Returns
    -------
    (checks, spec)
        ``spec`` is None when the keys or the spec fail (the checks then say which).
    """
    if not schema.passed:
        return [schema], None
    try:
        spec = load(data["spec"])
    except DpoptError as exc:
        return [schema, Check("spec", "the recorded spec loads", False, str(exc))], None
    value = digest(spec)
    return [schema, Check("spec_sha256", "SHA-256 of the canonical JSON of the recorded spec",
                          value == data["spec_sha256"], value)], spec


def recorded_blocks(fresh: dict, data: dict, keys: Iterable[str]) -> Check:
    """The check ``recorded``: each block of ``keys`` in ``data`` equals its re-derivation ``fresh`` (a block absent
    from both counts as equal)."""
    differing = sorted(k for k in keys if fresh.get(k) != data.get(k))
    return Check("recorded", "every recorded block equals its re-derivation from the spec", not differing,
                 f"differ: {', '.join(differing)}" if differing else "all equal")
