"""The audit report a person reads: Markdown (figures as PNG files next to it) or one
self-contained HTML page (figures embedded as base64 PNG, styles inline, no script, no
network).

:func:`build_report` gathers what the certificate alone does not hold: the figures (the
trade-off curve of the mechanism against the target, the noise against its stated law,
the sensitivity hull in 2-D/3-D projections, the predicted utility against the privacy
budget) and the empirical audit. :func:`render_markdown` and :func:`render_html` accept a
:class:`Report` or a bare certificate (then without figures and audit).

Sections: what is released (the spec in words, what is published exactly said once), the
guarantee in every language it holds in (the target; μ, ρ; one headline ε per δ, the
tightest valid, with every looser figure labelled by its method; the Semi-DP scope under
invariants), the sensitivity space, the mechanism, each cell's standard error and 95% margin
of error, the candidates compared, the figures, the second route and every check (with plain
words for their terms), the empirical audit, caveats and provenance. Numbers in text are
rounded for people (:func:`human`); the certificate keeps every digit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from dpopt.audit.empirical import audit_answer, audit_mechanism
from dpopt.certificate.model import Certificate
from dpopt.certificate.second_route import mechanism_tradeoff, noise_law_of
from dpopt.certificate.verify import mechanism_record_checks, rebuild_mechanism
from dpopt.core.blas import one_blas_thread
from dpopt.errors import CertificateError, DpoptError, MemoryLimitError
from dpopt.mechanisms.base import better
from dpopt.problem import compile
from dpopt.report import data as report_data
from dpopt.report import intervals
from dpopt.report import plots
from dpopt.report.words import DEFINITIONS
from dpopt.solve import Solution

AUDIT_NOT_RUN = "empirical audit: not run ("
"""How the note of an audit that could not run begins (its reason follows, then ``)``); the audit section states it."""


@dataclass(frozen=True)
class Figure:
    """One figure: ``name`` is its file stem, ``png`` the image."""

    name: str
    title: str
    caption: str
    png: bytes


@dataclass(frozen=True)
class Report:
    """A certificate with its figures and audit (see :func:`build_report`)."""

    certificate: Certificate
    figures: tuple[Figure, ...] = ()
    audit: object | None = None
    notes: tuple[str, ...] = field(default=())
    """Figures or parts that could not be produced, and why."""
    intervals: dict | None = None
    """The intervals' coverage simulated on a synthetic table (:func:`dpopt.report.intervals.simulate`)."""


def build_report(
    certificate: Certificate,
    *,
    audit_draws: int | None = 50_000,
    utility_families: str = "candidates",
    utility_scales: tuple[float, ...] = (0.25, 0.5, 1.0, 2.0, 4.0),
    progress: Callable[[str], None] | None = None,
    solution: Solution | None = None,
) -> Report:
    """The certificate's figures and, unless ``audit_draws`` is None, its empirical audit.

    The spec is compiled again and the mechanism rebuilt from the certificate (as ``dpopt
    verify`` does), so the figures show the mechanism the file describes; its recorded
    parameters and privacy summary (the headline) must be the rebuilt mechanism's. Given the
    ``solution`` whose certificate it is (``dpopt solve --out``, in the same process), its
    compiled problem and its mechanism are used instead: the certificate was built from them
    a moment ago, and compiling and rebuilding again (a K-norm hull, 10⁵ Semi-DP moves) would
    double the cost of the solve.

    Raises
    ------
    CertificateError
        The recorded parameters or privacy summary differ from the rebuilt mechanism's.
    ValueError
        ``solution`` is not the solution of ``certificate``.

    Parameters
    ----------
    certificate : Certificate
    audit_draws : int or None
        Draws per dataset and pair for :func:`dpopt.audit.audit` (None: no audit).
    utility_families : {"candidates", "selected"}
        Whose predicted utility is drawn against the privacy budget.
    utility_scales : tuple of float
        Multiples of the target's ε, μ or ρ at which each family is re-designed.
    progress : callable, optional
        Called with the name of each stage as it starts (e.g. to show progress on stderr).
    solution : Solution, optional
        The solution whose certificate ``certificate`` is (see above).
    """
    with one_blas_thread():  # its re-designs and draws, as a solve (dpopt.core.blas)
        return _build_report(certificate, audit_draws, utility_families, utility_scales, progress, solution)


def _tradeoff_words(scope: str, mechanism: bool, target: bool) -> tuple[str, str]:
    """Title and caption of the trade-off figure, naming only the curves it draws (the mechanism's, the target's or
    both)."""
    test = f"Type-II against type-I error of the best test telling apart two {scope}"
    bound = ("a certified lower bound (from the pessimistic privacy-loss distribution of the second route)")
    if mechanism and target:
        return ("Trade-off curve: mechanism against target",
                f"{test}. The mechanism meets an f-DP target when its curve lies on or above the target's; the "
                f"mechanism's curve is {bound}.")
    if mechanism:
        return "Trade-off curve of the mechanism", f"{test}: the mechanism's curve, {bound}."
    return "Trade-off curve of the target", f"{test}: the target's curve only (Caveats say why)."


def _build_report(certificate: Certificate, audit_draws: int | None, utility_families: str,
                  utility_scales: tuple[float, ...], progress: Callable[[str], None] | None,
                  solution: Solution | None) -> Report:
    """:func:`build_report`, its BLAS limited by the caller."""
    stage = progress or (lambda _: None)
    data = certificate.data
    if solution is not None:
        if solution.certificate is not certificate:
            raise ValueError("build_report: the solution given is not the certificate's")
        problem, mechanism = solution.problem, solution.mechanism
    else:
        stage("rebuilding the mechanism")
        problem = compile(data["spec"])
        mechanism = rebuild_mechanism(data, problem.space)
        records = mechanism_record_checks(data["mechanism"], problem.space, mechanism)
        stale = [c for c in records if not c.passed]
        if stale:  # the headline would print numbers that are not the mechanism's
            raise CertificateError(f"the certificate's {stale[0].claim} is not its mechanism's "
                                   f"({stale[0].detail}): run dpopt verify")
    spec, space = problem.spec, problem.space
    law = noise_law_of(mechanism)
    family = mechanism.family
    figures: list[Figure] = []
    notes: list[str] = []

    stage("trade-off curve")
    alpha = np.unique(np.concatenate([np.logspace(-10, -2, 161), np.linspace(0.0, 1.0, 501)]))
    target = report_data.target_tradeoff(data["guarantee"], alpha)
    curve = None if isinstance(law, str) else mechanism_tradeoff(law, space, alpha)
    if curve is None:
        notes.append("trade-off of the mechanism: not drawn (" + (law if isinstance(law, str) else
                     "no numerical route for this law or space") + ")")
    if target is None:
        notes.append("trade-off of the target: a probabilistic-DP target is not a trade-off guarantee")
    scope = "Semi-DP neighbours (D_t, A_a)" if "semi_dp" in data["guarantee"]["scope"] else "neighbouring datasets"
    if curve is not None or target is not None:  # titled and captioned for the curves drawn, and no other
        figures.append(Figure("tradeoff", *_tradeoff_words(scope, curve is not None, target is not None),
                              plots.tradeoff_png(alpha, target, curve,
                                                 f"{family}: {DEFINITIONS[data['guarantee']['definition']]}")))

    stage("noise against its law")
    try:
        panels = report_data.noise_panels(mechanism, law if not isinstance(law, str) else None,
                                          problem.labels)
    except MemoryLimitError as exc:  # 2,000 draws of every released cell (e.g. 175,270 counts)
        panels = []
        notes.append(f"noise histograms: not drawn ({exc})")
    if panels:
        figures.append(Figure(
            "noise", "Noise: the sampler against the stated law",
            f"Histograms of {panels[0]['draws']} draws of the mechanism's sampler (seed "
            f"{report_data.NOISE_SEED}) on the cells with the most noise"
            + ("" if isinstance(law, str) else ", with the density of the law the certificate relies on where it "
               "is stated per output coordinate") + ".",
            plots.noise_png(panels, f"{family} noise"),
        ))

    stage("sensitivity hull")
    hull = report_data.hull_points(space)
    if hull is None:
        notes.append("sensitivity hull: not drawn (the space is too large to list its vectors, or has more "
                     f"than {report_data.MAX_HULL_DIMENSION} coordinates)")
    else:
        points, rank = hull
        figures.append(Figure(
            "sensitivity", "The sensitivity space",
            f"The {len(points)} listed difference vectors φ(X) − φ(X′) projected on the leading principal "
            f"directions of their span (rank {rank}), and their convex hull K"
            + ("" if rank <= 3 else " (a projection of a higher-dimensional polytope)") + ".",
            plots.hull_png(points, rank, f"rank {rank}, {len(points)} vectors"),
        ))

    candidates = [c["family"] for c in data.get("candidates", []) if "utility" in c]
    families = candidates if utility_families == "candidates" else [family]
    known = {c["family"]: c["utility"]["value"] for c in data.get("candidates", []) if "utility" in c}
    known.setdefault(family, data["utility"]["value"])
    known = {f: v for f, v in known.items() if v is not None}  # null: a volume beyond the double range, not plotted
    curves, parameter, value = report_data.utility_curves(problem, families or [family], utility_scales, known,
                                                          progress=stage)
    if curves:
        metric = data["utility"]["metric"]
        figures.append(Figure(
            "utility", f"Predicted {metric} against the privacy budget",
            f"Each family re-designed at {', '.join(f'{s:g}' for s in utility_scales)} × the target {parameter} "
            "(other parameters kept); points a family cannot meet are left out.",
            plots.utility_png(curves, value, parameter, metric, better(metric), family,
                              f"{metric} against {parameter}, {len(curves)} famil{'y' if len(curves) == 1 else 'ies'}"),
        ))
    else:
        notes.append("utility against the privacy budget: no family could be re-designed")

    stage("intervals: coverage on a synthetic table")
    try:
        simulated = intervals.simulate(solution or Solution(problem, mechanism, [], certificate))
    except DpoptError as exc:  # e.g. a post-processing that refuses the synthetic table
        simulated = None
        notes.append(f"intervals: coverage not simulated ({exc})")
    if simulated is not None:
        figures.append(intervals_figure(simulated))

    result = None
    if audit_draws:
        stage(f"empirical audit ({audit_draws} draws per dataset and pair)")
        try:
            result = audit_mechanism(mechanism, space, spec.privacy, draws=audit_draws,
                                     answer=audit_answer(spec, mechanism.needs_integer_answers))
        except (DpoptError, ValueError) as exc:
            notes.append(f"{AUDIT_NOT_RUN}{exc})")
    return Report(certificate, tuple(figures), result, tuple(notes), simulated)


def intervals_figure(simulated: dict) -> Figure:
    """One simulated release's intervals against the synthetic truth (occupied cells first, at most
    :data:`dpopt.report.intervals.SHOWN`)."""
    r = simulated["result"]
    truth = r.truth[0]
    order = sorted(range(truth.size), key=lambda i: (truth[i] == 0, i))[:intervals.SHOWN]
    s = r.summary()
    return Figure(
        "intervals", "Intervals for the true values on a synthetic sparse table",
        f"One of {simulated['releases']} simulated releases of a synthetic sparse table (cells numbered as the rows "
        "of the table above): each cell's interval for the true value (bar), the true value (dot), the published "
        "post-processed value (cross) and the naive interval, published value ± margin of error (grey). Over the "
        f"releases the intervals covered {s['coverage']:.3f} of the cell-releases, the naive ones "
        f"{s['naive_coverage']:.3f} (worst cell {s['worst_cell_coverage']:.3f} against "
        f"{s['naive_worst_cell_coverage']:.3f}).",
        plots.intervals_png(truth[order], r.published[0, 0, order], r.low[0, 0, order], r.high[0, 0, order],
                            r.stage_width[order] / 2, "intervals against the truth, one release"),
    )
