"""Named reproductions of the papers' figures: ``dpdl reproduce NAME``.

Each reproduction module defines ``NAME``, ``jobs(quick)`` (its grid as JSON-able jobs),
``run_job(job)`` (one grid point, run in a worker process) and ``analyse(rows, out, quick)``
(figures, claims and notes); a module that tunes before it measures also defines
``followup_jobs(quick, rows)``, the jobs chosen from the first stage's rows; a module whose figure
has parts that are worth running alone names them in ``PARTS`` and takes ``parts=`` in all three
functions; a module whose runs return bulky fields (images, curves) names them in ``CSV_OMITS``:
they stay in the cache and reach ``analyse`` but not ``runs.csv``; a module whose claims compare
methods over seeds names the statistical test in ``SIGNIFICANCE``, printed under the claims
table. :func:`reproduce`
runs the grid through the cache (an interrupted run resumes, in either stage), then writes
``runs.csv``, the figures and ``REPORT.md``; :func:`redraw` draws a finished reproduction's
figures again from its ``runs.csv`` alone (the documentation site's figures), :func:`report_again`
writes its figures and ``REPORT.md`` again from it (nothing is run), and :func:`verdict_table`
counts the reports' verdicts for the README.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

from dpdl.errors import ConfigError
from dpdl.experiments.executors import Executor
from dpdl.experiments.reproduce import (
    corn_mnist,
    decor_fig1,
    decor_search,
    horizon_design,
    lppa_tables,
    mafalda_housing,
    mafalda_images,
    mafalda_pndp,
    whisper_logreg,
    whisper_quadratic,
    whisper_seeds,
    whisper_variance,
)
from dpdl.experiments.reproduce.report import verdict_table as _table
from dpdl.experiments.reproduce.report import write_report
from dpdl.experiments.reproduce.runner import run_jobs, scan_cache
from dpdl.experiments.results import read_rows, write_rows

__all__ = ["REPRODUCTIONS", "redraw", "report_again", "reproduce", "verdict_table"]

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
        horizon_design,
    )
}


def _module(name: str) -> ModuleType:
    """The reproduction called ``name``."""
    if name not in REPRODUCTIONS:
        raise ConfigError(
            f"unknown reproduction {name!r}; known: {', '.join(REPRODUCTIONS)} (see dpdl "
            "reproduce --list)"
        )
    return REPRODUCTIONS[name]


def _parts(
    name: str, module: ModuleType, parts: Sequence[str] | None
) -> dict[str, tuple[str, ...]]:
    """The ``parts=`` keyword for ``module``'s functions (empty: the whole figure)."""
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
    """How many of ``jobs`` an earlier invocation already ran: their entries in ``cache`` are of
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
    """Run reproduction ``name`` (only ``parts`` of it, where it has parts) into ``out``, its jobs
    on ``executor`` (default: ``workers`` local processes; :mod:`dpdl.experiments.executors`);
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
    setting = (
        "quick setting (fewer seeds and grid points)"
        if quick
        else "full setting (the papers' grids)"
    )
    command = f"dpdl reproduce {name}{' --quick' if quick else ''}" + (
        f" --parts {' '.join(options['parts'])}" if options else ""
    )
    if cached == len(rows):
        timing = (
            f"{len(rows)} runs, all cached by earlier invocations (their wall time is in "
            "BENCHMARKS.md)"
        )
    else:
        reused = f" ({cached} of them cached by an earlier invocation)" if cached else ""
        timing = f"{len(rows)} runs{reused}, {time.perf_counter() - start:.0f} s wall time"
    intro = (
        f"{(module.__doc__ or '').strip()}\n\nRun: `{command}`, {setting}, {timing}. Raw runs: "
        "`runs.csv`."
    )
    return _write(name, module, out, intro, claims, figures, notes)


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
    """The figures of reproduction ``name`` drawn again into ``out`` from the ``runs.csv`` a whole
    run of it wrote (of its ``quick`` setting or not), by the same analysis as :func:`reproduce`;
    nothing is run. Returns the figures' paths.

    A reproduction whose figures need fields that ``runs.csv`` leaves out (``CSV_OMITS``: LPPA's
    curves and reconstructions) can only be drawn from its cache, by :func:`reproduce`.
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
    """Write ``out/REPORT.md`` of reproduction ``name`` again, and its figures, from
    ``out/runs.csv`` of a whole run in its full setting (its analysis, claims and verdicts as the
    code now has them; nothing is run). The run line of the report it replaces (command, runs,
    wall time) is kept; a reproduction whose figures need fields ``runs.csv`` leaves out keeps the
    figures its run drew."""
    module = _module(name)
    again = " Report written again from `runs.csv`."
    run = next(
        line.removesuffix(again)
        for line in (out / "REPORT.md").read_text().splitlines()
        if line.startswith("Run: `")
    )
    figures, claims, notes = module.analyse(read_rows(out / "runs.csv"), out, False)
    intro = f"{(module.__doc__ or '').strip()}\n\n{run}{again}"
    return _write(name, module, out, intro, claims, figures, notes)


def verdict_table(results: Path) -> str:
    """The README's table of verdicts: how many claims of each kind every reproduction's
    ``results/NAME/REPORT.md`` states."""
    return _table(results, list(REPRODUCTIONS))
