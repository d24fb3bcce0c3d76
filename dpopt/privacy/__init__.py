"""Privacy definitions and exact conversions between them."""

from dpopt.privacy.gaussian import (
    gaussian_delta,
    gaussian_delta_mp,
    gaussian_epsilon,
    gaussian_log_delta,
    gaussian_mu,
    gdp_tradeoff,
)
from dpopt.privacy.laplace import (
    laplace_delta_1d,
    laplace_delta_mp,
    laplace_epsilon,
    laplace_scale_for,
    laplace_scale_for_approx,
)
from dpopt.privacy.zcdp import (
    zcdp_delta_cks,
    zcdp_delta_cks_mp,
    zcdp_epsilon_bun_steinke,
    zcdp_epsilon_cks,
    zcdp_epsilon_exact_gaussian,
)

__all__ = [
    "gaussian_delta",
    "gaussian_delta_mp",
    "gaussian_epsilon",
    "gaussian_log_delta",
    "gaussian_mu",
    "gdp_tradeoff",
    "laplace_delta_1d",
    "laplace_delta_mp",
    "laplace_epsilon",
    "laplace_scale_for",
    "laplace_scale_for_approx",
    "zcdp_delta_cks",
    "zcdp_delta_cks_mp",
    "zcdp_epsilon_bun_steinke",
    "zcdp_epsilon_cks",
    "zcdp_epsilon_exact_gaussian",
]
