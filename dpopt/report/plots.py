"""The report's figures, drawn with matplotlib's object API on the Agg canvas (no pyplot, no
global backend switch, no display needed, no layout engine) and returned as PNG bytes.

Each function takes plain data (arrays, dicts); the numbers are computed in
:mod:`dpopt.report.data` and :mod:`dpopt.certificate.second_route`.
"""

from __future__ import annotations

import io
import re

import numpy as np

DPI = 110
_COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"]
_MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]


def _short_ticks(*axes) -> None:
    """Tick labels with at most four significant digits (``0.95``, not ``0.950000``) on linear axes."""
    from matplotlib.ticker import FuncFormatter

    for axis in axes:
        axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.4g}"))


_SUPERSCRIPT = str.maketrans("0123456789-\u2212", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁻")
_MATHTEXT = re.compile(r"^\$\\mathdefault\{(.*)\}\$$")
_POWER = re.compile(r"\^\{([^}]*)\}")


def _plain_text(label: str) -> str:
    """A log axis' mathtext label as plain Unicode text: ``$\\mathdefault{2\\times10^{-3}}$`` → ``2×10⁻³`` (the same
    characters on the figure; parsing mathtext cost a tenth of a second a report)."""
    found = _MATHTEXT.match(label)
    if found is None:
        return label
    body = found.group(1).replace("\\times", "×")
    return _POWER.sub(lambda m: m.group(1).translate(_SUPERSCRIPT), body)


def _log_labels(axis) -> None:
    """matplotlib's log-axis tick labels (which ticks are labelled, and how), written as plain text."""
    from matplotlib.ticker import LogFormatterSciNotation

    class PlainLog(LogFormatterSciNotation):
        def __call__(self, x, pos=None):
            return _plain_text(super().__call__(x, pos))

    axis.set_major_formatter(PlainLog())
    axis.set_minor_formatter(PlainLog(labelOnlyBase=False))


def _figure(width: float, height: float):
    """A figure with fixed margins in inches (room for tick labels, axis labels and a title): no layout
    engine, whose text measuring cost more than the drawing (constrained layout was half of a report)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=DPI)
    FigureCanvasAgg(fig)
    fig.subplots_adjust(left=0.8 / width, right=1 - 0.2 / width, bottom=0.6 / height, top=1 - 0.6 / height,
                        wspace=0.9 / width * 3)
    return fig


def _png(fig) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI)
    return buffer.getvalue()


def tradeoff_png(alpha: np.ndarray, target: tuple[np.ndarray, str] | None,
                 mechanism: tuple[np.ndarray, str] | None, title: str) -> bytes:
    """Type-II against type-I error: the target's curve and the mechanism's (a lower bound).

    A mechanism meets an f-DP target when its curve lies on or above the target's.
    """
    fig = _figure(5.6, 5.2)
    ax = fig.add_subplot()
    a = np.asarray(alpha, dtype=float)
    ax.plot([0, 1], [1, 0], color="#bbbbbb", lw=0.8, ls=":", label="β = 1 − α (no privacy loss)")
    if mechanism is not None:  # wide and under the target's dashes, so that both show where they coincide
        ax.plot(a, mechanism[0], color=_COLORS[0], lw=4.0, zorder=2,
                label="mechanism (certified lower bound)")
    if target is not None:
        ax.plot(a, target[0], color=_COLORS[1], lw=1.6, ls="--", zorder=3, label=f"target: {target[1]}")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_aspect("equal")
    _short_ticks(ax.xaxis, ax.yaxis)
    ax.set_xlabel("type-I error α")
    ax.set_ylabel("type-II error β")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper right")
    ax.set_title(title, fontsize=10, wrap=True)
    return _png(fig)


def noise_png(panels: list[dict], title: str) -> bytes:
    """Histograms of noise draws, each with the law's density where it is known.

    Each panel: ``{"label", "samples", "density": (x, f) or None, "lattice": bool}``.
    """
    fig = _figure(min(3.2 * len(panels), 9.6) + 0.4, 3.2)
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, panel in zip(axes, panels):
        x = np.asarray(panel["samples"], dtype=float)
        x = x[np.isfinite(x)]
        # one filled step outline per panel (ax.stairs), not a patch per bar (ax.bar, ax.hist): the same
        # picture, a third of the figure's drawing time fewer
        if panel.get("lattice"):
            values, counts = np.unique(np.round(x), return_counts=True)
            heights, edges = _lattice_bars(values, counts / max(x.size, 1))
        else:
            lo, hi = np.quantile(x, [0.002, 0.998]) if x.size else (0.0, 1.0)
            heights, edges = np.histogram(x, bins=80, range=(lo, hi), density=True)
        ax.stairs(heights, edges, fill=True, color=_COLORS[0], alpha=0.55, label="sampler")
        if panel.get("density") is not None:
            gx, gy = panel["density"]
            style = {"marker": "o", "ms": 3, "ls": "none"} if panel.get("lattice") else {"lw": 1.6}
            ax.plot(gx, gy, color=_COLORS[1], label="stated law", **style)
        ax.set_title(panel["label"], fontsize=9, wrap=True)
        ax.set_xlabel(panel.get("xlabel", "noise added"), fontsize=8)
        ax.set_ylabel("probability" if panel.get("lattice") else "density", fontsize=8)
        ax.tick_params(labelsize=7)
        _short_ticks(ax.xaxis, ax.yaxis)
        ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    return _png(fig)


def _lattice_bars(values: np.ndarray, heights: np.ndarray, width: float = 0.8) -> tuple[np.ndarray, np.ndarray]:
    """Bars of ``width`` centred on distinct integers ``values``, as one step outline: edges v ± width/2, heights
    interleaved with zeros over the gaps between bars (``ax.stairs`` of the result draws ``ax.bar``'s bars)."""
    edges = np.column_stack([values - width / 2, values + width / 2]).ravel()
    steps = np.zeros(max(2 * len(values) - 1, 0))
    steps[::2] = heights
    return steps, edges


def hull_png(points: np.ndarray, rank: int, title: str) -> bytes:
    """The sensitivity vectors projected on the leading principal directions of their span,
    with their convex hull: a segment (rank 1), a polygon (2-D) and a polytope (3-D view)."""
    from scipy.spatial import ConvexHull, QhullError

    three = rank >= 3 and points.shape[1] >= 3
    fig = _figure(9.6 if three else 5.0, 4.4)
    ax = fig.add_subplot(1, 2 if three else 1, 1)
    if rank == 1 or points.shape[1] == 1:
        x = points[:, 0]
        ax.plot([x.min(), x.max()], [0, 0], color=_COLORS[0], lw=2.5, label="hull (a segment)")
        ax.scatter(x, np.zeros_like(x), color=_COLORS[1], zorder=3, s=22, label="difference vectors")
        ax.set_yticks([])
        ax.set_xlabel("coordinate along the span")
    else:
        xy = points[:, :2]
        ax.scatter(xy[:, 0], xy[:, 1], color=_COLORS[1], s=14, zorder=3, label="difference vectors")
        try:
            hull = ConvexHull(xy)
            ring = np.append(hull.vertices, hull.vertices[0])
            ax.fill(xy[ring, 0], xy[ring, 1], color=_COLORS[0], alpha=0.15)
            ax.plot(xy[ring, 0], xy[ring, 1], color=_COLORS[0], lw=1.4, label="hull, projected")
        except QhullError:
            pass
        ax.set_aspect("equal", adjustable="datalim")
        ax.set_xlabel("principal direction 1")
        ax.set_ylabel("principal direction 2")
    ax.axhline(0, color="#cccccc", lw=0.6)
    ax.axvline(0, color="#cccccc", lw=0.6)
    ax.legend(fontsize=7, loc="upper right")
    ax.set_title("2-D projection" if rank > 1 else "the span is a line", fontsize=9)
    if three:
        from mpl_toolkits.mplot3d.art3d import Poly3DCollection

        ax3 = fig.add_subplot(1, 2, 2, projection="3d")
        xyz = points[:, :3]
        ax3.scatter(xyz[:, 0], xyz[:, 1], xyz[:, 2], color=_COLORS[1], s=10)
        try:
            hull = ConvexHull(xyz)
            faces = Poly3DCollection([xyz[s] for s in hull.simplices], alpha=0.18, facecolor=_COLORS[0],
                                     edgecolor=_COLORS[0], linewidths=0.4)
            ax3.add_collection3d(faces)
        except QhullError:
            pass
        ax3.set_title("3-D projection", fontsize=9)
        ax3.tick_params(labelsize=6)
    fig.suptitle(title, fontsize=10)
    return _png(fig)


def utility_png(curves: dict[str, tuple[np.ndarray, np.ndarray]], target: float, parameter: str,
                metric: str, direction: str, selected: str, title: str) -> bytes:
    """Predicted utility against the privacy parameter, one line per family."""
    fig = _figure(5.8, 4.2)
    ax = fig.add_subplot()
    positive = all((np.asarray(y) > 0).all() for _, y in curves.values())
    order = sorted(curves, key=lambda f: f != selected)  # the selected family first, the others over it
    for k, family in enumerate(order):
        x, y = curves[family]
        bold = family == selected
        # hollow markers of their own shape, each smaller than the last: equal values stay visible, nested
        ax.plot(x, y, marker=_MARKERS[k % len(_MARKERS)], ms=6 if bold else max(3.0, 10.0 - 1.5 * k),
                lw=2.4 if bold else 1.2, ls="-" if bold else "--", mfc=None if bold else "none",
                color=_COLORS[k % len(_COLORS)], label=family + (" (selected)" if bold else ""))
    ax.axvline(target, color="#888888", ls="--", lw=1.0, label=f"target {parameter} = {target:g}")
    ax.set_xscale("log")
    from matplotlib.ticker import FuncFormatter

    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
    ax.set_xticks(sorted({float(x) for x, _ in curves.values() for x in x}))
    if positive and metric not in ("usefulness", "test_power"):
        ax.set_yscale("log")
        _log_labels(ax.yaxis)
    else:
        _short_ticks(ax.yaxis)
    ax.set_xlabel(parameter)
    ax.set_ylabel(f"predicted {metric} ({direction} is better)")
    ax.set_title(title, fontsize=10, wrap=True)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3, which="both")
    return _png(fig)


def intervals_png(truth: np.ndarray, published: np.ndarray, low: np.ndarray, high: np.ndarray,
                  naive: np.ndarray, title: str) -> bytes:
    """One release's intervals for the true values against the truth, cell by cell: each interval as a bar, the
    true value as a dot, the published value as a cross, the naive interval (published ± ``naive``) as a thin
    grey bar beside it."""
    fig = _figure(max(5.6, 0.28 * len(truth) + 1.2), 4.2)
    ax = fig.add_subplot()
    x = np.arange(len(truth))
    ax.vlines(x + 0.22, published - naive, published + naive, color="#bbbbbb", lw=1.4,
              label="naive: published ± margin of error")
    ax.vlines(x, low, high, color=_COLORS[0], lw=3.0, label="interval for the true value")
    ax.plot(x, truth, "o", color=_COLORS[1], ms=5, label="true value (synthetic)")
    ax.plot(x, published, "x", color="#333333", ms=5, label="published (post-processed)")
    ax.set_xticks(x)
    ax.set_xticklabels([str(i + 1) for i in x], fontsize=7)
    _short_ticks(ax.yaxis)
    ax.set_xlabel("cell (occupied cells first)")
    ax.set_ylabel("count")
    ax.set_title(title, fontsize=10, wrap=True)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    return _png(fig)
