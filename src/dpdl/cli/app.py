"""The `dpdl` command itself: the top-level parser (`--version`, `-v` / `-q`) with every
command's parser, and `main`, which loads the plugins, sets up logging and turns errors
into one line and an exit status: 2 for bad input (a `DpdlError`), 3 for a run that diverged
(`DIVERGED`), 1 for a bug, 130 for an interrupt."""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from collections.abc import Sequence

from dpdl import __version__
from dpdl.cli.agents import run_agent_parser, run_local_parser
from dpdl.cli.audit import audit_parser
from dpdl.cli.data import data_parser
from dpdl.cli.demo import demo_parser
from dpdl.cli.factorize import factorize_parser
from dpdl.cli.noise import noise_parser
from dpdl.cli.options import Parser
from dpdl.cli.privacy import privacy_parser
from dpdl.cli.reproductions import reproduce_parser
from dpdl.cli.sweep import sweep_parser
from dpdl.cli.train import train_parser
from dpdl.errors import DivergenceError, DpdlError
from dpdl.registry import load_plugins

#: The exit status of a run that failed on the way (a `DivergenceError`: its models or metrics
#: stopped being finite); 2 is for bad input, found before the work.
DIVERGED = DivergenceError.exit_status


def build_parser() -> argparse.ArgumentParser:
    """The `dpdl` argument parser with all subcommands, offering what the plugins
    ([`dpdl.registry.load_plugins`][dpdl.registry.load_plugins]: `DPDL_PLUGINS`, entry points
    `dpdl.plugins`) register."""
    load_plugins()
    parser = Parser(
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
        title="commands", dest="command", required=True, parser_class=Parser
    )
    train_parser(sub)
    run_agent_parser(sub)
    run_local_parser(sub)
    noise_parser(sub)
    audit_parser(sub)
    factorize_parser(sub)
    privacy_parser(sub)
    reproduce_parser(sub)
    sweep_parser(sub)
    demo_parser(sub)
    data_parser(sub)
    return parser


def _format_warning(message, category, filename, lineno, line=None) -> str:  # noqa: ANN001
    return f"dpdl: warning: {message}\n"


def _configure_logging(args: argparse.Namespace) -> None:
    """One stderr handler at the level of `-v` / `-q`; without either, at the level a parent
    `dpdl` passed on (`dpdl.logs.LEVEL_ENV`, e.g. to agents started by torchrun), else
    WARNING."""
    from dpdl import logs

    level = logs.level_from_flags(args.verbose, args.quiet)
    if not args.verbose and not args.quiet:
        level = logs.env_level() or level
    logs.configure(level)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `dpdl` command."""
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
    except DivergenceError as error:
        print(f"dpdl: error: {error}", file=sys.stderr)
        return DIVERGED
    except DpdlError as error:
        print(f"dpdl: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("dpdl: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader of the output stopped reading (dpdl reproduce --list | head): nothing is
        # wrong in dpdl. Point stdout at devnull so that the interpreter's final flush does not
        # fail again (the recipe of Python's signal module documentation).
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except Exception:  # not a user's mistake (those are DpdlErrors): a bug, shown in full
        import traceback

        traceback.print_exc()
        print(
            f"dpdl: internal error (dpdl {__version__}): this is a bug in dpdl, not a mistake in "
            "the command; please report it with the command line and the traceback above",
            file=sys.stderr,
        )
        return 1
