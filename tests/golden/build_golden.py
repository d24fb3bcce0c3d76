"""Build the golden snapshot of every example spec's certificate values.

One command, from the repository root::

    PYTHONPATH=$PWD python tests/golden/build_golden.py [SPEC.yaml ...]

It solves every ``specs/*.yaml`` (or only the named ones, whose rows it replaces, leaving the others as
they are) and writes ``tests/golden/certificates.json``: for each
spec the chosen family, every leaf of the mechanism parameters (numbers, strings,
booleans, keyed by their path in the parameter tree), the utility metric and value, and
whether the solve took longer than :data:`SLOW_SECONDS` (those specs are compared only
in the slow-marked variant of ``tests/test_golden.py``).

The snapshot records the calibrations of the tree it was built on. A change that is
*meant* to change a calibration (a tighter conversion, a new family that wins) must
regenerate it with this command and say so in the commit; a change that is only meant
to be faster must leave it untouched (``tests/test_golden.py`` compares to 1e-12
relative).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).with_name("certificates.json")
SLOW_SECONDS = 5.0


def leaves(value, prefix: str = "") -> dict:
    """Every leaf of a JSON-like tree, keyed by its path (``a.b[2].c``)."""
    if isinstance(value, dict):
        out = {}
        for key in sorted(value):
            out.update(leaves(value[key], f"{prefix}.{key}" if prefix else str(key)))
        return out
    if isinstance(value, (list, tuple)):
        out = {}
        for i, item in enumerate(value):
            out.update(leaves(item, f"{prefix}[{i}]"))
        return out
    return {prefix: value}


def snapshot(solution) -> dict:
    """The values of a solution's certificate that a speed-up must not change."""
    cert = solution.certificate
    return {
        "family": cert["mechanism"]["family"],
        "parameters": leaves(cert["mechanism"]["parameters"]),
        "utility": {"metric": cert["utility"]["metric"], "value": cert["utility"]["value"]},
    }


def plan_snapshot(certificate) -> dict:
    """The values of a release plan's certificate: every query's family and parameters, the weighted total."""
    return {
        "family": "plan: " + ", ".join(q["family"] for q in certificate["queries"]),
        "parameters": leaves({q["name"]: q["parameters"] for q in certificate["queries"]}),
        "utility": {"metric": certificate["utility"]["metric"], "value": certificate["utility"]["value"]},
    }


def hierarchy_snapshot(design) -> dict:
    """The values of a hierarchical release's design: every level's family and parameters, the levels' total utility."""
    certificates = [s.certificate for s in design.solutions]
    return {
        "family": "hierarchy: " + ", ".join(c["mechanism"]["family"] for c in certificates),
        "parameters": leaves({n: c["mechanism"]["parameters"] for n, c in zip(design.names, certificates)}),
        "utility": {"metric": certificates[0]["utility"]["metric"],
                    "value": sum(c["utility"]["value"] for c in certificates)},
    }


def selection_snapshot(certificate) -> dict:
    """The values of a release with private keys and quantiles: every release's selection, noise and quantile
    parameters (the keep-probability table by its length and last step), the composed ε."""
    parameters = {}
    for block in certificate["releases"]:
        values = {k: block[k] for k in ("partition_selection", "noise", "per_q") if k in block}
        table = values.get("partition_selection", {}).pop("keep_probabilities", None)
        if table is not None:
            values["partition_selection"] |= {"keep_table_length": len(table), "keep_before_certain": table[-2]}
        parameters[block["name"]] = values
    return {"family": "selection: " + ", ".join(b["kind"] for b in certificate["releases"]),
            "parameters": leaves(parameters),
            "utility": {"metric": "composed_epsilon", "value": certificate["guarantee"]["epsilon"]}}


def solve_snapshot(path: Path) -> dict:
    """Solve one example spec (a release plan when it holds ``queries:``, a hierarchical release when it
    holds ``geography:``, private keys and quantiles when it holds ``releases:``) and snapshot it."""
    from dpopt.plan import is_plan_document, solve_plan
    from dpopt.release import solve_hierarchy
    from dpopt.selection import certify
    from dpopt.solve import solve
    from dpopt.spec.load import read_document
    from dpopt.spec.selection import is_selection_document, load_selection_spec

    document = read_document(path)
    if is_selection_document(document):
        return selection_snapshot(certify(load_selection_spec(path)))
    if is_plan_document(document):
        return plan_snapshot(solve_plan(path).certificate)
    if "geography" in document:
        return hierarchy_snapshot(solve_hierarchy(path))
    if "synthesize" in document:  # synthetic records: the first measurement's design depends on the spec alone
        from dpopt.spec.synthesis import load_synthesis_spec
        from dpopt.synthesis.measure import first_measurement_spec

        return snapshot(solve(first_measurement_spec(load_synthesis_spec(path))))
    return snapshot(solve(path))


def main(names: list[str]) -> int:
    sys.path.insert(0, str(ROOT))
    out = json.loads(GOLDEN.read_text()) if names else {}
    paths = [ROOT / "specs" / name for name in names] or sorted((ROOT / "specs").glob("*.yaml"))
    for path in paths:
        start = time.perf_counter()
        row = solve_snapshot(path)
        seconds = time.perf_counter() - start
        out[path.name] = {**row, "slow": seconds > SLOW_SECONDS}
        print(f"{path.name}: {out[path.name]['family']} ({seconds:.2f} s)", file=sys.stderr)
    GOLDEN.write_text(json.dumps(out, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    print(f"wrote {GOLDEN.relative_to(ROOT)} ({len(out)} specs)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
