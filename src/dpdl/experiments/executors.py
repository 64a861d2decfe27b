"""Where the points of a grid run: one interface, two executors.

An executor takes a module-level function and a list of JSON-able jobs and yields one
`Outcome` per job as the jobs finish, in whatever order they finish; it never raises for a
job that failed (the outcome carries the error), so one crashed point does not end a grid. The
caching, the progress bar and the table are the caller's (`dpdl.experiments.cache.run_jobs`),
so `dpdl sweep` and `dpdl reproduce` run their grids the same way on either executor.

- `LocalExecutor` (`local`, the default): worker processes on this machine, started from
  the fork server that preloads dpdl and torch (`dpdl.processes.worker_context`). A worker
  that dies (killed, out of memory, a crash in native code) breaks its whole pool; the jobs that
  pool had not finished are then run again one per process, so only the job that kills its
  process fails.
- `RayExecutor` (`ray`, the extra `dpdl[ray]`): each job a Ray task declaring its CPUs
  and GPUs; `ray.init()` starts a Ray on this machine, or joins the cluster at `address`.

Both are registered in `dpdl.choices.EXECUTORS`; `open_executor` builds one by name.
"""

from __future__ import annotations

import logging
import multiprocessing.context
import os
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, as_completed, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol

from dpdl.choices import EXECUTORS
from dpdl.errors import ConfigError
from dpdl.optional import require
from dpdl.processes import worker_context
from dpdl.threads import allowed_cores, job_threads, require_threads

__all__ = [
    "Executor",
    "ExecutorOptions",
    "LocalExecutor",
    "Outcome",
    "RayExecutor",
    "open_executor",
    "require_workers_fit",
]

Job = dict[str, Any]
RunJob = Callable[[Job], dict[str, Any]]

logger = logging.getLogger(__name__)

#: A pool of w workers runs at most ``w * MAX_JOBS_PER_WORKER`` jobs before it is replaced by a
#: fresh one, so whatever a long run accumulates in one process
#: (allocator fragmentation, caches) stays bounded: a full corn-mnist run lost a worker to the
#: out-of-memory killer at 11.5 GB after about 60 jobs. A fresh pool per chunk of jobs, because
#: ``max_tasks_per_child`` deadlocks on Python 3.11-3.14 (CPython gh-115634: no replacement worker).
MAX_JOBS_PER_WORKER = 16

#: What a job whose process died reports.
DIED = "its worker process died (killed, out of memory, or a crash in native code)"


@dataclass(frozen=True)
class Outcome:
    """One finished job: its result, or (`result` None) why it failed."""

    job: Job
    result: dict[str, Any] | None
    error: str | None = None


@dataclass(frozen=True)
class ExecutorOptions:
    """How an executor runs jobs: `workers` at once at most on this machine (default: every
    core, divided by `threads`; `--jobs`), the Ray cluster to join (`address`; None: a Ray
    started here), what each job declares to Ray (`cpus`, `gpus`, `memory` in bytes: None
    declares none), and the threads torch and
    the BLAS libraries compute each job with (`threads`, `--threads`: one by default, the jobs
    themselves filling the cores). A thread count that is not a whole number >= 1 is refused
    here, before any job runs."""

    workers: int | None = None
    address: str | None = None
    cpus: float = 1.0
    gpus: float = 0.0
    threads: int = 1
    memory: float | None = None

    def __post_init__(self) -> None:
        require_threads(self.threads)


class Executor(Protocol):
    """Runs jobs somewhere, each on `threads` threads; a context manager, closed when the grid
    is done."""

    threads: int

    def map(self, run_job: RunJob, jobs: list[Job]) -> Iterator[Outcome]:
        """One outcome per job of `jobs`, as each finishes. `run_job` must be a module-level
        function or a `functools.partial` of one (it runs in other processes, maybe on other
        machines)."""
        ...

    def close(self) -> None: ...

    def __enter__(self) -> Executor: ...

    def __exit__(self, *exc: object) -> None: ...


def _threaded(run_job: RunJob, threads: int, job: Job) -> dict[str, Any]:
    """`run_job(job)` with `threads` threads in torch and the BLAS libraries
    (`dpdl.threads.job_threads`), in the process that runs it."""
    with job_threads(threads):
        return run_job(job)


def _call(run_job: RunJob, job: Job) -> dict[str, Any]:
    """`run_job(job)`: the one function a Ray task is made of, whatever callable `run_job` is
    (`ray.remote` takes functions only, not partials)."""
    return run_job(job)


def _context(run_job: RunJob) -> multiprocessing.context.BaseContext:
    """The workers' start method, their fork server preloading the modules of `run_job`'s
    functions (through `functools.partial`: the cache's timing wrapper and the job's own)."""
    return worker_context(*dict.fromkeys(_modules(run_job)))


def _modules(function: Any) -> list[str]:
    if isinstance(function, partial):
        inner = [part for part in (function.func, *function.args) if callable(part)]
        return [module for part in inner for module in _modules(part)]
    module = getattr(function, "__module__", None)
    return [module] if isinstance(module, str) else []


def _why(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


class _Closing:
    def __enter__(self) -> _Closing:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Release what the executor holds (nothing, unless it started something)."""


class LocalExecutor(_Closing):
    """Worker processes on this machine (see the module's docstring)."""

    def __init__(self, options: ExecutorOptions) -> None:
        if options.address is not None:
            raise ConfigError("--address names a Ray cluster: it needs --executor ray")
        self.workers = options.workers
        self.threads = options.threads
        cores = allowed_cores()
        if self.workers is not None and self.workers * self.threads > cores:
            logger.warning(
                "%d workers of %d threads each: %d threads on the %d cores this process may use "
                "(their thread pools will compete; fewer --jobs or --threads run faster)",
                self.workers,
                self.threads,
                self.workers * self.threads,
                cores,
            )

    def map(self, run_job: RunJob, jobs: list[Job]) -> Iterator[Outcome]:
        default = max(1, (os.cpu_count() or 1) // self.threads)
        workers = max(1, min(self.workers or default, len(jobs) or 1))
        require_workers_fit(workers)
        run_job = partial(_threaded, run_job, self.threads)
        chunk = workers * MAX_JOBS_PER_WORKER
        for start in range(0, len(jobs), chunk):
            orphans = yield from _pooled(run_job, jobs[start : start + chunk], workers)
            if orphans:
                logger.warning(
                    "a worker process died; running the %d jobs its pool left one per process",
                    len(orphans),
                )
                yield from _isolated(run_job, orphans, workers)


def require_workers_fit(workers: int) -> None:
    """Refuse, before any is started, `workers` worker processes that this machine cannot hold:
    each a python with torch and dpdl
    ([`AGENT_PROCESS_BYTES`][dpdl.jobspec.costs.AGENT_PROCESS_BYTES], before its points' own
    memory), within the processes and open files the system allows."""
    from dpdl.jobspec.costs import AGENT_PROCESS_BYTES, WORKERS_ADVICE, require_processes_fit
    from dpdl.jobspec.resources import Estimate, require_fits
    from dpdl.scale import format_bytes

    what = f"{workers:,} worker processes (--jobs)"
    name = f"{workers:,} worker processes (python, torch and dpdl, "
    terms = {name + f"{format_bytes(AGENT_PROCESS_BYTES)} each)": workers * AGENT_PROCESS_BYTES}
    require_fits(Estimate(terms), what, log=False, advice=WORKERS_ADVICE)
    require_processes_fit(workers, what)


def _pooled(run_job: RunJob, jobs: list[Job], workers: int) -> Iterator[Outcome]:
    """Outcomes of `jobs` run in one pool; returns the jobs left unfinished by a broken pool."""
    orphans = []
    with ProcessPoolExecutor(max_workers=workers, mp_context=_context(run_job)) as pool:
        futures = {pool.submit(run_job, job): job for job in jobs}
        for future in as_completed(futures):
            try:
                result = future.result()
            except BrokenProcessPool:
                orphans.append(futures[future])
                continue
            except Exception as error:  # the job's own failure, pickled back by the pool
                yield Outcome(futures[future], None, _why(error))
                continue
            yield Outcome(futures[future], result)
    return orphans


def _isolated(run_job: RunJob, jobs: list[Job], workers: int) -> Iterator[Outcome]:
    """Outcomes of `jobs`, each in a process of its own (`workers` at once), so a job that
    kills its process fails alone."""
    queue = list(jobs)
    running: dict[Future, tuple[Job, ProcessPoolExecutor]] = {}
    try:
        while queue or running:
            while queue and len(running) < workers:
                pool = ProcessPoolExecutor(max_workers=1, mp_context=_context(run_job))
                job = queue.pop(0)
                running[pool.submit(run_job, job)] = (job, pool)
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                job, pool = running.pop(future)
                pool.shutdown()
                try:
                    yield Outcome(job, future.result())
                except BrokenProcessPool:
                    yield Outcome(job, None, DIED)
                except Exception as error:
                    yield Outcome(job, None, _why(error))
    finally:
        for _, pool in running.values():
            pool.shutdown(wait=False, cancel_futures=True)


class RayExecutor(_Closing):
    """Each job a Ray task declaring `cpus` and `gpus`; on the cluster at `address`, else on
    a Ray started here with `workers` CPUs (every core by default) and shut down on
    `close`. A Ray already initialised in this process (a test's, a notebook's) is used as it
    is and left running."""

    def __init__(self, options: ExecutorOptions) -> None:
        self.ray = require("ray", "ray", "the Ray executor (--executor ray)")
        self.options = options
        self.threads = options.threads
        if options.threads > options.cpus:
            logger.warning(
                "each job computes with %d threads but declares %g CPU(s) to Ray: set cpus = %d "
                "in the sweep file's [resources] so that Ray does not put more on a node than "
                "its cores",
                options.threads,
                options.cpus,
                options.threads,
            )
        self.started = not self.ray.is_initialized()
        if self.started:
            try:
                self.ray.init(
                    address=options.address or "local",  # "local": a new Ray, not one running
                    num_cpus=options.workers if options.address is None else None,
                    include_dashboard=False,
                    logging_level=logging.WARNING,
                )
            except Exception as error:  # Ray's own errors: connection, authentication, resources
                where = f"join the Ray cluster at {options.address}" if options.address else ""
                raise ConfigError(f"cannot {where or 'start a Ray here'}: {_why(error)}") from None
        logger.info("Ray cluster resources: %s", self.ray.cluster_resources())

    def map(self, run_job: RunJob, jobs: list[Job]) -> Iterator[Outcome]:
        ray = self.ray
        memory = {} if self.options.memory is None else {"memory": int(self.options.memory)}
        task = ray.remote(
            num_cpus=self.options.cpus, num_gpus=self.options.gpus, max_retries=0, **memory
        )(_call)
        run_job = partial(_threaded, run_job, self.threads)
        waiting = {task.remote(run_job, job): job for job in jobs}
        try:
            while waiting:
                done, _ = ray.wait(list(waiting), num_returns=1)
                for ref in done:
                    job = waiting.pop(ref)
                    try:
                        yield Outcome(job, ray.get(ref))
                    except ray.exceptions.RayTaskError as error:  # the job raised
                        yield Outcome(job, None, _why(error.cause or error))
                    except ray.exceptions.RayError as error:  # its worker or node died
                        yield Outcome(job, None, f"{DIED}: {_why(error)}")
        finally:
            for ref in waiting:
                ray.cancel(ref, force=True)

    def close(self) -> None:
        if self.started:
            self.ray.shutdown()
            self.started = False


def open_executor(name: str, options: ExecutorOptions | None = None) -> Executor:
    """The executor registered as `name` (`dpdl.choices.EXECUTORS`), set up with
    `options`."""
    return EXECUTORS.get(name)(options or ExecutorOptions())
