"""A sweep checked whole before any of its runs, and all that `dpdl sweep --dry-run` does.

[`read_sweep`][dpdl.experiments.sweeps.spec.read_sweep] checks the file itself: every table and
key, the values' types and ranges, `[resources]`, the labels, what a search may tune over.
[`check_sweep`][dpdl.experiments.sweeps.check.check_sweep] then checks what depends on each point:

1. the size first, from the axes' lengths multiplied, without expanding the grids
   ([`Grid.size`][dpdl.experiments.sweeps.spec.Grid.size]): a sweep of more than `MAX_RUNS` runs
   is refused at once with its count and an estimate of its time;
2. every point as one [`TrainConfig`][dpdl.jobspec.config.TrainConfig] (the checks of `dpdl
   train`, without building data or graphs), a bad combination named with its grid and point;
3. what the search and `[record]` name against each point's task: the search's metric and every
   recorded curve a metric the task reports (`dpdl.tasks.metrics.TASK_METRICS`), every recorded
   agent an agent of the point's graph (its `n`, or a real graph's size), of a task that keeps
   each agent's metrics;
4. each run's memory and time from its sizes (`dpdl.jobspec.resources.estimate`): a run that
   cannot fit alone is refused naming its point and the estimate, and so is a sweep whose runs,
   summed and shared among the runs made at once, take longer than
   [`time_limit`][dpdl.jobspec.resources.time_limit].
"""

from __future__ import annotations

import functools
import json
import logging
import re
from dataclasses import dataclass
from typing import Any

from dpdl.choices import REAL_GRAPHS, SYNTHETIC_GRAPHS
from dpdl.errors import ConfigError, ResourceError
from dpdl.experiments.sweeps.spec import Grid, Sweep
from dpdl.experiments.sweeps.tuning import search_runs, setting_groups
from dpdl.jobspec.config import TrainConfig
from dpdl.jobspec.costs import AGENT_PROCESS_BYTES
from dpdl.jobspec.resources import (
    TIME_LIMIT_ENV,
    Estimate,
    estimate,
    format_seconds,
    job_sizes,
    require_fits,
    time_limit,
)
from dpdl.scale import format_bytes
from dpdl.settings import TaskOptions, from_options, to_options
from dpdl.tasks.metrics import METRIC_RANGES, SUFFIXES, TASK_METRICS, known_metrics

__all__ = ["MAX_RUNS", "SweepCheck", "check_sweep", "describe", "sweep_size"]

logger = logging.getLogger(__name__)

#: The most runs a sweep may hold: its points are expanded, checked and kept in memory (about
#: 1 ms and a few kB each), so a larger grid is refused from its count, before expanding it.
MAX_RUNS = 100_000


@dataclass(frozen=True)
class SweepCheck:
    """What a checked sweep will do: `runs`, those of its first stage (every run, or the
    searches' where a search runs in two stages: `staged`); `seconds`, the estimated compute of
    both stages summed over their runs (`estimated` of the `total` runs estimated: a real graph's
    or a file's size is known once built); `memory`, the largest run's estimated peak, described
    by `largest`."""

    runs: int
    staged: bool
    seconds: float
    memory: float
    largest: str
    estimated: int
    total: int


def sweep_size(sweep: Sweep) -> int:
    """The runs of `sweep`, at most (a run two grids share counts twice), from its axes' lengths
    alone: nothing is expanded."""
    return sum(grid.size(sweep.base)[1] for grid in sweep.grids)


def _point(grid: Grid, options: dict[str, Any]) -> str:
    """A point as messages name it: its grid and the options that move there."""
    moving = [key for key in grid.swept if key != "seed"]
    shown = ", ".join(f"{key} = {json.dumps(options.get(key))}" for key in moving)
    return f"{grid.name} point {{{shown}}}" if shown else f"{grid.name} (its one point)"


def _agents(options: dict[str, Any]) -> int | None:
    """The agents of a point's graph when known before building it: `n` for a synthetic
    topology, the size of a real graph the catalogue states (`florentine`: 15, `gnutella-500`:
    500); None for a file or a graph whose size is known once built."""
    graph = options["graph"]
    if graph in SYNTHETIC_GRAPHS:
        return int(options["n"])
    sample = re.fullmatch(r"gnutella-(\d+)", graph)
    if sample:
        return int(sample.group(1))
    stated = re.search(r"\((\d+) nodes", REAL_GRAPHS.get(graph, ""))
    return int(stated.group(1)) if stated else None


def _reported(options: dict[str, Any]) -> tuple[tuple[str, ...], bool | None]:
    """The metrics a point's runs report, and whether they keep each agent's (None: not known, a
    task a plugin registered without its metrics: then the metrics of any task or of
    `METRIC_RANGES` stand)."""
    found = known_metrics(options["task"], options["average_last"])
    return (_any_metric(), None) if found is None else found


@functools.cache
def _any_metric() -> tuple[str, ...]:
    """Every metric a task is known to report, under every suffix."""
    names = {name for metrics in TASK_METRICS.values() for name in metrics.names}
    names |= {name + suffix for name in METRIC_RANGES for suffix in ("", *SUFFIXES)}
    names |= {f"{name}_tail" for name in list(names)}
    return tuple(sorted(names))


def _check_point(sweep: Sweep, grid: Grid, options: dict[str, Any]) -> None:
    """The search's metric, the recorded curves and the recorded agents against one point."""
    metrics, per_agent = _reported(options)
    task = options["task"]

    def refuse(what: str) -> None:
        raise ConfigError(
            f"{what} (task {task!r} at {_point(grid, options)}); it reports: {', '.join(metrics)}"
        )

    if grid.tune is not None and grid.tune.metric not in metrics:
        refuse(f"{grid.name}: tune: {grid.tune.metric!r} is not a metric of its runs")
    for curve in sweep.curves:
        if curve != "step" and curve not in metrics:
            refuse(f"[record] curves: {curve!r} is not a metric of every run")
    if not sweep.nodes:
        return
    if per_agent is False:
        raise ConfigError(
            "[record] nodes: a run of this sweep keeps no agent's own metrics (its task "
            f"{task!r} evaluates the agents' mean only), at {_point(grid, options)}"
        )
    agents = _agents(options)
    if agents is not None and max(sweep.nodes) >= agents:
        raise ConfigError(
            f"[record] nodes: agent {max(sweep.nodes)} is not an agent of the run at "
            f"{_point(grid, options)} ({agents} agents: 0 to {agents - 1})"
        )


def _too_many(sweep: Sweep, total: int, parallel: int) -> ResourceError:
    """The error of a sweep of more than `MAX_RUNS` runs, with the estimate of its first run."""
    grid = sweep.grids[0]
    counts = "; ".join(
        f"{g.name}: {' x '.join(str(len(a.values)) for a in g.axes if a.keys) or '1'} positions, "
        f"{g.size(sweep.base)[1]:,} runs"
        for g in sweep.grids[:4]
    )
    text = (
        f"the sweep has {total:,} runs (its axes' lengths multiplied: {counts}), more than the "
        f"{MAX_RUNS:,} a sweep may hold"
    )
    _, values = next(grid.positions(sweep.base))
    try:
        sizes = job_sizes(from_options(TrainConfig, values))
    except ConfigError:
        sizes = None
    if sizes is not None:
        one = estimate(sizes)
        seconds = (one.seconds or 0.0) / max(sizes.seeds, 1)
        text += (
            f"; its first run alone is estimated at about {format_seconds(seconds)}, so all of "
            f"them at about {format_seconds(seconds * total / parallel)} with {parallel} at once"
        )
    return ResourceError(text + "; shorten its axes or split it into several files")


def _estimates(
    sweep: Sweep, runs: list[dict[str, Any]]
) -> tuple[dict[str, tuple[float, float, str] | None], float]:
    """Each run's estimate by its sizes (`_sized`; `None`: not known before building), checked
    against the machine (`require_fits`, naming the point), and the seconds of `runs` summed."""
    found: dict[str, tuple[float, float, str] | None] = {}
    seconds = 0.0
    for options in runs:
        key = _sized(options)
        if key not in found:
            sizes = job_sizes(from_options(TrainConfig, options))
            if sizes is None:
                found[key] = None
                continue
            one = estimate(sizes)
            try:
                require_fits(one, "a run of the sweep", log=False)
            except ResourceError as error:
                moving = {k: v for k, v in options.items() if k in _moving(sweep)}
                raise ResourceError(f"sweep point {moving}: {error}") from None
            found[key] = (one.seconds or 0.0, one.memory, one.describe())
        value = found[key]
        seconds += value[0] if value else 0.0
    return found, seconds


#: The options a run's estimate reads (`dpdl.jobspec.resources.job_sizes`), besides the task's
#: own options and the number of seeds: runs alike in these are estimated once.
SIZE_OPTIONS = (
    "task",
    "graph",
    "n",
    "p",
    "mechanism",
    "batch_size",
    "clip_level",
    "steps",
    "epochs",
    "eval_every",
    "cycle",
)


@functools.cache
def _task_options() -> tuple[str, ...]:
    return tuple(sorted(to_options(TaskOptions())))


def _sized(options: dict[str, Any]) -> str:
    """The key of a one-seed run's estimate: what it reads of the run's options."""
    return repr([(key, options.get(key)) for key in (*SIZE_OPTIONS, *_task_options())])


def _moving(sweep: Sweep) -> set[str]:
    return {key for grid in sweep.grids for key in grid.swept if key != "seed"}


def _final_seconds(
    sweep: Sweep, groups: list[list[list[dict[str, Any]]]], found: dict[str, Any]
) -> float:
    """The second stage's compute: each setting of a grid that searches, on the seeds its search
    did not run (all of them when it searched at another setting), at its first position's
    estimate (its choice is not known before the search)."""
    seconds = 0.0
    for grid, grouped in zip(sweep.grids, groups, strict=True):
        if grid.tune is None:
            continue
        for group in grouped:
            options = group[0]
            searched = 0 if grid.tune.at else len(options["seed"][: grid.tune.seeds])
            value = found.get(_sized(options))
            if value is not None:
                seconds += value[0] * max(len(options["seed"]) - searched, 0)
    return seconds


def check_sweep(sweep: Sweep, parallel: int = 1) -> SweepCheck:
    """Check `sweep` whole (module doc) before any run, `parallel` runs at once; raises a
    [`ConfigError`][dpdl.errors.ConfigError] (a [`ResourceError`][dpdl.errors.ResourceError] for
    its size) naming the table, key or point."""
    parallel = max(int(parallel), 1)
    total = sweep_size(sweep)
    if total > MAX_RUNS:
        raise _too_many(sweep, total, parallel)
    groups = [setting_groups(grid, sweep.base) for grid in sweep.grids]  # each a TrainConfig
    for grid, grouped in zip(sweep.grids, groups, strict=True):
        for group in grouped:
            for options in group:
                _check_point(sweep, grid, options)
    first = search_runs(sweep, groups)
    found, seconds = _estimates(sweep, first)
    seconds += _final_seconds(sweep, groups, found)
    known = [value for value in found.values() if value is not None]
    peak = max(known, key=lambda value: value[1]) if known else (0.0, 0.0, "")
    if known and parallel > 1:
        _require_parallel_fits(peak[1], parallel)
    bound = time_limit()
    if seconds / parallel > bound:
        raise ResourceError(
            f"the sweep would take about {format_seconds(seconds / parallel)} ({len(first):,} "
            f"runs{' and their choices' if _staged(sweep) else ''}, about "
            f"{format_seconds(seconds)} of compute estimated from their sizes, {parallel} at "
            f"once), more than the limit of {format_seconds(bound)}; shorten its axes or its "
            f"runs, run more at once (--jobs), or set {TIME_LIMIT_ENV} (seconds, or 12h, 40d, "
            "inf) to allow it"
        )
    estimated = sum(1 for options in first if found.get(_sized(options)) is not None)
    logger.info("sweep: %d runs, about %s of compute", len(first), format_seconds(seconds))
    return SweepCheck(len(first), _staged(sweep), seconds, peak[1], peak[2], estimated, len(first))


def _require_parallel_fits(peak: float, parallel: int) -> None:
    """Refuse `parallel` runs at once when, each as large as the largest (`peak` bytes) and each
    in a worker process of its own, they exceed the machine's memory
    ([`require_fits`][dpdl.jobspec.resources.require_fits])."""
    terms = {
        f"{parallel} runs at once, the largest {format_bytes(peak)} each": parallel * peak,
        f"{parallel} worker processes": parallel * float(AGENT_PROCESS_BYTES),
    }
    what = f"the sweep, {parallel} runs at once,"
    require_fits(Estimate(terms), what, log=False, advice="run fewer at once (--jobs)")


def _staged(sweep: Sweep) -> bool:
    return any(g.tune is not None and bool(g.tune.seeds or g.tune.at) for g in sweep.grids)


def describe(check: SweepCheck, parallel: int) -> str:
    """One line: the estimated time and the largest run's memory."""
    if not check.estimated:
        return "estimate: none (the runs' graphs are sized once built)"
    part = "" if check.estimated == check.total else f" ({check.estimated} of the runs sized)"
    return (
        f"estimate: about {format_seconds(check.seconds)} of compute{part}, "
        f"{format_seconds(check.seconds / max(parallel, 1))} with {parallel} at once; the "
        f"largest run: {check.largest}"
    )
