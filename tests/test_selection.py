"""Private group keys (partition selection) and private quantiles on person-level data.

Expected values come from (a) google/differential-privacy's published constants for the optimal
partition selection (``cc/algorithms/partition-selection_test.cc``: ε = 0.5, δ = 0.02, one partition:
crossovers 6 and 11, π_6 = 0.58840484458, π_8 = 0.86807080625, π_15 = 1; ε → 0: π_n = nδ);
(b) brute force written here: the δ of a keep-probability table over every neighbouring pair of
counts and every event of the output (for one key, and jointly for two keys of one person), every
contribution vector of a person enumerated with ``itertools.product``, discrete Laplace tails by
summing the pmf; (c) the exponential mechanism's law computed here from its definition in exact
rationals (ranks counted with a loop), against draws (χ² with a fixed seed) and against the
privacy loss; (d) an empirical audit of the draws of the release path on neighbouring files.
"""

from __future__ import annotations

import csv
import itertools
import json
import math
from collections import defaultdict
from fractions import Fraction
from pathlib import Path

import mpmath
import numpy as np
import pytest
from scipy import stats

from dpopt.cli import main
from dpopt.errors import DataError, SpecError
from dpopt.privacy import partition_selection as ps
from dpopt.privacy import quantile as qm
from dpopt.release.sources import connect, open_source
from dpopt.rng import random_source
from dpopt.selection.design import certify
from dpopt.selection.release import draw_quantiles, quantile_values, release_selection
from dpopt.selection.verify import verify_selection
from dpopt.spec.load import read_document
from dpopt.spec.selection import load_selection_spec
from test_person_level import write_csv

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "specs" / "visits_private_clinics.yaml"
DATA = ROOT / "specs" / "data" / "visits_clinics.csv"


def brute_delta(pis: list[float], epsilon: float, extra: int = 3) -> mpmath.mpf:
    """sup over count pairs {n, n + 1} (both orders) and events E ⊆ {keep, drop} of P[E | a] − e^ε P[E | b]."""
    with mpmath.workdps(40):
        table = [mpmath.mpf(p) for p in pis] + [mpmath.mpf(pis[-1])] * extra
        e = mpmath.exp(mpmath.mpf(epsilon))
        best = mpmath.mpf(0)
        for n in range(len(table) - 1):
            for a, b in ((table[n], table[n + 1]), (table[n + 1], table[n])):
                law_a, law_b = (a, 1 - a), (b, 1 - b)
                for event in itertools.product((0, 1), repeat=2):
                    pa = sum(p for p, inside in zip(law_a, event) if inside)
                    pb = sum(p for p, inside in zip(law_b, event) if inside)
                    best = max(best, pa - e * pb)
        return best


# ------------------------------------------------------------------ optimal partition selection
def test_optimal_probabilities_match_google_constants():
    pis = ps.optimal_keep_probabilities(0.5, 0.02)
    assert pis[6] == pytest.approx(0.58840484458, abs=1e-10)
    assert pis[8] == pytest.approx(0.86807080625, abs=1e-10)
    assert pis[11] < 1 and len(pis) - 1 <= 15 and pis[-1] == 1.0  # second crossover 11: certain from 12 on
    tiny = ps.optimal_keep_probabilities(1e-20, 0.02)
    assert tiny[6] == pytest.approx(0.12, rel=1e-12) and tiny[40] == pytest.approx(0.8, rel=1e-12)
    assert ps.optimal_keep_probabilities(1e-20, 0.15)[3] == pytest.approx(0.45, rel=1e-12)


@pytest.mark.parametrize("epsilon, delta", [(0.5, 0.02), (1.0, 1e-6), (0.1, 1e-5), (2.0, 1e-9), (0.25, 5e-7)])
def test_optimal_delta_is_exactly_the_target(epsilon, delta):
    pis = ps.optimal_keep_probabilities(epsilon, delta)
    exact = brute_delta(list(pis), epsilon)
    assert float(exact) == pytest.approx(delta, rel=1e-9)  # tight: π_1 = δ
    assert ps.pair_delta(pis, epsilon) == pytest.approx(float(exact), rel=1e-12)
    certified, _ = ps.certified_keep_probabilities(epsilon, delta)
    assert brute_delta(list(certified), epsilon) <= delta
    closed = [ps.keep_probability(n, epsilon, delta) for n in range(len(pis) + 3)]
    assert np.allclose(closed[:len(pis)], pis, rtol=0, atol=1e-12) and closed[-1] == 1.0


def test_no_keep_probability_can_be_raised():
    """Optimality: raising any π_n < 1 (by 10⁻⁶ of δ) breaks (ε, δ)."""
    epsilon, delta = 0.5, 1e-3
    pis = ps.optimal_keep_probabilities(epsilon, delta)
    for n in range(1, len(pis) - 1):
        raised = pis.copy()
        raised[n] += 1e-6 * delta
        assert brute_delta(list(raised), epsilon) > delta


def test_two_keys_per_person_compose_to_the_target():
    """One person in g = 2 keys: the joint output of both decisions (4 outcomes, 16 events) for every pair of
    user counts, against the composed (ε, δ) = (2ε′, 1 − (1 − δ′)²)."""
    epsilon, delta, g = 1.0, 1e-2, 2
    e1, d1 = ps.per_partition_budget(epsilon, delta, g)
    pis = list(ps.optimal_keep_probabilities(e1, d1)) + [1.0]
    e = mpmath.exp(epsilon)
    worst = mpmath.mpf(0)
    for n1, n2 in itertools.product(range(len(pis) - 1), repeat=2):
        small = [mpmath.mpf(pis[n1]), mpmath.mpf(pis[n2])]
        large = [mpmath.mpf(pis[n1 + 1]), mpmath.mpf(pis[n2 + 1])]
        outcomes = list(itertools.product((0, 1), repeat=2))

        def law(p):
            return [(p[0] if o[0] else 1 - p[0]) * (p[1] if o[1] else 1 - p[1]) for o in outcomes]

        for a, b in ((law(small), law(large)), (law(large), law(small))):
            gaps = sorted((x - e * y for x, y in zip(a, b)), reverse=True)  # the best event takes the positive gaps
            worst = max(worst, sum(x for x in gaps if x > 0))
    assert worst <= delta * (1 + 1e-12)
    assert ps.composed_delta(d1, g) == pytest.approx(delta, rel=1e-12)


# ------------------------------------------------------------------------------ thresholds
def brute_new_keys(tail, rows: int, per_key: int, keys: int) -> float:
    """max over every contribution (≤ per_key rows in each of ≤ keys keys, ≤ rows in all) by enumeration."""
    best = 0.0
    for v in itertools.product(range(per_key + 1), repeat=keys):
        if sum(v) <= rows:
            best = max(best, float(1 - mpmath.fprod([1 - tail(x) if x else 1 for x in v])))
    return best


def test_discrete_laplace_tail_against_the_summed_pmf():
    scale = mpmath.mpf(3)
    r = mpmath.exp(-1 / scale)
    for k in (-4, 0, 1, 7):
        summed = mpmath.nsum(lambda z: (1 - r) / (1 + r) * r ** abs(z), [k, mpmath.inf])
        assert ps.discrete_laplace_tail(k, scale) == pytest.approx(float(summed), rel=1e-12)


@pytest.mark.parametrize("rows, per_key, keys", [(4, 3, 2), (5, 2, 3), (3, 3, 3), (6, 4, 2)])
def test_laplace_threshold_is_the_least_meeting_delta(rows, per_key, keys):
    scale, delta = mpmath.mpf(rows) / 1.5, 1e-5
    tau = ps.laplace_threshold(scale, delta, rows, per_key, keys)

    def brute(t):
        return brute_new_keys(lambda v: ps.discrete_laplace_tail(t - v, scale), rows, per_key, keys)

    assert brute(tau) <= delta < brute(tau - 1)
    dp, _ = ps.new_keys_delta(lambda v: ps.discrete_laplace_tail(tau - v, scale), rows, per_key, keys)
    assert dp == pytest.approx(brute(tau), rel=1e-12)


def summed_discrete_gaussian_tail(k: int, sigma2: int) -> mpmath.mpf:
    """P[Z ≥ k] of N_ℤ(0, σ²) from its pmf ∝ e^{−j²/(2σ²)}, summed over |j| ≤ 60σ in 50 digits (the rest is below
    e^{−1800})."""
    with mpmath.workdps(50):
        top = 60 * math.isqrt(sigma2) + 60
        w = {j: mpmath.exp(-mpmath.mpf(j * j) / (2 * sigma2)) for j in range(-top, top + 1)}
        return mpmath.fsum(v for j, v in w.items() if j >= k) / mpmath.fsum(w.values())


@pytest.mark.parametrize("sigma2", [1, 25])
def test_discrete_gaussian_tail_bound_holds_and_is_close(sigma2):
    # the bound Φ̄(k/σ) + φ(k/σ)/σ exceeds the summed tail, and by less than the pmf at k (its φ(k/σ)/σ term)
    for k in (1, 2, 5, 12):
        exact = summed_discrete_gaussian_tail(k, sigma2)
        bound = ps.discrete_gaussian_tail(k, Fraction(sigma2))
        assert exact <= bound <= exact + 2 * mpmath.npdf(k / mpmath.sqrt(sigma2)) / mpmath.sqrt(sigma2)


def test_discrete_gaussian_threshold_meets_delta_by_brute_force():
    sigma2, delta = 25, 1e-6
    tau = ps.discrete_gaussian_threshold(Fraction(sigma2), delta, 4, 3, 2)
    assert isinstance(tau, int)
    exact = brute_new_keys(lambda v: summed_discrete_gaussian_tail(tau - v, sigma2), 4, 3, 2)
    bound = brute_new_keys(lambda v: ps.discrete_gaussian_tail(tau - 1 - v, Fraction(sigma2)), 4, 3, 2)
    assert exact <= delta < bound  # the true law meets δ at τ; the certified bound does not at τ − 1


# --------------------------------------------------------------------------------- quantiles
def exact_law(values: list[float], points: list[float], q: float, beta: float) -> list[float]:
    """P[g_j] ∝ exp(−β|#{x ≤ g_j} − qn|) from the definition (ranks counted one by one, 50 digits)."""
    with mpmath.workdps(50):
        weights = [mpmath.exp(-beta * abs(sum(1 for x in values if x <= g) - mpmath.mpf(q) * len(values)))
                   for g in points]
        total = mpmath.fsum(weights)
        return [float(w / total) for w in weights]


def test_quantile_draws_follow_the_exact_law():
    """χ² goodness of fit, 40 000 draws, seed 28: the test rejects at level 10⁻³ only (a correct sampler
    fails with probability 10⁻³ over seeds; this seed is fixed). The scale λ = 1/5 on the integer scores
    −|2·rank − n| (q = 1/2) is β = λ·2 = 0.4 per unit of rank."""
    values = np.array([3, 5, 5, 6, 9, 12, 12, 12, 14, 19], dtype=float)
    points = qm.grid(0, 20, 2.0)
    law = np.array(exact_law(list(values), list(points), 0.5, 0.4))
    rng = random_source(28, insecure_seed=True).stream(0)
    draws = qm.sample(values, points, 0.5, Fraction(1, 5), rng, size=40_000)
    observed = np.array([(draws == p).sum() for p in points])
    expected = law * len(draws)
    assert np.all(expected >= 5)  # every cell large enough for the χ² approximation
    assert stats.chisquare(observed, expected).pvalue > 1e-3


@pytest.mark.parametrize("q", [0.5, 0.1, 0.9])
def test_quantile_privacy_loss_is_at_most_epsilon(q):
    """A person with R rows added anywhere: the log-ratio of the exact laws never exceeds ε = 2λRD (the law
    ∝ exp(−β|rank − qn|) with β = λc per rank, q = a/c)."""
    rows, epsilon = 3, 1.0
    scale = qm.scale_for(epsilon, rows, q)
    beta = float(scale * Fraction(str(q)).denominator)
    base = [3.0, 5, 5, 6, 9, 12, 12, 12, 14, 19]
    points = list(qm.grid(0, 20, 1.0))
    p = np.array(exact_law(base, points, q, beta))
    worst = 0.0
    for added in itertools.combinations_with_replacement([0.0, 4.0, 10.0, 20.0], rows):
        p2 = np.array(exact_law(base + list(added), points, q, beta))
        worst = max(worst, float(np.max(np.abs(np.log(p2) - np.log(p)))))
    assert worst <= epsilon * (1 + 1e-12)
    assert qm.epsilon_of(scale, rows, q) == 1


QUANTILE_SPEC = {
    "dpopt": 1, "name": "median", "adjacency": "add_remove", "privacy": {"pure": {"epsilon": 2.0}},
    "data": {"attributes": {"age_group": ["a", "b"], "duration": {"min": 0, "max": 20}},
             "privacy_unit": {"id": "person_id", "max_rows": 2}},
    "releases": [{"kind": "quantile", "attribute": "duration", "q": [0.5], "grid": {"step": 1}, "epsilon": 2.0}],
}


def _audit_lower_bound(a: np.ndarray, b: np.ndarray, points: np.ndarray, confidence: float = 0.95) -> float:
    """The largest ε lower bound over the events {output ≤ x} and {output ≥ x}, both directions, from
    Clopper–Pearson bounds (Bonferroni over the events)."""
    events = 4 * len(points)
    level = (1 - confidence) / events
    best = 0.0
    n = len(a)
    for x in points:
        for ea, eb in (((a <= x).sum(), (b <= x).sum()), ((a >= x).sum(), (b >= x).sum())):
            for k1, k2 in ((ea, eb), (eb, ea)):
                low = stats.beta.ppf(level, k1, n - k1 + 1) if k1 > 0 else 0.0
                high = stats.beta.ppf(1 - level, k2 + 1, n - k2) if k2 < n else 1.0
                if low > 0 and high > 0:
                    best = max(best, math.log(low / high))
    return best


def test_audit_of_the_release_path_does_not_refute_the_quantile_certificate(tmp_path):
    """Neighbouring files (a person with 2 rows at 20 added); each file bounded and read by the release path
    (quantile_values), then 30 000 draws each of the sampler draw_quantiles calls (qm.sample, at the certified
    scale λ and q of the block, all at once). The 95% lower bound on ε stays below the certificate's ε; the same
    audit refutes λ three times larger."""
    rows = [(f"P{i}", "a", "x", str(v)) for i, v in enumerate([2, 4, 5, 7, 8, 8, 9, 11, 12, 15])]
    small = write_csv(tmp_path / "small.csv", rows)
    large = write_csv(tmp_path / "large.csv", rows + [("Q", "a", "x", "20"), ("Q", "a", "x", "20")])
    spec = load_selection_spec(QUANTILE_SPEC)
    cert = certify(spec)
    block = cert["releases"][0]
    per_q = block["per_q"][0]
    points = qm.grid(0, 20, 1.0)
    con, randomness = connect(), random_source(7, insecure_seed=True)
    samples = {}
    for name, path in (("small", small), ("large", large)):
        values, report = quantile_values(con, open_source(path), spec, spec.releases[0], 0, randomness)
        assert report["rows_dropped"] == 0
        rng = randomness.stream(99, len(samples))
        assert draw_quantiles(values, block, rng)["all"]["0.5"] in points
        samples[name] = qm.sample(values["all"], points, per_q["q"], Fraction(per_q["exact"]["scale"]), rng,
                                  size=30_000)
    certified = cert["guarantee"]["epsilon"]
    assert _audit_lower_bound(samples["small"], samples["large"], points) <= certified
    loud = 3 * Fraction(per_q["exact"]["scale"])
    rng = randomness.stream(98)
    values_small = np.array([v for *_, v in rows], dtype=float)
    values_large = np.append(values_small, [20.0, 20.0])
    a = qm.sample(values_small, points, 0.5, loud, rng, size=30_000)
    b = qm.sample(values_large, points, 0.5, loud, rng, size=30_000)
    assert _audit_lower_bound(a, b, points) > certified


# ------------------------------------------------------------------------------ end to end
def test_solve_verify_release_report_cli(tmp_path, capsys):
    assert main(["solve", str(SPEC), "--out", str(tmp_path / "design")]) == 0
    assert main(["verify", str(tmp_path / "design" / "certificate.json")]) == 0
    out = tmp_path / "rel"
    assert main(["release", str(SPEC), "--data", str(DATA), "--seed", "3", "--insecure-seed", "--out", str(out)]) == 0
    assert main(["verify", str(out)]) == 0
    assert main(["report", str(out / "certificate.json"), "--out", str(tmp_path / "r.md")]) == 0
    report = (tmp_path / "r.md").read_text()
    assert "optimal" in report and "## mean_duration_per_clinic (mean): pure ε = 1" in report
    assert "b_S = 7864320 steps of 1/16384" in report  # R·H/(ε/2) = 4·60·2¹⁴/0.5 on the lattice 2⁻¹⁴ℤ
    document = json.loads((out / "release.json").read_text())
    counts = document["releases"][0]
    users = defaultdict(set)
    with DATA.open() as f:
        for row in csv.DictReader(f):
            users[row["clinic"]].add(row["person_id"])
    assert set(counts["declared"]) == {"north", "south", "airport"} and "airport" not in users
    assert set(counts["values"]) == set(counts["declared"]) | set(counts["selected"])
    assert set(counts["selected"]) <= set(users) - set(counts["declared"])
    # the small clinics have ≤ 4 users (before bounding): each is kept with probability ≤ π_4 =
    # δ′(e^{4ε′} − 1)/(e^{ε′} − 1) = 3.0e-6 at ε′ = 0.25, δ′ = 5e-7 (Google's closed form, before its first
    # crossover 50), so any of the 40 with ≤ 1.2e-4; none is kept at this fixed seed
    assert max(len(users[k]) for k in users if k.startswith("clinic-")) <= 4
    assert not any(k.startswith("clinic-") for k in counts["selected"])
    text = json.dumps(document)
    assert "candidate" not in text and "clinic-" not in text  # neither dropped keys nor their number
    medians = document["releases"][1]["values"]
    assert set(medians) == {"0-17", "18-39", "40-64", "65+"} and all(0 <= v["0.5"] <= 120 for v in medians.values())
    means = document["releases"][2]  # only the keys the counts released, in their order
    assert list(means["values"]) == list(counts["values"]) == list(means["pairs"])
    assert all(v is None or 0 <= v <= 120 for v in means["values"].values())


@pytest.mark.parametrize("selection, tamper, claims", [
    ("optimal", lambda c: c["releases"][0]["partition_selection"]["keep_probabilities"].__setitem__(1, 5.05e-7),
     ["recorded", "releases[0].selection.delta", "releases[0].selection.optimal"]),
    ("laplace_threshold", lambda c: c["releases"][0]["partition_selection"].__setitem__("threshold", 40),
     ["recorded", "releases[0].selection.delta"]),
    ("optimal", lambda c: c["releases"][1]["per_q"][0].__setitem__("beta", 0.2), ["recorded", "releases[1].epsilon"]),
    ("optimal", lambda c: c["releases"][1]["per_q"][0]["exact"].__setitem__("scale", "1/10"),
     ["recorded", "releases[1].epsilon"]),
    ("optimal", lambda c: c.__setitem__("seed", 3), ["schema"]),
])
def test_verify_refuses_a_tampered_certificate(selection, tamper, claims, tmp_path, capsys):
    raw = read_document(SPEC)
    raw["releases"][0] = {**raw["releases"][0], "selection": selection}
    data = json.loads(certify(raw).to_json())
    tamper(data)
    (tmp_path / "c.json").write_text(json.dumps(data))
    assert main(["verify", str(tmp_path / "c.json")]) == 1
    failed = capsys.readouterr().err.removeprefix("certificate FAILED: ").strip().split(", ")
    # each re-derived claim that fails also fails its recorded row (recorded as passed, with other numbers)
    assert failed == claims + [f"recorded:{c}" for c in claims[1:]]


@pytest.mark.parametrize("selection", ["laplace_threshold", "gaussian_threshold"])
def test_threshold_baselines_release_and_verify(selection):
    raw = read_document(SPEC)
    raw["releases"][0] = {**raw["releases"][0], "selection": selection}
    cert, document, _ = release_selection(raw, DATA, random_source(4, insecure_seed=True))
    assert cert.passed and verify_selection(cert).passed
    counts = document["releases"][0]
    tau = cert["releases"][0]["partition_selection"]["threshold"]
    assert all(counts["values"][k] >= tau for k in counts["selected"])
    assert set(counts["declared"]) <= set(counts["values"])


def test_bounding_on_private_keys_matches_a_recount(tmp_path):
    """Persons in ≤ g = 2 keys each: the rows kept are Σ_p min(k, Σ_key min(c, rows)) whatever the random choice
    (k = 4, c = 3); a key's text with ':' or ',' is a key like any other."""
    rng = np.random.default_rng(11)
    rows, kept = [], 0
    for p in range(60):
        keys = rng.choice(["a:b", "a", "b,c", "d"], size=int(rng.integers(1, 3)), replace=False)
        per_key = [int(rng.integers(1, 6)) for _ in keys]
        rows += [(f"P{p}", "0-17", key, "10") for key, n in zip(keys, per_key) for _ in range(n)]
        kept += min(4, sum(min(3, n) for n in per_key))
    path = write_csv(tmp_path / "d.csv", rows)
    _, document, operator = release_selection(SPEC, path, random_source(2, insecure_seed=True))
    report = operator["bounding"][0]  # the exact counts: the operator's, the document has none (issue 35)
    assert "rows_kept" not in document["bounding"][0]
    assert (report["rows"], report["rows_kept"], report["persons"]) == (len(rows), kept, 60)


def test_missing_key_is_named(tmp_path):
    path = write_csv(tmp_path / "d.csv", [("P1", "0-17", "north", "10"), ("P2", "0-17", "", "12")])
    with pytest.raises(DataError, match=r"row 3, column clinic: missing key"):
        release_selection(SPEC, path, random_source(1, insecure_seed=True))


@pytest.mark.parametrize("change, field", [
    (lambda s: s["releases"][0].update(by="age_group"), "releases[0].by"),
    (lambda s: s["releases"][1].update(attribute="clinic"), "releases[1].attribute"),
    (lambda s: s["releases"][1].update(by="clinic"), "releases[1].by"),
    (lambda s: s["privacy"]["approx"].update(epsilon=1.0), ""),
    (lambda s: s.update(privacy={"pure": {"epsilon": 2.0}}), ""),
    (lambda s: s["data"]["privacy_unit"].pop("max_rows") and s["data"]["privacy_unit"].pop("max_groups"),
     "data.privacy_unit"),
    (lambda s: s["releases"][1].update(grid={"step": 1, "points": [1, 2]}), "releases[1].grid"),
    (lambda s: s["releases"][0].update(selection="laplace_threshold", selection_share=0.3), "releases[0]"),
    (lambda s: s.update(adjacency="replace_one"), "adjacency"),
    (lambda s: s.update(privacy={"zcdp": {"rho": 1.0}}), ""),
    (lambda s: s["data"]["attributes"].update(age_group=["a", "a"]), "data.attributes"),
    (lambda s: s["releases"][2].update(by="age_group"), "releases[2].by"),
    (lambda s: s["releases"][2].update(attribute="clinic"), "releases[2].attribute"),
    (lambda s: s["releases"].pop(0), "releases[1].by"),  # a mean per private key without its count release
    (lambda s: s["releases"].insert(0, s["releases"].pop(2)), "releases[0].by"),  # listed before it
    (lambda s: s["releases"].insert(0, dict(s["releases"][0], name="again")) or s["privacy"]["approx"].update(
        epsilon=3.5, delta=2e-6), "releases[3].by"),  # two count releases by clinic: which keys is ambiguous
])
def test_spec_errors_name_the_field(change, field):
    raw = read_document(SPEC)
    change(raw)
    with pytest.raises(SpecError) as err:
        load_selection_spec(raw)
    assert err.value.field == field
