"""The run cache: a grid of jobs (a sweep's, a reproduction's) run on an executor, each result
cached as it comes back, so that an interrupted run resumes.

The jobs run on an executor (`dpdl.experiments.executors`: processes here, or Ray); each
result is cached the moment it comes back, so whatever finished before an interruption is kept.

A job is a JSON-able dict; its result is cached as `<cache>/<job_key(job)>.json`, so a finished
job is never run again and a rerun after an interruption picks up where it stopped.

A cache entry is used only if it is what this code would compute now. Beside the job, the numbers
depend on the engine (`dpdl.simulation.ENGINE_VERSION`) and on the data files read
(`data_fingerprint`), so an entry is JSON holding its whole key and a checksum:

```text
{"format": "dpdl-cache-entry", "version": 1,
 "key": {"job": ..., "engine": ENGINE_VERSION, "data": data_fingerprint()},
 "row": {...the job's fields and its results...}, "sha256": "<of key and row>"}
```

Each row computed records the seconds its job took in its worker (`RUN_SECONDS`): a cost,
not a result, so it is in the row and never in the key.

An entry made under another engine version or other data is *stale*; a file that is not such an
entry, whole and unaltered (truncated, empty, edited, of another type or another job) is
*unusable*. Both are logged with their paths, counted in the progress label and run again: never
used, never mixed with new results, never a traceback. Entries are written atomically
(`dpdl.files.atomic_write`), so an interrupted run leaves whole entries only.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache, partial
from importlib import resources
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from dpdl.data.paths import data_roots, manifest
from dpdl.errors import DpdlError
from dpdl.experiments.executors import Executor, ExecutorOptions, LocalExecutor
from dpdl.files import atomic_write, file_sha256
from dpdl.jobspec import ENGINE_VERSION

__all__ = [
    "RUN_SECONDS",
    "CacheScan",
    "JobsFailed",
    "data_fingerprint",
    "job_key",
    "run_jobs",
    "scan_cache",
]

Job = dict[str, Any]

logger = logging.getLogger(__name__)

#: Name and version of the entry layout above.
FORMAT, FORMAT_VERSION = "dpdl-cache-entry", 1

#: The field of a result row holding the seconds ``run_job`` took on its job, measured in the
#: worker that ran it (rows cached before it was recorded have none).
RUN_SECONDS = "run_seconds"


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def job_key(job: Job) -> str:
    """Stable name of a job's cache file: the SHA-256 of its canonical JSON (first 24 hex
    digits)."""
    return hashlib.sha256(_canonical(job).encode()).hexdigest()[:24]


@cache
def _content_digest(path: str, size: int, mtime_ns: int) -> str:
    """SHA-256 of a file, remembered per (path, size, modification time) within a process."""
    return file_sha256(Path(path))


def _digest_of(path: Path) -> str:
    stat = path.stat()
    return _content_digest(str(path), stat.st_size, stat.st_mtime_ns)


def data_fingerprint() -> str:
    """SHA-256 (hex) of the contents of every data file a job can read: the files bundled in the
    `dpdl.data` package, and every file of the manifest as the loaders resolve it in the data
    roots (`dpdl.data.paths.data_roots`: `DPDL_DATA_DIR`, then the user cache; the first
    layout found, recorded as absent where there is none), by relative name.

    Deliberately coarse: a job's data is not declared anywhere, so every job is keyed by all of
    it, and a data set fetched, replaced or swapped for a slice makes every entry stale. Cheap:
    about 50 MB hashed once per process, then remembered while files keep their size and
    modification time."""
    bundled = Path(str(resources.files("dpdl.data")))
    described: dict[str, Any] = {
        "bundled": {
            p.relative_to(bundled).as_posix(): _digest_of(p) for p in sorted(bundled.rglob("*.gz"))
        },
        "data": {},
    }
    roots = [root for _, root in data_roots()]
    for dataset in manifest().values():
        for entry in dataset["files"]:
            layouts = [entry["path"], *(alt["path"] for alt in entry.get("alternatives", []))]
            found = next(
                (
                    root / layout
                    for root in roots
                    for layout in layouts
                    if (root / layout).is_file()
                ),
                None,
            )
            described["data"][entry["path"]] = None if found is None else _digest_of(found)
    return hashlib.sha256(_canonical(described).encode()).hexdigest()


def _cache_key(job: Job, data: str) -> dict[str, Any]:
    """Everything an entry's numbers depend on: the job (as JSON gives it back), the engine, the
    data."""
    return {"job": json.loads(_canonical(job)), "engine": ENGINE_VERSION, "data": data}


def _digest(key: dict[str, Any], row: dict[str, Any]) -> str:
    return hashlib.sha256(_canonical({"key": key, "row": row}).encode()).hexdigest()


def _write_entry(path: Path, key: dict[str, Any], row: dict[str, Any]) -> None:
    entry = {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "key": key,
        "row": row,
        "sha256": _digest(key, row),
    }
    atomic_write(path, json.dumps(entry).encode())


def _read_entry(path: Path, key: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None, bool]:
    """`(row, None, False)` for an entry of `key`; else `(None, why, stale)`: `stale` when
    the file is an entry of the same job under another engine version or data."""
    try:
        entry = json.loads(path.read_bytes())
    except (
        OSError,
        ValueError,
        RecursionError,
    ) as error:  # ValueError: empty, truncated, not UTF-8; RecursionError: nested too deep
        return None, f"not JSON ({error})", False
    if not isinstance(entry, dict):
        return None, f"a JSON {type(entry).__name__}, not an entry", False
    if "format" not in entry and "sha256" not in entry:
        return None, "written before cache entries recorded their engine version and data", True
    if entry.get("format") != FORMAT or entry.get("version") != FORMAT_VERSION:
        return (
            None,
            f"format {entry.get('format')!r} version {entry.get('version')!r}, expected "
            f"{FORMAT!r} {FORMAT_VERSION}",
            False,
        )
    saved, row = entry.get("key"), entry.get("row")
    if (
        not isinstance(saved, dict)
        or not isinstance(row, dict)
        or entry.get("sha256") != _digest(saved, row)
    ):
        return None, "fails its checksum (edited or torn)", False
    if saved.get("job") != key["job"]:
        return None, "the entry of another job", False
    if saved.get("engine") != key["engine"]:
        return None, f"made by engine version {saved.get('engine')}, this is {key['engine']}", True
    if saved.get("data") != key["data"]:
        return None, "made from other data files", True
    return row, None, False


@dataclass
class CacheScan:
    """What the cache holds for a list of jobs: the usable rows by `job_key`, the jobs to
    run, and the files found stale or unusable (path and why)."""

    rows: dict[str, dict[str, Any]] = field(default_factory=dict)
    pending: list[Job] = field(default_factory=list)
    stale: list[tuple[Path, str]] = field(default_factory=list)
    unusable: list[tuple[Path, str]] = field(default_factory=list)


def scan_cache(jobs: list[Job], cache: Path, data: str | None = None) -> CacheScan:
    """Sort `jobs` into cached (an entry of this job, engine and `data`, default
    `data_fingerprint`) and pending; reads, never writes or logs."""
    data = data_fingerprint() if data is None else data
    scan = CacheScan()
    for job in jobs:
        path = cache / f"{job_key(job)}.json"
        row, why, stale = (
            _read_entry(path, _cache_key(job, data)) if path.is_file() else (None, None, False)
        )
        if row is not None:
            scan.rows[job_key(job)] = row
            continue
        scan.pending.append(job)
        if why is not None:
            (scan.stale if stale else scan.unusable).append((path, why))
    return scan


def _timed(run_job: Callable[[Job], dict[str, Any]], job: Job) -> dict[str, Any]:
    """`run_job(job)` with the seconds it took as its `RUN_SECONDS` field (run in the
    worker, so only the job's own time counts, not its wait in the queue)."""
    start = time.perf_counter()
    result = run_job(job)
    return {**result, RUN_SECONDS: round(time.perf_counter() - start, 3)}


class JobsFailed(DpdlError):
    """Jobs of a grid failed (the others' results are cached): the message names each, with why."""


def run_jobs(
    jobs: list[Job],
    run_job: Callable[[Job], dict[str, Any]],
    cache: Path,
    workers: int | None = None,
    progress: bool = True,
    label: str = "jobs",
    executor: Executor | None = None,
    keep_going: bool = False,
) -> list[dict[str, Any]]:
    """Results of `run_job` for every job (job fields merged in), in the order of `jobs`:
    from the cache where it holds an entry of the job under this engine and data, else computed by
    `executor` (default: a `LocalExecutor` of `workers`
    processes, every core by default) and cached as each finishes. Stale and unusable entries are
    logged (a warning each, with its path) and run again. Each row computed here records the
    seconds its job took (`RUN_SECONDS`).

    A job that fails is logged and the others go on; then `JobsFailed` is raised at the end,
    or, with `keep_going`, the failed job's row is the job with its `error` (and it is not
    cached, so the next run tries it again). `run_job` must be a module-level function (it runs
    in other processes).
    """
    cache.mkdir(parents=True, exist_ok=True)
    data = data_fingerprint()
    scan = scan_cache(jobs, cache, data)
    for path, why in scan.stale:
        logger.warning("%s: stale cache entry (%s); running it again", path, why)
    for path, why in scan.unusable:
        logger.warning("%s: unusable cache entry (%s); running it again", path, why)
    if scan.stale or scan.unusable:
        label = f"{label} (rerun: {len(scan.stale)} stale, {len(scan.unusable)} unusable)"
        logger.warning("%s", label)
    results, pending = scan.rows, scan.pending
    logger.info(
        "%s: %d of %d jobs from the cache %s; %d to run",
        label,
        len(jobs) - len(pending),
        len(jobs),
        cache,
        len(pending),
    )
    bar = tqdm(
        total=len(jobs),
        initial=len(jobs) - len(pending),
        desc=label,
        unit="job",
        disable=None if progress else True,
    )
    failed: dict[str, str] = {}
    running = executor or LocalExecutor(ExecutorOptions(workers))  # the caller closes its own
    for outcome in running.map(partial(_timed, run_job), pending) if pending else ():
        key = job_key(outcome.job)
        if outcome.result is None:
            logger.error("%s: job %s failed: %s", label, key, outcome.error)
            failed[key] = str(outcome.error)
        else:
            result = {**outcome.job, **outcome.result}
            _write_entry(cache / f"{key}.json", _cache_key(outcome.job, data), result)
            results[key] = result
            logger.debug("%s: done, cached in %s", key, cache)
        bar.update()
    bar.close()
    if failed and not keep_going:
        raise JobsFailed(
            f"{label}: {len(failed)} of {len(jobs)} jobs failed (the others are cached; run again "
            "to retry): " + "; ".join(f"{key}: {why}" for key, why in failed.items())
        )
    return [
        results[job_key(job)] if job_key(job) in results else {**job, "error": failed[job_key(job)]}
        for job in jobs
    ]
