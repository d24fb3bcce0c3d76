"""Cost of the second route, the report and the audit, per example spec.

For every spec in specs/: the time of the family's own claims (sensitivity, privacy checks,
utility against a Monte Carlo: the baseline, measured in the same run), of the three
second-route claims, their ratio, the second route's outcome, the time to build the report's
figures (utility curve of the selected family at ×0.5, ×1, ×2, as ``dpopt solve --out``
does) and of a 50,000-draw audit.

    python benchmarks/bench_second_route.py
"""

from __future__ import annotations

import time
from pathlib import Path

import dpopt
from dpopt.audit import audit_mechanism
from dpopt.certificate.claims import mechanism_claims, sensitivity_claims, utility_claims
from dpopt.certificate.second_route import second_route_claims
from dpopt.report.document import build_report

SPECS = sorted((Path(__file__).resolve().parents[1] / "specs").glob("*.yaml"))


def _timed(f, *args, **kwargs):
    start = time.perf_counter()
    value = f(*args, **kwargs)
    return value, time.perf_counter() - start


def _own_claims(problem, mechanism):
    return sensitivity_claims(problem) + mechanism_claims(problem, mechanism) + utility_claims(problem.spec, mechanism)


def main() -> None:
    print(f"{'spec':34s} {'family':20s} {'own s':>6s} {'2nd s':>6s} {'ratio':>6s} {'report s':>8s} "
          f"{'audit s':>7s}  second route")
    totals = [0.0, 0.0]
    for path in SPECS:
        sol = dpopt.solve(path)
        spec, space, m = sol.spec, sol.space, sol.mechanism
        _, own = _timed(_own_claims, sol.problem, m)
        checks, second = _timed(second_route_claims, spec, space, m)
        _, report = _timed(build_report, sol.certificate, audit_draws=None, utility_families="selected",
                           utility_scales=(0.5, 1.0, 2.0))
        _, audit = _timed(audit_mechanism, m, space, spec.privacy, draws=50_000)
        totals[0] += own
        totals[1] += second
        outcome = checks[0].detail.split(";")[0][:60]
        print(f"{path.stem[:34]:34s} {m.family:20s} {own:6.2f} {second:6.2f} {second / max(own, 1e-9):6.2f} "
              f"{report:8.2f} {audit:7.2f}  {outcome}")
    print(f"total: own claims {totals[0]:.2f} s, second route {totals[1]:.2f} s "
          f"(ratio {totals[1] / totals[0]:.2f})")


if __name__ == "__main__":
    main()
