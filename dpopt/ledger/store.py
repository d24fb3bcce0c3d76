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
from fractions import Fraction
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from dpopt._version import __version__
from dpopt.certificate.model import Certificate
from dpopt.certificate.verify import Verification, verify
from dpopt.core.checks import Check
from dpopt.errors import BudgetExceededError, LedgerError, SpecError, UnsupportedSpecError
from dpopt.ledger.compose import BUDGETS, CURRENCY, PARAMETERS, Spending, release_guarantee, spending
from dpopt.plan.certificate import verify_plan
from dpopt.plan.spec import is_plan_certificate
from dpopt.spec.models import Privacy

FORMAT = "dpopt-ledger 1"
HEADER, ENTRIES, CERTIFICATES, LOCK = "ledger.json", "entries.jsonl", "certificates", "lock"


def canonical(document: dict) -> bytes:
    """The canonical bytes of a JSON document: sorted keys, no spaces, ASCII, one final newline."""
    return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode() + b"\n"


def sealed(document: dict) -> dict:
    """``document`` with ``sha256``: the SHA-256 of its canonical form without that key."""
    body = {k: v for k, v in document.items() if k != "sha256"}
    return body | {"sha256": hashlib.sha256(canonical(body)).hexdigest()}


def parse_budget(budget: str | dict) -> dict:
    """``{definition, parameters...}`` from ``'zcdp: {rho: 2.56}'`` or ``{"zcdp": {"rho": 2.56}}``.

    Raises
    ------
    SpecError
        Not one of the definitions in :data:`dpopt.ledger.compose.BUDGETS`, or invalid parameters.
    """
    if isinstance(budget, str):
        try:
            budget = yaml.safe_load(budget)
        except yaml.YAMLError as exc:
            raise SpecError("--budget", f"not YAML: {str(exc).splitlines()[0]}") from None
    try:
        privacy = Privacy.model_validate(budget)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise SpecError("--budget", f"{'.'.join(map(str, first['loc'])) or 'budget'}: {first['msg']}") from None
    if privacy.definition not in BUDGETS:
        raise SpecError("--budget", f"a ledger's budget is one of {', '.join(BUDGETS)} (got {privacy.definition})")
    return {"definition": privacy.definition, **{k: float(v) for k, v in privacy.parameters.items()}}


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

    Examples
    --------
    >>> ledger = Ledger.create("census_ledger", {"gdp": {"mu": 1.0}})    # doctest: +SKIP
    >>> sol = dpopt.solve("specs/table_2x2_margins_gdp.yaml")            # doctest: +SKIP
    >>> entry = ledger.charge(sol.certificate, data="records.csv")       # doctest: +SKIP
    >>> ledger.spending().remaining                                      # doctest: +SKIP
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        header = self.path / HEADER
        try:
            self.header = json.loads(header.read_bytes())
            budget = self.header["budget"]
            self.budget = parse_budget({budget["definition"]: {k: budget[k] for k in PARAMETERS[budget["definition"]]}})
        except OSError as exc:
            raise LedgerError(f"{self.path} is not a dpopt ledger ({HEADER}: {exc.strerror or exc}); "
                              "create one with `dpopt ledger init`") from None
        except (ValueError, KeyError, TypeError, AttributeError):
            raise LedgerError(f"{header} is damaged (not a ledger header): run `dpopt ledger verify`") from None

    @classmethod
    def create(cls, path: str | Path, budget: str | dict) -> Ledger:
        """A new, empty ledger with ``budget`` (see :func:`parse_budget`) in the folder ``path``.

        Raises
        ------
        LedgerError
            ``path`` exists and is not an empty folder.
        """
        path = Path(path)
        parsed = parse_budget(budget)
        if path.exists() and (not path.is_dir() or any(path.iterdir())):
            raise LedgerError(f"{path} exists and is not an empty folder: a ledger is created once")
        (path / CERTIFICATES).mkdir(parents=True, exist_ok=True)
        (path / LOCK).touch()
        (path / ENTRIES).touch()
        header = sealed({"format": FORMAT, "budget": parsed, "created": _utc_now(), "dpopt_version": __version__})
        _write_durable(path / HEADER, canonical(header))
        return cls(path)

    # ------------------------------------------------------------------ reading
    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the ledger's exclusive file lock (fcntl.flock on ``lock``) while the block runs."""
        fd = os.open(self.path / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def _read(self) -> tuple[list[dict], list[str], list[str]]:
        """(entries, problems, unrecorded certificate files): the chain checked byte by byte."""
        problems: list[str] = []
        raw = (self.path / HEADER).read_bytes()
        previous = self.header.get("sha256") if isinstance(self.header, dict) else None
        if canonical(self.header) != raw or sealed(self.header) != self.header:
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
                    or sealed(entry) != entry:
                problems.append(f"{where}: its bytes do not match its sha256 (edited)")
                continue
            if entry.get("index") != number or entry.get("previous_sha256") != previous:
                problems.append(f"{where}: the chain is broken (an entry removed, inserted or reordered)")
            previous = entry["sha256"]
            problems += self._certificate_problems(entry, where)
            entries.append(entry)
        recorded = {e.get("certificate") for e in entries}
        folder = self.path / CERTIFICATES
        stored = ({f"{CERTIFICATES}/{p.name}" for p in folder.iterdir() if not p.name.endswith(".tmp")}
                  if folder.is_dir() else set())  # a .tmp file: a crash while a certificate was written
        unrecorded = sorted(stored - recorded)
        return entries, problems, unrecorded

    def _certificate_problems(self, entry: dict, where: str) -> list[str]:
        name = entry.get("certificate")
        if name != _certificate_name(entry.get("index", 0)):
            return [f"{where}: certificate file name {name!r} is not the entry's"]
        try:
            data = (self.path / name).read_bytes()
        except OSError:
            return [f"{where}: its certificate {name} is missing"]
        if _sha256(data) != entry.get("certificate_sha256"):
            return [f"{name}: its bytes do not match the entry's certificate_sha256 (edited)"]
        return []

    @property
    def entries(self) -> list[dict]:
        """The recorded releases, oldest first (as stored; :meth:`verify` checks them)."""
        return self._read()[0]

    def certificate(self, entry: dict) -> Certificate:
        """The stored certificate of ``entry``."""
        return Certificate.from_file(self.path / entry["certificate"])

    def spending(self) -> Spending:
        """The composition of every recorded release under the budget."""
        entries = self.entries
        return spending(self.budget, [e["guarantee"] for e in entries], [_label(e) for e in entries])

    # ------------------------------------------------------------------ charging
    def charge(self, certificate: Certificate | dict, *, data: str | None = None) -> dict:
        """Record a release before it is output; refuse it if the budget would be exceeded.

        Returns
        -------
        dict
            The entry appended (with ``spent``, the composition including this release).

        Raises
        ------
        BudgetExceededError
            The composition with every recorded release exceeds the budget (nothing recorded).
        UnsupportedSpecError
            The release's definition has no valid conversion to the budget's, or its
            neighbouring relation differs from the recorded releases'.
        LedgerError
            The ledger is damaged.
        """
        cert = Certificate.read(certificate)
        guarantee = release_guarantee(cert.data)
        adjacency = cert["guarantee"].get("scope", {}).get("adjacency")
        with self.locked():
            entries, problems, unrecorded = self._read()
            pending = _certificate_name(len(entries) + 1)
            problems += [f"{name}: no entry records it" for name in unrecorded if name != pending]
            if problems:
                raise LedgerError(f"{self.path} is damaged ({problems[0]}): nothing released; "
                                  "run `dpopt ledger verify`")
            if entries and adjacency != entries[0]["adjacency"]:
                raise UnsupportedSpecError("--ledger", f"the release protects {adjacency}, the ledger's releases "
                                                       f"{entries[0]['adjacency']}: one neighbouring relation "
                                                       "per ledger")
            name = cert["spec"].get("name", "release") if isinstance(cert["spec"], dict) else "release"
            total = spending(self.budget, [e["guarantee"] for e in entries] + [guarantee],
                             [_label(e) for e in entries] + [f"this release ({name})"])
            if not total.within:
                raise BudgetExceededError(f"refused, nothing released: {name} would bring the ledger "
                                          f"{self.path} to {_spent_text(total)}, over its budget "
                                          f"{budget_text(self.budget)}")
            body = cert.to_json().encode()
            _write_durable(self.path / pending, body)
            entry = sealed({
                "index": len(entries) + 1, "time": _utc_now(), "name": name, "kind": _release_kind(cert.data),
                "data": data, "spec_sha256": cert["spec_sha256"], "guarantee": guarantee, "adjacency": adjacency,
                "certificate": pending, "certificate_sha256": _sha256(body), "spent": total.to_dict()["spent"],
                "previous_sha256": entries[-1]["sha256"] if entries else self.header["sha256"],
            })
            _append_durable(self.path / ENTRIES, canonical(entry))
        return entry

    def release_block(self, entry: dict) -> dict:
        """The ``ledger`` block of a release document: this entry, what the ledger has spent and what remains."""
        total = spending(self.budget, [e["guarantee"] for e in self.entries[:entry["index"]]])
        return {"ledger": str(self.path), "entry": entry["index"], "entry_sha256": entry["sha256"],
                "releases": entry["index"], **total.to_dict()}

    # ------------------------------------------------------------------ verifying
    def verify(self, recheck_certificates: bool = True) -> Verification:
        """Re-derive the ledger: the chain byte by byte, every certificate re-verified with
        :func:`dpopt.verify` (a plan's with :func:`dpopt.plan.verify_plan`), every recorded
        guarantee read again from its certificate, and the composition re-derived after
        every entry (exact for additive budgets; (ε, δ) within 10⁻⁹ relative, the PLD
        being recomputed) and checked against the budget."""
        entries, problems, unrecorded = self._read()
        problems += [f"{name}: no entry records it (a removed entry, or a crash before it was recorded: "
                     "then nothing was released)" for name in unrecorded]
        chain = Check("ledger.chain", "SHA-256 hash chain over the header, the entries and the certificates, "
                                      "canonical JSON", not problems,
                      "; ".join(problems) if problems else f"{len(entries)} entries, head {self.head(entries)}")
        if problems:
            return Verification([chain])
        checks = [chain]
        for i, entry in enumerate(entries):
            checks += self._entry_checks(entry, entries[: i + 1], recheck_certificates)
        return Verification(checks)

    def _entry_checks(self, entry: dict, upto: list[dict], recheck: bool) -> list[Check]:
        label, cert = f"entry {entry['index']}", self.certificate(entry)
        checks = []
        if recheck:
            result = verify_plan(cert) if is_plan_certificate(cert.data) else verify(cert)
            checks.append(Check(f"{label}.certificate", "dpopt verify of the stored certificate", result.passed,
                                "all claims hold" if result.passed else
                                "failed: " + ", ".join(c.claim for c in result.failed)))
        guarantee = release_guarantee(cert.data)
        checks.append(Check(f"{label}.guarantee", "the recorded guarantee read again from the certificate",
                            guarantee == entry["guarantee"], f"{guarantee} vs recorded {entry['guarantee']}"))
        total = spending(self.budget, [e["guarantee"] for e in upto])
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
        """Budget, spent, remaining, and one line per release (``dpopt ledger show``)."""
        entries, problems, _ = self._read()
        total = spending(self.budget, [e["guarantee"] for e in entries], [_label(e) for e in entries])
        by_kind: dict[str, list[dict]] = {}
        for e in entries:
            by_kind.setdefault(e["guarantee"]["definition"], []).append(e["guarantee"])
        lines = [f"DAMAGED ({problems[0]}): run `dpopt ledger verify`"] if problems else []
        lines += [f"ledger {self.path}: budget {budget_text(self.budget)}; {len(entries)} release(s)",
                 f"spent: {_spent_text(total)}; remaining: {_remaining_text(total)}",
                 f"composition: {total.method}"]
        lines += [f"  {definition} releases: {len(gs)}, {_own_sum(definition, gs)}" for definition, gs in by_kind.items()]
        lines.append("| # | time | release | kind | guarantee | spent after | data |")
        lines.append("|---|---|---|---|---|---|---|")
        for e in entries:
            g = e["guarantee"]
            shown = ", ".join(f"{k} = {g[k]:.6g}" for k in PARAMETERS[g["definition"]])
            spent = ", ".join(f"{k} = {_value(v):.6g}" for k, v in e["spent"].items())
            lines.append(f"| {e['index']} | {e['time']} | {e['name']} | {e['kind']} | {g['definition']} {shown} "
                         f"| {spent} | {e['data'] or ''} |")
        lines.append(f"head sha256: {self.head(entries)} (keep a copy elsewhere: it detects a removed last entry)")
        return "\n".join(lines)


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


def _spent_text(total: Spending) -> str:
    if total.budget["definition"] == "approx":
        return (f"δ = {total.spent['delta']:.6g} at ε = {total.budget['epsilon']:g} "
                f"(ε = {total.spent['epsilon']:.6g} at δ = {total.budget['delta']:g})")
    key = CURRENCY[total.budget["definition"]]
    value = total.spent[key]
    shown = f"{key} = {float(value):.10g}"
    return shown + (f" (μ = {float(value) ** 0.5:.10g})" if key == "mu_squared" else "")


def _remaining_text(total: Spending) -> str:
    return ", ".join(f"{k} = {float(v):.10g}" for k, v in total.remaining.items())


def _own_sum(definition: str, guarantees: list[dict]) -> str:
    """The releases of one definition composed in their own currency (for the breakdown of ``show``)."""
    if definition in CURRENCY:
        key = PARAMETERS[definition][0]
        values = [Fraction(g[key]) for g in guarantees]
        total = sum((v * v if definition == "gdp" else v for v in values), Fraction(0))
        return f"Σ {CURRENCY[definition]} = {float(total):.10g}"
    return ", ".join(f"(ε = {g['epsilon']:g}, δ = {g['delta']:g})" for g in guarantees)
