"""``k_norm``, ``r2dp`` and ``generalized_gaussian`` on a ``linear`` query with decimal weights, measured exactly on
the decimal lattice (dpopt.mechanisms.decimal_counts).

Expected values come from independent derivations: D and the integer moves D·WΔ from Fractions of the written
decimals; the K-norm body Hull(D·S) from the moves themselves (every pair of points whose line leaves all the others
on one side is an edge: its normal a with a·p = a·q = 1, in Fractions); the privacy of each scaled law by brute force
over the listed moves (the K-norm gauge's largest increase over a box of the lattice, in integers; the discrete
Laplace mixture's and the discrete generalized Gaussian's log pmf ratios maximised over the integers in mpmath; the
discrete Gaussian's Rényi divergences summed in mpmath); the released law from seeded draws, within 4 standard
errors of the discrete law's second moment divided by D².
"""

from __future__ import annotations

import copy
import itertools
import json
import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from conftest import cli_runner

import dpopt
from dpopt.audit import audit
from dpopt.mechanisms.base import IDEALIZED_NUMERICS

WEIGHTS = [["0.5", "1", "0"], ["0", "0.25", "1.5"]]
"""The reproduction's matrix, as the decimals written."""

PRIVACY = {"pure": {"epsilon": 1.0}, "approx": {"epsilon": 1.0, "delta": 1e-6}, "zcdp": {"rho": 0.5},
           "gdp": {"mu": 1.0}, "pdp": {"epsilon": 1.0, "delta": 1e-3}}

COUNTS = [37, 12, 5]
"""A histogram of the three levels (answers 30.5 and 10.5: k = 122, 42)."""


def spec(mechanism: str, adjacency: str = "add_remove", definition: str = "pure", utility="l2", **extra) -> dict:
    data = {"attributes": {"a": ["x", "y", "z"]}} | ({"n": 100} if adjacency == "replace_one" else {})
    return {"dpopt": 1, "name": "decimal counts", "data": data,
            "query": {"kind": "linear", "attribute": "a", "matrix": [[float(w) for w in row] for row in WEIGHTS]},
            "adjacency": {"kind": adjacency}, "privacy": {definition: PRIVACY[definition]}, "mechanism": mechanism,
            "utility": utility if isinstance(utility, dict) else {"metric": utility}, **extra}


def denominator() -> int:
    return math.lcm(*(Fraction(w).denominator for row in WEIGHTS for w in row))


def integer_moves(adjacency: str) -> list[tuple[int, int]]:
    """D·WΔ over the adjacency's moves (±e_j, or e_j − e_k), from Fractions of the written weights."""
    d = denominator()
    columns = [tuple(int(Fraction(row[j]) * d) for row in WEIGHTS) for j in range(3)]
    if adjacency == "add_remove":
        return columns + [(-a, -b) for a, b in columns]
    return [(a[0] - b[0], a[1] - b[1]) for a, b in itertools.permutations(columns, 2)]


def hull_normals(points: list[tuple[int, int]]) -> list[tuple[Fraction, Fraction]]:
    """The edges of the hull of symmetric plane points about 0: normals a with a·p = a·q = 1 and a·r ≤ 1 for all r."""
    normals = set()
    for p, q in itertools.combinations(set(points), 2):
        det = p[0] * q[1] - p[1] * q[0]
        if det == 0:
            continue
        a = (Fraction(q[1] - p[1], det), Fraction(p[0] - q[0], det))  # solves a·p = a·q = 1
        if all(a[0] * r[0] + a[1] * r[1] <= 1 for r in points):
            normals.add(a)
    return sorted(normals)


def integer_gauge(normals, box: int) -> tuple[np.ndarray, int, np.ndarray]:
    """(the lattice points of [−box, box]², L, L·g(z) in int64 for each) with L the normals' common denominator."""
    common = math.lcm(*(x.denominator for a in normals for x in a))
    rows = np.array([[int(x * common) for x in a] for a in normals], dtype=np.int64)
    grid = np.arange(-box, box + 1)
    z = np.stack(np.meshgrid(grid, grid, indexing="ij"), axis=-1).reshape(-1, 2).astype(np.int64)
    return z, common, (z @ rows.T).max(axis=1)


def solve(mechanism: str, *args, **kwargs):
    solution = dpopt.solve(spec(mechanism, *args, **kwargs))
    return solution, json.loads(solution.certificate.to_json())


def released_noise(mechanism, draws: int = 20_000, seed: int = 20261207) -> np.ndarray:
    """D·(ỹ − Wx) for ``draws`` releases at :data:`COUNTS` (integers when the release is on (1/D)ℤ)."""
    query = dpopt.compile(spec("k_norm")).query
    answers = query.answers(np.array(COUNTS, dtype=float))
    truth = [sum(Fraction(w) * c for w, c in zip(row, COUNTS)) for row in WEIGHTS]
    assert [Fraction(a) for a in answers] == truth  # k/D exactly
    released = mechanism.release(np.tile(answers, (draws, 1)), np.random.default_rng(seed))
    return released * denominator() - np.array([float(denominator() * t) for t in truth])


# ----------------------------------------------------------------------------------------------------- k_norm
@pytest.mark.parametrize("adjacency", ["add_remove", "replace_one"])
def test_k_norm_privacy_by_brute_force_over_the_integer_moves(adjacency):
    solution, certificate = solve("k_norm", adjacency)
    mechanism = solution.mechanism
    parameters = certificate["mechanism"]["parameters"]
    moves = integer_moves(adjacency)
    assert parameters["lattice_scale"] == denominator() == 4
    assert Fraction(parameters["lattice_l2_squared"]) == max(a * a + b * b for a, b in moves)  # 36 or 41
    normals = hull_normals(moves)
    z, common, mine = integer_gauge(normals, 60)
    lattice = mechanism.inner.lattice
    assert lattice.columns == (0, 1) and lattice.echelon.tolist() == [[1, 0], [0, 1]]  # span(D·S) ∩ ℤ² = ℤ²
    theirs = lattice.gauge.scaled(z)
    assert np.array_equal(theirs * common, mine * lattice.gauge.denominator)  # the sampled law is exp(−ε′ g)
    # log p(z)/p(z + s) = ε′(g(z + s) − g(z)); its largest value over the box, for each move
    index = {tuple(p): i for i, p in enumerate(z.tolist())}
    worst = 0
    for s in moves:
        inner = [i for i, p in enumerate(z.tolist()) if max(abs(p[0] + s[0]), abs(p[1] + s[1])) <= 60]
        shifted = np.array([index[(z[i, 0] + s[0], z[i, 1] + s[1])] for i in inner])
        worst = max(worst, int((mine[shifted] - mine[inner]).max()))
    assert Fraction(worst, common) == 1  # tight at z = 0: every move is a point of K's boundary
    assert Fraction(parameters["lattice_epsilon"]) * Fraction(worst, common) <= 1  # ε′·sup ≤ ε = 1


def test_k_norm_release_is_on_the_decimal_lattice_with_the_lattice_law_second_moment():
    solution, certificate = solve("k_norm")
    noise = released_noise(solution.mechanism)
    assert np.all(noise == np.round(noise))  # ỹ − Wx ∈ (1/D)ℤ²
    z, common, mine = integer_gauge(hull_normals(integer_moves("add_remove")), 300)  # e^{−g} < e^{−50} beyond
    weights = np.exp(-mine / common)  # ε′ = 1
    weights /= weights.sum()
    second = (weights @ z.astype(float) ** 2) / 16  # E (z_i/D)², per coordinate
    for i in range(2):
        values = (noise[:, i] / 4) ** 2
        assert abs(values.mean() - second[i]) <= 4 * values.std() / math.sqrt(values.size)
    utility = certificate["utility"]  # the prediction: importance sampling, its 95% interval
    low, high = utility["ci95"]
    assert low - 1e-9 <= second.sum() <= high + 1e-9 and utility["value"] == pytest.approx(second.sum(), rel=0.02)


# ------------------------------------------------------------------------------------------------------- r2dp
def mixture_pmf(scales, weights, support):
    """Σ_j w_j tanh(1/(2s_j)) e^{−|k|/s_j} on ``support`` (mpmath), the weights normalised."""
    total = sum(weights)
    scales = [mpmath.mpf(s.numerator) / s.denominator for s in scales]
    return [mpmath.fsum(mpmath.mpf(w) / total * mpmath.tanh(1 / (2 * s)) * mpmath.exp(-abs(k) / s)
                        for s, w in zip(scales, weights)) for k in support]


@pytest.mark.parametrize("adjacency", ["add_remove", "replace_one"])
def test_r2dp_privacy_by_brute_force_over_the_integer_moves(adjacency):
    solution, _ = solve("r2dp", adjacency)
    mixture = solution.mechanism.inner.mixture
    scales, weights = [Fraction(s) for s in mixture.scales], list(mixture.weights)
    top = max(abs(x) for move in integer_moves(adjacency) for x in move)
    with mpmath.workdps(40):
        half = 40 * int(max(scales)) + 4 * top
        p = dict(zip(range(-half, half + 1), mixture_pmf(scales, weights, range(-half, half + 1))))
        loss = {m: max(abs(mpmath.log(p[k] / p[k + m])) for k in range(-half, half + 1 - m)) for m in range(top + 1)}
        worst = max(mpmath.fsum(loss[abs(x)] for x in move) for move in integer_moves(adjacency))
    assert worst <= 1  # pure ε = 1: independent coordinates, the losses add


def test_r2dp_release_is_on_the_decimal_lattice_with_the_mixture_second_moment():
    solution, certificate = solve("r2dp", utility="l1")
    mixture = solution.mechanism.inner.mixture
    scales, weights = [Fraction(s) for s in mixture.scales], list(mixture.weights)
    with mpmath.workdps(30):
        half = 60 * int(max(scales)) + 60
        pmf = mixture_pmf(scales, weights, range(-half, half + 1))
        second = float(mpmath.fsum(k * k * q for k, q in zip(range(-half, half + 1), pmf)) / mpmath.fsum(pmf)) / 16
        first = float(mpmath.fsum(abs(k) * q for k, q in zip(range(-half, half + 1), pmf)) / mpmath.fsum(pmf)) / 4
    noise = released_noise(solution.mechanism)
    assert np.all(noise == np.round(noise))
    values = (noise / 4).ravel() ** 2
    assert abs(values.mean() - second) <= 4 * values.std() / math.sqrt(values.size)
    assert certificate["utility"]["value"] == pytest.approx(2 * first, rel=1e-9)  # E‖Z‖₁ = 2 E|k|/D


# --------------------------------------------------------------------------------------- generalized_gaussian
@pytest.mark.parametrize("adjacency", ["add_remove", "replace_one"])
def test_generalized_gaussian_pure_privacy_by_brute_force(adjacency):
    """Pure ε is served by p = 1 (the discrete Laplace of scale s): log w(k) − log w(k + m) = (|k + m| − |k|)/s,
    maximised over the integers in Fractions, summed over a move's coordinates."""
    solution, _ = solve("generalized_gaussian", adjacency)
    inner = solution.mechanism.inner
    s = inner.lattice_scale
    assert inner.p == 1
    top = max(abs(x) for move in integer_moves(adjacency) for x in move)
    half = 4 * top + 10  # |k + m| − |k| is constant beyond |k| ≥ m
    loss = {m: max(Fraction(abs(abs(k + m) - abs(k)), 1) / s for k in range(-half, half + 1)) for m in range(top + 1)}
    worst = max(sum(loss[abs(x)] for x in move) for move in integer_moves(adjacency))
    assert worst <= 1  # pure ε = 1
    assert worst == Fraction(max(abs(a) + abs(b) for a, b in integer_moves(adjacency))) / s  # Δ₁ of D·S over s


def test_generalized_gaussian_zcdp_by_brute_force_renyi_divergences():
    solution, certificate = solve("generalized_gaussian", definition="zcdp", utility="max_variance")
    inner = solution.mechanism.inner
    assert inner.p in (1, 2)
    s = inner.lattice_scale
    with mpmath.workdps(30):
        sm = mpmath.mpf(s.numerator) / s.denominator
        half = int(40 * s) + 40
        weights = {k: mpmath.exp(-(abs(mpmath.mpf(k)) / sm) ** inner.p) for k in range(-half, half + 1)}
        total = mpmath.fsum(weights.values())
        pmf = {k: w / total for k, w in weights.items()}
        for alpha in (1.5, 2, 4, 16):
            worst = max(mpmath.fsum(
                mpmath.log(mpmath.fsum(pmf[k] ** alpha * pmf[k - m] ** (1 - alpha)
                                       for k in range(-half + abs(m), half - abs(m) + 1))) / (alpha - 1)
                for m in move) for move in integer_moves("add_remove"))
            assert worst <= alpha * mpmath.mpf("0.5")  # ρ-zCDP: D_α ≤ αρ
        second = float(mpmath.fsum(k * k * q for k, q in pmf.items())) / 16
    assert certificate["utility"]["value"] == pytest.approx(second, rel=1e-9)  # max Var = E k²/D²
    noise = released_noise(solution.mechanism)
    assert np.all(noise == np.round(noise))
    values = (noise / 4).ravel() ** 2
    assert abs(values.mean() - second) <= 4 * values.std() / math.sqrt(values.size)


# ----------------------------------------------------------------------------------------------- end to end
CONFIGS = [("k_norm", "add_remove", "pure", "l2"), ("k_norm", "replace_one", "gdp", "ci_volume"),
           ("k_norm", "add_remove", "zcdp", {"metric": "usefulness", "gamma": 3}),
           ("r2dp", "add_remove", "approx", "max_variance"), ("r2dp", "replace_one", "pure", "l2"),
           ("generalized_gaussian", "add_remove", "pure", "l1"),
           pytest.param("generalized_gaussian", "replace_one", "pdp", "l2", marks=pytest.mark.slow),  # 12–17 s
           ("generalized_gaussian", "add_remove", "gdp", {"metric": "usefulness", "gamma": 3})]


@pytest.mark.parametrize("family, adjacency, definition, utility", CONFIGS)
def test_the_reproduction_configs_measure_exactly_and_verify(family, adjacency, definition, utility):
    solution, certificate = solve(family, adjacency, definition, utility)
    assert "idealized" not in json.dumps(certificate)
    assert IDEALIZED_NUMERICS not in " ".join(solution.mechanism.notes())
    parameters = certificate["mechanism"]["parameters"]
    assert certificate["mechanism"]["family"] == family and parameters["lattice_scale"] == 4
    stated = parameters.get("exact_cost") or parameters["design"]["exact_cost"]  # r2dp's sits in its design record
    assert stated["metric"] == certificate["utility"]["metric"] and stated["ratio"] > 0
    assert dpopt.verify(certificate).passed


def test_usefulness_is_read_at_gamma_times_d():
    """P(|z/D| ≤ γ) = P(|z| ≤ γD): the discrete Laplace mixture's mass on |k| ≤ 12 for γ = 3, D = 4."""
    solution, certificate = solve("r2dp", utility={"metric": "usefulness", "gamma": 3})
    mixture = solution.mechanism.inner.mixture
    with mpmath.workdps(30):
        inside = mpmath.fsum(mixture_pmf([Fraction(s) for s in mixture.scales], list(mixture.weights), range(-12, 13)))
    assert certificate["utility"]["value"] == pytest.approx(float(inside), rel=1e-9)


@pytest.mark.parametrize("family", ["k_norm", "r2dp", "generalized_gaussian"])
@pytest.mark.parametrize("changes", [{"lattice_scale": 2}, {"lattice_scale": 8, "lattice_l2_squared": "144"},
                                     {"lattice_l2_squared": "35"}])
def test_a_forged_scale_fails_verify(family, changes):
    _, certificate = solve(family)
    forged = copy.deepcopy(certificate)
    forged["mechanism"]["parameters"].update(changes)
    assert not dpopt.verify(forged).passed


def test_the_floating_point_option_keeps_its_note():
    solution, certificate = solve("k_norm", sampler="floating_point")
    assert "lattice_scale" not in certificate["mechanism"]["parameters"]
    assert IDEALIZED_NUMERICS in " ".join(solution.mechanism.notes())


@pytest.mark.parametrize("family", ["k_norm", pytest.param("r2dp", marks=pytest.mark.slow),
                                    pytest.param("generalized_gaussian", marks=pytest.mark.slow)])
def test_cli_solve_release_and_verify(tmp_path, family, capsys):
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec(family, "replace_one")))
    data = tmp_path / "data.csv"
    data.write_text("a\n" + "x\n" * 50 + "y\n" * 30 + "z\n" * 20)
    run = cli_runner(capsys)
    solved = run("solve", str(path), "--out", str(tmp_path / "out"))
    assert solved.returncode == 0, solved.stderr
    assert run("verify", str(tmp_path / "out" / "certificate.json")).returncode == 0
    released = run("release", str(path), "--data", str(data), "--out", str(tmp_path / "rel"), "--seed", "1",
                   "--insecure-seed")
    assert released.returncode == 0, released.stderr
    assert run("verify", str(tmp_path / "rel")).returncode == 0
    certificate = json.loads((tmp_path / "out" / "certificate.json").read_text())
    assert "idealized" not in json.dumps(certificate) and certificate["mechanism"]["family"] == family
    rows = (tmp_path / "rel" / "release.csv").read_text().splitlines()[1:]
    found = [float(row.split(",")[1]) for row in rows]
    truth = [0.5 * 50 + 30, 0.25 * 30 + 1.5 * 20]  # 55, 37.5 (exact in binary)
    assert len(found) == 2 and all((v - t) * 4 == round((v - t) * 4) for v, t in zip(found, truth))


@pytest.mark.parametrize("family", ["k_norm", "r2dp", "generalized_gaussian"])
def test_the_audit_shifts_decimal_answers_on_their_lattice(family):
    # weights 0.1, 0.3 (D = 10): the audit's shifted answer x + WΔ, formed in floating point, is snapped to k/D as
    # the data's answers are; the exact measurement then passes its audit (20,000 draws per dataset, the audit's
    # own Clopper–Pearson bounds)
    spec = {"dpopt": 1, "name": "t", "data": {"attributes": {"a": ["x", "y", "z"]}, "n": 100},
            "query": {"kind": "linear", "attribute": "a", "matrix": [[0.1, 0.3, 0], [0, 0.2, 0.7]]},
            "adjacency": {"kind": "replace_one"}, "privacy": {"pure": {"epsilon": 1}}, "mechanism": family,
            "utility": {"metric": "l2"}}
    solution = dpopt.solve(spec)
    assert solution.mechanism.decimal.scale == 10 and solution.mechanism.exact_noise
    assert audit(solution, draws=20_000).passed
