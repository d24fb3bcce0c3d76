"""A certificate solved under one BLAS configuration verifies under another, for every family.

LAPACK's SVD and eigendecompositions return another basis within a repeated singular value (and other
last bits) under another number of BLAS threads or another OpenBLAS kernel; a mechanism drawn or
certified in such a basis (the K-norm fallback's l1 or l∞ ball, issue 35) would then fail ``dpopt
verify`` on another machine. Each case solves a spec in a subprocess under one configuration and
verifies its certificate in another subprocess under the other, both ways:

* ``single``: one thread (``OPENBLAS_NUM_THREADS``, ``OMP_NUM_THREADS``, ``MKL_NUM_THREADS`` = 1);
* ``other``: two threads and OpenBLAS's baseline x86-64 kernels (``OPENBLAS_CORETYPE=Prescott``, SSE3,
  which every x86-64 CPU runs; ignored elsewhere): thread counts alone leave the small matrices of a fast
  test single-threaded, the kernel changes their last bits as another machine's CPU does;
* ``default``: no thread or kernel variable set (what a user's shell has).

The default run solves the issue's family one way (the K-norm l1 ball, on a small Kronecker workload with
repeated singular values; it failed both ways before the span's basis was made canonical) and a sample of
the registry (:data:`SAMPLE`) under one thread, verified under the default configuration; the slow run the
other way, every registered family both ways, and the issue's own reproduction. The optimal K-norm
(K = Hull(S)) failed there (boundary_simplices 6850 vs 6890 on table_3x4_margins_pure: qhull triangulated
from orthonormal-basis coordinates whose last bits differ) until its hull was built on exact pivot
coordinates (:class:`~dpopt.sensitivity.subspace.PivotCoordinates`); the default run checks in process
that the triangulation no longer depends on the basis LAPACK returns.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dpopt.core.families import family_names
from dpopt.sensitivity.subspace import canonical_basis, pivot_coordinates, span_of

ROOT = Path(__file__).resolve().parents[1]
SPECS = ROOT / "specs"

THREADS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
CONFIGS = {
    "single": dict.fromkeys(THREADS, "1"),
    "other": {**dict.fromkeys(THREADS, "2"), "OPENBLAS_CORETYPE": "Prescott"},
    "default": {},
}
DIRECTIONS = [("single", "other"), ("other", "single")]

CLI = "import sys; from dpopt.cli import main; sys.exit(main(sys.argv[1:]))"
"""``dpopt ARGS`` in the subprocess's environment."""
CLI_BALL = ("import sys, dataclasses, dpopt.mechanisms.k_norm as k; "
            "k.HULL_BUDGET = dataclasses.replace(k.HULL_BUDGET, facets=0); "
            "from dpopt.cli import main; sys.exit(main(sys.argv[1:]))")
"""``dpopt ARGS`` with K-norm's hull budget at 0 facets: the fallback ball, chosen by utility (the l1 ball here)."""


def kronecker_ball(levels: int) -> dict:
    """The issue's Kronecker workload (2-way marginals of three attributes crossed with an age prefix) at
    pure ε = 1, add/remove, on ``levels`` ages."""
    return {"dpopt": 1, "name": f"K-norm ball on a Kronecker workload, {levels} ages",
            "data": {"attributes": {"age": [f"a{i:02d}" for i in range(levels)], "b": ["b0", "b1", "b2"],
                                    "c": ["c0", "c1", "c2", "c3"], "e": ["e0", "e1"]}},
            "query": {"kind": "kronecker", "all_of_size": 2, "crossed_with": {"age": "prefix"}},
            "adjacency": "add_remove", "privacy": {"pure": {"epsilon": 1}}, "utility": "l2",
            "sampler": "floating_point"}  # the ball in floats (on the lattice: the cross-polytope, in integers)


MARGINALS = {"dpopt": 1, "name": "2-way marginals of a small table", "data": {"attributes": {
    "a": ["a0", "a1", "a2"], "b": ["b0", "b1"], "c": ["c0", "c1", "c2", "c3"]}, "n": 10},
    "query": {"kind": "marginals", "attributes": [["a", "b"], ["a", "c"], ["b", "c"]]},
    "adjacency": "add_remove", "utility": {"metric": "l2"}}

CASES: dict[str, dict | str] = {
    # family: a small spec it serves (an example spec's name, its mechanism set to the family, or one here)
    "gaussian": "prefix_workload_zcdp",
    "projected_gaussian": "table_3x3_margins_gdp",
    "james_stein": "table_age_sex_gdp",
    "marginal_gaussian": {**MARGINALS, "privacy": {"zcdp": {"rho": 1}}},
    "marginal_laplace": {**MARGINALS, "privacy": {"pure": {"epsilon": 1}}},
    "kronecker_gaussian": "kronecker_age_ranges_sex_region_gdp",
    "kronecker_laplace": "range_marginals_age_prefix_pure",
    "gaussian_optimal": "age_cumulative_optimal_gdp",
    "laplace": "staircase_histogram_usefulness",
    "k_norm": "table_3x4_margins_pure",
    "generalized_gaussian": "table_pdp_replace_gg",
    "staircase": "staircase_sum_l1",
    "r2dp": "r2dp_count_usefulness",
    "discrete_gaussian": "block_tables_discrete_zcdp",
    "discrete_laplace": "count_add_remove",
    "query_scaling": "age_summary_test_power",
}


SAMPLE = ("marginal_laplace",)
"""The families of the default run besides the K-norm ball: marginal_laplace solves in about a second and
certifies in the marginal algebra's computed eigenvalues (about 4 s of CPU for both subprocesses)."""


def _run(config: str, code: str, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE" and k not in THREADS}
    env.update(CONFIGS[config], PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    return subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=1800)


def spec_file(case: dict | str, family: str, folder: Path) -> Path:
    """The case's spec with ``mechanism: family``, written to ``folder``."""
    if isinstance(case, str):
        text = re.sub(r"^mechanism:.*$", f"mechanism: {family}", (SPECS / f"{case}.yaml").read_text(), flags=re.M)
        path = folder / f"{case}.yaml"
        path.write_text(text)
    else:
        path = folder / "spec.json"
        path.write_text(json.dumps({**case, "mechanism": family}))
    return path


def solve_then_verify(spec: Path, solve: str, solved_under: str, verified_under: str, folder: Path) -> dict:
    """Solve ``spec`` under one configuration, verify its certificate under the other (asserted to hold),
    and return the certificate."""
    out = folder / "out"
    solved = _run(solved_under, solve, "solve", str(spec), "--out", str(out))
    assert solved.returncode == 0, solved.stderr[-2000:] + solved.stdout[-2000:]
    verified = _run(verified_under, CLI, "verify", str(out / "certificate.json"))
    assert verified.returncode == 0, (f"solved under {solved_under}, verified under {verified_under}:\n"
                                      + "\n".join(line for line in verified.stdout.splitlines()
                                                  if not line.startswith(("PASS", "N/A"))))
    return json.loads((out / "certificate.json").read_text())


# ------------------------------------------------------------------ the canonical basis, in process
def test_sum_zero_basis_by_hand():
    """Differences of the columns of I_3: rows D = (−1, 1, 0), (−1, 0, 1), DDᵀ = [[2, 1], [1, 2]] with
    eigenvalues 3 and 1; the right singular vectors Dᵀ(1, 1)/√6 = (−2, 1, 1)/√6 and Dᵀ(1, −1)/√2 =
    (0, 1, −1)/√2, signed so that their first nonzero entry is positive."""
    expected = np.array([[2, -1, -1], [0, 1, -1]]).T / np.sqrt([6.0, 2.0])
    np.testing.assert_allclose(span_of(np.eye(3), differences=True).basis(), expected, atol=1e-15)


def test_repeated_singular_value_gets_the_span_own_basis():
    """[R, R] for a rotation R of the first three coordinates of R^4 has the singular value √2 three times:
    whatever R and the order of the columns, the basis is that of the span {e1, e2, e3} itself (its echelon
    form is I, orthonormal already), to rounding (64·d·ε_mach)."""
    rng = np.random.default_rng(3)
    expected = np.eye(4)[:, :3]
    for _ in range(3):
        rotation = np.linalg.qr(rng.normal(size=(3, 3)))[0]
        matrix = np.vstack([np.hstack([rotation, rotation]), np.zeros((1, 6))])
        for order in (np.arange(6), rng.permutation(6)):
            np.testing.assert_allclose(span_of(matrix[:, order]).basis(), expected, atol=64 * 4 * np.finfo(float).eps)
    basis = span_of(rng.normal(size=(6, 3)) @ rng.normal(size=(3, 5))).basis()
    np.testing.assert_allclose(canonical_basis(basis @ np.linalg.qr(rng.normal(size=(3, 3)))[0]),
                               canonical_basis(basis), atol=64 * 6 * np.finfo(float).eps)


def test_rounded_columns_keep_their_numerical_rank():
    """(0.1, 0.3) is (1, 3)/10 up to binary rounding: the exact rank of the floats is 2, the numerical
    rank 1; the span is the numerical one, with the basis (1, 3)/√10."""
    space = span_of(np.array([[0.1, 1.0], [0.3, 3.0], [0.0, 0.0]]))
    assert space.rank == 1
    np.testing.assert_allclose(space.basis()[:, 0], np.array([1.0, 3.0, 0.0]) / np.sqrt(10), atol=1e-15)


def test_pivot_coordinates_by_hand():
    """Rows (1, −1, 0), (0, 1, −1), (1, 0, −1) span the sum-zero plane of R^3; its reduced row echelon form
    R = [[1, 0, −1], [0, 1, −1]] has pivot columns 0, 1 and RRᵀ = [[2, 1], [1, 2]], det 3: the Gram factor
    is √3. (0.1, 0.3, 0) and (1, 3, 0) read exactly are independent (0.1 is not 1/10 in binary)."""
    pivots = pivot_coordinates(np.array([[1.0, -1, 0], [0, 1, -1], [1, 0, -1], [-1, 1, 0]]))
    assert pivots.columns == (0, 1) and pivots.volume_factor == np.sqrt(3.0)
    np.testing.assert_array_equal(pivots.of(np.array([[2.0, -5, 3]])), [[2.0, -5]])
    assert pivot_coordinates(np.array([[0.1, 0.3, 0.0], [1.0, 3.0, 0.0]])).rank == 2


def test_hull_triangulation_does_not_depend_on_the_basis():
    """K = Hull(S) of table_3x4_margins_pure (rank 6, gift wrapping; its triangulation differed between
    OpenBLAS kernels, 6850 vs 6890 boundary simplices, when qhull saw orthonormal-basis coordinates): built
    from the span's basis B and from BQ, another orthonormal basis of the same span as LAPACK may return
    (Q a random rotation), the triangulation is the same array, and the volumes agree to rounding."""
    from dpopt.mechanisms.k_norm import HullBody
    from dpopt.problem import compile as compile_problem

    space = compile_problem(SPECS / "table_3x4_margins_pure.yaml").space
    vectors, basis = space.listed(), space.span.basis()
    rotation = np.linalg.qr(np.random.default_rng(5).normal(size=(basis.shape[1],) * 2))[0]
    one, other = HullBody(vectors, basis), HullBody(vectors, basis @ rotation)
    np.testing.assert_array_equal(one.polytope.simplices, other.polytope.simplices)
    assert one.volume == other.volume


# ------------------------------------------------------------------ solve and verify in two configurations
def test_every_family_has_a_case():
    assert sorted(CASES) == sorted(family_names())


@pytest.mark.parametrize("solved_under, verified_under", [
    DIRECTIONS[0], pytest.param(*DIRECTIONS[1], marks=pytest.mark.slow)])
def test_k_norm_ball_verifies_under_other_blas(solved_under, verified_under, tmp_path):
    spec = spec_file(kronecker_ball(6), "k_norm", tmp_path)
    cert = solve_then_verify(spec, CLI_BALL, solved_under, verified_under, tmp_path)
    assert cert["mechanism"]["parameters"]["norm_ball"] == "l1"


@pytest.mark.parametrize("family", SAMPLE)
def test_a_sample_of_families_verifies_under_default_blas(family, tmp_path):
    cert = solve_then_verify(spec_file(CASES[family], family, tmp_path), CLI, "single", "default", tmp_path)
    assert cert["mechanism"]["family"] == family


@pytest.mark.slow
@pytest.mark.parametrize("solved_under, verified_under", DIRECTIONS)
@pytest.mark.parametrize("family", sorted(CASES))
def test_every_family_verifies_under_other_blas(family, solved_under, verified_under, tmp_path):
    cert = solve_then_verify(spec_file(CASES[family], family, tmp_path), CLI, solved_under, verified_under,
                             tmp_path)
    assert cert["mechanism"]["family"] == family


@pytest.mark.slow
@pytest.mark.parametrize("solved_under, verified_under", DIRECTIONS)
def test_issue_reproduction_verifies_under_other_blas(solved_under, verified_under, tmp_path):
    """Issue 35: (age 30 levels, 3, 4, 2); the hull is not built: the l1 ball."""
    cert = solve_then_verify(spec_file(kronecker_ball(30), "k_norm", tmp_path), CLI, solved_under,
                             verified_under, tmp_path)
    assert cert["mechanism"]["parameters"]["norm_ball"] == "l1"
