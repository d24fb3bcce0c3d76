"""The bottom layer: types and numerical helpers every stage shares.

:class:`~dpopt.core.checks.Check` (one verified claim), :func:`~dpopt.core.rounding.nudge_until`
(certify a root-found value by directed rounding) and :func:`~dpopt.core.roots.bisect_feasible`
(the one bracketed bisection). Nothing here imports a dpopt module other than
:mod:`dpopt.errors`.
"""
