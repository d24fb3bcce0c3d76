"""Noise families. Each family's module is imported when the family is first looked up
in :func:`registry` (declared in :data:`dpopt.core.families.FAMILY_MODULES`)."""

from dpopt.mechanisms.base import Mechanism, UtilityValue, better, registry

__all__ = ["Mechanism", "UtilityValue", "better", "registry"]
