"""Which runs a sweep makes, and which of them its summary keeps: the search of a grid's
`Tune`, in the two stages the papers' protocols use.

A grid's positions fall into *settings*: the positions that differ only in the searched options
(`over`, default the step size). Without a search every position is a setting of its own and
runs on every seed. With one:

1. *Search*: every position runs on the search's seeds (the first `seeds` of its own; all of
   them by default), at the `at` setting where the search names one (its positions at other
   values of those options then share these runs);
2. *Final*: each setting's best position (the best mean metric over the search's runs; a failed or
   diverged run is the worst; the first in the grid's order on a tie) runs on every seed. Runs the
   search already made are not made again.

This is the protocol of `dpdl_reproductions.tradeoff`, so a reproduction stated as a
sweep file chooses what the reproduction chooses.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpdl.errors import ConfigError
from dpdl.experiments.sweeps.spec import Grid, Sweep, options_of, run_key, runs_of

__all__ = ["Setting", "cost", "final_runs", "search_runs", "setting_groups", "settings"]

#: A finished run's row by its options (None: not run, or failed).
Lookup = Callable[[dict[str, Any]], Mapping[str, Any] | None]


@dataclass(frozen=True)
class Setting:
    """One setting of a grid after its search: the chosen position's options (all its seeds)."""

    grid: Grid
    options: dict[str, Any]


def setting_groups(grid: Grid, base: dict[str, Any]) -> list[list[dict[str, Any]]]:
    """The grid's positions grouped into settings, in the grid's order."""
    over = grid.tune.over if grid.tune else ()
    groups: dict[str, list[dict[str, Any]]] = {}
    for options in grid.configs(base):
        if grid.tune is None:
            groups[run_key(options)] = [options]
            continue
        key = json.dumps(
            {k: v for k, v in sorted(options.items()) if k not in (*over, "seed")}, default=str
        )
        groups.setdefault(key, []).append(options)
    return list(groups.values())


def _searched(grid: Grid, options: dict[str, Any]) -> list[dict[str, Any]]:
    """The runs that score the position `options` in its grid's search."""
    tune = grid.tune
    assert tune is not None
    seeds = options["seed"]
    if tune.seeds is not None:
        if tune.seeds > len(seeds):
            raise ConfigError(
                f"tune: seeds = {tune.seeds}, but the point {options} has {len(seeds)} seed(s)"
            )
        seeds = seeds[: tune.seeds]
    if tune.at:
        options = options_of({**options, **dict(tune.at)}, f"tune.at {dict(tune.at)}")
    return runs_of(options, seeds)


def search_runs(
    sweep: Sweep, grouped: Sequence[list[list[dict[str, Any]]]] | None = None
) -> list[dict[str, Any]]:
    """The first stage: every run the searches need, and every run of the grids without one (a
    run two grids share once), as complete one-seed options. `grouped`: each grid's
    `setting_groups`, where they are known already."""
    runs: dict[str, dict[str, Any]] = {}
    for index, grid in enumerate(sweep.grids):
        groups = setting_groups(grid, sweep.base) if grouped is None else grouped[index]
        for group in groups:
            for options in group:
                wanted = runs_of(options) if grid.tune is None else _searched(grid, options)
                for run in wanted:
                    runs.setdefault(run_key(run), run)
    return list(runs.values())


def cost(value: float, goal: str) -> float:
    """A metric's value as the cost a search minimises (`goal` `"min"` or `"max"`): a
    diverged run's (NaN or infinite) is the worst. The rule of every search, the reproductions'
    own too (`dpdl_reproductions.tradeoff`)."""
    if not math.isfinite(value):
        return math.inf
    return value if goal == "min" else -value


def _score(grid: Grid, options: dict[str, Any], lookup: Lookup) -> float:
    """Mean metric of a position's search runs as a cost (`cost`); a run that failed makes
    it the worst."""
    tune = grid.tune
    assert tune is not None
    values = []
    for run in _searched(grid, options):
        row = lookup(run)
        if row is None or tune.metric not in row:
            return math.inf
        values.append(float(row[tune.metric]))
    return cost(float(np.mean(values)), tune.goal)


def settings(sweep: Sweep, lookup: Lookup) -> list[Setting]:
    """Every setting of every grid, with its chosen position (`lookup` gives the search runs'
    rows)."""
    chosen = []
    for grid in sweep.grids:
        for group in setting_groups(grid, sweep.base):
            best = (
                group[0]
                if grid.tune is None
                else min(group, key=lambda options: _score(grid, options, lookup))
            )
            chosen.append(Setting(grid, best))
    return chosen


def final_runs(chosen: list[Setting]) -> list[dict[str, Any]]:
    """The second stage: every setting's chosen position (`settings`) on every seed, as
    complete one-seed options (those the first stage made among them too)."""
    runs: dict[str, dict[str, Any]] = {}
    for setting in chosen:
        for run in runs_of(setting.options):
            runs.setdefault(run_key(run), run)
    return list(runs.values())
