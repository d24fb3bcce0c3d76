r"""The inverse of James–Stein shrinkage, up to two candidates: what an interval for a shrunk release is built on.

Numpy only (``dpopt verify`` re-derives intervals without scipy); the shrinkage itself is
:mod:`dpopt.mechanisms.james_stein`.
"""

from __future__ import annotations

import numpy as np


def helmert_columns(p: int) -> np.ndarray:
    """The last p − 1 columns of the Helmert matrix of order p: column k − 1 (k = 2..p) is
    [k(k−1)]^{-1/2}(1, …, 1, 1−k, 0, …, 0) (Lee et al. 2022, Sec. 4.1; the basis of the ``rotated`` variant)."""
    out = np.zeros((p, p - 1))
    for k in range(2, p + 1):
        out[: k - 1, k - 2] = 1.0
        out[k - 1, k - 2] = 1.0 - k
        out[:, k - 2] /= np.sqrt(k * (k - 1.0))
    return out


def stage_candidates(published: np.ndarray, variant: str, constant: float,
                     basis: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    r"""The two Gaussian-stage values consistent with a published James–Stein release (rows of ``published``).

    With u = BᵀM (M itself for B = I), the shrinkage keeps the centre ū (0 for ``zero``, the mean of u otherwise)
    and multiplies the residual r = x − ū1 by f = 1 − c/‖r‖² (c = ``constant``, (k − 2)σ² or (k − 3)σ²), so the
    published residual r̂ = u − ū1 has norm :math:`a = \|\hat r\| = |\rho - c/\rho|`, ρ = ‖r‖. That gives two
    roots, :math:`\rho_\pm = (\pm a + \sqrt{a^2 + 4c})/2` (f > 0: ρ₊ ≥ √c; f < 0: ρ₋ = c/ρ₊ ≤ √c), and the
    stage residual is r = g r̂ with :math:`g_+ = \rho_+/a` or :math:`g_- = -\rho_-/a`. In the cells,
    :math:`y_\pm = M + (g_\pm - 1) B\hat r` (the component orthogonal to B is released unchanged). A published
    residual of norm 0 (probability 0: ρ = √c in any direction) leaves the stage undetermined: NaN.

    Returns
    -------
    (y_plus, y_minus) : arrays shaped as ``published``
    """
    m = np.atleast_2d(np.asarray(published, dtype=float))
    u = m if basis is None else m @ basis
    centre = np.zeros_like(u) if variant == "zero" else np.repeat(u.mean(axis=1, keepdims=True), u.shape[1], axis=1)
    resid = u - centre
    a = np.linalg.norm(resid, axis=1, keepdims=True)
    root = np.sqrt(a * a + 4.0 * constant)
    safe = np.where(a > 0, a, 1.0)
    g_plus = np.where(a > 0, (a + root) / 2.0 / safe, np.nan)
    g_minus = np.where(a > 0, -(root - a) / 2.0 / safe, np.nan)
    lifted = resid if basis is None else resid @ basis.T
    out = tuple(m + (g - 1.0) * lifted for g in (g_plus, g_minus))
    return (out[0].reshape(np.shape(published)), out[1].reshape(np.shape(published)))
