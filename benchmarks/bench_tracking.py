"""Benchmark of gradient tracking and of the attacks of the LPPA issue.

1. Per step, DSGT (:func:`dpdl.simulation.tracking.run_dsgt`: two gossip products and one batch
   gradient per step) against D-SGD (:func:`dpdl.simulation.run_dsgd`: one product) on the a9a
   setting of ``bench_engine.py`` (logistic regression, d = 123, Erdos-Renyi G(n, 0.5), batch 128,
   500 steps, no evaluation but the first and last records), without noise and with LPPA's
   Laplace noise flow injected every round (the costlier option), for n = 20 and n = 100.
2. One DLG attack (300 L-BFGS iterations) on DLG's two-convolution LeNet (MNIST, 9,814
   parameters), from an exact gradient and from a gradient under LPPA's noise.
3. The eavesdropper's membership test (20,000 trials per hypothesis, T = 100 steps) against LDP
   and DECOR at n = 10, the cost of one row of ``dpdl audit``.

Best of a few runs, wall clock. Figures go to stdout and to the ``bench_tracking`` section of
``BENCHMARKS.md``. Run from the repository root: ``.venv/bin/python benchmarks/bench_tracking.py``
(about two minutes on an idle 2-core machine).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import torch

from _report import markers, measured, write_section  # benchmarks/_report.py
from dpdl.accounting import AgentLevel, calibrate
from dpdl.attacks import invert_gradient, membership_lower_bound
from dpdl.graphs import build_graph, erdos_renyi, metropolis_hastings, mixing_matrix
from dpdl.mechanisms import NoNoise
from dpdl.mechanisms.lppa import lppa_noise
from dpdl.mechanisms.registry import build_mechanism
from dpdl.simulation import DSGDConfig, StepSize, run_dsgd
from dpdl.simulation.tracking import run_dsgt
from dpdl.tasks import TaskOptions, build_task
from dpdl.tasks.base import Batch

STEPS, REPEATS = 500, 3
START, END = markers("bench_tracking")


def best(repeats: int, run: Callable[[], object]) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def engines(n: int) -> dict[str, float]:
    """Seconds per step of D-SGD, DSGT and DSGT with LPPA every round, on a9a with n agents."""
    task = build_task("logreg-a9a", n, 0)
    graph = build_graph("er", n, 0.5, seed=0)
    weights = mixing_matrix(graph)
    config = DSGDConfig(STEPS, StepSize(0.1), eval_every=STEPS)
    flow = lppa_noise(graph, 0.025, every_round=True)
    runs = {
        "D-SGD": lambda: run_dsgd(task, weights, NoNoise(n), config),
        "DSGT": lambda: run_dsgt(task, weights, config),
        "DSGT + LPPA every round": lambda: run_dsgt(task, weights, config, flow),
    }
    return {name: best(REPEATS, run) / STEPS for name, run in runs.items()}


def dlg() -> dict[str, float]:
    """Seconds of one DLG attack on MNIST's LeNet, from an exact and from an LPPA-noised
    gradient."""
    torch.set_num_threads(1)
    task = build_task("mnist-lenet", 5, 0, TaskOptions(partition="iid"))
    params = task.initial_params()
    rows = task.offsets[:-1]
    gradient = task.gradients(np.tile(params, (5, 1)), Batch(rows[:, None], np.ones((5, 1))), None)[
        0
    ]
    noise = lppa_noise(erdos_renyi(5, 0.5, 0, directed=True), 0.025).sample(
        np.random.default_rng(0), task.dim
    )[0]
    truth = task.inputs[:1].numpy()
    return {
        "DLG, exact gradient": best(
            1, lambda: invert_gradient(task, params, gradient, truth, 10, 300)
        ),
        "DLG, LPPA-noised gradient": best(
            1, lambda: invert_gradient(task, params, gradient + noise, truth, 10, 300)
        ),
    }


def membership() -> dict[str, float]:
    """Seconds of the membership test (20,000 trials, T = 100) against LDP and DECOR at n = 10."""
    graph = erdos_renyi(10, 0.5, 0)
    calibration = calibrate(10.0, 1e-5, 100, AgentLevel(0.1), "exact")
    out = {}
    for name in ("ldp", "decor"):
        mechanism = build_mechanism(name, graph, metropolis_hastings(graph), calibration)
        out[f"membership test, {name}"] = best(
            REPEATS, lambda: membership_lower_bound(mechanism, 0.2, 100, 1e-5)
        )
    return out


def main() -> None:
    per_step = {n: engines(n) for n in (20, 100)}
    attacks = {**dlg(), **membership()}
    lines = [
        START,
        "## Gradient tracking and the attacks (`benchmarks/bench_tracking.py`)",
        "",
        f"Per step on a9a (logistic regression, d = 123, G(n, 0.5), batch 128, {STEPS} steps; best "
        f"of {REPEATS}):",
        "",
        "| n | " + " | ".join(per_step[20]) + " | DSGT / D-SGD |",
        "| --- |" + " --- |" * (len(per_step[20]) + 1),
    ]
    for n, row in per_step.items():
        lines.append(
            f"| {n} | "
            + " | ".join(f"{1e3 * value:.2f} ms" for value in row.values())
            + f" | {row['DSGT'] / row['D-SGD']:.2f}x |"
        )
    lines += ["", "| attack | seconds |", "| --- | --- |"] + [
        f"| {name} | {value:.2f} |" for name, value in attacks.items()
    ]
    lines += [
        "",
        "DSGT computes one batch gradient per step like D-SGD and gossips twice (parameters and "
        "tracking variable); LPPA's every-round injection adds one Laplace draw per arc and a "
        "sparse incidence product.",
        "",
        measured(f"numpy {np.__version__}, torch {torch.__version__}"),
        END,
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    write_section(text, START, END)


if __name__ == "__main__":
    main()
