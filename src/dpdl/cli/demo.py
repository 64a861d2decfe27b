"""`dpdl demo`: the headline comparison, every mechanism on the papers' a9a setting
(`dpdl.experiments.demo`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from dpdl.cli.options import add_output_arguments, claimed_output, output_folder
from dpdl.settings import positive_int


def demo_parser(sub: argparse._SubParsersAction) -> None:
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


def _demo(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from dpdl.experiments.demo import HEADLINE, run_demo, write_demo

    output_folder(args.out)
    base = replace(HEADLINE, steps=args.steps, eps=args.eps, seeds=tuple(args.seed))
    with claimed_output(args, args.out, "demo"):
        result = run_demo(base, workers=args.workers, progress=not args.no_progress)
        table, figure = write_demo(result, args.out)
    print(table)
    print(f"\nresults: {args.out} (figure {figure})")
    return 0
