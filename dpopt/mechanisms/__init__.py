"""Noise families. Each family's module is imported when the family is first looked up
in :func:`registry` (declared in :data:`dpopt.mechanisms.base.FAMILY_MODULES`)."""

from dpopt.mechanisms.base import FAMILY_MODULES, Mechanism, UtilityValue, better, registry

__all__ = ["FAMILY_MODULES", "Mechanism", "UtilityValue", "better", "registry"]
