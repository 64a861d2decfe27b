"""Benchmark of per-example clipping for the MNIST network: ghost norms against torch.func.vmap.

Setting: the one-hidden-layer MNIST network of ``mnist-mlp`` (784-64-10, d = 50890), n agents
(16, as in DECOR's example-level experiment, and 20), Poisson batches of expected size 64,
per-example clipping at C = 1, one torch thread (as each reproduction worker runs).

What is measured (wall clock, ``time.perf_counter``, best of 3 repeats of 10 calls):

1. ``TorchModelTask.gradients`` with a clip through the ghost-norm path
   (:mod:`dpdl.tasks.linear_stack`, the default for this network) and through per-example
   gradients from ``torch.func.vmap`` (the generic path), on the same batches; the largest
   difference between the two results is printed as a check.
2. The batch gradient without clipping (agent-level privacy), for scale.

Target: the ghost path at least 10x faster than vmap. Figures go to stdout and, between
``<!-- bench_example_clipping:start -->`` and ``<!-- bench_example_clipping:end -->``, to
``BENCHMARKS.md``. Run from the repository root:
``.venv/bin/python benchmarks/bench_example_clipping.py`` (about a minute).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import torch

from _report import markers, measured, write_section  # benchmarks/_report.py
from dpdl.jobspec.sampling import PoissonSampler, UniformSampler
from dpdl.tasks.catalog import build_task
from dpdl.tasks.torch_model import TorchModelTask

BATCH, CLIP, REPEATS, CALLS = 64, 1.0, 3, 10


def best_seconds(call: Callable[[], object]) -> float:
    """Best of :data:`REPEATS` repeats of the mean time of :data:`CALLS` calls (after a warm-up
    call)."""
    call()
    best = np.inf
    for _ in range(REPEATS):
        start = time.perf_counter()
        for _ in range(CALLS):
            call()
        best = min(best, (time.perf_counter() - start) / CALLS)
    return best


def measure(n: int) -> dict[str, float]:
    task = build_task("mnist-mlp", n, seed=0)
    assert isinstance(task, TorchModelTask)
    rng = np.random.default_rng(0)
    params = task.initial_params() + 0.05 * rng.standard_normal((n, task.dim))
    poisson = PoissonSampler(task.agent_sizes, BATCH).sample(rng)
    uniform = UniformSampler(task.agent_sizes, BATCH).sample(rng)
    stack = task._linear_stack
    ghost_result = task.gradients(params, poisson, CLIP)
    ghost = best_seconds(lambda: task.gradients(params, poisson, CLIP))
    task._linear_stack = None
    vmap_result = task.gradients(params, poisson, CLIP)
    vmap = best_seconds(lambda: task.gradients(params, poisson, CLIP))
    task._linear_stack = stack
    batch = best_seconds(lambda: task.gradients(params, uniform, None))
    return {
        "ghost": ghost,
        "vmap": vmap,
        "batch": batch,
        "error": float(np.abs(ghost_result - vmap_result).max()),
        "scale": float(np.abs(vmap_result).max()),
    }


def main() -> None:
    torch.set_num_threads(1)
    rows = {n: measure(n) for n in (16, 20)}
    start, end = markers("bench_example_clipping")
    lines = [
        start,
        "## Per-example clipping (`benchmarks/bench_example_clipping.py`)",
        "",
        measured(f"torch {torch.__version__} (1 thread)"),
        "",
        f"MNIST network 784-64-10 (d = 50890), Poisson batches of expected size {BATCH}, "
        f"per-example clipping at C = {CLIP:g}; one `TorchModelTask.gradients` call for all "
        f"agents, best of {REPEATS} x {CALLS} calls.",
        "",
        "| n | ghost norms (ms/step) | torch.func.vmap per-example (ms/step) | speed-up | max "
        "difference (float32) | batch gradient, no clipping (ms/step) |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for n, row in rows.items():
        lines.append(
            f"| {n} | {1e3 * row['ghost']:.1f} | {1e3 * row['vmap']:.1f} | "
            f"{row['vmap'] / row['ghost']:.0f}x | {row['error']:.1e} (of values up to "
            f"{row['scale']:.2g}) | {1e3 * row['batch']:.1f} |"
        )
    met = all(row["vmap"] / row["ghost"] >= 10 for row in rows.values())
    lines += [
        "",
        f"Target: ghost norms at least 10x faster than vmap: {'met' if met else 'NOT met'}.",
        end,
        "",
    ]
    text = "\n".join(lines)
    print(text)
    write_section(text, start, end)


if __name__ == "__main__":
    main()
