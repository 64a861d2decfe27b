"""`dpdl factorize`: MAFALDA-SGD's noise correlation for a graph and cyclic participation,
against DP-D-SGD, AntiPGD and the Toeplitz strategies (square root, BSR, BandMF, BISR, BLT;
`dpdl.experiments.factorize`)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from dpdl.cli.options import (
    add_graph_arguments,
    add_graph_seed_argument,
    add_overwrite_argument,
    claimed_output,
    graph_and_weights,
    output_folder,
)
from dpdl.settings import positive_int


def factorize_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "factorize",
        help="MAFALDA-SGD's noise correlation for a graph and cyclic participation, against "
        "DP-D-SGD (C = I), AntiPGD and the Toeplitz strategies sqrt, bsr, bandmf, bisr, blt",
        description="Optimise the local encoder of MAFALDA-SGD (Lemma 12, L-BFGS) for the graph's "
        "gossip under cyclic (k, b)-participation, and the Toeplitz strategies (square root, "
        "banded square root, BandMF and BLT optimised for the gossip, banded inverse square "
        "root); print each encoder's sensitivity, the error "
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
        "--participation",
        choices=("cyclic", "min-sep"),
        default="cyclic",
        help="what the sensitivities and sigmas are accounted under: cyclic (k, b) (default), or "
        "b-min-separated: at most k participations, any two at least b steps apart, anywhere "
        "(exact for Toeplitz encoders by closed form or when few patterns, else a certified upper "
        "bound, marked in the table); the encoders are still optimised for cyclic batches, the "
        "order training uses",
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
    group.add_argument(
        "--bands",
        type=positive_int,
        default=None,
        help="bands of bsr, bandmf (C banded) and bisr (C^-1 banded), at most T (or the restart "
        "block); default b, so that no two steps of one pattern share a band",
    )
    group.add_argument(
        "--buffer",
        type=positive_int,
        default=None,
        help="buffer size d of blt, buffered linear Toeplitz: d floats of noise state per agent "
        "and coordinate (default 4)",
    )
    group = parser.add_argument_group("output")
    group.add_argument(
        "--out",
        type=Path,
        default=None,
        help="results folder (default results/factorize/<graph>-k<k>-b<b>)",
    )
    add_overwrite_argument(group, "--out")
    group.add_argument(
        "--json", action="store_true", help="print the result as one JSON object on the last line"
    )
    parser.set_defaults(handler=_factorize)


def _factorize(args: argparse.Namespace) -> int:
    from dpdl.experiments.factorize import factorize, write_factorize
    from dpdl.jobspec.costs import FACTORIZE_ADVICE, factorize_estimate
    from dpdl.jobspec.resources import graph_size, require_fits

    name = (
        f"{args.graph.replace(':', '_').replace('/', '_')}-k{args.participations}-b{args.batches}"
    )
    out = output_folder(args.out or Path("results") / "factorize" / name)
    agents = graph_size(args.graph, args.n, args.p)
    if agents is not None:  # before the graph is built; the API checks again with W itself
        found = factorize_estimate(
            agents[0],
            args.participations,
            args.batches,
            args.restart,
            args.per_agent,
            True,
            agents[1],
        )
        what = f"the factorization (n = {agents[0]:,} agents, T = {found.steps:,} steps)"
        require_fits(found, what, log=False, advice=FACTORIZE_ADVICE)
    graph, weights = graph_and_weights(args)
    with claimed_output(args, out, "factorize"):
        result = factorize(
            weights,
            args.participations,
            args.batches,
            args.eps,
            args.delta,
            args.restart,
            args.per_agent,
            args.participation,
            args.bands,
            args.buffer,
        )
        table, summary, folder = write_factorize(result, out)
    print(
        f"{args.graph} (n={graph.number_of_nodes()}), T={result.steps} (k={args.participations}, "
        f"b={args.batches})"
        + (f", restarts every {args.restart}" if args.restart else "")
        + (", accounted under b-min-separation" if args.participation == "min-sep" else "")
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
