"""Every example spec's certificate values against the golden snapshot (to 1e-12 relative).

The snapshot ``tests/golden/certificates.json`` is built by
``PYTHONPATH=$PWD python tests/golden/build_golden.py`` (see its docstring); a change
meant to alter a calibration regenerates it, a speed-up must not. Specs whose solve took
more than 5 s when the snapshot was built run only in the slow-marked variant.
"""

from __future__ import annotations

import importlib.util
import json
import math
from fractions import Fraction
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GOLDEN_DIR = ROOT / "tests" / "golden"
GOLDEN = json.loads((GOLDEN_DIR / "certificates.json").read_text())
_spec = importlib.util.spec_from_file_location("build_golden", GOLDEN_DIR / "build_golden.py")
build_golden = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(build_golden)

REL = 1e-12
DIAGNOSTIC_REL = 1e-6
"""Solver diagnostics (an SDP's duality gap, ~1e-7) are residuals of the solver's path, not
calibrated values: an input change in the 15th digit moves their 8th, so they are
compared loosely. So is a Kronecker design's ``lattice_rounding_ratio``: its reference error rounds the continuous
factors at 2^30 (``kronecker_lattice.unrounded_error``), and a factor entry that moves in its 14th digit with the
OpenBLAS kernel (Haswell against SkylakeX) flips a rint there: 1.06e-8 relative on an AMD EPYC (Haswell kernels)
against the snapshot, with every calibrated value of the design (scales, divisors, μ², the error) unchanged."""
DIAGNOSTIC_KEYS = ("duality_gap", "lattice_rounding_ratio")
"""Keys (by their last part) compared at :data:`DIAGNOSTIC_REL`."""
MINIMISER_REL = {"parameters": 1e-4, "utility": 1e-7}
"""R²DP's second fold is a minimiser's end point: an LP over a grid, then a Nelder–Mead polish
of the two atoms (``dpopt.optimize.r2dp_lp._two_atoms``) on a cost that is flat at its
minimum. numpy's vectorised exp/log round differently in their last bit on CPUs with
AVX-512 and without, which moves that end point: 1.6e-6 relative in the atoms and weights
and 4.2e-9 in the cost (``r2dp_histogram_kl``, measured against the snapshot with
``NPY_DISABLE_CPU_FEATURES`` naming the AVX-512 features, which reproduces it exactly).
The family's values are compared at 1e-4 and 1e-7, over 20× that spread; its privacy is
certified exactly for whatever atoms it ends at."""
MINIMISER_FAMILIES = ("r2dp", "kronecker_laplace")
"""Families whose parameters are a minimiser's end point compared at :data:`MINIMISER_REL`: R²DP (above) and
``kronecker_laplace``, whose strategy is where L-BFGS-B stops on p-Identity factors and marginal weights (a
cost flat at its minimum; the last bits of vectorised numpy move that end point as for R²DP). Its privacy is
certified exactly (Δ₁ in rationals) for whatever strategy it ends at."""
GAP_FACTOR = 10
"""A snapshot that records an SDP's ``duality_gap`` has values known only to that gap (a plan allocates
its budget from each query's design): its utility and parameters are compared at 10 × the largest recorded
relative gap when that exceeds ``REL`` (census_plan_gdp's gaussian_optimal query has a gap of 3.5e-10
relative; its plan utility moved by 9e-12 and another query's σ by 1.9e-12 between
machines). So has a convex program's ``optimality_gap`` ((objective − the solver's dual bound)/objective):
marginals_8attr_table_goals records 9.7e-7, and on Haswell kernels its utility moved by 9.7e-9 and its tables'
errors by up to 4.1e-7 relative."""
GAP_KEYS = ("duality_gap", "optimality_gap")
"""Keys (by their last part) whose recorded gap sets the tolerance of :data:`GAP_FACTOR`."""
SDP_POINT_FACTOR = 5
"""An SDP's optimal covariance is pinned down only to O(√gap) where the objective is flat (quadratic growth
around the optimum): census_plan_gdp's covariance entries moved by 2.6e-6 relative between machines at a
recorded gap of 3.5e-10 (√gap = 1.9e-5). The values under the key prefix of a design that records a
``duality_gap`` (its point and what is computed from it) are compared at 5·√gap relative, its covariance
entries relative to the largest entry (round-off zeros, ~1e-15, have no relative digits) and the gap itself
to 5·√gap absolute; the utility stays at 10 × the gap (above), and the privacy is certified exactly for
whatever covariance the solver ends at."""
EXACT_OF_FLOATS = {"strategy_sensitivity_squared": 2, "mu_sigma_squared": 1}
"""Exact values computed from recorded floats, and the power of those floats they scale with: a Kronecker
strategy's Δ₂(A)² is the exact rational of its float factors, which come from eigendecompositions that round
differently in their last bits with another OpenBLAS kernel (1e-14 relative with the Haswell kernels against
the SkylakeX ones, same numpy and OpenBLAS: ``OPENBLAS_CORETYPE`` reproduces it), so its digits differ. It
is compared as the number it is: σ ∝ √Δ₂² is compared at the tolerance of its parameters, so Δ₂² at twice it.
A marginal design's μ_Σ² = max_δ δᵀGδ is the exact rational of its float coefficients a_T (G linear in 1/a_T), so
at once the tolerance of the a_T."""
UTILITY_REL = {"ci_volume": 1e-10}
"""The confidence-region volume of an optimised covariance is ill-conditioned in σ: it
goes through log det Σ of a covariance with condition number ~1e4 (age_summary_ci_volume),
so a 1e-14 relative change of the target μ (within the 3e-14 a certified Gaussian
calibration may move) moves it by ~1e-11."""


def _params(slow: bool):
    marks = (pytest.mark.slow,) if slow else ()
    return [pytest.param(name, marks=marks, id=name)
            for name, row in sorted(GOLDEN.items()) if row["slow"] == slow]


def test_every_spec_has_a_golden_row():
    assert sorted(GOLDEN) == sorted(p.name for p in (ROOT / "specs").glob("*.yaml"))


def _same(expected, got, rel: float = REL, scale: float = 0.0) -> bool:
    if isinstance(expected, bool) or not isinstance(expected, (int, float)):
        return expected == got
    if isinstance(got, bool) or not isinstance(got, (int, float)):
        return False
    return math.isclose(expected, got, rel_tol=rel, abs_tol=rel * scale) or expected == got


def _compare(name: str):
    expected = GOLDEN[name]
    got = build_golden.solve_snapshot(ROOT / "specs" / name)
    assert got["family"] == expected["family"]
    assert got["utility"]["metric"] == expected["utility"]["metric"]
    minimiser = got["family"] in MINIMISER_FAMILIES
    rel = MINIMISER_REL["utility"] if minimiser else UTILITY_REL.get(got["utility"]["metric"], REL)
    known_to = GAP_FACTOR * max((abs(v) for k, v in expected["parameters"].items() if k.endswith(GAP_KEYS)),
                                default=0.0)
    rel = max(rel, known_to)
    assert _same(expected["utility"]["value"], got["utility"]["value"], rel), (
        expected["utility"], got["utility"])
    assert sorted(got["parameters"]) == sorted(expected["parameters"])
    default = max(MINIMISER_REL["parameters"] if minimiser else REL, known_to)
    sdp_point = {k.rsplit("design.duality_gap", 1)[0]: SDP_POINT_FACTOR * math.sqrt(abs(v))
                 for k, v in expected["parameters"].items() if k.endswith("design.duality_gap")}

    def tolerance(key: str) -> tuple[float, float]:
        for prefix, tol in sdp_point.items():
            if key.startswith(prefix + "design.duality_gap"):
                return tol, 1.0
            if key.startswith(prefix) and "covariance" not in key:
                return max(default, tol), 0.0
            if key.startswith(prefix + "covariance"):
                entries = [abs(v) for k, v in expected["parameters"].items() if k.startswith(prefix + "covariance")]
                return max(default, tol), max(entries)
        return (DIAGNOSTIC_REL if key.endswith(DIAGNOSTIC_KEYS) else default), 0.0

    def same(key: str, value, found) -> bool:
        power = EXACT_OF_FLOATS.get(key.split(".")[-1])
        if power is None or not isinstance(value, str):
            return _same(value, found, *tolerance(key))
        return isinstance(found, str) and _same(float(Fraction(value)), float(Fraction(found)), power * default)

    differ = {k: (v, got["parameters"][k]) for k, v in expected["parameters"].items()
              if not same(k, v, got["parameters"][k])}
    assert not differ, differ


@pytest.mark.parametrize("name", _params(slow=False))
def test_certificate_values_unchanged(name):
    _compare(name)


@pytest.mark.parametrize("name", _params(slow=True))
def test_certificate_values_unchanged_slow(name):
    _compare(name)
