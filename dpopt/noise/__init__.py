"""Noise distributions: densities, moments, tails and samplers, with no privacy calibration.

Mechanisms (:mod:`dpopt.mechanisms`) and privacy calibrations (:mod:`dpopt.privacy`) both
build on these facts; keeping them in a leaf package lets either import them.
"""

from dpopt.noise.generalized_gaussian import GeneralizedGaussian

__all__ = ["GeneralizedGaussian"]
