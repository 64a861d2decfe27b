"""Matplotlib figures of runs (headless: the Agg backend)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

__all__ = ["plot_curves", "plot_images", "plot_panels"]


def _save(fig: plt.Figure, path: Path) -> Path:
    """Lay out, write ``fig`` as a PNG at ``path`` (creating its folder), close it."""
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
) -> Path:
    """Plot ``metric`` against step: one line per label (mean over its seeds, band = min..max).

    ``curves[label]`` is a list of histories (one per seed), each a list of metric records.
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
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend()
    return _save(fig, path)


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
) -> Path:
    """One panel per key of ``grid`` (x values), each with the lines ``series[panel][label]``, and
    with ``titles`` that key above it (for keys that name the panel, not just its x axis).

    Labels ending in ``"(paper calibration)"`` are drawn dashed in the colour of their base label,
    so the two calibrations of a method read as a pair. ``bands[panel][label] = (low, high)``
    shades a spread (over seeds) around a line. Panels fill rows of ``columns`` (default: one row).
    """
    suffix = " (paper calibration)"
    columns = columns or len(grid)
    rows = math.ceil(len(grid) / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(5.2 * columns, 4.2 * rows), squeeze=False)
    colours: dict[str, str] = {}
    for ax, (panel, xs) in zip(axes.flat, grid.items(), strict=False):
        for label, ys in series[panel].items():
            base = label.removesuffix(suffix)
            colour = colours.setdefault(base, f"C{len(colours)}")
            ax.plot(
                xs,
                ys,
                marker="o",
                markersize=3,
                color=colour,
                linestyle="--" if label.endswith(suffix) else "-",
                label=label,
            )
            if bands is not None and label in bands[panel]:
                low, high = bands[panel][label]
                ax.fill_between(
                    xs,
                    low,
                    high,
                    color=colour,
                    alpha=0.12 if label.endswith(suffix) else 0.2,
                    linewidth=0,
                )
        ax.set_xlabel(xlabels[panel])
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
