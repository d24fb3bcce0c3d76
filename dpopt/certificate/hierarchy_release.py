r"""One certificate for a whole hierarchical release (``dpopt solve`` on a spec with ``geography``).

It embeds the whole spec, the ``hierarchy`` block (levels, exact shares, each level's budget and
mechanism, the composed guarantee of :func:`dpopt.certificate.hierarchy_budget.budget_check`) and
every level's own certificate (the level spec at its budget, with the same block). ``dpopt verify``
re-derives all of it (:func:`verify_hierarchy_release`): each level certificate by
:func:`dpopt.certificate.verify.verify` (which re-derives the block,
:func:`~dpopt.certificate.hierarchy_budget.verify_hierarchy`), the levels in order against the
level specs rebuilt from the whole spec, and the whole release's ε per δ.

**ε per δ of the whole release.** When every level adds Gaussian noise, level l is exactly
μ_l-GDP with μ_l = Δ₂/σ_l, and a neighbouring dataset changes k units per level (k = 1, or the
Hamming distance), so the whole release is μ-GDP with

.. math:: \mu^2 = k \sum_l \mu_l^2

(Dong, Roth & Su 2022, Cor. 3.3), and ε(δ) is read off the exact analytic-Gaussian profile
(Balle & Wang 2018, Thm 8; :func:`dpopt.privacy.gaussian.gaussian_epsilon`) — the same
conversion a single Gaussian certificate states, at the same δ grid
(:data:`dpopt.privacy.semi_dp.REPORTED_DELTAS`). When a level measures exactly on the lattice
(:mod:`dpopt.mechanisms.lattice`) it is ρ_l-zCDP (not μ-GDP); the whole release is then ρ-zCDP with
ρ = k Σ_l ρ_l (ρ_l = μ_l²/2 for a continuous Gaussian level) and ε(δ) is the CKS conversion of ρ
(Canonne, Kamath & Steinke 2020, Prop. 12). Under a pure target the composed ε holds at
every δ. Otherwise no ε per δ is stated, and the block says why.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from dpopt._version import __version__
from dpopt.certificate.composition import groups_changed
from dpopt.certificate.hierarchy_budget import level_specs
from dpopt.certificate.model import Certificate
from dpopt.certificate.recorded import certificate_schema, compare, is_test_release, recorded_check_claims
from dpopt.certificate.verify import Verification, rebuild_mechanism, verify
from dpopt.core.checks import Check
from dpopt.errors import DpoptError
from dpopt.privacy.gaussian import gaussian_epsilon
from dpopt.privacy.semi_dp import REPORTED_DELTAS
from dpopt.privacy.zcdp import zcdp_epsilon_cks
from dpopt.spec.load import load_spec, spec_document, spec_sha256
from dpopt.spec.models import Spec

KIND = "hierarchy"

_UNREADABLE = (KeyError, TypeError, AttributeError, ValueError, IndexError, DpoptError)
"""What assembling the whole certificate from hostile level certificates may raise."""

EPSILON_METHOD = ("exact: every level is Gaussian, μ_l = Δ₂/σ_l; the whole release is μ-GDP with μ² = k Σ_l μ_l² "
                  "(Dong, Roth & Su 2022, Cor. 3.3), ε from the analytic-Gaussian profile (Balle & Wang 2018)")


def is_hierarchy_certificate(data) -> bool:
    """True for the JSON of a whole hierarchical release's certificate."""
    return isinstance(data, dict) and data.get("kind") == KIND


ZCDP_EPSILON_METHOD = ("every level is ρ_l-zCDP (exact lattice measurement, CKS 2020 Thm 14, or a continuous "
                       "Gaussian, ρ_l = μ_l²/2); the whole release is ρ-zCDP with ρ = k Σ_l ρ_l, ε by the CKS "
                       "conversion (Canonne, Kamath & Steinke 2020, Prop. 12)")


def level_mu(family: str, summary: dict) -> dict | None:
    """A level's exact privacy when its noise is Gaussian (``gaussian`` family): ``{"mu": μ}`` for the continuous
    noise, ``{"rho": ρ}`` for the exact lattice measurement; else None."""
    if family != "gaussian":
        return None
    return {"mu": summary["mu"]} if "mu" in summary else {"rho": summary["rho"]}


def _mu_above(k: int, mus: list[float]) -> float:
    mu = math.sqrt(k * sum(m * m for m in mus))
    return math.nextafter(mu, math.inf)


def whole_epsilon(spec: Spec, level_mus: list[float | None]) -> dict:
    """The whole release's ε per δ (module docstring): ``{"epsilon_at_delta", "epsilon_method"}``, and the
    whole release's μ-GDP parameter ``gdp_mu`` (rounded up) when every level is Gaussian.

    Parameters
    ----------
    level_mus : list of dict or None
        Each level's exact privacy (:func:`level_mu`), None for a level that is not Gaussian.
    """
    k = groups_changed(spec, 1)
    if level_mus and all(m is not None and "mu" in m for m in level_mus):
        mu = _mu_above(k, [m["mu"] for m in level_mus])
        return {"gdp_mu": mu, "epsilon_at_delta": {f"{d:g}": gaussian_epsilon(d, mu) for d in REPORTED_DELTAS},
                "epsilon_method": EPSILON_METHOD}
    if level_mus and all(m is not None for m in level_mus):
        rho = math.nextafter(k * sum(m["rho"] if "rho" in m else m["mu"] ** 2 / 2 for m in level_mus), math.inf)
        return {"zcdp_rho": rho,
                "epsilon_at_delta": {f"{d:g}": zcdp_epsilon_cks(d, rho)[0] for d in REPORTED_DELTAS},
                "epsilon_method": ZCDP_EPSILON_METHOD}
    if spec.privacy.definition == "pure":
        eps = k * spec.privacy.parameters["epsilon"]
        return {"epsilon_at_delta": {f"{d:g}": eps for d in REPORTED_DELTAS},
                "epsilon_method": "pure ε composed over the levels: it holds at every δ"}
    return {"epsilon_at_delta": None,
            "epsilon_method": "not stated: a level's noise is not Gaussian, so no exact (ε, δ) profile of the "
                              "composition is available; the composed guarantee above is the certified one"}


def hierarchy_guarantee(spec: Spec, block: dict, level_mus: list[dict | None]) -> dict:
    """The certificate's ``guarantee``: the composed target of the whole release, its scope, ε per δ."""
    whole = {k: v for k, v in block["composition"].items() if k != "method"}
    return {
        **whole,
        "composition": block["composition"]["method"],
        **whole_epsilon(spec, level_mus),
        "scope": {"adjacency": spec.adjacency.model_dump(), "adjacency_description": block["adjacency"],
                  "invariants": [], "semi_adjacent_parameter": None},
    }


def hierarchy_certificate(spec: Spec, block: dict, level_certificates: list[Certificate],
                          level_mus: list[dict | None]) -> Certificate:
    """Assemble the whole release's certificate (module docstring)."""
    names = [lv["level"] for lv in block["levels"]]
    return Certificate({
        "dpopt_version": __version__,
        "kind": KIND,
        "spec_sha256": spec_sha256(spec),
        "spec": spec_document(spec),
        "guarantee": hierarchy_guarantee(spec, block, level_mus),
        "sensitivity": level_certificates[0]["sensitivity"],
        "mechanism": {"family": KIND, "parameters": {lv["level"]: lv["mechanism"] for lv in block["levels"]}},
        "utility": {"metric": "per_level", "value": None,
                    "levels": {n: c["utility"] for n, c in zip(names, level_certificates)},
                    "method": "each level's predicted error per unit, from its certificate"},
        "hierarchy": block,
        "levels": {n: c.data for n, c in zip(names, level_certificates)},
        "checks": list(block["checks"]),
    })


def verify_hierarchy_release(certificate: Certificate | dict | str | Path) -> Verification:
    """Re-check every claim of a whole hierarchical release's certificate (module docstring).

    Its keys must be the schema's (:func:`dpopt.certificate.recorded.certificate_schema`); every level
    certificate is verified, and the whole certificate's blocks (guarantee, sensitivity, mechanism,
    utility, checks) must equal the ones :func:`hierarchy_certificate` assembles from the verified levels.
    """
    cert = Certificate.read(certificate)
    data = cert.data
    schema = certificate_schema(data, top="hierarchy_release")
    block, levels = data.get("hierarchy"), data.get("levels")
    if not schema.passed:  # a key unknown or missing, a block not of its type: nothing else is read
        return Verification([schema])
    if not all(isinstance(sub, dict) for sub in levels.values()):
        return Verification([schema, Check("levels", "one certificate (an object) per level", False,
                                           "a level's certificate is not an object")])
    try:
        spec = load_spec(data["spec"])
        specs, _, _ = level_specs(spec)
    except (KeyError, TypeError, DpoptError) as exc:
        return Verification([schema, Check("spec", "re-validate the embedded spec and rebuild its level specs", False,
                                           str(exc))])
    digest = spec_sha256(spec)
    checks = [schema, Check("spec_sha256", "SHA-256 of the canonical JSON of the embedded spec",
                            digest == data["spec_sha256"], f"recomputed {digest}")]
    names = [lv.get("level") for lv in block["levels"]]
    order = list(levels) == names and len(names) == len(specs)
    checks.append(Check("hierarchy.levels", "one certificate per level, nation first, each for the level spec "
                        "rebuilt from the whole spec (SHA-256)",
                        order and [c.get("spec_sha256") for c in levels.values()] == [spec_sha256(s) for s in specs],
                        f"{len(specs)} levels re-derived: {', '.join(map(str, names))}"))
    mus: list[dict | None] = []
    for name, sub in levels.items():
        result = verify(sub)
        checks.extend(Check(f"{name}.{c.claim}", c.method, c.passed, c.detail) for c in result.checks)
        checks.append(Check(f"{name}.block", "the level certificate carries the release's hierarchy block",
                            sub.get("hierarchy") == block, name))
        if result.problem is None:
            mus.append(None)
            continue
        try:
            summary = rebuild_mechanism(sub, result.problem.space).privacy_summary(result.problem.space)
        except DpoptError as exc:
            checks.append(Check(f"{name}.mechanism", "rebuild from family and parameters", False, str(exc)))
            mus.append(None)
            continue
        mus.append(level_mu(sub["mechanism"]["family"], summary))
    expected = hierarchy_guarantee(spec, block, mus) if isinstance(block.get("composition"), dict) else None
    guarantee = data.get("guarantee") if isinstance(data.get("guarantee"), dict) else {}
    checks.append(Check("guarantee", "the composed guarantee and its ε per δ re-derived from the rebuilt level "
                        "mechanisms (exact μ-GDP composition and the analytic-Gaussian profile, or zCDP composition "
                        "and the CKS conversion)",
                        data.get("guarantee") == expected,
                        f"whole release {guarantee.get('definition')}; ε at δ: "
                        f"{(expected or {}).get('epsilon_at_delta')}"))
    checks.extend(_whole_blocks(data, spec, block, list(levels.values()), mus, order))
    checks.append(Check("test_release", "a level certificate of a test release (seeded noise) makes the whole one a "
                        "test release", is_test_release(data) or not any(map(is_test_release, levels.values())),
                        "a test release" if is_test_release(data) else "not a test release"))
    return Verification(checks)


def _whole_blocks(data: dict, spec: Spec, block: dict, levels: list[dict], mus: list[float | None],
                  order: bool) -> list[Check]:
    """The whole certificate's ``sensitivity``, ``mechanism``, ``utility`` and ``checks`` against the ones
    :func:`hierarchy_certificate` assembles from the (verified) level certificates and block; the block's
    own checks are re-derived by each level's :func:`~dpopt.certificate.hierarchy_budget.verify_hierarchy`."""
    try:
        whole = json.loads(hierarchy_certificate(spec, block, [Certificate(sub) for sub in levels], mus).to_json())
    except _UNREADABLE as exc:
        return [Check("hierarchy.blocks", "assemble the whole certificate from its levels", False,
                      f"{type(exc).__name__}: {exc}")]
    if not order:
        return [Check("hierarchy.blocks", "assemble the whole certificate from its levels", False,
                      "the levels do not match the hierarchy's")]
    recorded = recorded_check_claims(data["checks"], [Check(**row) for row in block["checks"]], complete=True)
    return [compare(key, f"{key} block (assembled from the verified levels)", data.get(key), whole[key])
            for key in ("sensitivity", "mechanism", "utility", "checks")] + recorded
