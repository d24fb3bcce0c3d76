r"""Region volumes beyond the double range: carried as natural logarithms, estimated from rescaled terms.

The 1 − α region of d i.i.d. N(0, σ²) coordinates has volume :math:`V_d\,(\sigma^2 t)^{d/2}`,
:math:`V_d = \pi^{d/2}/\Gamma(d/2 + 1)`, t the χ²_d quantile: at σ = 1 it passes the largest double
(≈ 1.8·10³⁰⁸, e^709.78) near d = 485. Every volume a ``ci_volume`` prediction compares is therefore carried as
its logarithm (log Γ by ``math.lgamma``, never Γ itself: :func:`~dpopt.stats.inference.log_ci_volume`), and
exponentiated only for display (:func:`exp_or_inf`).

A Monte Carlo of a volume draws terms whose mean is the volume, and such terms (importance weights, or the
volume times an indicator over the coverage) are as large as the volume: their squares overflow near 10¹⁵⁴ and the
terms themselves at 10³⁰⁸. Here the terms come in units of :math:`e^{L}` (:class:`VolumeTerms`: L the region's
log-volume, the terms O(1)), and :func:`scaled_mean` rescales them once more by a power of two (exact in binary
floating point, so the mean and standard error of terms that do not overflow are bit for bit those computed
directly) before the mean and the standard error are formed: both are finite, and the estimate is returned as
(log of the mean, standard error relative to the mean).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

LOG_DOUBLE_MAX = math.log(np.finfo(float).max)
"""log of the largest double, ≈ 709.78: a volume above e^LOG_DOUBLE_MAX is +inf in floating point."""


def exp_or_inf(log_value: float) -> float:
    """e^``log_value``: +inf beyond the double range, 0.0 below it (no OverflowError)."""
    return math.inf if log_value > LOG_DOUBLE_MAX else math.exp(log_value)


@dataclass(frozen=True)
class VolumeTerms:
    """Monte Carlo terms of a region's volume in units of e^``log_unit``: the volume is e^log_unit × E[term],
    so that the terms stay finite whatever the volume (module docstring)."""

    log_unit: float
    terms: np.ndarray


def scaled_moments(terms: np.ndarray) -> tuple[float, float, int]:
    """(m, s, e): the mean m and the standard error s of the mean of ``terms``·2^-e, e the exponent with
    max|terms| < 2^e (0 when every term is 0): the mean is m·2^e and its SE s·2^e, and as dividing by a power of
    two is exact the two are those of the unscaled terms bit for bit wherever these do not overflow
    (s = inf for one term)."""
    values = np.asarray(terms, dtype=float)
    if values.size == 0 or not np.all(np.isfinite(values)):
        raise ValueError("a Monte Carlo mean needs at least one term, every term finite")
    top = float(np.max(np.abs(values)))
    exponent = math.frexp(top)[1] if top > 0.0 else 0
    scaled = np.ldexp(values, -exponent)
    se = float(scaled.std(ddof=1)) / math.sqrt(scaled.size) if scaled.size > 1 else math.inf
    return float(scaled.mean()), se, exponent


def scaled_mean(batches: Sequence[VolumeTerms]) -> tuple[float, float]:
    """(log of the mean, standard error of the mean relative to the mean) of the terms of all ``batches``
    in absolute units (e^log_unit × term), from the terms rescaled to below 1 (:func:`scaled_moments`).

    Returns
    -------
    tuple of float
        log of the mean (−inf when every term is 0), and SE/mean (inf when the mean is 0).

    Raises
    ------
    ValueError
        No term, or a term that is negative, infinite or NaN.
    """
    if not batches:
        raise ValueError("a Monte Carlo of a volume needs at least one term")
    unit = max(b.log_unit for b in batches)
    terms = np.concatenate([np.asarray(b.terms, dtype=float) * math.exp(b.log_unit - unit) for b in batches])
    if np.any(terms < 0):
        raise ValueError("the terms of a volume must be non-negative")
    mean, se, exponent = scaled_moments(terms)
    if mean == 0.0:
        return -math.inf, math.inf
    return unit + math.log(mean) + exponent * math.log(2.0), se / mean


def volume_text(log_value: float, digits: int = 8) -> str:
    """A volume of natural log ``log_value`` in scientific notation with ``digits`` significant digits, from its
    logarithm (so beyond the double range too): m·10^e with e = ⌊log₁₀ v⌋, m = 10^(log₁₀ v − e).

    Examples
    --------
    >>> volume_text(math.log(18.822741), 6)
    '1.88227e+01'
    >>> volume_text(1000.0, 4)
    '1.970e+434'
    """
    if not math.isfinite(log_value):
        return "0" if log_value < 0 else "inf"
    log10 = log_value / math.log(10.0)
    exponent = math.floor(log10)
    mantissa = round(10.0 ** (log10 - exponent), digits - 1)
    if mantissa >= 10.0:
        mantissa, exponent = mantissa / 10.0, exponent + 1
    return f"{mantissa:.{digits - 1}f}e{exponent:+03d}"


def utility_value_text(block: dict, digits: int = 6) -> str:
    """A certificate's utility block (``value``, and for a volume ``log_value``) as text: a volume from its
    logarithm (so beyond the double range, where ``value`` is null, too), any other value with ``digits``
    significant digits."""
    if block.get("log_value") is not None:
        return volume_text(block["log_value"], digits)
    return f"{block['value']:.{digits}g}"


def ci_text(block: dict, digits: int = 6) -> str:
    """", 95% CI [lo, hi]" of a certificate's utility block when it has an interval (the ends of a volume's from
    ``log_ci95``), else ""."""
    if "log_ci95" in block:
        ends = [volume_text(v, digits) if v is not None else "0" for v in block["log_ci95"]]
    elif "ci95" in block:
        ends = [f"{v:.{digits}g}" for v in block["ci95"]]
    else:
        return ""
    return f", 95% CI [{ends[0]}, {ends[1]}]"
