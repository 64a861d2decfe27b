"""Reproductions stated as sweep files (``examples/sweeps/NAME.toml``): each file makes the very
runs of the reproduction's grid and chooses what the reproduction's tuning chooses (checked on
made-up metrics, nothing trained), and ``dpdl reproduce NAME --from-sweep DIR`` writes, from a
sweep's ``runs.csv``, the report the reproduction's own analysis writes from its runs (checked on
the committed full runs)."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dpdl.errors import ConfigError
from dpdl.experiments.reproduce import (
    corn_mnist,
    report_of_sweep,
    whisper_logreg,
    whisper_quadratic,
)
from dpdl.experiments.reproduce.tradeoff import (
    _JOB_KEYS,
    config_of,
    final_jobs,
    summarise,
    tuning_jobs,
)
from dpdl.experiments.results import read_rows, write_rows
from dpdl.experiments.sweeps.spec import read_sweep, run_key
from dpdl.experiments.sweeps.tuning import final_runs, search_runs, settings
from dpdl.settings import to_options

ROOT = Path(__file__).resolve().parents[1]

#: Each sweep file, the study of the reproduction's part it states, and the metric it tunes on.
FILES = {
    "whisper-logreg": (whisper_logreg.study, "test_loss"),
    "corn-mnist": (corn_mnist.study, "test_accuracy"),
    "whisper-quadratic": (whisper_quadratic.study, "optimality_gap"),
}


def _options(job: dict[str, Any]) -> dict[str, Any]:
    return to_options(config_of(job))


def _made_up(options: dict[str, Any]) -> float:
    """A metric for a run, fixed by its options: distinct values, no ties."""
    return int(hashlib.sha256(run_key(options).encode()).hexdigest()[:12], 16) / 16**12


@pytest.mark.parametrize("name", FILES)
def test_a_reproductions_sweep_file_makes_its_runs_and_its_choices(name: str) -> None:
    study_of, metric = FILES[name]
    study = study_of(False)
    sweep = read_sweep(ROOT / "examples" / "sweeps" / f"{name}.toml")
    searched = {run_key(options) for options in search_runs(sweep)}
    tuning = tuning_jobs(study)
    assert searched == {run_key(_options(job)) for job in tuning}

    def lookup(options: dict[str, Any]) -> dict[str, float]:
        return {metric: _made_up(options)}

    rows = [job | lookup(_options(job)) for job in tuning]
    new = final_jobs(study, rows)
    rows += [job | lookup(_options(job)) for job in new]
    finals = {run_key(options) for options in final_runs(settings(sweep, lookup))}
    assert {run_key(_options(job)) for job in new} <= finals
    assert finals - {run_key(_options(job)) for job in new} <= searched
    points = sum(len(p.values) * len(p.methods) * len(study.calibrations) for p in study.panels)
    assert len(finals) == points * study.panels[0].training.seeds
    chosen = {}
    for setting in settings(sweep, lookup):
        options = setting.options
        where = (options["eps"], options["p"], options["mechanism"], options["calibration"])
        chosen[(setting.grid.label, *where)] = (options["lr"], options["clip"])
    for (label, x, method, calibration), point in summarise(study, rows).items():
        panel = next(p for p in study.panels if p.label == label)
        where = panel.settings(x, method)
        key = (label, float(where["eps"]), float(where["p"]), method, calibration)
        assert chosen[key] == (point.hyperparameters["lr"], point.hyperparameters["clip"])


def _as_sweep_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The papers'-protocol rows of a reproduction's runs.csv as ``dpdl sweep`` writes its rows."""
    converted = []
    for row in rows:
        options = _options(row)
        results = {key: value for key, value in row.items() if key not in _JOB_KEYS}
        converted.append({"point": run_key(options), **options, "seed": row["seed"], **results})
    return converted


@pytest.mark.parametrize("name", ["whisper-logreg", "corn-mnist"])
def test_a_report_from_a_sweeps_runs_is_the_reproductions_report(tmp_path, name: str) -> None:
    module = {"whisper-logreg": whisper_logreg, "corn-mnist": corn_mnist}[name]
    paper = [row for row in read_rows(ROOT / "results" / name / "runs.csv") if not row["protocol"]]
    write_rows(_as_sweep_rows(paper), tmp_path / "runs.csv")
    report = report_of_sweep(name, tmp_path).read_text()
    _, claims, notes = module.analyse(paper, tmp_path / "direct", False, parts=("paper",))
    assert claims and all(claim.measured in report for claim in claims)
    assert all(note.splitlines()[0] in report for note in notes)
    assert f"`dpdl sweep examples/sweeps/{name}.toml` (the part `paper`)" in report
    assert f"{len(paper)} runs" in report


def test_a_sweep_folder_that_misses_runs_is_one_error_naming_it(tmp_path) -> None:
    paper = [
        r for r in read_rows(ROOT / "results" / "corn-mnist" / "runs.csv") if not r["protocol"]
    ]
    write_rows(_as_sweep_rows(paper[:-1]), tmp_path / "runs.csv")
    with pytest.raises(ConfigError, match="lacks runs of corn-mnist's grid"):
        report_of_sweep("corn-mnist", tmp_path)
    with pytest.raises(ConfigError, match="has no sweep file to report on"):
        report_of_sweep("lppa", tmp_path)
    with pytest.raises(ConfigError, match=r"no runs\.csv here"):
        report_of_sweep("corn-mnist", tmp_path / "empty")


def test_reproduce_from_sweep_on_the_command_line(tmp_path) -> None:
    paper = [
        r for r in read_rows(ROOT / "results" / "corn-mnist" / "runs.csv") if not r["protocol"]
    ]
    write_rows(_as_sweep_rows(paper), tmp_path / "runs.csv")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "dpdl.cli",
            "reproduce",
            "corn-mnist",
            "--from-sweep",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "Reproduction: corn-mnist" in done.stdout
    assert (tmp_path / "REPORT.md").is_file() and (tmp_path / "test_accuracy.png").is_file()
