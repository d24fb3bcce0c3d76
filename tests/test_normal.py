"""The normal distribution and error functions of :mod:`dpopt.core.normal`, against mpmath and scipy.

Reference values are mpmath's at 50 significant digits (``mpmath.erf``, ``erfc``, ``ncdf``; Φ⁻¹
as the root of ``ncdf(z) = p``, found by ``findroot``), over x ∈ [−40, 40] (every region and
break point of the approximations) and p ∈ [1e-300, 1 − 1e-16]. scipy.special is the published
reference of the same functions and conventions.

Tolerances, in units u = 2⁻⁵³ of the relative rounding:

* ``EVAL`` = 48u, the floating-point evaluation of a rational approximation. The rational
  functions themselves are within 1e-18 of their targets (Cody 1969; Wichura 1988: about 1e-16
  for AS 241), below u; a Horner sum of degree n ≤ 8 costs at most γ_2n ≈ 16u when its terms
  share a sign (Higham, *Accuracy and Stability of Numerical Algorithms*, 2002, eq. 5.3), so
  numerator, denominator, the division, the two exponentials of e^{−x²} and the products
  stay within 48u. A float argument of erf and erfc goes to the C library, whose documented
  errors (a few units: glibc manual, "Errors in Math Functions") are within it too.
* Φ(x) and log Φ(x) are computed from t = x/√2, rounded (relative 1.5u: the constant and the
  product); a relative change ε of t changes erfc(t) by a relative at most (1 + 2t²)ε
  = (1 + x²)ε, hence ``EVAL + 2u(1 + x²)`` for Φ(−|x|). log Φ adds the rounding of the
  logarithm (and of t² for x < −37.5); for x ≥ −1, log1p(−v) with v = Φ(−x) ≤ Φ(1) has a
  relative condition 1/(1 − v) ≤ 6.3.
* scipy's erfc and erfcx take e^{∓x²} from the rounded x² (a relative error up to x²u), which
  its comparisons add.
"""

from __future__ import annotations

import functools
import math

import mpmath
import numpy as np
import pytest
from scipy import special

from dpopt.core import normal

U = 2.0 ** -53
EVAL = 48 * U
X = np.unique(np.concatenate([
    np.linspace(-40.0, 40.0, 4001),
    [b * s for b in (0.46875, 4.0, 26.543, 26.628, 37.5, 1.0, 0.5 ** 0.5) for s in (1, -1)],
    [np.nextafter(b, s * np.inf) * s for b in (0.46875, 4.0) for s in (1, -1)],
    [1e-300, -1e-300, 1e-9, -1e-9, 0.0],
]))
P = np.unique(np.concatenate([
    np.logspace(-300, math.log10(0.5), 1501),
    1.0 - np.logspace(-16, math.log10(0.5), 301),
    [0.075, 0.925, np.nextafter(0.075, 1.0), np.nextafter(0.925, 0.0), math.exp(-25.0)],
]))


def _mp(fn, values):
    with mpmath.workdps(50):
        return [fn(mpmath.mpf(float(v))) for v in values]


def _ref(fn, values) -> np.ndarray:
    return np.array([float(v) for v in _mp(fn, values)])


@functools.cache
def reference(name: str) -> np.ndarray:
    """The 50-digit mpmath value of ``name`` at every X (computed when a test first asks, not at collection)."""
    return _ref(REFERENCE_FUNCTIONS[name], X)


REFERENCE_FUNCTIONS = {
    "erf": mpmath.erf,
    "erfc": mpmath.erfc,
    "erfcx": lambda v: mpmath.exp(v * v) * mpmath.erfc(v),
    "ndtr": mpmath.ncdf,
    "log_ndtr": lambda v: mpmath.log(mpmath.ncdf(v)) if v < 0 else mpmath.log1p(-mpmath.ncdf(-v)),
}
NORMAL_NUMBER = np.finfo(float).tiny


def _ndtri_ref(p: float) -> float:
    with mpmath.workdps(50):
        target = mpmath.mpf(p)
        start = float(special.ndtri(p))  # a starting point only; the root is mpmath's
        return float(mpmath.findroot(lambda z: mpmath.ncdf(z) - target, start))


@functools.cache
def p_reference() -> np.ndarray:
    """Φ⁻¹ at every P by mpmath's root finder (when a test first asks)."""
    return np.array([_ndtri_ref(float(p)) for p in P])


def _phi_tolerance(x: np.ndarray) -> np.ndarray:
    """Relative error bound of Φ(−|x|) = ½ erfc(|x|/√2) (module docstring)."""
    return EVAL + 2 * U * (1 + x * x)


def _log_ndtr_tolerance(x: np.ndarray, value: np.ndarray) -> np.ndarray:
    """Absolute error bound of log Φ(x) (module docstring)."""
    tolerance = _phi_tolerance(x)
    lower = x < -1.0
    tolerance[lower] += 4 * U * np.abs(value[lower])
    tolerance[~lower] *= 6.5 * np.abs(value[~lower])
    return tolerance


def _check(values: np.ndarray, reference: np.ndarray, tolerance, at: np.ndarray) -> None:
    """|values − reference| ≤ tolerance (absolute, elementwise) where the reference is a finite normal
    number, and the same value (0, ±∞) elsewhere; ``at`` the arguments, for the message."""
    keep = np.isfinite(reference) & (np.abs(reference) >= NORMAL_NUMBER)
    error = np.abs(values[keep] - reference[keep])
    bound = np.broadcast_to(tolerance, reference.shape)[keep]
    worst = int(np.argmax(error / bound))
    assert np.all(error <= bound), f"at {at[keep][worst]!r}: error {error[worst]:.3g} > {bound[worst]:.3g}"
    infinite = np.isinf(reference)
    assert np.array_equal(values[infinite], reference[infinite])


def _both_paths(name: str, values: np.ndarray):
    fn = getattr(normal, name)
    return fn(values), np.array([fn(float(v)) for v in values])


@pytest.mark.parametrize("name", ["erf", "erfc", "erfcx"])
def test_error_functions_against_mpmath(name):
    ref = reference(name)
    for values in _both_paths(name, X):
        _check(values, ref, EVAL * np.abs(ref), X)


def test_ndtr_against_mpmath():
    for values in _both_paths("ndtr", X):
        _check(values, reference("ndtr"), _phi_tolerance(X) * reference("ndtr"), X)


def test_log_ndtr_against_mpmath():
    ref = reference("log_ndtr")
    for values in _both_paths("log_ndtr", X):
        _check(values, ref, _log_ndtr_tolerance(X, ref), X)


def test_log_ndtr_far_tail_against_mpmath():
    # below x ≈ −37.5 erfc underflows: the erfcx route, down to x = −1e100
    x = -np.logspace(math.log10(37.0), 100, 200)
    ref = _ref(lambda v: mpmath.log(mpmath.ncdf(v)), x)
    for values in _both_paths("log_ndtr", x):
        _check(values, ref, _log_ndtr_tolerance(x, ref), x)


def test_ndtri_against_mpmath():
    for values in _both_paths("ndtri", P):
        _check(values, p_reference(), EVAL * np.abs(p_reference()), P)
        assert values[P == 0.5] == 0.0


@pytest.mark.parametrize("name, scipy_extra", [
    ("erf", 0.0), ("erfc", 1.0), ("erfcx", 1.0), ("ndtr", 0.0), ("log_ndtr", 0.0)])
def test_against_scipy(name, scipy_extra):
    ours, theirs = getattr(normal, name)(X), getattr(special, name)(X)
    with np.errstate(invalid="ignore"):  # ∞ − ∞ where both are infinite, left out below
        error = np.abs(ours - theirs)
    if name == "log_ndtr":
        bound = 2 * _log_ndtr_tolerance(X, theirs)
    else:
        own = _phi_tolerance(X) if name == "ndtr" else EVAL + scipy_extra * U * X * X
        bound = 2 * own * np.abs(theirs)
    keep = np.isfinite(theirs) & (np.abs(theirs) >= NORMAL_NUMBER)
    assert np.all(error[keep] <= bound[keep])
    # elsewhere the same ±∞ or NaN, or both below the normal numbers (scipy flushes to 0 what the
    # Cody/C-library routes still give as a subnormal number)
    tiny = (np.abs(ours) < NORMAL_NUMBER) & (np.abs(theirs) < NORMAL_NUMBER)
    assert np.all(((ours == theirs) | (np.isnan(ours) & np.isnan(theirs)) | tiny)[~keep])


def test_ndtri_against_scipy():
    theirs = special.ndtri(P)
    assert np.all(np.abs(normal.ndtri(P) - theirs) <= 2 * EVAL * np.abs(theirs) + EVAL * (theirs == 0))


@pytest.mark.parametrize("name", ["erf", "erfc", "erfcx", "ndtr", "log_ndtr", "ndtri"])
def test_special_values_as_scipy(name):
    # ±∞, NaN, signed zeros, subnormal arguments and the edges of the domains
    values = np.array([-np.inf, np.inf, np.nan, 0.0, -0.0, 1e-320, -1e-320, -1e200, 1e200, 0.5, 1.0, -1.0, 2.0])
    with np.errstate(all="ignore"):
        expected = getattr(special, name)(values)
    fn = getattr(normal, name)
    np.testing.assert_allclose(fn(values), expected, rtol=EVAL, atol=0)
    np.testing.assert_allclose([fn(float(v)) for v in values], expected, rtol=EVAL, atol=0)


@pytest.mark.parametrize("name", ["erf", "erfc", "erfcx", "ndtr", "log_ndtr", "ndtri"])
def test_shapes_and_types(name):
    fn = getattr(normal, name)
    assert isinstance(fn(0.25), float) and isinstance(fn(np.float64(0.25)), float)
    assert isinstance(fn(np.array(0.25)), float)
    grid = np.full((2, 3), 0.25)
    assert fn(grid).shape == (2, 3) and fn(grid).dtype == np.float64
    assert fn([0.25, 0.75]).shape == (2,)
    assert fn(np.array([])).shape == (0,)


def test_ndtri_exp_against_mpmath():
    """Φ⁻¹(e^y) to 8u(|x| + 1), the bound the discrete Gaussian's certified GDP slope budgets for it
    (dpopt.privacy.discrete_gaussian_gdp._increment_error). Reference: y = log Φ(t) rounded to a float at
    points t from −10⁴ to 8, and its exact root x* = t + (y − log Φ(t))/(φ(t)/Φ(t)) by one Newton step in
    50 digits (the step corrects an error of ~10⁻¹⁶|t|, leaving ~10⁻³²)."""
    t = np.concatenate([-np.logspace(4, -3, 200), np.linspace(0.0, 8.0, 60)])
    with mpmath.workdps(50):
        log_phi = [mpmath.log1p(-mpmath.ncdf(-mpmath.mpf(v))) if v > 0 else mpmath.log(mpmath.ncdf(mpmath.mpf(v)))
                   for v in t]
        y = np.array([float(v) for v in log_phi])
        ref = np.array([float(mpmath.mpf(v) + (mpmath.mpf(w) - lp) * mpmath.ncdf(v) / mpmath.npdf(v))
                        for v, w, lp in zip(t, y, log_phi)])
    values = normal.ndtri_exp(y)
    _check(values, ref, 8 * 2.0**-53 * (np.abs(ref) + 1), y)
    assert normal.ndtri_exp(np.array([0.0, -np.inf]))[0] == np.inf and normal.ndtri_exp(np.array([-np.inf]))[0] == -np.inf
