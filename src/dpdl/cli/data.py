"""`dpdl data list` and `dpdl data fetch`: where the data sets are, and downloading one,
verified against the published sha256 (`dpdl.data`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dpdl.cli.options import Parser, output_folder


def data_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "data",
        help="list the data sets and where they are, or fetch one",
        description="Data sets are looked up in DPDL_DATA_DIR, then in the user cache folder "
        "(DPDL_CACHE_DIR, default the platform's, ~/.cache/dpdl on Linux). 'list' shows each "
        "file's place, size and whether its sha256 is the published one; 'fetch NAME' downloads a "
        "data set, verified, into the cache (or --dest).",
    )
    actions = parser.add_subparsers(
        title="actions", dest="action", required=True, parser_class=Parser
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
        output_folder(args.dest, "--dest")
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
