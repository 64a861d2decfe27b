"""Running a sweep: every point through the run cache, on an executor, into one table.

A point is a job `{"kind": "dpdl-sweep-point", "version": VERSION, "options": {...}}` holding
every option of its one-seed configuration; `dpdl.experiments.cache.run_jobs`
stores its result under the hash of that job, checked against the engine version
(`dpdl.jobspec.ENGINE_VERSION`) and the data files, in `DIR/points/`. So a sweep run
again (interrupted, or with points added) computes only what is missing or changed; entries are
written atomically, so two sweeps writing into one folder at once leave whole entries only (a point
both need may then run twice, never be torn).

A grid with a search runs in two stages (`dpdl.experiments.sweeps.tuning`): the search's
runs, then each setting's chosen point on every seed.

`DIR/runs.csv` has one row per run: `point` (the hash), a column per option of the run (as
resolved: the task's step size filled in, a length in `epochs` as given beside the `steps` and
`eval_every` it resolved to), a column per final metric, the same metrics at step 0
(`initial_<metric>`: how far the run moved), the privacy accounted
(`epsilon` against the mechanism's own threat model, `threat`, `sigma`, `trace_WRW`,
`exact_epsilon_of_calibration`: what the run's calibration achieves by the exact accountant, and
`sampling_rate`: the Poisson rate of an example-level guarantee, 1 at agent level), what the
file's `[record]` asks for (`<metric>_curve`: the metric at every evaluation, a JSON list;
`<metric>_node<i>`: agent i's final metrics), and `error` for a run that failed (the same
table, byte for byte, from every executor).
`DIR/runs.parquet` too when pyarrow is installed. `DIR/timing.json` holds what the last
invocation cost: its wall time, the compute time of the runs, summed (what each recorded
when it ran, `RUN_SECONDS`), and the threads each run it made
computed with (`--threads`).
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import json
import logging
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dpdl.errors import ConfigError
from dpdl.experiments.cache import RUN_SECONDS, job_key, run_jobs
from dpdl.experiments.executors import Executor
from dpdl.experiments.results import write_rows
from dpdl.experiments.sweeps.check import check_sweep
from dpdl.experiments.sweeps.spec import Sweep, run_key
from dpdl.experiments.sweeps.summary import write_summary
from dpdl.experiments.sweeps.tuning import final_runs, search_runs, settings
from dpdl.experiments.tensorboard import require_tensorboard
from dpdl.files import atomic_write
from dpdl.threads import job_threads

__all__ = ["KIND", "VERSION", "SweepResult", "run_point", "run_sweep"]

logger = logging.getLogger(__name__)

KIND = "dpdl-sweep-point"
#: Part of every point's job: bump it when :func:`run_point`'s output changes (4: the sampling
#: rate of example-level privacy; 5: every metric at every evaluation and every agent's final
#: metrics, which ``[record]`` picks columns of).
VERSION = 5


def run_point(job: dict[str, Any], tensorboard: Path | None = None) -> dict[str, Any]:
    """Train one point (one seed); its resolved options, final metrics, every metric at every
    evaluation (`curves`), every agent's final metrics (`agents`), privacy, and the metric
    its task judges it by (`primary_metric`, `lower_is_better`: absent from the points cached
    before it was recorded, which the summary reads as the task's default). Its threads are the
    executor's (`ExecutorOptions`: one unless `--threads`;
    one when called outside an executor): the points themselves fill the cores. `tensorboard`:
    also write its records as they are made into `tensorboard/<point>`
    ([`dpdl.experiments.tensorboard`][dpdl.experiments.tensorboard])."""
    from dpdl.accounting import ExampleLevel
    from dpdl.experiments.tensorboard import SeedLogs
    from dpdl.experiments.train import TrainConfig, run_training
    from dpdl.settings import from_options, to_options

    with job_threads(), contextlib.ExitStack() as stack:
        logs = None
        if tensorboard is not None:
            logs = stack.enter_context(SeedLogs(Path(tensorboard) / job_key(job)))
        result = run_training(from_options(TrainConfig, job["options"]), callback=logs)
    run = result.runs[0]
    relation = result.calibration.neighbouring if result.calibration else None
    return {
        "config": to_options(result.config),
        "metrics": {key: value for key, value in run.final.items() if key != "step"},
        "initial": {key: value for key, value in run.history[0].items() if key != "step"},
        "curves": {
            key: [record.get(key, math.nan) for record in run.history]
            for key in dict.fromkeys(key for record in run.history for key in record)
        },
        "agents": {key: list(values) for key, values in run.agent_metrics.items()},
        "primary_metric": result.primary_metric,
        "lower_is_better": result.lower_is_better,
        "privacy": {
            "epsilon": run.privacy[0].epsilon if run.privacy else math.nan,
            "threat": run.privacy[0].threat if run.privacy else "",
            # None (an empty cell) where the mechanism has no single sigma (DECOR, Whisper):
            # their noise scales are in config.json, not a made-up 0
            "sigma": run.mechanism.get("sigma"),
            "trace_WRW": run.trace_wrw,
            "exact_epsilon_of_calibration": result.calibration.achieved_epsilon
            if result.calibration
            else 0.0,
            # the Poisson rate of an example-level guarantee (the largest agent rate); agent: 1
            "sampling_rate": relation.sampling_rate if isinstance(relation, ExampleLevel) else 1.0,
            # a time-correlated mechanism's encoder sensitivity, which its noise is calibrated to
            **{key: run.mechanism[key] for key in ("sensitivity",) if key in run.mechanism},
        },
    }


def _check_record(sweep: Sweep, entries: list[dict[str, Any]]) -> None:
    """Every run that ran has the curves and agents' metrics `[record]` asks for."""
    histories = [entry.get("curves", {}) for entry in entries]
    unknown = [key for key in sweep.curves if any(key not in curves for curves in histories)]
    if unknown:
        known = sorted({key for curves in histories for key in curves})
        raise ConfigError(
            f"[record] curves: {', '.join(map(repr, unknown))} is not a metric of every run; "
            f"they have: {', '.join(known)}"
        )
    if not sweep.nodes:
        return
    if any(not entry.get("agents") for entry in entries):
        raise ConfigError(
            "[record] nodes: a run of this sweep keeps no agent's own metrics (its task evaluates "
            "the agents' mean only)"
        )
    for entry in entries:
        agents = len(next(iter(entry["agents"].values())))
        if max(sweep.nodes) >= agents:
            raise ConfigError(
                f"[record] nodes: agent {max(sweep.nodes)} is not an agent of the run "
                f"{entry.get('config')} ({agents} agents: 0 to {agents - 1})"
            )


@dataclass
class SweepResult:
    """The table of a sweep (one row per run: the search's, then the final stage's, each in grid
    order), its metric columns, where it was written, and how many runs failed."""

    rows: list[dict[str, Any]]
    metrics: list[str]
    paths: dict[str, Path]
    failed: int


def _row(job: dict[str, Any], entry: dict[str, Any], sweep: Sweep) -> dict[str, Any]:
    """One tidy row: the point's hash, its options (one seed), metrics, privacy, what the
    sweep's `[record]` asks for, error."""
    options = entry.get("config", job["options"])
    row = {"point": job_key(job), **options, "seed": options["seed"][0]}
    if job["options"].get("epochs") is not None:  # the length as the file states it, beside the
        row["epochs"] = job["options"]["epochs"]  # steps and evaluation period it resolved to
    row.update(entry.get("metrics", {}))
    row.update({f"initial_{key}": value for key, value in entry.get("initial", {}).items()})
    row.update(entry.get("privacy", {}))
    row.update({key: entry[key] for key in ("primary_metric", "lower_is_better") if key in entry})
    if "error" in entry:
        row["error"] = entry["error"]
    else:
        curves, agents = entry.get("curves", {}), entry.get("agents", {})
        row.update({f"{key}_curve": json.dumps(curves[key]) for key in sweep.curves})
        row.update(
            {f"{key}_node{i}": agents[key][i] for i in sweep.nodes for key in sorted(agents)}
        )
    return row


def run_sweep(
    sweep: Sweep,
    out: Path,
    executor: Executor | None = None,
    workers: int | None = None,
    progress: bool = True,
    label: str = "sweep",
    tensorboard: Path | None = None,
    parallel: int | None = None,
) -> SweepResult:
    """Run every point of `sweep` not already in `out/points` on `executor` (default:
    `workers` local processes), in two stages where a grid searches (the search, then each
    setting's choice on every seed), then write `out/runs.csv` (and `runs.parquet`), the
    summary over seeds and its figures (`dpdl.experiments.sweeps.summary.write_summary`). A
    point that fails is logged and kept as a row with its `error`; the others go on.
    `tensorboard`: each point run here also writes its records, as they are made, into
    `tensorboard/<point>/seed<s>` (points found in `out/points` are not run again). The sweep is
    checked whole first ([`check_sweep`][dpdl.experiments.sweeps.check.check_sweep], `parallel`
    runs at once: default `workers`, else every core)."""
    if tensorboard is not None:
        require_tensorboard()  # here, not in every point
    start = time.perf_counter()
    check_sweep(sweep, parallel or workers or os.cpu_count() or 1)
    first = search_runs(sweep)
    jobs: list[dict[str, Any]] = []
    entries: list[dict[str, Any]] = []
    done: dict[str, dict[str, Any]] = {}

    def stage(runs: list[dict[str, Any]], name: str) -> None:
        new = [run for run in runs if run_key(run) not in done]
        if not new:
            return
        batch = [{"kind": KIND, "version": VERSION, "options": options} for options in new]
        point = (
            run_point
            if tensorboard is None
            else functools.partial(run_point, tensorboard=tensorboard)
        )
        found = run_jobs(
            batch, point, out / "points", workers, progress, name, executor, keep_going=True
        )
        for job, entry in zip(batch, found, strict=True):
            done[run_key(job["options"])] = entry
        jobs.extend(batch)
        entries.extend(found)

    def lookup(options: dict[str, Any]) -> dict[str, Any] | None:
        entry = done.get(run_key(options))
        return None if entry is None or "error" in entry else entry.get("metrics")

    stage(first, label)
    metrics = list(dict.fromkeys(key for entry in entries for key in entry.get("metrics", {})))
    for grid in sweep.grids:
        if grid.tune is not None and metrics and grid.tune.metric not in metrics:
            raise ConfigError(
                f"tune: {grid.tune.metric!r} is not a metric of these runs; they have: "
                f"{', '.join(metrics)}"
            )
    chosen = settings(sweep, lookup)  # the searches' choices: their runs are all made by now
    stage(final_runs(chosen), f"{label} (final)")
    _check_record(sweep, [entry for entry in entries if "error" not in entry])
    rows = [_row(job, entry, sweep) for job, entry in zip(jobs, entries, strict=True)]
    paths = {"runs": write_rows(rows, out / "runs.csv")}
    if importlib.util.find_spec("pyarrow") is not None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        paths["parquet"] = out / "runs.parquet"
        partial = out / f".runs.parquet.{os.getpid()}.partial"
        pq.write_table(pa.Table.from_pylist(rows), partial)
        os.replace(partial, paths["parquet"])  # atomic, like runs.csv
    failed = sum("error" in row for row in rows)
    if failed:
        logger.error(
            "%s: %d of %d runs failed (rows with an error in runs.csv)", label, failed, len(rows)
        )
    recorded = [entry[RUN_SECONDS] for entry in entries if entry.get(RUN_SECONDS) is not None]
    timing = {
        "runs": len(rows),
        "failed": failed,
        "wall_seconds": round(time.perf_counter() - start, 1),
        "compute_seconds": round(sum(recorded), 1),
        "runs_with_compute_seconds": len(recorded),
        "threads_per_run": executor.threads if executor is not None else 1,
    }
    paths["timing"] = out / "timing.json"
    atomic_write(paths["timing"], (json.dumps(timing, indent=2) + "\n").encode())
    by_run = {run_key(job["options"]): row for job, row in zip(jobs, rows, strict=True)}
    paths.update(write_summary(chosen, by_run, metrics, out))
    return SweepResult(rows, metrics, paths, failed)
