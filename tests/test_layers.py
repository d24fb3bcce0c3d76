"""Data flows one way: no import from a lower layer to a higher one, no import cycle.

Every ``import`` and ``from ... import`` of every module of ``dpopt`` is read from its
source (the AST: top-level and inside functions alike) and checked against
:data:`LAYERS`, the pipeline from the shared types at the bottom to the command line at
the top. A module may import its own subpackage, or a subpackage of a lower layer; two
subpackages of one layer are independent. Imports inside functions are reserved for the
CLI's per-command imports (start-up time of ``dpopt --help``) and for
:data:`OPTIONAL_DEPENDENCIES`; lazy imports of heavy third-party libraries (cvxpy,
matplotlib, duckdb, dask) are not dpopt imports and are not checked here.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import networkx as nx

PACKAGE = Path(__file__).resolve().parents[1] / "dpopt"

LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "_version", "_lazy"),  # exceptions, version, PEP 562 helper
    ("core", "rng"),  # Check, directed rounding, bisection; the CSPRNG
    ("spec",),  # pydantic models, loading, validation
    ("domain",),  # record domains, compiled queries, workloads
    ("geometry", "noise"),  # norm balls and polytopes; noise laws (densities, samplers, moments), no privacy
    ("sensitivity",),  # sensitivity spaces, Semi-DP neighbourhoods
    ("problem",),  # compile a spec once: query, invariant domain, sensitivity space
    ("privacy",),  # accounting, conversions, PLDs, trade-offs, Gaussian calibration
    ("stats",),  # confidence regions, test power, random-data designs
    ("optimize",),  # calibrators and convex programs the families design with
    ("mechanisms",),  # the families
    ("design",),  # every family's candidate, the selection, cross-family comparisons
    ("certificate",),  # claims, second route, verification, composition checks
    ("solve",),  # spec -> sensitivity -> design -> certificate
    ("audit", "postprocess", "synth"),  # empirical audit; post-processing of releases; synthetic records
    ("release",),  # releases at scale, hierarchies
    ("report",),  # the report a person reads
    ("plan", "selection", "synthesis"),  # several queries under one budget; private keys and quantiles (person
    # level); synthetic microdata (measure, select, synthesize, certify)
    ("ledger",),  # a privacy budget ledger across releases and processes
    ("cli",),
    ("__init__",),  # the flat namespace of ``import dpopt`` (names resolved on first use)
)
"""Subpackages (and top-level modules) from the bottom layer to the top."""

OPTIONAL_DEPENDENCIES = {
    ("dpopt.release.batch", "dpopt.release.distributed"):
        "dask is optional (pip install 'dpopt[dask]'): the Dask engine is imported when asked for",
    ("dpopt.plan.release", "dpopt.release.distributed"):
        "the same optional Dask engine, for a grouped release plan (--engine dask)",
    ("dpopt.release.batch", "dpopt.release.distributed_bounding"):
        "the same optional Dask engine, bounding a privacy unit's rows for a grouped release (--engine dask)",
    ("dpopt.synthesis.run", "dpopt.synthesis.pipeline"):
        "dpopt.synthesize resolves without loading DuckDB, the designs and the synthesizer: imported when called",
    ("dpopt.synthesis.run", "dpopt.rng"): "the same entry: the CSPRNG's randgen is loaded when dpopt.synthesize is called",
}
"""The only dpopt imports inside functions outside the CLI, each with its reason."""

_LAYER_OF = {name: i for i, names in enumerate(LAYERS) for name in names}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _unit(module: str) -> str:
    """The subpackage or top-level module a module belongs to (``__init__`` for ``dpopt``)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _resolve(module: str, name: str | None) -> str:
    """``from module import name`` names a submodule when there is one."""
    if name and f"{module}.{name}" in MODULES:
        return f"{module}.{name}"
    return module


def _imports(module: str, path: Path):
    """(imported dpopt module, line, inside a function) for every import of ``module``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nested = {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
              for n in ast.walk(f)}
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            targets = [_resolve(base, alias.name) for alias in node.names]
        else:
            continue
        for target in targets:
            if target == "dpopt" or target.startswith("dpopt."):
                yield target, node.lineno, id(node) in nested


@functools.cache
def imports() -> list[tuple[str, str, int, bool]]:
    """(module, imported dpopt module, line, inside a function) over every module, parsed once per process when a
    test first asks (not at collection: every xdist worker collects this file)."""
    return [(m, t, line, nested) for m, p in MODULES.items() for t, line, nested in _imports(m, p)]


def test_every_subpackage_has_a_layer():
    assert sorted({_unit(m) for m in MODULES} - set(_LAYER_OF)) == []


def test_no_import_from_a_lower_layer_to_a_higher_one():
    backward = []
    for module, target, line, _ in imports():
        a, b = _unit(module), _unit(target)
        if a != b and _LAYER_OF[b] >= _LAYER_OF[a]:
            backward.append(f"{module}:{line} imports {target} ({a} is not above {b})")
    assert backward == []


def test_no_dpopt_import_inside_a_function():
    lazy = [f"{module}:{line} imports {target}" for module, target, line, nested in imports()
            if nested and _unit(module) != "cli" and (module, target) not in OPTIONAL_DEPENDENCIES]
    assert lazy == []


def test_no_cycle_between_modules():
    graph = nx.DiGraph()
    graph.add_edges_from((module, target) for module, target, _, _ in imports() if module != target)
    assert [sorted(c) for c in nx.simple_cycles(graph)] == []


def test_no_cycle_between_subpackages():
    graph = nx.DiGraph()
    graph.add_edges_from((_unit(m), _unit(t)) for m, t, _, _ in imports() if _unit(m) != _unit(t))
    assert [sorted(c) for c in nx.simple_cycles(graph)] == []
