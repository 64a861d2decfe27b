"""Named reproductions of the papers' figures: `dpdl reproduce NAME`.

Each reproduction is a module behind `ReproductionModule`.
`reproduce` runs the grid through the cache (an interrupted run resumes, in either stage),
then writes `runs.csv`, the figures and `REPORT.md`, whose run line states the invocation's
wall time and the compute time its runs recorded
(`RUN_SECONDS`, summed); `redraw` draws a finished
reproduction's figures again from its `runs.csv` alone (the documentation site's figures),
`report_again` writes its figures and `REPORT.md` again from it (nothing is run),
`report_of_sweep` writes them from the runs of the reproduction's sweep file (`dpdl sweep
NAME`, run anywhere, on Ray too), for a module with a sweep file (`SWEEP`, and the parts
it states in `SWEEP_PARTS`), and `verdict_table` counts the reports' verdicts for the
README.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType, SimpleNamespace

from dpdl.errors import ConfigError
from dpdl.experiments.cache import RUN_SECONDS, run_jobs, scan_cache
from dpdl.experiments.executors import Executor
from dpdl.experiments.results import read_rows, write_rows
from dpdl_reproductions import (
    corn_mnist,
    decor_fig1,
    decor_search,
    dropouts,
    horizon_design,
    lppa_parameters,
    lppa_tables,
    mafalda_housing,
    mafalda_images,
    mafalda_pndp,
    strategies,
    whisper_logreg,
    whisper_quadratic,
    whisper_seeds,
    whisper_variance,
)
from dpdl_reproductions.report import verdict_table as _table
from dpdl_reproductions.report import write_report

__all__ = [
    "CATALOG",
    "REPRODUCTIONS",
    "WALL_TIME",
    "ModuleReproduction",
    "committed_wall_time",
    "redraw",
    "report_again",
    "report_of_sweep",
    "reproduce",
    "verdict_table",
]

REPRODUCTIONS: dict[str, ModuleType] = {
    module.NAME: module
    for module in (
        whisper_variance,
        whisper_seeds,
        whisper_quadratic,
        whisper_logreg,
        corn_mnist,
        decor_fig1,
        decor_search,
        mafalda_pndp,
        mafalda_housing,
        mafalda_images,
        lppa_tables,
        lppa_parameters,
        horizon_design,
        strategies,
        dropouts,
    )
}


#: The file beside a committed full run (``results/NAME/``) that holds the wall time measured when
#: its runs ran, for runs that predate the compute time each run now records: measured then, with
#: two worker processes on a shared two-core machine (BENCHMARKS.md). A report of runs that
#: recorded no compute time quotes it.
WALL_TIME = "wall_time.txt"


def committed_wall_time(out: Path) -> str | None:
    """The measured wall time of the full run committed in `out` (`WALL_TIME`), if any."""
    path = out / WALL_TIME
    return path.read_text().strip() if path.is_file() else None


#: How a report names the setting of a whole run.
FULL, QUICK = "full setting (the papers' grids)", "quick setting (fewer seeds and grid points)"


def _module(name: str) -> ModuleType:
    """The reproduction called `name`."""
    if name not in REPRODUCTIONS:
        raise ConfigError(
            f"unknown reproduction {name!r}; known: {', '.join(REPRODUCTIONS)} (see dpdl "
            "reproduce --list)"
        )
    return REPRODUCTIONS[name]


def _parts(
    name: str, module: ModuleType, parts: Sequence[str] | None
) -> dict[str, tuple[str, ...]]:
    """The `parts=` keyword for `module`'s functions (empty: the whole figure)."""
    if not parts:
        return {}
    known = getattr(module, "PARTS", ())
    if not known:
        raise ConfigError(f"reproduction {name!r} has no parts to choose from; run it whole")
    unknown = [part for part in parts if part not in known]
    if unknown:
        raise ConfigError(
            f"unknown part(s) {', '.join(unknown)} of {name}; known: {', '.join(known)}"
        )
    return {"parts": tuple(part for part in known if part in parts)}


def _cached(jobs: list[dict], cache: Path) -> int:
    """How many of `jobs` an earlier invocation already ran: their entries in `cache` are of
    this engine version and data (stale and unusable ones are run again, so they do not count)."""
    return len(scan_cache(jobs, cache).rows)


def reproduce(
    name: str,
    out: Path,
    quick: bool = False,
    workers: int | None = None,
    progress: bool = True,
    parts: Sequence[str] | None = None,
    executor: Executor | None = None,
) -> Path:
    """Run reproduction `name` (only `parts` of it, where it has parts) into `out`, its jobs
    on `executor` (default: `workers` local processes; `dpdl.experiments.executors`);
    returns the path of its REPORT.md."""
    module = _module(name)
    options = _parts(name, module, parts)
    start = time.perf_counter()
    cache = out / "cache"
    jobs = module.jobs(quick, **options)
    cached = _cached(jobs, cache)
    rows = run_jobs(jobs, module.run_job, cache, workers, progress, name, executor)
    if hasattr(module, "followup_jobs"):
        final = module.followup_jobs(quick, rows, **options)
        cached += _cached(final, cache)
        rows += run_jobs(
            final, module.run_job, cache, workers, progress, f"{name} (final)", executor
        )
    omitted = getattr(module, "CSV_OMITS", ())
    write_rows(
        [{key: value for key, value in row.items() if key not in omitted} for row in rows],
        out / "runs.csv",
    )
    figures, claims, notes = module.analyse(rows, out, quick, **options)
    command = f"dpdl reproduce {name}{' --quick' if quick else ''}" + (
        f" --parts {' '.join(options['parts'])}" if options else ""
    )
    whole = not quick and not options  # a whole run in the full setting, as committed
    run = _run_line(
        command,
        QUICK if quick else FULL,
        rows,
        cached,
        time.perf_counter() - start,
        committed_wall_time(out) if whole else None,
    )
    intro = f"{(module.__doc__ or '').strip()}\n\n{run}"
    return _write(name, module, out, intro, claims, figures, notes)


def _run_line(
    command: str,
    setting: str,
    rows: list[dict],
    cached: int = 0,
    wall: float | None = None,
    committed: str | None = None,
) -> str:
    """A report's run line: the command, its setting, how many runs (`cached` of them from the
    cache), the invocation's `wall` time (None: no invocation ran them, the report is written
    again), and the compute seconds summed over the runs that recorded theirs
    (`RUN_SECONDS`); where none did, the `committed`
    run's measured wall time."""
    timing = f"{len(rows)} runs"
    if cached:
        timing += (
            ", all cached by earlier invocations"
            if cached == len(rows)
            else f" ({cached} of them cached by an earlier invocation)"
        )
    if wall is not None:
        timing += f", {wall:.0f} s wall time"
    recorded = [row[RUN_SECONDS] for row in rows if row.get(RUN_SECONDS) is not None]
    if recorded:
        timing += f"; {sum(recorded):.0f} s of compute summed over the " + (
            "runs" if len(recorded) == len(rows) else f"{len(recorded)} runs that recorded it"
        )
        if len(recorded) == len(rows) and wall is None and committed is not None:
            timing += (
                "; wall time measured when they ran (on two cores, two worker processes unless "
                f"said): {committed}"
            )
        if len(recorded) < len(rows) and committed is not None:
            timing += (
                f"; the other {len(rows) - len(recorded)} predate recorded compute times; wall "
                "time measured when they ran (on two cores, two worker processes unless said): "
                f"{committed}"
            )
    elif committed is not None:
        timing += (
            "; the runs predate recorded compute times; wall time measured when they ran (on two "
            f"cores, two worker processes unless said): {committed}"
        )
    return f"Run: `{command}`, {setting}, {timing}. Raw runs: `runs.csv`."


def _write(
    name: str,
    module: ModuleType,
    out: Path,
    intro: str,
    claims: list,
    figures: list[Path],
    notes: list[str],
) -> Path:
    significance = getattr(
        module, "SIGNIFICANCE", ""
    )  # the test behind "ahead" in the claims, where they use one
    return write_report(
        out / "REPORT.md", f"Reproduction: {name}", intro, claims, figures, notes, significance
    )


def redraw(name: str, runs: Path, out: Path, quick: bool = False) -> list[Path]:
    """The figures of reproduction `name` drawn again into `out` from the `runs.csv` a whole
    run of it wrote (of its `quick` setting or not), by the same analysis as `reproduce`;
    nothing is run. Returns the figures' paths.

    A reproduction whose figures need fields that `runs.csv` leaves out (`CSV_OMITS`: LPPA's
    curves and reconstructions) can only be drawn from its cache, by `reproduce`.
    """
    module = _module(name)
    if getattr(module, "CSV_OMITS", ()):
        raise ConfigError(
            f"reproduction {name!r} draws fields that runs.csv leaves out "
            f"({', '.join(module.CSV_OMITS)}); run it to draw its figures"
        )
    out.mkdir(parents=True, exist_ok=True)
    figures, _, _ = module.analyse(read_rows(runs), out, quick)
    return figures


def report_again(name: str, out: Path) -> Path:
    """Write `out/REPORT.md` of reproduction `name` again, and its figures, from
    `out/runs.csv` of a whole run in its full setting (its analysis, claims and verdicts as the
    code now has them; nothing is run). The run line of the report it replaces (command, runs,
    wall time and compute time) is kept, except for runs that recorded no compute time: their
    line quotes the committed run's measured wall time (`committed_wall_time`), and so does
    the line of runs only some of which recorded it (a part added later), beside their sum, and
    the line of a table whose runs are no longer those the kept line counts and sums (runs added
    or replaced since). A reproduction whose figures need fields `runs.csv` leaves out keeps the
    figures its run drew."""
    module = _module(name)
    again = " Report written again from `runs.csv`."
    rows = read_rows(out / "runs.csv")
    run = next(
        line.removesuffix(again)
        for line in (out / "REPORT.md").read_text().splitlines()
        if line.startswith("Run: `")
    )
    counted = re.search(r", (\d+) runs", run)
    summed = re.search(r"; (\d+) s of compute summed", run)
    recorded = f"{sum(row[RUN_SECONDS] for row in rows if row.get(RUN_SECONDS) is not None):.0f}"
    committed = committed_wall_time(out)
    if committed is not None and (
        any(row.get(RUN_SECONDS) is None for row in rows)
        or counted is None
        or int(counted.group(1)) != len(rows)
        or summed is None
        or summed.group(1) != recorded
    ):
        run = _run_line(f"dpdl reproduce {name}", FULL, rows, committed=committed)
    figures, claims, notes = module.analyse(rows, out, False)
    intro = f"{(module.__doc__ or '').strip()}\n\n{run}{again}"
    return _write(name, module, out, intro, claims, figures, notes)


def report_of_sweep(name: str, folder: Path, quick: bool = False, out: Path | None = None) -> Path:
    """Write `REPORT.md` of reproduction `name`, and its figures, into `out` (default
    `folder/report`, beside the sweep's own summary and figures, whose names the report's
    figures share) from the runs that `dpdl sweep NAME` (with `--quick` for `quick`) wrote
    into `folder`: the module's sweep file (its `SWEEP`; the parts of a figure with parts
    that the file states, `SWEEP_PARTS`), analysed by the reproduction's own code, claims and
    verdicts; nothing is run. The run line states the sweep's runs and what its last invocation
    cost (`timing.json`). A folder whose runs do not cover the reproduction's grid (another
    file, or one changed) is a [`ConfigError`][dpdl.errors.ConfigError] naming a missing run."""
    module = _module(name)
    flag = " --quick" if quick else ""
    sweep = getattr(module, "SWEEP", None)
    if sweep is None:
        stated = [key for key, value in REPRODUCTIONS.items() if hasattr(value, "SWEEP")]
        raise ConfigError(
            f"reproduction {name!r} has no sweep file to report on; those that have: "
            f"{', '.join(stated)}"
        )
    if not (folder / "runs.csv").is_file():
        raise ConfigError(f"{folder}: no runs.csv here; run 'dpdl sweep FILE --out {folder}'")
    sweep_rows = read_rows(folder / "runs.csv")
    try:
        rows = sweep.rows(sweep_rows)
    except KeyError as column:
        raise ConfigError(
            f"{folder}/runs.csv is not the table of a sweep (no column {column}); run 'dpdl sweep "
            f"{name}{flag} --out {folder}'"
        ) from None
    parts = getattr(module, "SWEEP_PARTS", ())
    out = folder / "report" if out is None else out
    out.mkdir(parents=True, exist_ok=True)
    try:
        figures, claims, notes = module.analyse(
            rows, out, quick, **({"parts": parts} if parts else {})
        )
    except KeyError as missing:
        raise ConfigError(
            f"{folder}/runs.csv lacks runs of {name}'s {'quick ' if quick else ''}grid, e.g. "
            f"{missing}; run 'dpdl sweep {name}{flag} --out {folder}' as it is"
        ) from None
    timing_file = folder / "timing.json"
    timing = json.loads(timing_file.read_text()) if timing_file.is_file() else {}
    cost = (
        f", {timing['wall_seconds']:.0f} s wall time for its last invocation, "
        f"{timing['compute_seconds']:.0f} s of compute summed over the "
        f"{timing['runs_with_compute_seconds']} runs that invocation ran or read"
        if timing
        else ""
    )
    failed = sum(bool(row.get("error")) for row in sweep_rows)
    stated = (
        f" (the part{'s' if len(parts) > 1 else ''} {', '.join(f'`{part}`' for part in parts)})"
        if parts
        else ""
    )
    run = (
        f"Run: `dpdl sweep {name}{flag}`{stated}, then `dpdl reproduce {name}{flag} --from-sweep "
        f"DIR`, {QUICK if quick else FULL}, {len(rows)} runs"
        + (f" ({failed} more failed)" if failed else "")
        + f"{cost}. Raw runs: `{os.path.relpath(folder / 'runs.csv', out)}`."
    )
    intro = f"{(module.__doc__ or '').strip()}\n\n{run}"
    return _write(name, module, out, intro, claims, figures, notes)


def verdict_table(results: Path) -> str:
    """The README's table of verdicts: how many claims of each kind every reproduction's
    `results/NAME/REPORT.md` states."""
    return _table(results, list(REPRODUCTIONS))


@dataclass(frozen=True)
class ModuleReproduction:
    """A reproduction module as `dpdl.experiments.reproduction.Reproduction`: what `dpdl
    reproduce NAME` runs (`reproduce`, `report_of_sweep`), registered by
    `dpdl_reproductions.plugin`."""

    module: ModuleType

    @property
    def name(self) -> str:
        return self.module.NAME

    @property
    def summary(self) -> str:
        return (self.module.__doc__ or "").strip().splitlines()[0]

    @property
    def parts(self) -> tuple[str, ...]:
        return tuple(getattr(self.module, "PARTS", ()))

    @property
    def sweep_parts(self) -> tuple[str, ...] | None:
        if not hasattr(self.module, "SWEEP"):
            return None
        return tuple(getattr(self.module, "SWEEP_PARTS", ()))

    def reproduce(
        self,
        out: Path,
        *,
        quick: bool = False,
        parts: Sequence[str] | None = None,
        executor: Executor | None = None,
        progress: bool = True,
    ) -> Path:
        return reproduce(self.name, out, quick, None, progress, parts, executor)

    def report_of_sweep(
        self, folder: Path, *, quick: bool = False, out: Path | None = None
    ) -> Path:
        return report_of_sweep(self.name, folder, quick, out)


#: Every reproduction by its module's name (the targets that
#: :mod:`dpdl_reproductions.plugin` registers).
CATALOG = SimpleNamespace(
    **{
        module.__name__.rsplit(".", 1)[1]: ModuleReproduction(module)
        for module in REPRODUCTIONS.values()
    }
)
