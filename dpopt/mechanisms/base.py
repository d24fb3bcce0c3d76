"""The mechanism template: families state local facts; the base does the rest.

As in scipy.stats (``rv_continuous``: public ``rvs``/``pdf`` once in the base, private
``_rvs``/``_pdf`` per distribution), the public methods of :class:`Mechanism` are
defined here once and are **final** (a subclass that redefines one is refused when the
class is created):

* ``sample(size, rng)`` → ``size`` noise draws, shape (size, d);
* ``release(true_value, rng)`` → the mechanism's output at the true answer(s): shape (d,)
  for one answer, (m, d) for m answers (one per group), each released independently;
* ``expected_utility(utility)`` → the predicted utility for the spec's metric;
* ``privacy_checks(space, privacy)`` → the independent evaluation of the guarantee.

They check arguments, draw from the CSPRNG when no generator is given
(:func:`dpopt.rng.secure_generator`) and dispatch to the family's private hooks. A family
subclasses :class:`Mechanism` and states

* ``family`` (its spec name) and ``title``;
* ``supports(problem)`` → None, or the reason it cannot serve the compiled spec
  (:class:`~dpopt.problem.Problem`: target and utility in ``problem.spec``, the sensitivity
  space in ``problem.space``, the compiled query in ``problem.query``);
* ``design(problem)`` → a calibrated (and, where it has freedom, utility-optimised)
  instance whose privacy is *certified* by ``privacy_checks``;
* ``from_parameters(parameters, space)`` → the instance a certificate describes;
* ``parameters``, ``_sample(rng, size)`` (the noise);
* ``_release(values, rng)`` when its output is not φ(X) + Z with Z independent of the
  answer (noise truncated around the answer, James–Stein shrinkage, an inverse
  transform); the default is ``values + _sample(rng, m)``;
* ``_privacy_checks(space, privacy)`` → an independent evaluation of the guarantee;
* closed-form utilities where they exist (``_expected_l2``, ``_expected_l1``,
  ``_usefulness``, ``_max_variance``, ``_ci_volume``, ``_test_power``) and ``_utility``
  for metrics of its own; the base falls back to Monte Carlo with a confidence interval
  when a family returns ``None``.

Every path that releases (Python, ``dpopt release``, ``--group-by``, the Dask engine)
calls the public ``release``, so what is released is what is certified.

Subclasses register themselves by name (``registry()``); the selector never changes
when a family is added (the scipy ``rv_continuous`` template and cvxpy atom pattern).
The families are declared by name → module (:data:`dpopt.core.families.FAMILY_MODULES`) and
imported when first looked up, so that a command pays only for the families it uses.
"""

from __future__ import annotations

import importlib
import math
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import ClassVar

import numpy as np

from dpopt.core.checks import Check
from dpopt.core.families import FAMILY_MODULES, family_names, register_family
from dpopt.core.memory import dense_bytes, require_memory
from dpopt.domain.workload import workload_matrix
from dpopt.errors import SpecError, UnsupportedSpecError
from dpopt.problem import Problem
from dpopt.rng import secure_generator
from dpopt.sensitivity.space import SensitivitySpace
from dpopt.spec.models import Privacy, Utility
from dpopt.stats.log_volume import VolumeTerms, exp_or_inf, scaled_mean, scaled_moments

_REGISTRY: dict[str, type["Mechanism"]] = {}

FINAL_METHODS = ("sample", "release", "expected_utility", "privacy_checks")
"""Public methods defined once in :class:`Mechanism`; families implement the private hooks."""

MONTE_CARLO_DRAWS = 200_000
MONTE_CARLO_SEED = 20260101
MONTE_CARLO_BATCH = 20_000_000
"""The most noise values (draws × d) one batch of a Monte Carlo holds: 160 MB a copy, whatever d is."""


def monte_carlo_batches(draws: int, dimension: int) -> list[int]:
    """Batch sizes summing to ``draws``, each of at most :data:`MONTE_CARLO_BATCH` // d draws (one at least):
    a Monte Carlo's memory is then bounded independently of the number of cells. One batch when the draws
    fit (draws × d ≤ :data:`MONTE_CARLO_BATCH`, every default Monte Carlo but those of d > 10⁴ at the 2,000-draw
    floor), so those draw exactly what one call did."""
    step = max(1, MONTE_CARLO_BATCH // max(1, int(dimension)))
    return [min(step, draws - start) for start in range(0, int(draws), step)]


def merge_moments(moments: tuple[int, np.ndarray, np.ndarray] | None, z: np.ndarray
                  ) -> tuple[int, np.ndarray, np.ndarray]:
    r"""Per-column (count, mean, sum of squared deviations) of the rows seen so far, updated with the rows of
    ``z`` by Chan, Golub & LeVeque's pairwise rule
    :math:`M_2 = M_2^a + M_2^b + \delta^2 n_a n_b / (n_a + n_b)`, :math:`\delta = \bar z_b - \bar z_a`
    ("Updating formulae and a pairwise algorithm for computing sample variances", Stanford CS report 1979)."""
    count, mean = z.shape[0], z.mean(axis=0)
    m2 = np.sum((z - mean) ** 2, axis=0)
    if moments is None:
        return count, mean, m2
    n_a, mean_a, m2_a = moments
    total = n_a + count
    delta = mean - mean_a
    return total, mean_a + delta * (count / total), m2_a + m2 + delta**2 * (n_a * count / total)


SCALE_MONOTONE_METRICS = ("l1", "l2", "max_variance", "usefulness")
"""Metrics monotone in a noise scale (l1, l2, max_variance grow with it, usefulness falls), for
the scale-based utility bounds (Laplace, discrete Laplace, generalized Gaussian)."""

IDEALIZED_NUMERICS = (
    "floating-point sampler (numpy Generator): the guarantee assumes idealized real "
    "arithmetic; finite-precision attacks on floating-point noise are not covered"
)


@dataclass(frozen=True)
class UtilityValue:
    """A predicted utility: its value, how it was obtained, and a CI when estimated.

    A ``ci_volume`` also carries ``log_value``, the natural log of the volume (:meth:`volume`): a region of a few
    hundred dimensions exceeds the double range (:mod:`dpopt.stats.log_volume`), so families are compared on it
    (:meth:`score`) and ``value`` is e^log_value, +inf beyond the range; a certificate then writes ``value`` null
    and states the volume by ``log_value`` (and a Monte Carlo's interval by ``log_ci95``)."""

    metric: str
    value: float
    method: str
    ci: tuple[float, float] | None = None
    log_value: float | None = None
    log_ci: tuple[float, float] | None = None

    @classmethod
    def volume(cls, log_value: float, method: str, log_ci: tuple[float, float] | None = None) -> "UtilityValue":
        """A ``ci_volume`` of natural log ``log_value`` (and a 95% CI whose ends have the logs ``log_ci``)."""
        ci = None if log_ci is None else (exp_or_inf(log_ci[0]), exp_or_inf(log_ci[1]))
        return cls("ci_volume", exp_or_inf(log_value), method, ci, float(log_value), log_ci)

    @property
    def score(self) -> float:
        """The number families are compared on: ``log_value`` when there is one (a volume), else ``value``."""
        return self.value if self.log_value is None else self.log_value

    def to_dict(self) -> dict:
        out = {"metric": self.metric, "value": _finite_or_none(self.value), "method": self.method}
        if self.ci is not None:
            out["ci95"] = [_finite_or_none(v) for v in self.ci]
        if self.log_value is not None:
            out["log_value"] = self.log_value
        if self.log_ci is not None:
            out["log_ci95"] = [_finite_or_none(v) for v in self.log_ci]
        return out


def _finite_or_none(value: float) -> float | None:
    """``value``, or None (JSON null) when it is ±inf or NaN (a volume beyond the double range)."""
    return value if math.isfinite(value) else None


def _log_volume(value: float, family: str) -> float:
    """log of a volume stated as a plain float; a volume of 0, +inf or NaN is refused: its logarithm is lost."""
    if not 0.0 < value < math.inf:
        raise UnsupportedSpecError(
            "utility.metric",
            f"the {family} confidence region's volume is {value} in floating point (out of range in this "
            "dimension, and the family states no log-volume); compare l2 instead",
        )
    return math.log(value)


def better(metric: str) -> str:
    """``"higher"`` for utilities to maximise (usefulness, test power), else ``"lower"``."""
    return "higher" if metric in ("usefulness", "test_power") else "lower"


class Mechanism(ABC):
    """An additive-noise mechanism M(X) = φ(X) + Z, frozen once designed."""

    family: ClassVar[str]
    title: ClassVar[str]
    needs_integer_answers: bool = False
    """True when :meth:`release` measures exact integer answers on a lattice (:mod:`dpopt.mechanisms.lattice`)."""

    @property
    def exact_noise(self) -> bool:
        """True when no floating-point noise touches the release: an exact integer sampler (``integer_noise``)
        or a lattice measurement (:mod:`dpopt.mechanisms.lattice`)."""
        return bool(getattr(self, "integer_noise", False) or self.needs_integer_answers)

    @property
    def integer_release(self) -> bool:
        """True when :meth:`release` maps integer answers to integers (integer noise added to counts), so that a
        release path may publish them as int64; a lattice sum or mean, whose release g(N + η)/n is real, says False
        (:class:`dpopt.mechanisms.exact_sum._LatticeSum`)."""
        return bool(getattr(self, "integer_noise", False))
    registered: ClassVar[bool] = True
    """False on a class that states a family's name for the designs it serves without being that family's
    registered class (the registered class routes those designs to it; e.g. ``gaussian_optimal`` on a scalar sum,
    :class:`dpopt.mechanisms.gaussian_optimal.OptimalSumGaussian`)."""
    noise_in_span: ClassVar[bool] = False
    """True when every noise draw lies in span(S): the release then keeps every statistic
    that is constant on the neighbourhood (required when the spec has invariants)."""
    dimension: int

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        overridden = [name for name in FINAL_METHODS if name in cls.__dict__]
        if overridden:
            raise TypeError(
                f"{cls.__name__} redefines {', '.join(overridden)}: these are final in Mechanism; "
                "implement the private hooks (_sample, _release, _utility, _privacy_checks) instead"
            )
        if "family" in cls.__dict__ and cls.__dict__.get("registered", True):
            _REGISTRY[cls.family] = cls
            register_family(cls.family, cls.__module__)

    # ---------------------------------------------------------------- facts
    @classmethod
    @abstractmethod
    def supports(cls, problem: Problem) -> str | None:
        """None if the family can meet the spec's target on ``problem.space``, else the reason."""

    @classmethod
    def utility_bound(cls, problem: Problem) -> float | None:
        """A proven bound on the predicted utility of any design of this family for the spec
        (below it for a metric to minimise, above it for one to maximise), cheap next to
        :meth:`design`; None when the family knows none. The selector does not design a
        family whose bound a calibrated candidate already beats."""
        return None

    @classmethod
    @abstractmethod
    def design(cls, problem: Problem) -> "Mechanism":
        """The calibrated instance for the spec's privacy target and utility."""

    @classmethod
    def design_value(cls, problem: Problem) -> float:
        """The predicted utility of :meth:`design` for the spec, as
        ``cls.design(problem).expected_utility(problem.spec.utility).value`` (the report's utility against the
        budget re-designs a family at other budgets and needs this number only). A family whose design also
        computes what the number does not need (baselines, records) overrides it with the same number, cheaper."""
        return cls.design(problem).expected_utility(problem.spec.utility).value

    @classmethod
    @abstractmethod
    def from_parameters(cls, parameters: dict, space: SensitivitySpace) -> "Mechanism":
        """Rebuild the instance a certificate describes."""

    @property
    @abstractmethod
    def parameters(self) -> dict:
        """JSON-ready parameters (enough, with the space, to rebuild the mechanism)."""

    @abstractmethod
    def _sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """``size`` noise draws, shape (size, d)."""

    def latent_sample(self, size: int, rng: np.random.Generator) -> np.ndarray:
        """``size`` draws of W, shape (size, d), for a noise law Z = P·W with P a projection
        (:class:`~dpopt.noise.law.ProductLaw` with ``projection``): the sampler's independent coordinates before
        P, such that :meth:`sample` with a generator in the same state returns their images P·W.

        Raises
        ------
        NotImplementedError
            For families whose law is not a projected product law.
        """
        raise NotImplementedError(f"the {self.family} family's noise law is not a projected product law")

    def sampler_check_draws(self, default: int) -> int:
        """Draws for the ``utility.sampler`` claim: ``default``; a family whose draws are costly may take fewer
        and state why that many still resolve a wrong sampler (the claim's 5-SE tolerance is estimated from them)."""
        return default

    def _release(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The outputs at the true answers ``values`` (shape (m, d)), one independent release per row.

        Default: φ(X) + Z, Z from :meth:`_sample` (additive noise independent of the answer).
        """
        return values + self._sample(rng, values.shape[0])

    @abstractmethod
    def _privacy_checks(self, space: SensitivitySpace, privacy: Privacy) -> list[Check]:
        """Evaluate the guarantee at these parameters, independently of the calibration."""

    def _utility(self, utility: Utility) -> UtilityValue | None:
        """A family's own prediction for ``utility`` (e.g. a metric only it defines), or None
        to use the closed forms below, then Monte Carlo. May raise UnsupportedSpecError."""
        return None

    def _closed_form_method(self) -> str:
        """How a closed-form prediction is described in a certificate."""
        return "closed form"

    def scope_checks(self, problem: Problem) -> list[Check]:
        """Checks that parameters taken from the compiled spec (e.g. a public box) match it;
        none by default."""
        return []

    def notes(self) -> list[str]:
        """Caveats a certificate must carry (numerics, released components)."""
        return [IDEALIZED_NUMERICS]

    def privacy_summary(self, space: SensitivitySpace) -> dict:
        """The mechanism's own privacy in other languages (e.g. its exact μ, ρ)."""
        return {}

    def noise_law(self):
        """The law of the emitted noise (:mod:`dpopt.noise.law`), or None.

        ``dpopt verify`` analyses it by a second route, independent of
        :meth:`privacy_checks` (:mod:`dpopt.certificate.second_route`); the audit uses its
        log density as the likelihood-ratio statistic. None, or a string giving the reason
        (e.g. noise that depends on the answer): the certificate says that the second route
        is not available for this mechanism.
        """
        return None

    def cell_variances(self) -> np.ndarray | None:
        """Var Z_i of each released coordinate of Gaussian noise, in closed form, for a family whose
        :meth:`noise_law` is too large to state (the per-cell errors of the certificate); None
        otherwise."""
        return None

    def sub_gaussian_cell_proxies(self) -> tuple[np.ndarray, np.ndarray, str] | None:
        r"""For lattice noise that is a linear image :math:`Z_i = \sum_k c_{ik} W_k` of independent discrete
        Gaussians :math:`W_k \sim N_\mathbb{Z}(0, \sigma_k^2)` and is not stated as a product law (an exact
        measurement whose release mixes several lattice measurements): (Var Z_i in closed form, the sub-Gaussian
        variance proxy :math:`v_i = \sum_k c_{ik}^2\sigma_k^2`, how both were obtained) per released
        coordinate. The per-cell errors then bound the margin by the sub-Gaussian tail (Canonne, Kamath & Steinke
        2020, Corollary 9; :mod:`dpopt.certificate.per_cell`) instead of a normal approximation. None otherwise."""
        return None

    def linear_noise_image(self) -> tuple[np.ndarray, tuple] | None:
        r"""For noise that is a linear image :math:`Z = CW` of independent one-dimensional laws W_k and is not
        stated as a product law in an orthonormal basis (an exact measurement whose release mixes several lattice
        draws): (C, dense d × r; the r marginal laws of W, :class:`~dpopt.noise.marginal.Marginal`). The per-cell
        errors then take the exact quantile of each cell's law by convolution where C allows it
        (:mod:`dpopt.certificate.linear_tails`). None otherwise, or when C would be too large to state densely."""
        return None

    def unimodal_cell_variances(self) -> np.ndarray | None:
        """For noise that is a linear image of independent symmetric unimodal noise (Laplace) whose per-cell law
        has no closed form: Var Z_i of each released coordinate in closed form; the per-cell errors then take the
        standard error exactly and bound the margin by Gauss's inequality (no Monte Carlo). None otherwise."""
        return None

    def variates_per_draw(self) -> int:
        """Random variates one noise draw takes, for bounding the cost of a Monte Carlo (default: d)."""
        return self.dimension

    def cell_law_groups(self) -> tuple[np.ndarray, np.ndarray] | None:
        """For noise that is not Gaussian and whose per-cell law has no closed form: (Var Z_i in closed form,
        a group label per released cell such that the cells of one group have the same noise law, by a
        symmetry of the family); the per-cell errors then take the standard error exactly and pool a Monte
        Carlo of the margin over each group. None otherwise."""
        return None

    def _expected_l2(self, workload: np.ndarray | None) -> float | None:
        return None

    def _expected_l1(self) -> float | None:
        return None

    def _usefulness(self, gamma: float) -> float | None:
        return None

    def _max_variance(self) -> float | None:
        return None

    def _ci_volume(self, alpha: float) -> float | None:
        """Closed-form ``ci_volume`` at level 1 − α (see :meth:`expected_utility`), or None."""
        return None

    def _log_ci_volume(self, alpha: float) -> float | None:
        """Closed-form log of ``ci_volume`` at level 1 − α, or None: stated by a family whose region can exceed the
        double range (:mod:`dpopt.stats.log_volume`) in place of :meth:`_ci_volume`."""
        return None

    def _test_power(self, alternative: np.ndarray, alpha: float) -> float | None:
        """Closed-form ``test_power`` against the shift ``alternative`` at level α, or None."""
        return None

    def _inference_draws(
        self, metric: str, z: np.ndarray, alpha: float, alternative: np.ndarray | None
    ) -> np.ndarray | None:
        """Per-draw Monte Carlo terms whose mean is ``ci_volume`` or ``test_power``, from
        noise draws ``z`` (shape (size, d)); None when the family has no estimator (it
        needs the noise law: the region's density threshold, the likelihood ratio)."""
        return None

    # ------------------------------------------------------------ public layer
    def sample(self, size: int, rng: np.random.Generator | None = None) -> np.ndarray:
        """``size`` draws of the noise, as an array of shape (size, d).

        Without ``rng`` the draws come from an AES-CTR CSPRNG keyed with OS entropy
        (:func:`dpopt.rng.secure_generator`), never from a predictable seed. Draws that would
        exceed the memory limit are refused before any is made
        (:func:`dpopt.core.memory.require_memory`).
        """
        if int(size) != size or size < 0:
            raise ValueError(f"size must be a non-negative integer (got {size})")
        require_memory(dense_bytes(2, size, self.dimension),  # the draws and one working copy
                       f"{int(size):,} noise draws of dimension {self.dimension:,}")
        rng = secure_generator() if rng is None else rng
        out = np.asarray(self._sample(rng, int(size)), dtype=float)
        return out.reshape(int(size), self.dimension)

    def sample_coordinates(self, coordinates: Sequence[int], size: int, rng: np.random.Generator) -> np.ndarray:
        """``size`` draws of the noise on the given output coordinates only, shape (size, len(coordinates)): the
        law of those coordinates under :meth:`sample`. Default: full draws, restricted; a family whose coordinates
        depend on part of its randomness draws that part alone (the report's noise panels)."""
        return self.sample(size, rng)[:, list(coordinates)]

    def release(self, true_value, rng: np.random.Generator | None = None) -> np.ndarray:
        """The mechanism's output M(X) at the query's true answer φ(X).

        Parameters
        ----------
        true_value : array_like, shape (m, d), or any shape with d entries
            m true answers (e.g. one per group), each row released independently in one
            vectorised draw; or one answer (e.g. a table in its own shape, read row-major).
        rng : numpy.random.Generator, optional
            Default: an AES-CTR CSPRNG keyed with OS entropy (:func:`dpopt.rng.secure_generator`).

        Returns
        -------
        numpy.ndarray
            Shape (m, d) for m answers, (d,) for one.

        Raises
        ------
        ValueError
            ``true_value`` does not have d entries per row.
        DataError
            A family whose output depends on a public box gets an answer outside it.
        """
        value = np.asarray(true_value, dtype=float)
        single = not (value.ndim == 2 and value.shape[1] == self.dimension)
        if single and value.size != self.dimension:
            raise ValueError(
                f"true_value must have {self.dimension} entries, or {self.dimension} per row "
                f"(got shape {np.shape(true_value)})"
            )
        values = value.reshape(1, -1) if single else value
        rng = secure_generator() if rng is None else rng
        out = np.asarray(self._release(values, rng), dtype=float).reshape(values.shape)
        return out[0] if single else out

    def privacy_checks(self, space: SensitivitySpace, privacy: Privacy) -> list[Check]:
        """Evaluate the guarantee at these parameters on ``space``, independently of the calibration.

        Raises
        ------
        ValueError
            The space's dimension is not the mechanism's.
        """
        if space.dimension != self.dimension:
            raise ValueError(f"the space has dimension {space.dimension}, the mechanism {self.dimension}")
        checks = list(self._privacy_checks(space, privacy))
        if not checks:
            raise ValueError(f"{type(self).__name__}._privacy_checks returned no check")
        return checks

    def expected_utility(self, utility: Utility) -> UtilityValue:
        """The predicted utility for the spec's metric: closed form, else Monte Carlo.

        Metrics: ``l2`` = E‖W Z‖₂² (W the workload, identity by default; Diag(√w) for
        ``weights`` w); ``l1`` =
        E‖Z‖₁; ``usefulness`` = mean over coordinates of P(|Z_i| ≤ γ);
        ``max_variance`` = max_i Var Z_i; ``ci_volume`` = the r-dimensional volume of the
        smallest 1 − α confidence region for P_V φ (V = span of the sensitivity space,
        r = its rank), i.e. the highest-density region of P_V Z: every family is judged on
        the component the adjacency protects, and projecting a release onto V is free
        post-processing, so a family that adds noise off V is not charged for it here
        (``l2`` charges it); ``test_power`` = power of the Neyman–Pearson level-α test of
        a shift η (``alternative``) from the full release (a shift off V that a family
        releases exactly is detected with power 1).
        """
        metric = utility.metric
        if utility.weights is not None and len(utility.weights) != self.dimension:
            raise SpecError(
                "utility.weights",
                f"has {len(utility.weights)} entries but the query has dimension {self.dimension}",
            )
        workload = workload_matrix(utility)
        if workload is not None and workload.shape[1] != self.dimension:
            raise SpecError(
                "utility.workload",
                f"has {workload.shape[1]} columns but the query has dimension {self.dimension}",
            )
        alternative = None if utility.alternative is None else np.asarray(utility.alternative, dtype=float)
        if alternative is not None and alternative.shape != (self.dimension,):
            raise SpecError(
                "utility.alternative",
                f"has {alternative.size} entries but the query has dimension {self.dimension}",
            )
        own = self._utility(utility)
        if own is not None:
            return self._with_log_volume(own)
        closed = {
            "l2": lambda: self._expected_l2(workload),
            "l1": self._expected_l1,
            "usefulness": lambda: self._usefulness(utility.gamma),
            "max_variance": self._max_variance,
            "ci_volume": lambda: self._ci_volume(utility.alpha),
            "test_power": lambda: self._test_power(alternative, utility.alpha),
        }
        if metric not in closed:
            raise UnsupportedSpecError("utility.metric", f"{self.family} has no '{metric}' prediction")
        log_value = self._log_ci_volume(utility.alpha) if metric == "ci_volume" else None
        if log_value is not None:
            return self._with_log_volume(UtilityValue.volume(log_value, self._closed_form_method()))
        value = closed[metric]()
        if value is not None:
            return self._with_log_volume(UtilityValue(metric, float(value), self._closed_form_method()))
        return self._monte_carlo(metric, workload, utility.gamma, alpha=utility.alpha, alternative=alternative)

    def _with_log_volume(self, found: UtilityValue) -> UtilityValue:
        """A ``ci_volume`` with its ``log_value`` (the log of a family's plain volume, when it states none), so that
        families compare on it (:attr:`UtilityValue.score`); a volume of 0, or beyond the double range without its
        logarithm, or a log-volume that is not finite, is refused. Other metrics as they are."""
        if found.metric != "ci_volume":
            return found
        log_value = _log_volume(found.value, self.family) if found.log_value is None else found.log_value
        if not math.isfinite(log_value):
            raise UnsupportedSpecError("utility.metric", f"the {self.family} confidence region's log-volume is "
                                       f"{log_value} (a region of volume 0 or unbounded); compare l2 instead")
        return replace(found, log_value=log_value)

    def _monte_carlo(
        self, metric: str, workload, gamma, draws: int | None = None, alpha=None, alternative=None
    ) -> UtilityValue:
        """Estimate a metric from ``draws`` noise samples (fixed seed); 95% CI from the standard error.

        By default 200,000 draws, fewer for large d so that draws × d stays ≤ 2·10⁷; drawn in batches of
        at most :data:`MONTE_CARLO_BATCH` values (:func:`monte_carlo_batches`), so its memory does not grow with d.
        The mean and the standard error are formed on the terms rescaled by a power of two (exact:
        :func:`~dpopt.stats.log_volume.scaled_moments`), so that they are finite wherever the mean is; a
        ``ci_volume`` is estimated in the log domain (:func:`_volume_estimate`), finite beyond the double range.

        Raises
        ------
        UnsupportedSpecError
            For ``ci_volume`` / ``test_power`` when the family has no estimator.
        """
        inference = metric in ("ci_volume", "test_power")
        if inference and type(self)._inference_draws is Mechanism._inference_draws:
            raise UnsupportedSpecError(
                "utility.metric",
                f"{self.family} has no '{metric}' prediction (no closed form, and no estimator for its noise law)",
            )
        if draws is None:
            draws = min(MONTE_CARLO_DRAWS, max(2_000, 20_000_000 // self.dimension))
        rng = np.random.default_rng(MONTE_CARLO_SEED)
        terms, moments = [], None
        for size in monte_carlo_batches(draws, self.dimension):
            z = self.sample(size, rng)
            per = None
            if metric == "l2":
                wz = z if workload is None else z @ workload.T
                per = np.sum(wz**2, axis=1)
            elif metric == "l1":
                per = np.sum(np.abs(z), axis=1)
            elif metric == "usefulness":
                per = np.mean(np.abs(z) <= gamma, axis=1)
            elif inference:
                per = self._inference_draws(metric, z, alpha, alternative)
            if per is None:  # no per-draw term: the largest per-coordinate variance
                moments = merge_moments(moments, z)
            else:
                terms.append(per)
        if moments is not None:
            count, _, m2 = moments
            return UtilityValue(metric, float((m2 / count).max()), f"Monte Carlo, {draws} draws")
        method = f"Monte Carlo, {draws} draws, seed {MONTE_CARLO_SEED}"
        if metric == "ci_volume":
            return _volume_estimate(terms, method)
        mean, se, exponent = scaled_moments(np.concatenate(terms))
        return UtilityValue(metric, math.ldexp(mean, exponent), method,
                            (math.ldexp(mean - 1.96 * se, exponent), math.ldexp(mean + 1.96 * se, exponent)))


def _volume_estimate(terms: list, method: str) -> UtilityValue:
    """The ``ci_volume`` Monte Carlo of per-batch terms (arrays in the volume's units, or
    :class:`~dpopt.stats.log_volume.VolumeTerms` in units of e^L) in the log domain
    (:func:`~dpopt.stats.log_volume.scaled_mean`): log of the mean, and the 95% CI's ends log(mean·(1 ± 1.96·SE/mean))
    (the lower −inf when 1.96·SE reaches the mean)."""
    batches = [t if isinstance(t, VolumeTerms) else VolumeTerms(0.0, np.asarray(t, dtype=float)) for t in terms]
    log_mean, relative_se = scaled_mean(batches)
    lower = 1.0 - 1.96 * relative_se
    log_ci = (log_mean + math.log(lower) if lower > 0.0 else -math.inf, log_mean + math.log1p(1.96 * relative_se))
    return UtilityValue.volume(log_mean, method, log_ci)


class FamilyRegistry(Mapping[str, type[Mechanism]]):
    """Families by spec name (:data:`dpopt.core.families.FAMILY_MODULES`, which every subclass of
    :class:`Mechanism` that declares a ``family`` joins). Looking a family up imports its module;
    listing the names imports nothing."""

    def __getitem__(self, name: str) -> type[Mechanism]:
        if name in FAMILY_MODULES:  # always: a family's module may refine a class another module defined
            importlib.import_module(FAMILY_MODULES[name])
        return _REGISTRY[name]

    def __contains__(self, name: object) -> bool:
        return name in _REGISTRY or name in FAMILY_MODULES  # without importing (Mapping's would look it up)

    def __iter__(self) -> Iterator[str]:
        return iter(family_names())

    def __len__(self) -> int:
        return len(family_names())


def registry() -> FamilyRegistry:
    """Every family by spec name, each imported when first looked up (:class:`FamilyRegistry`)."""
    return FamilyRegistry()
