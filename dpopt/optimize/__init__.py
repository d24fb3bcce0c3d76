"""Mechanism design: calibration and selection across families."""

from dpopt.optimize.select import Candidate, design_candidates, select

__all__ = ["Candidate", "design_candidates", "select"]
