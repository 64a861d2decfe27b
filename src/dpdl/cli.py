"""The ``dpdl`` command line: ``train``, ``run-agent``, ``run-local``, ``noise``, ``audit``,
``factorize``, ``reproduce``, ``sweep``, ``demo``, ``data`` (``--help`` on each).

The parser is built from :mod:`dpdl.choices` and the settings a run declares, which are light: the
fields of
:class:`~dpdl.jobspec.config.TrainConfig` give the train, run-agent and run-local options (and the
graph, privacy and noise-design options of the other commands), those of
:class:`~dpdl.runtime.options.AgentOptions` the runtime options (:mod:`dpdl.settings`). Each command
imports its implementation when it runs, so ``dpdl --help`` and ``dpdl <command> --help`` do not
import torch, scipy or networkx.

Bad input ends with one ``dpdl: error: ...`` line on stderr and exit status 2, never a traceback;
any other exception is a bug in dpdl: its traceback is printed with a request to report it, and the
exit status is 1.

Results go to stdout (tables, ``--json``) and stderr (summaries); the library's log records go to
stderr as ``dpdl: level: message`` lines at WARNING and above, INFO with ``-v``, DEBUG with ``-vv``,
errors only with ``-q`` (:mod:`dpdl.logs`; the processes a command starts inherit the level).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from dpdl import __version__
from dpdl.choices import (
    DEFAULT_TRIALS,
    EXECUTORS,
    MECHANISM_REGISTRY,
    MULTISEED_MAX_N,
    REPRODUCTIONS_INSTALL,
    THREAT_REGISTRY,
)
from dpdl.errors import ConfigError, DpdlError
from dpdl.jobspec.config import TrainConfig
from dpdl.registry import load_plugins
from dpdl.runtime.options import AgentOptions
from dpdl.settings import DesignOptions, add_arguments, from_options, positive_int, to_options

__all__ = ["build_parser", "main"]

logger = logging.getLogger(__name__)


class _Parser(argparse.ArgumentParser):
    """ArgumentParser whose usage errors are one line, like every other dpdl error."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"dpdl: error: {message} (see '{self.prog} --help')\n")

    def parse_known_args(
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        """With ``--config FILE`` / ``--set KEY=VALUE`` (:func:`add_options_file_arguments`), parse
        again with the file's values, then the ``--set`` values, in place of the defaults: an option
        given on the command line still overrides both, wherever it stands."""
        if namespace is None and any(action.dest == "config" for action in self._actions):
            first, _ = super().parse_known_args(args, None)
            if first.config is not None or first.set:
                from dpdl.experiments.replay import load_options

                try:
                    namespace = argparse.Namespace(**load_options(self, first.config, first.set))
                except DpdlError as error:
                    self.error(str(error))
        return super().parse_known_args(args, namespace)


def add_graph_arguments(parser: argparse.ArgumentParser) -> None:
    """Options that choose the communication graph and its mixing matrix (:class:`TrainConfig`'s;
    not ``--graph-seed``: these commands draw a random graph from their ``--seed``)."""
    add_arguments(parser, TrainConfig, groups=("graph",), skip=("graph_seed",))


def add_budget_arguments(parser: argparse.ArgumentParser) -> None:
    """Options that set the privacy budget and how it is calibrated (:class:`TrainConfig`'s; not
    the time-correlated mechanisms' ``--gdp-mu`` and ``--neighbouring``: these commands calibrate
    the per-step designs)."""
    add_arguments(parser, TrainConfig, groups=("privacy",), skip=("gdp_mu", "neighbouring"))


def add_output_arguments(
    parser: argparse.ArgumentParser, out: Path | None, out_help: str, json_help: str | None
) -> None:
    """``--out`` (results folder), ``--json`` (when the command has a JSON result) and
    ``--no-progress``."""
    group = parser.add_argument_group("output")
    group.add_argument("--out", type=Path, default=out, help=f"results folder (default {out_help})")
    if json_help:
        group.add_argument(
            "--json",
            action="store_true",
            help=f"print {json_help} as one JSON object on the last line",
        )
    group.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def add_device_argument(parser: argparse.ArgumentParser) -> None:
    """``--device``: where the engine computes (:func:`dpdl.jobspec.device.resolve_device`)."""
    parser.add_argument(
        "--device",
        default="cpu",
        metavar="DEVICE",
        help="where the engine computes: cpu, cuda, cuda:K or auto (a GPU if torch sees one, else "
        "the CPU); batches and noise are drawn on the host from the same seeds on every device, "
        "so the numbers agree to rounding (default cpu)",
    )


def add_graph_seed_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seed", type=int, default=0, help="seed of random graphs (default 0)")


#: The figure formats ``--plot`` writes, by file suffix (matplotlib's names for them).
FIGURE_SUFFIXES = (".png", ".svg", ".pdf")


def figure_file(text: str) -> Path:
    """``--plot``'s value: a file name whose suffix names a format of :data:`FIGURE_SUFFIXES`."""
    path = Path(text)
    if path.suffix.lower() not in FIGURE_SUFFIXES:
        raise argparse.ArgumentTypeError(
            f"the figure's file name must end in {', '.join(FIGURE_SUFFIXES)}, got {text!r}"
        )
    return path


def add_plot_argument(parser: argparse.ArgumentParser, what: str) -> None:
    """``--plot FILE``: also draw ``what`` into FILE."""
    parser.add_argument(
        "--plot",
        type=figure_file,
        default=None,
        metavar="FILE",
        help=f"also draw {what} into FILE ({', '.join(FIGURE_SUFFIXES)})",
    )


def add_design_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of the correlated-noise designs (:class:`~dpdl.settings.DesignOptions`)."""
    add_arguments(parser, DesignOptions)


def add_training_arguments(parser: argparse.ArgumentParser) -> None:
    """Everything that defines a training job: one option per setting of :class:`TrainConfig`."""
    add_arguments(parser, TrainConfig)


def add_options_file_arguments(parser: argparse.ArgumentParser) -> None:
    """``--config FILE`` and ``--set KEY=VALUE``: take the options from a TOML file, as a run writes
    them (:mod:`dpdl.experiments.replay`); :class:`_Parser` reads them."""
    group = parser.add_argument_group("options file (replay a run)")
    group.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="take every option from this TOML file, the config.toml each run writes in its "
        "results folder (keys: the long options, as batch-size or batch_size); an option also "
        "given on the command line overrides the file's",
    )
    group.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one option of the file (or of the defaults), e.g. --set seed=[1] --set "
        "graph=ring: "
        'VALUE is a TOML literal (3, 0.5, [1, 2], true, "text"), or else a plain string; '
        "repeatable",
    )


def _train_parser(sub: argparse._SubParsersAction) -> None:
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
        help="also write every agent's final model, models-seed<s>.npy",
    )
    add_options_file_arguments(parser)
    parser.set_defaults(handler=_train, parser=parser)


def add_agent_arguments(parser: argparse.ArgumentParser) -> None:
    """How runtime agents run (:class:`AgentOptions`: checkpoints, timeout, resume, departures,
    message authentication), and progress."""
    sections = add_arguments(parser, AgentOptions)
    sections["runtime"].add_argument(
        "--no-progress", action="store_true", help="hide the progress bar"
    )


def _run_agent_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "run-agent",
        help="run one agent as one rank of torch.distributed (launch with torchrun, one rank per "
        "agent)",
        description="Run agent RANK of the job as a torch.distributed process (gloo, or nccl on "
        "the GPU LOCAL_RANK with --backend nccl): agree keys with the others "
        "(X25519), then train (D-SGD, or gradient tracking with --algorithm dsgt) exchanging "
        "authenticated messages with its graph neighbours only. Reads RANK, WORLD_SIZE, "
        "LOCAL_RANK, MASTER_ADDR and MASTER_PORT from the environment, as torchrun sets them "
        "(torchrun ... -m dpdl.cli -- run-agent ...); writes the final model to "
        "WORKDIR/agent<id>/final.npy.",
    )
    add_training_arguments(parser)
    add_agent_arguments(parser)
    parser.set_defaults(handler=_run_agent)


def _run_local_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "run-local",
        help="run every agent of a job as its own process on this machine (loopback; gloo, or "
        "nccl with one GPU per agent) and evaluate the models",
        description="Start n run-agent processes on loopback, wait for them, and write models.npy "
        "and final.json (the metrics of the agents' final models) to WORKDIR; on a failure print "
        "which agent stopped and why (rerun with --resume to continue from the checkpoints).",
    )
    add_training_arguments(parser)
    add_agent_arguments(parser)
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the final metrics as one JSON object on the last line",
    )
    parser.set_defaults(handler=_run_local)


def _noise_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "noise",
        help="design one mechanism's noise for a graph and budget; report Tr(W R W^T) and epsilon "
        "per threat",
        description="Calibrate a noise design to (eps, delta) over T steps on a graph; print the "
        "variance left after mixing, Tr(W R W^T), and the exact epsilon against each threat model "
        "(Infinity where none holds).",
    )
    parser.add_argument(
        "--method",
        required=True,
        help=f"noise design: {', '.join(MECHANISM_REGISTRY.names())}",
    )
    add_graph_arguments(parser)
    add_graph_seed_argument(parser)
    add_budget_arguments(parser)
    add_design_arguments(parser)
    horizon = parser.add_argument_group("horizon objective (--objective horizon)")
    horizon.add_argument("--lr", type=float, default=None, help="the run's constant step size eta")
    horizon.add_argument(
        "--curvature",
        type=float,
        default=None,
        metavar="L",
        help="the objective's curvature, H = L I for every agent (a smoothness constant)",
    )
    parser.add_argument(
        "--threat",
        nargs="+",
        default=None,
        help=f"threats to account against, of {', '.join(THREAT_REGISTRY.names())} (default: "
        "eavesdropper honest-but-curious colluding-2 central)",
    )
    parser.add_argument(
        "--json", action="store_true", help="print the report as one JSON object on the last line"
    )
    add_plot_argument(
        parser,
        "heat maps of the noise covariance across agents, R, and of what one gossip round "
        "leaves of it, W R W^T",
    )
    parser.set_defaults(handler=_noise)


def _audit_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "audit",
        help="every mechanism x every threat model -> epsilon, with each threat's attack beside it",
        description="Calibrate every mechanism (and no noise: D-SGD, DSGT) to the budget against "
        "the threat it is designed for, account each exactly against every threat model, and "
        "attack each as every threat (membership test: an empirical lower bound on epsilon) and "
        "as the eavesdropper that sums the messages (the aggregate's error); prints a table and "
        "writes audit.csv, audit.json and REPORT.md.",
    )
    add_graph_arguments(parser)
    add_graph_seed_argument(parser)
    add_budget_arguments(parser)
    parser.add_argument(
        "--mechanisms",
        nargs="+",
        default=None,
        metavar="NAME",
        help=f"mechanisms to audit, after no noise, of {', '.join(MECHANISM_REGISTRY.names())} "
        "(default: all of them, plugins included; whisper-multiseed only up to "
        f"n = {MULTISEED_MAX_N} agents)",
    )
    group = parser.add_argument_group("attack")
    group.add_argument(
        "--attack-trials",
        type=positive_int,
        default=DEFAULT_TRIALS,
        help="membership-test trials per hypothesis for the empirical lower bounds; the attacks' "
        "noise is "
        f"seeded by --seed (default {DEFAULT_TRIALS})",
    )
    add_output_arguments(parser, Path("results/audit"), "results/audit", "the audit")
    add_plot_argument(
        parser,
        "the bounds on epsilon per threat and mechanism: the accountant's upper bound beside the "
        "membership test's lower bounds",
    )
    parser.set_defaults(handler=_audit)


def _factorize_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "factorize",
        help="MAFALDA-SGD's noise correlation for a graph and cyclic participation, against "
        "DP-D-SGD and AntiPGD",
        description="Optimise the local encoder of MAFALDA-SGD (Lemma 12, L-BFGS) for the graph's "
        "gossip under cyclic (k, b)-participation; print each encoder's sensitivity, the error "
        "its noise causes (sens^2 tr(H X^-1)) and the noise multiplier it needs for (eps, "
        "delta)-DP under LDP per unit of gradient sensitivity; save the encoder.",
    )
    add_graph_arguments(parser)
    add_graph_seed_argument(parser)
    group = parser.add_argument_group("participation and budget")
    group.add_argument(
        "--participations",
        type=positive_int,
        default=20,
        help="k: passes over the data (default 20)",
    )
    group.add_argument(
        "--batches",
        type=positive_int,
        default=19,
        help="b: batches per pass, steps between participations (default 19)",
    )
    group.add_argument(
        "--restart",
        type=positive_int,
        default=None,
        help="restart the correlation every this many steps (a multiple of b dividing T = k b); "
        "default: never",
    )
    group.add_argument(
        "--eps",
        type=float,
        default=10.0,
        help="target epsilon for the noise multipliers (default 10)",
    )
    group.add_argument("--delta", type=float, default=1e-6, help="target delta (default 1e-6)")
    group.add_argument(
        "--per-agent",
        action="store_true",
        help="also MAFALDA-L-SGD (the authors' code): every agent's encoder optimised for its own "
        "share of the error, n times the work; saved as encoders_per_agent.npy",
    )
    group = parser.add_argument_group("output")
    group.add_argument(
        "--out",
        type=Path,
        default=None,
        help="results folder (default results/factorize/<graph>-k<k>-b<b>)",
    )
    group.add_argument(
        "--json", action="store_true", help="print the result as one JSON object on the last line"
    )
    parser.set_defaults(handler=_factorize)


def add_executor_arguments(parser: argparse.ArgumentParser, jobs: str) -> None:
    """``--executor``, ``--address`` and the number of points at once (option ``--<jobs>``, dest
    ``jobs``; the other of ``--jobs`` and ``--workers`` is taken too, so that either command
    accepts the other's habit): where the points of a grid run
    (:mod:`dpdl.experiments.executors`)."""
    group = parser.add_argument_group("executor (where the points run)")
    group.add_argument(
        f"--{jobs}",
        "--workers" if jobs == "jobs" else "--jobs",
        dest="jobs",
        type=positive_int,
        default=None,
        help="points at once on this machine (default: all cores; with --executor ray, the CPUs "
        "of the Ray started here)",
    )
    group.add_argument(
        "--executor",
        choices=EXECUTORS.names(),
        default="local",
        help="; ".join(f"{name}: {what}" for name, what in EXECUTORS.helps().items())
        + " (default local)",
    )
    group.add_argument(
        "--address",
        default=None,
        metavar="ADDR",
        help="with --executor ray: the Ray cluster to join (host:port of its head, or 'auto'); "
        "default: start a Ray on this machine",
    )


def _open_executor(args: argparse.Namespace, cpus: float = 1.0, gpus: float = 0.0):  # noqa: ANN202 (an Executor, imported late)
    from dpdl.experiments.executors import ExecutorOptions, open_executor

    return open_executor(args.executor, ExecutorOptions(args.jobs, args.address, cpus, gpus))


def _sweep_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "sweep",
        help="run a grid of training runs from a TOML sweep file, locally or on Ray",
        description="Expand the sweep file's grid ([base]: the options of 'dpdl train --config'; "
        "[sweep]: lists crossed, 'zip' pairs lists, 'tune' names the metric a step-size search "
        "tunes), run every point not already stored in DIR/points, and write DIR/runs.csv (one "
        "row per run), DIR/summary.csv (t intervals over seeds) and a figure per metric. An "
        "interrupted sweep resumes; see docs/sweeps.md.",
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
        "--dry-run", action="store_true", help="print the grid and its size; run nothing"
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
    parser.set_defaults(handler=_sweep)


def _reproduce_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "reproduce",
        help="reproduce a paper's figure: raw runs (CSV), figures (PNG) and REPORT.md",
        description="Run a named reproduction of the papers' figures; finished grid points are "
        "cached, so an interrupted run resumes. REPORT.md states each claim of the paper, what we "
        "measured, and whether it holds.",
    )
    parser.add_argument("name", nargs="?", help="reproduction name (see --list)")
    parser.add_argument("--list", action="store_true", help="list the reproductions and exit")
    parser.add_argument(
        "--quick", action="store_true", help="fewer seeds and grid points (minutes)"
    )
    parser.add_argument(
        "--parts",
        nargs="+",
        default=None,
        metavar="PART",
        help="run only these parts of a figure that has parts (see --list), e.g. decor-fig1's "
        "logreg-a9a",
    )
    parser.add_argument(
        "--from-sweep",
        type=Path,
        default=None,
        metavar="DIR",
        help="run nothing: write REPORT.md and the figures into DIR/report (or --out) from the "
        "runs 'dpdl sweep NAME --out DIR' made in DIR (with --quick: 'dpdl sweep NAME --quick'; "
        "the reproductions with a sweep file: see --list)",
    )
    add_executor_arguments(parser, "workers")
    add_output_arguments(
        parser,
        None,
        "results/<name>, or results/quick/<name>; with --from-sweep DIR, DIR/report",
        None,
    )
    parser.set_defaults(handler=_reproduce)


def _demo_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "demo",
        help="the headline comparison: every mechanism on a9a, ER n=20 p=0.5, eps=10",
        description="Run every mechanism on the papers' a9a setting with the step size tuned over "
        "the papers' grid; prints a table and writes a figure.",
    )
    parser.add_argument(
        "--steps", type=positive_int, default=5000, help="number of D-SGD steps (default 5000)"
    )
    parser.add_argument("--eps", type=float, default=10.0, help="target epsilon (default 10)")
    parser.add_argument("--seed", type=int, nargs="+", default=[0], help="seeds (default 0)")
    parser.add_argument(
        "--workers", type=positive_int, default=None, help="parallel processes (default: all cores)"
    )
    add_output_arguments(parser, Path("results/demo"), "results/demo", None)
    parser.set_defaults(handler=_demo)


def _data_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "data",
        help="list the data sets and where they are, or fetch one",
        description="Data sets are looked up in DPDL_DATA_DIR, then in the user cache folder "
        "(DPDL_CACHE_DIR, default the platform's, ~/.cache/dpdl on Linux). 'list' shows each "
        "file's place, size and whether its sha256 is the published one; 'fetch NAME' downloads a "
        "data set, verified, into the cache (or --dest).",
    )
    actions = parser.add_subparsers(
        title="actions", dest="action", required=True, parser_class=_Parser
    )
    listing = actions.add_parser(
        "list",
        help="each data set's files: where they are, their size, whether the checksums match",
    )
    listing.set_defaults(handler=_data_list)
    fetching = actions.add_parser(
        "fetch",
        help="download a data set and check it against the published sha256",
        description="Download data set NAME file by file, each checked against the sha256 in "
        "dpdl's manifest before it is put in place (a wrong file is deleted); files already there "
        "and correct are kept.",
    )
    fetching.add_argument("name", help="data set, as 'dpdl data list' names it")
    fetching.add_argument(
        "--dest",
        type=Path,
        default=None,
        help="data folder to write into (default: the user cache folder, where dpdl looks after "
        "DPDL_DATA_DIR)",
    )
    fetching.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    fetching.set_defaults(handler=_data_fetch)


def build_parser() -> argparse.ArgumentParser:
    """The ``dpdl`` argument parser with all subcommands, offering what the plugins
    (:func:`dpdl.registry.load_plugins`: ``DPDL_PLUGINS``, entry points ``dpdl.plugins``)
    register."""
    load_plugins()
    parser = _Parser(
        prog="dpdl",
        description="Differentially private decentralized learning with correlated noise.",
    )
    parser.add_argument("--version", action="version", version=f"dpdl {__version__}")
    loudness = parser.add_mutually_exclusive_group()
    loudness.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="show what dpdl is doing: INFO records with -v, DEBUG with -vv (default: warnings "
        "and errors)",
    )
    loudness.add_argument(
        "-q", "--quiet", action="store_true", help="show errors only (no warnings)"
    )
    sub = parser.add_subparsers(
        title="commands", dest="command", required=True, parser_class=_Parser
    )
    _train_parser(sub)
    _run_agent_parser(sub)
    _run_local_parser(sub)
    _noise_parser(sub)
    _audit_parser(sub)
    _factorize_parser(sub)
    _reproduce_parser(sub)
    _sweep_parser(sub)
    _demo_parser(sub)
    _data_parser(sub)
    return parser


def _train(args: argparse.Namespace) -> int:
    import numpy as np

    from dpdl.experiments.results import json_safe, write_results
    from dpdl.experiments.train import run_training

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
    folder = _output_folder(args.out or Path("results") / "train" / name)
    result = run_training(
        from_options(TrainConfig, args), progress=not args.no_progress, device=args.device
    )
    paths = write_results(result, folder)
    _write_options(args, result.config, folder)
    if args.save_models:
        for run in result.runs:
            np.save(folder / f"models-seed{run.seed}.npy", run.models)
    summary = result.summary()
    metric = result.primary_metric
    print(f"results: {folder}", file=sys.stderr)
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


def _output_folder(folder: Path, option: str = "--out") -> Path:
    """``folder``, checked to be writable as a folder before the command does any work."""
    from dpdl.files import require_folder

    require_folder(folder, option)
    return folder


def _write_options(args: argparse.Namespace, config: TrainConfig, folder: Path) -> None:
    """``folder/config.toml``: every option of the run, the settings as the run resolved them (the
    task's step size and schedule filled in), so ``dpdl train --config`` on it replays the run."""
    from dpdl.experiments.replay import dump_options

    values = {**vars(args), **to_options(config)}
    header = [
        f"dpdl train options of the run written to {folder} (dpdl {__version__}); replay it with",
        f"  dpdl train --config {folder / 'config.toml'} --out OTHER_FOLDER [--set KEY=VALUE ...]",
    ]
    (folder / "config.toml").write_text(dump_options(args.parser, values, header))


def _agent_options(args: argparse.Namespace) -> AgentOptions:
    """The runtime options of ``args``; the agents' key seed is the job's ``--key-seed``."""
    from dataclasses import replace

    if len(args.seed) != 1:
        raise ConfigError("the runtime runs one replicate: give one --seed")
    return replace(from_options(AgentOptions, args), key_seed=args.key_seed)


def _run_agent(args: argparse.Namespace) -> int:
    from dpdl.jobspec.departure import remaining_agents
    from dpdl.runtime import init_agent, run_agent
    from dpdl.runtime.agent import final_model_path

    options = _agent_options(args)
    rank = init_agent(backend=options.backend)
    agent = remaining_agents(args.n, options.departed)[rank]
    run_agent(
        from_options(TrainConfig, args), args.seed[0], agent, options, progress=not args.no_progress
    )
    print(
        f"agent {agent} (rank {rank}): final model {final_model_path(args.workdir, agent)}",
        file=sys.stderr,
    )
    return 0


def _run_local(args: argparse.Namespace) -> int:
    import numpy as np

    from dpdl.errors import PeerFailure
    from dpdl.experiments.results import json_safe
    from dpdl.runtime import run_local

    outcome = run_local(
        from_options(TrainConfig, args),
        args.seed[0],
        _agent_options(args),
        progress=not args.no_progress,
    )
    if outcome.models is None:
        for agent, error in sorted(outcome.errors.items()):
            print(f"agent {agent}: {error.strip().splitlines()[-1]}", file=sys.stderr)
        raise PeerFailure(
            f"{len(outcome.errors)} of {len(outcome.agents)} agents stopped; rerun with --resume "
            "to continue from the checkpoints",
            min(outcome.errors),
            0,
        )
    np.save(args.workdir / "models.npy", outcome.models)
    final = {"agents": outcome.agents, **outcome.metrics, "privacy": outcome.privacy}
    (args.workdir / "final.json").write_text(json.dumps(json_safe(final), indent=2) + "\n")
    for report in outcome.privacy:
        print(
            f"privacy: eps={report['epsilon']:.4g} at delta={report['delta']:g}; "
            f"{report['threat']}; accountant {report['accountant']}",
            file=sys.stderr,
        )
    for name, value in outcome.metrics.items():
        print(f"{name}: {value:.6g}", file=sys.stderr)
    print(f"results: {args.workdir}", file=sys.stderr)
    if args.json:
        print(json.dumps(json_safe(outcome.metrics)))
    return 0


def _graph_and_weights(args: argparse.Namespace, method: str | None = None) -> tuple:
    """The graph and mixing matrix of ``args``; with ``method``, its design's memory checked first
    (before the graph is built where the topology's size is known without it)."""
    from dpdl.graphs import build_graph, mixing_matrix
    from dpdl.jobspec.resources import graph_size, require_design_fits

    what = f"the {method} design"
    known = method is None or require_design_fits(
        method, graph_size(args.graph, args.n, args.p), what
    )
    graph = build_graph(args.graph, args.n, args.p, seed=args.seed)
    if not known:
        require_design_fits(method, (graph.number_of_nodes(), graph.number_of_edges()), what)
    return graph, mixing_matrix(graph, args.mixing)


def _noise(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from dpdl.errors import ConfigError
    from dpdl.experiments.noise import DEFAULT_THREATS, noise_report
    from dpdl.experiments.results import json_safe
    from dpdl.scale import SPARSE_MIN_AGENTS
    from dpdl.threats import threat_by_name

    if args.plot is not None:
        _output_folder(args.plot.parent, "--plot")
    graph, weights = _graph_and_weights(args, args.method)
    if args.plot is not None and graph.number_of_nodes() >= SPARSE_MIN_AGENTS:
        raise ConfigError(
            f"--plot draws n x n heat maps, up to {SPARSE_MIN_AGENTS - 1} agents; this graph has "
            f"{graph.number_of_nodes()}"
        )
    threats = tuple(threat_by_name(t) for t in args.threat) if args.threat else DEFAULT_THREATS
    design = from_options(DesignOptions, args)
    if design.objective == "horizon":
        from dpdl.mechanisms.horizon import Curvature, Horizon

        if args.lr is None or args.curvature is None:
            raise ConfigError(
                "--objective horizon designs the noise for a run: give its step size (--lr) and "
                "the objective's curvature (--curvature L)"
            )
        design = replace(
            design, horizon=Horizon(args.lr, args.steps, Curvature.scalar(args.curvature))
        )
    elif args.lr is not None or args.curvature is not None:
        raise ConfigError("--lr and --curvature apply only with --objective horizon")
    report = noise_report(
        args.method,
        graph,
        weights,
        args.eps,
        args.delta,
        args.steps,
        args.clip,
        args.calibration,
        threats,
        design,
    )
    calibration = report.calibration
    print(
        f"{args.method} on {args.graph} (n={graph.number_of_nodes()}, {args.mixing} weights), "
        f"target eps={args.eps:g} delta={args.delta:g} T={args.steps} C={args.clip:g}, "
        f"calibration {args.calibration}",
        file=sys.stderr,
    )
    if calibration.overshoots:
        logger.warning(
            "the papers' closed form overshoots the target: exact eps=%.4g > %g",
            calibration.achieved_epsilon,
            args.eps,
        )
    print(
        f"Tr(W R W^T) = {report.trace_wrw:.6g}   (design took {report.solve_seconds:.3g} s)",
        file=sys.stderr,
    )
    for threat, eps in report.epsilon.items():
        count = report.coalitions[threat]
        bound = (
            " (upper bound: full collusion)"
            if not report.epsilon_exact[threat]
            else (f" (worst of {count} coalitions)" if count > 1 else "")
        )
        print(
            f"  eps against {threat:<20} {eps:.6g}{bound}   [papers' RDP bound: "
            f"{report.epsilon_paper_rdp[threat]:.6g}]",
            file=sys.stderr,
        )
    if args.plot is not None:
        from dpdl.experiments.plots import plot_covariances

        figure = plot_covariances(
            {args.method: report.noise.covariance()},
            weights,
            args.plot,
            f"{args.method} on {args.graph} (n={graph.number_of_nodes()}), eps={args.eps:g} "
            f"against {report.mechanism['threat']}, delta={args.delta:g}, T={args.steps}",
        )
        print(f"figure: {figure}", file=sys.stderr)
    if args.json:
        print(json.dumps(json_safe(report.as_dict())))
    return 0


def _audit(args: argparse.Namespace) -> int:
    from dpdl.experiments.audit import format_audit, run_audit, write_audit
    from dpdl.experiments.results import json_safe

    _output_folder(args.out)
    if args.plot is not None:
        _output_folder(args.plot.parent, "--plot")
    graph, weights = _graph_and_weights(args)
    reports = run_audit(
        graph,
        weights,
        args.eps,
        args.delta,
        args.steps,
        args.clip,
        args.calibration,
        attack_trials=args.attack_trials,
        seed=args.seed,
        progress=not args.no_progress,
        mechanisms=args.mechanisms,
    )
    table = format_audit(reports)
    print(
        f"audit: {args.graph} (n={graph.number_of_nodes()}), eps={args.eps:g}, "
        f"delta={args.delta:g}, T={args.steps}, C={args.clip:g}, calibration {args.calibration}; "
        "exact GDP epsilon per threat (each design calibrated against its own threat)"
    )
    print(table)
    write_audit(reports, args.out)
    if args.plot is not None:
        from dpdl.experiments.plots import plot_audit

        figure = plot_audit(
            reports,
            args.plot,
            f"audit: {args.graph} (n={graph.number_of_nodes()}), eps={args.eps:g}, "
            f"delta={args.delta:g}, T={args.steps}, C={args.clip:g}",
        )
        print(f"figure: {figure}")
    print(f"\nresults: {args.out}")
    if args.json:
        print(json.dumps(json_safe({"rows": [report.as_dict() for report in reports]})))
    return 0


def _factorize(args: argparse.Namespace) -> int:
    from dpdl.experiments.factorize import factorize, write_factorize

    name = (
        f"{args.graph.replace(':', '_').replace('/', '_')}-k{args.participations}-b{args.batches}"
    )
    out = _output_folder(args.out or Path("results") / "factorize" / name)
    graph, weights = _graph_and_weights(args)
    result = factorize(
        weights,
        args.participations,
        args.batches,
        args.eps,
        args.delta,
        args.restart,
        args.per_agent,
    )
    table, summary, folder = write_factorize(result, out)
    print(
        f"{args.graph} (n={graph.number_of_nodes()}), T={result.steps} (k={args.participations}, "
        f"b={args.batches})"
        + (f", restarts every {args.restart}" if args.restart else "")
        + f"; L-BFGS {result.iterations} iterations"
        + (f" and one run per agent ({graph.number_of_nodes()})" if args.per_agent else "")
        + f" in {result.seconds:.2f} s{'' if result.converged else ' (not converged)'}; sigma "
        f"for (eps={args.eps:g}, "
        f"delta={args.delta:g}) under LDP"
    )
    print(table)
    print(f"\nresults: {folder}")
    if args.json:
        print(json.dumps(summary))
    return 0


def _reproduce(args: argparse.Namespace) -> int:
    from dpdl.experiments.reproduction import reproduction, reproductions

    if args.list or not args.name:
        found = reproductions()
        if not found:
            raise ConfigError(f"no reproductions are installed: {REPRODUCTIONS_INSTALL}")
        for name, entry in found.items():
            parts = f" (parts: {', '.join(entry.parts)})" if entry.parts else ""
            if entry.sweep_parts is not None:
                stated = ", ".join(entry.sweep_parts)
                parts += f" (sweep file: dpdl sweep {name}; --from-sweep writes the report" + (
                    f" of {stated})" if stated else ")"
                )
            print(f"{name:<20} {entry.summary}{parts}")
        return 0
    chosen = reproduction(args.name)
    if args.from_sweep is not None:
        report = chosen.report_of_sweep(args.from_sweep, quick=args.quick, out=args.out)
        print(report.read_text())
        print(f"results: {report.parent}")
        return 0
    out = _output_folder(
        args.out
        or (Path("results") / "quick" / args.name if args.quick else Path("results") / args.name)
    )
    with _open_executor(args) as executor:
        report = chosen.reproduce(
            out,
            quick=args.quick,
            progress=not args.no_progress,
            parts=args.parts,
            executor=executor,
        )
    print(report.read_text())
    print(f"results: {out}")
    return 0


def _sweep(args: argparse.Namespace) -> int:
    from dpdl.experiments.sweeps.spec import DEFAULT, named_sweep_file, read_sweep

    path, name = args.file, args.file.stem
    if path.suffix != ".toml" and not path.is_file():  # a registered sweep's name
        path = named_sweep_file(str(args.file), args.quick)
        name += "-quick" if args.quick else ""
    elif args.quick:
        raise ConfigError(f"--quick: applies to a reproduction's name, not to the file {path}")
    sweep = read_sweep(path, args.set)
    if args.dry_run:
        from dpdl.experiments.sweeps.tuning import search_runs

        def shown(value: object) -> str:
            """A value as the file writes it (an unset option as the file's "default")."""
            return json.dumps(DEFAULT if value is None else value)

        for grid in sweep.grids:
            if len(sweep.grids) > 1:
                fixed = ", ".join(f"{key} = {shown(value)}" for key, value in grid.fixed)
                print(f"[[sweep]] {grid.label}" + (f" ({fixed})" if fixed else ""))
            for axis in grid.axes:
                if axis.keys:
                    values = ", ".join(
                        "/".join(shown(value) for value in position) for position in axis.values
                    )
                    print(f"{' + '.join(axis.keys)} ({len(axis.values)}): {values}")
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
        staged = any(g.tune is not None and (g.tune.seeds or g.tune.at) for g in sweep.grids)
        print(
            f"{len(search_runs(sweep))} runs, then each setting's choice on every seed"
            if staged
            else f"{len(sweep.points())} runs"
        )
        return 0
    from dpdl.experiments.sweeps.run import run_sweep

    out = args.out or Path("results") / "sweeps" / name
    with _open_executor(args, sweep.cpus, sweep.gpus) as executor:
        result = run_sweep(sweep, out, executor, progress=not args.no_progress, label=name)
    for what, written in result.paths.items():
        print(f"{what}: {written}", file=sys.stderr)
    print(f"{len(result.rows)} runs, {result.failed} failed; results: {out}")
    return 1 if result.failed else 0


def _demo(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from dpdl.experiments.demo import HEADLINE, run_demo, write_demo

    _output_folder(args.out)
    base = replace(HEADLINE, steps=args.steps, eps=args.eps, seeds=tuple(args.seed))
    result = run_demo(base, workers=args.workers, progress=not args.no_progress)
    table, figure = write_demo(result, args.out)
    print(table)
    print(f"\nresults: {args.out} (figure {figure})")
    return 0


def _data_list(args: argparse.Namespace) -> int:
    from dpdl.data.fetch import survey
    from dpdl.data.paths import data_roots, manifest

    for what, root in data_roots():
        print(f"{what}: {root}{'' if root.is_dir() else ' (does not exist)'}")
    statuses = survey()
    for name, entry in manifest().items():
        files = [status for status in statuses if status.dataset == name]
        present = sum(status.path is not None for status in files)
        state = (
            "complete"
            if present == len(files)
            else "missing"
            if not present
            else f"{present} of {len(files)} files"
        )
        how = "" if present == len(files) else f"; get it with 'dpdl data fetch {name}'"
        print(f"\n{name}: {entry['title']} [{state}{how}]")
        for status in files:
            if status.path is None:
                print(f"  {status.relative:<45} missing")
                continue
            check = {
                True: "sha256 ok",
                False: "sha256 differs from the published file (a slice, or damaged)",
                None: "no published sha256",
            }
            print(
                f"  {status.relative:<45} {status.size:>10} bytes  {check[status.verified]}  "
                f"({status.where}: {status.path})"
            )
    return 0


def _data_fetch(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from dpdl.data.fetch import fetch
    from dpdl.data.paths import cache_dir

    if args.dest is not None:
        _output_folder(args.dest, "--dest")
    bars = []

    def progress(relative: str):  # noqa: ANN202 (a progress callback for one file)
        if args.no_progress:
            return None
        bar = tqdm(desc=relative, unit="B", unit_scale=True, unit_divisor=1024, file=sys.stderr)
        bars.append(bar)

        def update(done: int, total: int | None) -> None:
            bar.total = total
            bar.update(done - bar.n)

        return update

    try:
        paths = fetch(args.name, args.dest, progress=progress)
    finally:
        for bar in bars:
            bar.close()
    dest = args.dest or cache_dir()
    for path in paths:
        print(f"verified: {path}", file=sys.stderr)
    print(
        f"{args.name}: {len(paths)} files in {dest}"
        + ("" if args.dest is None else "; set DPDL_DATA_DIR to this folder to use them")
    )
    return 0


def _format_warning(message, category, filename, lineno, line=None) -> str:  # noqa: ANN001
    return f"dpdl: warning: {message}\n"


def _configure_logging(args: argparse.Namespace) -> None:
    """One stderr handler at the level of ``-v`` / ``-q``; without either, at the level a parent
    ``dpdl`` passed on (:data:`dpdl.logs.LEVEL_ENV`, e.g. to agents started by torchrun), else
    WARNING."""
    from dpdl import logs

    level = logs.level_from_flags(args.verbose, args.quiet)
    if not args.verbose and not args.quiet:
        level = logs.env_level() or level
    logs.configure(level)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``dpdl`` command."""
    warnings.formatwarning = _format_warning
    try:
        load_plugins()
    except DpdlError as error:
        print(f"dpdl: error: {error}", file=sys.stderr)
        return 2
    args = build_parser().parse_args(argv)
    _configure_logging(args)
    try:
        return args.handler(args)
    except DpdlError as error:
        print(f"dpdl: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("dpdl: interrupted", file=sys.stderr)
        return 130
    except Exception:  # not a user's mistake (those are DpdlErrors): a bug, shown in full
        import traceback

        traceback.print_exc()
        print(
            f"dpdl: internal error (dpdl {__version__}): this is a bug in dpdl, not a mistake in "
            "the command; please report it with the command line and the traceback above",
            file=sys.stderr,
        )
        return 1


if __name__ == "__main__":
    sys.exit(main())
