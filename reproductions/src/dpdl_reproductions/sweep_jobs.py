"""A reproduction's runs read from its sweep file: the file states the grid, the search and the
seeds (`dpdl sweep NAME` runs the same file anywhere, on Ray too), this module turns its two
stages into the reproduction's jobs, and the reproduction's analysis writes the report.

The file (`grid_file`, `quick/NAME.toml` for
`--quick`) is read by the sweeps' own code, and each stage is theirs
(`dpdl.experiments.sweeps.tuning`: the search's runs, then each setting's choice on every
seed); each run becomes the job of the reproduction's own form (by default the trade-off figures',
`job_of`), which its `run_job` trains, so a
reproduction's cache and `runs.csv` keep their form. A file that sets an option the jobs do not
carry (say `delta`) is refused: its runs would not be the file's. The other way,
`SweepJobs.rows` reads the rows of `dpdl sweep`'s `runs.csv` as the rows of those jobs,
for the reproduction's analysis (`dpdl reproduce NAME --from-sweep DIR`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from dpdl.errors import ConfigError
from dpdl.experiments.sweeps.spec import Grid, Sweep, read_sweep, run_key
from dpdl.experiments.sweeps.tuning import final_runs, search_runs, settings
from dpdl.jobspec.config import TrainConfig
from dpdl.settings import to_options
from dpdl_reproductions import tradeoff
from dpdl_reproductions.grids import grid_file
from dpdl_reproductions.tradeoff import Job, unique_jobs

__all__ = ["SweepJobs"]


@dataclass(frozen=True)
class SweepJobs:
    """The jobs of reproduction `name`'s sweep file, run by a `run_job` of `version`: a run's
    options (its one seed as a number, as in a row of the sweep's `runs.csv`) become a job by
    `job_of(options, version)`, and `config_of(job)` is the training configuration that
    `run_job` runs for it (the trade-off figures' by default). The rows of these jobs are
    those whose `protocol` field is among `protocols` (`""`: none).

    A figure with parts names each grid's part by the value its grid fixes of option
    `part_option` (decor-fig1: its `task`), through `part_names` (`None`: the value is
    the part's name), or, where no one option tells its parts apart, by the grid's `label`
    through `part_labels` (mafalda-housing)."""

    name: str
    version: int = tradeoff.VERSION
    job_of: Callable[[Mapping[str, Any], int], Job] = tradeoff.job_of
    config_of: Callable[[Job], TrainConfig] = tradeoff.config_of
    protocols: frozenset[str] = frozenset({""})
    part_option: str | None = None
    part_names: Mapping[Any, str] | None = None
    part_labels: Mapping[str, str] | None = None

    def sweep(self, quick: bool, parts: Sequence[str] | None = None) -> Sweep:
        """The file of the `quick` setting or the full one; with `parts`, only its grids of
        those parts."""
        sweep = read_sweep(grid_file(self.name, quick))
        if parts is None:
            return sweep
        if self.part_labels is not None:
            return replace(sweep, grids=self._grids_of_labels(sweep, parts))
        if self.part_option is None:
            raise ConfigError(f"the sweep file of {self.name} states no parts")
        option = self.part_option
        default = to_options(TrainConfig()).get(option)
        of_grid = []
        for grid in sweep.grids:
            if option in grid.swept:
                raise ConfigError(
                    f"the sweep file of {self.name}: a grid of a figure whose parts are named by "
                    f"its {option} fixes its {option} (one value, not an axis)"
                )
            value = dict(grid.fixed).get(option, sweep.base.get(option, default))
            if self.part_names is not None and value not in self.part_names:
                raise ConfigError(
                    f"the sweep file of {self.name}: a grid's {option} {value!r} names no part "
                    f"(those that do: {', '.join(map(str, self.part_names))})"
                )
            of_grid.append(value if self.part_names is None else self.part_names[value])
        grids = tuple(
            grid for grid, part in zip(sweep.grids, of_grid, strict=True) if part in parts
        )
        return replace(sweep, grids=grids)

    def _grids_of_labels(self, sweep: Sweep, parts: Sequence[str]) -> tuple[Grid, ...]:
        """The grids of `sweep` whose labels name one of `parts` (`part_labels`)."""
        assert self.part_labels is not None
        unnamed = [grid.label for grid in sweep.grids if grid.label not in self.part_labels]
        if unnamed:
            raise ConfigError(
                f"the sweep file of {self.name}: the grid labelled {unnamed[0]!r} names no part "
                f"(the labels that do: {', '.join(map(repr, self.part_labels))})"
            )
        return tuple(grid for grid in sweep.grids if self.part_labels[grid.label] in parts)

    def _job(self, options: dict[str, Any]) -> Job:
        (seed,) = options["seed"]
        job = self.job_of({**options, "seed": seed}, self.version)
        again = to_options(self.config_of(job))
        lost = sorted(key for key in options if again.get(key) != options[key])
        if lost:
            raise ConfigError(
                f"the sweep file of {self.name} sets {', '.join(lost)}, which its jobs do not "
                f"carry (a run of {options})"
            )
        return job

    def jobs(self, sweep: Sweep) -> list[Job]:
        """The first stage: every run of the file's searches (and of its grids without one)."""
        return unique_jobs([self._job(options) for options in search_runs(sweep)])

    def followup_jobs(self, sweep: Sweep, rows: list[dict[str, Any]]) -> list[Job]:
        """The second stage: each setting's choice, by the first stage's `rows` (the jobs' fields
        and results), on every seed; those `rows` hold already are left out."""
        by_run: dict[str, dict[str, Any]] = {}
        for row in rows:  # those of this file's jobs (not another protocol's, nor version's)
            if (row.get("protocol") or "") in self.protocols:
                options = to_options(self.config_of(row))
                one_seed = {**options, "seed": options["seed"][0]}
                if row.get("version") == self.job_of(one_seed, self.version).get("version"):
                    by_run.setdefault(run_key(options), row)

        def lookup(options: dict[str, Any]) -> dict[str, Any] | None:
            return by_run.get(run_key(options))

        final = [(options, self._job(options)) for options in final_runs(settings(sweep, lookup))]
        return unique_jobs([job for options, job in final if run_key(options) not in by_run])

    def rows(self, sweep_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """A sweep's runs (the rows of `dpdl sweep`'s `runs.csv`) as the rows of these jobs:
        each run's job fields and its results, and the steps it ran where its job does not state
        them (a length in epochs resolves to them; the reproduction's rows record them), so that
        the reproduction's own analysis reads them. Failed runs are left out."""
        options = set(to_options(TrainConfig()))
        rows = []
        for row in sweep_rows:
            if row.get("error"):
                continue
            job = self.job_of(row, self.version)
            results = {
                key: value
                for key, value in row.items()
                if key not in options and key not in ("point", "error")
            }
            rows.append({"steps": row["steps"]} | job | results)
        return rows
