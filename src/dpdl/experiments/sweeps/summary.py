"""A sweep's summary: every setting's metrics over seeds, with Student t intervals, and figures.

The runs of one setting (the same options but the seed) are replicates; their mean and its t
interval at 95% (`mean +- t_{0.975, n-1} s / sqrt(n)`, its ends clipped to the metric's range: an
accuracy's to [0, 1], a loss's at 0, [`dpdl.tasks.metrics`][dpdl.tasks.metrics]) go to
`DIR/summary.csv`, one row per setting. With a step-size search (`Tune`) a setting is the search's
choice, over every seed (`dpdl.experiments.sweeps.tuning`). Each metric gets a figure
`DIR/<metric>.png`: a panel per grid, the mean against the grid's first numeric option that moves
(eps, say), one line per value of its other moving options, the t interval shaded. The answer (a
short table of the primary metric per setting, each mechanism tested against the best at its budget,
and its figure) is `dpdl.experiments.sweeps.answer`'s.
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import t as student_t

from dpdl.experiments.results import write_rows
from dpdl.experiments.sweeps.spec import Grid, run_key, runs_of
from dpdl.experiments.sweeps.tuning import Setting
from dpdl.tasks.metrics import clip_to_range

__all__ = [
    "LEVEL",
    "clipped_interval",
    "grid_label",
    "moving_options",
    "summarise",
    "t_interval",
    "write_summary",
]

logger = logging.getLogger(__name__)

#: Confidence level of the intervals over seeds.
LEVEL = 0.95
#: The column naming a summary line's grid, where a sweep has several.
GRID = "grid"


def t_interval(values: list[float], level: float = LEVEL) -> tuple[float, float, float]:
    """`(mean, low, high)`: the mean of `values` and its two-sided Student t interval at
    `level`; the interval is NaN with fewer than two values."""
    data = np.asarray(values, dtype=float)
    mean = float(data.mean())
    if len(data) < 2:
        return mean, math.nan, math.nan
    half = float(student_t.ppf((1 + level) / 2, len(data) - 1) * data.std(ddof=1))
    half /= math.sqrt(len(data))
    return mean, mean - half, mean + half


def clipped_interval(metric: str, values: list[float]) -> tuple[float, float, float]:
    """[`t_interval`][dpdl.experiments.sweeps.summary.t_interval] of `values`, its ends brought
    inside the range of `metric` ([`clip_to_range`][dpdl.tasks.metrics.clip_to_range]: an
    accuracy in `[0, 1]`, a loss or a gap `>= 0`; an unknown metric's are left as they are)."""
    mean, low, high = t_interval(values)
    return mean, clip_to_range(metric, low), clip_to_range(metric, high)


def moving_options(grid: Grid) -> list[str]:
    """The options that move in `grid` (in its file's order), but the seed."""
    return [key for key in grid.swept if key != "seed"]


def grid_label(grid: Grid, grids: list[Grid]) -> str:
    """`grid`'s label, or its place among `grids` where it has none."""
    return grid.label or f"grid {grids.index(grid) + 1}"


def summarise(
    chosen: list[Setting], by_run: Mapping[str, dict[str, Any]], metrics: list[str]
) -> list[dict[str, Any]]:
    """One row per setting (its search's choice, where the grid searches): the grid (where there
    are several), the moving options, the number of runs, and each metric's mean, low and high
    (t interval over seeds, clipped to the metric's range: `clipped_interval`; None where
    the setting's task does not report it). Failed runs are
    left out, and so is a setting none of whose runs finished."""
    grids = list(dict.fromkeys(setting.grid for setting in chosen))
    summary = []
    for setting in chosen:
        runs = [by_run[run_key(run)] for run in runs_of(setting.options)]
        runs = [run for run in runs if "error" not in run]
        if not runs:
            continue
        line: dict[str, Any] = {GRID: grid_label(setting.grid, grids)} if len(grids) > 1 else {}
        line |= {key: runs[0][key] for key in moving_options(setting.grid)}
        line["runs"] = len(runs)
        for metric in metrics:
            # A metric the setting's task does not report (a sweep over tasks) stays empty.
            mean, low, high = (
                clipped_interval(metric, [run[metric] for run in runs])
                if all(metric in run for run in runs)
                else (None, None, None)
            )
            line |= {f"{metric}_mean": mean, f"{metric}_low": low, f"{metric}_high": high}
        summary.append(line)
    return summary


def _numeric(values: list[Any]) -> bool:
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)


def plot_summary(
    chosen: list[Setting], summary: list[dict[str, Any]], metrics: list[str], out: Path
) -> dict[str, Path]:
    """`out/<metric>.png` for every metric: a panel per grid, mean and t interval against the
    grid's first numeric moving option (not searched over), a line per value of the others. A
    grid without such an option has no panel; no figures where none has."""
    grids = list(dict.fromkeys(setting.grid for setting in chosen))
    several = len(grids) > 1
    panels: dict[str, tuple[str, list[Any], dict[str, dict[Any, dict[str, Any]]]]] = {}
    for grid in grids:
        label = grid_label(grid, grids)
        lines_of = [line for line in summary if not several or line[GRID] == label]
        searched = grid.tune.over if grid.tune else ()
        moving = [key for key in moving_options(grid) if key not in searched]
        x = next((key for key in moving if _numeric([line[key] for line in lines_of])), None)
        if x is None or not lines_of:
            continue
        others = [key for key in moving if key != x]
        lines: dict[str, dict[Any, dict[str, Any]]] = defaultdict(dict)
        for line in lines_of:
            name = ", ".join(f"{key}={line[key]}" for key in others) or "mean"
            lines[name][line[x]] = line
        panels[label if several else ""] = (x, sorted({line[x] for line in lines_of}), lines)
    if not panels:
        logger.info("no numeric option moves in this sweep: no figures")
        return {}
    from dpdl.experiments.plots import plot_panels

    def column(xs: list[Any], points: dict[Any, dict[str, Any]], name: str) -> list[float]:
        values = [points[v][name] if v in points else None for v in xs]
        return [math.nan if value is None else value for value in values]

    paths = {}
    for metric in metrics:
        # The panels of the grids whose task reports the metric.
        shown = {
            panel: (x, xs, lines)
            for panel, (x, xs, lines) in panels.items()
            if any(
                line[f"{metric}_mean"] is not None
                for points in lines.values()
                for line in points.values()
            )
        }
        series = {
            panel: {name: column(xs, points, f"{metric}_mean") for name, points in lines.items()}
            for panel, (_, xs, lines) in shown.items()
        }
        bands = {
            panel: {
                name: (column(xs, points, f"{metric}_low"), column(xs, points, f"{metric}_high"))
                for name, points in lines.items()
            }
            for panel, (_, xs, lines) in shown.items()
        }
        paths[metric] = plot_panels(
            {panel: xs for panel, (_, xs, _) in shown.items()},
            series,
            {panel: x for panel, (x, _, _) in shown.items()},
            metric,
            out / f"{metric}.png",
            f"{metric}: mean over seeds, {LEVEL:.0%} t interval",
            log_y=False,
            bands=bands,
            titles=several,
        )
    return paths


def write_summary(
    chosen: list[Setting], by_run: Mapping[str, dict[str, Any]], metrics: list[str], out: Path
) -> dict[str, Path]:
    """`out/summary.csv` (`summarise`; the grids' primary metrics first), the figures
    (`plot_summary`), and the answer: the table of the cells and the tests between them,
    and its figure (`dpdl.experiments.sweeps.answer.write_answer`)."""
    from dpdl.experiments.sweeps.answer import answer_cells, write_answer

    cells = answer_cells(chosen, by_run, metrics)
    primary = list(dict.fromkeys(cell.primary.metric for cell in cells))
    metrics = [*primary, *(metric for metric in metrics if metric not in primary)]
    summary = summarise(chosen, by_run, metrics)
    if not summary:
        return {}
    paths = {"summary": write_rows(summary, out / "summary.csv")}
    figures = plot_summary(chosen, summary, metrics, out)
    paths |= {f"figure {metric}": path for metric, path in figures.items()}
    return paths | write_answer(cells, out)
