"""The bottom layer: types and numerical helpers every stage shares.

:class:`~dpopt.core.checks.Check` (one verified claim), :func:`~dpopt.core.rounding.nudge_until`
(certify a root-found value by directed rounding), :func:`~dpopt.core.roots.bisect_feasible`
(the one bracketed bisection) and :mod:`~dpopt.core.normal` (Φ, log Φ, Φ⁻¹ and the error
functions on numpy alone). Nothing here imports a dpopt module other than :mod:`dpopt.errors`.
"""
