"""A sweep's answer: which mechanism is best at which budget, and whether the seeds can tell.

A *cell* is a setting of a grid ([`Setting`][dpdl.experiments.sweeps.tuning.Setting]) named by
the options that move in the grid, but the seed and the options a search tunes (`tune.over`,
default the step size): with a search, each cell is the search's choice, and the chosen values
are shown beside it, not as cells of their own. Each cell is judged by its grid's *primary
metric*: the metric its search tunes where it searches, else the metric its task judges a run by
([`Task.primary_metric`][dpdl.tasks.base.Task.primary_metric], recorded with each run), with its
mean over seeds and its 95% Student t interval clipped to the metric's range
([`clipped_interval`][dpdl.experiments.sweeps.summary.clipped_interval]).

The cells that differ only in the *compared* option (`mechanism` where it moves, else the first
option that moves and is not a number) form a group: the mechanisms at one eps, say. Its best
cell (best mean) is tested against each other cell of the group by a paired two-sided Student t
test over the seeds both ran (`scipy.stats.ttest_rel`): run s of every mechanism at one eps
shares its graph, data split and batches (all drawn from seed s), so the difference of a pair is
the mechanisms' difference with that seed's luck removed. The verdict is "significant at 5%" or
"not significant", with the number of seeds; with two seeds the test has one degree of freedom
and little power (the mean paired difference must exceed 12.7 of its standard errors), and with
one seed there is no test. The test is not corrected for picking the best of the group first,
nor for testing several cells against it, and a search's choice was made on some of these same
seeds: a "significant" next to a tuned best is a little optimistic.

[`write_answer`][dpdl.experiments.sweeps.answer.write_answer] writes the table (`table.md`, as
`dpdl sweep` prints it, and `table.csv`) and the figure `answer.png`: the primary metric against
the budget, a line per mechanism, the clipped interval shaded, the best of each group a large
marker and the cells the test cannot tell from it hollow.
"""

from __future__ import annotations

import logging
import math
import warnings
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import ttest_rel

from dpdl.experiments.results import write_rows
from dpdl.experiments.sweeps.spec import Grid, run_key, runs_of
from dpdl.experiments.sweeps.summary import LEVEL, clipped_interval, grid_label, moving_options
from dpdl.experiments.sweeps.tuning import Setting, cost
from dpdl.tasks.metrics import metric_range

__all__ = [
    "BUDGET",
    "COMPARED",
    "SIGNIFICANCE",
    "Cell",
    "Comparison",
    "Primary",
    "answer_cells",
    "answer_table",
    "paired_test",
    "write_answer",
]

logger = logging.getLogger(__name__)

#: The option whose values a group compares, where it moves.
COMPARED = "mechanism"
#: The option the figure puts on its x axis, where it moves.
BUDGET = "eps"
#: The level of the paired test.
SIGNIFICANCE = 0.05
#: The metric a task judges runs by unless it says otherwise (:class:`dpdl.tasks.base.Task`).
DEFAULT_PRIMARY = "test_loss"


@dataclass(frozen=True)
class Primary:
    """The metric a grid's cells are judged by, and whether higher is better."""

    metric: str
    higher_is_better: bool

    def cost(self, value: float) -> float:
        """`value` as a cost, lower better; a diverged run's (NaN, infinite) is the worst."""
        return cost(value, "max" if self.higher_is_better else "min")

    def describe(self) -> str:
        known = metric_range(self.metric)
        where = ""
        if known is not None and (math.isfinite(known.low) or math.isfinite(known.high)):
            high = f"{known.high:g}]" if math.isfinite(known.high) else "inf)"
            where = f", clipped to [{known.low:g}, {high}"
        better = "higher" if self.higher_is_better else "lower"
        return (
            f"{self.metric} ({better} is better): mean over seeds [{LEVEL:.0%} t interval{where}]"
        )


@dataclass(frozen=True)
class Comparison:
    """A cell against the best of its group: the seeds both ran, the mean paired difference
    (this cell's value less the best's), the test's p-value (None: no test) and its verdict."""

    seeds: int
    difference: float
    p: float | None
    verdict: str

    @property
    def significant(self) -> bool:
        return self.p is not None and self.p < SIGNIFICANCE


@dataclass
class Cell:
    """One setting's line of the answer: its grid's label (empty where the sweep has one grid),
    the options that name it, the values its search chose, its primary metric's value per seed
    and their mean and clipped interval; `best` and `comparison` within its group."""

    grid: str
    options: dict[str, Any]
    chosen: dict[str, Any]
    primary: Primary
    values: dict[int, float]
    mean: float
    low: float
    high: float
    compared: str | None
    best: bool = False
    comparison: Comparison | None = None
    group: tuple[Any, ...] = field(default=())


def paired_test(values: Mapping[int, float], best: Mapping[int, float]) -> Comparison:
    """A paired two-sided t test (`scipy.stats.ttest_rel`) of `values` against `best` over
    the seeds both have; a seed count below 2, a diverged run or identical pairs give no p-value."""
    seeds = sorted(set(values) & set(best))
    if not seeds:
        return Comparison(0, math.nan, None, "no seed in common: no test")
    ours = np.array([values[seed] for seed in seeds], dtype=float)
    theirs = np.array([best[seed] for seed in seeds], dtype=float)
    differences = ours - theirs
    difference = float(differences.mean())
    if not np.all(np.isfinite(differences)):
        return Comparison(len(seeds), difference, None, "a diverged run: no test")
    if len(seeds) < 2:
        return Comparison(1, difference, None, "1 seed: no test")
    if np.all(differences == differences[0]):  # no spread: the t statistic is 0/0 or +-inf
        p = 1.0 if differences[0] == 0 else 0.0
    else:
        with warnings.catch_warnings():  # near-constant differences: scipy's precision warning
            warnings.simplefilter("ignore", RuntimeWarning)
            p = float(ttest_rel(ours, theirs).pvalue)
    verdict = "significant at 5%" if p < SIGNIFICANCE else "not significant"
    return Comparison(len(seeds), difference, p, verdict)


def _primary(grid: Grid, runs: list[dict[str, Any]], metrics: list[str]) -> Primary | None:
    """The metric `grid`'s cells are judged by: its search's, else its task's as its runs
    recorded it, else (runs cached before they recorded it) the tasks' default, `test_loss`,
    where the runs report it, else their first metric; None where they report none."""
    if grid.tune is not None:
        return Primary(grid.tune.metric, grid.tune.goal == "max")
    recorded = next((run for run in runs if run.get("primary_metric")), None)
    if recorded is not None:
        return Primary(recorded["primary_metric"], not recorded.get("lower_is_better", True))
    reported = [metric for metric in metrics if all(metric in run for run in runs)]
    if not reported:
        return None
    metric = DEFAULT_PRIMARY if DEFAULT_PRIMARY in reported else reported[0]
    known = metric_range(metric)
    return Primary(metric, known is not None and known.higher_is_better)


def _compared(keys: list[str], cells: list[dict[str, Any]]) -> str | None:
    """The option a grid's groups compare: `mechanism` where it moves, else its first option
    that moves and is not a number; None where there is none."""
    if COMPARED in keys:
        return COMPARED
    return next(
        (key for key in keys if not all(_is_number(cell[key]) for cell in cells)),
        None,
    )


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def answer_cells(
    chosen: list[Setting], by_run: Mapping[str, dict[str, Any]], metrics: list[str]
) -> list[Cell]:
    """The cells of every grid (see the module's docstring), in the grid's order, each judged by
    its grid's primary metric, the best of each group marked and every other cell of the group
    tested against it. A setting none of whose runs finished is left out."""
    grids = list(dict.fromkeys(setting.grid for setting in chosen))
    found: list[tuple[Setting, list[dict[str, Any]]]] = []
    for setting in chosen:
        runs = [by_run[run_key(run)] for run in runs_of(setting.options)]
        runs = [run for run in runs if "error" not in run]
        if runs:
            found.append((setting, runs))
    cells: list[Cell] = []
    for grid in grids:
        of_grid = [(setting, runs) for setting, runs in found if setting.grid is grid]
        primary = _primary(grid, [run for _, runs in of_grid for run in runs], metrics)
        if primary is None or not of_grid:
            continue
        searched = grid.tune.over if grid.tune else ()
        keys = [key for key in moving_options(grid) if key not in searched]
        tuned = [key for key in moving_options(grid) if key in searched]
        compared = _compared(keys, [runs[0] for _, runs in of_grid])
        label = grid_label(grid, grids) if len(grids) > 1 else ""
        for _, runs in of_grid:
            values = {
                int(run["seed"]): float(run[primary.metric])
                for run in runs
                if run.get(primary.metric) is not None
            }
            if not values:
                continue
            mean, low, high = clipped_interval(primary.metric, list(values.values()))
            options = {key: runs[0][key] for key in keys}
            cells.append(
                Cell(
                    grid=label,
                    options=options,
                    chosen={key: runs[0][key] for key in tuned},
                    primary=primary,
                    values=values,
                    mean=mean,
                    low=low,
                    high=high,
                    compared=compared,
                    group=(label, *(value for key, value in options.items() if key != compared)),
                )
            )
    _judge(cells)
    return cells


def _judge(cells: list[Cell]) -> None:
    """Mark each group's best cell and test the others against it (groups of one: neither)."""
    groups: dict[tuple[Any, ...], list[Cell]] = defaultdict(list)
    for cell in cells:
        if cell.compared is not None:
            groups[cell.group].append(cell)
    for members in groups.values():
        if len(members) < 2:
            continue
        best = min(members, key=lambda cell: cell.primary.cost(cell.mean))  # first on a tie
        best.best = True
        for cell in members:
            if cell is not best:
                cell.comparison = paired_test(cell.values, best.values)


def _shown(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "default" if value is None else str(value)


def _interval(cell: Cell) -> str:
    if math.isnan(cell.low):
        return _shown(cell.mean)
    return f"{_shown(cell.mean)} [{_shown(cell.low)}, {_shown(cell.high)}]"


def _against(cell: Cell) -> str:
    if cell.best:
        return "best"
    if cell.comparison is None:
        return ""
    test = cell.comparison
    if test.p is None:
        return test.verdict
    return f"p = {test.p:.2g}: {test.verdict}" + ("*" if test.seeds == 2 else "")


def _markdown(header: list[str], rows: list[list[str]], right: set[int]) -> list[str]:
    widths = [max(len(line[i]) for line in [header, *rows]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        padded = [
            cell.rjust(width) if i in right else cell.ljust(width)
            for i, (cell, width) in enumerate(zip(cells, widths, strict=True))
        ]
        return "| " + " | ".join(padded) + " |"

    rule = [
        ("-" * (width + 1) + ":") if i in right else "-" * (width + 2)
        for i, width in enumerate(widths)
    ]
    return [line(header), "|" + "|".join(rule) + "|", *(line(row) for row in rows)]


def answer_table(cells: list[Cell]) -> str:
    """The answer as text, one Markdown table per grid (a row per cell: its options, the values
    its search chose, the primary metric's mean and clipped interval, the seeds, the verdict
    against the best of its group), and notes on what the tests can say."""
    lines: list[str] = []
    for label in dict.fromkeys(cell.grid for cell in cells):
        of_grid = [cell for cell in cells if cell.grid == label]
        groups = list(dict.fromkeys(cell.group for cell in of_grid))
        of_grid.sort(key=lambda cell: groups.index(cell.group))  # a group's rows together
        first = of_grid[0]
        keys = [key for key in first.options if key != first.compared]
        keys += [first.compared] if first.compared is not None else []
        tuned = list(first.chosen)
        header = [*keys, *tuned, first.primary.metric, "seeds"]
        tested = any(cell.best for cell in of_grid)
        header += ["against the best (paired t)"] if tested else []
        rows = [
            [*(_shown(cell.options[key]) for key in keys)]
            + [_shown(cell.chosen[key]) for key in tuned]
            + [_interval(cell), str(len(cell.values))]
            + ([_against(cell)] if tested else [])
            for cell in of_grid
        ]
        number = {i for i, key in enumerate(keys) if _is_number(first.options[key])}
        number |= {len(keys) + len(tuned) + 1}
        if lines:
            lines.append("")
        if label:
            lines.append(f"{label}:")
        lines.append(first.primary.describe())
        if tested:
            others = [key for key in keys if key != first.compared]
            at = f" at the same {', '.join(others)}" if others else ""
            lines.append(f"each {first.compared} against the best {first.compared}{at}")
        if tuned:
            lines.append(f"{', '.join(tuned)}: the search's choice for each row (tune)")
        lines += _markdown(header, rows, number)
    notes = []
    comparisons = [cell.comparison for cell in cells if cell.comparison is not None]
    if any(test.seeds == 2 and test.p is not None for test in comparisons):
        notes.append(
            "* 2 seeds: a paired t test of 1 degree of freedom has little power (the mean\n"
            "  difference must exceed 12.7 standard errors); more seeds can tell them apart"
        )
    if any(len(cell.values) == 1 for cell in cells):
        notes.append("1 seed: no interval and no test; sweep more seeds to have them")
    return "\n".join(lines + ([""] if notes else []) + notes) + "\n"


def _csv_rows(cells: list[Cell]) -> list[dict[str, Any]]:
    rows = []
    for cell in cells:
        test = cell.comparison
        row = {"grid": cell.grid} if cell.grid else {}
        row |= cell.options | cell.chosen
        row |= {
            "metric": cell.primary.metric,
            "mean": cell.mean,
            "low": cell.low,
            "high": cell.high,
            "seeds": len(cell.values),
            "best": cell.best,
            "difference_to_best": test.difference if test else None,
            "p_value": test.p if test else None,
            "verdict": "best" if cell.best else (test.verdict if test else ""),
        }
        rows.append(row)
    return rows


def _mark(cell: Cell) -> str:
    if cell.best:
        return "best"
    if cell.comparison is None:
        return ""
    return "worse" if cell.comparison.significant else "tied"


def _figure(cells: list[Cell], out: Path) -> Path | None:
    """`out/answer.png`: a panel per grid and value of its other options, the primary metric
    against the budget (`eps`, else the first numeric option), a line per compared value."""
    from dpdl.experiments.plots import plot_answer

    panels: dict[str, dict[str, list[tuple[float, float, float, float, str]]]] = {}
    xlabels: dict[str, str] = {}
    metrics = list(dict.fromkeys(cell.primary.metric for cell in cells))
    for cell in cells:
        numeric = [
            key for key in cell.options if key != cell.compared and _is_number(cell.options[key])
        ]
        x = BUDGET if BUDGET in numeric else next(iter(numeric), None)
        if x is None:
            continue
        others = [key for key in cell.options if key not in (x, cell.compared)]
        name = ", ".join(
            [cell.grid] * bool(cell.grid) + [f"{key}={_shown(cell.options[key])}" for key in others]
        )
        line = _shown(cell.options[cell.compared]) if cell.compared else cell.primary.metric
        point = (float(cell.options[x]), cell.mean, cell.low, cell.high, _mark(cell))
        panels.setdefault(name, {}).setdefault(line, []).append(point)
        xlabels[name] = x
    if not panels:
        logger.info("no numeric option moves beside the compared one: no answer figure")
        return None
    title = f"{' / '.join(metrics)}: mean over seeds, {LEVEL:.0%} t interval"
    return plot_answer(panels, xlabels, " / ".join(metrics), out / "answer.png", title)


def write_answer(cells: list[Cell], out: Path) -> dict[str, Path]:
    """`out/table.md` ([`answer_table`][dpdl.experiments.sweeps.answer.answer_table]),
    `out/table.csv` (a row per cell: its options and choices, the primary metric, its mean and
    clipped interval, the seeds, whether it is its group's best, the paired difference to it,
    the p-value and the verdict) and the figure `out/answer.png` where an option of the cells is
    a number."""
    if not cells:
        return {}
    from dpdl.files import atomic_write

    paths = {"table": out / "table.md"}
    atomic_write(paths["table"], answer_table(cells).encode())
    paths["table csv"] = write_rows(_csv_rows(cells), out / "table.csv")
    figure = _figure(cells, out)
    return paths | ({"answer": figure} if figure is not None else {})
