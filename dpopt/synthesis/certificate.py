"""The certificate of a synthesis (``kind: synthesis``) and its claims, re-derived by ``dpopt verify``.

It records the spec, the target and what was measured: each measurement's own certificate embedded whole
(:mod:`dpopt.synthesis.measure`), the selection rounds with their ρ and ε (adaptive), the budget parts and
their exact total (:mod:`dpopt.synthesis.budget`), that the records are post-processing of the measurements,
and which post-processing produced the published tables (:func:`published_tables`). :func:`synthesis_checks`
derives every claim from the spec and the recorded blocks alone; the same function makes the certificate's checks
and :func:`verify_synthesis` re-derives them.
"""

from __future__ import annotations

import hashlib
import json
from fractions import Fraction

from dpopt._version import __version__
from dpopt.certificate.model import Certificate
from dpopt.certificate.recorded import certificate_schema, recorded_check_claims
from dpopt.certificate.recorded_spec import recorded_blocks, recorded_spec
from dpopt.certificate.verify import Verification, verify
from dpopt.core.checks import Check
from dpopt.core.decimals import written
from dpopt.errors import DpoptError
from dpopt.postprocess.certify import POSTPROCESSING_THEOREM
from dpopt.spec.load import canonical_json, load_spec, spec_sha256
from dpopt.spec.synthesis import SynthesisSpec, load_synthesis_spec
from dpopt.synthesis.adaptive import SCORE_SENSITIVITY, SELECTION_METHOD, candidates
from dpopt.synthesis.budget import budget_block, budget_checks, em_epsilon
from dpopt.synthesis.kind import KIND
from dpopt.synthesis.measure import measurement_spec, tabulated

POST_PROCESSING_NOISY = ("the synthetic records are drawn from the measurements' noisy tables (the mechanisms' outputs "
                         "before their post-processing into the published tables) alone, and randomness independent "
                         "of the data: post-processing of the measurements, so they spend no privacy budget beyond "
                         "the measurements' and the selection's (Dwork & Roth 2014, Prop. 2.1; zCDP: Bun & Steinke "
                         "2016, Lemma 1.8)")


POST_PROCESSING_BOTH = ("the synthetic records are drawn from the measurements' noisy tables (the mechanisms' outputs "
                        "before their post-processing) and the published tables alone, and randomness independent of "
                        "the data: post-processing of the measurements, so they spend no privacy budget beyond the "
                        "measurements' and the selection's (Dwork & Roth 2014, Prop. 2.1; zCDP: Bun & Steinke 2016, "
                        "Lemma 1.8)")


POST_PROCESSING_MODEL = ("the synthetic records are drawn from the measurements' noisy tables (the mechanisms' outputs "
                         "before their post-processing) alone, and randomness independent of the data, and the "
                         "published tables are the records' own tabulations: post-processing of the measurements, so "
                         "neither spends privacy budget beyond the measurements' and the selection's (Dwork & Roth "
                         "2014, Prop. 2.1; zCDP: Bun & Steinke 2016, Lemma 1.8)")

PUBLISHED_FROM_RECORDS = ("the records' own tabulation on every measured marginal: the marginals of one model fitted "
                          "to all noisy tables (the records, fitted to each noisy table shrunk toward the independence "
                          "of its attributes), rounded by the records themselves, so consistent, non-negative and "
                          "whole by construction and matched exactly by the records; no measurement is published "
                          "table by table (adaptive: the one-way measurement's post-processed tables serve the "
                          "selection's scores only)")

PUBLISHED_FROM_MEASUREMENTS = ("each measurement's consistent, non-negative tables (whole where its postprocess block "
                               "says so), as its postprocess block states")


def post_processing(spec: SynthesisSpec) -> str:
    """The post-processing statement of a synthesis of this spec: with ``exact: true`` (the default: records fitted to
    the noisy tables, the published tables their tabulations) :data:`POST_PROCESSING_MODEL`, with ``exact: false``
    (records fitted to the noisy tables) :data:`POST_PROCESSING_NOISY`, with a list of tables held exact (fitted to
    the noisy tables, then repaired to published ones) :data:`POST_PROCESSING_BOTH`."""
    exact = spec.synthesize.exact
    return POST_PROCESSING_NOISY if exact is False else POST_PROCESSING_BOTH if isinstance(exact, list) else \
        POST_PROCESSING_MODEL


def published_tables(spec: SynthesisSpec) -> str:
    """Which post-processing produced the published tables (``marginals.json``): :data:`PUBLISHED_FROM_RECORDS` with
    ``exact: true``, else :data:`PUBLISHED_FROM_MEASUREMENTS`."""
    return PUBLISHED_FROM_RECORDS if tabulated(spec) else PUBLISHED_FROM_MEASUREMENTS


def records_from(spec: SynthesisSpec) -> str:
    """Where the number of synthetic records comes from: the spec (``synthesize.records``, a public ``data.n``), else
    the published tables' total (records repaired to a list of published tables), else the noisy tables'
    least-squares total (``exact: true`` or ``false``)."""
    return ("synthesize.records" if spec.synthesize.records else "data.n (public)" if spec.data.n else
            "the published tables' total" if isinstance(spec.synthesize.exact, list) else
            "the noisy tables' least-squares total")


NUMERICS = ("the selection is exact: integer scores, the exponential mechanism drawn by rejection with "
            "Bernoulli(exp(−γ)) acceptances in integer arithmetic at a rational ε′ ≤ ε (selection.method); its "
            "running time depends on the scores and is not covered; each measurement's certificate states its own "
            "numerics")

REQUIRED = frozenset({"kind", "dpopt_version", "spec_sha256", "spec", "guarantee", "sensitivity", "mechanism",
                      "utility", "budget", "measurements", "selection", "synthesis", "numerics", "checks"})
OPTIONAL = frozenset({"test_release"})


def synthesis_sha256(spec: SynthesisSpec) -> str:
    """SHA-256 of the canonical JSON of the validated synthesis spec."""
    return hashlib.sha256(canonical_json(spec_document(spec)).encode()).hexdigest()


def spec_document(spec: SynthesisSpec) -> dict:
    return spec.model_dump(mode="json", exclude_none=True)


def guarantee(spec: SynthesisSpec) -> dict:
    """The guarantee of the whole release: the spec's target, its adjacency, the composition it rests on."""
    return {"definition": spec.privacy.definition, **spec.privacy.parameters,
            "scope": {"adjacency": spec.adjacency.model_dump(), "invariants": [], "semi_adjacent_parameter": None},
            "composition": "budget (the parts' exact total is at most the target)"}


def body(spec: SynthesisSpec, measurements: list[dict], selection: dict | None, synthesis: dict,
         seeded: bool) -> dict:
    """Everything of the certificate but its checks. ``measurements``: ``{part, marginals, certificate}`` each."""
    sensitivity = SCORE_SENSITIVITY[spec.adjacency.kind] if spec.synthesize.selection == "adaptive" else None
    return {
        "kind": KIND, "dpopt_version": __version__, "spec_sha256": synthesis_sha256(spec), "spec": spec_document(spec),
        "guarantee": guarantee(spec),
        "sensitivity": {"per_measurement": "measurements[i].certificate.sensitivity",
                        "selection_score_l1": sensitivity},
        "mechanism": {"family": "marginal_synthesis",
                      "parameters": {"selection": spec.synthesize.selection,
                                     "measurements": [m["part"] for m in measurements]}},
        "utility": {"metric": "per_measurement", "value": None, "method": "measurements[i].certificate.utility"},
        "budget": budget_block(spec), "measurements": measurements, "selection": selection,
        "synthesis": synthesis, "numerics": NUMERICS,
    } | ({"test_release": True} if seeded else {})


def certify(spec: SynthesisSpec, measurements: list[dict], selection: dict | None, synthesis: dict,
            seeded: bool) -> Certificate:
    """The certificate with its checks (each derived as :func:`verify_synthesis` derives it)."""
    data = body(spec, measurements, selection, synthesis, seeded)
    return Certificate(data | {"checks": [c.to_dict() for c in synthesis_checks(spec, data)]})


# ----------------------------------------------------------------------------- claims
def _parts(spec: SynthesisSpec) -> dict[str, dict]:
    return {p["part"]: p for p in budget_block(spec)["parts"]}


def _privacy(part: dict) -> dict:
    return {part["definition"]: {k: float(written(v)) for k, v in part.items() if k not in ("part", "definition")}}


def expected_marginals(spec: SynthesisSpec, part: str, selection: dict | None) -> list[list[str]]:
    """The marginals a measurement must hold: the spec's (fixed), every attribute (one_way), the selected pairs."""
    if part == "measurement":
        return [sorted(g, key=spec.attributes.index) for g in spec.groups()]
    if part == "one_way":
        return [[a] for a in spec.attributes]
    return [list(step["selected"]) for step in (selection or {}).get("steps", [])]


def measurement_checks(spec: SynthesisSpec, rows: list) -> list[Check]:
    """Each embedded certificate: the spec it certifies is the measurement the synthesis spec prescribes (domain,
    adjacency, mechanism, marginals, ρ of its part, post-processing) and it holds under ``dpopt verify``."""
    parts = _parts(spec)
    checks = []
    for i, row in enumerate(rows):
        at = f"measurements[{i}]"
        part = row.get("part") if isinstance(row, dict) and set(row) - {"_selection"} == ROW_KEYS else None
        if part not in parts or part.startswith("selection"):
            checks.append(Check(at, "a measurement of a budget part (its part, marginals and certificate)", False,
                                f"unknown part {part!r}, or other keys"))
            continue
        try:
            wanted = load_spec(measurement_spec(spec, part, row["marginals"], _privacy(parts[part])))
            inner = row["certificate"]
            same = (spec_sha256(wanted) == inner.get("spec_sha256") and row["marginals"] == expected_marginals(
                spec, part, row.get("_selection")) and _postprocess_holds(inner.get("postprocess"), wanted))
            result = verify(Certificate.from_dict(inner, source=at))
        except (DpoptError, KeyError, TypeError, AttributeError, ValueError) as exc:
            checks.append(Check(at, "the embedded certificate can be read", False, f"{type(exc).__name__}: {exc}"))
            continue
        failed = [c.claim for c in result.failed]
        checks.append(Check(at, f"the embedded {part} certificate certifies the prescribed measurement (its spec's "
                            "SHA-256) and holds (dpopt verify re-derives every claim)", same and not failed,
                            f"{len(row['marginals'])} marginals, {len(result.checks)} claims re-derived"
                            + (f"; failed: {', '.join(failed[:3])}" if failed else "")
                            + ("" if same else "; not the prescribed measurement")))
    return checks


STEP_KEYS = frozenset({"round", "rho", "epsilon", "sensitivity", "candidates", "selected"})
"""The keys of a recorded selection round."""

ROW_KEYS = frozenset({"part", "marginals", "certificate"})
"""The keys of a recorded measurement."""

POSTPROCESS_METHOD_KEYS = frozenset({"steps", "metric", "exact_directions", "space", "guarantees", "consistent",
                                     "nonnegative", "integer", "noise_free_margins", "error", "preserves_guarantee"})
"""The keys the ``method`` of a measurement's post-processing may hold (:mod:`dpopt.postprocess.table`,
:mod:`dpopt.postprocess.marginals`)."""


def _postprocess_holds(block, wanted) -> bool:
    """An embedded measurement's ``postprocess`` block states the guarantee kept, the post-processing theorem and
    the options its spec prescribes (consistent, non-negative, whole). How the tables were computed (its steps, the
    metric, the error statement) is echoed, as in a release's certificate."""
    options = wanted.postprocess
    if options is None:  # a measurement that is not post-processed (exact: true) has no block
        return block is None
    if not isinstance(block, dict) or not isinstance(block.get("method"), dict):
        return False
    method = block["method"]
    return (set(block) <= {"guarantee", "method", "error"} and block["guarantee"] == "unchanged by post-processing"
            and set(method) <= POSTPROCESS_METHOD_KEYS and method.get("preserves_guarantee") == POSTPROCESSING_THEOREM
            and all(method.get(k) == getattr(options, k) for k in ("consistent", "nonnegative", "integer")))


def selection_checks(spec: SynthesisSpec, selection) -> list[Check]:
    """Adaptive: each round's ρ is its budget part, ε the largest float with ε²/8 ≤ ρ (exact), Δ the
    adjacency's,
    the selected pair a candidate (it joins two components of the pairs selected before), the candidates counted;
    rounds stop early only when no candidate is left. Fixed: no selection."""
    if spec.synthesize.selection == "fixed":
        return [Check("selection", "a fixed workload: nothing is selected", selection is None, "fixed")]
    parts, pairs = _parts(spec), [tuple(sorted(g, key=spec.attributes.index)) for g in spec.groups()]
    steps = selection.get("steps") if isinstance(selection, dict) else None
    if not isinstance(steps, list) or not steps or len(steps) > spec.rounds:
        return [Check("selection", "the recorded selection rounds can be read", False, "no rounds, or too many")]
    checks = [Check("selection.method", "the selection block holds its method (MST's rounds) and its steps only",
                    set(selection) == {"method", "steps"} and selection["method"] == SELECTION_METHOD, "MST")]
    chosen: list[tuple[str, ...]] = []
    delta = SCORE_SENSITIVITY[spec.adjacency.kind]
    for i, step in enumerate(steps):
        at = f"selection.round_{i + 1}"
        try:
            rho = parts[f"selection_round_{i + 1}"]["rho"]
            options = candidates(spec.attributes, pairs, chosen)
            pair = tuple(step["selected"])
            eps = em_epsilon(rho)
            holds = (set(step) == STEP_KEYS and step["round"] == i + 1 and step["rho"] == rho and step["epsilon"] == eps
                     and Fraction(step["epsilon"]) ** 2 / 8 <= written(rho)
                     and step["sensitivity"] == delta and step["candidates"] == len(options) and pair in options)
        except (KeyError, TypeError, ValueError) as exc:
            checks.append(Check(at, "the recorded round can be read", False, f"{type(exc).__name__}: {exc}"))
            return checks
        checks.append(Check(at, "exponential mechanism over the pairs joining two components: ε²/8 ≤ ρ of the "
                            "round "
                            "(exact), Δ of the L1 score from the adjacency, the pair a candidate", holds,
                            f"ε = {eps!r}, ρ = {rho}, Δ = {delta}, {len(options)} candidates, selected "
                            f"{'×'.join(pair)}"))
        chosen.append(pair)
    if len(steps) < spec.rounds:
        left = candidates(spec.attributes, pairs, chosen)
        checks.append(Check("selection.stopped", "fewer rounds than planned only when no candidate is left",
                            not left, f"{len(left)} candidates left"))
    return checks


def synthesis_checks(spec: SynthesisSpec, data: dict) -> list[Check]:
    """Every claim of a synthesis certificate, from the spec and the recorded blocks (module docstring)."""
    rows = data.get("measurements") if isinstance(data.get("measurements"), list) else []
    rows = [dict(r, _selection=data.get("selection")) if isinstance(r, dict) else r for r in rows]
    wanted = [p for p in ("measurement", "one_way", "selected") if p in _parts(spec)]
    checks = [Check("guarantee", "the guarantee is the spec's target and adjacency", data.get("guarantee") ==
                    _json(guarantee(spec)), f"{spec.privacy.definition} {spec.privacy.parameters}"),
              Check("measurements", "one measurement per measured budget part, in order",
                    [r.get("part") if isinstance(r, dict) else None for r in rows] == wanted, ", ".join(wanted))]
    checks += budget_checks(spec, data.get("budget") if isinstance(data.get("budget"), dict) else {})
    checks += selection_checks(spec, data.get("selection"))
    checks += measurement_checks(spec, rows)
    seeded = any(isinstance(r, dict) and isinstance(r.get("certificate"), dict)
                 and r["certificate"].get("test_release") for r in rows)
    synthesis = data.get("synthesis") if isinstance(data.get("synthesis"), dict) else {}
    checks += [
        Check("test_release", "marked a test release exactly when a measurement's noise came from a seed",
              bool(data.get("test_release")) == seeded, "test release" if seeded else "production"),
        Check("post_processing", "the synthesis is post-processing of the " + (
            "measurements' noisy and published tables" if isinstance(spec.synthesize.exact, list) else
            "measurements' noisy tables") + " (no budget)",
              synthesis.get("post_processing") == post_processing(spec), "no budget spent by the synthesis"),
        Check("synthesis.published_tables", "the published tables are " + (
            "the records' tabulations (consistent, non-negative, whole; matched exactly)" if tabulated(spec) else
            "the measurements' post-processed tables"), synthesis.get("published_tables") == published_tables(spec),
              "exact: true" if tabulated(spec) else f"exact: {spec.synthesize.exact}"),
        Check("synthesis.records", "the number of records comes from where the spec says (records_from), and is the "
              "spec's number when the spec gives one", _records_hold(spec, synthesis), records_from(spec)),
    ]
    return checks


def _records_hold(spec: SynthesisSpec, synthesis: dict) -> bool:
    """``records_from`` re-derived; ``records`` a positive whole number, the spec's when it fixes one; and the block's
    keys exactly these five (the method is the synthesizer's own sentence, not re-derived)."""
    count = synthesis.get("records")
    fixed = spec.synthesize.records or spec.data.n
    return (set(synthesis) == {"post_processing", "published_tables", "method", "records", "records_from"}
            and isinstance(synthesis.get("method"), str) and synthesis.get("records_from") == records_from(spec)
            and isinstance(count, int) and not isinstance(count, bool) and count > 0
            and (not fixed or count == fixed))


def _json(value):
    return json.loads(json.dumps(value))


def verify_synthesis(certificate: Certificate | dict) -> Verification:
    """Re-derive every claim of a synthesis certificate: its keys, the spec's hash, the budget (parts, exact total),
    each selection round, each embedded measurement certificate (``dpopt verify`` of it, and that it certifies the
    measurement the spec prescribes), and the recorded checks against the re-derived ones (none missing)."""
    data = certificate.data if isinstance(certificate, Certificate) else certificate
    schema = (certificate_schema(data, top="synthesis") if isinstance(data, dict) else
              Check("schema", "the certificate holds exactly the keys of a synthesis certificate", False, "not an object"))
    checks, spec = recorded_spec(data, schema, load_synthesis_spec, synthesis_sha256)
    if spec is None:
        return Verification(checks)
    fresh = body(spec, data["measurements"], data["selection"], data["synthesis"], bool(data.get("test_release")))
    checks.append(recorded_blocks(fresh, data, ("guarantee", "sensitivity", "mechanism", "utility", "budget",
                                                "numerics")))
    recomputed = synthesis_checks(spec, data)
    checks += recomputed + recorded_check_claims(data["checks"], recomputed, complete=True)
    return Verification(checks)
