"""Matplotlib figures of runs, noise designs and audits (headless: the Agg backend).

The command line imports this module only when a command draws (`dpdl --help` stays light), and
the documentation site draws its figures with these same functions.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator, NullFormatter, ScalarFormatter

if TYPE_CHECKING:
    from dpdl.experiments.noise import NoiseReport

__all__ = [
    "plot_answer",
    "plot_audit",
    "plot_covariances",
    "plot_curves",
    "plot_images",
    "plot_panels",
]


def _save(fig: plt.Figure, path: Path, layout: bool = True) -> Path:
    """Lay out (unless the figure lays itself out), write `fig` at `path` in the format its
    suffix names (PNG, SVG, PDF), creating its folder, and close it."""
    if layout:
        fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_curves(
    curves: Mapping[str, Sequence[Sequence[Mapping[str, float]]]],
    metric: str,
    path: Path,
    title: str,
    log_y: bool = False,
    xlabel: str = "step",
    log_x: bool = False,
) -> Path:
    """Plot `metric` against step: one line per label (mean over its seeds, band = min..max).

    `curves[label]` is a list of histories (one per seed), each a list of metric records.
    """
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for label, histories in curves.items():
        steps = np.array([record["step"] for record in histories[0]])
        values = np.array([[record[metric] for record in history] for history in histories])
        line = ax.plot(steps, values.mean(axis=0), label=label)[0]
        if len(histories) > 1:
            ax.fill_between(
                steps, values.min(axis=0), values.max(axis=0), color=line.get_color(), alpha=0.2
            )
    ax.set_xlabel(xlabel)
    ax.set_ylabel(metric.replace("_", " "))
    if log_y:
        ax.set_yscale("log")
    if log_x:  # ticks at the points, written as numbers (not powers of ten)
        ax.set_xscale("log")
        ax.set_xticks(sorted({r["step"] for h in curves.values() for r in h[0]}))
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend()
    return _save(fig, path)


def _dodge(k: int, lines: int) -> float:
    """The shift of line `k` of `lines` on a categorical axis: spread over 0.3 of a unit."""
    return 0.0 if lines < 2 else 0.3 * (k / (lines - 1) - 0.5)


def _band(
    ax: Any,
    xs: Sequence[float],
    ys: Sequence[float],
    band: tuple[Sequence[float], Sequence[float]],
    colour: str,
    dashed: bool,
    categorical: bool,
) -> None:
    """A spread `(low, high)` around a line: shaded, or an error bar at each category (a band
    shaded between categories means nothing, and one category has no width to shade)."""
    low, high = band
    if categorical:
        ax.errorbar(
            xs,
            ys,
            yerr=[np.subtract(ys, low), np.subtract(high, ys)],
            fmt="none",
            ecolor=colour,
            capsize=3,
        )
    else:
        ax.fill_between(xs, low, high, color=colour, alpha=0.12 if dashed else 0.2, linewidth=0)


def plot_panels(
    grid: Mapping[str, Sequence[float]],
    series: Mapping[str, Mapping[str, Sequence[float]]],
    xlabels: Mapping[str, str],
    ylabel: str,
    path: Path,
    title: str,
    log_y: bool = True,
    bands: Mapping[str, Mapping[str, tuple[Sequence[float], Sequence[float]]]] | None = None,
    columns: int | None = None,
    log_x: bool = False,
    titles: bool = False,
    ticks: Mapping[str, Sequence[str]] | None = None,
) -> Path:
    """One panel per key of `grid` (x values), each with the lines `series[panel][label]`, and
    with `titles` that key above it (for keys that name the panel, not just its x axis).
    `ticks[panel]` names a panel's x values (a categorical axis, such as graphs at x = 0, 1,
    ...): one tick per value, labelled, with half a unit of room on each side; its lines are
    set a little apart and their bands drawn as error bars.

    Labels ending in `"(paper calibration)"` or `"(authors' calibration)"` are drawn dashed in
    the colour of their base label, so the two calibrations of a method read as a pair.
    `bands[panel][label] = (low, high)` shades a spread (over seeds) around a line. Panels fill
    rows of `columns` (default: one row).
    """
    suffixes = (" (paper calibration)", " (authors' calibration)")
    columns = columns or len(grid)
    rows = math.ceil(len(grid) / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(5.2 * columns, 4.2 * rows), squeeze=False)
    colours: dict[str, str] = {}
    for ax, (panel, xs) in zip(axes.flat, grid.items(), strict=False):
        categorical = ticks is not None and panel in ticks
        for k, (label, ys) in enumerate(series[panel].items()):
            dashed = label.endswith(suffixes)
            base = next((label.removesuffix(end) for end in suffixes if label.endswith(end)), label)
            colour = colours.setdefault(base, f"C{len(colours)}")
            # categories: each line a little aside, so that its error bars do not hide another's
            at = np.add(xs, _dodge(k, len(series[panel]))) if categorical else xs
            ax.plot(
                at,
                ys,
                marker="o",
                markersize=3,
                color=colour,
                linestyle="--" if dashed else "-",
                label=label,
            )
            if bands is not None and label in bands[panel]:
                _band(ax, at, ys, bands[panel][label], colour, dashed, categorical)
        ax.set_xlabel(xlabels[panel])
        if categorical:
            ax.set_xticks(list(xs), list(ticks[panel]))
            ax.set_xlim(min(xs) - 0.5, max(xs) + 0.5)
        ax.set_ylabel(ylabel)
        if titles:
            ax.set_title(panel, fontsize=10)
        if log_y:
            ax.set_yscale("log")
        if log_x:
            ax.set_xscale("log")
        ax.grid(True, alpha=0.3)
    for ax in list(axes.flat)[len(grid) :]:
        ax.set_visible(False)
    axes[0][0].legend(fontsize=7)
    fig.suptitle(title)
    return _save(fig, path)


def plot_answer(
    panels: Mapping[str, Mapping[str, Sequence[tuple[float, float, float, float, str]]]],
    xlabels: Mapping[str, str],
    ylabel: str,
    path: Path,
    title: str,
) -> Path:
    """One panel per key of `panels`, a line per label of `panels[panel]` through its points
    `(x, mean, low, high, mark)`, the interval `[low, high]` shaded; `mark` draws the point as
    the best of its x (`"best"`: a large star), one a test tells apart from it (`"worse"`: a
    filled dot), one it cannot (`"tied"`: a hollow dot), or a plain dot (`""`). The legend
    names the lines and the marks; x values over a decade or more get a log axis."""
    fig, axes = plt.subplots(
        1, len(panels), figsize=(5.2 * len(panels), 4.4), squeeze=False, sharey=True
    )
    for ax, (panel, lines) in zip(axes.flat, panels.items(), strict=True):
        for i, (label, points) in enumerate(lines.items()):
            points = sorted(points)
            xs, means, lows, highs, marks = zip(*points, strict=True)
            colour = f"C{i}"
            ax.plot(xs, means, color=colour, label=label, linewidth=1.5)
            ax.fill_between(xs, lows, highs, color=colour, alpha=0.15, linewidth=0)
            for x, mean, mark in zip(xs, means, marks, strict=True):
                style = {
                    "best": {"marker": "*", "markersize": 14, "markerfacecolor": colour},
                    "worse": {"marker": "o", "markersize": 6, "markerfacecolor": colour},
                    "tied": {"marker": "o", "markersize": 7, "markerfacecolor": "white"},
                }.get(mark, {"marker": "o", "markersize": 4, "markerfacecolor": colour})
                ax.plot([x], [mean], color=colour, markeredgecolor=colour, **style)
        xs = sorted({point[0] for points in lines.values() for point in points})
        if xs[0] > 0 and xs[-1] >= 10 * xs[0]:  # budgets spread over decades: a log axis
            ax.set_xscale("log")
            ax.set_xticks(xs)
            ax.xaxis.set_major_formatter(ScalarFormatter())
            ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel(xlabels[panel])
        ax.set_ylabel(ylabel)
        if panel:
            ax.set_title(panel, fontsize=10)
        ax.grid(True, alpha=0.3)
    marks = [
        Line2D([], [], color="grey", marker="*", markersize=12, linestyle="", label="best"),
        Line2D(
            [],
            [],
            color="grey",
            marker="o",
            markerfacecolor="white",
            linestyle="",
            label="not significantly worse",
        ),
        Line2D([], [], color="grey", marker="o", linestyle="", label="significantly worse"),
    ]
    handles, _ = axes[0][0].get_legend_handles_labels()
    axes[0][0].legend(handles=handles + marks, fontsize=7)
    fig.suptitle(title, fontsize=11)
    return _save(fig, path)


def plot_images(rows: Mapping[str, Sequence[np.ndarray]], path: Path, title: str) -> Path:
    """A grid of grey-scale images: one row per label (its name on the left), one column per
    image."""
    columns = max(len(images) for images in rows.values())
    fig, axes = plt.subplots(
        len(rows), columns, figsize=(1.3 * columns + 0.8, 1.4 * len(rows)), squeeze=False
    )
    for axes_row, (label, images) in zip(axes, rows.items(), strict=True):
        for ax, image in zip(axes_row, images, strict=False):
            ax.imshow(np.asarray(image), cmap="gray")
        for ax in axes_row:
            ax.set_xticks([])
            ax.set_yticks([])
        axes_row[0].set_ylabel(label, rotation=0, ha="right", va="center")
    fig.suptitle(title)
    return _save(fig, path)


def plot_covariances(
    covariances: Mapping[str, np.ndarray],
    weights: np.ndarray,
    path: Path,
    title: str,
) -> Path:
    """Heat maps of each design's noise covariance across agents, `R` (top row), and of what one
    gossip round leaves of it, `W R W^T` (bottom row; its trace is the privacy term of CorN-DSGD
    Theorem 1): one column per label of `covariances`.

    Colours are symmetric about zero (red positive, blue negative). Each `R` has its own scale,
    so its structure shows (independent noise is diagonal, DECOR's pairwise secrets add the
    graph's Laplacian, Whisper's correlations are shaped by W); the bottom row shares one scale,
    so the noise the designs leave compares at a glance.
    """
    weights = np.asarray(weights, dtype=float)
    rows = {
        "R": dict(covariances.items()),
        "W R W^T": {label: weights @ cov @ weights.T for label, cov in covariances.items()},
    }
    width = 3.4 * len(covariances) + 1.0
    fig, axes = plt.subplots(
        2,
        len(covariances),
        figsize=(width, 6.4),
        squeeze=False,
        layout="constrained",
    )
    for axes_row, (name, matrices) in zip(axes, rows.items(), strict=True):
        shared = name != "R"
        top = max(float(np.abs(m).max()) for m in matrices.values()) or 1.0
        for ax, (label, matrix) in zip(axes_row, matrices.items(), strict=True):
            scale = top if shared else float(np.abs(matrix).max()) or 1.0
            image = ax.imshow(matrix, cmap="RdBu_r", vmin=-scale, vmax=scale)
            ax.set_title(f"{label}: {name}\ntrace {np.trace(matrix):.4g}", fontsize=10)
            ax.set_xlabel("agent")
            ax.set_ylabel("agent")
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.yaxis.set_major_locator(MaxNLocator(integer=True))
            if not shared:
                fig.colorbar(image, ax=ax, shrink=0.8)
        if shared:
            fig.colorbar(image, ax=list(axes_row), shrink=0.8, label=f"{name} entry")
    fig.suptitle(textwrap.fill(title, int(11 * width)))  # one column is narrow
    return _save(fig, path, layout=False)


def plot_audit(reports: Sequence[NoiseReport], path: Path, title: str) -> Path:
    """The audit's bounds on epsilon: one panel per threat, one row per mechanism, the accountant's
    upper bound beside the membership test's two lower bounds (model-free and Gaussian fit), a
    line spanning the gap, and the calibration target dashed.

    Epsilon is on a log scale; an infinite bound (no guarantee, or a test that never errs) or one
    beyond the scale is drawn at the right edge, in the shaded strip, and a lower bound of zero (a
    test that found nothing) at the left edge. A threat the audit did not attack (too many
    coalitions) has no lower bounds in its panel.
    """
    threats = list(reports[0].epsilon)
    target = reports[0].calibration.eps
    bounds = {
        "accountant (upper)": lambda r, t: r.epsilon.get(t, math.nan),
        "Gaussian fit (lower)": lambda r, t: r.epsilon_lower_bound_fit.get(t, math.nan),
        "model-free (lower)": lambda r, t: r.epsilon_lower_bound.get(t, math.nan),
    }
    styles = {
        "accountant (upper)": {"marker": "|", "color": "black", "s": 260, "linewidths": 2.5},
        "Gaussian fit (lower)": {"marker": "o", "color": "C1", "s": 30},
        "model-free (lower)": {"marker": "o", "facecolors": "none", "edgecolors": "C0", "s": 30},
    }
    values = np.array(
        [[[get(r, t) for get in bounds.values()] for t in threats] for r in reports], dtype=float
    )
    finite_upper = values[:, :, 0][np.isfinite(values[:, :, 0])]
    positive = values[np.isfinite(values) & (values > 0)]
    edge = 3.0 * max([target, *finite_upper])
    low = 0.5 * min([target, *positive[positive < edge]])
    fig, axes = plt.subplots(
        1,
        len(threats),
        figsize=(2.9 * len(threats) + 1.4, 0.42 * len(reports) + 1.9),
        sharey=True,
        squeeze=False,
    )
    rows = np.arange(len(reports))[::-1]  # the first mechanism on top
    for column, (ax, threat) in enumerate(zip(axes[0], threats, strict=True)):
        drawn = np.clip(np.nan_to_num(values[:, column], nan=np.nan, posinf=edge), low, edge)
        ax.axvspan(edge / 1.25, edge * 1.25, color="0.9", zorder=0)
        ax.axvline(target, color="0.5", linestyle="--", linewidth=1)
        for y, (upper, fit, free) in zip(rows, drawn, strict=True):
            span = [v for v in (upper, fit, free) if not math.isnan(v)]
            if span:
                ax.plot([min(span), max(span)], [y, y], color="0.7", linewidth=2, zorder=1)
        for index, (label, style) in enumerate(styles.items()):
            ax.scatter(drawn[:, index], rows, label=label, zorder=5 - index, **style)
        ax.set_xscale("log")
        ax.set_xlim(low, edge * 1.25)
        ax.set_title(threat, fontsize=10)
        ax.set_xlabel("epsilon")
        ax.grid(True, axis="x", alpha=0.3)
        ax.text(edge, len(reports) - 0.4, "inf", ha="center", va="bottom", fontsize=8)
    axes[0][0].set_yticks(rows, [r.method for r in reports])
    axes[0][0].set_ylim(-0.7, len(reports) - 0.1)
    handles, labels = axes[0][0].get_legend_handles_labels()
    handles.append(Line2D([], [], color="0.5", linestyle="--"))
    labels.append(f"target eps = {target:g}")
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=8, frameon=False)
    fig.suptitle(title)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    return _save(fig, path, layout=False)
