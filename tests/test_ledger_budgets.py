"""The ledger with budgets as people write them, privacy units, seals and read-only folders.

Expected values are derived here from the decimals written (1/10 + 1/10 + 1/10 = 3/10), from
group privacy as the papers state it (pure kε; zCDP k²ρ, Bun & Steinke 2016, Prop. 1.9; (ε, δ):
(kε, δ·Σ_{i<k} e^{iε}), Vadhan 2017, Lemma 2.2 applied k times), never from dpopt's output.
"""

from __future__ import annotations

import json
import math
import os
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import pytest

from conftest import ROOT
from dpopt.cli import main
from dpopt.core.decimals import written
from dpopt.errors import BudgetExceededError, LedgerDamagedError, LedgerError, SpecError, UnsupportedSpecError
from dpopt.ledger import Ledger, parse_budget, spending
from dpopt.ledger.seal import load_key
from dpopt.ledger.store import ENTRIES, HEADER, canonical, sealed
from dpopt.solve import solve
from dpopt.spec.load import load_spec, read_document

COUNT = ROOT / "specs" / "count_add_remove.yaml"
DATA = ROOT / "specs" / "data" / "survey.csv"
PERSON = {"id": "person_id", "max_rows": 4}


def _count(privacy: dict, unit: dict | None = None, adjacency: str = "add_remove"):
    """The certificate of the one-count spec under ``privacy``, row-level or with the privacy ``unit``."""
    document = read_document(COUNT) | {"privacy": privacy, "adjacency": {"kind": adjacency}}
    if adjacency == "replace_one":  # a count does not change under replace-one: the histogram does
        document["query"] = {"kind": "histogram", "attribute": "disability"}
    if unit is not None:
        document["data"] = document["data"] | {"privacy_unit": unit}
    return solve(document).certificate


@pytest.fixture(scope="module")
def tenth():
    return _count({"zcdp": {"rho": 0.1}})


def _spec_file(tmp_path: Path, privacy: str) -> Path:
    path = tmp_path / "count.yaml"
    path.write_text(COUNT.read_text().replace("privacy: {pure: {epsilon: 0.5}}", f"privacy: {privacy}"))
    return path


# ------------------------------------------------------------------ decimals as written
def test_three_releases_at_a_tenth_fill_three_tenths_and_show_agrees(tmp_path, tenth, capsys):
    """The issue's example: budget ρ = 0.3, releases ρ = 0.1; the third succeeds, the fourth is refused."""
    assert main(["ledger", "init", str(tmp_path / "L"), "--budget", "zcdp: {rho: 0.3}"]) == 0
    ledger = Ledger(tmp_path / "L")
    for i in range(2):
        ledger.charge(tenth)
    capsys.readouterr()
    assert main(["ledger", "show", str(tmp_path / "L")]) == 0
    assert "remaining: rho = 0.1\n" in capsys.readouterr().out  # 3/10 − 2/10
    assert ledger.charge(tenth)["index"] == 3  # fits: 3/10 ≤ 3/10
    assert ledger.spending().spent["rho"] == Fraction(3, 10) and ledger.spending().remaining["rho"] == 0
    with pytest.raises(BudgetExceededError, match="rho = 0.4, over its budget zcdp rho = 0.3"):
        ledger.charge(tenth)
    assert main(["ledger", "show", str(tmp_path / "L")]) == 0
    assert "spent: rho = 0.3; remaining: rho = 0\n" in capsys.readouterr().out
    assert ledger.verify(recheck_certificates=False).passed


@pytest.mark.parametrize("rho", ["0.3", Decimal("0.3"), 0.3, "3e-1", "0.30", Fraction(3, 10)])
def test_a_budget_is_the_decimal_it_spells_whatever_its_type(rho):
    budget = parse_budget({"zcdp": {"rho": rho}})
    guarantees = [{"definition": "zcdp", "rho": r} for r in ("0.1", Decimal("0.1"), 0.1)]
    assert spending(budget, guarantees).within and spending(budget, guarantees).spent["rho"] == Fraction(3, 10)
    assert not spending(budget, guarantees + [{"definition": "zcdp", "rho": 1e-15}]).within


def test_floats_count_at_their_repr_and_undecimal_numbers_are_refused(tmp_path):
    assert written(0.1 + 0.2) == Fraction("0.30000000000000004")  # repr of the float sum, not 0.3
    assert written(1e-6) == Fraction(1, 10**6) and written("1E-6") == Fraction(1, 10**6)
    for text in ("0.30000000000000001", "1e-400"):  # a float does not keep them: refused, not rounded
        with pytest.raises(SpecError, match="not kept by a floating-point number"):
            parse_budget(f"zcdp: {{rho: {text}}}")
    spec = _spec_file(tmp_path, "{zcdp: {rho: 0.30000000000000001}}")
    with pytest.raises(SpecError, match="privacy.zcdp.rho: 0.30000000000000001 is not kept"):
        load_spec(spec)


def test_budget_read_as_yaml_12_with_errors_in_plain_words(tmp_path, capsys):
    assert main(["ledger", "init", str(tmp_path / "A"), "--budget", "approx: {epsilon: 3, delta: 1e-6}"]) == 0
    assert Ledger(tmp_path / "A").budget == {"definition": "approx", "epsilon": 3.0, "delta": 1e-6}
    capsys.readouterr()
    for bad, said in [("zcdp: {rho: yes}", "'yes' is not a decimal number"), ("zcdp: {rho: 1, mu: 2}", "gives rho"),
                      ("gdp", "write one definition and its parameters"), ("pdp: {epsilon: 1, delta: 0.1}", "got pdp"),
                      ("approx: {epsilon: 1, delta: 2}", "between 0 and 1"), ("zcdp: {rho: [", "not valid YAML")]:
        assert main(["ledger", "init", str(tmp_path / "B"), "--budget", bad]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and said in err and "--budget" in err, err
        assert "instance of" not in err and "Extra inputs" not in err
    assert not (tmp_path / "B").exists()


def test_a_spent_ledger_refuses_from_the_spec_before_reading_data_or_designing(tmp_path, tenth, capsys, monkeypatch):
    Ledger.create(tmp_path / "L", {"zcdp": {"rho": 0.3}})
    for _ in range(3):
        Ledger(tmp_path / "L").charge(tenth)
    import dpopt.release as release

    def never(*args, **kwargs):
        raise AssertionError("the release was designed or the data read before the budget was checked")

    monkeypatch.setattr(release, "release_once", never)
    spec = _spec_file(tmp_path, "{zcdp: {rho: 0.1}}")
    capsys.readouterr()
    code = main(["release", str(spec), "--data", str(tmp_path / "no-such-file.csv"), "--ledger", str(tmp_path / "L")])
    err = capsys.readouterr().err
    assert code == 3 and err.count("\n") == 1 and "refused before reading the data, nothing released" in err


# ------------------------------------------------------------------ privacy units
def test_a_row_level_release_in_a_person_ledger_is_charged_at_its_group_cost(tmp_path):
    ledger = Ledger.create(tmp_path / "L", {"zcdp": {"rho": 1}}, unit=PERSON)
    ledger.charge(_count({"zcdp": {"rho": 0.5}}, PERSON))
    entry = ledger.charge(_count({"zcdp": {"rho": 0.01}}))  # rows: k²ρ = 16 · 0.01
    assert entry["group"] == 4 and entry["unit"] == "row"
    assert ledger.spending().spent["rho"] == Fraction(1, 2) + 16 * Fraction(1, 100)
    with pytest.raises(BudgetExceededError, match="charged for groups of 4 rows"):
        ledger.charge(_count({"zcdp": {"rho": 0.03}}))  # 0.66 + 16 · 0.03 = 1.14 > 1
    assert ledger.verify(recheck_certificates=False).passed


def test_group_costs_of_pure_and_approx_row_releases():
    k, eps, delta = 3, 0.2, 1e-7
    budget = parse_budget("pure: {epsilon: 1}")
    assert spending(budget, [{"definition": "pure", "epsilon": 0.2}], groups=[k]).spent["epsilon"] == Fraction(3, 5)
    budget = parse_budget("approx: {epsilon: 0.6, delta: 1e-6}")
    spent = spending(budget, [{"definition": "approx", "epsilon": eps, "delta": delta}], groups=[k]).spent["delta"]
    grouped = delta * sum(math.exp(i * eps) for i in range(k))  # δ(1 + e^ε + e^2ε) at ε' = kε = 0.6
    assert grouped <= spent <= grouped * (1 + 1e-9)


@pytest.mark.parametrize("ledger_unit, release, adjacency, said", [
    ({"id": "person_id"}, "row", "add_remove", "--max-rows K"),  # the person bound unknown
    ("row", PERSON, "add_remove", "counts rows"),
    ({"id": "household_id", "max_rows": 4}, PERSON, "add_remove", "one privacy unit per ledger"),
    (PERSON, "row", "replace_one", "only an add/remove row-level release"),
])
def test_releases_in_another_unit_without_a_valid_group_cost_are_refused_in_one_line(
        tmp_path, ledger_unit, release, adjacency, said):
    ledger = Ledger.create(tmp_path / "L", {"zcdp": {"rho": 1}}, unit=ledger_unit)
    cert = _count({"zcdp": {"rho": 0.1}}, None if release == "row" else release, adjacency)
    with pytest.raises(UnsupportedSpecError, match=said) as caught:
        ledger.charge(cert)
    assert "\n" not in str(caught.value) and not ledger.entries


def test_without_a_unit_at_init_the_first_release_sets_it(tmp_path):
    ledger = Ledger.create(tmp_path / "L", {"zcdp": {"rho": 1}})
    ledger.charge(_count({"zcdp": {"rho": 0.1}}, PERSON))
    with pytest.raises(UnsupportedSpecError, match="no known bound on a person's rows"):
        ledger.charge(_count({"zcdp": {"rho": 0.1}}))


# ------------------------------------------------------------------ seals
def _reseal(path: Path, edit, key=None) -> None:
    """Rewrite the whole chain as someone who can write the folder but does not hold the ledger's key:
    edit the header, then recompute every hash (the attack of the issue: budget 3 → 100), and seal
    every document with ``key`` (the attacker's own) when given."""
    header = sealed(edit(json.loads((path / HEADER).read_bytes())), key)
    (path / HEADER).write_bytes(canonical(header))
    previous, lines = header["sha256"], []
    for line in (path / ENTRIES).read_bytes().splitlines():
        entry = sealed(json.loads(line) | {"previous_sha256": previous}, key)
        previous = entry["sha256"]
        lines.append(canonical(entry))
    (path / ENTRIES).write_bytes(b"".join(lines))


def _raise_budget(header: dict) -> dict:
    return header | {"budget": {"definition": "pure", "epsilon": 100.0}}


@pytest.fixture(params=["hmac", "ed25519"])
def keys(request, tmp_path) -> tuple[Path, Path]:
    """(key that seals, key that checks): one HMAC secret for both, or an Ed25519 pair (`dpopt keygen`)."""
    if request.param == "hmac":
        secret = tmp_path / "ledger.key"
        secret.write_bytes(os.urandom(32))
        return secret, secret
    pytest.importorskip("cryptography")
    assert main(["keygen", str(tmp_path / "agency.pem")]) == 0
    return tmp_path / "agency.pem", tmp_path / "agency.pub.pem"


def test_a_resealed_chain_passes_without_the_key_and_fails_with_it(tmp_path, keys, capsys):
    seal, check = keys
    path = tmp_path / "L"
    assert main(["ledger", "init", str(path), "--budget", "pure: {epsilon: 3}", "--key", str(seal)]) == 0
    cert = _count({"pure": {"epsilon": 1}})
    with pytest.raises(LedgerError, match="sealed"):
        Ledger(path).charge(cert)  # no key: nothing charged
    Ledger(path, key=seal).charge(cert)
    flag = "--key" if check == seal else "--public-key"
    assert main(["ledger", "verify", str(path), flag, str(check)]) == 0
    _reseal(path, _raise_budget)
    capsys.readouterr()
    assert main(["ledger", "verify", str(path)]) == 0  # the hash chain alone cannot tell
    assert main(["ledger", "verify", str(path), flag, str(check)]) == 1
    assert "ledger.seal" in capsys.readouterr().err
    with pytest.raises(LedgerError, match="seal"):
        Ledger(path, key=seal).charge(cert)


def test_tamper_sample_on_a_sealed_ledger_every_rewrite_fails_with_the_key(tmp_path):
    """A sample of rewrites that keep the hash chain valid; each passes the chain check and fails
    `verify` with the key, on the seal."""
    secret, other = tmp_path / "k", tmp_path / "other"
    secret.write_bytes(os.urandom(32))
    other.write_bytes(os.urandom(32))
    tampers = {
        "budget raised": (_raise_budget, None),
        "seal removed": (lambda h: {k: v for k, v in h.items() if k != "seal_method"}, None),
        "unit changed": (lambda h: h | {"unit": "row"}, None),
        "budget raised, sealed with another key": (_raise_budget, load_key(other)),
        "nothing changed, sealed with another key": (lambda h: h, load_key(other)),
    }
    for name, (edit, key) in tampers.items():
        path = tmp_path / name.replace(" ", "_").replace(",", "")
        Ledger.create(path, {"pure": {"epsilon": 3}}, unit={"id": "person_id", "max_rows": 2}, key=secret)
        Ledger(path, key=secret).charge(_count({"pure": {"epsilon": 1}}))
        _reseal(path, edit, key)
        result = Ledger(path, key=secret).verify(recheck_certificates=False)
        failed = [c.claim for c in result.failed]
        assert failed and "ledger.chain" not in failed and "ledger.seal" in failed, name


# ------------------------------------------------------------------ read-only folders
def test_a_read_only_ledger_is_one_line_not_a_traceback(tmp_path, tenth, capsys, monkeypatch):
    """Tests run as root, which writes anyway: the OS refusal is simulated where the ledger opens its files."""
    Ledger.create(tmp_path / "L", {"zcdp": {"rho": 1}})
    real_open = os.open

    def read_only(path, flags, *args):
        if flags & (os.O_WRONLY | os.O_RDWR) and str(path).startswith(str(tmp_path / "L")):
            raise PermissionError(13, "Permission denied")
        return real_open(path, flags, *args)

    monkeypatch.setattr(os, "open", read_only)
    with pytest.raises(LedgerError, match="cannot write the ledger .*Permission denied"):
        Ledger(tmp_path / "L").charge(tenth)
    code = main(["release", str(_spec_file(tmp_path, "{zcdp: {rho: 0.1}}")), "--data", str(DATA),
                 "--ledger", str(tmp_path / "L")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Permission denied" in err
    assert main(["ledger", "verify", str(tmp_path / "L")]) == 0  # reading needs no write
    monkeypatch.setattr(Path, "read_bytes", lambda self: (_ for _ in ()).throw(PermissionError(13, "Permission denied")))
    capsys.readouterr()
    assert main(["ledger", "verify", str(tmp_path / "L")]) == 2  # not "verification failed" (1)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Permission denied" in err


# ------------------------------------------------------------------ splits of plans and of releases:
def test_plan_shares_fit_the_target_as_written():
    """Per-query targets are computed floats, certified as the decimals they are written as (their repr,
    :func:`dpopt.core.decimals.written`); the plan's target is the decimal written. The shares read that way
    must add up to no more than the target."""
    from dpopt.core.decimals import written
    from dpopt.plan.compose import fit_targets

    for total, shares in [(0.3, [1 / 3] * 3), (0.1, [0.5, 0.5]), (0.7, [0.1] * 7)]:
        targets = fit_targets("zcdp", total, shares)
        assert sum(written(t["zcdp"]["rho"]) for t in targets) <= Fraction(repr(total))


def test_releases_splits_add_exactly_without_slack():
    from dpopt.spec.selection import load_selection_spec as load_selection

    text = (ROOT / "specs" / "visits_private_clinics.yaml").read_text()
    # 1 + 1/2 + 1 = 5/2 exactly: the target is met; 1e-15 more is over it (a 1e-12 relative slack let it pass)
    assert load_selection(read_document_text(text)).privacy.parameters["epsilon"] == 2.5
    with pytest.raises(SpecError, match="above the target"):
        load_selection(read_document_text(text.replace("epsilon: 0.5}", "epsilon: 0.500000000000001}")))
    split = text.replace("epsilon: 0.5}", "epsilon: 0.2}").replace("epsilon: 2.5", "epsilon: 2.2")
    assert load_selection(read_document_text(split))  # 1 + 0.2 + 1 = 2.2 exactly, as written


def read_document_text(text: str) -> dict:
    from dpopt.spec.yaml12 import parse_yaml

    return parse_yaml(text)


def test_approx_releases_adding_up_to_an_approx_budget_fit_it_exactly():
    """Basic composition (Dwork & Roth 2014, Thm. 3.16): three (0.1, 1e-7) releases are (0.3, 3e-7)-DP, which
    is the budget exactly, on the decimals; whichever route is reported, its δ at ε = 0.3 is at most 3e-7."""
    budget = parse_budget("approx: {epsilon: 0.3, delta: 3e-7}")
    release = {"definition": "approx", "epsilon": 0.1, "delta": 1e-7}
    assert spending(budget, [release] * 3).within
    assert Fraction(spending(budget, [release] * 3).spent["delta"]) <= Fraction("3e-7")
    assert not spending(budget, [release] * 3 + [{"definition": "pure", "epsilon": 1e-9}]).within
    assert spending(budget, [release, release, {"definition": "pure", "epsilon": "0.1"}]).within


def test_a_spec_from_python_takes_decimals_and_fractions_at_their_value():
    document = read_document(COUNT)
    for value in (Decimal("0.1"), Fraction(1, 10), 0.1):
        assert load_spec(document | {"privacy": {"zcdp": {"rho": value}}}).privacy.parameters == {"rho": 0.1}
    for value in (Fraction(1, 3), Decimal("0.30000000000000001")):  # not a decimal a float keeps
        with pytest.raises(SpecError, match="not kept by a floating-point number"):
            load_spec(document | {"privacy": {"zcdp": {"rho": value}}})


def _changed(value):
    """Another value of the same kind (a rewrite an attacker might make)."""
    if isinstance(value, bool) or value is None:
        return "changed"
    if isinstance(value, (int, float)):
        return value * 2 + 1
    if isinstance(value, str):
        return value + "x"
    if isinstance(value, dict):
        return {**value, "changed": 1}
    return [value]


def _refused(path: Path, key: Path) -> bool:
    """`ledger verify --key` fails: a failed check, or a header that is no longer one (exit 1 both)."""
    try:
        return not Ledger(path, key=key).verify(recheck_certificates=False).passed
    except LedgerDamagedError:
        return True


@pytest.mark.slow
def test_every_field_of_every_document_rewritten_and_rechained_fails_with_the_key(tmp_path):
    """The full battery behind the tamper sample: each field of the header and of each entry of a sealed
    ledger rewritten, the chain rehashed without the key; `verify` with the key refuses every one."""
    secret = tmp_path / "k"
    secret.write_bytes(os.urandom(32))
    cert = _count({"pure": {"epsilon": 1}})

    def fresh(name: str) -> Path:
        path = tmp_path / name
        Ledger.create(path, {"pure": {"epsilon": 3}}, unit="row", key=secret)
        for _ in range(2):
            Ledger(path, key=secret).charge(cert)
        return path

    cases = 0
    template = fresh("template")
    header = json.loads((template / HEADER).read_bytes())
    for field in [k for k in header if k not in ("sha256", "seal")]:
        path = fresh(f"header-{field}")
        _reseal(path, lambda h, f=field: h | {f: _changed(h[f])})
        assert _refused(path, secret), field
        cases += 1
    entry = json.loads((template / ENTRIES).read_bytes().splitlines()[0])
    for line in (0, 1):
        for field in [k for k in entry if k not in ("sha256", "seal")]:
            path = fresh(f"entry{line}-{field}")
            lines = (path / ENTRIES).read_bytes().splitlines()
            edited = json.loads(lines[line])
            lines[line] = canonical(edited | {field: _changed(edited[field])}).rstrip(b"\n")
            (path / ENTRIES).write_bytes(b"\n".join(lines) + b"\n")
            _reseal(path, lambda h: h)
            assert _refused(path, secret), (line, field)
            cases += 1
    assert cases == len(header) - 2 + 2 * (len(entry) - 2)
