"""What a reproduction module is: the interface `reproduce` runs.

A reproduction is a module (a Python module satisfies a `Protocol` by its
attributes, PEP 544) that defines `NAME`, `jobs(quick)` (its grid as JSON-able jobs),
`run_job(job)` (one grid point, run in a worker process) and `analyse(rows, out, quick)` (the
figures, the claims and the notes of its `REPORT.md`). Optional attributes, read where present:

- `followup_jobs(quick, rows)`: a module that tunes before it measures, the jobs chosen from the
  first stage's rows;
- `PARTS`: the parts of a figure worth running alone (`--parts`); the functions then take
  `parts=`;
- `CSV_OMITS`: bulky fields of a run (images, curves) kept in the cache and given to
  `analyse` but left out of `runs.csv`;
- `SIGNIFICANCE`: the statistical test behind "ahead" in the claims, printed under their table;
- `SWEEP` (a `SweepJobs`) and `SWEEP_PARTS`: a figure
  whose runs a sweep file states (`dpdl sweep NAME`), and the parts it states.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from dpdl_reproductions.report import Claim

__all__ = ["ReproductionModule"]

Job = dict[str, Any]


@runtime_checkable
class ReproductionModule(Protocol):
    """The attributes every reproduction module defines (the optional ones: the module's
    docstring)."""

    #: The name ``dpdl reproduce`` takes.
    NAME: str

    def jobs(self, quick: bool) -> list[Job]:
        """The grid of the `quick` setting or the full one, as JSON-able jobs."""
        ...

    def run_job(self, job: Job) -> dict[str, Any]:
        """One grid point: the job's fields and its results (run in a worker process)."""
        ...

    def analyse(
        self, rows: list[dict[str, Any]], out: Path, quick: bool
    ) -> tuple[list[Path], list[Claim], list[str]]:
        """The figures drawn into `out`, the claims with their verdicts, and the notes."""
        ...
