"""`dpdl privacy export`: a run's privacy loss against one threat as JSON for other accountants:
a dp_accounting `DpEvent`, a privacy loss distribution or an f-DP curve
([`dpdl.accounting.export`][dpdl.accounting.export])."""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

from dpdl.cli.options import Parser
from dpdl.settings import positive_int

#: What `--format` offers (`dpdl.accounting.export.EXPORT_FORMATS`, not imported here: it
#: imports scipy, and the parser is built without it).
FORMATS = ("event", "pld", "fdp")


def privacy_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "privacy",
        help="a run's privacy loss for other accountants (dp_accounting DpEvent, PLD, f-DP curve)",
        description="Export the privacy loss of one threat's view of a run, as dpdl accounted it, "
        "for other accountants to compose with other releases.",
    )
    actions = parser.add_subparsers(
        title="actions", dest="action", required=True, parser_class=Parser
    )
    export = actions.add_parser(
        "export",
        help="one threat's view as a dp_accounting DpEvent, PLD or f-DP curve, in JSON",
        description="Read the privacy reports of RUN (a 'dpdl train' results folder, its "
        "final.json, or a folder saved by FitResult.save) and write the view of --threat as "
        "JSON: 'event', the dp_accounting DpEvent (its to_named_tuple); 'pld', the privacy loss "
        "distribution's mass functions, discretised pessimistically at --discretization; 'fdp', "
        "the f-DP trade-off curve beta(alpha) = Phi(Phi^-1(1 - alpha) - mu) on --points type I "
        "errors. Each view is one scalar Gaussian of its whitened sensitivity.",
    )
    export.add_argument("run", type=Path, metavar="RUN", help="results folder or its JSON file")
    export.add_argument(
        "--threat",
        default=None,
        help="the threat whose view to export, as the run's reports name it (default: the "
        "mechanism's own, the first report)",
    )
    export.add_argument("--format", choices=FORMATS, default="event", help="default: event")
    export.add_argument(
        "--together",
        action="store_true",
        help="the guarantee of every seed's results released together (final.json's "
        "privacy_seeds_together) instead of one seed's",
    )
    export.add_argument(
        "--discretization",
        type=float,
        default=1e-4,
        help="the PLD's loss discretisation (--format pld; default 1e-4)",
    )
    export.add_argument(
        "--points",
        type=positive_int,
        default=1001,
        help="type I errors of the f-DP curve, 0 to 1 (--format fdp; default 1001)",
    )
    export.add_argument(
        "--out", type=Path, default=None, help="JSON file to write (default: print it)"
    )
    export.add_argument(
        "--overwrite",
        action="store_true",
        help="replace --out when it exists (without it, an existing file is refused)",
    )
    export.set_defaults(handler=_export)


def _reports(run: Path, together: bool) -> list[dict[str, Any]]:
    """The privacy reports of `run` (a folder holding final.json or manifest.json, or such a
    file)."""
    from dpdl.errors import ConfigError
    from dpdl.files import read_regular

    path = run
    if run.is_dir():
        found = [run / name for name in ("final.json", "manifest.json") if (run / name).is_file()]
        if not found:
            raise ConfigError(f"{run} holds neither final.json nor manifest.json: not a dpdl run")
        path = found[0]
    try:
        data = json.loads(read_regular(path, "the run's results"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ConfigError(f"{path} is not JSON ({error})") from None
    key = "privacy_seeds_together" if together else "privacy"
    if not isinstance(data, dict) or not isinstance(data.get(key), list):
        what = "several seeds' privacy released together" if together else "privacy reports"
        raise ConfigError(f"{path} records no {what} ({key!r})")
    return data[key]


def _export(args: argparse.Namespace) -> int:
    from dpdl.accounting.export import export_json, view_of
    from dpdl.errors import ConfigError
    from dpdl.files import atomic_write, json_safe

    if not 0.0 < args.discretization < math.inf:
        raise ConfigError(
            f"--discretization must be a finite number > 0, got {args.discretization}"
        )
    if args.out is not None and args.out.is_dir():
        raise ConfigError(f"--out {args.out} is a folder; give the JSON file to write")
    if args.out is not None and args.out.exists() and not args.overwrite:
        raise ConfigError(f"--out {args.out} exists; add --overwrite to replace it")
    view = view_of(_reports(args.run, args.together), args.threat)
    data = export_json(view, args.format, args.discretization, args.points)
    text = json.dumps(json_safe(data), indent=1) + "\n"
    if args.out is None:
        sys.stdout.write(text)
    else:
        atomic_write(args.out, text.encode())
        print(f"{view.threat}: {args.format} written to {args.out}")
    return 0
