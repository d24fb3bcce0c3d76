"""Privacy definitions and exact conversions between them.

The names below are imported on first use (PEP 562), so that a command imports only the
modules it uses (e.g. ``dpopt verify`` of a Gaussian certificate).
"""

from __future__ import annotations

from dpopt._lazy import lazy_exports

__all__ = lazy_exports(__name__, {
    "gaussian_delta": "dpopt.privacy.gaussian",
    "gaussian_delta_mp": "dpopt.privacy.gaussian",
    "gaussian_epsilon": "dpopt.privacy.gaussian",
    "gaussian_log_delta": "dpopt.privacy.gaussian",
    "gaussian_mu": "dpopt.privacy.gaussian",
    "gdp_tradeoff": "dpopt.privacy.gaussian",
    "laplace_delta_1d": "dpopt.privacy.laplace",
    "laplace_delta_mp": "dpopt.privacy.laplace",
    "laplace_epsilon": "dpopt.privacy.laplace",
    "laplace_scale_for": "dpopt.privacy.laplace",
    "laplace_scale_for_approx": "dpopt.privacy.laplace",
    "zcdp_delta_cks": "dpopt.privacy.zcdp",
    "zcdp_delta_cks_mp": "dpopt.privacy.zcdp",
    "zcdp_epsilon_bun_steinke": "dpopt.privacy.zcdp",
    "zcdp_epsilon_cks": "dpopt.privacy.zcdp",
    "zcdp_epsilon_exact_gaussian": "dpopt.privacy.zcdp",
})
