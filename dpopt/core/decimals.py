r"""Privacy numbers read as the decimals people write, and kept exact.

A person who writes ``rho: 0.1`` means 1/10, not the binary float nearest to it
(0.1000000000000000055511151231257827…); three releases at ρ = 0.1 then spend exactly the
budget ρ = 0.3, whereas the sum of the three floats exceeds the float 0.3. Every privacy
number a person writes therefore counts as the decimal it spells:

* a string or :class:`decimal.Decimal` (``"0.1"``, ``Decimal("1e-6")``) is that decimal;
* an int is itself;
* a float (from Python, from JSON, from YAML) is the decimal of its shortest repr
  (``Fraction(Decimal(repr(x)))``, Python's round-trip repr: the shortest decimal that reads
  back as the same float), so ``0.1`` is 1/10 wherever it was typed.

The float fields the rest of dpopt computes with hold the same number, so one rule keeps the
two readings the same: a number is **kept** when its decimal is the repr of its float
(:func:`kept`); a decimal with more significant digits than a float keeps
(``0.30000000000000001``, which reads back as ``0.3``) or below the smallest float is refused
where a privacy number is read, instead of silently becoming another number.
:func:`read_float` marks such a float (:class:`SpelledFloat`, which keeps the text) so that a
validator downstream can name it.

**Targets are certified against the decimal.** The ledger charges what was written, so every
calibration check compares with it too: exactly, ``achieved <= written(target)`` with ``achieved`` a
Fraction; and where a check evaluates in floating point, mpmath or interval arithmetic, against
:func:`float_below` (the largest float not above the decimal: ρ = 0.1 is checked against
0.09999999999999999167…, not the float 0.1000000000000000055…, which exceeds 1/10). Numbers that
dpopt derives and records as floats (a level's share of a budget, a composed total) are read the
same way, at their repr.
"""

from __future__ import annotations

import math
from decimal import Decimal, InvalidOperation
from fractions import Fraction


class SpelledFloat(float):
    """A float read from decimal ``text`` whose repr spells another number (the text's digits are
    not kept by a float): it behaves as the float, and remembers the text."""

    text: str

    def __new__(cls, text: str) -> SpelledFloat:
        value = super().__new__(cls, text)
        value.text = text
        return value

    def __reduce__(self) -> tuple:
        return SpelledFloat, (self.text,)


def read_float(text: str) -> float:
    """``float(text)``; a :class:`SpelledFloat` when the float's repr is not the decimal ``text`` spells."""
    value = float(text)
    if repr(value) == text or value != value or value in (float("inf"), float("-inf")):
        return value  # the first test is the common case (JSON written by Python), and fast
    try:
        spelled = Fraction(Decimal(text))
    except (InvalidOperation, ValueError):
        return value
    return value if spelled == Fraction(Decimal(repr(value))) else SpelledFloat(text)


def written(value: object) -> Fraction:
    """The exact decimal a privacy number spells (module docstring).

    Parameters
    ----------
    value : str, decimal.Decimal, int, float or fractions.Fraction
        A :class:`SpelledFloat` counts as its text; a Fraction as itself.

    Raises
    ------
    ValueError
        Not a finite number (a boolean, NaN, ±inf, text that is not a decimal).
    """
    if isinstance(value, bool):
        raise ValueError(f"{value} is a boolean, not a number")
    if isinstance(value, SpelledFloat):
        value = value.text
    if isinstance(value, float):
        value = repr(value)
    if isinstance(value, (int, Fraction)):
        return Fraction(value)
    if isinstance(value, str):
        try:
            value = Decimal(value.strip())
        except InvalidOperation:
            raise ValueError(f"'{value}' is not a decimal number") from None
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise ValueError(f"{value} is not a finite number")
        return Fraction(value)
    raise ValueError(f"{value!r} is not a number")


def kept(value: object) -> bool:
    """True when the float nearest to ``value`` has ``value``'s decimal as its repr: the float the
    rest of dpopt computes with is then the same number as the decimal the ledger adds."""
    exact = written(value)
    try:
        nearest = float(exact)
    except OverflowError:
        return False
    return Fraction(Decimal(repr(nearest))) == exact


def as_float(value: object, field: str) -> float:
    """The float of a privacy number that is :func:`kept`.

    Raises
    ------
    ValueError
        ``field``: not a number, or a decimal a float does not keep (the message names the
        number it would have become).
    """
    exact = written(value)
    if not kept(exact):
        shown = value.text if isinstance(value, SpelledFloat) else str(value)
        nearest = float(exact) if abs(exact) < 2 ** 1024 else None
        raise ValueError(f"{field}: {shown} is not kept by a floating-point number "
                         f"(it would be read as {nearest!r}): write at most 15 significant digits")
    return float(exact)


def float_below(value: object) -> float:
    """The largest float whose binary value is at most the decimal ``value`` spells (:func:`written`):
    the target a check made in floating point (or mpmath, or intervals) compares with, so that passing it
    certifies the decimal. Equal to ``float(value)`` when that float is not above the decimal."""
    exact = written(value)
    nearest = float(exact)
    return nearest if Fraction(nearest) <= exact else math.nextafter(nearest, -math.inf)


def float_written_below(exact: Fraction) -> float:
    """The float nearest to ``exact``, moved down until the decimal it is read as (its repr) is at most
    ``exact``: a share of a budget stated as a float that never overstates it (1/10 → 0.1)."""
    value = float(exact)
    while written(value) > exact:
        value = math.nextafter(value, -math.inf)
    return value


def float_written_above(exact: Fraction) -> float:
    """The float nearest to ``exact``, moved up until the decimal it is read as (its repr) is at least
    ``exact``: a composed total stated as a float that never understates it (3/10 → 0.3)."""
    value = float(exact)
    while written(value) < exact:
        value = math.nextafter(value, math.inf)
    return value
