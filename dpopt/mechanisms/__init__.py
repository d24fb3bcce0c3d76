"""Noise families. Every module in this package is imported, so each family registers itself."""

import importlib
import pkgutil

from dpopt.mechanisms.base import Mechanism, UtilityValue, better, registry

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

__all__ = ["Mechanism", "UtilityValue", "better", "registry"]
