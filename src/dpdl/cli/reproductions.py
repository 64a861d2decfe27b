"""`dpdl reproduce`: run a named reproduction of the papers' figures, or write its report from
a sweep's runs (`dpdl.experiments.reproduction`; the reproductions are a separate package)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from dpdl.cli.options import (
    add_executor_arguments,
    add_output_arguments,
    claimed_output,
    executor_from,
    output_folder,
)

#: The markup a docstring's first line may hold: a Markdown cross-reference [`x`][path], a reST
#: role :func:`~a.x`, code in single or double backticks.
_MARKUP = re.compile(r"\[`*([^\]`]+)`*\]\[[^\]]*\]|:[a-z]+:`~?(?:[\w.]*\.)?([^`.]+)`|`+([^`]+?)`+")


def plain_summary(name: str, summary: str) -> str:
    """A reproduction's summary (its module docstring's first line) as plain text for a terminal:
    markup dropped, and the name it may start with (`` `name`: ``) too, as the listing shows it."""
    text = _MARKUP.sub(lambda m: next(group for group in m.groups() if group), summary)
    return text.removeprefix(f"{name}:").strip()


def reproduce_parser(sub: argparse._SubParsersAction) -> None:
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


def _require_reproduction_fits(args: argparse.Namespace) -> None:
    """Check the reproduction's sweep file whole and estimate its runs spread over the workers
    ([`check_sweep`][dpdl.experiments.sweeps.check.check_sweep]) before anything runs (parts
    alone: each point checks itself)."""
    import os

    from dpdl.errors import ResourceError
    from dpdl.experiments.sweeps.check import check_sweep
    from dpdl.experiments.sweeps.spec import named_sweep_file, read_sweep

    sweep = read_sweep(named_sweep_file(args.name, args.quick))
    workers = args.jobs or max(1, (os.cpu_count() or 1) // args.threads)
    try:
        check_sweep(sweep, workers)
    except ResourceError as error:
        raise ResourceError(f"reproduce {args.name} ({workers} workers): {error}") from None


def _reproduce(args: argparse.Namespace) -> int:
    from dpdl.experiments.reproduction import reproduction, reproductions

    if args.list or not args.name:
        for name, entry in reproductions().items():
            parts = f" (parts: {', '.join(entry.parts)})" if entry.parts else ""
            if entry.sweep_parts is not None:
                stated = ", ".join(entry.sweep_parts)
                parts += f" (sweep file: dpdl sweep {name}; --from-sweep writes the report" + (
                    f" of {stated})" if stated else ")"
                )
            print(f"{name:<20} {plain_summary(name, entry.summary)}{parts}")
        return 0
    chosen = reproduction(args.name)
    settings = {"reproduction": args.name, "quick": args.quick}
    if args.from_sweep is not None:  # the sweep's folder is read; the report's is written
        out = output_folder(args.out or args.from_sweep / "report")
        with claimed_output(args, out, "reproduce", {**settings, "from_sweep": True}):
            report = chosen.report_of_sweep(args.from_sweep, quick=args.quick, out=out)
        print(report.read_text())
        print(f"results: {report.parent}")
        return 0
    whole = chosen.sweep_parts is not None and set(chosen.sweep_parts) in (set(), set(chosen.parts))
    if whole and args.parts is None and args.executor == "local":
        _require_reproduction_fits(args)
    out = output_folder(
        args.out
        or (Path("results") / "quick" / args.name if args.quick else Path("results") / args.name)
    )
    with claimed_output(args, out, "reproduce", settings), executor_from(args) as executor:
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
