r"""What a certificate records, compared with what ``dpopt verify`` recomputes.

Re-deriving the claims from the spec proves that *some* mechanism meets the target; a
reader, ``dpopt report`` and ``dpopt release`` read the numbers the certificate *records*.
So every recorded number is recomputed from the spec and the rebuilt mechanism and
compared (:func:`difference`): strings, booleans, integers and null exactly, floats to a
relative 10⁻⁹ (the evaluation of the same closed form on another machine; an array's
entries to 10⁻⁹ of its largest entry), NaN only where the recomputation gives NaN; the text
of a recorded claim must say what its re-derivation says (words equal, printed numbers to
10⁻⁴: :func:`same_text`). And every block has a schema of the keys it may hold
(:data:`SCHEMA`): a key ``dpopt verify`` does not know fails the claim ``schema`` rather than
being ignored. Composite certificates (a plan's, a whole hierarchical release's, a selection's)
have their schemas here too, and their recorded checks must be exactly the claims their verifiers
re-derive (:func:`recorded_check_claims` with ``complete``): a forged claim fails.

``whole_release`` (required) names the block that states the guarantee of the whole
release — ``groups`` for a grouped release (:mod:`dpopt.certificate.composition`),
``hierarchy`` for one level of a geographic hierarchy
(:mod:`dpopt.certificate.hierarchy_budget`), null when the certificate's guarantee is the
whole release's — and that block must be present (and no other). ``test_release: true``
marks a release whose noise came from a caller's seed (``--insecure-seed``): valid, not
for publication.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from operator import itemgetter

import numpy as np

from dpopt.core.checks import Check

REL_TOL = 1e-9
"""Relative tolerance of a recorded float against its recomputation."""

WHOLE_RELEASE = {None: (), "groups": ("groups",), "hierarchy": ("hierarchy",)}
"""The allowed values of ``whole_release`` and the composition block each requires."""

_COMPOSITION_BLOCKS = ("groups", "hierarchy")

SCHEMA: dict[str, tuple[frozenset, frozenset]] = {
    # block: (required keys, optional keys)
    "certificate": (
        frozenset({"dpopt_version", "spec_sha256", "spec", "guarantee", "sensitivity", "mechanism", "utility",
                   "candidates", "checks", "whole_release"}),
        frozenset({"groups", "hierarchy", "postprocess", "test_release", "output"}),
    ),
    "plan": (
        frozenset({"dpopt_version", "kind", "spec_sha256", "spec", "guarantee", "sensitivity", "mechanism", "utility",
                   "allocation", "design", "queries", "candidates", "notes", "checks", "whole_release"}),
        frozenset({"joint", "groups", "test_release"}),
    ),
    "hierarchy_release": (
        frozenset({"dpopt_version", "kind", "spec_sha256", "spec", "guarantee", "sensitivity", "mechanism", "utility",
                   "hierarchy", "levels", "checks"}),
        frozenset({"test_release"}),
    ),
    "selection": (
        frozenset({"kind", "dpopt_version", "spec_sha256", "spec", "guarantee", "sensitivity", "mechanism", "utility",
                   "releases", "numerics", "checks"}),
        frozenset({"test_release", "output"}),
    ),
    "synthesis": (
        frozenset({"kind", "dpopt_version", "spec_sha256", "spec", "guarantee", "sensitivity", "mechanism", "utility",
                   "budget", "measurements", "selection", "synthesis", "numerics", "checks"}),
        frozenset({"test_release"}),
    ),
    "mechanism": (frozenset({"family", "title", "parameters", "privacy", "notes"}), frozenset()),
    "utility": (frozenset({"metric", "value", "method", "per_cell"}), frozenset({"ci95", "log_value", "log_ci95"})),
    "check": (frozenset({"claim", "method", "passed", "detail"}), frozenset()),
    "candidate": (frozenset({"family"}), frozenset({"parameters", "utility", "reason", "skipped"})),
    "candidate.utility": (frozenset({"metric", "value", "method"}), frozenset({"ci95", "log_value", "log_ci95"})),
    "groups": (frozenset({"columns", "levels", "adjacency", "groups_changed", "per_group", "composition"}),
               frozenset({"streams", "joint"})),
    "groups.level": (frozenset({"column", "groups", "domain"}), frozenset({"caveat"})),
    "groups.streams": (frozenset({"block_groups", "derivation"}), frozenset()),
    "groups.joint": (frozenset({"dimension", "l1_exact", "l2_squared_exact", "linf_exact", "method",
                                "norm_ratio_exact", "guarantee"}), frozenset()),
    # a hierarchy's design (``dpopt solve``) has no units and no post-processing yet; its release has both
    "hierarchy": (frozenset({"spec", "levels", "shares", "adjacency", "composition", "checks"}),
                  frozenset({"invariants", "caveat", "postprocess"})),
    "hierarchy.level": (frozenset({"level", "share", "privacy", "mechanism", "certificate"}),
                        frozenset({"units", "units_from"})),
    "hierarchy.level.mechanism": (frozenset({"family", "parameters"}), frozenset()),
    "postprocess": (frozenset({"guarantee", "method"}), frozenset({"error"})),
    "output": (frozenset({"decimals", "method"}), frozenset()),
    "postprocess.error": (frozenset({"method", "levels"}), frozenset()),
    "plan.utility": (frozenset({"metric", "value", "method"}), frozenset()),
    "plan.allocation": (frozenset({"shares", "method", "model_objective", "equal_split_weighted_total",
                                   "optimal_weighted_total", "ratio_optimal_to_equal", "kept", "exponents", "design"}),
                        frozenset({"gdp_design_total_mu"})),
    "plan.candidate": (frozenset({"design", "weighted_total"}), frozenset({"note"})),
    "plan.query": (frozenset({"name", "weight", "share", "target", "family", "parameters", "sensitivity",
                              "utility"}), frozenset({"certificate", "per_cell"})),
}
"""The keys each block of a certificate must hold and may hold; nothing else is accepted."""

KIND = {"plan": "plan", "hierarchy_release": "hierarchy", "selection": "selection", "synthesis": "synthesis"}
"""The ``kind`` a composite certificate's top level holds."""


# ------------------------------------------------------------------------ comparison
def _numbers(value) -> Iterable[float]:
    if isinstance(value, bool):
        return
    if isinstance(value, (int, float)):
        yield float(value)
    elif isinstance(value, list):
        for item in value:
            yield from _numbers(item)


def _largest_finite(values: list) -> float:
    """The largest finite |x| over the numbers of ``values`` and of its nested lists (bools and other items
    skipped: :func:`_numbers`), 0 when none; a flat list of numbers at once."""
    if _all_of(values, (int, float)):  # the numbers _numbers yields (numpy's integers are not among them)
        try:
            array = np.abs(np.asarray(values, dtype=float))
        except OverflowError:  # an integer beyond a float: number by number, as below
            pass
        else:
            finite = array[np.isfinite(array)]
            return float(finite.max()) if finite.size else 0.0
    return max((abs(x) for x in _numbers(values) if math.isfinite(x)), default=0.0)


def _same_float(recorded: float, expected: float, abs_tol: float) -> bool:
    if math.isnan(expected) or math.isinf(expected):
        return recorded == expected or (math.isnan(expected) and math.isnan(recorded))
    return math.isfinite(recorded) and math.isclose(recorded, expected, rel_tol=REL_TOL, abs_tol=abs_tol)


RECORDS = 256
"""Lists of at least this many objects with the same keys (per-cell errors: one object per released cell) are
compared column by column (:func:`_first_differing_record`)."""


def _plain(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _all_of(values: list, kinds: tuple[type, ...]) -> bool:
    """Every item of ``values`` is an instance of ``kinds`` and not a bool (each distinct type tested once: a
    per-cell list holds 10⁵ items of one or two types)."""
    return all(issubclass(t, kinds) and not issubclass(t, bool) for t in set(map(type, values)))


def _column(rows: list, key: str, every: bool, index: list[int]) -> list:
    return list(map(itemgetter(key), rows)) if every else [rows[i][key] for i in index]


def _first_differing_record(recorded: list, expected, abs_tol: float) -> int | None:
    """For a list ``expected`` of at least :data:`RECORDS` objects with the same keys: the index of the first row
    where :func:`difference` finds one (-1 when none), each column compared at once (strings by equality, plain
    numbers by numpy with :func:`_same_float`'s rule: |r − e| ≤ max(REL_TOL·max(|r|, |e|), abs_tol) with r finite,
    or r = e for a non-finite e); None when ``expected`` is not such a list."""
    if len(expected) < RECORDS or set(map(type, expected)) != {dict}:
        return None
    keys = expected[0].keys()
    if not all(map(keys.__eq__, map(dict.keys, expected))):
        return None
    every = set(map(type, recorded)) == {dict} and all(map(keys.__eq__, map(dict.keys, recorded)))
    bad = [] if every else [i for i, r in enumerate(recorded) if not isinstance(r, dict) or r.keys() != keys]
    rows = list(range(len(recorded))) if every else [i for i, r in enumerate(recorded)
                                                      if isinstance(r, dict) and r.keys() == keys]
    for key in set(keys):
        got, want = _column(recorded, key, every, rows), _column(expected, key, every, rows)
        if set(map(type, want)) == {str}:
            if got != want or set(map(type, got)) != {str}:
                bad += [i for i, a, b in zip(rows, got, want) if type(a) is not str or a != b]
        elif _all_of(want, (int, float)) and _all_of(got, (int, float)):
            r, e = np.asarray(got, dtype=float), np.asarray(want, dtype=float)
            with np.errstate(invalid="ignore"):
                close = np.isfinite(r) & (np.abs(r - e) <= np.maximum(REL_TOL * np.maximum(np.abs(r), np.abs(e)), abs_tol))
            same = np.where(np.isfinite(e), close, (r == e) | (np.isnan(e) & np.isnan(r)))
            bad += [rows[i] for i in np.flatnonzero(~same)]
        else:
            bad += [i for i, a, b in zip(rows, got, want) if difference(a, b, "", abs_tol)]
    return min(bad, default=-1)


def _numeric(value, recorded: bool) -> bool:
    """``value`` is a number, or a list (a tuple, when not ``recorded``) of such, with no bool: what
    :func:`difference` compares number by number (a recorded number must be a JSON int or float)."""
    kinds = (int, float) if recorded else (int, float, np.integer, np.floating)
    if type(value) is list and _all_of(value, kinds):  # a flat list: each type once
        return True
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, list) or (not recorded and isinstance(node, tuple)):
            stack.extend(node)
        elif isinstance(node, bool) or not isinstance(node, kinds):
            return False
    return True


def _first_differing_row(recorded: list, expected, abs_tol: float) -> int | None:
    """For a list ``expected`` of at least :data:`RECORDS` numbers (or equal-shaped lists of numbers): the index of
    the first row where :func:`difference` finds one (-1 when none), all numbers compared at once with
    :func:`_same_float`'s rule at ``abs_tol`` (every nested list's tolerance is its parent's: the parent's
    largest magnitude bounds the child's); None when ``expected`` and ``recorded`` are not such lists."""
    if len(expected) < RECORDS or not _numeric(expected, recorded=False) or not _numeric(recorded, recorded=True):
        return None
    try:
        r, e = np.asarray(recorded, dtype=float), np.asarray(expected, dtype=float)
    except (ValueError, OverflowError):  # ragged, or an integer beyond a float: number by number
        return None
    if r.shape != e.shape:
        return None
    with np.errstate(invalid="ignore"):
        close = np.isfinite(r) & (np.abs(r - e) <= np.maximum(REL_TOL * np.maximum(np.abs(r), np.abs(e)), abs_tol))
    same = np.where(np.isfinite(e), close, (r == e) | (np.isnan(e) & np.isnan(r)))
    wrong = np.flatnonzero(~same.reshape(len(expected), -1).all(axis=1))
    return int(wrong[0]) if wrong.size else -1


def difference(recorded, expected, path: str = "", abs_tol: float = 0.0) -> str | None:
    """Where ``recorded`` differs from its recomputation ``expected`` (JSON values), or None.

    Dicts must have the same keys, lists the same length; bool, str and null compare
    exactly; numbers to :data:`REL_TOL` relative, and entries of an array to
    :data:`REL_TOL` times its largest magnitude (a recomputed zero may be 1e-17 elsewhere).
    """
    where = path or "(root)"
    if isinstance(expected, dict):
        if not isinstance(recorded, dict):
            return f"{where}: expected an object"
        if set(recorded) != set(expected):
            extra, missing = sorted(set(recorded) - set(expected)), sorted(set(expected) - set(recorded))
            return f"{where}: keys differ (unexpected {extra}, missing {missing})"
        for key in expected:
            found = difference(recorded[key], expected[key], f"{path}.{key}" if path else str(key), abs_tol)
            if found:
                return found
        return None
    if isinstance(expected, (list, tuple)):
        if not isinstance(recorded, list) or len(recorded) != len(expected):
            return f"{where}: expected a list of {len(expected)}"
        first = _first_differing_record(recorded, expected, abs_tol)  # objects hold no number of the list's scale
        if first is not None:  # a long list of records: the rows that differ found column by column
            return None if first < 0 else difference(recorded[first], expected[first], f"{where}[{first}]", abs_tol)
        scale = _largest_finite(list(expected))
        tol = max(abs_tol, REL_TOL * scale)
        first = _first_differing_row(recorded, expected, tol)
        if first is not None:  # a long list of numbers: compared at once
            return None if first < 0 else difference(recorded[first], expected[first], f"{where}[{first}]", tol)
        for i, (r, e) in enumerate(zip(recorded, expected)):
            found = difference(r, e, f"{where}[{i}]", tol)
            if found:
                return found
        return None
    if isinstance(expected, bool) or expected is None or isinstance(expected, str):
        same = type(recorded) is type(expected) and recorded == expected
        return None if same else f"{where}: recorded {_short(recorded)}, recomputed {_short(expected)}"
    if isinstance(expected, (int, float, np.integer, np.floating)):
        ok = (isinstance(recorded, (int, float)) and not isinstance(recorded, bool)
              and _same_float(float(recorded), float(expected), abs_tol))
        return None if ok else f"{where}: recorded {_short(recorded)}, recomputed {float(expected):.17g}"
    return f"{where}: cannot compare a {type(expected).__name__}"


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


_NUMBER = re.compile(r"[-+−]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")

TEXT_REL_TOL = 1e-4
"""Relative tolerance of a number printed in a check's text (printed with 6 or more significant digits)."""


def same_text(recorded, expected: str) -> bool:
    """True when a recorded check's text says what its recomputation says: the words equal, every
    number within :data:`TEXT_REL_TOL` relative (a number printed to 6 digits may round the other
    way on another machine)."""
    if not isinstance(recorded, str):
        return False
    words_a, words_b = _NUMBER.split(recorded), _NUMBER.split(expected)
    numbers_a, numbers_b = _NUMBER.findall(recorded), _NUMBER.findall(expected)
    if words_a != words_b or len(numbers_a) != len(numbers_b):
        return False
    return all(math.isclose(float(a.replace("−", "-")), float(b.replace("−", "-")), rel_tol=TEXT_REL_TOL,
                            abs_tol=1e-12) for a, b in zip(numbers_a, numbers_b))


def compare(claim: str, what: str, recorded, expected) -> Check:
    """A check that ``recorded`` equals its recomputation ``expected`` (:func:`difference`)."""
    found = difference(recorded, expected)
    return Check(claim, f"the recorded {what} equals its recomputation (floats to {REL_TOL:g} relative)",
                 found is None, found or "equal")


def recorded_check_claims(recorded: list, recomputed: list[Check], complete: bool = False) -> list[Check]:
    """A failed ``recorded:CLAIM`` for every recorded check that verification did not reproduce,
    that does not hold, or whose text (method, detail) says something else than the re-derived
    one (:func:`same_text`).

    With ``complete`` (a composite certificate, whose recorded checks are exactly the claims
    ``recomputed`` re-derives), a failed ``recorded:checks`` also names every re-derived claim the
    certificate does not record, and a claim recorded twice.
    """
    reproduced = {c.claim: c for c in recomputed}
    out = []
    rows = recorded if isinstance(recorded, list) else []
    for row in rows:
        claim = row.get("claim") if isinstance(row, dict) else None
        again = reproduced.get(claim)
        if again is None or row.get("passed") is not True:
            out.append(Check(f"recorded:{claim}", "every recorded claim is re-derived and holds", False,
                             "this claim was not reproduced by verification"))
        elif not (same_text(row.get("method"), again.method) and same_text(row.get("detail"), again.detail)):
            out.append(Check(f"recorded:{claim}", "the recorded text of a claim is the re-derived one", False,
                             f"re-derived: {again.detail[:120]}"))
    if complete:
        names = [row.get("claim") for row in rows if isinstance(row, dict)]
        missing = [c.claim for c in recomputed if c.claim not in names]
        twice = sorted({n for n in names if names.count(n) > 1}, key=str)
        if missing or twice or not isinstance(recorded, list):
            out.append(Check("recorded:checks", "the recorded checks are exactly the re-derived claims", False,
                             "not a list" if not isinstance(recorded, list) else
                             f"missing {missing}, recorded twice {twice}"))
    return out


# ---------------------------------------------------------------------------- schema
def schema_problems(block, name: str, path: str) -> list[str]:
    """The keys of ``block`` that the schema entry ``name`` does not allow, or lacks."""
    required, optional = SCHEMA[name]
    if not isinstance(block, dict):
        return [f"{path} is not an object"]
    out = [f"{path}.{k}: unknown key" for k in sorted(set(block) - required - optional)]
    out += [f"{path}.{k}: missing" for k in sorted(required - set(block))]
    return out


def _rows(block, name: str, path: str) -> list[str]:
    if not isinstance(block, list):
        return [f"{path} is not a list"]
    return [p for i, row in enumerate(block) for p in schema_problems(row, name, f"{path}[{i}]")]


_OBJECTS = ("spec", "guarantee", "sensitivity", "mechanism", "utility", "groups", "hierarchy", "postprocess", "levels",
            "allocation", "output")
_LISTS = ("checks", "candidates", "queries", "releases")


def certificate_schema(data: dict, top: str = "certificate") -> Check:
    """The claim ``schema``: every block holds the keys it must and no other (:data:`SCHEMA`), each
    of the right type; ``whole_release`` names exactly the composition block present (a single
    certificate's and a plan's); ``test_release`` is true when present. ``top`` is ``certificate``,
    ``plan``, ``hierarchy_release`` (a whole hierarchical release) or ``selection``."""
    problems = schema_problems(data, top, "certificate")
    problems += [f"{k} is not an object" for k in _OBJECTS if k in data and not isinstance(data[k], dict)]
    problems += [f"{k} is not a list" for k in _LISTS if k in data and not isinstance(data[k], list)]
    if not isinstance(data.get("spec_sha256"), str):
        problems.append("spec_sha256 is not a string")
    blocks = {"mechanism": "mechanism", "utility": "utility"} if top == "certificate" else {}
    blocks |= {"groups": "groups", "postprocess": "postprocess", "output": "output"}
    problems += [p for key, name in blocks.items() if isinstance(data.get(key), dict)
                 for p in schema_problems(data[key], name, key)]
    if isinstance(data.get("checks"), list):
        problems += _rows(data["checks"], "check", "checks")
    if top == "certificate" and isinstance(data.get("candidates"), list):
        problems += _rows(data["candidates"], "candidate", "candidates")
        problems += [p for i, row in enumerate(data["candidates"]) if isinstance(row, dict) and "utility" in row
                     for p in schema_problems(row["utility"], "candidate.utility", f"candidates[{i}].utility")]
    groups = data.get("groups")
    if isinstance(groups, dict):
        problems += _rows(groups.get("levels"), "groups.level", "groups.levels")
        if "streams" in groups:
            problems += schema_problems(groups["streams"], "groups.streams", "groups.streams")
        if "joint" in groups:
            problems += schema_problems(groups["joint"], "groups.joint", "groups.joint")
    if isinstance(data.get("hierarchy"), dict):
        problems += _hierarchy_schema(data["hierarchy"])
    postprocess = data.get("postprocess")
    if isinstance(postprocess, dict) and "error" in postprocess:
        problems += schema_problems(postprocess["error"], "postprocess.error", "postprocess.error")
    if top == "plan":
        problems += _rows(data.get("queries"), "plan.query", "queries") + _rows(data.get("candidates"),
                                                                                "plan.candidate", "candidates")
        problems += [p for key in ("utility", "allocation") for p in schema_problems(data.get(key), f"plan.{key}", key)]
    if top in KIND and data.get("kind") != KIND[top]:
        problems.append(f"kind: {data.get('kind')!r} is not {KIND[top]!r}")
    problems += _release_markers(data) if top in ("certificate", "plan") else _test_marker(data)
    return Check("schema", "every block holds exactly the keys dpopt verify knows (required and optional), and the "
                           "composition block named by whole_release", not problems,
                 "; ".join(problems[:6]) + (f"; … {len(problems) - 6} more" if len(problems) > 6 else "")
                 if problems else "every key known")


def _release_markers(data: dict) -> list[str]:
    """Problems with ``whole_release`` (and the composition block it names) and ``test_release``."""
    problems = []
    whole = data.get("whole_release", "missing")
    if whole not in WHOLE_RELEASE:
        problems.append(f"whole_release: {whole!r} is not one of null, 'groups', 'hierarchy'")
    else:
        present = tuple(b for b in _COMPOSITION_BLOCKS if b in data)
        if present != WHOLE_RELEASE[whole]:
            problems.append(f"whole_release is {whole!r} but the composition blocks present are {list(present)}: "
                            "a grouped or hierarchical release's certificate must keep its composition block")
    return problems + _test_marker(data)


def _test_marker(data: dict) -> list[str]:
    return ["test_release: only true is allowed"] if "test_release" in data and data["test_release"] is not True else []


def _hierarchy_schema(block: dict) -> list[str]:
    problems = schema_problems(block, "hierarchy", "hierarchy")
    problems += _rows(block.get("levels"), "hierarchy.level", "hierarchy.levels")
    for i, row in enumerate(block.get("levels") if isinstance(block.get("levels"), list) else []):
        if isinstance(row, dict) and "mechanism" in row:
            problems += schema_problems(row["mechanism"], "hierarchy.level.mechanism",
                                        f"hierarchy.levels[{i}].mechanism")
    if "postprocess" in block:  # a release: its post-processing, and the units each level released
        problems += schema_problems(block["postprocess"], "postprocess", "hierarchy.postprocess")
        problems += [f"hierarchy.levels[{i}].{key}: missing"
                     for i, row in enumerate(block.get("levels") if isinstance(block.get("levels"), list) else [])
                     for key in ("units", "units_from") if isinstance(row, dict) and key not in row]
    problems += _rows(block.get("checks"), "check", "hierarchy.checks")
    return problems


def is_test_release(data: dict) -> bool:
    """True for the certificate of a seeded release (``test_release: true``)."""
    return isinstance(data, dict) and data.get("test_release") is True
