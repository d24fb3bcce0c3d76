r"""The privacy budget of a geographic hierarchy, split across its levels.

Level l (nation first) gets a share s_l of the spec's target, Σ s_l = 1 as exact fractions:
ρ_l = s_l ρ (zCDP), μ_l = √s_l μ (GDP), ε_l = s_l ε and δ_l = s_l δ (pure, approx, pDP); each
is rounded **down** to a float. A record lies in one unit per level, so a neighbouring
dataset changes k units per level (k = 1, or the Hamming distance; group keys are kept, as in
:mod:`dpopt.certificate.composition`), and the whole release meets

* zCDP: Σ_l k ρ_l ≤ k ρ (Bun & Steinke 2016, Lemma 2.3); GDP: √(Σ_l k μ_l²) ≤ √k μ
  (Dong, Roth & Su 2022, Cor. 3.3); pure / approx / pDP: the ε's (and δ's) add up;

i.e. the spec's target composed k times, checked here in exact rational arithmetic.

``shares: optimal`` (Gaussian noise, zCDP or GDP): level l adds noise of variance
σ_l² = Δ_l²/(2ρ_l) per cell (Bun & Steinke 2016, Prop. 1.6; σ_l = Δ_l/μ_l for GDP, the same
with ρ = μ²/2), so the weighted error Σ_l w_l d σ_l² = (d/2ρ) Σ_l w_l Δ_l²/s_l is minimised
over Σ s_l = 1 (Lagrange, or Cauchy–Schwarz: (Σ √(w_l) Δ_l)² ≤ Σ s_l · Σ w_l Δ_l²/s_l) at

.. math:: s_l = \frac{\sqrt{w_l}\,\Delta_l}{\sum_j \sqrt{w_j}\,\Delta_j}.

Every level releases the same per-unit query, so the Δ_l are equal and s_l ∝ √w_l.

The level specs themselves (:func:`level_specs`: the spec without geography, at the level's
budget) and the re-derivation of a level certificate's ``hierarchy`` block by ``dpopt verify``
(:func:`verify_hierarchy`) are here too, below the release layer that writes them.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

from dpopt.core.decimals import float_written_below, written
from dpopt.certificate.composition import compose, groups_changed, within_group_adjacency
from dpopt.certificate.recorded import recorded_check_claims
from dpopt.core.checks import Check
from dpopt.errors import DpoptError, SpecError, UnsupportedSpecError
from dpopt.sensitivity.derive import derive
from dpopt.spec.load import load_spec, spec_document, spec_sha256
from dpopt.spec.models import Spec

SHARE_DENOMINATOR = 10**6
"""Optimal shares are rational approximations with at most this denominator, renormalised to sum to 1."""


def level_shares(spec: Spec, sensitivities: list[float] | None = None) -> tuple[list[Fraction], str]:
    """The exact shares s_l (nation first) and how they were set.

    Raises
    ------
    UnsupportedSpecError
        ``optimal`` for a target other than zCDP or GDP (no closed form).
    """
    geography = spec.geography
    count = len(geography.levels) + 1
    if geography.shares == "equal":
        return [Fraction(1, count)] * count, "equal shares"
    if isinstance(geography.shares, list):
        raw = [Fraction(str(s)) for s in geography.shares]
        total = sum(raw)
        return [s / total for s in raw], "given shares (normalised to sum to 1)"
    if spec.privacy.definition not in ("zcdp", "gdp"):
        raise UnsupportedSpecError(
            "geography.shares",
            f"'optimal' is the closed form for Gaussian noise under zcdp or gdp, not {spec.privacy.definition}; give shares",
        )
    weights = geography.weights or [1.0] * count
    deltas = sensitivities or [1.0] * count
    scores = [math.sqrt(w) * d for w, d in zip(weights, deltas)]
    approx = [Fraction(s / sum(scores)).limit_denominator(SHARE_DENOMINATOR) for s in scores]
    approx[-1] = 1 - sum(approx[:-1])
    if approx[-1] <= 0:
        raise SpecError("geography.weights", "the optimal shares are too uneven to represent")
    return approx, "optimal for Gaussian noise: s_l ∝ √w_l Δ_l (closed form)"


def _sqrt_down(x: Fraction) -> float:
    """A float f below √x whose decimal (its repr, as a level's target is read) has square at most x."""
    f = math.sqrt(float(x))
    while written(f) ** 2 > x:
        f = math.nextafter(f, 0.0)
    return f


def level_privacy(spec: Spec, share: Fraction) -> dict:
    """The privacy block of one level's spec: the share of the target as written, rounded down so that the
    decimal the level's target is read as (:func:`~dpopt.core.decimals.written`) does not exceed it."""
    definition, p = spec.privacy.definition, spec.privacy.parameters
    if definition == "gdp":
        return {"gdp": {"mu": _sqrt_down(share * written(p["mu"]) ** 2)}}
    return {definition: {name: float_written_below(share * written(value)) for name, value in p.items()}}


def budget_check(spec: Spec, level_specs: list[Spec]) -> tuple[dict, Check]:
    """The whole release's guarantee and its exact check (the level budgets add up to the target)."""
    definition, p = spec.privacy.definition, spec.privacy.parameters
    k = groups_changed(spec, 1)
    levels = [s.privacy.parameters for s in level_specs]
    if definition == "gdp":
        holds = sum(written(q["mu"]) ** 2 for q in levels) <= written(p["mu"]) ** 2
    else:
        holds = all(sum(written(q[name]) for q in levels) <= written(value) for name, value in p.items())
    whole = compose(spec, k)
    whole["method"] = (
        f"each record is in one unit per level ({k} unit(s) change per level): parallel composition within a "
        f"level; the {len(levels)} levels composed by {compose(spec, 2)['method']}"
    )
    return whole, Check(
        "hierarchy.budget",
        "the level budgets compose to at most the spec's target (exact rational arithmetic)",
        bool(holds),
        f"levels {levels}; target {definition} {p}; whole release {definition} "
        + ", ".join(f"{n} = {v}" for n, v in whole.items() if n not in ("definition", "method")),
    )


NATION = "nation"


def level_specs(spec: Spec) -> tuple[list[Spec], list, str]:
    """One spec per level (nation first): the spec without geography, with the level's budget.

    Raises
    ------
    SpecError
        The spec has no ``geography`` (no levels).
    """
    if spec.geography is None:
        raise SpecError("geography", "missing: a hierarchical release's spec names its levels")
    delta2 = [derive(_strip(spec, spec.privacy.model_dump(exclude_none=True))).l2] * (len(spec.geography.levels) + 1)
    shares, how = level_shares(spec, delta2)
    names = [NATION] + list(spec.geography.levels)
    specs = [_strip(spec, level_privacy(spec, s), f"{spec.name} — {name} level") for s, name in zip(shares, names)]
    return specs, shares, how


def verify_hierarchy(level_spec: Spec, block: dict, certificate: dict) -> list[Check]:
    """Re-derive a level certificate's ``hierarchy`` block (for ``dpopt verify``).

    From the whole spec recorded in the block: the level specs are rebuilt (shares, rounded-down
    budgets), the certificate's own spec must be one of them, the level budgets must compose to
    at most the target (exact rationals) and the recorded composition must be the one re-derived.
    The block's row for this level must name this certificate's mechanism and file, and the
    certificate's ``postprocess`` block must be the hierarchy's. The block's recorded ``checks`` are the
    re-derived budget claim (:func:`dpopt.certificate.recorded.recorded_check_claims`) and, in a release,
    the post-processing's claims about its published tables (``level1.integer`` …: :data:`TABLE_CLAIM`),
    which need the tables and are not re-derived here; any other recorded claim fails.
    """
    try:
        spec = load_spec(block["spec"])
        specs, shares, _ = level_specs(spec)
    except (KeyError, TypeError, DpoptError) as exc:
        return [Check("hierarchy", "rebuild the level specs from the recorded whole spec", False, str(exc))]
    digests = [spec_sha256(s) for s in specs]
    whole, budget = budget_check(spec, specs)
    levels = block.get("levels") if isinstance(block.get("levels"), list) else []
    recorded = [(lv.get("share"), lv.get("privacy")) for lv in levels if isinstance(lv, dict)]
    rebuilt = [(str(sh), s.privacy.model_dump(exclude_none=True)) for sh, s in zip(shares, specs)]
    names = [NATION, *spec.geography.levels]
    own = spec_sha256(level_spec)
    index = digests.index(own) if own in digests else None
    row = levels[index] if index is not None and len(levels) == len(specs) else None
    expected_row = None if index is None else {
        "level": names[index], "certificate": f"certificate_{names[index]}.json",
        "mechanism": {"family": certificate["mechanism"].get("family"),
                      "parameters": certificate["mechanism"].get("parameters")}}
    same_row = (isinstance(row, dict) and expected_row is not None
                and all(row.get(k) == v for k, v in expected_row.items())
                and ("units" not in row  # a design (``dpopt solve``) has no units yet; a release counts them
                     or isinstance(row["units"], int) and not isinstance(row["units"], bool) and row["units"] >= 1))
    return [
        *block_check_claims(block, budget),
        Check("hierarchy.level", "this certificate's spec is one level of the recorded hierarchy (SHA-256)",
              index is not None, f"{len(specs)} levels re-derived"),
        budget,
        Check("hierarchy.composition", "recorded shares, level budgets and composition equal the re-derived ones",
              recorded == rebuilt and block.get("composition") == whole
              and block.get("adjacency") == within_group_adjacency(spec),
              f"whole release {whole['definition']}"),
        Check("hierarchy.mechanism", "the hierarchy's row for this level names this certificate's mechanism and "
                                     "file, and the certificate's postprocess block is the hierarchy's",
              bool(same_row and certificate.get("postprocess") == block.get("postprocess")),
              f"level {names[index]}" if index is not None else "no level matches"),
    ]


TABLE_CLAIM = re.compile(r"(postprocess|level\d+)\.(integer|nonnegative|invariants|consistent|unit_totals)"
                         r"|hierarchy\.level\d+_sums")
"""The names of the post-processing's claims about the published tables (:mod:`dpopt.postprocess.certify`)."""


def block_check_claims(block: dict, budget: Check) -> list[Check]:
    """The recorded ``checks`` of a ``hierarchy`` block against the re-derived budget claim (see
    :func:`verify_hierarchy`); a post-processing claim is accepted only in a release's block, and only
    as a passed claim about a level's table."""
    rows = block.get("checks")
    tables = [row for row in rows if isinstance(row, dict) and isinstance(row.get("claim"), str)
              and TABLE_CLAIM.fullmatch(row["claim"]) and row.get("passed") is True
              and "postprocess" in block] if isinstance(rows, list) else []
    rest = [row for row in rows if not any(row is t for t in tables)] if isinstance(rows, list) else rows
    return recorded_check_claims(rest, [budget], complete=True)


def _strip(spec: Spec, privacy: dict, name: str | None = None) -> Spec:
    doc = spec_document(spec)
    doc.pop("geography", None)
    doc["privacy"] = privacy
    if name:
        doc["name"] = name
    return load_spec(doc)
