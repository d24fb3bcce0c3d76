"""Second folds from their JSON ``parameters`` (the form a certificate stores)."""

from __future__ import annotations

import math

from dpopt.noise.second_folds.base import SecondFold
from dpopt.noise.second_folds.closed_form import GammaFold, NoncentralChi2Fold, RayleighFold, UniformFold
from dpopt.noise.second_folds.discrete import DiscreteFold
from dpopt.noise.second_folds.sum import SumFold
from dpopt.noise.second_folds.truncated_normal import TruncatedNormalFold

_KINDS = {
    "discrete": lambda p: DiscreteFold(p["atoms"], p["weights"]),
    "gamma": lambda p: GammaFold(p["shape"], p["scale"]),
    "uniform": lambda p: UniformFold(p["low"], p["high"]),
    "truncated_normal": lambda p: TruncatedNormalFold(
        p["mu"], p["sigma"], p["low"], math.inf if p.get("high") is None else p["high"]),
    "noncentral_chi2": lambda p: NoncentralChi2Fold(p["df"], p["noncentrality"], p.get("scale", 1.0)),
    "rayleigh": lambda p: RayleighFold(p["sigma"]),
    "sum": lambda p: SumFold([fold_from_parameters(c) for c in p["components"]]),
}


def fold_from_parameters(parameters: dict) -> SecondFold:
    """Rebuild a second fold from its ``parameters``.

    Raises
    ------
    ValueError
        Unknown ``kind`` or invalid parameters.
    """
    kind = parameters.get("kind") if isinstance(parameters, dict) else None
    if kind not in _KINDS:
        raise ValueError(f"unknown second-fold kind {kind!r} (known: {', '.join(_KINDS)})")
    try:
        return _KINDS[kind](parameters)
    except KeyError as exc:
        raise ValueError(f"second fold {kind!r} is missing parameter {exc}") from None
