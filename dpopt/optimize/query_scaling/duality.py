"""What the query-scaling designs share: the accepted duality gap, and the Newton refinement
of the multipliers of a log-det design that makes its certified gap tight."""

from __future__ import annotations

import numpy as np

GAP_TOLERANCE = 1e-6
"""Largest accepted relative duality gap of a solved design (log-volume gap for ``ci_volume``)."""


def polish_design(rows: np.ndarray, u: np.ndarray, diagonal: bool) -> np.ndarray:
    r"""Newton refinement of the multipliers of a log-det design, on their support.

    Minimises the dual :math:`g(u) = -\log\det V(u) - r + \sum u` with
    :math:`V(u) = \sum_j u_j c_j c_j^\top` (or :math:`\mathrm{Diag}(A^\top u)` for a diagonal
    design), whose gradient is :math:`1 - c_j^\top V^{-1} c_j`. Interior-point solutions are
    accurate to about the square root of their gap in the shape; a few Newton steps make
    the shape accurate to rounding. The caller keeps whichever multipliers certify the
    smaller gap, so a poor refinement can never be used.
    """
    support = u > 1e-6 * float(u.max())
    c, x = rows[support], u[support].copy()

    def parts(x):
        if diagonal:
            v = c.T @ x
            q = c @ (1.0 / v)
            return -float(np.sum(np.log(v))) + float(x.sum()), q, (c / v) @ (c / v).T
        v = (c * x[:, None]).T @ c
        vinv = np.linalg.inv(v)
        g = c @ vinv @ c.T
        return -float(np.linalg.slogdet(v)[1]) + float(x.sum()), np.diag(g).copy(), g**2

    for _ in range(60):
        value, q, hess = parts(x)
        grad = 1.0 - q
        if np.abs(grad).max() < 1e-14:
            break
        step = -np.linalg.lstsq(hess, grad, rcond=1e-12)[0]
        t = 1.0
        while t > 1e-12:
            trial = x + t * step
            if (trial > 0).all() and parts(trial)[0] <= value + 1e-4 * t * float(grad @ step):
                break
            t *= 0.5
        else:
            break
        x = trial
    out = np.zeros_like(u)
    out[support] = x
    return out
