r"""A bounded sum or mean on a dyadic lattice: real-valued answers measured exactly.

A sum of values clamped to [L, U] is not an integer, so integer noise cannot be added to it as it is. On the
lattice gℤ, g = 2^e a power of two chosen from the noise scale, each record's value is rounded to the nearest
lattice point, r(x) = ⌊x/g + ½⌋ (half up, in exact arithmetic: a double x is a dyadic rational, so x/g is
exact), and the answer measured is the integer N = Σ_i r(x_i) in units of g. The noise η (discrete Laplace or
discrete Gaussian) is added to N in integer arithmetic; the published number g(N + η)/n (n = 1 for a sum, the
public size for a mean) is a point of the lattice (g/n)ℤ, formed in floating point only as the output's
formatting: post-processing of the integer N + η (the approach of OpenDP's ``make_laplace``/``make_gaussian``
over floats, "the rounding charged to the sensitivity"; Mironov, CCS 2012, for the attack it closes).

**The sensitivity in units of g** (the rounding charged to it). The floor property ⌊a⌋ − ⌊b⌋ ≤ ⌈a − b⌉
gives, for a − b ≤ D, r(a) − r(b) ≤ ⌈D/g⌉. Hence

- replace-one (Hamming k): a record moves N by r(x') − r(x) ≤ ⌈(U − L)/g⌉, so Δ_u = k⌈(U − L)/g⌉;
- add/remove (sums): a record moves N by |r(x)| ≤ ⌈max(|L|, |U|)/g⌉ = Δ_u;
- a person (``data.privacy_unit``: at most R = min(k, c) rows in the answer after bounding, each row rounded on
  its own): add/remove moves N by a sum of at most R values r(x), so Δ_u = R⌈max(|L|, |U|)/g⌉; replace (one
  person's rows by another's, either possibly fewer) by Σ r(x) − Σ r(x′) with r(x) ≤ ⌈max(U, 0)/g⌉ and
  −r(x′) ≤ ⌈max(−L, 0)/g⌉, so Δ_u = R(⌈max(U, 0)/g⌉ + ⌈max(−L, 0)/g⌉). The unit u = Δ_u/R a row moves N by is
  :attr:`RealLattice.row_shift`: the stacked sums of a grouped release move by u times a person's rows per group
  (:func:`dpopt.sensitivity.person.grouped_norms` with ``per_row = u``).

The same bounds hold when an answer A (a real number) is rounded as a whole, N = ⌊A/g + ½⌋, for neighbouring
answers at most D apart (a person's D = R·max(|L|, |U|) or R(max(U, 0) − min(L, 0)), and ⌈RD′/g⌉ ≤ R⌈D′/g⌉),
so :meth:`RealLattice.units` of an answer handed to ``Mechanism.release`` is covered by the same Δ_u as the
record-by-record sum of :meth:`RealLattice.lattice_sum` and of ``dpopt release``.
At most one unit g more than the continuous sensitivity: the lattice is chosen so that this costs below the
stated margin (:data:`LATTICE_BITS`), and the design states the measured cost.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Iterable

import numpy as np

from dpopt.core.checks import Check
from dpopt.errors import CalibrationError, DataError
from dpopt.domain.queries import NumericQuery
from dpopt.problem import Problem
from dpopt.sensitivity.person import most_rows
from dpopt.sensitivity.plain import hamming_factor
from dpopt.sensitivity.space import SensitivitySpace
from dpopt.sensitivity.subspace import FullSpace

LATTICE_BITS = 20
"""The lattice spacing of a Laplace measurement: g ≤ 2^-20 of both the noise scale and the sensitivity (in sum
units), so that the unit the rounding adds to Δ costs at most 2^-20 relative in the scale."""

MAX_UNITS = 2**50
"""Largest |N| (in units of g) served: N·g is then a double exactly, and N + η stays in int64."""

EXACT_SUM_NOTE = (
    "exact measurement on a dyadic lattice: each record's value is rounded half up to the lattice g = {g} in exact "
    "arithmetic and summed exactly (dpopt release; an answer handed to Mechanism.release is rounded as a whole, "
    "which the same sensitivity covers), the integer sum N (units of g) receives {noise} sampled in integer "
    "arithmetic (Canonne, Kamath & "
    "Steinke 2020), and the published value g(N + η)/{divisor} is formed from the integer N + η alone "
    "(post-processing); the rounding is charged to the sensitivity (Δ_u = {shift} units), so the guarantee covers "
    "the numbers as computed. Randomness: the numpy Generator passed to release (dpopt release: AES-CTR CSPRNG "
    "keyed from OS entropy unless --insecure-seed). Timing: the noise is drawn before it is added, so the random "
    "words and rejection rounds depend on the scale and the noise drawn, never on the data; not covered: the "
    "running time's dependence on the noise drawn"
)


@dataclass(frozen=True)
class RealLattice:
    """The lattice gℤ, g = 2^``exponent``, of a bounded sum or mean, and its sensitivity Δ_u in units of g.

    Attributes
    ----------
    exponent : int
        g = 2^exponent.
    lower, upper : Fraction
        The clamp bounds [L, U] (the query's).
    divisor : int
        1 for a sum; the public n for a mean (the answer is gN/n).
    shift : int
        Δ_u, the largest move of N between neighbours (module docstring).
    rows : int
        R, the most rows of one person in the answer (``data.privacy_unit``); 1 for record-level adjacency.
    """

    exponent: int
    lower: Fraction
    upper: Fraction
    divisor: int
    shift: int
    rows: int = 1

    @property
    def row_shift(self) -> int:
        """u = Δ_u/R, the most one row moves N by (module docstring)."""
        return self.shift // self.rows

    @property
    def shift_text(self) -> str:
        """Δ_u in words: the number, and for a person-level sum R × u."""
        return str(self.shift) if self.rows == 1 else f"{self.shift} = {self.rows} rows × {self.row_shift}"

    @property
    def granularity(self) -> Fraction:
        """g = 2^exponent, exactly."""
        return Fraction(2) ** self.exponent

    @property
    def unit(self) -> Fraction:
        """The published lattice's spacing g/n (n = :attr:`divisor`)."""
        return self.granularity / self.divisor

    def round_value(self, x: Fraction) -> int:
        """r(x) = ⌊x/g + ½⌋ of one value, exactly."""
        return math.floor(Fraction(x) / self.granularity + Fraction(1, 2))

    def lattice_sum(self, values: Iterable[float]) -> float:
        """The answer on the lattice from the records' values: g·Σ r(clamp(x))/n, each value clamped to [L, U] and
        rounded in exact arithmetic (the double it returns is the lattice answer exactly for a sum, and its nearest
        double for a mean, which :meth:`units` maps back to N)."""
        total = sum(self.round_value(min(max(Fraction(float(x)), self.lower), self.upper)) for x in values)
        return float(total * self.unit)

    def units(self, values: np.ndarray) -> np.ndarray:
        """N = ⌊A·n/g + ½⌋ of each answer A (exact rational arithmetic on the double), as int64.

        Raises
        ------
        DataError
            A non-finite answer, or one beyond :data:`MAX_UNITS` units.
        """
        flat = np.asarray(values, dtype=float).reshape(-1)
        if not np.all(np.isfinite(flat)):
            raise DataError("the exact (lattice) release needs finite answers")
        if self.divisor == 1 and np.all(np.abs(flat) <= 2.0 ** (self.exponent + 50)):
            q = flat * 2.0 ** -self.exponent  # exact: a power of two, no overflow below 2^50
            units = np.floor(q) + (q - np.floor(q) >= 0.5)  # floor and fractional part of a double are exact
            return units.astype(np.int64).reshape(np.shape(values))
        if np.all(np.abs(flat) <= 2.0 ** (self.exponent + 50) / self.divisor):  # a mean: floor in floats where safe
            estimate = flat * 2.0**-self.exponent * self.divisor + 0.5  # within 2^-51 |estimate| of A·n/g + ½
            units = np.floor(estimate)
            near = np.abs(estimate - np.round(estimate)) <= 2.0**-48 * np.maximum(1.0, np.abs(estimate))
            for i in np.flatnonzero(near):  # an integer may lie between: decided exactly
                units[i] = math.floor(Fraction(float(flat[i])) / self.unit + Fraction(1, 2))
            return units.astype(np.int64).reshape(np.shape(values))
        units = [math.floor(Fraction(float(a)) / self.unit + Fraction(1, 2)) for a in flat]
        if any(abs(u) > MAX_UNITS for u in units):
            raise DataError(f"an answer is beyond 2^50 units of the lattice g = {self.granularity} "
                            "(set `sampler: floating_point` to use the floating-point noise)")
        return np.asarray(units, dtype=np.int64).reshape(np.shape(values))

    def answers(self, units: np.ndarray) -> np.ndarray:
        """The published g·N/n of integers N (|N| ≤ 2^53), each the nearest double of the exact rational
        (post-processing): N·g is a double exactly and IEEE division by n rounds the exact quotient to nearest."""
        scaled = np.asarray(units, dtype=np.int64).astype(float) * 2.0**self.exponent
        return scaled if self.divisor == 1 else scaled / float(self.divisor)

    def space(self, listed: bool = True) -> SensitivitySpace:
        """The one-dimensional integer sensitivity space of N: moves of at most Δ_u (the extreme ±Δ_u listed;
        every privacy loss of a one-dimensional shift of discrete Laplace or Gaussian noise grows with |shift|).
        ``listed=False`` states it as not listed (the checks then go through ε = Δ_u/t)."""
        shift = self.shift
        return SensitivitySpace(
            dimension=1, span=FullSpace(1), l1=Fraction(shift), l2_squared=Fraction(shift * shift),
            linf=Fraction(shift), method=f"lattice: Δ_u = {shift} units of g = {self.granularity}",
            adjacency="neighbouring lattice sums", complete=listed,
            _vectors=lambda: np.array([[shift], [-shift]], dtype=float))

    def to_dict(self) -> dict:
        """JSON-ready (exact rationals as strings); ``rows_per_person`` (R, a public bound) only for a person-level
        sum."""
        return {"granularity": f"2^{self.exponent}", "exponent": self.exponent, "lower": str(self.lower),
                "upper": str(self.upper), "divisor": self.divisor, "shift": self.shift} | (
            {"rows_per_person": self.rows} if self.rows != 1 else {})

    @classmethod
    def from_dict(cls, record: dict) -> RealLattice:
        return cls(int(record["exponent"]), Fraction(record["lower"]), Fraction(record["upper"]),
                   int(record["divisor"]), int(record["shift"]), int(record.get("rows_per_person", 1)))


def lattice_refusal(problem: Problem) -> str | None:
    """Why a bounded sum or mean keeps the floating-point sampler (None: it is measured on a lattice)."""
    spec, query = problem.spec, problem.query
    if spec.sampler == "floating_point":
        return "the spec asks for sampler: floating_point"
    if not isinstance(query, NumericQuery):
        return "not a bounded sum or mean"
    if query.pair:
        return "a mean with a privacy unit is released as a (centred sum, count) pair, not measured on one lattice"
    if spec.invariants:
        return "the lattice sensitivity is derived without invariants"
    if Fraction(query.upper) <= Fraction(query.lower):
        return "the bounds leave nothing to protect"
    return None


def answer_units(problem: Problem) -> tuple[int, Fraction]:
    """(n, the continuous sensitivity in sum units Δ·n): n the divisor of the answer (1 for a sum)."""
    query = problem.query
    divisor = int(query.n) if query.kind == "mean" else 1
    return divisor, Fraction(problem.space.l1) * divisor


MAX_EXPONENT = 1000
"""|e| served: g = 2^e and 2^-e are normal doubles (the SQL scaling and the published g·N/n)."""


def real_lattice(problem: Problem, exponent: int) -> RealLattice:
    """The lattice g = 2^exponent of the spec's sum or mean and its Δ_u (module docstring), exactly.

    Raises
    ------
    CalibrationError
        |exponent| above :data:`MAX_EXPONENT` (bounds or a noise scale beyond double range).
    """
    if abs(exponent) > MAX_EXPONENT:
        raise CalibrationError(f"the lattice 2^{exponent} is beyond the double range")
    query, spec = problem.query, problem.spec
    lower, upper = Fraction(query.lower), Fraction(query.upper)
    g = Fraction(2) ** exponent
    divisor, _ = answer_units(problem)
    unit = spec.data.privacy_unit
    if unit is not None:  # a person: R rows, each rounded on its own (module docstring)
        rows, _, _ = most_rows(unit, 1)
        if spec.adjacency.kind == "add_remove":
            per_row = math.ceil(max(abs(lower), abs(upper)) / g)
        else:
            per_row = math.ceil(max(upper, 0) / g) + math.ceil(max(-lower, 0) / g)
        return RealLattice(exponent, lower, upper, divisor, rows * per_row, rows)
    if spec.adjacency.kind == "add_remove":
        shift = math.ceil(max(abs(lower), abs(upper)) / g)
    else:
        shift = hamming_factor(spec) * math.ceil((upper - lower) / g)
    return RealLattice(exponent, lower, upper, divisor, shift)


def exponent_at_most(scale: Fraction, bits: int) -> int:
    """The largest e with 2^e ≤ 2^-bits·scale (scale > 0)."""
    scale = Fraction(scale)
    e = scale.numerator.bit_length() - scale.denominator.bit_length()  # floor(log2 scale) or one more
    if Fraction(2) ** e > scale:
        e -= 1
    return e - bits


def lattice_scope_check(problem: Problem, lattice: RealLattice) -> Check:
    """The certificate's lattice re-derived from the spec (bounds, adjacency, n) at its stated granularity."""
    derived = real_lattice(problem, lattice.exponent)
    return Check("mechanism.lattice", "the lattice sum's Δ_u re-derived from the spec's bounds, adjacency, privacy "
                 "unit and n at the stated granularity (each value rounded half up, ⌊a⌋ − ⌊b⌋ ≤ ⌈a − b⌉), "
                 "exact integers",
                 derived == lattice, f"stated {lattice.to_dict()}, derived {derived.to_dict()}")
