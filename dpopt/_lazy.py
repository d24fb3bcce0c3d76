"""Package namespaces whose names are imported on first use (PEP 562, as scipy does).

``import dpopt`` then costs next to nothing: ``dpopt --help`` and commands that need few
stages do not pay for the others (scipy.stats, cvxpy, every noise family). Each stage's
module still imports what it needs at its top.
"""

from __future__ import annotations

import importlib
import sys
import types


class _LazyPackage(types.ModuleType):
    """A package whose exported names resolve on first use.

    Importing a submodule binds it on its parent package; when an exported name is also a
    submodule's name (``dpopt.solve`` the function, :mod:`dpopt.solve` the module), that
    binding would hide the export, so an exported name is never bound to a module.
    """

    _exports: dict[str, str]

    def __setattr__(self, name: str, value) -> None:
        if name in self._exports and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)

    def __getattr__(self, name: str):
        module = self._exports.get(name)
        if module is None:
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        super().__setattr__(name, value)
        return value

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(self._exports))


def lazy_exports(package: str, exports: dict[str, str]) -> list[str]:
    """Make ``package`` resolve each name of ``exports`` (name → defining module) on first use.

    Returns the names, for ``__all__``.
    """
    module = sys.modules[package]
    module.__class__ = _LazyPackage
    object.__setattr__(module, "_exports", dict(exports))
    return list(exports)


class _LazyModule(types.ModuleType):
    """A stand-in for a module, imported on its first attribute look-up (then cached on the stand-in)."""

    def __getattr__(self, name: str):
        module = importlib.import_module(self.__name__)
        self.__dict__.update(module.__dict__)
        return getattr(module, name)


def lazy_module(name: str) -> types.ModuleType:
    """``name`` (e.g. ``"scipy.optimize"``), imported when one of its attributes is first used.

    A module that calls, say, ``optimize.brentq`` on one rare path writes
    ``optimize = lazy_module("scipy.optimize")`` instead of ``from scipy import optimize``: a command
    that never takes that path does not pay for the import (scipy.optimize costs about three times
    ``import numpy``). Already imported, the module itself is returned.
    """
    return sys.modules.get(name) or _LazyModule(name)
