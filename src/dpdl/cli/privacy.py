"""`dpdl privacy`: `export`, a run's privacy loss against one threat as JSON for other
accountants (a dp_accounting `DpEvent`, a privacy loss distribution or an f-DP curve,
[`dpdl.accounting.export`][dpdl.accounting.export]); `dropouts`, a design's epsilon against each
threat when agents miss rounds at a rate
([`dpdl.accounting.dropouts`][dpdl.accounting.dropouts])."""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

from dpdl.choices import MECHANISM_REGISTRY
from dpdl.cli.options import (
    Parser,
    add_budget_arguments,
    add_design_arguments,
    add_graph_arguments,
    add_graph_seed_argument,
    add_threats_argument,
)
from dpdl.jobspec.config import TrainConfig
from dpdl.settings import add_arguments, positive_int

#: What `--format` offers (`dpdl.accounting.export.EXPORT_FORMATS`, not imported here: it
#: imports scipy, and the parser is built without it).
FORMATS = ("event", "pld", "fdp")


def privacy_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "privacy",
        help="a run's privacy loss for other accountants (dp_accounting DpEvent, PLD, f-DP "
        "curve); a design's privacy when agents drop out",
        description="Export the privacy loss of one threat's view of a run, as dpdl accounted it, "
        "for other accountants to compose with other releases (export); account a noise design "
        "against each threat when agents miss rounds (dropouts).",
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
    _dropouts_parser(actions)


def _dropouts_parser(actions: argparse._SubParsersAction) -> None:
    parser = actions.add_parser(
        "dropouts",
        help="a design's eps against each threat when agents miss rounds at a rate",
        description="Calibrate a noise design to (eps, delta) over T steps on a graph, draw "
        "--schedules dropout schedules at rate --dropout (schedule k: the one a run of seed "
        "--seed + k draws), account each exactly (each round's view of the messages that "
        "arrived, composed per coalition and agent), and print per threat the median, 95th "
        "percentile and max of the run's eps beside the eps without dropouts and the budget, "
        "and whether the design stays private at that rate or what it loses.",
    )
    parser.add_argument(
        "--method", required=True, help=f"noise design: {', '.join(MECHANISM_REGISTRY.names())}"
    )
    add_graph_arguments(parser)
    add_graph_seed_argument(parser)
    add_budget_arguments(parser)
    add_design_arguments(parser)
    add_arguments(parser, TrainConfig, groups=("dropouts",), skip=("dropout_schedule",))
    parser.add_argument(
        "--schedules",
        type=positive_int,
        default=20,
        metavar="K",
        help="dropout schedules drawn at --dropout's rate (default 20)",
    )
    add_threats_argument(parser)
    parser.add_argument(
        "--out", type=Path, default=None, help="JSON file to write the results to (default: none)"
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace --out when it exists (without it, an existing file is refused)",
    )
    parser.set_defaults(handler=_dropouts)


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


def _check_out(args: argparse.Namespace) -> None:
    """`--out`: a file, not a folder, and not one that exists unless `--overwrite`."""
    from dpdl.errors import ConfigError

    if args.out is not None and args.out.is_dir():
        raise ConfigError(f"--out {args.out} is a folder; give the JSON file to write")
    if args.out is not None and args.out.exists() and not args.overwrite:
        raise ConfigError(f"--out {args.out} exists; add --overwrite to replace it")


def _export(args: argparse.Namespace) -> int:
    from dpdl.accounting.export import export_json, view_of
    from dpdl.errors import ConfigError
    from dpdl.files import atomic_write, json_safe

    if not 0.0 < args.discretization < math.inf:
        raise ConfigError(
            f"--discretization must be a finite number > 0, got {args.discretization}"
        )
    _check_out(args)
    view = view_of(_reports(args.run, args.together), args.threat)
    data = export_json(view, args.format, args.discretization, args.points)
    text = json.dumps(json_safe(data), indent=1) + "\n"
    if args.out is None:
        sys.stdout.write(text)
    else:
        atomic_write(args.out, text.encode())
        print(f"{view.threat}: {args.format} written to {args.out}")
    return 0


def _dropouts(args: argparse.Namespace) -> int:
    from dpdl.accounting import AgentLevel, calibrate, dropout_risk
    from dpdl.cli.options import graph_and_weights
    from dpdl.errors import ConfigError
    from dpdl.experiments.noise import DEFAULT_THREATS
    from dpdl.files import atomic_write, json_safe
    from dpdl.mechanisms.registry import build_mechanism
    from dpdl.settings import DesignOptions, from_options
    from dpdl.threats import Colluding, threat_by_name

    if not 0.0 < args.dropout < 1.0:
        raise ConfigError(
            f"--dropout RATE: the rate at which agents miss rounds, in (0, 1); got {args.dropout}"
        )
    design = from_options(DesignOptions, args)
    if design.objective == "horizon":
        raise ConfigError("--objective horizon needs a run's step size: use 'dpdl noise'")
    _check_out(args)
    threats = tuple(threat_by_name(t) for t in args.threat) if args.threat else DEFAULT_THREATS
    graph, weights = graph_and_weights(args, args.method)
    n = graph.number_of_nodes()
    asked = [t for t in threats if not (isinstance(t, Colluding) and t.q >= n)]
    if args.threat and len(asked) < len(threats):
        raise ConfigError(f"a coalition of {n} or more agents leaves no honest agent among {n}")
    relation = AgentLevel(args.clip)
    calibration = calibrate(args.eps, args.delta, args.steps, relation, args.calibration)
    mechanism = build_mechanism(args.method, graph, weights, calibration, design)
    how = "with" if args.dropout_recovery else "without"
    print(
        f"{args.method} on {args.graph} (n={n}), eps={args.eps:g} delta={args.delta:g} "
        f"T={args.steps} C={args.clip:g}; dropout rate {args.dropout:g} {how} seed recovery, "
        f"{args.schedules} schedules (seeds {args.seed}..{args.seed + args.schedules - 1})"
    )
    print(f"  {'threat':<20} {'no dropout':>10} {'median':>10} {'p95':>10} {'max':>10}  verdict")
    risks = []
    for threat in asked:
        risk = dropout_risk(
            mechanism, threat, relation, args.steps, args.delta, args.dropout, args.schedules,
            args.seed, args.dropout_recovery, args.eps,
        )  # fmt: skip
        risks.append(risk)
        bound = "" if risk.exact else " (upper bound: full collusion)"
        print(
            f"  {risk.threat:<20} {risk.no_dropout:>10.4g} {risk.median:>10.4g} "
            f"{risk.p95:>10.4g} {risk.worst:>10.4g}  {risk.verdict}{bound}"
        )
    for risk in risks:
        print(risk.statement())
    if args.out is not None:
        data = {
            "method": args.method,
            "graph": args.graph,
            "n": n,
            "eps": args.eps,
            "delta": args.delta,
            "steps": args.steps,
            "clip": args.clip,
            "calibration": args.calibration,
            "dropout": args.dropout,
            "recovery": args.dropout_recovery,
            "schedules": args.schedules,
            "seed": args.seed,
            "threats": [risk.as_dict() for risk in risks],
        }
        atomic_write(args.out, (json.dumps(json_safe(data), indent=1) + "\n").encode())
        print(f"results: {args.out}")
    return 0
