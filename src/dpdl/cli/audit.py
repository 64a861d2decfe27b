"""`dpdl audit`: every mechanism against every threat model, the accountant's epsilon beside
each threat's attack ([`dpdl.experiments.audit`][dpdl.experiments.audit]); with `--reconstruct`,
the gradient-reconstruction attack of curious agents instead
([`dpdl.experiments.reconstruction`][dpdl.experiments.reconstruction]); with `--views`, the
per-view canary audit ([`dpdl.experiments.views`][dpdl.experiments.views]); with both, both in
one report."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from dpdl.choices import DEFAULT_TRIALS, MECHANISM_REGISTRY, MULTISEED_MAX_N, VIEW_MECHANISMS
from dpdl.cli.options import (
    add_budget_arguments,
    add_graph_arguments,
    add_graph_seed_argument,
    add_output_arguments,
    add_plot_argument,
    claimed_output,
    graph_and_weights,
    output_folder,
)
from dpdl.errors import ConfigError
from dpdl.settings import positive_int

if TYPE_CHECKING:
    from dpdl.experiments.reconstruction import ReconstructionReport
    from dpdl.experiments.views import ViewAudit


def audit_parser(sub: argparse._SubParsersAction) -> None:
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
    _add_reconstruction_arguments(parser)
    _add_view_arguments(parser)
    add_output_arguments(parser, Path("results/audit"), "results/audit", "the audit")
    add_plot_argument(
        parser,
        "the bounds on epsilon per threat and mechanism: the accountant's upper bound beside the "
        "membership test's lower bounds",
    )
    parser.set_defaults(handler=_audit)


def _add_reconstruction_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("reconstruction attack")
    group.add_argument(
        "--reconstruct",
        action="store_true",
        help="instead of the membership audit: curious agents (--attackers) reconstruct every "
        "other agent's gradient from the messages they receive over the --steps rounds (El "
        "Mrini, Cyffers & Bellet, ICML 2024), on noiseless D-GD and each mechanism; writes "
        "reconstruction.csv and reconstruction.json; with --views, both audits on the same graph, "
        "budget and T, and one REPORT.md holding both tables",
    )
    group.add_argument(
        "--attackers",
        type=int,
        nargs="+",
        default=None,
        metavar="AGENT",
        help="with --reconstruct: the curious agents, one or a coalition (default: agent 0)",
    )
    group.add_argument(
        "--gradient-window",
        type=positive_int,
        default=None,
        metavar="STEPS",
        help="with --reconstruct: consecutive steps that share one gradient, each such "
        "gradient an unknown (default: all --steps, the paper's D-GD setting; 1: every step's "
        "gradient unknown)",
    )


def _link(text: str) -> tuple[int, int]:
    """`U-V` -> `(U, V)`, the directed link from U to V."""
    sender, _, receiver = text.partition("-")
    try:
        return int(sender), int(receiver)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"a link is SENDER-RECEIVER (two agent numbers), got {text!r}"
        ) from None


def _add_view_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("per-view canary audit (--views; dpdl.experiments.views)")
    group.add_argument(
        "--views",
        action="store_true",
        help="instead of the table of threats: plant a canary at one agent and audit what each "
        "adversary sees over the whole run (eavesdropper on all links and on some, a curious "
        "neighbour, a coalition, a non-neighbour): the accountant's eps for that view beside "
        "many-run and one-run lower bounds; --attack-trials is the number of coordinates "
        "(trials) of the one run; writes views.csv, views.json and REPORT.md (default "
        f"mechanisms: {' '.join(VIEW_MECHANISMS)})",
    )
    group.add_argument(
        "--canary-agent",
        type=int,
        default=None,
        metavar="U",
        help="agent holding the canary (default 0)",
    )
    group.add_argument(
        "--neighbour",
        type=int,
        default=None,
        metavar="V",
        help="the curious neighbour of U (default: U's first neighbour)",
    )
    group.add_argument(
        "--non-neighbour",
        type=int,
        default=None,
        metavar="W",
        help="the curious agent beyond U's neighbourhood (default: the agent farthest from U)",
    )
    group.add_argument(
        "--links",
        type=_link,
        nargs="+",
        default=None,
        metavar="S-R",
        help="directed links the partial eavesdropper taps (default: the links out of U)",
    )
    group.add_argument(
        "--coalition",
        type=int,
        nargs="+",
        default=None,
        metavar="A",
        help="agents colluding as one curious coalition (default: all of U's neighbours)",
    )


def _check_view_options(args: argparse.Namespace) -> None:
    """The per-view options without --views are an error, not ignored."""
    given = [
        option
        for option, value in (
            ("--neighbour", args.neighbour),
            ("--non-neighbour", args.non_neighbour),
            ("--links", args.links),
            ("--coalition", args.coalition),
            ("--canary-agent", args.canary_agent),
        )
        if value is not None
    ]
    if given and not args.views:
        verb = "applies" if len(given) == 1 else "apply"
        raise ConfigError(f"{', '.join(given)} only {verb} with --views")
    if args.views and args.plot is not None:
        raise ConfigError("--plot draws the table of threats; it does not apply with --views")


def _audit(args: argparse.Namespace) -> int:
    from dpdl.experiments.audit import require_audit_fits
    from dpdl.jobspec.resources import graph_size

    if not args.reconstruct:
        given = [
            option
            for option, value in (
                ("--attackers", args.attackers),
                ("--gradient-window", args.gradient_window),
            )
            if value is not None
        ]
        if given:
            raise ConfigError(f"{' and '.join(given)} only apply with --reconstruct")
    _check_view_options(args)
    output_folder(args.out)
    if args.reconstruct or args.views:
        return _view_audits(args)
    if args.plot is not None:
        output_folder(args.plot.parent, "--plot")
    agents = graph_size(args.graph, args.n, args.p)
    if agents is not None:  # before the graph is built; run_audit checks again on the graph
        require_audit_fits(agents, args.steps, args.attack_trials, args.mechanisms, log=False)
    graph, weights = graph_and_weights(args)
    with claimed_output(args, args.out, "audit"):
        return _run_audit(args, graph, weights)


def _run_audit(args: argparse.Namespace, graph: object, weights: object) -> int:
    from dpdl.experiments.audit import format_audit, run_audit, write_audit
    from dpdl.experiments.results import json_safe

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


def _check_reconstruction(args: argparse.Namespace) -> tuple[int, ...]:
    """The curious agents of `--reconstruct`, its options and size checked before the graph is
    built."""
    from dpdl.experiments.audit import audit_mechanisms
    from dpdl.experiments.reconstruction import check_attackers, require_reconstruction_fits
    from dpdl.jobspec.resources import graph_size

    if args.plot is not None:
        raise ConfigError("--plot draws the membership audit; --reconstruct has no figure")
    attackers = (0,) if args.attackers is None else tuple(args.attackers)
    if args.gradient_window is not None and args.gradient_window > args.steps:
        raise ConfigError(
            f"--gradient-window {args.gradient_window} is longer than the run (--steps "
            f"{args.steps})"
        )
    agents = graph_size(args.graph, args.n, args.p)
    if agents is not None:  # before the graph is built; run_reconstruction checks again
        check_attackers(attackers, agents[0])
        count = len(audit_mechanisms(agents[0], args.mechanisms))
        require_reconstruction_fits(*agents, args.steps, count, log=False)
    return attackers


def _view_audits(args: argparse.Namespace) -> int:
    """`--views`, `--reconstruct` or both on one graph, budget and T: each prints its table and
    writes its files; together they write one REPORT.md holding both."""
    from dpdl.experiments.reconstruction import reconstruction_section, write_reconstruction
    from dpdl.experiments.results import json_safe
    from dpdl.experiments.views import write_views

    attackers = _check_reconstruction(args) if args.reconstruct else None
    graph, weights = graph_and_weights(args)
    found: dict[str, object] = {}
    with claimed_output(args, args.out, "audit"):
        if args.views:
            audits, views_header = _run_views(args, graph, weights)
            found["rows"] = [audit.as_dict() for audit in audits]
        if attackers is not None:
            report, header = _run_reconstruction(args, graph, weights, attackers)
            write_reconstruction(report, args.out)
            found["reconstruction"] = report.as_dict()
        if args.views:
            sections = [] if attackers is None else [reconstruction_section(report, header)]
            write_views(audits, args.out, views_header, sections)
    print(f"\nresults: {args.out}")
    if args.json:  # alone, the reconstruction prints its report's object as it always did
        print(json.dumps(json_safe(found if args.views else found["reconstruction"])))
    return 0


def _run_reconstruction(
    args: argparse.Namespace, graph: object, weights: object, attackers: tuple[int, ...]
) -> tuple[ReconstructionReport, str]:
    """Run the reconstruction attack and print its table; returns its report and header."""
    from dpdl.experiments.reconstruction import format_reconstruction, run_reconstruction

    report = run_reconstruction(
        graph,
        weights,
        args.eps,
        args.delta,
        args.steps,
        args.clip,
        attackers,
        args.mechanisms,
        args.calibration,
        args.gradient_window,
        seed=args.seed,
    )
    header = (
        f"reconstruction: {args.graph} (n={graph.number_of_nodes()}), attackers "
        f"{list(attackers)}, eps={args.eps:g}, delta={args.delta:g}, T={args.steps}, "
        f"C={args.clip:g}, gradient window {report.window}; each mechanism calibrated "
        "against its own threat"
    )
    print(header)
    print(format_reconstruction(report))
    return report, header


def _run_views(
    args: argparse.Namespace, graph: object, weights: object
) -> tuple[list[ViewAudit], str]:
    """Run the per-view canary audit and print its table; returns its audits and header."""
    from dpdl.experiments.views import audit_views, canary_views, format_views

    agent = 0 if args.canary_agent is None else args.canary_agent
    views = canary_views(
        graph, agent, args.neighbour, args.non_neighbour, args.links, args.coalition
    )
    audits = audit_views(
        graph,
        weights,
        args.eps,
        args.delta,
        args.steps,
        args.clip,
        views,
        agent,
        args.calibration,
        args.attack_trials,
        args.seed,
        args.mechanisms or VIEW_MECHANISMS,
        progress=not args.no_progress,
    )
    header = (
        f"per-view canary audit: {args.graph} (n={graph.number_of_nodes()}), canary at agent "
        f"{agent}, eps={args.eps:g}, delta={args.delta:g}, T={args.steps}, "
        f"C={args.clip:g}, calibration {args.calibration}, {args.attack_trials:,} trials"
    )
    print(header)
    print(format_views(audits))
    return audits, header
