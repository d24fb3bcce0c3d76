r"""The Semi-DP paper's K-norm comparison (Cho & Awan, §5.2 and Figure 3).

Under invariants with semi-adjacent parameter a, two ways to reach ε-DP on (D_t, A_a):

* **optimal K-norm** on the Semi-DP space: K = Hull(S_Semi) in its span, at ε
  (Algorithms 2–3, Thm 31);
* **naive l_p mechanisms** (Algorithms 4–6) on all of R^d, calibrated to the ordinary
  space S_DP of the query (no invariants) at ε/a: (D, A_1, ε/a)-DP implies
  (D, A_a, ε)-DP by group privacy, hence (D_t, A_a, ε)-DP. Each is the K-norm mechanism
  of the ball Δ_p(S_DP)·B_p with rate ε/a — l1: i.i.d. Laplace(aΔ₁/ε); l2: Gamma(d)
  radius times a uniform direction; l∞: Gamma(d + 1) radius times a uniform point of
  the cube.

The paper reports the average ‖noise‖₂ over 30 replicates (no numbers, only the plot);
this module gives its expectation E‖Z‖₂ (exact, by one-dimensional integration, or Monte
Carlo with a 95% interval for the hull), and E‖Z‖₂², E‖Z‖₁. Expected values for k×k
tables with both margins invariant (digest §6.3, paper's Prop. 32 set): k = 2: 2/ε for
the K-norm against 15.06/ε, 16.97/ε, 16.83/ε for l1, l2, l∞; k = 3: 6.103/ε against
23.99/ε, 38.18/ε, 51.35/ε.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from dpopt.errors import UnsupportedSpecError
from dpopt.geometry import BALL_KINDS
from dpopt.mechanisms.base import MONTE_CARLO_DRAWS, MONTE_CARLO_SEED, UtilityValue
from dpopt.mechanisms.k_norm import BallBody, KNormMechanism
from dpopt.problem import compile
from dpopt.sensitivity.derive import derive
from dpopt.sensitivity.space import SensitivitySpace
from dpopt.spec.load import load_spec
from dpopt.spec.models import Spec


@dataclass(frozen=True)
class CostRow:
    """The expected costs of one mechanism of the comparison.

    Attributes
    ----------
    name : str
    mechanism : KNormMechanism
    epsilon : float
        The rate its noise uses (ε for the K-norm, ε/a for the naive ones).
    mean_l2_norm : UtilityValue
        E‖Z‖₂, the paper's Figure 3 metric.
    l2 : UtilityValue
        E‖Z‖₂².
    l1 : UtilityValue
        E‖Z‖₁.
    """

    name: str
    mechanism: KNormMechanism
    epsilon: float
    mean_l2_norm: UtilityValue
    l2: UtilityValue
    l1: UtilityValue

    def to_dict(self) -> dict:
        return {"name": self.name, "epsilon": self.epsilon, "mean_l2_norm": self.mean_l2_norm.to_dict(),
                "l2": self.l2.to_dict(), "l1": self.l1.to_dict(), "parameters": self.mechanism.parameters}


def naive_lp_mechanisms(spec: Spec, a: int) -> dict[str, KNormMechanism]:
    """The l1, l2, l∞ mechanisms on R^d calibrated to S_DP (the spec without invariants) at ε/a."""
    plain = spec.model_copy(update={"invariants": [], "semi_adjacency": None})
    space = derive(plain)
    epsilon = spec.privacy.parameters["epsilon"] / a
    radius = {"l1": float(space.l1), "l2": space.l2, "linf": float(space.linf)}
    identity = np.eye(space.dimension)
    return {kind: KNormMechanism(epsilon, BallBody(kind, radius[kind], identity), space) for kind in BALL_KINDS}


def semi_dp_k_norm_comparison(
    spec: Spec | dict,
    semi_space: SensitivitySpace | None = None,
    draws: int = MONTE_CARLO_DRAWS,
    seed: int = MONTE_CARLO_SEED,
) -> list[CostRow]:
    """Expected costs of the optimal K-norm mechanism and of the naive l1/l2/l∞ ones.

    Parameters
    ----------
    spec : Spec or dict
        A pure-ε spec with invariants (e.g. a table with its one-way margins).
    semi_space : SensitivitySpace, optional
        The space K is built from (default: ``dpopt.derive(spec)``; pass e.g. the paper's
        Prop. 32 set to reproduce its figure).
    draws, seed
        Monte Carlo of the quantities without a closed form.

    Returns
    -------
    list of CostRow
        The K-norm row first, then l1, l2, l∞.

    Raises
    ------
    UnsupportedSpecError
        If the target is not pure ε or the spec has no invariants.
    """
    spec = load_spec(spec)
    if spec.privacy.definition != "pure" or not spec.invariants:
        raise UnsupportedSpecError("privacy", "the K-norm comparison needs a pure-ε spec with invariants")
    problem = compile(spec)
    a = problem.space.semi_adjacent_parameter
    ours = KNormMechanism.design(problem if semi_space is None else replace(problem, space=semi_space))
    rows = [_row("K-norm, K = Hull(S_Semi)" if ours.body.optimal else f"K-norm, {ours.body.kind} ball",
                 ours, draws, seed)]
    for kind, mechanism in naive_lp_mechanisms(spec, a).items():
        rows.append(_row(f"naive {kind}, S_DP at ε/{a}", mechanism, draws, seed))
    return rows


def _row(name: str, mechanism: KNormMechanism, draws: int, seed: int) -> CostRow:
    l2 = UtilityValue("l2", mechanism._expected_l2(None), "closed form")
    closed_l1 = mechanism._expected_l1()
    l1 = (UtilityValue("l1", closed_l1, "closed form") if closed_l1 is not None
          else mechanism._monte_carlo("l1", None, None, draws=draws))
    return CostRow(name, mechanism, mechanism.epsilon, mechanism.expected_l2_norm(draws, seed), l2, l1)
