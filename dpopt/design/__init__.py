"""Mechanism design across families: every family's candidate, the selection, and comparisons."""

from dpopt.design.select import Candidate, design_candidates, select

__all__ = ["Candidate", "design_candidates", "select"]
