"""Benchmark of the D-SGD engine (:func:`dpdl.simulation.dsgd.run_dsgd`) on the a9a setting.

Setting: logistic regression on a9a (d = 123), Erdos-Renyi G(n, p = 0.5) with Metropolis-Hastings
weights, T = 5000 steps, batch 128, agent-level clipping at C = 0.1, LDP noise calibrated to
eps = 10, delta = 1e-5, step size 0.1 (the CLI's default for logreg-a9a), seed 0.

What is measured, for n = 20 and n = 100 (wall clock, ``time.perf_counter``, best of a few runs):

1. The whole ``run_dsgd`` call with ``eval_every = 1000`` (6 evaluation records), and separately
   the cost of one evaluation record (``task.evaluate`` on the agents' parameters) and of the
   step-0 record (one row: every agent starts at the same point), so the evaluation share of the
   run is known. Target: under 10 s for n = 20.
2. Per step, over the same number of steps: the engine (a ``run_dsgd`` call with
   ``eval_every = steps``, minus its step-0 and final records) against a "bare" numpy loop doing
   only what a step cannot avoid, with the fastest numpy primitives: gather the batch rows
   ``np.take(X, idx, axis=0)`` (n, 128, d) and labels, margins by batched matmul, sigmoid, batched
   matmul back to (n, d) gradients, and one gossip product ``W @ (x - eta g)``.
   The bare loop cycles through batch indices drawn beforehand, so it excludes drawing indices,
   clipping, the regulariser and noise. Target: engine / bare within 3x. The cost of drawing the
   noise (``rng.standard_normal((n, d))``) and the batch indices (the engine's sampler) are
   reported on their own lines.

Figures go to stdout and, as the section between ``<!-- bench_engine:start -->`` and
``<!-- bench_engine:end -->``, to ``BENCHMARKS.md`` at the repository root (the rest of the file is
left alone, so other benchmark scripts can own other sections).

Run from the repository root: ``.venv/bin/python benchmarks/bench_engine.py`` (about 1.5 minutes
on an idle 2-core machine). The timings are memory-bound and slow down when other processes run
at the same time: the load average is recorded with the figures.
"""

from __future__ import annotations

import datetime
import os
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.special import expit

from _report import BENCHMARKS_FILE, markers, write_section  # benchmarks/_report.py
from dpdl.accounting.calibration import calibrate
from dpdl.accounting.neighbouring import AgentLevel
from dpdl.graphs import build_graph, mixing_matrix
from dpdl.jobspec.sampling import UniformSampler
from dpdl.mechanisms.base import NoiseMechanism
from dpdl.mechanisms.registry import build_mechanism
from dpdl.simulation.dsgd import DSGDConfig, StepSize, run_dsgd
from dpdl.tasks.base import Task
from dpdl.tasks.catalog import build_task

STEPS = 5000
EVAL_EVERY = 1000
BATCH = 128
CLIP = 0.1
EPS, DELTA = 10.0, 1e-5
ETA = 0.1
EDGE_PROBABILITY = 0.5
SEED = 0
#: Steps of the per-step comparison (engine, bare loop, noise, sampling), each timed best of
#: REPEATS.
COMPARE_STEPS = 500
REPEATS = 3
#: Whole-run repeats by n: a whole run at n = 100 takes about 30 s, so it is timed once.
WHOLE_RUN_REPEATS = {20: 3, 100: 1}
#: Distinct pre-drawn batches the bare loop cycles through (enough to touch all of a9a's rows).
BATCH_POOL = 64

START, END = markers("bench_engine")


@dataclass
class Setting:
    """Everything one ``run_dsgd`` call needs, for n agents."""

    task: Task
    weights: np.ndarray
    mechanism: NoiseMechanism


@dataclass
class Figures:
    """Measured seconds for one n."""

    n: int
    whole_run: float
    whole_run_repeats: int
    evaluation: float  # one evaluation record
    initial_evaluation: float  # the step-0 record, on one row
    engine_step: float
    bare_step: float
    noise_step: float
    sampling_step: float

    @property
    def ratio(self) -> float:
        return self.engine_step / self.bare_step


def best_times(repeats: int, runs: dict[str, Callable[[], object]]) -> dict[str, float]:
    """Smallest wall-clock time, in seconds, of ``repeats`` calls of each of ``runs``.

    The runs take turns within each repeat, so a burst of load from elsewhere on the machine hits
    all of them alike rather than one of them.
    """
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(repeats):
        for name, run in runs.items():
            start = time.perf_counter()
            run()
            best[name] = min(best[name], time.perf_counter() - start)
    return best


def build_setting(n: int) -> Setting:
    """The a9a setting for n agents, with LDP noise calibrated for the full T = 5000 steps."""
    task = build_task("logreg-a9a", n, SEED)
    graph = build_graph("er", n, EDGE_PROBABILITY, seed=SEED)
    weights = mixing_matrix(graph, "metropolis-hastings")
    calibration = calibrate(EPS, DELTA, STEPS, AgentLevel(CLIP))
    return Setting(task, weights, build_mechanism("ldp", graph, weights, calibration))


def engine_run(setting: Setting, steps: int, eval_every: int) -> Callable[[], object]:
    """One ``run_dsgd`` call on ``setting``, ready to be timed."""
    config = DSGDConfig(
        steps=steps,
        step_size=StepSize(ETA),
        clip=CLIP,
        clip_level="agent",
        batch_size=BATCH,
        eval_every=eval_every,
    )
    return lambda: run_dsgd(setting.task, setting.weights, setting.mechanism, config, seed=SEED)


def evaluation_record(task: Task, rng: np.random.Generator, rows: int) -> Callable[[], object]:
    """One evaluation record (``task.evaluate``) on ``rows`` parameter vectors of a realistic
    size."""
    params = 0.01 * rng.standard_normal((rows, task.dim))
    return lambda: task.evaluate(params)


def bare_loop(setting: Setting, steps: int, rng: np.random.Generator) -> Callable[[], object]:
    """``steps`` bare D-SGD steps in plain numpy: batch gradients and one gossip product each."""
    task = setting.task
    sampler = UniformSampler(task.agent_sizes, BATCH)
    pool = [sampler.sample(rng).indices for _ in range(BATCH_POOL)]
    features, labels, weights = task.features, task.labels, setting.weights

    def run() -> np.ndarray:
        x = np.zeros((task.n_agents, task.dim))
        for t in range(steps):
            indices = pool[t % BATCH_POOL]
            rows, y = np.take(features, indices, axis=0), labels[indices]  # (n, B, d), (n, B)
            margins = y * np.matmul(rows, x[:, :, None])[:, :, 0]
            grads = np.matmul((-y * expit(-margins) / BATCH)[:, None, :], rows)[:, 0, :]
            x = weights @ (x - ETA * grads)
        return x

    return run


def noise_loop(n: int, dim: int, steps: int, rng: np.random.Generator) -> Callable[[], object]:
    """``steps`` draws of one step's noise, ``rng.standard_normal((n, d))``."""

    def run() -> None:
        for _ in range(steps):
            rng.standard_normal((n, dim))

    return run


def sampling_loop(task: Task, steps: int, rng: np.random.Generator) -> Callable[[], object]:
    """``steps`` draws of one step's batch indices by the engine's sampler."""
    sampler = UniformSampler(task.agent_sizes, BATCH)

    def run() -> None:
        for _ in range(steps):
            sampler.sample(rng)

    return run


def records(steps: int, eval_every: int) -> int:
    """Evaluation records of a run on every agent's row: every ``eval_every`` steps and the last
    step (the step-0 record evaluates one row)."""
    return steps // eval_every + (steps % eval_every != 0)


def measure(n: int) -> Figures:
    """All figures for n agents."""
    setting = build_setting(n)
    rng = np.random.default_rng(SEED)
    repeats = WHOLE_RUN_REPEATS[n]
    whole_run = best_times(repeats, {"run": engine_run(setting, STEPS, EVAL_EVERY)})["run"]
    times = best_times(
        REPEATS,
        {
            "evaluation": evaluation_record(setting.task, rng, n),
            "initial": evaluation_record(setting.task, rng, 1),
            "engine": engine_run(setting, COMPARE_STEPS, COMPARE_STEPS),
            "bare": bare_loop(setting, COMPARE_STEPS, rng),
            "noise": noise_loop(n, setting.task.dim, COMPARE_STEPS, rng),
            "sampling": sampling_loop(setting.task, COMPARE_STEPS, rng),
        },
    )
    engine = (
        times["engine"]
        - records(COMPARE_STEPS, COMPARE_STEPS) * times["evaluation"]
        - times["initial"]
    )
    per_step = [
        value / COMPARE_STEPS
        for value in (engine, times["bare"], times["noise"], times["sampling"])
    ]
    return Figures(n, whole_run, repeats, times["evaluation"], times["initial"], *per_step)


def machine_facts() -> str:
    """Date, CPU count, Python and numpy versions, and the load from other processes."""
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    return (
        f"{now}; CPUs (os.cpu_count()): {os.cpu_count()}; Python {platform.python_version()}; "
        f"numpy {np.__version__}; {platform.machine()} {platform.system()}; "
        f"load average at the end (1, 5, 15 min): {load}"
    )


def whole_run_table(figures: list[Figures]) -> list[str]:
    """Markdown table of the whole-run timings and their evaluation share."""
    count = records(STEPS, EVAL_EVERY)
    lines = [
        "| n | `run_dsgd` wall clock (s) | timed | evaluation records (s) | steps without "
        "evaluation (ms/step) |",
        "|---:|---:|---|---:|---:|",
    ]
    for f in figures:
        evaluation = count * f.evaluation + f.initial_evaluation
        timed = f"best of {f.whole_run_repeats}" if f.whole_run_repeats > 1 else "once"
        lines.append(
            f"| {f.n} | {f.whole_run:.2f} | {timed} | {evaluation:.2f} ({count} x "
            f"{f.evaluation * 1e3:.0f} ms + {f.initial_evaluation * 1e3:.1f} ms at step 0) | "
            f"{(f.whole_run - evaluation) / STEPS * 1e3:.3f} |"
        )
    return lines


def per_step_table(figures: list[Figures]) -> list[str]:
    """Markdown table of the per-step costs: engine, bare loop, noise, sampling and the rest."""
    lines = [
        "| n | engine (ms/step) | bare numpy (ms/step) | engine / bare | noise draw (ms/step) "
        "| batch sampling (ms/step) | rest of the engine (ms/step) |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for f in figures:
        rest = f.engine_step - f.bare_step - f.noise_step - f.sampling_step
        lines.append(
            f"| {f.n} | {f.engine_step * 1e3:.3f} | {f.bare_step * 1e3:.3f} | {f.ratio:.2f}x "
            f"| {f.noise_step * 1e3:.3f} | {f.sampling_step * 1e3:.3f} | {rest * 1e3:.3f} |"
        )
    return lines


def targets(figures: list[Figures]) -> list[str]:
    """Whether the timing targets are met, one markdown bullet each."""
    by_n = {f.n: f for f in figures}
    verdict = {True: "met", False: "MISSED"}
    lines = [
        f"- n = 20 whole run under 10 s: {verdict[by_n[20].whole_run < 10.0]} "
        f"({by_n[20].whole_run:.2f} s)."
    ]
    lines += [
        f"- n = {f.n} engine within 3x of bare: {verdict[f.ratio <= 3.0]} ({f.ratio:.2f}x)."
        for f in figures
    ]
    return lines


def section(figures: list[Figures]) -> str:
    """The markdown section this script owns, markers included."""
    lines = [
        START,
        "## D-SGD engine (`benchmarks/bench_engine.py`)",
        "",
        f"Measured {machine_facts()}.",
        "Times are wall clock (`time.perf_counter`), the best of the repeats stated; other "
        "processes running at the same time (see the load average) slow them down.",
        "",
        f"Setting: logistic regression on a9a (d = 123), Erdos-Renyi G(n, p = {EDGE_PROBABILITY}) "
        f"with Metropolis-Hastings W, T = {STEPS} steps, batch {BATCH}, agent-level clipping C = "
        f"{CLIP}, LDP noise calibrated to eps = {EPS:g}, delta = {DELTA:g}, step size {ETA}, seed "
        f"{SEED}.",
        "",
        f"### Whole run (T = {STEPS}, eval_every = {EVAL_EVERY})",
        "",
        *whole_run_table(figures),
        "",
        "An evaluation record is one `task.evaluate` call (train objective over all training "
        "rows, test loss and accuracy of every agent and of the average model), timed on its own, "
        f"best of {REPEATS}; the step-0 record evaluates one row, since every agent starts at the "
        "same point.",
        "",
        f"### Per step: engine vs bare numpy ({COMPARE_STEPS} steps each, best of {REPEATS})",
        "",
        *per_step_table(figures),
        "",
        f"- *engine*: a `run_dsgd` call of {COMPARE_STEPS} steps with eval_every = "
        f"{COMPARE_STEPS}, minus its step-0 and final evaluation records, divided by the steps.",
        "- *bare numpy*: per step, gather the batch rows `np.take(X, idx, axis=0)` (n, 128, d) "
        "and labels `y[idx]`, margins by batched `matmul`, `expit`, gradients by batched `matmul` "
        "(n, d), and one gossip product `W @ (x - eta g)` ((n, n) x (n, d)). Same data, shapes "
        f"and W as the engine; the batch indices cycle through {BATCH_POOL} batches drawn "
        "beforehand, so the bare loop excludes drawing indices, clipping, the regulariser and the "
        "noise.",
        "- *noise draw*: `rng.standard_normal((n, d))`, which the engine also does every step "
        "(then scales by sigma).",
        "- *batch sampling*: the engine's `UniformSampler.sample` (n x 128 indices).",
        "- *rest of the engine*: engine minus bare, noise and sampling: clipping, the L2 "
        "regulariser, the scaled noise add and Python overhead.",
        "",
        "Targets:",
        "",
        *targets(figures),
        END,
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    """Measure n = 20 and n = 100, print the section and write it to BENCHMARKS.md."""
    figures = []
    for n in WHOLE_RUN_REPEATS:
        print(f"measuring n = {n} ...", flush=True)
        figures.append(measure(n))
    text = section(figures)
    print(text)
    write_section(text, START, END)
    print(f"written to {BENCHMARKS_FILE}")


if __name__ == "__main__":
    main()
