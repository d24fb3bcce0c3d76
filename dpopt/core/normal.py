r"""The standard normal distribution and the error functions, on numpy and the standard library.

:func:`ndtr` (Φ), :func:`log_ndtr` (log Φ), :func:`ndtri` (Φ⁻¹), :func:`ndtri_exp` (Φ⁻¹ of e^y), :func:`erf`, :func:`erfc` and
:func:`erfcx` (:math:`e^{x^2}\operatorname{erfc} x`), with scipy.special's names and conventions,
so that a stage that needs only these does not import scipy (``dpopt verify`` of a Gaussian
certificate, whose start-up scipy's array-API layer would double). Each function takes a float
(and returns a float) or an array (and returns an array of its shape).

* erf, erfc, erfcx — W. J. Cody's rational Chebyshev approximations [1]_ (as in the SPECFUN
  routine CALERF [2]_): erf x = x·R₁(x²) for |x| ≤ 0.46875; erfcx x = R₂(x) for
  0.46875 < x ≤ 4; erfcx x = (1/√π − x⁻²R₃(x⁻²))/x beyond. Each rational function
  approximates its target to at least 18 significant digits [1]_, so a result is a few
  roundings away from the exact value; erfc x = e^{−x²} erfcx x with e^{−x²} evaluated as
  :math:`e^{-s^2}e^{-(x-s)(x+s)}`, s = x rounded to a multiple of 1/16 (s² is exact), so erfc
  keeps its relative accuracy down to its underflow (x ≈ 26.5). Negative arguments use erfc(−x) = 2 − erfc x
  and erfcx(−x) = 2e^{x²} − erfcx x. A float argument of erf and erfc goes to the C
  library's ``erf``/``erfc`` (:mod:`math`), of the same accuracy and faster for one value.
* Φ and log Φ — with t = x/√2, :math:`\Phi(x) = \tfrac12\operatorname{erfc}(-t)`;
  :math:`\log\Phi(x) = \operatorname{log1p}(-\tfrac12\operatorname{erfc} t)` for x ≥ −1,
  :math:`\log(\tfrac12\operatorname{erfc}(-t))` below, and
  :math:`\log\operatorname{erfcx}(-t) - \log 2 - t^2` once erfc(−t) would leave the normal
  numbers (x < −37.5). The rounding of t moves Φ(x) in the tails by a relative
  ≈ x²·2⁻⁵³ (8e-14 at x = −37), as in scipy's ``ndtr``; log Φ keeps a relative accuracy of a
  few units in the last place for x < 0.
* Φ⁻¹ — M. J. Wichura's algorithm AS 241 (PPND16) [3]_, rational approximations in
  p − ½ (|p − ½| ≤ 0.425) and in :math:`r = \sqrt{-\log\min(p, 1-p)}` beyond, accurate to
  about 1 part in 10¹⁶; Φ⁻¹(0) = −∞, Φ⁻¹(1) = ∞.

``tests/test_normal.py`` compares every function with mpmath at 50 digits over |x| ≤ 40
(and p down to 1e-300), and with scipy.special.

References
----------
.. [1] W. J. Cody, "Rational Chebyshev approximations for the error function", Math. Comp.
   23 (1969), 631–637.
.. [2] W. J. Cody, "Algorithm 715: SPECFUN — a portable FORTRAN package of special function
   routines and test drivers", ACM Trans. Math. Software 19 (1993), 22–32 (routine CALERF).
.. [3] M. J. Wichura, "Algorithm AS 241: the percentage points of the normal distribution",
   Applied Statistics 37 (1988), 477–484.

Examples
--------
>>> round(ndtr(1.959963984540054), 12)
0.975
>>> round(ndtri(0.975), 10)
1.9599639845
>>> round(log_ndtr(-40.0), 6)
-804.608442
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np

_SQRT1_2 = 0.7071067811865476  # 1/√2
_INV_SQRT_PI = 0.5641895835477563  # 1/√π
_LN2 = 0.6931471805599453
_LOG_SQRT_2PI = 0.9189385332046728  # log √(2π)
_CENTRAL = 0.46875
"""Cody's first break point: erf by R₁ below, erfcx by R₂ (then R₃ beyond 4) above."""
_ERFC_UNDERFLOW = 26.543
"""erfc x underflows (below the smallest normal double) beyond this x (Cody's XBIG)."""
_ERFCX_OVERFLOW = -26.628
"""erfcx x = 2e^{x²} − erfcx(−x) overflows below this x (Cody's XNEG)."""
_SQUARE_CAP = 32.0
"""Arguments of e^{±x²} are capped here (e^{−1024} = 0 and e^{1024} = ∞ in double precision),
so that the split below stays exact and x = ±∞ gives 0 or ∞ rather than ∞ − ∞."""
_ROUNDER = 1.5 * 2.0**52
"""(t + 1.5·2⁵²) − 1.5·2⁵² is t rounded to an integer, for |t| < 2⁵¹ (round to nearest)."""

# Cody (1969) via CALERF, each polynomial's coefficients from the highest degree down.
_ERF_NUM = (1.85777706184603153e-1, 3.16112374387056560e0, 1.13864154151050156e2,
            3.77485237685302021e2, 3.20937758913846947e3)
_ERF_DEN = (1.0, 2.36012909523441209e1, 2.44024637934444173e2, 1.28261652607737228e3,
            2.84423683343917062e3)
_ERFCX_MID_NUM = (2.15311535474403846e-8, 5.64188496988670089e-1, 8.88314979438837594e0,
                  6.61191906371416295e1, 2.98635138197400131e2, 8.81952221241769090e2,
                  1.71204761263407058e3, 2.05107837782607147e3, 1.23033935479799725e3)
_ERFCX_MID_DEN = (1.0, 1.57449261107098347e1, 1.17693950891312499e2, 5.37181101862009858e2,
                  1.62138957456669019e3, 3.29079923573345963e3, 4.36261909014324716e3,
                  3.43936767414372164e3, 1.23033935480374942e3)
_ERFCX_TAIL_NUM = (1.63153871373020978e-2, 3.05326634961232344e-1, 3.60344899949804439e-1,
                   1.25781726111229246e-1, 1.60837851487422766e-2, 6.58749161529837803e-4)
_ERFCX_TAIL_DEN = (1.0, 2.56852019228982242e0, 1.87295284992346047e0, 5.27905102951428412e-1,
                   6.05183413124413191e-2, 2.33520497626869185e-3)

# Wichura (1988), AS 241 PPND16, from the highest degree down.
_PPND_CENTRAL_NUM = (2.5090809287301226727e3, 3.3430575583588128105e4, 6.7265770927008700853e4,
                     4.5921953931549871457e4, 1.3731693765509461125e4, 1.9715909503065514427e3,
                     1.3314166789178437745e2, 3.3871328727963666080e0)
_PPND_CENTRAL_DEN = (5.2264952788528545610e3, 2.8729085735721942674e4, 3.9307895800092710610e4,
                     2.1213794301586595867e4, 5.3941960214247511077e3, 6.8718700749205790830e2,
                     4.2313330701600911252e1, 1.0)
_PPND_MID_NUM = (7.7454501427834140764e-4, 2.2723844989269184583e-2, 2.4178072517745061177e-1,
                 1.2704582524523683826e0, 3.6478483247632046050e0, 5.7694972214606914055e0,
                 4.6303378461565452959e0, 1.4234371107496835773e0)
_PPND_MID_DEN = (1.0507500716444168432e-9, 5.4759380849953449460e-4, 1.5198666563616457197e-2,
                 1.4810397642748007459e-1, 6.8976733498510000455e-1, 1.6763848301838038494e0,
                 2.0531916266377588219e0, 1.0)
_PPND_TAIL_NUM = (2.0103343992922881327e-7, 2.7115555687434875782e-5, 1.2426609473880784386e-3,
                  2.6532189526576123093e-2, 2.9656057182850489123e-1, 1.7848265399172913358e0,
                  5.4637849111641143699e0, 6.6579046435011037772e0)
_PPND_TAIL_DEN = (2.0442631033899397856e-15, 1.4215117583164458887e-7, 1.8463183175100546818e-5,
                  7.8686913114561325910e-4, 1.4875361290850614853e-2, 1.3692988092273580531e-1,
                  5.9983220655588793769e-1, 1.0)


def _horner(coefficients: Sequence[float], x):
    """The polynomial with these coefficients (highest degree first) at x (a float or an array;
    an array's steps run in place)."""
    if isinstance(x, np.ndarray):
        value = np.full_like(x, coefficients[0])
        for c in coefficients[1:]:
            value *= x
            value += c
        return value
    value = coefficients[0]
    for c in coefficients[1:]:
        value = value * x + c
    return value


def _rational(num: Sequence[float], den: Sequence[float], x):
    return _horner(num, x) / _horner(den, x)


# ----------------------------------------------------------------- the three regions of Cody
def _erf_central(x):
    """erf x for |x| ≤ 0.46875."""
    return x * _rational(_ERF_NUM, _ERF_DEN, x * x)


def _erfcx_mid(y):
    """erfcx y for 0.46875 < y ≤ 4."""
    return _rational(_ERFCX_MID_NUM, _ERFCX_MID_DEN, y)


def _erfcx_tail(y):
    """erfcx y for y > 4 (1/(y√π) once y⁻² is below the rounding of 1/√π)."""
    z = 1.0 / (y * y)
    return (_INV_SQRT_PI - z * _rational(_ERFCX_TAIL_NUM, _ERFCX_TAIL_DEN, z)) / y


def _exp_square(y, sign: float, exp: Callable):
    r""":math:`e^{\pm y^2}` for 0 ≤ y ≤ 32 as :math:`e^{\pm s^2}e^{\pm(y-s)(y+s)}`, with s = y rounded
    to a multiple of 1/16: s² is exact, and |(y − s)(y + s)| ≤ 4 carries the rounding of y² alone
    (Cody's split, with ⌊16y⌋ rounded to nearest instead)."""
    s = ((16.0 * y + _ROUNDER) - _ROUNDER) / 16.0
    return exp(sign * s * s) * exp(sign * (y - s) * (y + s))


# ----------------------------------------------------------------- float and array evaluation
def _erfcx_float(x: float) -> float:
    y = abs(x)
    if y <= _CENTRAL:
        return math.exp(x * x) * (1.0 - _erf_central(x))
    value = _erfcx_mid(y) if y <= 4.0 else _erfcx_tail(y)
    if x >= 0.0:
        return value
    if x < _ERFCX_OVERFLOW:
        return math.inf
    return 2.0 * _exp_square(y, 1.0, math.exp) - value


def _erfcx_outer(y: np.ndarray) -> np.ndarray:
    """erfcx y elementwise, valid where y > 0.46875 (R₂ up to 4, R₃ beyond; 0 at y = ∞)."""
    value = _erfcx_mid(y)
    tail = y > 4.0
    if tail.any():
        value[tail] = _erfcx_tail(y[tail])
    return value


def _exp_square_array(y: np.ndarray, sign: float) -> np.ndarray:
    """:func:`_exp_square` elementwise, of y capped at 32 (so e^{−∞} = 0 and e^{∞} = ∞)."""
    return _exp_square(np.minimum(y, _SQUARE_CAP), sign, np.exp)


def _erfc_array(x: np.ndarray) -> np.ndarray:
    y = np.abs(x)
    value = _erfcx_outer(y) * _exp_square_array(y, -1.0)
    central = y <= _CENTRAL
    value[central] = 1.0 - _erf_central(x[central])
    negative = (x < 0.0) & ~central
    value[negative] = 2.0 - value[negative]
    return value


def _erf_array(x: np.ndarray) -> np.ndarray:
    y = np.abs(x)
    value = np.copysign(1.0 - _erfcx_outer(y) * _exp_square_array(y, -1.0), x)
    central = y <= _CENTRAL
    value[central] = _erf_central(x[central])
    return value


def _erfcx_array(x: np.ndarray) -> np.ndarray:
    y = np.abs(x)
    value = _erfcx_outer(y)
    central = y <= _CENTRAL
    xc = x[central]
    value[central] = np.exp(xc * xc) * (1.0 - _erf_central(xc))
    negative = (x < 0.0) & ~central
    value[negative] = 2.0 * _exp_square_array(y[negative], 1.0) - value[negative]  # ∞ below −26.628
    return value


def _as_array(x) -> np.ndarray:
    return np.asarray(x, dtype=float)


def _is_float(x) -> bool:
    return isinstance(x, (float, int)) or np.ndim(x) == 0


# ----------------------------------------------------------------- error functions
def erf(x):
    r"""The error function :math:`\operatorname{erf} x = \frac{2}{\sqrt\pi}\int_0^x e^{-t^2}\,dt`.

    A float goes to the C library (:func:`math.erf`), an array to Cody's approximations (module
    docstring).

    Examples
    --------
    >>> round(erf(1.0), 15)
    0.842700792949715
    """
    if _is_float(x):
        return math.erf(float(x))
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        return _erf_array(_as_array(x))


def erfc(x):
    r"""The complementary error function :math:`\operatorname{erfc} x = 1 - \operatorname{erf} x`.

    A float goes to the C library (:func:`math.erfc`), an array to Cody's approximations (module
    docstring). Beyond x ≈ 26.5 the value is a subnormal number, then 0.

    Examples
    --------
    >>> erfc(10.0)
    2.088487583762545e-45
    """
    if _is_float(x):
        return math.erfc(float(x))
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        return _erfc_array(_as_array(x))


def erfcx(x):
    r"""The scaled complementary error function :math:`\operatorname{erfcx} x = e^{x^2}\operatorname{erfc} x`.

    Cody's approximations (module docstring), floats and arrays alike: about 1/(x√π) for large
    x, with full relative accuracy where :math:`e^{x^2}` and erfc x alone would overflow and
    underflow; ∞ below x = −26.628.

    Examples
    --------
    >>> round(erfcx(30.0) * 30.0 * math.sqrt(math.pi), 12)  # 1 − 1/(2x²) + 3/(4x⁴) − … at x = 30
    0.999445367808
    """
    if _is_float(x):
        x = float(x)
        return x if math.isnan(x) else _erfcx_float(x)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        return _erfcx_array(_as_array(x))


# ----------------------------------------------------------------- the normal distribution
def ndtr(x):
    r"""The standard normal CDF :math:`\Phi(x) = \tfrac12\operatorname{erfc}(-x/\sqrt2)`.

    erfc keeps the relative accuracy of the lower tail; the upper one is 1 − ½ erfc(x/√2)
    (module docstring).

    Examples
    --------
    >>> ndtr(0.0)
    0.5
    >>> print(f"{ndtr(-10.0):.10e}")
    7.6198530242e-24
    """
    if _is_float(x):
        return 0.5 * math.erfc(-float(x) * _SQRT1_2)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        return 0.5 * _erfc_array(_as_array(x) * -_SQRT1_2)


_LOG_NDTR_SCALED_BELOW = -_ERFC_UNDERFLOW / _SQRT1_2
"""Below this x (≈ −37.5), erfc(−x/√2) is no longer a normal number: log Φ goes through erfcx."""


def log_ndtr(x):
    r"""log Φ(x), accurate in both tails (−x²/2 − log(−x√(2π)) + … as x → −∞).

    With t = x/√2: :math:`\operatorname{log1p}(-\tfrac12\operatorname{erfc} t)` for x ≥ −1,
    :math:`\log(\tfrac12\operatorname{erfc}(-t))` down to x ≈ −37.5 (where erfc(−t) is still a
    normal number), :math:`\log\operatorname{erfcx}(-t) - \log 2 - t^2` below.

    Examples
    --------
    >>> round(log_ndtr(0.0), 15)  # log ½
    -0.693147180559945
    >>> round(log_ndtr(-40.0), 6)
    -804.608442
    """
    if _is_float(x):
        x = float(x)
        t = x * _SQRT1_2
        if x >= -1.0 or math.isnan(x):
            return math.log1p(-0.5 * math.erfc(t))
        if x > _LOG_NDTR_SCALED_BELOW:
            return math.log(0.5 * math.erfc(-t))
        return -math.inf if x == -math.inf else math.log(_erfcx_float(-t)) - _LN2 - t * t
    x = _as_array(x)
    t = x * _SQRT1_2
    with np.errstate(over="ignore", under="ignore", invalid="ignore", divide="ignore"):
        lower = x < -1.0
        half_tail = 0.5 * _erfc_array(np.where(lower, -t, t))  # ½ erfc(|t|) = Φ(−|x|)
        value = np.where(lower, np.log(half_tail), np.log1p(-half_tail))
        far = x <= _LOG_NDTR_SCALED_BELOW
        tf = t[far]
        value[far] = np.log(_erfcx_array(-tf)) - _LN2 - tf * tf
    return value


def _ndtri_outer(r):
    """Φ⁻¹(1 − q) for q < ½ − 0.425 given r = √(−log q): AS 241's rational functions in r − 1.6
    (r ≤ 5) and r − 5, elementwise for an array."""
    if isinstance(r, float):
        if r <= 5.0:
            return _rational(_PPND_MID_NUM, _PPND_MID_DEN, r - 1.6)
        return _rational(_PPND_TAIL_NUM, _PPND_TAIL_DEN, r - 5.0)
    return np.where(r <= 5.0, _rational(_PPND_MID_NUM, _PPND_MID_DEN, r - 1.6),
                    _rational(_PPND_TAIL_NUM, _PPND_TAIL_DEN, r - 5.0))


def ndtri(p):
    r"""The standard normal quantile :math:`\Phi^{-1}(p)` (Wichura's AS 241; module docstring).

    Φ⁻¹(0) = −∞, Φ⁻¹(1) = ∞, NaN outside [0, 1].

    Examples
    --------
    >>> round(ndtri(0.5), 15)
    0.0
    >>> round(ndtri(1e-300), 10)
    -37.0470962994
    """
    if _is_float(p):
        p = float(p)
        if not 0.0 < p < 1.0:
            return -math.inf if p == 0.0 else (math.inf if p == 1.0 else math.nan)
        q = p - 0.5
        if abs(q) <= 0.425:
            return q * _rational(_PPND_CENTRAL_NUM, _PPND_CENTRAL_DEN, 0.180625 - q * q)
        z = _ndtri_outer(math.sqrt(-math.log(min(p, 1.0 - p))))
        return -z if q < 0 else z
    p = _as_array(p)
    q = p - 0.5
    out = np.full_like(p, np.nan)
    central = np.abs(q) <= 0.425
    qc = q[central]
    out[central] = qc * _rational(_PPND_CENTRAL_NUM, _PPND_CENTRAL_DEN, 0.180625 - qc * qc)
    outer = (np.abs(q) > 0.425) & (p > 0.0) & (p < 1.0)
    po, qo = p[outer], q[outer]
    z = _ndtri_outer(np.sqrt(-np.log(np.minimum(po, 1.0 - po))))
    out[outer] = np.where(qo < 0, -z, z)
    out[p == 0.0] = -np.inf
    out[p == 1.0] = np.inf
    return out


_NEWTON_STEPS = 100
"""Most Newton steps of :func:`ndtri_exp` (from AS 241's start it takes fewer than 10)."""


def ndtri_exp(y: np.ndarray) -> np.ndarray:
    r"""Φ⁻¹(e^y) for y ≤ 0 (scipy.special's ``ndtri_exp``): the quantile of a probability given as its log,
    well past the underflow of e^y.

    Newton's method on g(x) = log Φ(x) − y (:func:`log_ndtr`), with g′(x) = φ(x)/Φ(x) =
    exp(−x²/2 − log√(2π) − log Φ(x)). Φ is log-concave, so g is concave and increasing: every
    tangent lies above g, hence after the first step the iterates increase monotonically to the
    root from below, from any start. The start is AS 241 (:func:`ndtri`) with r = √(−y) taken from the
    log directly in its lower outer range, r = √(−log(−expm1 y)) in the upper one, Φ⁻¹(e^y) in the central one. The steps stop when
    none moves an entry by more than 2⁻⁵¹(|x| + 1). The error is then that of :func:`log_ndtr` divided by
    g′ ≥ min(0.797, |x|) (x ≤ 0): a few units in the last place of (|x| + 1).
    ``tests/test_normal.py`` compares it with mpmath at 50 digits.

    Examples
    --------
    >>> round(float(ndtri_exp(np.array([math.log(0.025)]))[0]), 12)
    -1.959963984540
    >>> round(float(ndtri_exp(np.array([-1e6]))[0]), 6)
    -1414.204472
    """
    y = _as_array(y)
    with np.errstate(over="ignore", under="ignore", invalid="ignore", divide="ignore"):
        lower, upper = y < math.log(0.075), y > math.log1p(-0.075)  # AS 241's outer ranges: |p − ½| > 0.425
        x = np.where(lower, -_ndtri_outer(np.sqrt(-np.where(lower, y, -1.0))), ndtri(np.exp(np.minimum(y, 0.0))))
        q = -np.expm1(np.where(upper, y, -1.0))  # 1 − p, exact where p is near 1
        x = np.where(upper, _ndtri_outer(np.sqrt(-np.log(q))), x)
        for _ in range(_NEWTON_STEPS):
            log_phi = log_ndtr(x)
            step = (y - log_phi) / np.exp(-0.5 * x * x - _LOG_SQRT_2PI - log_phi)
            step = np.where(np.isfinite(step), step, 0.0)
            x = x + step
            if np.all(np.abs(step) <= 2.0**-51 * (np.abs(x) + 1.0)):
                break
        x[y == 0.0] = math.inf
        x[y == -math.inf] = -math.inf
        x[np.isnan(y) | (y > 0)] = math.nan
    return x
