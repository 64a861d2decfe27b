"""`dpdl sweep`: a grid of training runs from a TOML sweep file or a reproduction's name, run
locally or on Ray (`dpdl.experiments.sweeps`), or shown with `--dry-run`."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from dpdl.cli.options import (
    add_executor_arguments,
    add_output_arguments,
    add_tensorboard_argument,
    claimed_output,
    executor_from,
)
from dpdl.errors import ConfigError, DivergenceError

#: The failed points a sweep names at its end (all are rows of runs.csv with their error).
SHOWN_FAILURES = 10

if TYPE_CHECKING:
    from dpdl.experiments.sweeps.spec import Sweep


def sweep_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "sweep",
        help="run a grid of training runs from a TOML sweep file, locally or on Ray",
        description="Expand the sweep file's grid ([base]: the options of 'dpdl train --config'; "
        "[sweep]: lists crossed, 'zip' pairs lists, 'tune' names the metric a step-size search "
        "tunes), run every point not already stored in DIR/points, and write DIR/runs.csv (one "
        "row per run), DIR/summary.csv (t intervals over seeds) and a figure per metric, and print "
        "the answer (DIR/table.md, DIR/answer.png: the task's metric per setting, each mechanism "
        "tested against the best at its eps over paired seeds). An interrupted sweep resumes; "
        "see docs/sweeps.md.",
    )
    parser.add_argument(
        "file",
        type=Path,
        help="sweep file (TOML), e.g. examples/sweeps/a9a-eps.toml, or the name of a reproduction "
        "that has one (its runs: dpdl sweep whisper-logreg; see dpdl reproduce --list)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="with a reproduction's name: the sweep of its --quick setting",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="check the file whole (every key, resource, point, search and recorded curve, the "
        "size and the time estimated), print the grid, its size and the estimate; run nothing",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="fix an option (replacing its axis), sweep.KEY=[...] to set an axis, or "
        "tune.KEY=VALUE to set a key of every search (tune.seeds=1); VALUE a TOML literal; "
        "repeatable",
    )
    add_executor_arguments(parser, "jobs")
    add_output_arguments(parser, None, "results/sweeps/<file name>", None)
    add_tensorboard_argument(parser, "each run's metrics, in DIR/<point>/seed<s>")
    parser.set_defaults(handler=_sweep)


def _sweep(args: argparse.Namespace) -> int:
    from dpdl.experiments.sweeps.spec import named_sweep_file, read_sweep

    path, name = args.file, args.file.stem
    # a registered sweep's name, unless a file stands there (a FIFO or a device is refused by name)
    if path.suffix != ".toml" and (not path.exists() or path.is_dir()):
        path = named_sweep_file(str(args.file), args.quick)
        name += "-quick" if args.quick else ""
    elif args.quick:
        raise ConfigError(f"--quick: applies to a reproduction's name, not to the file {path}")
    sweep = read_sweep(path, args.set)
    parallel = args.jobs or max(1, (os.cpu_count() or 1) // max(args.threads or 1, 1))
    if args.dry_run:
        _dry_run(sweep, parallel)
        return 0
    from dpdl.experiments.sweeps.run import run_sweep

    out = args.out or Path("results") / "sweeps" / name
    # the sweep is named by its file: the same file into its folder again (interrupted, or with
    # points added or changed) is a continuation that reuses the finished points; another sweep's
    # folder is refused
    with (
        claimed_output(args, out, "sweep", {"sweep": name}),
        executor_from(args, sweep.cpus, sweep.gpus, sweep.memory) as executor,
    ):
        result = run_sweep(
            sweep,
            out,
            executor,
            progress=not args.no_progress,
            label=name,
            tensorboard=args.tensorboard,
            parallel=parallel,
        )
    for what, written in result.paths.items():
        print(f"{what}: {written}", file=sys.stderr)
    if "table" in result.paths:  # the answer: the primary metric per setting, the paired tests
        print(result.paths["table"].read_text())
    errors = [row["error"] for row in result.rows if row.get("error")]
    for row in [row for row in result.rows if row.get("error")][:SHOWN_FAILURES]:
        print(f"point {row['point']} failed: {row['error']}", file=sys.stderr)
    print(f"{len(result.rows)} runs, {result.failed} failed; results: {out}")
    if errors and all(error.startswith(DivergenceError.__name__) for error in errors):
        # every failure a run that diverged: the sweep file was good, its settings were not
        return DivergenceError.exit_status
    return 1 if result.failed else 0


#: An axis of more values than this is shown by its first ones and its length.
SHOWN_VALUES = 12


def _dry_run(sweep: Sweep, parallel: int) -> None:
    """Check the sweep whole (`dpdl.experiments.sweeps.check`), then print its grids, its
    searches, the estimate and the number of runs."""
    from dpdl.experiments.sweeps.check import check_sweep, describe
    from dpdl.experiments.sweeps.spec import DEFAULT

    checked = check_sweep(sweep, parallel)

    def shown(value: object) -> str:
        """A value as the file writes it (an unset option as the file's "default")."""
        return json.dumps(DEFAULT if value is None else value)

    for grid in sweep.grids:
        if len(sweep.grids) > 1:
            fixed = ", ".join(f"{key} = {shown(value)}" for key, value in grid.fixed)
            print(f"[[sweep]] {grid.label}" + (f" ({fixed})" if fixed else ""))
        for axis in grid.axes:
            if axis.keys:
                values = [
                    "/".join(shown(value) for value in position)
                    for position in axis.values[:SHOWN_VALUES]
                ]
                more = len(axis.values) - SHOWN_VALUES
                print(
                    f"{' + '.join(axis.keys)} ({len(axis.values)}): {', '.join(values)}"
                    + (f", ... ({more} more)" if more > 0 else "")
                )
        if grid.tune is not None:
            tune = grid.tune
            print(
                f"tune: {tune.goal} {tune.metric} over {', '.join(tune.over)}"
                + (f", on the first {tune.seeds} seed(s)" if tune.seeds else "")
                + (
                    " at " + ", ".join(f"{key} = {shown(value)}" for key, value in tune.at)
                    if tune.at
                    else ""
                )
            )
    print(describe(checked, parallel))
    print(
        f"{checked.runs} runs, then each setting's choice on every seed"
        if checked.staged
        else f"{checked.runs} runs"
    )
