"""dpopt and OpenDP side by side on person-level data: the same visits, bounds and budget.

The data are ``specs/data/visits.csv`` (several visits per person, column ``person_id``) and the bounds
those of ``specs/visits_person_level.yaml``: at most c = 3 visits per (age group, clinic) cell, at most
g = 2 cells and k = 4 visits per person. For each statistic the script prints the noise scale of
both libraries under the same budget (ρ = 0.5 zCDP: the Gaussian σ; ε = 1: the Laplace scale):

* counts per cell (dpopt: the ``contingency_table`` of the spec; OpenDP: ``truncate_per_group(c, by)``,
  ``truncate_num_groups(g, by)``, ``truncate_per_group(k)`` then ``group_by(by).agg(dp.len())`` joined
  with the public key set);
* sums of ``duration`` ∈ [0, 120] per cell (OpenDP) against the exact person-level l2 of that vector
  (dpopt derives it, 120 × the table's; released per cell it would group by two columns, which composes);
* the total sum of ``duration`` (k = 4 rows per person; both libraries release it);
* counts (ρ = 0.5 and ε = 1) and sums of ``duration`` (ρ = 0.5) per clinic: dpopt's ``--group-by clinic``
  release, whose whole-release guarantee is the better of the composition over the ≤ g clinics a person keeps
  rows in and the exact sensitivity of the stacked clinics (:func:`dpopt.certificate.composition.joint_block`):
  the per-group target is set to the whole budget over the certificate's norm ratio (rounded down), the
  release run on the data, and its certified whole-release guarantee printed with the scale; against
  OpenDP's grouped count and sum.

Then the truncation itself: the rows each library keeps (OpenDP's, read from a release at ρ = 10⁸, whose
noise is far below one count), against a recount in Python of what the stated bounds keep.

OpenDP is optional (``pip install 'dpopt[compare]'``); without it the script says so and exits 0.

Run: python benchmarks/compare_opendp_person.py
"""

from __future__ import annotations

import csv
import itertools
import logging
import math
import re
import warnings
from collections import Counter, defaultdict
from fractions import Fraction
from pathlib import Path

import dpopt
from dpopt.domain.queries import compile_query
from dpopt.release import sources
from dpopt.release.batch import release_groups
from dpopt.release.bounding import bound_contributions
from dpopt.rng import random_source

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "specs" / "visits_person_level.yaml"
DATA = ROOT / "specs" / "data" / "visits.csv"
C, G, K, HIGH = 3, 2, 4, 120
BY = "cell"  # "age_group|clinic": OpenDP 0.16 fails to release truncate_num_groups over two columns


def dpopt_scale(query: dict, unit: dict, privacy: dict, mechanism: str) -> float:
    """dpopt's noise scale (σ or Laplace b) for the visits spec with this query, unit and budget."""
    base = dpopt.load_spec(SPEC).model_dump(exclude_none=True)
    spec = {**base, "query": query, "privacy": privacy, "mechanism": mechanism,
            "data": {**base["data"], "privacy_unit": {"id": "person_id", **unit}}}
    parameters = dpopt.solve(dpopt.load_spec(spec)).mechanism.parameters
    return float(parameters["sigma"] if "sigma" in parameters else parameters["scale"])


def dpopt_grouped(query: dict, loss: dict, mechanism: str) -> tuple[float, float]:
    """(scale, certified whole-release parameter) of dpopt's release per clinic at the whole budget ``loss``:
    the per-group target is the budget over the certificate's exact norm ratio, rounded down."""
    (name, budget), = loss.items()
    base = dpopt.load_spec(SPEC).model_dump(exclude_none=True)
    spec = {**base, "query": query, "mechanism": mechanism, "privacy": {DEFINITION[name]: {name: budget}}}
    first = release_groups(spec, DATA, "clinic", seed=1, insecure_seed=True).certificate["groups"]
    target = Fraction(budget) / Fraction(first["joint"]["norm_ratio_exact"])
    per_group = float(target) if Fraction(float(target)) <= target else math.nextafter(float(target), 0.0)
    spec["privacy"] = {DEFINITION[name]: {name: per_group}}
    release = release_groups(spec, DATA, "clinic", seed=1, insecure_seed=True)
    parameters = release.mechanism.parameters
    return (float(parameters["sigma"] if "sigma" in parameters else parameters["scale"]),
            release.certificate["groups"]["composition"][name])


DEFINITION = {"rho": "zcdp", "epsilon": "pure"}


def _context(loss: dict):
    import opendp.prelude as dp
    import polars as pl

    dp.enable_features("contrib")
    logging.getLogger("opendp").setLevel(logging.ERROR)  # its note on a ρ above 0.5 (the ρ = 10⁸ read-out)
    data = pl.scan_csv(DATA).with_columns(cell=pl.concat_str(["age_group", "clinic"], separator="|"))
    return dp, pl, dp.Context.compositor(
        data=data, privacy_unit=dp.unit_of(contributions=1, identifier="person_id"),
        privacy_loss=dp.loss_of(**loss), split_evenly_over=1,
        margins=[dp.polars.Margin(by=b, max_length=100_000) for b in ([BY], ["clinic"], [])])


def _keys(pl):
    spec = dpopt.load_spec(SPEC)
    cells = itertools.product(spec.data.attributes["age_group"], spec.data.attributes["clinic"])
    return pl.DataFrame({BY: [f"{a}|{c}" for a, c in cells]})


def opendp_query(loss: dict, aggregate: str, keep: str = "sample", per_cell: bool = True, by: str = BY):
    """OpenDP's query under the bounds (c, g, k) per group of ``by`` (or the total), counting or summing duration."""
    dp, pl, context = _context(loss)
    query = context.query()
    if per_cell:
        query = query.truncate_per_group(C, by=[by]).truncate_num_groups(G, by=[by], keep=keep)
    query = query.truncate_per_group(K)
    statistic = dp.len() if aggregate == "count" else pl.col("duration").fill_null(0).dp.sum((0, HIGH))
    if not per_cell:
        return query.select(statistic)
    keys = _keys(pl) if by == BY else pl.DataFrame({by: list(dpopt.load_spec(SPEC).data.attributes[by])})
    return query.group_by(by).agg(statistic).with_keys(keys)


def opendp_scale(loss: dict, aggregate: str, per_cell: bool = True, by: str = BY) -> float:
    """The scale OpenDP's ``summarize`` reports (σ of its integer Gaussian, or its Laplace scale)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(opendp_query(loss, aggregate, per_cell=per_cell, by=by).summarize()["scale"][0])


def opendp_rows_kept(keep: str) -> int | str:
    """Rows OpenDP keeps (the sum of its counts released at ρ = 10⁸), or its error in one line."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return int(opendp_query({"rho": 1e8}, "count", keep=keep).release().collect()["len"].sum())
        except Exception as exc:  # noqa: BLE001 - the comparison reports OpenDP's failure, whatever it is
            found = re.search(r'ErrString\("([^\\"]+)', str(exc))
            return f"fails at release: {found.group(1) if found else type(exc).__name__}"


def recount(groups: int) -> int:
    """Rows kept when each person keeps ≤ C rows in each of their first ``groups`` cells, ≤ K in all."""
    per_person: dict[str, Counter] = defaultdict(Counter)
    with DATA.open(newline="") as f:
        for row in csv.DictReader(f):
            per_person[row["person_id"]][f"{row['age_group']}|{row['clinic']}"] += 1
    return sum(min(K, sum(min(C, cells[c]) for c in sorted(cells)[:groups])) for cells in per_person.values())


def dpopt_rows_kept(seed: int = 1) -> int:
    spec = dpopt.load_spec(SPEC)
    con, source = sources.connect(), sources.open_source(DATA)
    _, report = bound_contributions(con, source, spec, compile_query(spec), random_source(seed, True))
    return report["rows_kept"]


def comparison() -> list[tuple[str, float, float]]:
    """(statistic, dpopt's scale, OpenDP's scale) for each row of the table the script prints."""
    unit = {"max_rows": K, "max_groups": G, "max_rows_per_group": C}
    table = {"kind": "contingency_table", "attributes": ["age_group", "clinic"]}
    zcdp, pure = {"zcdp": {"rho": 0.5}}, {"pure": {"epsilon": 1.0}}
    counts_l2 = math.sqrt(float(dpopt.derive(dpopt.load_spec(
        {**dpopt.load_spec(SPEC).model_dump(exclude_none=True), "data": {
            **dpopt.load_spec(SPEC).model_dump(exclude_none=True)["data"],
            "privacy_unit": {"id": "person_id", **unit}}})).l2_squared))
    return [
        ("counts per cell, rho = 0.5 (sigma)", dpopt_scale(table, unit, zcdp, "gaussian"),
         opendp_scale({"rho": 0.5}, "count")),
        ("counts per cell, epsilon = 1 (Laplace scale)", dpopt_scale(table, unit, pure, "laplace"),
         opendp_scale({"epsilon": 1.0}, "count")),
        ("sums per cell, rho = 0.5 (sigma; dpopt: derived l2 / sqrt(2 rho))", HIGH * counts_l2,
         opendp_scale({"rho": 0.5}, "sum")),
        ("total sum, rho = 0.5 (sigma)", dpopt_scale({"kind": "sum", "attribute": "duration"}, {"max_rows": K}, zcdp,
                                                     "gaussian"),
         opendp_scale({"rho": 0.5}, "sum", per_cell=False)),
        *[(f"{what} per clinic, {name} = {budget} ({'sigma' if name == 'rho' else 'Laplace scale'}; "
           f"dpopt: --group-by, whole {name} {whole:.17g})", scale,
           opendp_scale({name: budget}, aggregate, by="clinic"))
          for what, aggregate, query, (name, budget), mechanism in (
              ("counts", "count", {"kind": "count"}, ("rho", 0.5), "gaussian"),
              ("counts", "count", {"kind": "count"}, ("epsilon", 1.0), "laplace"),
              ("sums", "sum", {"kind": "sum", "attribute": "duration"}, ("rho", 0.5), "gaussian"))
          for scale, whole in [dpopt_grouped(query, {name: budget}, mechanism)]],
    ]


def main() -> None:
    try:
        import opendp  # noqa: F401
        import polars  # noqa: F401
    except ImportError:
        print("OpenDP is not installed (pip install 'dpopt[compare]'): nothing to compare")
        return
    print(f"visits: ≤ {C} rows per cell, ≤ {G} cells, ≤ {K} rows per person; durations in [0, {HIGH}]")
    print(f"{'statistic':<90} {'dpopt':>10} {'OpenDP':>10}")
    for name, ours, theirs in comparison():
        print(f"{name:<90} {ours:>10.4f} {theirs:>10.4f}")
    print("rows kept by the truncation:")
    print(f"  dpopt (random rows and cells, keyed SHA-256)           {dpopt_rows_kept()}")
    print(f"  OpenDP keep='sample'                                   {opendp_rows_kept('sample')}")
    print(f"  OpenDP keep='first'                                    {opendp_rows_kept('first')}")
    print(f"  recount: each person's first {G} cells (Python)          {recount(G)}")
    print(f"  recount: each person's first cell only (Python)        {recount(1)}")


if __name__ == "__main__":
    main()
