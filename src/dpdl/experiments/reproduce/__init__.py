"""Named reproductions of the papers' figures: ``dpdl reproduce NAME``.

Each reproduction module defines ``NAME``, ``jobs(quick)`` (its grid as JSON-able jobs),
``run_job(job)`` (one grid point, run in a worker process) and ``analyse(rows, out, quick)``
(figures, claims and notes); a module that tunes before it measures also defines
``followup_jobs(quick, rows)``, the jobs chosen from the first stage's rows. :func:`reproduce`
runs the grid through the cache (an interrupted run resumes, in either stage), then writes
``runs.csv``, the figures and ``REPORT.md``.
"""

from __future__ import annotations

import time
from pathlib import Path
from types import ModuleType

from dpdl.errors import ConfigError
from dpdl.experiments.reproduce import corn_mnist, decor_fig1, whisper_logreg, whisper_quadratic, whisper_seeds, whisper_variance
from dpdl.experiments.reproduce.report import write_report, write_rows
from dpdl.experiments.reproduce.runner import run_jobs

__all__ = ["REPRODUCTIONS", "reproduce"]

REPRODUCTIONS: dict[str, ModuleType] = {
    module.NAME: module for module in (whisper_variance, whisper_seeds, whisper_quadratic, whisper_logreg, corn_mnist, decor_fig1)
}


def reproduce(name: str, out: Path, quick: bool = False, workers: int | None = None, progress: bool = True) -> Path:
    """Run reproduction ``name`` into ``out``; returns the path of its REPORT.md."""
    if name not in REPRODUCTIONS:
        raise ConfigError(f"unknown reproduction {name!r}; known: {', '.join(REPRODUCTIONS)} (see dpdl reproduce --list)")
    module = REPRODUCTIONS[name]
    start = time.perf_counter()
    rows = run_jobs(module.jobs(quick), module.run_job, out / "cache", workers, progress, label=name)
    if hasattr(module, "followup_jobs"):
        rows += run_jobs(module.followup_jobs(quick, rows), module.run_job, out / "cache", workers, progress, label=f"{name} (final)")
    write_rows(rows, out / "runs.csv")
    figures, claims, notes = module.analyse(rows, out, quick)
    setting = "quick setting (fewer seeds and grid points)" if quick else "full setting (the papers' grids)"
    intro = (
        f"{(module.__doc__ or '').strip()}\n\nRun: `dpdl reproduce {name}{' --quick' if quick else ''}`, {setting}, "
        f"{len(rows)} runs, {time.perf_counter() - start:.0f} s wall time. Raw runs: `runs.csv`."
    )
    return write_report(out / "REPORT.md", f"Reproduction: {name}", intro, claims, figures, notes)
