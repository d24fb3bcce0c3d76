r"""The 2020 US Census under its invariants: advertised vs effective guarantee (Cho & Awan §6).

The Disclosure Avoidance System for the P.L. 94-171 redistricting data spent ρ = 2.63
in zCDP, ρ = 2.56 of it on the person tables (Abowd et al. 2022), advertised as
(D, A_1, 2.56)-zCDP: replace-one adjacency on the whole dataspace. But the total
population of each state (and DC and Puerto Rico) was published exactly. State totals
are the one-way margin of one attribute, so a(t) ≤ p + 1 = 2 (Thm 16, p = 1), with
equality as soon as two states are populated. By Proposition 15 and zCDP group privacy
(Lemma 39) the person tables are only

.. math:: (\mathcal{D}_t, A_2, 2^2 \cdot 2.56 = 10.24)\text{-zCDP},

and with Lemma 40 (ε = ρ + 2√(ρ log(1/δ))) at δ = 10⁻¹⁰ the advertised ε = 17.91528
becomes ε = 40.95057 — the paper's figures. The module also gives the CKS conversion
(:func:`dpopt.privacy.zcdp.zcdp_epsilon_cks`, tighter, not used in the paper).

:func:`census_semi_dp` returns the figures (``notebooks/semi_dp.ipynb`` tabulates them against the
paper's); ``specs/census_2020_states.yaml`` is the matching spec (state × voting age with the
state totals invariant).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from dpopt.privacy.semi_dp import semi_dp_from_dp
from dpopt.privacy.zcdp import zcdp_epsilon_bun_steinke, zcdp_epsilon_cks

RHO_PERSONS = Fraction(256, 100)
"""ρ spent on the person tables of the 2020 P.L. 94-171 production run (Abowd et al. 2022)."""

RHO_HOUSING_UNITS = Fraction(7, 100)
"""ρ spent on the housing-unit tables (no person-level invariant affects them here)."""

A_STATE_TOTALS = 2
"""a(t) for state population totals: p = 1 attribute, a(t) = p + 1 with ≥ 2 populated states."""


@dataclass(frozen=True)
class CensusSemiDP:
    """Advertised and effective guarantees of the 2020 person tables.

    Attributes
    ----------
    rho_advertised, rho_effective : float
        ρ under (D, A_1) and under (D_t, A_a) (= a²ρ, Lemma 39).
    a : int
    delta : float
    epsilon_advertised, epsilon_effective : float
        Lemma 40 (Bun & Steinke) at ``delta``: the paper's conversion.
    epsilon_advertised_cks, epsilon_effective_cks : float
        The tighter CKS conversion at ``delta`` (for reference; not in the paper).
    """

    rho_advertised: float
    rho_effective: float
    a: int
    delta: float
    epsilon_advertised: float
    epsilon_effective: float
    epsilon_advertised_cks: float
    epsilon_effective_cks: float


def census_semi_dp(rho: float = float(RHO_PERSONS), a: int = A_STATE_TOTALS, delta: float = 1e-10) -> CensusSemiDP:
    """The Semi-DP reading of a ρ-zCDP release with invariants of semi-adjacent parameter a.

    Examples
    --------
    >>> r = census_semi_dp()
    >>> r.rho_effective, round(r.epsilon_advertised, 5), round(r.epsilon_effective, 5)
    (10.24, 17.91528, 40.95057)
    """
    effective = semi_dp_from_dp("zcdp", {"rho": rho}, a).parameters["rho"]
    return CensusSemiDP(
        rho_advertised=rho,
        rho_effective=effective,
        a=a,
        delta=delta,
        epsilon_advertised=zcdp_epsilon_bun_steinke(delta, rho),
        epsilon_effective=zcdp_epsilon_bun_steinke(delta, effective),
        epsilon_advertised_cks=zcdp_epsilon_cks(delta, rho)[0],
        epsilon_effective_cks=zcdp_epsilon_cks(delta, effective)[0],
    )
