"""The mechanism families by spec name: the one list the spec accepts and the registry reads.

The families of this package are declared here by name → defining module (imported on first
look-up by :func:`dpopt.mechanisms.registry`); a family defined anywhere else joins the list
when its class is created (:meth:`dpopt.mechanisms.Mechanism.__init_subclass__` calls
:func:`register_family`), so adding a family takes one module and nothing else. The spec
layer validates ``mechanism:`` against :func:`family_names` without importing a family.
"""

from __future__ import annotations

FAMILY_MODULES: dict[str, str] = {
    "gaussian": "dpopt.mechanisms.gaussian",
    "projected_gaussian": "dpopt.mechanisms.gaussian",
    "james_stein": "dpopt.mechanisms.james_stein",
    "marginal_gaussian": "dpopt.mechanisms.marginal_gaussian",
    "marginal_laplace": "dpopt.mechanisms.marginal_laplace",
    "kronecker_gaussian": "dpopt.mechanisms.kronecker_gaussian",
    "kronecker_laplace": "dpopt.mechanisms.kronecker_laplace",
    "gaussian_optimal": "dpopt.mechanisms.gaussian_optimal",
    "laplace": "dpopt.mechanisms.laplace",
    "k_norm": "dpopt.mechanisms.k_norm",
    "generalized_gaussian": "dpopt.mechanisms.generalized_gaussian",
    "staircase": "dpopt.mechanisms.staircase",
    "r2dp": "dpopt.mechanisms.r2dp",
    "discrete_gaussian": "dpopt.mechanisms.discrete_gaussian",
    "discrete_laplace": "dpopt.mechanisms.discrete_laplace",
    "query_scaling": "dpopt.mechanisms.query_scaling",
}
"""The module that defines each family, in the order ``auto`` compares them; ``query_scaling``
is the Shoham–Rinott scaled query (Gaussian noise σ²Diag(ξ)⁻¹ after the inverse transform);
``marginal_gaussian`` is ``gaussian_optimal``'s optimum for marginal workloads at any domain size,
``marginal_laplace`` the weighted-marginal strategy with Laplace noise (pure ε) for them,
``kronecker_gaussian`` a Kronecker strategy for ``kronecker`` queries (range/prefix × marginals),
``kronecker_laplace`` its pure-ε counterpart (Laplace noise on a Kronecker strategy)."""


def family_names() -> tuple[str, ...]:
    """Every family name the spec accepts, in :data:`FAMILY_MODULES` order."""
    return tuple(FAMILY_MODULES)


def register_family(name: str, module: str) -> None:
    """Declare a family defined in ``module`` (a no-op for the families declared above)."""
    FAMILY_MODULES.setdefault(name, module)
