"""The exact cone sampler of the discrete K-norm law (dpopt.noise.k_norm_cones).

Expected values and their sources:

* the hexagon K = Hull{±(1, −1), ±(1, 0), ±(0, 1)} (the 2×3 table with both margins, pivot coordinates): its
  gauge is g(a, b) = max(|a|, |b|, |a + b|), derived by hand from its six facets a = ±1, b = ±1, a + b = ±1.
* the rank-3 body K = Hull{±(1, 0, 0), ±(0, 1, 0), ±(1, 1, 2)}: its gauge is taken from scipy's ConvexHull
  (qhull's facet equations, floating point), not from the code's exact gauge; det((1,0,0), (0,1,0), (1,1,2)) = 2,
  so it has cones with two lattice residues.
* the law P[z] ∝ e^{−εg(z)} is enumerated on a box from those gauges; the mass outside |z_k| ≤ B is below
  Σ_{k>B} (2k+1)^s e^{−εk/h}, h = max extent, checked numerically below 1e-12 where used.
* a representation of z by the sampler is (cone, residue p̃, n ≥ 0) with z = p̃ + Σ n_i v_i; enumerating every
  (cone, residue) and every n with Σn ≤ N lists every representation of every z with g(z) ≤ N (g(z) ≥ Σn).
"""

from __future__ import annotations

import itertools
import json
import math
from fractions import Fraction

import numpy as np
import pytest
from conftest import ROOT, pooled_chi_square
from scipy import stats
from scipy.spatial import ConvexHull

import dpopt
import dpopt.noise.k_norm_cones as cones
from dpopt.geometry import table_symmetries
from dpopt.mechanisms.k_norm_lattice import echelon_lattice, rational_gauge
from dpopt.noise.k_norm_cones import FanError, build_fan, sample_cone_k_norm

HEXAGON = np.array([[1, -1], [-1, 1], [1, 0], [-1, 0], [0, 1], [0, -1]])
SKEW = np.array([[1, 0, 0], [-1, 0, 0], [0, 1, 0], [0, -1, 0], [1, 1, 2], [-1, -1, -2]])
CUBE = np.array(list(itertools.product([-1, 1], repeat=3)))


def qhull_gauge(points: np.ndarray):
    """(facet normals a with ⟨a, x⟩ ≤ 1 on K, the gauge max_f ⟨a_f, z⟩) from scipy's ConvexHull."""
    hull = ConvexHull(points.astype(float))
    normals = np.unique(np.round(-hull.equations[:, :-1] / hull.equations[:, -1:], 12), axis=0)
    return normals, lambda z: np.max(np.atleast_2d(z) @ normals.T, axis=1)


def fan_of(points: np.ndarray):
    normals, _ = qhull_gauge(points)
    gauge = rational_gauge(normals, points)
    assert not isinstance(gauge, str)
    return build_fan(points, gauge), gauge


def table_3x3_points() -> tuple[np.ndarray, np.ndarray]:
    """The 3×3 table with both margins (rank 4): its listed moves in pivot coordinates and their verified group
    of table moves (:func:`dpopt.geometry.table_symmetries`, order 4·3!² = 144)."""
    levels = ["l0", "l1", "l2"]
    spec = {"dpopt": 1, "name": "3x3", "data": {"attributes": {"a": levels, "b": levels}, "n": 100},
            "query": {"kind": "contingency_table", "attributes": ["a", "b"]},
            "invariants": [{"kind": "margins", "attributes": ["a"]}, {"kind": "margins", "attributes": ["b"]}],
            "adjacency": {"kind": "replace_one"}, "privacy": {"pure": {"epsilon": 1.0}}}
    vectors = dpopt.compile(spec).space.listed()
    columns, _ = echelon_lattice(vectors)
    return np.round(vectors[:, list(columns)]).astype(np.int64), table_symmetries(vectors)


def representations(fan, depth: int) -> dict:
    """Every (cone, residue, n) with Σn ≤ depth: z ↦ [g(p̃) + Σn for each representation] (exact rationals)."""
    s = fan.rank
    out: dict = {}
    ns = [n for n in itertools.product(range(depth + 1), repeat=s) if sum(n) <= depth]
    for j, simplex in enumerate(fan.simplices):
        r = fan.simplex_rep[j]
        local = j - int(np.searchsorted(fan.simplex_rep, r))
        d = abs(int(fan.determinants[j]))
        for k, facet in enumerate(fan.orbit_facets[r]):
            vertices = fan.points[fan.facet_perm[facet][simplex]]
            mask = int(fan.open_masks[r][k, local])
            for lam in fan.residues[fan.residue_start[j]:fan.residue_start[j + 1]]:
                lam = [int(x) + (d if (mask >> i) & 1 and x == 0 else 0) for i, x in enumerate(lam)]
                for n in ns:
                    total = [lam[i] + d * n[i] for i in range(s)]
                    z = sum(t * v for t, v in zip(total, vertices.astype(object)))
                    assert all(x % d == 0 for x in z)
                    key = tuple(int(x) // d for x in z)
                    out.setdefault(key, []).append(Fraction(sum(total), d))
    return out


@pytest.mark.parametrize("body, depth", [("hexagon", 12), ("skew", 6), ("cube", 5), ("table_3x3", 4)])
def test_every_lattice_point_has_exactly_one_representation_with_its_gauge(body, depth):
    """Exact enumeration of the sampler's law: every z with g(z) ≤ depth (independent gauge) is produced by exactly
    one (cone, residue, n), whose weight e^{−ε(g(p̃) + Σn)} is e^{−εg(z)}; so the output law, normalised, is
    e^{−εg(z)}/Z whatever ε. Points with g > depth may appear only with g(p̃) + Σn > depth. The 3×3 table's fan
    is built up to its group of table moves (one triangulated facet per orbit, the others its images)."""
    if body == "table_3x3":
        points, perms = table_3x3_points()
        normals, _ = qhull_gauge(points)
        fan = build_fan(points, rational_gauge(normals, points), perms)
        assert len(fan.orbit_facets) < len(normals)  # the symmetry path: fewer representatives than facets
    else:
        points = {"hexagon": HEXAGON, "skew": SKEW, "cube": CUBE}[body]
        fan, _ = fan_of(points)
    _, g = qhull_gauge(points)
    found = representations(fan, depth)
    box = np.array(list(itertools.product(range(-3 * depth, 3 * depth + 1), repeat=fan.rank)))
    level = g(box)  # the box holds every g ≤ depth: g ≥ ‖z‖∞/h with extents h ≤ 2 on these bodies
    assert np.abs(points).max() <= 2
    inside = box[level <= depth + 1e-9]
    for z in inside.tolist():
        reps = found.get(tuple(z))
        assert reps is not None and len(reps) == 1, (z, reps)
        assert float(reps[0]) == pytest.approx(float(g(np.array(z))[0]), abs=1e-9)
    for z, reps in found.items():
        assert all(float(x) == pytest.approx(float(g(np.array(z))[0]), abs=1e-9) for x in reps)
    assert (0,) * fan.rank in found  # the origin: one half-open cone holds it


def test_the_skew_body_has_residues_and_the_determinant_sum_is_s_factorial_volume():
    """|det| = 2 cones carry two residues; Σ|d| = s!·vol K (vol K from qhull: 3!·vol = Σ|d| exactly in integers)."""
    fan, _ = fan_of(SKEW)
    assert np.abs(fan.determinants).max() == 2
    assert fan.total == round(math.factorial(3) * ConvexHull(SKEW.astype(float)).volume)
    hexagon, _ = fan_of(HEXAGON)
    assert hexagon.total == 6 and hexagon.cones == 6  # area 3, 2!·3 = 6 unimodular cones


@pytest.mark.parametrize("points, epsilon, extent", [(SKEW, Fraction(1), 2), (HEXAGON, Fraction(1, 2), 1)])
def test_draws_fit_the_enumerated_law(points, epsilon, extent):
    """χ² goodness of fit of 200,000 exact draws (fixed seed) against e^{−εg(z)}/Z enumerated on the box
    ‖z‖∞ ≤ 60 from the independent gauge (cells of expected count < 5 pooled, z = 0 and the cones' boundary
    points among the cells). The mass outside is below Σ_{k>60} 2s(2k+1)^{s−1}e^{−εk/h} (g ≥ ‖z‖∞/h, h the
    largest extent of K; at most 2s(2k+1)^{s−1} points have ‖z‖∞ = k), under 10⁻⁹ of Z.
    Power: the law at 1.1ε has noncentrality λ = N Σ (p₁ − p₀)²/p₀ on the same cells; the test at level 10⁻³
    detects it with probability ≥ 0.99 (computed below)."""
    fan, _ = fan_of(points)
    _, g = qhull_gauge(points)
    bound, s = 60, fan.rank
    box = np.array(list(itertools.product(range(-bound, bound + 1), repeat=s)))
    level = g(box)
    p = np.exp(-float(epsilon) * level)
    tail = sum(2 * s * (2 * k + 1) ** (s - 1) * math.exp(-float(epsilon) * k / extent) for k in range(bound + 1, 4000))
    assert tail / p.sum() < 1e-9
    p /= p.sum()
    draws = 200_000
    z = sample_cone_k_norm(np.random.default_rng(17), fan, epsilon, draws)
    assert np.abs(z).max() <= bound
    place = ((z + bound) * (2 * bound + 1) ** np.arange(s)[::-1]).sum(axis=1)  # row index in the box
    counts = np.bincount(place, minlength=len(box))
    statistic, critical = pooled_chi_square(counts, p, draws)
    assert statistic < critical
    big = draws * p >= 5
    pooled = np.append(p[big], p[~big].sum())
    assert counts[len(box) // 2] > 0  # z = 0, the box's centre
    wrong = np.exp(-1.1 * float(epsilon) * level)
    wrong /= wrong.sum()
    q = np.append(wrong[big], wrong[~big].sum())
    noncentrality = draws * float(np.sum((q - pooled) ** 2 / pooled))
    assert stats.ncx2.sf(critical, len(pooled) - 1, noncentrality) >= 0.99


@pytest.mark.parametrize("points", [SKEW, CUBE])
def test_acceptance_rate_is_the_mean_over_cone_residue_pairs(points):
    """A round accepts with the rate :func:`acceptance_rate` states: the mean of e^{−εg(p̃)} over the Σ|d| (cone,
    residue) pairs, enumerated independently here (the representations at n = 0 are exactly those pairs)."""
    fan, _ = fan_of(points)
    epsilon = 1.0
    found = representations(fan, 0)
    assert sum(len(reps) for reps in found.values()) == fan.total
    rate = sum(math.exp(-epsilon * float(x)) for reps in found.values() for x in reps) / fan.total
    assert cones.acceptance_rate(fan, epsilon) == pytest.approx(rate, rel=1e-12)


def test_coverage_proof_rejects_a_dropped_simplex(monkeypatch):
    """The cube's square facets take two triangles each; with one triangle dropped, its diagonal is an
    unpaired face inside the facet and the proof must refuse the fan."""
    fan, _ = fan_of(CUBE)
    assert len(fan.simplices) == 12 and fan.cones == 12  # no symmetry given: 6 facets, 2 triangles each
    assert fan.total == 48 and set(np.abs(fan.determinants).tolist()) == {4}  # 3!·vol = 6·8
    original = cones._placing_triangulation

    def dropped(points, tight, row):
        return original(points, tight, row)[:-1]

    monkeypatch.setattr(cones, "_placing_triangulation", dropped)
    normals, _ = qhull_gauge(CUBE)
    with pytest.raises(FanError, match="unpaired"):
        build_fan(CUBE, rational_gauge(normals, CUBE))


def test_coverage_proof_rejects_a_wrong_half_open_set():
    """Flipping one cone's half-open bit breaks the partition (a point in two half-open cones or none): the
    proof's recomputation of the masks must catch it."""
    fan, gauge = fan_of(SKEW)
    masks = [m.copy() for m in fan.open_masks]
    masks[0][0, 0] ^= 1
    forged = cones.replace(fan, open_masks=tuple(masks))
    ok, detail = cones.fan_check(forged, gauge, np.arange(len(SKEW))[None, :])
    assert not ok and "half-open" in detail


def test_coverage_proof_rejects_a_non_linear_symmetry():
    """A permutation of the points that no linear map induces (swapping two vectors only) is refused."""
    _, gauge = fan_of(SKEW)
    swap = np.arange(len(SKEW))
    swap[[0, 2]] = swap[[2, 0]]
    with pytest.raises(FanError):
        build_fan(SKEW, gauge, np.stack([np.arange(len(SKEW)), swap]))


def test_symmetric_and_plain_fans_give_the_same_law():
    """The hexagon with its 12 symmetries (the dihedral group acting on the six points, as linear maps) builds one
    orbit; its draws and the plain fan's agree with the enumerated law's second moment E‖c‖² (enumerated)."""
    normals, g = qhull_gauge(HEXAGON)
    gauge = rational_gauge(normals, HEXAGON)
    rotation = np.array([[0, -1], [1, 1]])  # (a, b) ↦ (−b, a + b): (1, 0) ↦ (0, 1) ↦ (−1, 1) ↦ (−1, 0), order 6
    maps = [np.linalg.matrix_power(rotation, k) for k in range(6)]
    maps += [m @ np.array([[0, 1], [1, 0]]) for m in maps]
    index = {tuple(p): i for i, p in enumerate(HEXAGON.tolist())}
    perms = np.array([[index[tuple((m @ p).tolist())] for p in HEXAGON] for m in maps])
    fan = build_fan(HEXAGON, gauge, perms)
    assert len(fan.orbit_facets) == 1 and len(fan.orbit_facets[0]) == 6
    box = np.array(list(itertools.product(range(-60, 61), repeat=2)))
    p = np.exp(-0.5 * g(box))
    exact = float(p @ (box**2).sum(axis=1) / p.sum())
    z = sample_cone_k_norm(np.random.default_rng(4), fan, Fraction(1, 2), 100_000)
    values = (z**2).sum(axis=1)
    assert abs(values.mean() - exact) <= 4 * values.std() / math.sqrt(len(values))


def test_cone_monte_carlo_agrees_with_the_importance_estimate_on_the_3x4_table():
    """Two independent routes to E‖Z‖² of the same lattice law on the 3×4 table with both margins (rank 6): the
    rejection sampler's importance-sampling estimate (its certificate) and the mean of exact cone draws; their
    difference within 4 combined standard errors."""
    sol = dpopt.solve(ROOT / "specs" / "table_3x4_margins_pure.yaml")
    lattice = sol.mechanism.lattice
    assert lattice is not None and lattice.fan is None
    body = sol.mechanism.body
    from dpopt.mechanisms.k_norm_lattice import LatticeKNorm
    built = LatticeKNorm.build(body.vectors, body.polytope.normals, lattice.epsilon, sampler="cones")
    assert not isinstance(built, str) and built.fan is not None
    a = lattice.utility("l2", None, None)
    b = built.utility("l2", None, None)
    se = math.hypot(*((u.ci[1] - u.ci[0]) / (2 * 1.96) for u in (a, b)))
    assert abs(a.value - b.value) <= 4 * se
    assert "exact draws" in b.method


@pytest.mark.slow
def test_4x4_table_solves_releases_and_verifies_exactly(tmp_path, capsys):
    """The 4×4 table with both margins (rank 9, 3,818 facets): auto picks k_norm on the lattice with the cone
    sampler; no idealized-numerics note; dpopt verify passes; a release (Python and CLI) is integer and keeps
    both margins."""
    from dpopt.cli import main

    spec = ROOT / "specs" / "table_4x4_margins_pure.yaml"
    sol = dpopt.solve(spec)
    params = sol.mechanism.parameters
    assert sol.mechanism.family == "k_norm" and params["sampler"] == "exact" and params["lattice_sampler"] == "cones"
    assert "idealized" not in json.dumps(sol.certificate.data)
    assert {c["claim"]: c["passed"] for c in sol.certificate["checks"]}["k_norm.lattice_cones"]
    assert dpopt.verify(sol.certificate).passed
    rng = np.random.default_rng(8)
    truth = rng.multinomial(1200, np.full(16, 1 / 16)).astype(float)
    released = sol.mechanism.release(truth[None, :], rng)[0]
    assert np.array_equal(released, np.round(released))
    for axis in (0, 1):
        assert np.array_equal(released.reshape(4, 4).sum(axis=axis), truth.reshape(4, 4).sum(axis=axis))
    out = tmp_path / "out"
    assert main(["solve", str(spec), "--out", str(out)]) == 0
    assert main(["verify", str(out / "certificate.json")]) == 0
    capsys.readouterr()
    tenure, size = ["owner", "mortgage", "renter", "other"], ["1", "2", "3-4", "5+"]
    cells = rng.integers(0, 16, size=1200)
    data = tmp_path / "households.csv"
    data.write_text("tenure,size\n" + "".join(f"{tenure[c // 4]},{size[c % 4]}\n" for c in cells))
    assert main(["release", str(spec), "--data", str(data), "--seed", "3", "--insecure-seed"]) == 0
    keyed = json.loads(capsys.readouterr().out)["release"]
    released = np.array([[keyed[f"tenure={u},size={v}"] for v in size] for u in tenure], dtype=float)
    counts = np.bincount(cells, minlength=16).reshape(4, 4)
    assert np.array_equal(released, np.round(released))
    assert np.array_equal(released.sum(axis=0), counts.sum(axis=0))
    assert np.array_equal(released.sum(axis=1), counts.sum(axis=1))


def test_verify_rejects_a_forged_sampler_choice():
    """The sampler is recorded: a 2×3 certificate (rejection sampler, within its cost) edited to claim
    ``lattice_sampler: cones`` no longer matches what verify rebuilds from it (the cone counts, the note, the
    Monte Carlo of the other sampler)."""
    sol = dpopt.solve({"dpopt": 1, "name": "2x3 margins",
                       "data": {"attributes": {"a": ["x", "y"], "b": ["p", "q", "r"]}, "n": 100},
                       "query": {"kind": "contingency_table", "attributes": ["a", "b"]},
                       "invariants": [{"kind": "margins", "attributes": ["a"]},
                                      {"kind": "margins", "attributes": ["b"]}],
                       "adjacency": {"kind": "replace_one"}, "privacy": {"pure": {"epsilon": 1.0}},
                       "mechanism": "k_norm"})
    assert "lattice_sampler" not in sol.mechanism.parameters
    data = json.loads(json.dumps(sol.certificate.data))
    data["mechanism"]["parameters"]["lattice_sampler"] = "cones"
    failed = {c.claim for c in dpopt.verify(data).failed}
    assert {"mechanism.parameters", "mechanism.title", "utility"} <= failed
