"""A privacy budget ledger on disk: every release from one data set, charged before it is output.

Layout of a ledger folder ``LEDGER/``::

    ledger.json            the budget (written once)
    entries.jsonl          one line per release, appended, never rewritten
    certificates/NNNNNN.json   the certificate of release N, byte for byte
    lock                   the file lock (fcntl.flock) that serialises charges

**Hash chain.** Every JSON document of the ledger is stored canonically (sorted keys, no
spaces, ASCII) and carries ``sha256``, the SHA-256 of its canonical form without that key.
Entry N records ``previous_sha256`` (the ``sha256`` of entry N−1, of ``ledger.json`` for the
first entry) and ``certificate_sha256`` (of its certificate file). Any change to a byte of
the header, of an entry or of a certificate, a removed entry (except the last one together
with its certificate file) and a reordering break a hash, an index or the canonical form,
and :meth:`Ledger.verify` names the place. Removing the last entry *and* its certificate
leaves a valid shorter chain: compare ``head_sha256`` (shown by ``dpopt ledger show``) with
a copy kept elsewhere.

**Privacy unit.** The header may fix who the ledger protects (``unit``: ``"row"`` or
``{"id": COLUMN, "max_rows": K}``); otherwise its first release does. Each entry records the
release's ``unit`` (its ``privacy_unit``, or ``"row"``) and the ``group`` size it was charged
for: 1 in the ledger's own unit, K for an add/remove row-level release in a person ledger whose
bound K is declared (group privacy, :func:`dpopt.ledger.compose.group_guarantee`); any other mix
is refused (:func:`_group_size`).

**Seal.** A ledger created with a key (``seal_method`` in the header) carries a ``seal`` on the
``sha256`` of every document (:mod:`dpopt.ledger.seal`); ``sha256`` covers everything but
``sha256`` and ``seal``. It is charged only with its key, and :meth:`Ledger.verify` with the key
detects a rewritten chain, which the hash chain alone cannot.

**Nothing lost, nothing spent twice.** :meth:`Ledger.charge` holds an exclusive lock on
``lock`` while it reads the chain, composes the new guarantee with every recorded one
(:mod:`dpopt.ledger.compose`) and either refuses (:class:`dpopt.errors.BudgetExceededError`)
or writes the certificate (temporary file, fsync, rename, fsync of the folder) and appends
the entry (one ``write`` with O_APPEND, fsync). The caller writes its noisy output only
after :meth:`charge` returns, so a crash leaves the budget charged and no output; a crash
between the certificate and the entry leaves a certificate no entry records (reported by
:meth:`verify`, replaced by the next charge): nothing was charged or released then.
"""

from __future__ import annotations

import datetime as _dt
import fcntl
import hashlib
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

from dpopt._version import __version__
from dpopt.certificate.model import Certificate
from dpopt.certificate.verify import Verification, verify
from dpopt.core.checks import Check
from dpopt.core.decimals import as_float, written
from dpopt.errors import (BudgetExceededError, DocumentError, LedgerDamagedError, LedgerError, SpecError,
                          UnsupportedSpecError)
from dpopt.ledger.compose import BUDGETS, CURRENCY, PARAMETERS, Spending, currency, release_guarantee, spending
from dpopt.ledger.seal import Key, load_key
from dpopt.plan.certificate import verify_plan
from dpopt.plan.spec import is_plan_certificate
from dpopt.spec.yaml12 import parse_yaml

FORMAT = "dpopt-ledger 1"
HEADER, ENTRIES, CERTIFICATES, LOCK = "ledger.json", "entries.jsonl", "certificates", "lock"


def canonical(document: dict) -> bytes:
    """The canonical bytes of a JSON document: sorted keys, no spaces, ASCII, one final newline."""
    return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode() + b"\n"


def sealed(document: dict, key: Key | None = None) -> dict:
    """``document`` with ``sha256``, the SHA-256 of its canonical form without ``sha256`` and ``seal``,
    and with ``key`` its ``seal`` (:mod:`dpopt.ledger.seal`) on that digest."""
    body = {k: v for k, v in document.items() if k not in ("sha256", "seal")}
    digest = hashlib.sha256(canonical(body)).hexdigest()
    return body | {"sha256": digest} | ({"seal": key.seal(digest)} if key is not None else {})


BUDGET_FORM = ("write one definition and its parameters, as in a spec's privacy: 'zcdp: {rho: 0.3}', "
               "'gdp: {mu: 1}', 'pure: {epsilon: 2}' or 'approx: {epsilon: 3, delta: 1e-6}'")
"""What ``--budget`` expects, said when it is not that."""


def parse_budget(budget: str | dict) -> dict:
    """``{definition, parameters...}`` from ``'zcdp: {rho: 0.3}'`` (YAML 1.2, as a spec) or ``{"zcdp": {"rho": 0.3}}``.

    Every parameter may be a number, a string or a :class:`decimal.Decimal`, and counts as the
    decimal it spells (:func:`dpopt.core.decimals.written`); it is stored as the float whose repr
    is that decimal, so a decimal a float does not keep (e.g. one of 18 significant digits) is refused.

    Raises
    ------
    SpecError
        ``--budget``: one line saying what form is expected.
    """
    if isinstance(budget, str):
        try:
            budget = parse_yaml(budget)
        except DocumentError as exc:
            raise SpecError("--budget", f"{exc}; {BUDGET_FORM}") from None
    if not isinstance(budget, dict) or len(budget) != 1 or next(iter(budget)) not in BUDGETS:
        got = ", ".join(map(str, budget)) if isinstance(budget, dict) else repr(budget)
        raise SpecError("--budget", f"{BUDGET_FORM} (got {'nothing' if budget is None else got})")
    definition, parameters = next(iter(budget.items()))
    names = PARAMETERS[definition]
    if not isinstance(parameters, dict) or set(parameters) != set(names):
        given = ", ".join(map(str, parameters)) if isinstance(parameters, dict) else repr(parameters)
        raise SpecError("--budget", f"a {definition} budget gives {' and '.join(names)} "
                                    f"(got {given or 'nothing'}); {BUDGET_FORM}")
    values = {}
    for name in names:
        field = f"{definition}.{name}"
        try:
            exact = written(parameters[name])
            values[name] = as_float(parameters[name], field)
        except (ValueError, TypeError) as exc:
            raise SpecError("--budget", str(exc) if str(exc).startswith(field) else f"{field}: {exc}") from None
        if exact <= 0 or (name == "delta" and exact >= 1):
            bound = "between 0 and 1 (exclusive)" if name == "delta" else "above 0"
            raise SpecError("--budget", f"{field} must be {bound} (got {parameters[name]})")
    return {"definition": definition, **values}


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _fsync_folder(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_synced(path: Path, data: bytes, flags: int) -> None:
    """Write all of ``data`` to ``path`` opened with ``flags``, and fsync it before returning."""
    fd = os.open(path, os.O_WRONLY | flags, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_durable(path: Path, data: bytes) -> None:
    """Write ``path`` whole or not at all, and on disk before returning (temporary file, fsync, rename, fsync)."""
    tmp = path.with_name(f".{path.name}.tmp")
    _write_synced(tmp, data, os.O_CREAT | os.O_TRUNC)
    os.replace(tmp, path)
    _fsync_folder(path.parent)


def _append_durable(path: Path, data: bytes) -> None:
    """Append ``data`` to ``path`` (O_APPEND: one write at the end) and fsync it before returning."""
    _write_synced(path, data, os.O_APPEND)


def _certificate_name(index: int) -> str:
    return f"{CERTIFICATES}/{index:06d}.json"


def _release_kind(data: dict) -> str:
    kind = "plan" if is_plan_certificate(data) else "spec"
    return f"grouped {kind}" if data.get("groups") else kind


def _utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


class Ledger:
    """The privacy budget ledger in the folder ``path`` (module docstring).

    Parameters
    ----------
    path : str or Path
        The ledger's folder.
    key : str, Path or Key, optional
        The key of a sealed ledger (:mod:`dpopt.ledger.seal`): needed to charge it (an HMAC key or
        the Ed25519 private key), or to check its seals in :meth:`verify` (also the public key).

    Examples
    --------
    >>> ledger = Ledger.create("census_ledger", {"gdp": {"mu": 1.0}})    # doctest: +SKIP
    >>> sol = dpopt.solve("specs/table_2x2_margins_gdp.yaml")            # doctest: +SKIP
    >>> entry = ledger.charge(sol.certificate, data="records.csv")       # doctest: +SKIP
    >>> ledger.spending().remaining                                      # doctest: +SKIP
    """

    def __init__(self, path: str | Path, key: str | Path | Key | None = None):
        self.path = Path(path)
        self.key = load_key(key) if isinstance(key, (str, Path)) else key
        header = self.path / HEADER
        try:
            self.header = json.loads(header.read_bytes())
            budget = self.header["budget"]
            self.budget = parse_budget({budget["definition"]: {k: budget[k] for k in PARAMETERS[budget["definition"]]}})
            self.unit = _checked_unit(self.header.get("unit"))
        except OSError as exc:
            raise LedgerError(f"{self.path} is not a readable dpopt ledger ({HEADER}: {exc.strerror or exc}); "
                              "create one with `dpopt ledger init`") from None
        except (ValueError, KeyError, TypeError, AttributeError):
            raise LedgerDamagedError(f"{header} is damaged (not a ledger header)") from None

    @classmethod
    def create(cls, path: str | Path, budget: str | dict, *, unit: str | dict | None = None,
               key: str | Path | Key | None = None) -> Ledger:
        """A new, empty ledger with ``budget`` (see :func:`parse_budget`) in the folder ``path``.

        Parameters
        ----------
        unit : str or dict, optional
            Who the ledger protects: ``"row"``, or ``{"id": COLUMN, "max_rows": K}`` (a person named by
            the column; ``max_rows``, optional, the most rows any person has in the data, which lets
            row-level releases be charged at their group-privacy cost). Default: the first release's unit.
        key : optional
            Seal the ledger with this key (HMAC secret or Ed25519 private key, :mod:`dpopt.ledger.seal`).

        Raises
        ------
        LedgerError
            ``path`` exists and is not an empty folder, or cannot be written.
        SpecError
            A bad budget or unit.
        """
        path = Path(path)
        parsed = parse_budget(budget)
        unit = _checked_unit(unit)
        key = load_key(key) if isinstance(key, (str, Path)) else key
        if key is not None and not key.can_seal:
            raise LedgerError("a public key checks seals, it does not make them: give the private key")
        if path.exists() and (not path.is_dir() or any(path.iterdir())):
            raise LedgerError(f"{path} exists and is not an empty folder: a ledger is created once")
        header = {"format": FORMAT, "budget": parsed, "created": _utc_now(), "dpopt_version": __version__}
        header |= ({"unit": unit} if unit is not None else {}) | ({"seal_method": key.method} if key else {})
        try:
            (path / CERTIFICATES).mkdir(parents=True, exist_ok=True)
            (path / LOCK).touch()
            (path / ENTRIES).touch()
            _write_durable(path / HEADER, canonical(sealed(header, key)))
        except OSError as exc:
            raise LedgerError(f"cannot create the ledger {path}: {exc.strerror or exc}") from None
        return cls(path, key)

    # ------------------------------------------------------------------ reading
    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the ledger's exclusive file lock (fcntl.flock on ``lock``) while the block runs.

        Raises
        ------
        LedgerError
            The lock file cannot be opened for writing (a read-only ledger folder).
        """
        try:
            fd = os.open(self.path / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise LedgerError(f"cannot write the ledger {self.path} ({LOCK}: {exc.strerror or exc}): "
                              "nothing released") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def _read(self) -> tuple[list[dict], list[str], list[str]]:
        """(entries, problems, unrecorded certificate files): the chain checked byte by byte."""
        problems: list[str] = []
        try:
            raw = (self.path / HEADER).read_bytes()
        except OSError as exc:
            return [], [f"{HEADER}: {exc.strerror or exc}"], []
        previous = self.header.get("sha256") if isinstance(self.header, dict) else None
        if canonical(self.header) != raw or not _hash_holds(self.header):
            problems.append(f"{HEADER}: its bytes do not match its sha256 (edited)")
        if self.header.get("format") != FORMAT:
            problems.append(f"{HEADER}: not a {FORMAT} header")
        try:
            text = (self.path / ENTRIES).read_bytes()
        except OSError as exc:
            return [], [f"{ENTRIES}: {exc.strerror or exc}"], []
        if text and not text.endswith(b"\n"):
            problems.append(f"{ENTRIES}: the last line is incomplete (edited, or a crash while it was appended)")
        entries = []
        for number, line in enumerate(text.splitlines(keepends=True), start=1):
            where = f"{ENTRIES} line {number}"
            try:
                entry = json.loads(line)
            except ValueError:
                problems.append(f"{where}: not JSON")
                continue
            if not isinstance(entry, dict) or canonical(entry) != line.rstrip(b"\n") + b"\n" \
                    or not _hash_holds(entry):
                problems.append(f"{where}: its bytes do not match its sha256 (edited)")
                continue
            if entry.get("index") != number or entry.get("previous_sha256") != previous:
                problems.append(f"{where}: the chain is broken (an entry removed, inserted or reordered)")
            previous = entry["sha256"]
            problems += self._certificate_problems(entry, where)
            entries.append(entry)
        recorded = {e.get("certificate") for e in entries}
        folder = self.path / CERTIFICATES
        try:
            stored = ({f"{CERTIFICATES}/{p.name}" for p in folder.iterdir() if not p.name.endswith(".tmp")}
                      if folder.is_dir() else set())  # a .tmp file: a crash while a certificate was written
        except OSError as exc:
            return entries, problems + [f"{CERTIFICATES}: {exc.strerror or exc}"], []
        unrecorded = sorted(stored - recorded)
        return entries, problems, unrecorded

    def _certificate_problems(self, entry: dict, where: str) -> list[str]:
        name = entry.get("certificate")
        if name != _certificate_name(entry.get("index", 0)):
            return [f"{where}: certificate file name {name!r} is not the entry's"]
        try:
            data = (self.path / name).read_bytes()
        except OSError:
            return [f"{where}: its certificate {name} is missing or unreadable"]
        if _sha256(data) != entry.get("certificate_sha256"):
            return [f"{name}: its bytes do not match the entry's certificate_sha256 (edited)"]
        return []

    def _seal_problems(self, entries: list[dict], key: Key) -> list[str]:
        """What in the chain ``key`` does not seal: the header's method, then every document's seal."""
        method = self.header.get("seal_method")
        if method is None:
            return [f"{HEADER}: the ledger is not sealed, but a key was given (a chain rewritten without seals?)"]
        if method != key.method:
            return [f"{HEADER}: the ledger is sealed with {method}, the key given is {key.method}"]
        documents = [(HEADER, self.header)] + [(f"{ENTRIES} line {e['index']}", e) for e in entries]
        return [f"{where}: its seal is not this key's (the ledger was rewritten, or this is another ledger's key)"
                for where, document in documents if not key.holds(document["sha256"], document.get("seal"))]

    @property
    def entries(self) -> list[dict]:
        """The recorded releases, oldest first (as stored; :meth:`verify` checks them)."""
        return self._read()[0]

    def certificate(self, entry: dict) -> Certificate:
        """The stored certificate of ``entry``."""
        return Certificate.from_file(self.path / entry["certificate"])

    def spending(self) -> Spending:
        """The composition of every recorded release under the budget."""
        return _composed(self.budget, self.entries)

    def ledger_unit(self, entries: list[dict]) -> str | dict | None:
        """Who the ledger protects: its ``unit`` at init, else its first release's (a person: the id
        column only, whose row bounds apply to that release), None before the first release."""
        if self.unit is not None or not entries:
            return self.unit
        first = entries[0].get("unit", "row")
        return first if first == "row" else {"id": first["id"]}

    # ------------------------------------------------------------------ charging
    def _priced(self, entries: list[dict], guarantee: dict, unit: str | dict, adjacency: Any,
                name: str) -> tuple[int, Spending]:
        """(group, composition): the group size this release is charged for and the composition with
        every entry (module docstring); refused (raised) when it does not fit."""
        if entries and adjacency != entries[0]["adjacency"]:
            raise UnsupportedSpecError("--ledger", f"the release protects {adjacency}, the ledger's releases "
                                                   f"{entries[0]['adjacency']}: one neighbouring relation per ledger")
        group = _group_size(self.ledger_unit(entries), unit, adjacency, self.path)
        total = spending(self.budget, [e["guarantee"] for e in entries] + [guarantee],
                         [_label(e) for e in entries] + [f"this release ({name})"],
                         [e.get("group", 1) for e in entries] + [group])
        if not total.within:
            grouped = f" (charged for groups of {group} rows)" if group > 1 else ""
            raise BudgetExceededError(f"refused, nothing released: {name}{grouped} would bring the ledger "
                                      f"{self.path} to {_spent_text(total)}, over its budget "
                                      f"{budget_text(self.budget)}")
        return group, total

    def check_room(self, guarantee: dict, unit: str | dict, adjacency: Any, name: str) -> None:
        """Refuse, before any data are read or anything is designed, a release whose target alone
        (``guarantee``: ``{definition, parameters...}``) cannot fit in what the ledger has left (what is
        charged later is at least the target: a grouped release's composition over groups contains it).

        Raises
        ------
        BudgetExceededError, UnsupportedSpecError, LedgerError
            As :meth:`charge` would.
        """
        entries, problems, _ = self._read()
        if problems:
            raise LedgerError(f"{self.path} is damaged ({problems[0]}): nothing released; run `dpopt ledger verify`")
        self._check_key(entries)
        try:
            self._priced(entries, guarantee, unit, adjacency, name)
        except BudgetExceededError as exc:
            raise BudgetExceededError(str(exc).replace("refused, nothing released:",
                                                       "refused before reading the data, nothing released:", 1)) from None

    def _check_key(self, entries: list[dict]) -> None:
        """A sealed ledger is charged with its key only (which seals every document so far)."""
        sealed_with = self.header.get("seal_method")
        if sealed_with is None and self.key is None:
            return
        if self.key is None or not self.key.can_seal:
            raise LedgerError(f"the ledger {self.path} is sealed ({sealed_with}): give its key to charge it "
                              "(--ledger-key FILE: the HMAC key or the Ed25519 private key)")
        problems = self._seal_problems(entries, self.key)
        if problems:
            raise LedgerError(f"{self.path}: {problems[0]}: nothing released; run `dpopt ledger verify --key`")

    def charge(self, certificate: Certificate | dict, *, data: str | None = None) -> dict:
        """Record a release before it is output; refuse it if the budget would be exceeded.

        The release is charged in the ledger's privacy unit (:meth:`ledger_unit`): a row-level
        release in a person ledger with a known ``max_rows`` k at its cost for groups of k rows
        (:func:`dpopt.ledger.compose.group_guarantee`).

        Returns
        -------
        dict
            The entry appended (with ``spent``, the composition including this release).

        Raises
        ------
        BudgetExceededError
            The composition with every recorded release exceeds the budget (nothing recorded).
        UnsupportedSpecError
            The release's definition has no valid conversion to the budget's, its neighbouring
            relation differs from the recorded releases', or its privacy unit is not the ledger's
            and cannot be charged at a group cost.
        LedgerError
            The ledger is damaged, sealed and no (or another) key given, or cannot be written.
        """
        cert = Certificate.read(certificate)
        guarantee = release_guarantee(cert.data)
        adjacency = cert["guarantee"].get("scope", {}).get("adjacency")
        unit = release_unit(cert.data)
        name = cert["spec"].get("name", "release") if isinstance(cert["spec"], dict) else "release"
        with self.locked():
            entries, problems, unrecorded = self._read()
            pending = _certificate_name(len(entries) + 1)
            problems += [f"{name}: no entry records it" for name in unrecorded if name != pending]
            if problems:
                raise LedgerError(f"{self.path} is damaged ({problems[0]}): nothing released; "
                                  "run `dpopt ledger verify`")
            self._check_key(entries)
            group, total = self._priced(entries, guarantee, unit, adjacency, name)
            body = cert.to_json().encode()
            entry = sealed({
                "index": len(entries) + 1, "time": _utc_now(), "name": name, "kind": _release_kind(cert.data),
                "data": data, "spec_sha256": cert["spec_sha256"], "guarantee": guarantee, "adjacency": adjacency,
                "unit": unit, "group": group,
                "certificate": pending, "certificate_sha256": _sha256(body), "spent": total.to_dict()["spent"],
                "previous_sha256": entries[-1]["sha256"] if entries else self.header["sha256"],
            }, self.key if self.header.get("seal_method") else None)
            try:
                _write_durable(self.path / pending, body)
                _append_durable(self.path / ENTRIES, canonical(entry))
            except OSError as exc:
                raise LedgerError(f"cannot write the ledger {self.path}: {exc.strerror or exc}: "
                                  "nothing released") from None
        return entry

    def release_block(self, entry: dict) -> dict:
        """The ``ledger`` block of a release document: this entry, what the ledger has spent and what remains."""
        total = _composed(self.budget, self.entries[:entry["index"]])
        return {"ledger": str(self.path), "entry": entry["index"], "entry_sha256": entry["sha256"],
                "releases": entry["index"], "charged_for_rows": entry.get("group", 1), **total.to_dict()}

    # ------------------------------------------------------------------ verifying
    def verify(self, recheck_certificates: bool = True) -> Verification:
        """Re-derive the ledger: the chain byte by byte, with a key every seal
        (:mod:`dpopt.ledger.seal`), every certificate re-verified with :func:`dpopt.verify`
        (a plan's with :func:`dpopt.plan.verify_plan`), every recorded guarantee, unit and
        group read again from its certificate, and the composition re-derived after every
        entry (exact for additive budgets; (ε, δ) within 10⁻⁹ relative, the PLD being
        recomputed) and checked against the budget."""
        entries, problems, unrecorded = self._read()
        problems += [f"{name}: no entry records it (a removed entry, or a crash before it was recorded: "
                     "then nothing was released)" for name in unrecorded]
        chain = Check("ledger.chain", "SHA-256 hash chain over the header, the entries and the certificates, "
                                      "canonical JSON", not problems,
                      "; ".join(problems) if problems else f"{len(entries)} entries, head {self.head(entries)}")
        if problems:
            return Verification([chain])
        checks = [chain, self._seal_check(entries)]
        for i, entry in enumerate(entries):
            checks += self._entry_checks(entry, entries[: i + 1], recheck_certificates)
        return Verification(checks)

    def _seal_check(self, entries: list[dict]) -> Check:
        method = self.header.get("seal_method")
        if self.key is None:
            detail = (f"not checked: the ledger is sealed ({method}); give its key (--key, or --public-key for "
                      "Ed25519) to detect a rewritten chain" if method else
                      "the ledger is not sealed: a full rewrite of the chain is not detected")
            return Check("ledger.seal", "no key given", True, detail)
        problems = self._seal_problems(entries, self.key)
        return Check("ledger.seal", f"{self.key.method} seal of every document's sha256 under the key given",
                     not problems, "; ".join(problems) if problems else f"{len(entries) + 1} documents sealed")

    def _entry_checks(self, entry: dict, upto: list[dict], recheck: bool) -> list[Check]:
        label, cert = f"entry {entry['index']}", self.certificate(entry)
        checks = []
        if recheck:
            result = verify_plan(cert) if is_plan_certificate(cert.data) else verify(cert)
            checks.append(Check(f"{label}.certificate", "dpopt verify of the stored certificate", result.passed,
                                "all claims hold" if result.passed else
                                "failed: " + ", ".join(c.claim for c in result.failed)))
        guarantee, unit = release_guarantee(cert.data), release_unit(cert.data)
        checks.append(Check(f"{label}.guarantee", "the recorded guarantee and unit read again from the certificate",
                            guarantee == entry["guarantee"] and unit == entry.get("unit", unit),
                            f"{guarantee}, unit {unit} vs recorded {entry['guarantee']}, unit {entry.get('unit')}"))
        try:
            group = _group_size(self.ledger_unit(upto[:-1]), unit, entry["adjacency"], self.path)
        except UnsupportedSpecError as exc:
            group, why = None, str(exc)
        checks.append(Check(f"{label}.unit", "the group size re-derived from the ledger's unit and the release's",
                            group == entry.get("group", 1),
                            _group_text(group) if group == entry.get("group", 1)
                            else why if group is None else f"{group} re-derived vs {entry.get('group', 1)} recorded"))
        total = _composed(self.budget, upto)
        same = _same_spent(total.to_dict()["spent"], entry["spent"])
        checks.append(Check(f"{label}.spent", total.method, same and total.within,
                            f"{_spent_text(total)} (recorded {entry['spent']}) within {budget_text(self.budget)}"
                            if total.within else f"{_spent_text(total)} exceeds {budget_text(self.budget)}"))
        return checks

    def head(self, entries: list[dict] | None = None) -> str:
        """``sha256`` of the last entry (of the header when there is none): the value to keep elsewhere."""
        entries = self.entries if entries is None else entries
        return entries[-1]["sha256"] if entries else self.header.get("sha256", "")

    # ------------------------------------------------------------------ showing
    def show(self) -> str:
        """Budget, unit, spent, remaining, and one line per release (``dpopt ledger show``)."""
        entries, problems, _ = self._read()
        total = _composed(self.budget, entries)
        by_kind: dict[str, list[dict]] = {}
        for e in entries:
            by_kind.setdefault(e["guarantee"]["definition"], []).append(e)
        lines = [f"DAMAGED ({problems[0]}): run `dpopt ledger verify`"] if problems else []
        sealed_with = self.header.get("seal_method")
        lines += [f"ledger {self.path}: budget {budget_text(self.budget)}; {len(entries)} release(s); "
                  f"protects {unit_text(self.ledger_unit(entries))}" + (f"; sealed ({sealed_with})" if sealed_with else ""),
                  f"spent: {_spent_text(total)}; remaining: {_remaining_text(total)}",
                  f"composition: {total.method}"]
        lines += [f"  {definition} releases: {len(gs)}, {_own_sum(definition, gs)}" for definition, gs in by_kind.items()]
        lines.append("| # | time | release | kind | unit | guarantee | spent after | data |")
        lines.append("|---|---|---|---|---|---|---|---|")
        for e in entries:
            g = e["guarantee"]
            shown = ", ".join(f"{k} = {g[k]!r}" for k in PARAMETERS[g["definition"]])
            spent = ", ".join(f"{k} = {_value(v):.6g}" for k, v in e["spent"].items())
            group = f", charged for groups of {e['group']} rows" if e.get("group", 1) > 1 else ""
            lines.append(f"| {e['index']} | {e['time']} | {e['name']} | {e['kind']} | "
                         f"{_unit_of_entry_text(e.get('unit', 'row'))}{group} | {g['definition']} {shown} "
                         f"| {spent} | {e['data'] or ''} |")
        lines.append(f"head sha256: {self.head(entries)} (keep a copy elsewhere: it detects a removed last entry)")
        return "\n".join(lines)


def release_unit(certificate: dict) -> str | dict:
    """The privacy unit of a release: its ``privacy_unit`` (id column and row bounds) or ``"row"``."""
    scope = certificate.get("guarantee", {}).get("scope", {})
    spec = certificate.get("spec")
    unit = scope.get("privacy_unit") or (spec.get("data", {}).get("privacy_unit") if isinstance(spec, dict) else None)
    return unit or "row"


def _checked_unit(unit: Any) -> str | dict | None:
    """A ledger's ``unit``: None, ``"row"`` or ``{"id": COLUMN}`` with an optional positive integer ``max_rows``.

    Raises
    ------
    SpecError
        ``--unit``: anything else.
    """
    if unit is None or unit == "row":
        return unit
    if isinstance(unit, dict) and set(unit) <= {"id", "max_rows"} and isinstance(unit.get("id"), str) \
            and unit["id"].strip() and (unit.get("max_rows") is None or (
                isinstance(unit["max_rows"], int) and not isinstance(unit["max_rows"], bool) and unit["max_rows"] >= 1)):
        return {k: v for k, v in unit.items() if v is not None}
    raise SpecError("--unit", f"a ledger protects 'row', or a person named by an id column with optionally the most "
                              f"rows a person has, e.g. {{'id': 'person_id', 'max_rows': 4}} (got {unit!r})")


def unit_text(unit: str | dict | None) -> str:
    """The unit in words."""
    if unit is None:
        return "the unit of its first release"
    if unit == "row":
        return "rows"
    bound = f" (at most {unit['max_rows']} rows each)" if unit.get("max_rows") else ""
    return f"persons by {unit['id']}{bound}"


def _group_size(ledger: str | dict | None, release: str | dict, adjacency: Any, path: Path) -> int:
    """How many of the release's units one of the ledger's units is (the group privacy it is charged at).

    A person-level release protects every person with all their rows: in a person ledger of the same
    id column it counts as is. A row-level release in a person ledger counts for groups of the person
    bound k (``max_rows``, declared at init) under add/remove (a person added or removed is at most
    k rows added or removed); under replace-one a person's rows replaced change the number of rows,
    which a row-level replace-one guarantee does not cover. A person-level release in a row ledger is
    refused: one row added to a person already present is that person replaced (two person steps).

    Raises
    ------
    UnsupportedSpecError
        One line saying why the release cannot be charged to this ledger.
    """
    if ledger is None or ledger == release:
        return 1
    if ledger == "row":
        raise UnsupportedSpecError("--ledger", f"the release protects persons (id {release['id']}), the ledger {path} "
                                               "counts rows (set at init or by its first release): a person-level "
                                               "release is charged to a ledger made with `--unit ID`")
    if release != "row":
        if release["id"] == ledger["id"]:
            return 1
        raise UnsupportedSpecError("--ledger", f"the release protects persons by {release['id']}, the ledger {path} "
                                               f"persons by {ledger['id']}: one privacy unit per ledger")
    if ledger.get("max_rows") is None:
        raise UnsupportedSpecError("--ledger", f"the release protects rows, the ledger {path} persons by "
                                               f"{ledger['id']} with no known bound on a person's rows: declare it "
                                               "at init (`--unit ID --max-rows K`) to charge row-level releases at "
                                               "their group-privacy cost")
    if not isinstance(adjacency, dict) or adjacency.get("kind") != "add_remove":
        raise UnsupportedSpecError("--ledger", f"the release protects rows under {adjacency}, the ledger {path} "
                                               f"persons by {ledger['id']}: only an add/remove row-level release "
                                               "is charged at its group-privacy cost")
    return ledger["max_rows"]


def _group_text(group: int) -> str:
    return f"charged for groups of {group} rows" if group > 1 else "charged in its own unit"


def _composed(budget: dict, entries: list[dict]) -> Spending:
    """The composition of the recorded ``entries``, each for its recorded group size."""
    return spending(budget, [e["guarantee"] for e in entries], [_label(e) for e in entries],
                    [e.get("group", 1) for e in entries])


def _hash_holds(document: dict) -> bool:
    """The document's ``sha256`` is the SHA-256 of its canonical form without ``sha256`` and ``seal``."""
    return isinstance(document, dict) and document.get("sha256") == sealed(document)["sha256"]


def _label(entry: dict) -> str:
    return f"release {entry['index']} ({entry['name']})"


def _value(v: Any) -> float:
    return v["value"] if isinstance(v, dict) else v


def _same_spent(computed: dict, recorded: dict) -> bool:
    if computed.keys() != recorded.keys():
        return False
    for key, value in computed.items():
        if isinstance(value, dict):
            if value["exact"] != recorded[key].get("exact"):
                return False
        elif abs(value - recorded[key]) > 1e-9 * max(abs(value), 1e-300):
            return False
    return True


def budget_text(budget: dict) -> str:
    return f"{budget['definition']} " + ", ".join(f"{k} = {budget[k]:g}" for k in PARAMETERS[budget["definition"]])


def _number(value: Fraction | float) -> str:
    """An exact value as its decimal when it has one of at most 17 significant digits (what refusals
    compare: 3/10 is "0.3"), else 10 significant digits."""
    if isinstance(value, Fraction):
        den, twos, fives = value.denominator, 0, 0
        while den % 2 == 0:
            den, twos = den // 2, twos + 1
        while den % 5 == 0:
            den, fives = den // 5, fives + 1
        if den == 1:
            places = max(twos, fives)
            text = format(Decimal(value.numerator * 10 ** places // value.denominator).scaleb(-places), "f")
            text = text.rstrip("0").rstrip(".") if "." in text else text
            if len(text.replace("-", "").replace(".", "").lstrip("0")) <= 17:
                return text
    return f"{float(value):.10g}"


def _spent_text(total: Spending) -> str:
    if total.budget["definition"] == "approx":
        return (f"δ = {total.spent['delta']:.6g} at ε = {total.budget['epsilon']:g} "
                f"(ε = {total.spent['epsilon']:.6g} at δ = {total.budget['delta']:g})")
    key = CURRENCY[total.budget["definition"]]
    value = total.spent[key]
    shown = f"{key} = {_number(value)}"
    return shown + (f" (μ = {float(value) ** 0.5:.10g})" if key == "mu_squared" else "")


def _remaining_text(total: Spending) -> str:
    return ", ".join(f"{k} = {_number(v)}" for k, v in total.remaining.items())


def _own_sum(definition: str, entries: list[dict]) -> str:
    """The releases of one definition composed in their own currency, each for its group size (the
    breakdown of ``show``)."""
    if definition in CURRENCY:
        total = sum((currency(definition, e["guarantee"], group=e.get("group", 1)) for e in entries), Fraction(0))
        return f"Σ {CURRENCY[definition]} = {_number(total)}"
    return ", ".join(f"(ε = {e['guarantee']['epsilon']:g}, δ = {e['guarantee']['delta']:g})"
                     + (f" for groups of {e['group']}" if e.get("group", 1) > 1 else "") for e in entries)


def _unit_of_entry_text(unit: str | dict) -> str:
    """A release's unit in words: rows, or persons by the id column with the release's row bounds."""
    if unit == "row":
        return "rows"
    bounds = ", ".join(f"{k} {v}" for k, v in unit.items() if k != "id")
    return f"persons by {unit['id']}" + (f" ({bounds})" if bounds else "")
