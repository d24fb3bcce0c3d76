r"""Utility of Laplace, Gaussian and generalized Gaussian noise at equal privacy (Liu 2019, §3).

The comparisons the paper draws between the ε-DP Laplace mechanism (b = Δ/ε) and the
(ε, δ)-pDP Gaussian mechanism (σ from Lemma 10 / Eq. 18, :mod:`dpopt.privacy.pdp`), for a
scalar query of sensitivity Δ:

* **tails** (Fig. 4): :math:`p_1 = \Pr(|e_1| > t) = e^{-|t|\varepsilon/\Delta}` and
  :math:`p_2 = 2\Phi(-|t|/\sigma)`; :func:`tail_ratio` is p₁/p₂ (< 1: Laplace is less likely to
  exceed t). The region where both are below 10⁻⁴ is the paper's gray region (:func:`meaningful`).
* **privacy at equal tails** (Fig. 5): the Gaussian σ_t with p₂ = p₁ at t,
  :math:`\sigma_t = |t| / (-\Phi^{-1}(e^{-|t|\varepsilon_1/\Delta}/2))`, and the ε₂ for which Eq. 18
  gives σ_t: :math:`\varepsilon_2 = \Delta^2/(2\sigma_t^2) - z\Delta/\sigma_t`, z = Φ⁻¹(δ/2)
  (:func:`equal_tail_epsilon`; as t → 0, ε₂/ε₁ → πε₁/4 + |z|√(π/2)).
* **dispersion** (Lemma 11, corrected): :math:`\mathrm{Var}_G/\mathrm{Var}_L = (\sqrt{z^2+2\varepsilon}-z)^2/8`,
  > 1 whenever δ < 2Φ(−√2) ≈ 0.157 (:func:`lemma11_threshold`), and exactly when
  δ < 2Φ(−(4−ε)/(2√2)) (:func:`variance_ratio_threshold`).
* **pDP vs (ε, δ)-DP scale** (Fig. 3): σ from Eq. 18 over σ from the classical Eq. 19.

:func:`equal_privacy_table` puts the dispersion and tails of every family side by side at the
same ε (and δ for the pDP ones): Laplace, the staircase mechanism when it is registered (the
pure-ε baseline of Geng & Viswanath, designed by its own family for each metric), the Gaussian
under pDP and GG(p) under pDP (Corollary 8).

References
----------
.. [1] F. Liu, "Generalized Gaussian mechanism for differential privacy", IEEE TKDE 2019, §3,
   Lemma 11, Figs. 3–5 (digest ``papers/002_generalized_gaussian.md`` §6–7).
"""

from __future__ import annotations

import math

import numpy as np

from dpopt.core import normal
from dpopt.mechanisms import registry
from dpopt.noise.generalized_gaussian import GeneralizedGaussian
from dpopt.privacy.pdp import classical_gaussian_sigma, gaussian_pdp_sigma, gg_pdp_scale_disjoint
from dpopt.problem import compile
from dpopt.spec.load import load_spec

MEANINGFUL_TAIL = 1e-4
"""The paper's cut-off: tails below 10⁻⁴ for both mechanisms are 'unlikely' (gray in Figs. 4–5)."""


def _eq18_sigma(epsilon: float, delta: float, sensitivity: float) -> float:
    """Eq. 18 without the safe-direction rounding (for curves; calibration uses :func:`gaussian_pdp_sigma`)."""
    z = float(normal.ndtri(delta / 2.0))
    return sensitivity * (math.sqrt(z * z + 2.0 * epsilon) - z) / (2.0 * epsilon)


def laplace_tail(t, epsilon: float, sensitivity: float = 1.0) -> np.ndarray:
    r""":math:`p_1 = \Pr(|e_1| > |t|) = e^{-|t|\varepsilon/\Delta}` for Laplace(Δ/ε)."""
    return np.exp(-np.abs(np.asarray(t, dtype=float)) * epsilon / sensitivity)


def gaussian_tail(t, sigma: float) -> np.ndarray:
    r""":math:`p_2 = \Pr(|e_2| > |t|) = 2\Phi(-|t|/\sigma)`."""
    return 2.0 * normal.ndtr(-np.abs(np.asarray(t, dtype=float)) / sigma)


def tail_ratio(t, epsilon: float, delta: float, sensitivity: float = 1.0) -> np.ndarray:
    """Fig. 4: p₁/p₂, Laplace at ε over the (ε, δ)-pDP Gaussian (Eq. 18), at |t|."""
    sigma = _eq18_sigma(epsilon, delta, sensitivity)
    t = np.abs(np.asarray(t, dtype=float))
    log_p2 = math.log(2.0) + normal.log_ndtr(-t / sigma)
    with np.errstate(over="ignore"):  # far in the tails the ratio is +inf, correctly
        return np.exp(-t * epsilon / sensitivity - log_p2)


def meaningful(t, epsilon: float, delta: float, sensitivity: float = 1.0) -> np.ndarray:
    """True where p₁ or p₂ is above 10⁻⁴ (outside the paper's gray region)."""
    sigma = _eq18_sigma(epsilon, delta, sensitivity)
    return (laplace_tail(t, epsilon, sensitivity) > MEANINGFUL_TAIL) | (
        gaussian_tail(t, sigma) > MEANINGFUL_TAIL
    )


def equal_tail_epsilon(t, epsilon1: float, delta: float, sensitivity: float = 1.0) -> np.ndarray:
    r"""Fig. 5: the ε₂ at which the (ε₂, δ)-pDP Gaussian has the tail of the ε₁-DP Laplace at |t| > 0."""
    t = np.abs(np.asarray(t, dtype=float))
    p1 = np.exp(-t * epsilon1 / sensitivity)
    sigma_t = t / (-normal.ndtri(p1 / 2.0))
    z = float(normal.ndtri(delta / 2.0))
    return sensitivity**2 / (2.0 * sigma_t**2) - z * sensitivity / sigma_t


def equal_tail_ratio_limit(epsilon1: float, delta: float) -> float:
    r"""The t → 0 limit of ε₂/ε₁: :math:`\pi\varepsilon_1/4 + |z|\sqrt{\pi/2}` (digest §6)."""
    z = float(normal.ndtri(delta / 2.0))
    return math.pi * epsilon1 / 4.0 + abs(z) * math.sqrt(math.pi / 2.0)


def variance_ratio(epsilon: float, delta: float) -> float:
    r"""Lemma 11 (corrected G.15): :math:`\mathrm{Var}_G/\mathrm{Var}_L = (\sqrt{z^2+2\varepsilon}-z)^2/8`,
    the (ε, δ)-pDP Gaussian (Eq. 18) against the ε-DP Laplace, same sensitivity."""
    z = float(normal.ndtri(delta / 2.0))
    return (math.sqrt(z * z + 2.0 * epsilon) - z) ** 2 / 8.0


def lemma11_threshold() -> float:
    """Lemma 11's sufficient condition: the Gaussian variance is larger whenever δ < 2Φ(−√2)."""
    return float(2.0 * normal.ndtr(-math.sqrt(2.0)))


def variance_ratio_threshold(epsilon: float) -> float:
    r"""The exact threshold at ε: ratio > 1 ⇔ δ < 2Φ(−(4−ε)/(2√2)) (every δ for ε ≥ 4)."""
    if epsilon >= 4.0:
        return 1.0
    return float(2.0 * normal.ndtr(-(4.0 - epsilon) / (2.0 * math.sqrt(2.0))))


def pdp_to_classical_ratio(epsilon: float, delta: float) -> float:
    """Fig. 3: σ from Eq. 18 (pDP) over σ from Eq. 19 (classical (ε, δ)-DP), ε < 1 (Δ cancels)."""
    return _eq18_sigma(epsilon, delta, 1.0) / classical_gaussian_sigma(epsilon, delta, 1.0)


def _staircase_row(epsilon: float, t: float) -> dict | None:
    """The staircase family's own designs for a count (Δ = 1, add/remove) at ε, one per metric, of the continuous
    law (``sampler: floating_point``; its exact design on counts is the discrete staircase)."""
    if "staircase" not in registry():
        return None
    cls = registry()["staircase"]
    row: dict = {"target": f"ε = {epsilon} (pure)", "calibration": "staircase family, optimal per metric"}
    for metric, key, extra in (
        ("l2", "variance", {}),
        ("l1", "mean_abs", {}),
        ("usefulness", "tail", {"gamma": t}),
    ):
        spec = load_spec(
            {
                "dpopt": 1,
                "name": "equal-privacy comparison",
                "data": {"attributes": {"a": ["x"]}},
                "query": {"kind": "count"},
                "adjacency": "add_remove",
                "privacy": {"pure": {"epsilon": epsilon}},
                "mechanism": "staircase",
                "utility": {"metric": metric, **extra},
                "sampler": "floating_point",  # the continuous law, as the other rows (on counts: the geometric law)
            }
        )
        mechanism = cls.design(compile(spec))
        value = mechanism.expected_utility(spec.utility).value
        row[key] = 1.0 - value if metric == "usefulness" else value
    return row


def equal_privacy_table(
    epsilon: float, delta: float, t: float, shapes=(3, 4), sensitivity: float = 1.0
) -> dict:
    """Dispersion and tail of each family at the same privacy parameters, scalar query.

    Returns
    -------
    dict
        ``{name: {target, calibration, scale, variance, mean_abs, tail}}`` with ``tail`` =
        Pr(|e| > t). ``laplace`` (ε-DP), ``staircase`` (ε-DP; only when the family is
        registered), ``gaussian_pdp`` (Lemma 10), ``gg{p}_pdp`` (Corollary 8). The pDP rows
        hold a different guarantee than the ε-DP rows: the comparison is the paper's.
    """
    rows: dict = {}
    laplace = GeneralizedGaussian(1, sensitivity / epsilon)
    rows["laplace"] = {
        "target": f"ε = {epsilon} (pure)",
        "calibration": "b = Δ/ε",
        "scale": laplace.scale,
        "variance": laplace.var,
        "mean_abs": laplace.mean_abs,
        "tail": float(laplace.tail(t)),
    }
    staircase = _staircase_row(epsilon, t)
    if staircase is not None:
        rows["staircase"] = staircase
    gauss = GeneralizedGaussian.from_sigma(gaussian_pdp_sigma(epsilon, delta, sensitivity))
    pdp = f"(ε, δ) = ({epsilon}, {delta}) pDP"
    rows["gaussian_pdp"] = {
        "target": pdp,
        "calibration": "Lemma 10 / Eq. 18",
        "scale": gauss.scale,
        "variance": gauss.var,
        "mean_abs": gauss.mean_abs,
        "tail": float(gauss.tail(t)),
    }
    for p in shapes:
        g = GeneralizedGaussian(p, gg_pdp_scale_disjoint(epsilon, delta, p, sensitivity))
        rows[f"gg{p}_pdp"] = {
            "target": pdp,
            "calibration": "Corollary 8 (closed form)",
            "scale": g.scale,
            "variance": g.var,
            "mean_abs": g.mean_abs,
            "tail": float(g.tail(t)),
        }
    return rows
