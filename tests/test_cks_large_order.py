"""The CKS conversion at very large orders (issue 26): ε(α) = αρ + (α log(1 − 1/α) − log(α − 1) −
log δ)/(α − 1) evaluated without cancellation, the returned ε meeting δ exactly.

Reference: the same infimum over α computed independently in 50-digit mpmath (golden-section
on log(α − 1)), and the 60-digit δ of :func:`zcdp_delta_cks_mp` at the returned order.
"""

from __future__ import annotations

import mpmath
import pytest

from dpopt.privacy.zcdp import zcdp_delta_cks_mp, zcdp_epsilon_cks


def _mp_cks_epsilon(delta: float, rho: float) -> mpmath.mpf:
    with mpmath.workdps(50):
        r, d = mpmath.mpf(rho), mpmath.mpf(delta)

        def eps(x):
            a = 1 + mpmath.exp(x)
            return a * r + (a * mpmath.log(1 - 1 / a) - mpmath.log(a - 1) - mpmath.log(d)) / (a - 1)

        lo, hi = mpmath.mpf(-10), mpmath.mpf(40)
        g = (mpmath.sqrt(5) - 1) / 2
        for _ in range(250):  # golden section: the bracket shrinks by 0.618 each step, to ~1e-50
            c, e = hi - g * (hi - lo), lo + g * (hi - lo)
            if eps(c) < eps(e):
                hi = e
            else:
                lo = c
        return eps((lo + hi) / 2)


@pytest.mark.parametrize("rho, delta", [(1e-10, 1e-12), (1e-6, 1e-10), (0.5, 1e-6), (1e-14, 1e-15)])
def test_cks_epsilon_is_the_infimum_and_meets_delta(rho, delta):
    epsilon, alpha = zcdp_epsilon_cks(delta, rho)
    assert zcdp_delta_cks_mp(epsilon, rho, alpha) <= delta
    # the float optimum of α is within ~1e-8 relative of the true one; ε is flat there
    assert epsilon == pytest.approx(float(_mp_cks_epsilon(delta, rho)), rel=1e-12)
