"""A sweep's summary: every setting's metrics over seeds, with Student t intervals, and figures.

The runs of one setting (the same options but the seed) are replicates; their mean and its t
interval at 95% (``mean +- t_{0.975, n-1} s / sqrt(n)``) go to ``DIR/summary.csv``, one row per
setting. With a step-size search (:class:`~dpdl.experiments.sweeps.spec.Tune`) only the best
setting of each search is kept. Each metric gets a figure ``DIR/<metric>.png``: the mean against
the first numeric option that moves (eps, say), one line per value of the other moving options,
the t interval shaded.
"""

from __future__ import annotations

import json
import logging
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import t as student_t

from dpdl.errors import ConfigError
from dpdl.experiments.results import write_rows
from dpdl.experiments.sweeps.spec import Sweep

__all__ = ["LEVEL", "summarise", "t_interval", "write_summary"]

logger = logging.getLogger(__name__)

#: Confidence level of the intervals over seeds.
LEVEL = 0.95


def t_interval(values: list[float], level: float = LEVEL) -> tuple[float, float, float]:
    """``(mean, low, high)``: the mean of ``values`` and its two-sided Student t interval at
    ``level``; the interval is NaN with fewer than two values."""
    data = np.asarray(values, dtype=float)
    mean = float(data.mean())
    if len(data) < 2:
        return mean, math.nan, math.nan
    half = float(student_t.ppf((1 + level) / 2, len(data) - 1) * data.std(ddof=1))
    half /= math.sqrt(len(data))
    return mean, mean - half, mean + half


def _key(row: dict[str, Any], keys: list[str]) -> str:
    return json.dumps([row[key] for key in keys])


def _score(rows: list[dict[str, Any]], metric: str, goal: str) -> float:
    """Mean ``metric`` of ``rows`` as a cost (lower is better); a diverged run is the worst."""
    mean = float(np.mean([row[metric] for row in rows]))
    if not math.isfinite(mean):
        return math.inf
    return mean if goal == "min" else -mean


def summarise(sweep: Sweep, rows: list[dict[str, Any]], metrics: list[str]) -> list[dict[str, Any]]:
    """One row per setting (per search, with a :class:`Tune`): the moving options, the number of
    runs, and each metric's mean, low and high (t interval over seeds). Failed runs are left out."""
    moving = [key for key in sweep.swept if key != "seed"]
    settings: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        if "error" not in row:
            settings[_key(row, moving)].append(row)
    chosen = list(settings.values())
    if sweep.tune is not None:
        tune = sweep.tune
        if metrics and tune.metric not in metrics:
            raise ConfigError(
                f"tune: {tune.metric!r} is not a metric of these runs; they have: "
                f"{', '.join(metrics)}"
            )
        fixed = [key for key in moving if key not in tune.over]
        searches: dict[str, list[list[dict[str, Any]]]] = defaultdict(list)
        for runs in chosen:
            searches[_key(runs[0], fixed)].append(runs)
        chosen = [
            min(candidates, key=lambda runs: _score(runs, tune.metric, tune.goal))
            for candidates in searches.values()
        ]
    summary = []
    for runs in chosen:
        line: dict[str, Any] = {key: runs[0][key] for key in moving}
        line["runs"] = len(runs)
        for metric in metrics:
            mean, low, high = t_interval([run[metric] for run in runs])
            line |= {f"{metric}_mean": mean, f"{metric}_low": low, f"{metric}_high": high}
        summary.append(line)
    return summary


def _numeric(values: list[Any]) -> bool:
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)


def plot_summary(
    sweep: Sweep, summary: list[dict[str, Any]], metrics: list[str], out: Path
) -> dict[str, Path]:
    """``out/<metric>.png`` for every metric: mean and t interval against the first numeric
    moving option (not searched over), a line per value of the others. None without such an
    option."""
    searched = sweep.tune.over if sweep.tune else ()
    moving = [key for key in sweep.swept if key not in ("seed", *searched)]
    x = next((key for key in moving if _numeric([line[key] for line in summary])), None)
    if x is None or not summary:
        logger.info("no numeric option moves in this sweep: no figures")
        return {}
    from dpdl.experiments.plots import plot_panels

    others = [key for key in moving if key != x]
    xs = sorted({line[x] for line in summary})
    lines: dict[str, dict[Any, dict[str, Any]]] = defaultdict(dict)
    for line in summary:
        label = ", ".join(f"{key}={line[key]}" for key in others) or "mean"
        lines[label][line[x]] = line

    def column(points: dict[Any, dict[str, Any]], name: str) -> list[float]:
        return [points[v][name] if v in points else math.nan for v in xs]

    paths = {}
    for metric in metrics:
        series = {label: column(points, f"{metric}_mean") for label, points in lines.items()}
        bands = {
            label: (column(points, f"{metric}_low"), column(points, f"{metric}_high"))
            for label, points in lines.items()
        }
        paths[metric] = plot_panels(
            {"": xs},
            {"": series},
            {"": x},
            metric,
            out / f"{metric}.png",
            f"{metric}: mean over seeds, {LEVEL:.0%} t interval",
            log_y=False,
            bands={"": bands},
        )
    return paths


def write_summary(
    sweep: Sweep, rows: list[dict[str, Any]], metrics: list[str], out: Path
) -> dict[str, Path]:
    """``out/summary.csv`` (:func:`summarise`) and the figures (:func:`plot_summary`)."""
    summary = summarise(sweep, rows, metrics)
    if not summary:
        return {}
    paths = {"summary": write_rows(summary, out / "summary.csv")}
    figures = plot_summary(sweep, summary, metrics, out)
    return paths | {f"figure {metric}": path for metric, path in figures.items()}
