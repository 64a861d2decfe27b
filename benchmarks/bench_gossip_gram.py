"""Benchmark of H of Lemma 12 for a reversible gossip: the geometric-sum route against the general
route it replaced, and every agent's H_i (MAFALDA-L-SGD).

Setting: the MAFALDA-SGD authors' gossip ``w_ij = 1 / (deg_i + 1)`` (row-stochastic, not
symmetric on an irregular graph, but reversible), T = 320 steps (their k = 20 passes of b = 16
batches), on the largest component of Facebook ego network 414 (n = 148) and on the 271-node
Gnutella sample that stands in for PeerTube in Fig. 5.

What is measured (wall clock, ``time.perf_counter``, one run each, BLAS with its default threads):
``utility_gram`` by the reversible route (the fixed W) and by the general route (the same W given as
a time-varying sequence), their largest relative difference, and ``agent_utility_grams`` by both
routes (the general one on the Facebook ego graph only). Figures go to stdout and, between
``<!-- bench_gossip_gram:start -->`` and ``<!-- bench_gossip_gram:end -->``, to ``BENCHMARKS.md``.
Run from the repository root with the full data sets:
``DPDL_DATA_DIR=... .venv/bin/python benchmarks/bench_gossip_gram.py`` (a few minutes, the general
route's).
"""

from __future__ import annotations

import time
import warnings

import numpy as np

from _report import markers, measured, write_section  # benchmarks/_report.py
from dpdl.factorization.mafalda import agent_utility_grams, utility_gram
from dpdl.graphs import NotDoublyStochasticWarning, build_graph, mixing_matrix

GRAPHS = ("facebook-ego-414", "gnutella-271")
#: The graphs whose every H_i is also timed by the general route (on the Gnutella sample it would
#: take several minutes more).
PER_AGENT_GENERAL = ("facebook-ego-414",)
STEPS = 320


def timed(call):  # noqa: ANN001, ANN202 - a thunk and its result
    start = time.perf_counter()
    result = call()
    return result, time.perf_counter() - start


def main() -> None:
    rows = []
    for graph in GRAPHS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", NotDoublyStochasticWarning)
            weights = mixing_matrix(build_graph(graph), "local-degree")
        sequence = [weights] * STEPS
        fast, fast_seconds = timed(lambda: utility_gram(weights, STEPS))
        slow, slow_seconds = timed(lambda: utility_gram(sequence, STEPS))
        agents, agents_seconds = timed(lambda: agent_utility_grams(weights, STEPS))
        difference = float(np.abs(fast - slow).max() / np.abs(slow).max())
        general_agents_seconds = None
        if graph in PER_AGENT_GENERAL:
            general_agents, general_agents_seconds = timed(
                lambda: agent_utility_grams(sequence, STEPS)
            )
            difference = max(
                difference,
                float(np.abs(agents - general_agents).max() / np.abs(general_agents).max()),
            )
        rows.append(
            (
                graph,
                weights.shape[0],
                fast_seconds,
                slow_seconds,
                agents_seconds,
                general_agents_seconds,
                difference,
            )
        )
    start, end = markers("bench_gossip_gram")
    lines = [
        start,
        "## H of Lemma 12 for a reversible gossip (`benchmarks/bench_gossip_gram.py`)",
        "",
        measured(f"numpy {np.__version__} (BLAS threads: default)"),
        "",
        f"The authors' gossip 1 / (deg_i + 1), T = {STEPS}. Reversible route: a geometric sum over "
        "pairs of eigenvalues of diag(pi)^(1/2) W diag(pi)^(-1/2); general route: the same W as a "
        "time-varying sequence (what this gossip took before).",
        "",
        "| graph | n | H, reversible (s) | H, general (s) | every H_i, reversible (s) | every "
        "H_i, general (s) | largest relative difference |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for graph, n, fast, slow, agents, general_agents, difference in rows:
        general = "-" if general_agents is None else f"{general_agents:.1f}"
        lines.append(
            f"| {graph} | {n} | {fast:.3f} | {slow:.1f} | {agents:.2f} | {general} | "
            f"{difference:.1e} |"
        )
    lines += [end, ""]
    text = "\n".join(lines)
    print(text)
    write_section(text, start, end)


if __name__ == "__main__":
    main()
