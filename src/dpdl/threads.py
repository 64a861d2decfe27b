"""How many threads a run computes with: the cores this process may use and that are idle.

torch (and the BLAS under numpy) start one thread per core of the machine. On a machine shared
with other work that oversubscribes the cores, and their thread pools, which spin while they wait,
then run many times slower than one thread would: the MNIST CNN's step took 342 ms on two threads
of a 2-core machine with one other busy process, against 32 ms on one thread (BENCHMARKS.md,
"Per-agent gradients of torch models"). `default_threads` counts instead the cores the
process is allowed (its CPU affinity, and its cgroup's CPU quota, which containers set), less those
the machine's other work keeps busy (the one-minute load average, read before the run starts).
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from dpdl.errors import ConfigError

__all__ = [
    "allowed_cores",
    "compute_threads",
    "default_threads",
    "env_threads",
    "job_threads",
    "require_threads",
]

logger = logging.getLogger(__name__)

#: The cgroup v2 file holding a CPU quota: "<quota microseconds> <period microseconds>" or "max".
CGROUP_CPU_MAX = Path("/sys/fs/cgroup/cpu.max")


def _quota_cores(path: Path = CGROUP_CPU_MAX) -> int | None:
    """The cgroup's CPU quota in whole cores (rounded up), or None where none is set."""
    try:
        quota, period = path.read_text().split()[:2]
    except (OSError, ValueError):
        return None
    if quota == "max":
        return None
    try:
        return max(1, math.ceil(int(quota) / int(period)))
    except (ValueError, ZeroDivisionError):
        return None


def allowed_cores() -> int:
    """The cores this process may run on: its CPU affinity, capped by its cgroup's CPU quota."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    quota = _quota_cores()
    return max(1, min(cores or 1, quota if quota is not None else cores or 1))


def default_threads() -> int:
    """`allowed_cores`, less the cores the machine's other work keeps busy now (its
    one-minute load average, rounded down), and at least one."""
    allowed = allowed_cores()
    try:
        busy = math.floor(os.getloadavg()[0])
    except OSError:
        busy = 0
    idle = (os.cpu_count() or allowed) - busy
    return max(1, min(allowed, idle))


def env_threads() -> int | None:
    """The thread count `OMP_NUM_THREADS` asks for (the variable torch's and BLAS's users set;
    its first number where it lists one per nesting level), or None where it is unset or empty.
    Refuses a value that is not a whole number >= 1, naming the variable."""
    text = os.environ.get("OMP_NUM_THREADS", "").strip()
    if not text:
        return None
    first = text.split(",")[0].strip()
    if not first.isdigit() or int(first) < 1:
        raise ConfigError(f"OMP_NUM_THREADS must be a whole number >= 1, got {text!r}")
    return int(first)


def require_threads(threads: int | None) -> None:
    """Refuse a thread count that is not None or a whole number >= 1."""
    if threads is not None and (
        isinstance(threads, bool) or not isinstance(threads, int) or threads < 1
    ):
        raise ConfigError(f"threads must be a whole number >= 1, got {threads!r}")


@contextmanager
def compute_threads(threads: int | None) -> Iterator[int]:
    """Run the block with `threads` threads in torch and the BLAS libraries (None: what
    `OMP_NUM_THREADS` asks for where it is set, else `default_threads`), and restore the counts
    they had after it; yields the count."""
    require_threads(threads)
    if threads is None:
        threads = env_threads() or default_threads()
    logger.info("computing with %d thread(s) (allowed cores: %d)", threads, allowed_cores())
    with _limited(threads):
        yield threads


@contextmanager
def _limited(threads: int) -> Iterator[None]:
    """torch's and the BLAS libraries' thread counts set to `threads` for the block, restored
    after it."""
    import torch
    from threadpoolctl import threadpool_limits

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with threadpool_limits(limits=threads):
            yield
    finally:
        torch.set_num_threads(before)


#: The threads of the job this process runs now: set by the executor that runs it
#: ([`job_threads`][dpdl.threads.job_threads]), one outside any.
_job_threads = 1


@contextmanager
def job_threads(threads: int | None = None) -> Iterator[int]:
    """Run one job of a grid with `threads` threads in torch and the BLAS libraries, restored
    after it. An executor gives the count (`--threads` of `dpdl sweep` and `dpdl reproduce`);
    the job's own function enters it again with None, the count of the job it runs in: so a job
    function computes on one thread when called directly, as on one worker of a default grid,
    and on the executor's count inside one. Yields the count."""
    global _job_threads
    count = _job_threads if threads is None else threads
    require_threads(count)
    before, _job_threads = _job_threads, count
    try:
        with _limited(count):
            yield count
    finally:
        _job_threads = before
