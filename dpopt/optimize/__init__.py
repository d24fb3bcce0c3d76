"""Calibrators and convex programs the families design with: the optimal Gaussian covariance,
query scaling ξ, the R²DP mixture weights (selection across families: :mod:`dpopt.design`)."""
