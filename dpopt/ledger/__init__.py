"""A privacy budget ledger that lasts: every release from one data set counted, composed exactly,
refused past the budget (:mod:`dpopt.ledger.store`, :mod:`dpopt.ledger.compose`)."""

from __future__ import annotations

from dpopt.ledger.compose import Spending, release_guarantee, spending
from dpopt.ledger.store import Ledger, parse_budget

__all__ = ["Ledger", "Spending", "parse_budget", "release_guarantee", "spending"]
