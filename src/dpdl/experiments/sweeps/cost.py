"""What a sweep's grid costs, estimated from its points before any runs: the time of every point
(each configuration estimated once, its seeds sharing the estimate) spread over the workers, and
the memory of the largest point in every worker at once, beside the workers' processes.
`dpdl reproduce NAME` checks it on the reproduction's sweep file before running anything."""

from __future__ import annotations

from typing import Any

from dpdl.errors import ConfigError
from dpdl.experiments.sweeps.spec import Sweep
from dpdl.jobspec.config import TrainConfig
from dpdl.jobspec.costs import AGENT_PROCESS_BYTES
from dpdl.jobspec.job import with_epochs
from dpdl.jobspec.resources import Estimate, estimate, job_sizes, require_fits
from dpdl.scale import format_bytes
from dpdl.settings import from_options

__all__ = ["require_sweep_fits", "sweep_estimate"]


def _point_estimate(options: dict[str, Any]) -> Estimate | None:
    """One point's estimate; None where its sizes are known only once its data are read (a
    length in epochs, a graph file)."""
    try:
        sizes = job_sizes(with_epochs(from_options(TrainConfig, options).resolved()))
    except ConfigError:  # a length in epochs of data not read yet: the point checks itself
        return None
    return None if sizes is None else estimate(sizes)


def sweep_estimate(sweep: Sweep, workers: int) -> Estimate:
    """The runs of `sweep` on `workers` processes at once: their total time divided among the
    workers, and the largest point's memory times the workers plus the workers' processes."""
    found: dict[str, Estimate | None] = {}
    seconds, steps, largest = 0.0, 0, Estimate({"no point of known size": 0.0})
    points = sweep.points()
    for point in points:
        key = repr(sorted((k, v) for k, v in point.items() if k != "seed"))
        if key not in found:
            found[key] = _point_estimate(point)
        one = found[key]
        if one is None:
            continue
        seconds += one.seconds or 0.0
        steps += one.steps
        if one.memory > largest.memory:
            largest = one
    workers = max(1, min(workers, len(points)))
    name, size = largest.largest
    terms = {
        f"{workers} workers' largest point (its {name}, {format_bytes(size)})": workers
        * largest.memory,
        f"{workers} worker processes": float(workers) * AGENT_PROCESS_BYTES,
    }
    return Estimate(terms, seconds / workers, steps)


def require_sweep_fits(sweep: Sweep, workers: int, what: str) -> None:
    """Refuse `sweep` on `workers` processes when `sweep_estimate` exceeds the memory or the
    time limit (`require_fits`), naming the estimate."""
    advice = "run fewer points (--quick, --parts) or more workers (--jobs)"
    require_fits(sweep_estimate(sweep, workers), what, advice=advice)
