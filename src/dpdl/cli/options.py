"""The options several `dpdl` commands share, and what a handler makes of them.

`Parser` (usage errors in one line; `--config FILE` and `--set KEY=VALUE`), the groups
of options more than one command adds (training, graph, budget, noise design, device, output,
figure, executor), and the helpers that turn them into what a command runs with: a results folder
checked before any work, an executor, a graph and its mixing matrix. Building the options imports
nothing heavy; the helpers import their implementation when a command runs.
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from dpdl.choices import EXECUTORS, THREAT_REGISTRY
from dpdl.errors import DpdlError
from dpdl.jobspec.config import TrainConfig
from dpdl.settings import DesignOptions, add_arguments, positive_int


class Parser(argparse.ArgumentParser):
    """ArgumentParser whose usage errors are one line, like every other dpdl error."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"dpdl: error: {message} (see '{self.prog} --help')\n")

    def parse_known_args(
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        """With `--config FILE` / `--set KEY=VALUE` (`add_options_file_arguments`), parse
        again with the file's values, then the `--set` values, in place of the defaults: an option
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


def add_options_file_arguments(parser: argparse.ArgumentParser) -> None:
    """`--config FILE` and `--set KEY=VALUE`: take the options from a TOML file, as a run writes
    them (`dpdl.experiments.replay`); `Parser` reads them."""
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


def add_training_arguments(parser: argparse.ArgumentParser) -> None:
    """Everything that defines a training job: one option per setting of
    [`TrainConfig`][dpdl.jobspec.config.TrainConfig]."""
    add_arguments(parser, TrainConfig)


def add_graph_arguments(parser: argparse.ArgumentParser) -> None:
    """Options that choose the communication graph and its mixing matrix
    ([`TrainConfig`][dpdl.jobspec.config.TrainConfig]'s; not `--graph-seed`: these commands draw
    a random graph from their `--seed`)."""
    add_arguments(parser, TrainConfig, groups=("graph",), skip=("graph_seed",))


def add_graph_seed_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seed", type=int, default=0, help="seed of random graphs (default 0)")


def add_budget_arguments(parser: argparse.ArgumentParser) -> None:
    """Options that set the privacy budget and how it is calibrated
    ([`TrainConfig`][dpdl.jobspec.config.TrainConfig]'s; not the time-correlated mechanisms'
    `--gdp-mu` and `--neighbouring`: these commands calibrate the per-step designs)."""
    add_arguments(parser, TrainConfig, groups=("privacy",), skip=("gdp_mu", "neighbouring"))


def add_threats_argument(parser: argparse.ArgumentParser) -> None:
    """`--threat NAME ...`: the threats a noise design is accounted against (`dpdl noise`,
    `dpdl privacy dropouts`)."""
    parser.add_argument(
        "--threat",
        nargs="+",
        default=None,
        help=f"threats to account against, of {', '.join(THREAT_REGISTRY.names())} (default: "
        "eavesdropper honest-but-curious colluding-2 central)",
    )


def add_design_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of the correlated-noise designs ([`DesignOptions`][dpdl.settings.DesignOptions])."""
    add_arguments(parser, DesignOptions)


def add_device_argument(parser: argparse.ArgumentParser) -> None:
    """`--device`: where the engine computes
    ([`dpdl.jobspec.device.resolve_device`][dpdl.jobspec.device.resolve_device])."""
    parser.add_argument(
        "--device",
        default="cpu",
        metavar="DEVICE",
        help="where the engine computes: cpu, cuda, cuda:K or auto (a GPU if torch sees one, else "
        "the CPU); batches and noise are drawn on the host from the same seeds on every device, "
        "so the numbers agree to rounding (default cpu)",
    )


def add_output_arguments(
    parser: argparse.ArgumentParser, out: Path | None, out_help: str, json_help: str | None
) -> None:
    """`--out` (results folder), `--json` (when the command has a JSON result) and
    `--no-progress`."""
    group = parser.add_argument_group("output")
    group.add_argument("--out", type=Path, default=out, help=f"results folder (default {out_help})")
    add_overwrite_argument(group, "--out")
    if json_help:
        group.add_argument(
            "--json",
            action="store_true",
            help=f"print {json_help} as one JSON object on the last line",
        )
    group.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def add_overwrite_argument(parser: argparse._ActionsContainer, option: str) -> None:
    """`--overwrite`: clear the results folder of another run of dpdl's before writing into it."""
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help=f"clear {option} first when it holds another dpdl run's results (without it, such a "
        "folder is refused; the same command with the same options continues its own run); a "
        "folder that dpdl did not write is never cleared",
    )


#: Options that say where and how a command runs or reports, not what it computes: runs that
#: differ only in them are the same run (`claimed_output`).
NOT_SETTINGS = frozenset(
    {
        "address", "checkpoint_every", "command", "config", "dest", "device", "executor",
        "handler", "jobs", "json", "no_progress", "out", "overwrite", "parser", "plot", "quiet",
        "resume", "save_models", "set", "tensorboard", "threads", "timeout", "verbose",
        "workdir", "workers",
    }
)  # fmt: skip


def claimed_output(
    args: argparse.Namespace,
    folder: Path,
    command: str,
    settings: dict[str, Any] | None = None,
    option: str = "--out",
) -> contextlib.AbstractContextManager[Path]:
    """Hold `folder` as the results folder of this run of `command` for the whole run
    (`dpdl.files.claimed_folder`): its lock, and its marker naming
    `settings` (default: the options of `args` that make the results, all but `NOT_SETTINGS`);
    `--overwrite` clears another dpdl run's folder first."""
    from dpdl.files import claimed_folder

    if settings is None:
        settings = {k: v for k, v in sorted(vars(args).items()) if k not in NOT_SETTINGS}
    return claimed_folder(folder, command, settings, getattr(args, "overwrite", False), option)


def add_tensorboard_argument(parser: argparse.ArgumentParser, what: str) -> None:
    """`--tensorboard DIR`: write `what` as TensorBoard scalars as they are recorded."""
    parser.add_argument(
        "--tensorboard",
        type=Path,
        default=None,
        metavar="DIR",
        help=f"also write {what} as TensorBoard scalars while it runs (tensorboard --logdir DIR "
        "shows them; needs pip install 'dpdl[tensorboard]'); the CSV files are written as before",
    )


#: The figure formats ``--plot`` writes, by file suffix (matplotlib's names for them).
FIGURE_SUFFIXES = (".png", ".svg", ".pdf")


def figure_file(text: str) -> Path:
    """`--plot`'s value: a file name whose suffix names a format of `FIGURE_SUFFIXES`."""
    path = Path(text)
    if path.suffix.lower() not in FIGURE_SUFFIXES:
        raise argparse.ArgumentTypeError(
            f"the figure's file name must end in {', '.join(FIGURE_SUFFIXES)}, got {text!r}"
        )
    return path


def add_plot_argument(parser: argparse.ArgumentParser, what: str) -> None:
    """`--plot FILE`: also draw `what` into FILE."""
    parser.add_argument(
        "--plot",
        type=figure_file,
        default=None,
        metavar="FILE",
        help=f"also draw {what} into FILE ({', '.join(FIGURE_SUFFIXES)})",
    )


def add_executor_arguments(parser: argparse.ArgumentParser, jobs: str) -> None:
    """`--executor`, `--address`, the number of points at once (option `--<jobs>`, dest
    `jobs`; the other of `--jobs` and `--workers` is taken too, so that either command
    accepts the other's habit) and the threads of each (`--threads`): where and how the points
    of a grid run (`dpdl.experiments.executors`)."""
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
        "--threads",
        type=positive_int,
        default=1,
        metavar="N",
        help="threads torch and BLAS compute each point with (default 1: the points at once fill "
        "the cores); with --threads N and no --" + jobs + ", the cores / N points at once; with "
        "--executor ray, declare as many CPUs per point in the sweep file's [resources]",
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


def output_folder(folder: Path, option: str = "--out") -> Path:
    """`folder`, checked to be writable as a folder before the command does any work."""
    from dpdl.files import require_folder

    require_folder(folder, option)
    return folder


def executor_from(  # noqa: ANN201 (an Executor, imported late)
    args: argparse.Namespace, cpus: float = 1.0, gpus: float = 0.0, memory: float | None = None
):
    """The executor that `--executor`, `--address`, `--jobs` and `--threads` name
    (`add_executor_arguments`), giving each point `cpus`, `gpus` and `memory` (bytes)."""
    from dpdl.experiments.executors import ExecutorOptions, open_executor

    options = ExecutorOptions(args.jobs, args.address, cpus, gpus, args.threads, memory)
    return open_executor(args.executor, options)


def graph_and_weights(args: argparse.Namespace, method: str | None = None) -> tuple:
    """The graph and mixing matrix of `args`; with `method`, its design's memory checked first
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
