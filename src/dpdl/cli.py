"""The ``dpdl`` command line: ``dpdl train``, ``dpdl demo`` (``dpdl <command> --help`` for each).

Bad input ends with one ``dpdl: error: ...`` line on stderr and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from dpdl import __version__
from dpdl.accounting import CALIBRATIONS
from dpdl.errors import DpdlError
from dpdl.graphs import MIXING_RULES, REAL_GRAPHS, SYNTHETIC_GRAPHS
from dpdl.simulation import CLIP_LEVELS, SCHEDULES
from dpdl.tasks import TASKS, TaskOptions
from dpdl.tasks.partition import PARTITIONS

__all__ = ["main", "build_parser"]


class _Parser(argparse.ArgumentParser):
    """ArgumentParser whose usage errors are one line, like every other dpdl error."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"dpdl: error: {message} (see '{self.prog} --help')\n")


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def add_graph_arguments(parser: argparse.ArgumentParser) -> None:
    """Options that choose the communication graph and its mixing matrix."""
    group = parser.add_argument_group("graph")
    group.add_argument(
        "--graph",
        default="er",
        help=f"topology: one of {', '.join(SYNTHETIC_GRAPHS)}; a real graph ({', '.join(REAL_GRAPHS)}); "
        "or edgelist:PATH (integer node ids, one edge per line). Default: er",
    )
    group.add_argument("--n", type=_positive_int, default=20, help="number of agents for synthetic graphs (default 20)")
    group.add_argument("--p", type=float, default=0.5, help="Erdos-Renyi edge probability (default 0.5)")
    group.add_argument(
        "--mixing", choices=list(MIXING_RULES), default="metropolis-hastings", help="mixing rule (default metropolis-hastings)"
    )


def add_budget_arguments(parser: argparse.ArgumentParser) -> None:
    """Options that set the privacy budget and how it is calibrated."""
    group = parser.add_argument_group("privacy")
    group.add_argument("--eps", type=float, default=10.0, help="target epsilon (default 10)")
    group.add_argument("--delta", type=float, default=1e-5, help="target delta (default 1e-5)")
    group.add_argument("--steps", type=_positive_int, default=5000, help="number of D-SGD steps T (default 5000)")
    group.add_argument("--clip", type=float, default=0.1, help="clipping threshold C (default 0.1)")
    group.add_argument(
        "--calibration",
        choices=CALIBRATIONS,
        default="exact",
        help="exact: Gaussian-DP accountant, never above the target; paper: the papers' closed form "
        "[R^-1]_ii <= eps^2/(16 C^2 T log(1/delta)) (default exact)",
    )


def _train_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "train",
        help="train one model by private D-SGD and write a results folder",
        description="Train by D-SGD with privacy noise; writes config.json, metrics.csv, final.json and a figure.",
    )
    parser.add_argument("--task", choices=TASKS, default="logreg-a9a", help="learning task (default logreg-a9a)")
    parser.add_argument("--mechanism", default="ldp", help="noise mechanism: none, ldp, cdp (default ldp)")
    add_graph_arguments(parser)
    add_budget_arguments(parser)
    group = parser.add_argument_group("training")
    group.add_argument("--clip-level", choices=CLIP_LEVELS, default="agent", help="agent: clip each agent's batch gradient; "
                       "example: clip each example's gradient, Poisson batches, example-level PLD accounting (default agent)")
    group.add_argument("--batch-size", type=_positive_int, default=128, help="batch size per agent (default 128)")
    group.add_argument("--lr", type=float, default=None, help="step size eta (default: the task's, 0.1 for logreg-a9a)")
    group.add_argument("--schedule", choices=SCHEDULES, default=None, help="step-size schedule (default: the task's)")
    group.add_argument("--seed", type=int, nargs="+", default=[0], help="one or more seeds; each is a full replicate (default 0)")
    group.add_argument("--eval-every", type=_positive_int, default=100, help="evaluate every k steps (default 100)")
    group = parser.add_argument_group("data")
    group.add_argument("--partition", choices=PARTITIONS, default="dirichlet", help="how data are split over agents (default dirichlet)")
    group.add_argument("--alpha", type=float, default=10.0, help="Dirichlet concentration (default 10)")
    group.add_argument("--labels-per-agent", type=_positive_int, default=1, help="classes per agent for labels-per-agent")
    group.add_argument("--l2", type=float, default=1e-3, help="L2 regularisation of logistic regression (default 1e-3)")
    group.add_argument("--dim", type=_positive_int, default=10, help="dimension of the least-squares task (default 10)")
    group = parser.add_argument_group("output")
    group.add_argument("--out", type=Path, default=None, help="results folder (default results/train/<job name>)")
    group.add_argument("--json", action="store_true", help="print the final metrics as one JSON object on the last line")
    group.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    parser.set_defaults(handler=_train)


def _demo_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "demo",
        help="the headline comparison: every mechanism on a9a, ER n=20 p=0.5, eps=10",
        description="Run every mechanism on the papers' a9a setting with the step size tuned over the papers' grid; "
        "prints a table and writes a figure.",
    )
    parser.add_argument("--steps", type=_positive_int, default=5000, help="number of D-SGD steps (default 5000)")
    parser.add_argument("--eps", type=float, default=10.0, help="target epsilon (default 10)")
    parser.add_argument("--seed", type=int, nargs="+", default=[0], help="seeds (default 0)")
    parser.add_argument("--workers", type=_positive_int, default=None, help="parallel processes (default: all cores)")
    parser.add_argument("--out", type=Path, default=Path("results/demo"), help="results folder (default results/demo)")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    parser.set_defaults(handler=_demo)


def build_parser() -> argparse.ArgumentParser:
    """The ``dpdl`` argument parser with all subcommands."""
    parser = _Parser(prog="dpdl", description="Differentially private decentralized learning with correlated noise.")
    parser.add_argument("--version", action="version", version=f"dpdl {__version__}")
    sub = parser.add_subparsers(title="commands", dest="command", required=True, parser_class=_Parser)
    _train_parser(sub)
    _demo_parser(sub)
    return parser


def _train(args: argparse.Namespace) -> int:
    from dpdl.experiments.results import json_safe, write_results
    from dpdl.experiments.train import TrainConfig, run_training

    config = TrainConfig(
        task=args.task,
        graph=args.graph,
        n=args.n,
        p=args.p,
        mixing=args.mixing,
        mechanism=args.mechanism,
        eps=args.eps,
        delta=args.delta,
        steps=args.steps,
        clip=args.clip,
        clip_level=args.clip_level,
        calibration=args.calibration,
        batch_size=args.batch_size,
        lr=args.lr,
        schedule=args.schedule,
        eval_every=args.eval_every,
        seeds=tuple(args.seed),
        task_options=TaskOptions(
            partition=args.partition, alpha=args.alpha, labels_per_agent=args.labels_per_agent, l2=args.l2, dim=args.dim
        ),
    )
    result = run_training(config, progress=not args.no_progress)
    name = f"{args.task}-{args.mechanism}-{args.graph.replace(':', '_').replace('/', '_')}-eps{args.eps:g}-seed{'_'.join(map(str, args.seed))}"
    folder = args.out or Path("results") / "train" / name
    paths = write_results(result, folder)
    summary = result.summary()
    metric = result.primary_metric
    print(f"results: {folder}", file=sys.stderr)
    for report in result.runs[0].privacy:
        print(f"privacy: {report}", file=sys.stderr)
    print(f"{metric}: {summary[metric]:.6g} (figure {paths['figure']})", file=sys.stderr)
    if args.json:
        print(json.dumps(json_safe(summary)))
    return 0


def _demo(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from dpdl.experiments.demo import HEADLINE, run_demo, write_demo

    base = replace(HEADLINE, steps=args.steps, eps=args.eps, seeds=tuple(args.seed))
    result = run_demo(base, workers=args.workers, progress=not args.no_progress)
    table, figure = write_demo(result, args.out)
    print(table)
    print(f"\nresults: {args.out} (figure {figure})")
    return 0


def _format_warning(message, category, filename, lineno, line=None) -> str:  # noqa: ANN001
    return f"dpdl: warning: {message}\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``dpdl`` command."""
    warnings.formatwarning = _format_warning
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except DpdlError as error:
        print(f"dpdl: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("dpdl: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
