"""Noise laws: densities, tails, moments and samplers, with no privacy calibration.

The one home of the facts about each law, read by the families (:mod:`dpopt.mechanisms`),
the privacy-loss distributions of the second route (:mod:`dpopt.privacy.pld`,
:mod:`dpopt.certificate.second_route`) and the audit:

* :mod:`~dpopt.noise.marginal` — the interface of a symmetric unimodal law on ℝ or ℤ
  (log-density, tail; CDF, window, absolute moments, P(|W| ≤ γ) derived);
* :mod:`~dpopt.noise.gaussian`, :mod:`~dpopt.noise.laplace`,
  :mod:`~dpopt.noise.discrete_gaussian`, :mod:`~dpopt.noise.discrete_laplace` (with the
  exact integer samplers), :mod:`~dpopt.noise.generalized_gaussian`,
  :mod:`~dpopt.noise.staircase`, :mod:`~dpopt.noise.discrete_staircase` (its restriction to a
  lattice, with its exact sampler), :mod:`~dpopt.noise.second_folds` (R²DP: Laplace noise
  with a random rate), :mod:`~dpopt.noise.discrete_laplace_mixture` (R²DP on ℤ,
  sampled exactly), :mod:`~dpopt.noise.discrete_generalized_gaussian` (with its exact
  sampler) — one module per law;
* :mod:`~dpopt.noise.bernoulli`, :mod:`~dpopt.noise.lazy_bernoulli` — exact Bernoulli draws of a
  rational probability, and of a real one known through arb enclosures (``bernoulli_lazy``);
* :mod:`~dpopt.noise.law` — the multivariate law a mechanism emits (products in an
  orthonormal basis, K-norm densities, post-processed stages);
* :mod:`~dpopt.noise.prior_metrics` — prior-dependent utility metrics of a law (R²DP Table 1).

``GeneralizedGaussian`` is imported on first use (PEP 562), so that a Gaussian law does not
load the generalized Gaussian's module (scipy.special's gamma functions).
"""

from __future__ import annotations

from dpopt._lazy import lazy_exports

__all__ = lazy_exports(__name__, {"GeneralizedGaussian": "dpopt.noise.generalized_gaussian"})
