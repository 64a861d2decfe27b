"""`dpdl noise`: design one mechanism's noise for a graph and budget; report the variance left
after mixing and epsilon against each threat
([`dpdl.experiments.noise`][dpdl.experiments.noise])."""

from __future__ import annotations

import argparse
import json
import logging
import sys

from dpdl.choices import MECHANISM_REGISTRY
from dpdl.cli.options import (
    add_budget_arguments,
    add_design_arguments,
    add_graph_arguments,
    add_graph_seed_argument,
    add_plot_argument,
    add_threats_argument,
    graph_and_weights,
    output_folder,
)
from dpdl.settings import DesignOptions, from_options

logger = logging.getLogger(__name__)


def noise_parser(sub: argparse._SubParsersAction) -> None:
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
    add_threats_argument(parser)
    parser.add_argument(
        "--json", action="store_true", help="print the report as one JSON object on the last line"
    )
    add_plot_argument(
        parser,
        "heat maps of the noise covariance across agents, R, and of what one gossip round "
        "leaves of it, W R W^T",
    )
    parser.set_defaults(handler=_noise)


def _noise(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from dpdl.errors import ConfigError
    from dpdl.experiments.noise import DEFAULT_THREATS, noise_report
    from dpdl.experiments.results import json_safe
    from dpdl.scale import SPARSE_MIN_AGENTS
    from dpdl.threats import threat_by_name

    if args.plot is not None:
        output_folder(args.plot.parent, "--plot")
    graph, weights = graph_and_weights(args, args.method)
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
