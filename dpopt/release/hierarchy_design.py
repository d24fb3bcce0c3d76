"""The design of a hierarchical release: what ``dpopt solve`` certifies and ``dpopt release`` then does.

:func:`solve_hierarchy` splits the spec's target across the geography levels, nation first
(:func:`dpopt.certificate.hierarchy_budget.level_specs`: exact shares, each level's budget rounded
down), solves one spec per level (the levels differ in their budget only: one compilation serves
all), checks that the level budgets compose to the target in exact arithmetic
(:func:`~dpopt.certificate.hierarchy_budget.budget_check`) and certifies the whole release
(:mod:`dpopt.certificate.hierarchy_release`: the composed guarantee with its ε per δ, every level's
certificate). :func:`dpopt.release.hierarchy.release_hierarchy` starts from this design: the σ it
releases with are the σ ``solve`` certified.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

from dpopt.certificate.composition import within_group_adjacency
from dpopt.certificate.hierarchy_budget import NATION, budget_check, level_specs
from dpopt.certificate.hierarchy_release import hierarchy_certificate, level_mu
from dpopt.certificate.model import Certificate, write_atomic
from dpopt.errors import SpecError, UnsupportedSpecError
from dpopt.problem import Problem, compile
from dpopt.solve import Solution, solve
from dpopt.spec.load import load_spec, spec_document
from dpopt.spec.models import Spec


def check_hierarchy_spec(spec: Spec) -> None:
    """Refuse a geography spec the hierarchical release does not support.

    Raises
    ------
    SpecError, UnsupportedSpecError
    """
    if spec.geography is None:
        raise SpecError("geography", "a hierarchical release needs geography: {levels: [...]}")
    if spec.invariants:
        raise UnsupportedSpecError("invariants", "a hierarchical release supports no invariants yet (every level is noisy)")
    if spec.data.n is not None:
        raise SpecError("data.n", "fixes the size of the whole dataset; a hierarchy has one size per unit: remove data.n")
    if spec.postprocess is not None and not spec.postprocess.consistent:
        raise SpecError("postprocess.consistent", "a hierarchy is post-processed top-down: consistent must be true")
    if spec.geography.exact_totals and spec.adjacency.kind == "add_remove":
        raise UnsupportedSpecError(
            "geography.exact_totals",
            "unit totals are protected under add_remove; publish them exactly only under replace_one or hamming",
        )
    clash = [c for c in spec.geography.levels if c in spec.data.attributes]
    if clash:
        raise SpecError("geography.levels", f"'{clash[0]}' is a data attribute of the table; levels name unit-code columns")


@dataclass(frozen=True)
class HierarchySolution:
    """What :func:`solve_hierarchy` returns.

    Attributes
    ----------
    spec : Spec
        The whole spec (with ``geography``).
    names : tuple of str
        ``nation`` then the geography levels.
    shares : tuple of Fraction
        Each level's exact share of the target.
    specs, solutions :
        Each level's spec (the whole spec without geography, at the level's budget) and its solution.
    block : dict
        The ``hierarchy`` block: levels, shares, budgets, mechanisms, the composed guarantee and its check.
    """

    spec: Spec
    names: tuple[str, ...]
    shares: tuple[Fraction, ...]
    specs: tuple[Spec, ...]
    solutions: tuple[Solution, ...]
    block: dict

    @property
    def problem(self) -> Problem:
        """The compiled per-unit query (the same at every level)."""
        return self.solutions[0].problem

    def level_certificates(self, block: dict | None = None) -> list[Certificate]:
        """Each level's certificate with the ``hierarchy`` block (``block``: a release's, with its units)."""
        block = self.block if block is None else block
        out = []
        for solution in self.solutions:
            data = json.loads(solution.certificate.to_json())
            data["hierarchy"] = block
            data["whole_release"] = "hierarchy"
            if "postprocess" in block:
                data["postprocess"] = block["postprocess"]
            out.append(Certificate(data))
        return out

    def certificate(self, block: dict | None = None) -> Certificate:
        """The whole release's certificate (:mod:`dpopt.certificate.hierarchy_release`)."""
        block = self.block if block is None else block
        mus = [level_mu(s.mechanism.family, s.mechanism.privacy_summary(s.problem.space)) for s in self.solutions]
        return hierarchy_certificate(self.spec, block, self.level_certificates(block), mus)

    def write(self, out: str | Path) -> list[Path]:
        """``mechanism.json`` (each level's :meth:`~dpopt.solve.Solution.mechanism_document`), ``certificate.json``
        (the whole release) and ``certificate_<level>.json`` per level in ``out``."""
        out = Path(out)
        written = [out / "mechanism.json", out / "certificate.json"] + [out / f"certificate_{n}.json" for n in self.names]
        certificate = self.certificate()
        mechanisms = {"kind": "hierarchy", "spec_sha256": certificate["spec_sha256"],
                      "levels": {n: s.mechanism_document() for n, s in zip(self.names, self.solutions)}}
        write_atomic(written[0], json.dumps(mechanisms, indent=2) + "\n")
        certificate.write(written[1])
        for path, cert in zip(written[2:], self.level_certificates()):
            cert.write(path)
        return written

    def sigmas(self) -> dict[str, float | None]:
        """Each level's σ (None for a family without one)."""
        return {n: s.mechanism.parameters.get("sigma") for n, s in zip(self.names, self.solutions)}


def solve_hierarchy(spec: Spec | str | Path | Mapping) -> HierarchySolution:
    """Design and certify a hierarchical release (module docstring).

    Parameters
    ----------
    spec : Spec, path or dict
        A spec with a ``geography`` block.

    Returns
    -------
    HierarchySolution

    Raises
    ------
    SpecError
        Not a geography spec, or the level budgets exceed the target.
    UnsupportedSpecError, CalibrationError
    """
    spec = load_spec(spec)
    check_hierarchy_spec(spec)
    specs, shares, how = level_specs(spec)
    problem = compile(specs[0])  # the levels differ in their budget only: one compilation serves all
    solutions = [solve(problem.restated(s)) for s in specs]
    whole, check = budget_check(spec, specs)
    if not check.passed:
        raise SpecError("geography.shares", f"the level budgets exceed the target ({check.detail})")
    names = (NATION, *spec.geography.levels)
    block = {
        "spec": spec_document(spec),
        "levels": [
            {"level": name, "share": str(share), "privacy": s.privacy.model_dump(exclude_none=True),
             "mechanism": {"family": sol.mechanism.family, "parameters": sol.mechanism.parameters},
             "certificate": f"certificate_{name}.json"}
            for name, share, s, sol in zip(names, shares, specs, solutions)
        ],
        "shares": how,
        "adjacency": within_group_adjacency(spec),
        "composition": whole,
        "checks": [check.to_dict()],
    }
    return HierarchySolution(spec, names, tuple(shares), tuple(specs), tuple(solutions), block)
