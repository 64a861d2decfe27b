"""Benchmark of MAFALDA-SGD's offline cost: H of Lemma 12 and the L-BFGS factorization.

Setting: the largest component of Facebook ego network 414 (n = 148), Metropolis-Hastings W,
cyclic participation with b = 19 batches (k = T / 19 passes), as in ``mafalda-housing``.

What is measured (wall clock, ``time.perf_counter``, one run each, BLAS with its default threads):

1. ``utility_gram`` by the eigenvalue route (fixed symmetric W) for T = 95 ... 760, and by the
   general route (a time-varying gossip: the same W given as a sequence) for T up to 380;
2. ``optimize_local`` on that H: seconds, L-BFGS iterations, and the loss against independent
   noise (C = I) under the same participation;
3. correlation restarts: T = 1520 as 4 blocks of 380 (H's diagonal blocks, one block factorized).

Memory: the eigenvalue route and the optimiser hold a few T x T float64 matrices (8 T^2 bytes
each: 4.6 MB at T = 760); the general route holds the n x n blocks of one workload row
(8 n^2 T bytes: 67 MB at T = 380); the paper's direct construction needs (n T)^2 floats for
``(I (x) W) W_T`` (25 GB at T = 380). Figures go to stdout and, between
``<!-- bench_mafalda:start -->`` and ``<!-- bench_mafalda:end -->``, to ``BENCHMARKS.md``.
Run from the repository root: ``.venv/bin/python benchmarks/bench_mafalda.py`` (a few minutes).
"""

from __future__ import annotations

import time

import numpy as np

from _report import markers, measured, write_section  # benchmarks/_report.py
from dpdl.factorization.mafalda import (
    local_loss,
    optimize_local,
    restarted,
    utility_gram,
)
from dpdl.factorization.participation import Participation
from dpdl.graphs import build_graph, mixing_matrix

CYCLE = 19
STEPS = (95, 190, 380, 760)
GENERAL_STEPS = (95, 190, 380)
RESTART_STEPS, RESTART_BLOCK = 1520, 380


def timed(call):  # noqa: ANN001, ANN202 - a thunk and its result
    start = time.perf_counter()
    result = call()
    return result, time.perf_counter() - start


def main() -> None:
    weights = mixing_matrix(build_graph("facebook-ego-414"))
    n = weights.shape[0]
    rows = []
    for steps in STEPS:
        participation = Participation.cyclic(steps, steps // CYCLE, CYCLE)
        utility, eigen_seconds = timed(lambda: utility_gram(weights, steps))
        general_seconds = (
            timed(lambda: utility_gram([weights] * steps, steps))[1]
            if steps in GENERAL_STEPS
            else None
        )
        result, optimize_seconds = timed(lambda: optimize_local(utility, participation))
        identity = local_loss(utility, np.eye(steps), participation)
        rows.append((steps, eigen_seconds, general_seconds, optimize_seconds, result, identity))
    participation = Participation.cyclic(RESTART_STEPS, RESTART_STEPS // CYCLE, CYCLE)
    block_utility, block_seconds = timed(
        lambda: utility_gram(weights, RESTART_STEPS, block=RESTART_BLOCK)
    )
    block, block_optimize = timed(
        lambda: optimize_local(
            block_utility, Participation.cyclic(RESTART_BLOCK, RESTART_BLOCK // CYCLE, CYCLE)
        )
    )
    full_utility = utility_gram(weights, RESTART_STEPS)
    restart_loss = local_loss(full_utility, restarted(block.encoder, RESTART_STEPS), participation)
    restart_identity = local_loss(full_utility, np.eye(RESTART_STEPS), participation)

    start, end = markers("bench_mafalda")
    lines = [
        start,
        "## MAFALDA-SGD factorization (`benchmarks/bench_mafalda.py`)",
        "",
        measured(f"numpy {np.__version__} (BLAS threads: default)"),
        "",
        f"Facebook ego 414 (n = {n}), Metropolis-Hastings W, cyclic participation b = {CYCLE}, k = "
        f"T / {CYCLE}. Loss = sens^2 tr(H X^-1) (Lemma 12); DP-D-SGD is C = I.",
        "",
        "| T | H, eigenvalue route (s) | H, general route (s) | L-BFGS (s) | iterations | MAFALDA "
        "loss | DP-D-SGD loss | ratio |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for steps, eigen_seconds, general_seconds, optimize_seconds, result, identity in rows:
        general = f"{general_seconds:.2f}" if general_seconds is not None else "-"
        lines.append(
            f"| {steps} | {eigen_seconds:.3f} | {general} | {optimize_seconds:.2f} | "
            f"{result.iterations} | {result.loss:.4g} | {identity:.4g} | "
            f"{identity / result.loss:.2f}x |"
        )
    lines += [
        "",
        f"Correlation restarts, T = {RESTART_STEPS} in blocks of {RESTART_BLOCK}: H blocks "
        f"{block_seconds:.2f} s, L-BFGS {block_optimize:.2f} s ({block.iterations} iterations); "
        f"loss {restart_loss:.4g} against {restart_identity:.4g} for DP-D-SGD "
        f"({restart_identity / restart_loss:.2f}x).",
        end,
        "",
    ]
    text = "\n".join(lines)
    print(text)
    write_section(text, start, end)


if __name__ == "__main__":
    main()
