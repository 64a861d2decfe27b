"""`dpdl train`: train one model by private D-SGD and write a results folder, with the
options that replay the run (`config.toml`)."""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import sys
from pathlib import Path
from typing import Any

from dpdl import __version__
from dpdl.cli.options import (
    add_device_argument,
    add_options_file_arguments,
    add_output_arguments,
    add_tensorboard_argument,
    add_training_arguments,
    claimed_output,
    output_folder,
)
from dpdl.errors import ConfigError, DivergenceError
from dpdl.jobspec.config import TrainConfig
from dpdl.settings import from_options, to_options


def train_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "train",
        help="train one model by private D-SGD and write a results folder",
        description="Train by D-SGD with privacy noise; writes config.toml (every option, to "
        "replay the run with --config), config.json, metrics.csv, final.json and a figure.",
    )
    add_training_arguments(parser)
    add_device_argument(parser)
    add_output_arguments(parser, None, "results/train/<job name>", "the final metrics")
    parser.add_argument(
        "--save-models",
        action="store_true",
        help="also write every agent's final model and their average, as state dicts in "
        "safetensors files with a manifest, in models/seed<s>/ (read back by dpdl.load_models)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        metavar="N",
        help="threads torch and BLAS compute with (default: OMP_NUM_THREADS where it is set, "
        "else the cores this process may use that the machine's other work leaves idle)",
    )
    add_checkpoint_arguments(parser)
    add_tensorboard_argument(parser, "every seed's metrics, in DIR/seed<s>")
    add_options_file_arguments(parser)
    parser.set_defaults(handler=_train, parser=parser)


def add_checkpoint_arguments(parser: argparse.ArgumentParser) -> None:
    """`--checkpoint-every` and `--resume`."""
    group = parser.add_argument_group("checkpoints (continue an interrupted run)")
    group.add_argument(
        "--checkpoint-every",
        type=int,
        default=None,
        metavar="N",
        help="save each seed's state in OUT/checkpoints every N steps (default: at each "
        "evaluation, at most once a minute; 0: no checkpoints); a seed is also saved when it "
        "finishes, and the folder is removed once the results are written",
    )
    group.add_argument(
        "--resume",
        action="store_true",
        help="continue the run of --out (or of the default folder) from its checkpoints: seeds "
        "finished are kept, the others go on from their last checkpoint, and the results equal "
        "an uninterrupted run's bit for bit; the options must be the run's own (a checkpoint of "
        "other options is refused, naming what differs)",
    )


def _train(args: argparse.Namespace) -> int:
    from dpdl.experiments.results import (
        clear_failure,
        json_safe,
        refuse_failed_resume,
        write_failure,
        write_results,
    )
    from dpdl.experiments.saved_models import save_training_models
    from dpdl.experiments.train import RunCheckpoints
    from dpdl.threads import require_threads

    require_threads(args.threads)
    if args.checkpoint_every is not None and args.checkpoint_every < 0:
        raise ConfigError(f"--checkpoint-every: expected N >= 0 steps, got {args.checkpoint_every}")
    if args.resume and args.overwrite:
        raise ConfigError("--resume continues the run in --out, which --overwrite clears")
    if args.resume and args.checkpoint_every == 0:
        raise ConfigError(
            "--resume: continues from checkpoints, which --checkpoint-every 0 turns off"
        )

    # the budget the noise is calibrated to: none without noise or under gradient tracking
    budget = f"-eps{args.eps:g}"
    if args.mechanism == "none" or args.algorithm == "dsgt":
        budget = ""
    elif args.gdp_mu is not None:
        budget = f"-mu{args.gdp_mu:g}"
    name = (
        f"{args.task}-{args.mechanism}-{args.graph.replace(':', '_').replace('/', '_')}"
        f"{budget}-seed{'_'.join(map(str, args.seed))}"
    )
    folder = output_folder(args.out or Path("results") / "train" / name)
    checkpoints = (
        None
        if args.checkpoint_every == 0
        else RunCheckpoints(folder / "checkpoints", args.checkpoint_every, args.resume)
    )
    config = from_options(TrainConfig, args)
    if args.resume:
        refuse_failed_resume(folder)
    with claimed_output(args, folder, "train"):
        try:
            result = _run(args, config, checkpoints)
        except DivergenceError as error:  # the run happened and failed: its folder says so
            print(f"failed: {write_failure(folder, error)}", file=sys.stderr)
            raise
        clear_failure(folder)  # of an earlier run this one replaces
        paths = write_results(result, folder)
        _write_options(args, result.config, folder)
        if args.save_models:
            for saved in save_training_models(result, folder):
                print(f"models: {saved}", file=sys.stderr)
        if checkpoints is not None:  # the results are written: nothing is left to resume
            shutil.rmtree(checkpoints.folder, ignore_errors=True)
    summary = result.summary()
    metric = result.primary_metric
    print(f"results: {folder}", file=sys.stderr)
    for run in result.runs:
        if run.resumed_from is not None:
            done = "finished before" if run.resumed_from == result.config.steps else "resumed"
            print(
                f"seed {run.seed}: {done} (checkpoint at step {run.resumed_from} of "
                f"{result.config.steps})",
                file=sys.stderr,
            )
    for run in result.runs:
        if run.dropouts is not None:
            print(f"seed {run.seed}: {run.dropouts.summary()}", file=sys.stderr)
    for report in result.runs[0].privacy:
        print(f"privacy: {report}", file=sys.stderr)
    for report in result.released_together():
        print(
            f"privacy of the {len(result.runs)} seeds' results released together (they train on "
            f"the same data): {report}",
            file=sys.stderr,
        )
    if not result.runs[0].privacy:
        print(
            "privacy: none accounted (gradient tracking's injection is not calibrated to a "
            "budget; 'dpdl audit' attacks it)",
            file=sys.stderr,
        )
    print(f"{metric}: {summary[metric]:.6g} (figure {paths['figure']})", file=sys.stderr)
    if result.config.average_last:
        print(
            f"{metric}, mean over the last {result.config.average_last} iterates: "
            f"{summary[f'{metric}_tail']:.6g}",
            file=sys.stderr,
        )
    if args.json:
        print(json.dumps(json_safe(summary)))
    return 0


def _run(args: argparse.Namespace, config: TrainConfig, checkpoints: Any) -> Any:  # noqa: ANN401 (RunCheckpoints, TrainingResult: imported late)
    """Train `config` as `args` say, with `checkpoints` (None: none)."""
    from dpdl.experiments.tensorboard import SeedLogs
    from dpdl.experiments.train import run_training
    from dpdl.files import folder_lock
    from dpdl.threads import compute_threads

    with compute_threads(args.threads), contextlib.ExitStack() as stack:
        if checkpoints is not None:  # two runs resuming one folder would overwrite each other
            stack.enter_context(folder_lock(checkpoints.folder, "training run"))
        logs = None
        if args.tensorboard is not None:
            logs = stack.enter_context(SeedLogs(args.tensorboard))
        return run_training(config, not args.no_progress, args.device, checkpoints, logs)


def _write_options(args: argparse.Namespace, config: TrainConfig, folder: Path) -> None:
    """`folder/config.toml`: every option of the run, the settings as the run resolved them (the
    task's step size and schedule filled in), so `dpdl train --config` on it replays the run."""
    from dpdl.experiments.replay import dump_options

    values = {**vars(args), **to_options(config)}
    header = [
        f"dpdl train options of the run written to {folder} (dpdl {__version__}); replay it with",
        f"  dpdl train --config {folder / 'config.toml'} --out OTHER_FOLDER [--set KEY=VALUE ...]",
    ]
    (folder / "config.toml").write_text(dump_options(args.parser, values, header))
