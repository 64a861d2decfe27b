"""Running a reproduction's grid: parallel processes, a cache that makes interrupted runs resume.

A job is a JSON-able dict; its result is cached as ``<cache>/<sha256 of the job>.json``, so a
finished job is never run again and a rerun after an interruption picks up where it stopped.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from dpdl.processes import worker_context

__all__ = ["job_key", "run_jobs"]

Job = dict[str, Any]

#: A pool of w workers runs at most ``w * MAX_JOBS_PER_WORKER`` jobs before it is replaced by a fresh
#: one, so whatever a long run accumulates in one process
#: (allocator fragmentation, caches) stays bounded: a full corn-mnist run lost a worker to the
#: out-of-memory killer at 11.5 GB after about 60 jobs. A fresh pool per chunk of jobs, because
#: ``max_tasks_per_child`` deadlocks on Python 3.11-3.14 (CPython gh-115634: no replacement worker).
MAX_JOBS_PER_WORKER = 16


def job_key(job: Job) -> str:
    """Stable name of a job: the SHA-256 of its canonical JSON."""
    return hashlib.sha256(json.dumps(job, sort_keys=True).encode()).hexdigest()[:24]


def run_jobs(
    jobs: list[Job],
    run_job: Callable[[Job], dict[str, Any]],
    cache: Path,
    workers: int | None = None,
    progress: bool = True,
    label: str = "jobs",
) -> list[dict[str, Any]]:
    """Results of ``run_job`` for every job (job fields merged in), in the order of ``jobs``.

    ``run_job`` must be a module-level function (it runs in worker processes).
    """
    cache.mkdir(parents=True, exist_ok=True)
    results: dict[str, dict[str, Any]] = {}
    pending = []
    for job in jobs:
        path = cache / f"{job_key(job)}.json"
        if path.is_file():
            results[job_key(job)] = json.loads(path.read_text())
        else:
            pending.append(job)
    workers = max(1, min(workers or os.cpu_count() or 1, len(pending) or 1))
    bar = tqdm(total=len(jobs), initial=len(jobs) - len(pending), desc=label, unit="job", disable=None if progress else True)
    chunk = workers * MAX_JOBS_PER_WORKER
    for start in range(0, len(pending), chunk):
        with ProcessPoolExecutor(max_workers=workers, mp_context=worker_context()) as pool:
            futures = {pool.submit(run_job, job): job for job in pending[start : start + chunk]}
            for future in as_completed(futures):
                job = futures[future]
                result = {**job, **future.result()}
                (cache / f"{job_key(job)}.json").write_text(json.dumps(result))
                results[job_key(job)] = result
                bar.update()
    bar.close()
    return [results[job_key(job)] for job in jobs]
