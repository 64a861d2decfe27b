"""Benchmark of drawing a connected Erdos-Renyi graph, the previous way and this one, in one run.

:func:`dpdl.graphs.topologies.erdos_renyi` drew G(n, p) with networkx's ``gnp_random_graph``,
which visits all n(n-1)/2 pairs; from :data:`~dpdl.graphs.topologies.LARGE_ERDOS_RENYI` agents on
it now draws with ``fast_gnp_random_graph`` (O(n + m)). For n in 2,000, 5,000 and 10,000 at mean
degree 20, this times both on the same seed (a connected draw, connectivity checked as the
function checks it), then the new way alone at 100,000 agents (the quadratic draw would visit
5e9 pairs), with the mean degree each drew. Figures go to stdout and to the ``bench_graphs``
section of ``BENCHMARKS.md``. Run from the repository root: ``.venv/bin/python
benchmarks/bench_graphs.py`` (about a minute).
"""

from __future__ import annotations

import argparse
import time

import networkx as nx
import numpy as np

from _report import markers, measured, write_section  # benchmarks/_report.py
from dpdl.graphs.topologies import erdos_renyi

START, END = markers("bench_graphs")
DEGREE = 20.0
BOTH = (2_000, 5_000, 10_000)
LARGE = 100_000


def previous(n: int, p: float, seed: int) -> nx.Graph:
    """The first connected draw as :func:`erdos_renyi` made it before: ``gnp_random_graph``."""
    seq = np.random.SeedSequence(seed)
    for attempt in range(1000):
        child = np.random.SeedSequence(seq.entropy, spawn_key=(*seq.spawn_key, attempt))
        graph = nx.gnp_random_graph(n, p, seed=np.random.default_rng(child))
        if nx.is_connected(graph):
            return graph
    raise RuntimeError("no connected draw")


def _timed(function, *args) -> tuple[float, nx.Graph]:
    start = time.perf_counter()
    graph = function(*args)
    return time.perf_counter() - start, graph


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    seed = parser.parse_args().seed
    lines = [
        START,
        "## Erdos-Renyi graphs at scale (`bench_graphs.py`)",
        "",
        f"A connected G(n, p) of mean degree {DEGREE:g} (p = {DEGREE:g} / (n - 1)), seed {seed}: "
        "`gnp_random_graph` (every pair, previous) against `fast_gnp_random_graph` (O(n + m), "
        "now, from 1,000 agents on), each with its connectivity check.",
        "",
        "| agents | every pair (previous) | O(n + m) (now) | speed-up | mean degree drawn (now) |",
        "| --- | --- | --- | --- | --- |",
    ]
    for n in (*BOTH, LARGE):
        p = DEGREE / (n - 1)
        fast, graph = _timed(erdos_renyi, n, p, seed)
        degree = 2 * graph.number_of_edges() / n
        if n in BOTH:
            slow, _ = _timed(previous, n, p, seed)
            lines.append(
                f"| {n:,} | {slow:.2f} s | {fast:.2f} s | {slow / fast:.0f}x | {degree:.2f} |"
            )
        else:
            lines.append(f"| {n:,} | not run (5e9 pairs) | {fast:.2f} s | | {degree:.2f} |")
    lines += ["", measured(f"networkx {nx.__version__}"), END, ""]
    text = "\n".join(lines)
    print(text)
    write_section(text, START, END)


if __name__ == "__main__":
    main()
