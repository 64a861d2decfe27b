"""Deep models on the CPU (issue 47, item 2): this tree against an earlier commit, side by side in
one run.

Each case runs in a fresh Python process twice, on this tree's ``src`` and on ``--baseline``'s
(default: the commit before the agent-by-agent strategy), checked out into a temporary worktree,
with the same interpreter, data and seeds. Wall clock is ``time.perf_counter``; memory the child's
peak resident set.

1. The MNIST CNN (``mnist-cnn``) on 148 agents (Erdos-Renyi, p = 0.05), LDP, batches of 128: the
   median seconds of one D-SGD step (evaluation left out) at the agent level (clip 0.1) and at the
   example level (Poisson batches of expected size 128, every example clipped at 0.1). Goal: 5x
   faster than 7.8 s.
2. One evaluation of the 148 agents' CNN models (each agent's model and the average model on the
   test set, as the task defines it). Goal: under 15 s and 2 GB.
3. A user's own small CNN through ``dpdl.fit`` (scikit-learn's 8x8 digits, two convolutions and a
   linear layer, 16 agents on a ring, example-level LDP, expected batch 32, 500 steps), beside a
   plain hand-written torch loop doing the same work (per-example gradients by ``torch.func``,
   clipping, Gaussian noise, gossip), on an idle machine and on a loaded one (``--load K`` busy
   processes running beside it, one by default). Goal: ``fit`` never slower than the plain loop.

Run from the repository root with the full data folder set (``DPDL_DATA_DIR``), on a quiet
machine: ``.venv/bin/python benchmarks/bench_cnn.py`` (about 15 minutes on 2 cores; a case
stopped after ``--limit`` seconds, 300 by default, is reported as taking more). Writes the
section between ``<!-- bench_cnn:start -->`` and ``<!-- bench_cnn:end -->`` of BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _report import markers, measured, write_section

ROOT = Path(__file__).resolve().parent.parent
#: The last commit before the agent-by-agent strategy.
BASELINE = "1000af3"
AGENTS, OWN_STEPS = 148, 500


def _cnn_step(level: str, steps: int) -> dict[str, float]:
    """The median seconds of one D-SGD step of the CNN on 148 agents, evaluation left out."""
    import numpy as np

    from dpdl.graphs import build_graph, mixing_matrix
    from dpdl.mechanisms import LocalDP
    from dpdl.simulation import DSGDConfig, StepSize, run_dsgd
    from dpdl.tasks import build_task

    task = build_task("mnist-cnn", AGENTS, 0)
    task.evaluate = lambda params: {task.primary_metric: 0.0}
    weights = mixing_matrix(build_graph("er", AGENTS, p=0.05, seed=0))
    times: list[float] = []
    last = [time.perf_counter()]

    def tick(step: int, metrics: dict[str, float]) -> None:
        now = time.perf_counter()
        if step > 0:
            times.append(now - last[0])
        last[0] = now

    sampling = {"clip_level": "example", "sampling": "poisson"} if level == "example" else {}
    config = DSGDConfig(
        steps=steps, step_size=StepSize(0.05), clip=0.1, batch_size=128, eval_every=1, **sampling
    )
    result = run_dsgd(task, weights, LocalDP(AGENTS, 1.0), config, callback=tick)
    return {"seconds": float(np.median(times)), "check": float(np.abs(result.params).sum())}


def _cnn_evaluation() -> dict[str, float]:
    """Seconds of one evaluation of 148 distinct CNN models."""
    import torch

    from dpdl.tasks import build_task

    task = build_task("mnist-cnn", AGENTS, 0)
    generator = torch.Generator().manual_seed(0)
    noise = torch.randn(AGENTS, task.dim, generator=generator, dtype=torch.float64)
    params = task.initial_params() + 0.01 * noise
    start = time.perf_counter()
    metrics = task.evaluate(params)
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "check": metrics["test_accuracy_average_model"]}


def _digits():
    from sklearn.datasets import load_digits

    digits = load_digits()
    return (digits.data / 16.0).astype("float32").reshape(-1, 1, 8, 8), digits.target


def _own_model():
    import torch
    from torch import nn

    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(),
        nn.Flatten(), nn.Linear(16 * 8 * 8, 10),
    )  # fmt: skip


def _own_fit() -> dict[str, float]:
    """The own CNN through ``dpdl.fit``: seconds of the whole call."""
    from torch.nn import functional

    import dpdl

    inputs, labels = _digits()
    start = time.perf_counter()
    result = dpdl.fit(
        _own_model(), lambda o, t: functional.cross_entropy(o, t, reduction="none"),
        train=(inputs[:1500], labels[:1500]), test=(inputs[1500:], labels[1500:]), graph="ring",
        n=16, mechanism="ldp", eps=10.0, steps=OWN_STEPS, lr=0.5, clip_level="example",
        batch_size=32, seed=0, eval_every=OWN_STEPS, progress=False,
    )  # fmt: skip
    return {"seconds": time.perf_counter() - start, "check": result.final_metrics["test_accuracy"]}


def _own_plain() -> dict[str, float]:
    """The same work by hand: 16 agents on a ring, Poisson batches of expected size 32, every
    example's gradient (torch.func) clipped at 1, Gaussian noise, one gossip step, 500 steps."""
    import numpy as np
    import torch
    from torch.func import functional_call, grad, vmap
    from torch.nn import functional

    inputs, labels = _digits()
    x, y = torch.from_numpy(inputs[:1500]), torch.from_numpy(labels[:1500])
    model, n = _own_model(), 16
    names = [name for name, _ in model.named_parameters()]
    parts = np.array_split(np.random.default_rng(0).permutation(1500), n)
    mixing = torch.zeros(n, n)
    for i in range(n):
        mixing[i, i], mixing[i, (i + 1) % n], mixing[i, (i - 1) % n] = 1 / 3, 1 / 3, 1 / 3
    params = [{k: v.detach().clone() for k, v in model.named_parameters()} for _ in range(n)]

    def loss(p, example, target):
        out = functional_call(model, p, (example[None],))
        return functional.cross_entropy(out, target[None])

    per_example = vmap(grad(loss), in_dims=(None, 0, 0))
    rng = np.random.default_rng(1)
    start = time.perf_counter()
    for _ in range(OWN_STEPS):
        updates = []
        for i in range(n):
            rows = parts[i][rng.random(len(parts[i])) < 32 / len(parts[i])]
            grads = per_example(params[i], x[rows], y[rows])
            norms = torch.sqrt(sum((g.reshape(len(rows), -1) ** 2).sum(1) for g in grads.values()))
            scale = torch.clamp(1.0 / norms.clamp(min=1e-12), max=1.0)
            updates.append({
                k: params[i][k] - 0.5 * ((g * scale.view(-1, *[1] * (g.dim() - 1))).sum(0)
                                         + torch.randn_like(params[i][k])) / 32
                for k, g in grads.items()
            })  # fmt: skip
        params = [
            {k: sum(mixing[i, j] * updates[j][k] for j in (i - 1, i, (i + 1) % n)) for k in names}
            for i in range(n)
        ]
    return {"seconds": time.perf_counter() - start, "check": 0.0}


CASES = {
    "step-agent": lambda: _cnn_step("agent", 3),
    "step-example": lambda: _cnn_step("example", 3),
    "evaluation": _cnn_evaluation,
    "own-fit": _own_fit,
    "own-plain": _own_plain,
}


def _child(case: str) -> None:
    try:
        outcome = CASES[case]()
    except Exception as error:  # a benchmark reports what failed instead of stopping
        outcome = {"error": f"{type(error).__name__}: {error}"}
    outcome["peak_gb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9
    print(json.dumps(outcome))


def _run(case: str, source: Path, load: int, limit: float) -> dict:
    """``case`` in a fresh process on ``source``, with ``load`` busy processes beside it, stopped
    after ``limit`` seconds (then reported as taking more)."""
    busy = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(load)
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(source)}
    try:
        if busy:
            time.sleep(65)  # the one-minute load average sees them, as a user's run would
        done = subprocess.run(
            [sys.executable, __file__, "--case", case], capture_output=True, text=True,
            env=env, timeout=limit, check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return {"error": f"> {limit:.0f}"}
    finally:
        for process in busy:
            process.kill()
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines:
        return {"error": (done.stderr.strip().splitlines() or ["no output"])[-1]}
    return json.loads(lines[-1])


def _rows(baseline: Path, load: int, limit: float) -> list[str]:
    cases = [
        ("MNIST CNN, 148 agents, one step, agent level", "step-agent", 0),
        ("MNIST CNN, 148 agents, one step, example level", "step-example", 0),
        ("MNIST CNN, 148 agents, one evaluation", "evaluation", 0),
        (f"own CNN through dpdl.fit, {OWN_STEPS} steps, idle machine", "own-fit", 0),
        (f"own CNN through dpdl.fit, {OWN_STEPS} steps, {load} busy process(es)", "own-fit", load),
        (f"own CNN, plain torch loop, {OWN_STEPS} steps, idle machine", "own-plain", 0),
        (f"own CNN, plain torch loop, {OWN_STEPS} steps, {load} busy process(es)", "own-plain",
         load),
    ]  # fmt: skip
    rows = []
    for label, case, busy in cases:
        trees = [("this tree", ROOT / "src")]
        if not case.startswith("own-plain"):
            trees.append((f"`{BASELINE}`", baseline))
        for tree, source in trees:
            out = _run(case, source, busy, limit)
            print(label, tree, out, flush=True)
            seconds = out["error"] if "error" in out else f"{out['seconds']:.2f}"
            peak = f"{out['peak_gb']:.2f}" if "peak_gb" in out else ""
            rows.append(f"| {label} | {tree} | {seconds} | {peak} |")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", nargs=1, help=argparse.SUPPRESS)
    parser.add_argument("--baseline", default=BASELINE, help="git revision to compare with")
    parser.add_argument("--load", type=int, default=1, help="busy processes of the loaded cases")
    parser.add_argument("--limit", type=float, default=300, help="seconds a case may take")
    args = parser.parse_args()
    if args.case:
        _child(args.case[0])
        return
    import torch

    with tempfile.TemporaryDirectory() as folder:
        baseline = Path(folder) / "baseline"
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(baseline), args.baseline],
            check=True, capture_output=True,
        )  # fmt: skip
        try:
            rows = _rows(baseline / "src", args.load, args.limit)
        finally:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(baseline)],
                check=False,
            )
    start, end = markers("bench_cnn")
    text = "\n".join([
        start,
        "## Deep models on the CPU (`benchmarks/bench_cnn.py`)",
        "",
        f"Each case in a fresh process, on this tree and on commit `{args.baseline}`; time is wall "
        "clock, memory the process's peak resident set. "
        + measured(f"torch {torch.__version__} (default {torch.get_num_threads()} threads)"),
        "",
        "| case | code | time (s) | peak memory (GB) |",
        "|---|---|---:|---:|",
        *rows,
        end,
        "",
    ])  # fmt: skip
    print(text)
    write_section(text, start, end)


if __name__ == "__main__":
    main()
