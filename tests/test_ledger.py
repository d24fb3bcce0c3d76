"""The privacy budget ledger: exact composition across releases, refusal, crash safety, locking, hash chain.

Expected values come from Google's ``dp_accounting`` (PLD and RDP accountants), from closed
forms of the papers (Bun & Steinke 2016, Prop. 1.4) or from an independent numerical check
(the trade-off curves of randomised response and of the Gaussian pair, scipy.stats.norm),
never from dpopt's own output.
"""

from __future__ import annotations

import json
import math
import multiprocessing
import os
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from dp_accounting import dp_event
from dp_accounting.pld import common
from dp_accounting.pld import privacy_loss_distribution as pld
from dp_accounting.rdp import rdp_privacy_accountant as rdp
from scipy.stats import norm

from conftest import ROOT
from test_plan_cli import GROUPED
from dpopt.cli import main
from dpopt.errors import BudgetExceededError, LedgerError, UnsupportedSpecError
from dpopt.ledger import Ledger, spending
from dpopt.ledger.compose import MIXED_SHARES
from dpopt.solve import solve
from dpopt.spec.load import read_document

COUNT = ROOT / "specs" / "count_add_remove.yaml"
DATA = ROOT / "specs" / "data" / "survey.csv"
ENV = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
       "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}


def _count(privacy: dict):
    """The certificate of a one-count spec (add/remove) under ``privacy``."""
    return solve(read_document(COUNT) | {"privacy": privacy}).certificate


@pytest.fixture(scope="module")
def certificates() -> dict:
    return {"gdp": _count({"gdp": {"mu": 0.5}}), "pure": _count({"pure": {"epsilon": 0.3}}),
            "approx": _count({"approx": {"epsilon": 0.5, "delta": 1e-6}}), "zcdp": _count({"zcdp": {"rho": 0.1}})}


def _dp(epsilon: float, delta: float):
    return pld.from_privacy_parameters(common.DifferentialPrivacyParameters(epsilon, delta))


def test_three_definitions_under_an_approx_budget_match_dp_accounting_pld(tmp_path, certificates):
    ledger = Ledger.create(tmp_path / "L", {"approx": {"epsilon": 3.0, "delta": 1e-5}})
    for name in ("gdp", "pure", "approx"):
        entry = ledger.charge(certificates[name])
    # dp_accounting: N(0,1) vs N(μ,1) with μ = 0.5 (σ = 2, sensitivity 1); randomised response for pure
    # ε = 0.3 and the Kairouz–Oh–Viswanath pair for (0.5, 1e-6), both via from_privacy_parameters.
    expected = pld.from_gaussian_mechanism(2.0, sensitivity=1.0).compose(_dp(0.3, 0.0)).compose(_dp(0.5, 1e-6))
    delta, epsilon = expected.get_delta_for_epsilon(3.0), expected.get_epsilon_for_delta(1e-5)
    # Both sides are pessimistic PLDs on 1e-4-nat grids; each of the 3 pairs' losses is rounded up by
    # less than one step, so the two ε differ by at most 2·3·1e-4 nats and δ(ε) by the factor
    # exp(|d log δ/dε|·6e-4) ≈ 1 ± 5e-3 (|d log δ/dε| ≤ 8 here): tolerances below.
    assert entry["spent"]["delta"] == pytest.approx(delta, rel=5e-3)
    assert entry["spent"]["epsilon"] == pytest.approx(epsilon, abs=6e-4)
    assert ledger.spending().within


def test_zcdp_budget_adds_rho_exactly_as_dp_accounting_rdp_and_bun_steinke(tmp_path, certificates):
    ledger = Ledger.create(tmp_path / "L", {"zcdp": {"rho": 1.0}})
    for name in ("zcdp", "gdp", "pure"):
        ledger.charge(certificates[name])
    accountant = rdp.RdpAccountant(orders=[2.0, 8.0, 32.0])
    accountant.compose(dp_event.GaussianDpEvent(1.0 / math.sqrt(2 * 0.1)))  # ρ = 1/(2σ²) = 0.1
    accountant.compose(dp_event.GaussianDpEvent(2.0))  # μ = 0.5-GDP: the Gaussian pair, σ = 1/μ
    rdp_rho = accountant._rdp / np.array(accountant._orders)  # ρ-zCDP: D_α = αρ at every order
    assert np.allclose(rdp_rho, rdp_rho[0], rtol=1e-12)
    expected = rdp_rho[0] + 0.3 ** 2 / 2  # pure ε ⇒ ε²/2-zCDP (Bun & Steinke 2016, Prop. 1.4)
    assert float(ledger.spending().spent["rho"]) == pytest.approx(expected, rel=1e-12)
    # the decimals as written: 1/10 + (1/2)²/2 + (3/10)²/2 = 27/100 exactly
    assert ledger.spending().spent["rho"] == Fraction("0.1") + Fraction("0.5") ** 2 / 2 + Fraction("0.3") ** 2 / 2


def test_zcdp_route_under_an_approx_budget_matches_dp_accounting_rdp(certificates):
    guarantees = [{"definition": "zcdp", "rho": 0.1}, {"definition": "gdp", "mu": 0.5}]
    spent = spending({"definition": "approx", "epsilon": 2.0, "delta": 1e-5}, guarantees)
    accountant = rdp.RdpAccountant(orders=list(np.linspace(1.01, 60, 20000)))
    accountant.compose(dp_event.GaussianDpEvent(1.0 / math.sqrt(2 * (0.1 + 0.125))))  # ρ = 0.225
    # dp_accounting's RDP → (ε, δ) is the same Canonne–Kamath–Steinke bound minimised over a grid of
    # 20,000 orders (step 3e-3): its δ is at most 1e-3 relative above the infimum dpopt finds.
    reference = accountant.get_delta(2.0)
    assert spent.spent["delta"] <= reference * (1 + 1e-12)
    assert spent.spent["delta"] == pytest.approx(reference, rel=1e-3)
    assert "zCDP route" in spent.method


def test_pure_release_under_a_gdp_budget_counts_its_tight_mu():
    spent = spending({"definition": "gdp", "mu": 2.0}, [{"definition": "pure", "epsilon": 1.0}])
    mu = math.sqrt(spent.spent["mu_squared"])
    alpha = np.linspace(0.0, 1.0, 200_001)
    rr = np.maximum.reduce([1 - math.e * alpha, (1 - alpha) / math.e, np.zeros_like(alpha)])  # f_{1,0}
    gaussian = norm.cdf(norm.ppf(1 - alpha) - mu)  # G_μ (Dong, Roth & Su 2022, eq. 2.5)
    assert (gaussian <= rr + 1e-12).all()  # ε-DP ⇒ μ-GDP
    kink = 1 / (1 + math.e)  # f_{1,0}(α*) = α* at its kink α* = 1/(1 + e^ε)
    assert norm.cdf(norm.ppf(1 - kink) - mu) == pytest.approx(kink, rel=1e-12)  # G_μ touches f there
    assert norm.cdf(norm.ppf(1 - kink) - (mu - 1e-6)) > kink  # so no smaller μ: the conversion is tight


def test_no_valid_conversion_is_refused_naming_it(certificates, tmp_path):
    ledger = Ledger.create(tmp_path / "L", {"zcdp": {"rho": 5.0}})
    with pytest.raises(UnsupportedSpecError, match="approx, which does not convert"):
        ledger.charge(certificates["approx"])
    assert not (tmp_path / "L" / "certificates" / "000001.json").exists()
    with pytest.raises(UnsupportedSpecError, match="pdp"):
        spending({"definition": "approx", "epsilon": 5.0, "delta": 1e-3},
                 [{"definition": "pdp", "epsilon": 1.0, "delta": 1e-4}])


def test_zcdp_and_approx_releases_under_an_approx_budget_bracketed_by_dp_accounting(tmp_path, certificates):
    ledger = Ledger.create(tmp_path / "L", {"approx": {"epsilon": 3.0, "delta": 1e-5}})
    ledger.charge(certificates["zcdp"])  # ρ = 0.1
    spent = ledger.charge(certificates["approx"])["spent"]["delta"]  # (0.5, 1e-6)
    # The same route in dp_accounting: for each share s of δ the mixed route tries (δ_z = s·δ), its RDP
    # accountant gives ε_z of ρ = 0.1 at δ_z (a Gaussian event with 1/(2σ²) = ρ has exactly ρ's Rényi
    # curve; CKS conversion on 20,000 orders), then its PLD of the two (ε, δ) pairs; the best share is
    # kept. The two 1e-4-nat grids differ by at most 4e-4 nats: ≤ 5e-3 relative (as in the first test).
    accountant = rdp.RdpAccountant(orders=list(np.linspace(1.01, 200, 20000)))
    accountant.compose(dp_event.GaussianDpEvent(1.0 / math.sqrt(2 * 0.1)))
    above = min(_dp(accountant.get_epsilon(s * 1e-5), s * 1e-5).compose(_dp(0.5, 1e-6)).get_delta_for_epsilon(3.0)
                for s in MIXED_SHARES)
    # Below: a Gaussian mechanism is one ρ-zCDP release (μ = √(2ρ)); no bound for every ρ-zCDP release
    # can be smaller than its composition with the (0.5, 1e-6) pair (dp_accounting's PLD, whose grid
    # rounding of 2 pairs is covered by the same 5e-3).
    gauss = pld.from_gaussian_mechanism(1.0 / math.sqrt(2 * 0.1), sensitivity=1.0)
    below = gauss.compose(_dp(0.5, 1e-6)).get_delta_for_epsilon(3.0)
    assert below * (1 - 5e-3) <= spent <= above * (1 + 5e-3)
    assert spent == pytest.approx(above, rel=5e-3)


def test_refusal_exit_code_3_one_line_and_nothing_released(tmp_path, capsys):
    assert main(["ledger", "init", str(tmp_path / "L"), "--budget", "pure: {epsilon: 0.7}"]) == 0
    base = ["release", str(COUNT), "--data", str(DATA), "--ledger", str(tmp_path / "L")]
    assert main(base + ["--out", str(tmp_path / "first")]) == 0
    document = json.loads((tmp_path / "first" / "release.json").read_text())
    assert document["ledger"]["spent"]["epsilon"]["exact"] == "1/2"  # ε = 0.5 of the count spec
    capsys.readouterr()
    assert main(base + ["--out", str(tmp_path / "second")]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nothing released" in err and "epsilon = 1" in err
    assert not (tmp_path / "second").exists()
    assert main(base) == 3 and capsys.readouterr().out == ""  # nothing on stdout either
    assert len(Ledger(tmp_path / "L").entries) == 1


_KILL_AT_OUTPUT = """
import os, signal, sys
import dpopt.release.batch as batch
batch.write_release = lambda *args, **kwargs: os.kill(os.getpid(), signal.SIGKILL)
from dpopt.cli import main
main(sys.argv[1:])
"""


def test_kill_9_between_recording_and_output_leaves_the_budget_charged_and_no_output(tmp_path):
    Ledger.create(tmp_path / "L", {"pure": {"epsilon": 2.0}})
    # the release's output step kills the process (SIGKILL, no clean-up), right after the ledger returned
    result = subprocess.run([sys.executable, "-c", _KILL_AT_OUTPUT, "release", str(COUNT), "--data", str(DATA),
                             "--ledger", str(tmp_path / "L"), "--out", str(tmp_path / "out")],
                            env=ENV, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == -9, result.stderr
    ledger = Ledger(tmp_path / "L")
    assert len(ledger.entries) == 1 and ledger.spending().spent["epsilon"] == Fraction(1, 2)
    assert not (tmp_path / "out").exists()
    assert ledger.verify(recheck_certificates=False).passed


def _race(path: str, certificate: dict, out: str, barrier, results) -> None:
    barrier.wait()
    try:
        entry = Ledger(path).charge(certificate)
    except BudgetExceededError:
        results.put("refused")
        return
    Path(out).write_text(json.dumps({"entry": entry["index"]}))
    results.put("released")


def test_eight_concurrent_releases_against_a_budget_for_three_end_with_three(tmp_path, certificates):
    Ledger.create(tmp_path / "L", {"zcdp": {"rho": 0.3}})  # exactly 3 releases of ρ = 0.1 (the decimals written)
    assert 3 * Fraction("0.1") == Fraction("0.3")  # though the sum of three floats 0.1 exceeds the float 0.3:
    assert 3 * Fraction(0.1) > Fraction(0.3)  # a ledger adding binary floats would stop at 2
    context = multiprocessing.get_context("fork")
    barrier, results = context.Barrier(8), context.Queue()
    workers = [context.Process(target=_race, args=(str(tmp_path / "L"), certificates["zcdp"].data,
                                                   str(tmp_path / f"out{i}.json"), barrier, results))
               for i in range(8)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(120)
    outcomes = sorted(results.get(timeout=5) for _ in workers)
    assert outcomes == ["refused"] * 5 + ["released"] * 3
    assert len(list(tmp_path.glob("out*.json"))) == 3
    ledger = Ledger(tmp_path / "L")
    assert [e["index"] for e in ledger.entries] == [1, 2, 3]
    assert ledger.verify(recheck_certificates=False).passed


@pytest.mark.slow
def test_eight_concurrent_cli_releases_against_a_budget_for_three_end_with_three(tmp_path):
    """The same race through the command line: 8 `dpopt release` processes started together (each
    designs the count, ε = 0.5, for 2–5 s, so their charges meet at the lock), budget ε = 1.5."""
    assert main(["ledger", "init", str(tmp_path / "L"), "--budget", "pure: {epsilon: 1.5}"]) == 0
    runs = [subprocess.Popen([sys.executable, "-m", "dpopt.cli", "release", str(COUNT), "--data", str(DATA),
                              "--ledger", str(tmp_path / "L"), "--out", str(tmp_path / f"out{i}")],
                             env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for i in range(8)]
    codes = sorted(run.wait(timeout=600) for run in runs)
    assert codes == [0] * 3 + [3] * 5
    assert len(list(tmp_path.glob("out*/release.json"))) == 3
    assert len(Ledger(tmp_path / "L").entries) == 3


@pytest.fixture(scope="module")
def small_ledger(tmp_path_factory, certificates) -> Path:
    path = tmp_path_factory.mktemp("chain") / "L"
    ledger = Ledger.create(path, {"gdp": {"mu": 2.0}})
    ledger.charge(certificates["gdp"])
    ledger.charge(certificates["pure"])
    return path


def _detected(path: Path) -> bool:
    try:
        return not Ledger(path).verify(recheck_certificates=False).passed
    except LedgerError:
        return True


def test_a_sound_ledger_verifies_with_its_certificates(small_ledger, capsys):
    assert Ledger(small_ledger).verify().passed
    assert main(["ledger", "verify", str(small_ledger)]) == 0
    assert main(["ledger", "show", str(small_ledger)]) == 0
    assert "remaining: mu_squared" in capsys.readouterr().out


def test_every_single_byte_edit_of_every_ledger_file_is_detected(small_ledger, tmp_path):
    files = sorted(p for p in small_ledger.rglob("*") if p.is_file() and p.stat().st_size)
    assert len(files) == 4  # ledger.json, entries.jsonl, two certificates
    missed = []
    for path in files:
        original = path.read_bytes()
        fd = os.open(path, os.O_WRONLY)
        try:
            for offset, byte in enumerate(original):
                os.pwrite(fd, bytes([byte ^ 0x01]), offset)
                if not _detected(small_ledger):
                    missed.append((path.name, offset))
                os.pwrite(fd, bytes([byte]), offset)
        finally:
            os.close(fd)
    assert missed == []
    assert not _detected(small_ledger)


def test_removed_or_reordered_entries_are_detected(small_ledger, tmp_path):
    import shutil

    entries = (small_ledger / "entries.jsonl").read_bytes().splitlines(keepends=True)
    for lines in ([entries[1]], [entries[1], entries[0]], [entries[0]]):  # first removed; swapped; last removed
        copy = tmp_path / f"copy{len(list(tmp_path.iterdir()))}"
        shutil.copytree(small_ledger, copy)
        (copy / "entries.jsonl").write_bytes(b"".join(lines))
        assert _detected(copy)


PLAN = GROUPED | {"name": "two tables", "privacy": {"zcdp": {"rho": 0.25}}}


def test_plans_and_grouped_releases_charge_their_whole_release_guarantee(tmp_path, capsys):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(PLAN))
    ledger = str(tmp_path / "L")
    assert main(["ledger", "init", ledger, "--budget", "zcdp: {rho: 1}"]) == 0
    assert main(["release", str(plan), "--data", str(DATA), "--ledger", ledger, "--out", str(tmp_path / "a")]) == 0
    # a record is in one group of each of the 2 grouping columns: the whole release is 2ρ = 0.5
    # (Bun & Steinke 2016, Lemma 2.3), which with the first plan's 0.25 is 0.75
    assert main(["release", str(plan), "--data", str(DATA), "--group-by", "age_group", "--group-by", "disability",
                 "--ledger", ledger, "--out", str(tmp_path / "b")]) == 0
    grouped = json.loads((tmp_path / "b" / "release.json").read_text())["ledger"]
    assert grouped["spent"]["rho"]["exact"] == "3/4" and grouped["remaining"]["rho"]["exact"] == "1/4"
    spec = tmp_path / "count.json"  # one grouping column: parallel composition, the whole release is ρ = 0.25
    count = read_document(COUNT)
    count["data"]["attributes"]["age_group"] = GROUPED["data"]["attributes"]["age_group"]  # the groups, declared
    spec.write_text(json.dumps(count | {"privacy": {"zcdp": {"rho": 0.25}}}))
    assert main(["release", str(spec), "--data", str(DATA), "--group-by", "age_group", "--ledger", ledger,
                 "--out", str(tmp_path / "c")]) == 0
    assert json.loads((tmp_path / "c" / "release.json").read_text())["ledger"]["spent"]["rho"]["exact"] == "1"
    capsys.readouterr()
    assert main(["release", str(spec), "--data", str(DATA), "--group-by", "age_group", "--ledger", ledger]) == 3
    assert capsys.readouterr().out == ""
    kinds = [e["kind"] for e in Ledger(ledger).entries]
    assert kinds == ["plan", "grouped plan", "grouped spec"]
    assert main(["ledger", "verify", ledger]) == 0


def test_a_release_under_another_neighbouring_relation_is_refused(tmp_path, certificates):
    ledger = Ledger.create(tmp_path / "L", {"gdp": {"mu": 3.0}})
    ledger.charge(certificates["gdp"])  # add/remove
    replace = solve(read_document(COUNT) | {"query": {"kind": "histogram", "attribute": "disability"},
                                            "adjacency": {"kind": "replace_one"}, "privacy": {"gdp": {"mu": 0.5}}})
    with pytest.raises(UnsupportedSpecError, match="one neighbouring relation per ledger"):
        ledger.charge(replace.certificate)
    assert len(ledger.entries) == 1
