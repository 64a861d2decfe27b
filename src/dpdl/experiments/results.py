"""Writing results: a training job's folder (config JSON, metrics CSV, final JSON, figure), rows as
CSV (and reading them back), JSON with non-finite numbers (`dpdl.files.json_safe`,
re-exported here), and the mark of a run that diverged (`FAILED.json`, in place of
`final.json`: `dpdl.files.write_failure`, re-exported here).

The commands that write JSON or CSV alone (`dpdl noise`, `audit`, `factorize`) import this
module too, so matplotlib is imported by `write_results`, which draws the figure.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dpdl.files import (
    FAILED,
    atomic_write,
    clear_failure,
    json_safe,
    read_regular,
    refuse_failed_resume,
    write_failure,
)

if TYPE_CHECKING:
    from dpdl.experiments.train import TrainResult

__all__ = [
    "FAILED",
    "clear_failure",
    "dropout_files",
    "json_safe",
    "read_rows",
    "refuse_failed_resume",
    "write_failure",
    "write_results",
    "write_rows",
]


def write_results(result: TrainResult, folder: Path) -> dict[str, Path]:
    """Write `config.json`, `metrics.csv`, `final.json` and `<metric>.png` into
    `folder`, and with dropouts the rounds the agents missed (`dropout_files`)."""
    from dpdl.experiments.plots import plot_curves

    folder.mkdir(parents=True, exist_ok=True)
    config = {
        "config": result.config.as_dict(),
        "task": result.task,
        "calibration": result.calibration.as_dict() if result.calibration else None,
        "seeds": [
            {
                "seed": run.seed,
                "graph": run.graph,
                "mechanism": run.mechanism,
                "trace_WRW": run.trace_wrw,
                "privacy": [report.as_dict() for report in run.privacy],
                **({} if run.dropouts is None else {"dropouts": run.dropouts.describe()}),
                **(
                    {}
                    if run.design_privacy is None
                    else {"design_privacy": [report.as_dict() for report in run.design_privacy]}
                ),
            }
            for run in result.runs
        ],
    }
    paths = {
        "config": folder / "config.json",
        "metrics": folder / "metrics.csv",
        "final": folder / "final.json",
    }
    paths["config"].write_text(json.dumps(json_safe(config), indent=2) + "\n")
    keys = list(result.runs[0].history[0])
    with paths["metrics"].open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["seed", *keys])
        for run in result.runs:
            for record in run.history:
                writer.writerow([run.seed, *(record[key] for key in keys)])
    paths["final"].write_text(json.dumps(json_safe(result.summary()), indent=2) + "\n")
    for seed, path in dropout_files(result, folder).items():
        schedule = next(run.dropouts for run in result.runs if run.seed == seed)
        assert schedule is not None
        schedule.write(path)
        paths[f"dropouts{seed}"] = path
    metric = result.primary_metric
    paths["figure"] = plot_curves(
        {result.config.mechanism: [run.history for run in result.runs]},
        metric,
        folder / f"{metric}.png",
        f"{result.config.task} on {result.config.graph} (n={result.runs[0].graph['nodes']}), "
        f"eps={result.config.eps:g}",
        log_y=metric == "optimality_gap",
    )
    return paths


def dropout_files(result: TrainResult, folder: Path) -> dict[int, Path]:
    """By seed, the file in `folder` of the rounds its agents missed, which
    `--dropout-schedule` reads back (a replay of the realized dropouts): `dropouts.csv` for one
    seed, `dropouts-seed<s>.csv` for each of several; none without dropouts."""
    runs = [run for run in result.runs if run.dropouts is not None]
    if len(runs) == 1:
        return {runs[0].seed: folder / "dropouts.csv"}
    return {run.seed: folder / f"dropouts-seed{run.seed}.csv" for run in runs}


def write_rows(rows: list[dict[str, Any]], path: Path) -> Path:
    """All rows as CSV (columns: the union of the rows' keys, in first-seen order), written
    atomically (`dpdl.files.atomic_write`): a reader, or another run writing the same
    table, sees a whole table, never a torn one."""
    columns: list[str] = []
    for row in rows:
        columns += [key for key in row if key not in columns]
    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=columns)
    writer.writeheader()
    writer.writerows(rows)
    atomic_write(path, text.getvalue().encode())
    return path


def _cell(text: str) -> Any:
    """A CSV cell of `write_rows` as the value it was: None (empty), a bool, an int, a float
    (`inf` and `nan` included), or else the string."""
    if text == "":
        return None
    if text in ("True", "False"):
        return text == "True"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def read_rows(path: Path) -> list[dict[str, Any]]:
    """The rows `write_rows` wrote, with their values' types: an int stays an int and a float
    a float (Python writes a float with a point or an exponent), so a row's fields key the same
    job as before (a reproduction's analysis finds its runs in `runs.csv`). A row's missing
    fields, empty cells, come back as None. A path that is not a regular file (a FIFO, a device,
    a folder) is a [`ConfigError`][dpdl.errors.ConfigError] naming it."""
    table = read_regular(Path(path), "results table").decode("utf-8")
    rows = csv.DictReader(io.StringIO(table, newline=""))
    return [{key: _cell(text) for key, text in row.items()} for row in rows]
