r"""Empirical privacy audit: try to *refute* a certificate by Monte Carlo.

For the worst-case neighbouring pairs that the spec implies — the sensitivity vector v
that is largest relative to the stated noise law, those of largest l1 and l2 norm, and a
few others — the mechanism is **released** on both datasets, through the family's public
:meth:`~dpopt.mechanisms.base.Mechanism.release` (the one release path: answer-dependent
noise, shrinkage and inverse transforms included), at true answers x − v/2 and x + v/2
around a reference answer x (the centre of the public box the spec implies, else 0); a
distinguishing test is run on the two samples, and its error rates turn into a lower
confidence bound on the privacy parameter:

* (ε, δ)-DP forces 1 − β ≤ e^ε α + δ, so ε ≥ log((1 − δ − β̄)/ᾱ) (and with α, β swapped);
* μ-GDP forces β ≥ G_μ(α) = Φ(Φ⁻¹(1 − α) − μ), so μ ≥ Φ⁻¹(1 − ᾱ) − Φ⁻¹(β̄);
* ρ-zCDP is audited through the (ε, δ) it implies (CKS conversion) at δ = 10⁻⁶,

with ᾱ, β̄ one-sided Clopper–Pearson upper bounds (Bonferroni over the two rates and
the pairs, so the largest bound reported holds at the stated confidence). The
test statistic is the log-likelihood ratio of the noise law the family states (of its
additive stage, for a post-processed release), else the projection ⟨y, v⟩; any statistic
gives a valid bound, a good one a tight bound. Thresholds are chosen on one half of the draws and the bound is
computed on the other half, so the selection does not bias the bound (the selection
maximises the same confidence bound on its half, which keeps it away from thin tails). A correct
mechanism gives a lower bound below the certified value (up to the 1 − confidence
failure probability); a broken one (σ halved, a sensitivity space missing vectors,
a K-norm radius with the wrong Gamma shape) gives a bound above it.

This is a test that can refute a guarantee, never a proof of one (the certificate is).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from dpopt.certificate.second_route import noise_law_of, relative_shift
from dpopt.core import normal
from dpopt.core.memory import dense_bytes, require_memory
from dpopt.domain.bounds import answer_bounds
from dpopt.domain.queries import compile_query
from dpopt.mechanisms import Mechanism
from dpopt.privacy.zcdp import zcdp_epsilon_cks
from dpopt.sensitivity.space import SensitivitySpace
from dpopt.spec.models import Privacy, Spec

AUDIT_DRAWS = 200_000
"""Draws per dataset and pair of an audit, unless asked otherwise."""

AUDIT_SEED = 20261122
"""The seed of an audit's draws: an audit is a reproducible test, not a release."""

AUDIT_DELTA_FOR_ZCDP = 1e-6


@dataclass(frozen=True)
class AuditResult:
    """The audit's verdict.

    Attributes
    ----------
    parameter : {'epsilon', 'mu'}
        What is bounded.
    certified : float
        The certified value of that parameter.
    lower_bound : float
        The largest lower confidence bound over the pairs and tests tried.
    confidence : float
    draws : int
        Draws per dataset and pair.
    seed : int
    rows : list of dict
        One row per pair: the vector's norms, statistic, threshold, error rates, bound.
    """

    parameter: str
    certified: float
    lower_bound: float
    confidence: float
    draws: int
    seed: int
    rows: list[dict] = field(default_factory=list)
    note: str = ""
    """Why no pair was sampled (empty when the audit ran)."""
    delta: float = 0.0
    """The δ at which an ε is audited (0 for pure ε and μ)."""
    certified_from: str = ""
    """How the certified value was obtained from the target (empty: it is the target's own parameter)."""

    @property
    def audited(self) -> bool:
        return not self.note

    @property
    def passed(self) -> bool:
        """True when the audit could not refute the certificate (also when it could not run: see ``note``)."""
        return self.lower_bound <= self.certified

    def to_dict(self) -> dict:
        return {
            **({"not_audited": self.note} if self.note else {}),
            "parameter": self.parameter,
            "certified": self.certified,
            "delta": self.delta,
            "certified_from": self.certified_from,
            "lower_bound": self.lower_bound,
            "confidence": self.confidence,
            "draws": self.draws,
            "seed": self.seed,
            "passed": self.passed,
            "pairs": self.rows,
        }


def _clopper_pearson_upper(k: int, n: int, level: float) -> float:
    """One-sided upper confidence bound of a binomial proportion at ``level``."""
    if k >= n:
        return 1.0
    from scipy import special  # imported where used (0.25 s: the report imports this module, the audit may not run)

    return float(special.betaincinv(k + 1, n - k, level))


def _target(privacy: Privacy, profile: dict | None = None) -> tuple[str, float, float, str]:
    """(parameter, certified value, δ used, how the value follows from the target) for the privacy target.

    A zCDP target is audited at δ = :data:`AUDIT_DELTA_FOR_ZCDP`, at the ε the certificate's headline states
    there: the mechanism's own exact profile (``profile``, ε by δ as in ``mechanism.privacy.epsilon_at_delta``)
    when it is tighter, else the CKS conversion of ρ (valid for every ρ-zCDP mechanism)."""
    p = privacy.parameters
    if privacy.definition == "gdp":
        return "mu", p["mu"], 0.0, ""
    if privacy.definition == "pure":
        return "epsilon", p["epsilon"], 0.0, ""
    if privacy.definition in ("approx", "pdp"):
        return "epsilon", p["epsilon"], p["delta"], ""
    if privacy.definition == "zcdp":
        eps, _ = zcdp_epsilon_cks(AUDIT_DELTA_FOR_ZCDP, p["rho"])
        own = (profile or {}).get(f"{AUDIT_DELTA_FOR_ZCDP:g}")
        if isinstance(own, (int, float)) and own < eps:
            return "epsilon", float(own), AUDIT_DELTA_FOR_ZCDP, (
                f"the mechanism's own exact (ε, δ) profile at δ = {AUDIT_DELTA_FOR_ZCDP:g}, the report's headline "
                f"(ρ = {p['rho']:g} by the CKS bound gives the looser {eps:.6g})")
        return "epsilon", eps, AUDIT_DELTA_FOR_ZCDP, (
            f"ρ = {p['rho']:g} converted to ε at δ = {AUDIT_DELTA_FOR_ZCDP:g} by the CKS bound (Canonne, Kamath & "
            "Steinke 2020), valid for every ρ-zCDP mechanism and so possibly looser than this mechanism's own profile")
    raise ValueError(f"cannot audit a {privacy.definition} target")


def _pairs(space: SensitivitySpace, most: int, law=None) -> np.ndarray:
    """The sensitivity vectors to audit: the largest for the stated noise law
    (:func:`~dpopt.certificate.second_route.relative_shift`), then those of largest l2 and l1 norm."""
    vectors = space.extreme_vectors()
    l2 = np.sum(vectors**2, axis=1)
    l1 = np.sum(np.abs(vectors), axis=1)
    first = [int(np.argmax(l2)), int(np.argmax(l1))]
    if law is not None:
        first.insert(0, int(np.argmax(relative_shift(law, vectors))))
    order = list(dict.fromkeys([*first, *np.argsort(-l2)[:most].tolist()]))
    return vectors[order[:most]]


def _bound(parameter: str, alpha_up: float, beta_up: float, delta: float) -> float:
    if parameter == "mu":
        if alpha_up >= 1 or beta_up >= 1:
            return -math.inf
        return float(normal.ndtri(1 - alpha_up) - normal.ndtri(beta_up))
    best = -math.inf
    for a, b in ((alpha_up, beta_up), (beta_up, alpha_up)):
        if a > 0 and 1 - delta - b > 0:
            best = max(best, math.log((1 - delta - b) / a))
    return best


def audit_answer(spec: Spec, whole: bool = False) -> np.ndarray:
    """The reference true answer of an audit: the centre of the public box the spec implies
    (:func:`dpopt.domain.bounds.answer_bounds`), so that x ± v/2 stay in it; else 0.

    ``whole`` (a lattice measurement, ``needs_integer_answers``): 0, the answers of the empty table, so that x and
    x + v = Wδ are both answers of integer tables, which a measurement that rebuilds its cells from the answers (an
    exact Kronecker strategy) requires. A lattice measurement's noise does not depend on x, so the audit's verdict
    does not depend on this choice."""
    query = compile_query(spec)
    if whole:
        return np.zeros(query.dimension)
    bounds = answer_bounds(spec, query)
    if bounds is None:
        return np.zeros(query.dimension)
    lower, upper = bounds
    return 0.5 * (np.asarray(lower, dtype=float) + np.asarray(upper, dtype=float))


def _on_lattice(mechanism: Mechanism, answer: np.ndarray) -> np.ndarray:
    """``answer`` as a lattice measurement takes it: k/D correctly rounded, k = rint(D·answer) and D the scale of a
    decimal lattice (``mechanism.decimal``, :mod:`dpopt.mechanisms.decimal_lattice`; 1 on counts). A shift v = WΔ
    of decimal weights computed in floating point (0.1 − 0.3 ≠ fl(−2/10)) then gives the answer of an integer
    table, as the data would."""
    decimal = getattr(mechanism, "decimal", None)
    scale = 1 if decimal is None else decimal.scale
    return np.rint(np.asarray(answer, dtype=float) * scale) / scale


def _statistic(mechanism: Mechanism, v: np.ndarray, y: np.ndarray) -> tuple[str, np.ndarray]:
    """Large values favour 'the output came from the shifted dataset'; ``y`` = M(·) − x₀.

    The log-likelihood ratio of the noise law the mechanism *states*
    (:func:`dpopt.certificate.second_route.noise_law_of`), so a sampler that does not draw
    that law (e.g. a K-norm radius of the wrong Gamma shape) is tested against the density
    its certificate relies on; without a stated law, or with a projected product law (no density,
    :class:`~dpopt.noise.law.ProductLaw` ``projection``), the projection on v. Coordinates a
    mechanism does not release (non-finite in its output, whatever the data) carry no
    information and are left out.
    """
    law = noise_law_of(mechanism)
    if not isinstance(law, str) and not getattr(getattr(law, "inner", law), "projection", False):
        return "log-likelihood ratio", law.log_density(y - v) - law.log_density(y)
    released = np.isfinite(y).all(axis=0)
    return "projection on v", y[:, released] @ v[released]


def _coarsen(s0: np.ndarray, s1: np.ndarray, digits: int = 9) -> tuple[np.ndarray, np.ndarray]:
    """Round both statistics to ``digits`` significant digits of their common scale.

    The certificate covers the idealized (real-arithmetic) mechanism; the low-order bits of
    floating-point noise do leak (Mironov 2012: fl(φ(X) + Z) − v differs in its last bits
    from noise drawn around φ(X')), and the certificate says so. Rounding keeps the audit
    on the claim it can refute.
    """
    scale = max(float(np.abs(s0).max(initial=0.0)), float(np.abs(s1).max(initial=0.0)), 1e-300)
    quantum = 10.0 ** (math.floor(math.log10(scale)) - digits)
    return np.round(s0 / quantum) * quantum, np.round(s1 / quantum) * quantum


def audit_mechanism(
    mechanism: Mechanism,
    space: SensitivitySpace,
    privacy: Privacy,
    draws: int = AUDIT_DRAWS,
    seed: int = AUDIT_SEED,
    confidence: float = 0.95,
    pairs: int = 3,
    answer=None,
    profile: dict | None = None,
) -> AuditResult:
    """Run the empirical audit of ``mechanism`` against the certified ``privacy`` on ``space``.

    Parameters
    ----------
    mechanism : Mechanism
        The mechanism as released: its public ``release`` is audited.
    space : SensitivitySpace
        The sensitivity space the spec implies (its vectors give the neighbouring pairs).
    privacy : Privacy
        The certified target.
    draws : int
        Draws per dataset and pair (half select thresholds, half bound).
    seed : int
        Recorded in the result; the audit is reproducible.
    confidence : float
        The reported bound (the largest over the pairs) holds with at least this
        probability for a correct mechanism (Bonferroni over the pairs and the two rates).
    pairs : int
        How many sensitivity vectors to try.
    answer : array_like, shape (d,), optional
        The reference true answer x: the pair for v is (x − v/2, x + v/2) (a lattice measurement,
        which takes integer answers: (x, x + v) for whole x (:func:`audit_answer` with ``whole``), else
        (⌊x − v/2⌋, ⌊x − v/2⌋ + v), for the integer v of counts). Default 0; a
        family whose output depends on a public box needs x inside it (:func:`audit_answer`).
    profile : dict, optional
        ε by δ of the certified release (default: the mechanism's own ``privacy_summary``), see :func:`_target`.

    Raises
    ------
    MemoryLimitError
        When the draws of one pair (about 4 · draws · d floats) exceed the memory limit.
    """
    if profile is None and hasattr(mechanism, "privacy_summary"):
        profile = mechanism.privacy_summary(space).get("epsilon_at_delta")
    parameter, certified, delta, certified_from = _target(privacy, profile)
    # the answers, the two releases and the noise of one pair are held at once
    require_memory(dense_bytes(4, draws, mechanism.dimension),
                   f"the audit's {draws} draws of {mechanism.dimension} coordinates per dataset")
    centre = np.zeros(mechanism.dimension) if answer is None else np.asarray(answer, dtype=float).reshape(-1)
    rng = np.random.default_rng(seed)
    half = draws // 2
    law = noise_law_of(mechanism)
    chosen_pairs = _pairs(space, pairs, None if isinstance(law, str) else law)
    # Bonferroni over the two error rates of every pair: the maximum over pairs is reported
    level = 1 - (1 - confidence) / (2 * len(chosen_pairs))
    rows, best = [], -math.inf
    whole = getattr(mechanism, "needs_integer_answers", False)  # a lattice measurement takes integer answers
    for v in chosen_pairs:
        x0 = (centre if np.array_equal(centre, np.rint(centre)) else np.floor(centre - v / 2)) if whole else centre - v / 2
        x1 = _on_lattice(mechanism, x0 + v) if whole else x0 + v
        y0 = mechanism.release(np.tile(x0, (draws, 1)), rng) - x0
        y1 = mechanism.release(np.tile(x1, (draws, 1)), rng) - x0
        name, s0 = _statistic(mechanism, v, y0)
        _, s1 = _statistic(mechanism, v, y1)
        s0, s1 = _coarsen(s0, s1)
        thresholds = np.quantile(s0[:half], np.concatenate([np.linspace(0.5, 0.99, 25), 1 - np.logspace(-2, -4.5, 15)]))
        chosen, chosen_value = thresholds[0], -math.inf
        for t in thresholds:  # selection half: the bound it would give, so thin tails are not favoured
            a = _clopper_pearson_upper(int(np.sum(s0[:half] > t)), half, level)
            b = _clopper_pearson_upper(int(np.sum(s1[:half] <= t)), half, level)
            value = _bound(parameter, a, b, delta)
            if value > chosen_value:
                chosen, chosen_value = t, value
        k0 = int(np.sum(s0[half:] > chosen))
        k1 = int(np.sum(s1[half:] <= chosen))
        n = draws - half
        a_up, b_up = _clopper_pearson_upper(k0, n, level), _clopper_pearson_upper(k1, n, level)
        bound = _bound(parameter, a_up, b_up, delta)
        best = max(best, bound)
        rows.append({
            "l1": float(np.abs(v).sum()), "l2": float(np.sqrt(v @ v)), "statistic": name,
            "threshold": float(chosen), "alpha": k0 / n, "beta": k1 / n,
            "alpha_upper": a_up, "beta_upper": b_up, "lower_bound": bound,
        })
    return AuditResult(parameter, certified, best, confidence, draws, seed, rows, "", delta, certified_from)
