"""The torch engine against the numpy engine it replaced (issue 20, items 1 and 6), side by side in
one run.

Each case runs in a fresh Python process twice: once on this tree's ``src`` (the torch engine), and
once on the numpy engine's source, checked out from git at ``--baseline`` (default: the last commit
before the torch engine) into a temporary worktree. Both use this interpreter and its packages, the
same data and the same seeds, so the final metrics must agree to rounding (they are printed side by
side). Wall clock is ``time.perf_counter``; peak memory is the child's maximum resident set size.

Cases (the issue's list):

1. a9a logistic regression, 20 agents (Erdos-Renyi, p = 0.5), LDP, T = 5000, ``run_training``
   end to end. Goal: no slower than the numpy engine.
2. SNAP Facebook (4039 agents), a9a, LDP and DECOR, ``--facebook-steps`` steps (default 200: the
   numpy engine takes about half a second a step), ``run_training`` end to end, evaluated at the
   start and the end only; and LDP for 1000 steps on the torch engine alone. Goal (LDP, 1000
   steps): under 30 s and 1.5 GB.
3. A random 10-regular graph of 100,000 agents (an edge-list file), least squares, LDP, 100 steps.
   Goal: under 100 s and 8 GB.
4. The MNIST CNN (``mnist-cnn``) on 148 agents: the seconds of one D-SGD step (gradients, LDP noise,
   gossip), evaluation excluded (the median of ``--cnn-steps`` steps). Goal: 5x faster than the
   numpy engine's step.

With ``--device cuda`` (a GPU visible), the torch engine's cases also run there; the numpy engine
has no such option.

Run from the repository root with the full data folder set (``DPDL_DATA_DIR``):
``.venv/bin/python benchmarks/bench_torch_engine.py``. Writes the section between
``<!-- bench_torch_engine:start -->`` and ``<!-- bench_torch_engine:end -->`` of BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import tempfile
import time
from pathlib import Path

from _report import markers, measured, random_regular_file, run_case, write_section

ROOT = Path(__file__).resolve().parent.parent
#: The last commit of the numpy engine.
BASELINE = "f28a8ce"
RANDOM_AGENTS, RANDOM_DEGREE = 100_000, 10


def _train(
    graph: str, task: str, mechanism: str, steps: int, n: int, device: str
) -> dict[str, float]:
    from dpdl.experiments.train import TrainConfig, run_training

    config = TrainConfig(
        task=task, graph=graph, n=n, mechanism=mechanism, steps=steps, eval_every=steps
    )
    start = time.perf_counter()
    result = (
        run_training(config)
        if device == "numpy"
        else run_training(config, device=device)  # the torch engine's keyword
    )
    summary = result.summary()
    return {
        "seconds": time.perf_counter() - start,
        "n": summary["n"],
        "epsilon": summary["privacy"][0]["epsilon"],
        "metric": result.primary_metric,
        "value": summary[result.primary_metric],
    }


def _cnn_step(agents: int, steps: int, device: str) -> dict[str, float]:
    """The median seconds of one D-SGD step of the CNN, evaluation replaced by a constant."""
    import numpy as np

    from dpdl.graphs import build_graph, mixing_matrix
    from dpdl.mechanisms import LocalDP
    from dpdl.simulation import DSGDConfig, StepSize, run_dsgd
    from dpdl.tasks import build_task

    task = build_task("mnist-cnn", agents, 0)
    task.evaluate = lambda params: {task.primary_metric: 0.0}  # time the steps alone
    weights = mixing_matrix(build_graph("er", agents, p=0.05, seed=0))
    times: list[float] = []
    last = [time.perf_counter()]

    def tick(step: int, metrics: dict[str, float]) -> None:
        now = time.perf_counter()
        if step > 0:
            times.append(now - last[0])
        last[0] = now

    keywords = {} if device == "numpy" else {"device": device}
    config = DSGDConfig(
        steps=steps, step_size=StepSize(0.05), clip=0.1, batch_size=128, eval_every=1
    )
    run_dsgd(task, weights, LocalDP(agents, 1.0), config, callback=tick, **keywords)
    return {"seconds": float(np.median(times)), "n": agents, "dim": task.dim}


def _child(case: list[str]) -> None:
    """Run one case in this process and print its outcome as one JSON line."""
    try:
        if case[0] == "cnn":
            outcome = _cnn_step(int(case[1]), int(case[2]), case[3])
        else:
            outcome = _train(case[1], case[2], case[3], int(case[4]), int(case[5]), case[6])
    except Exception as error:  # a benchmark reports what failed instead of stopping
        outcome = {"error": f"{type(error).__name__}: {error}"}
    outcome["peak_gb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9
    print(json.dumps(outcome))


def _run(case: list[str], source: Path) -> dict:
    return run_case(__file__, case, {**os.environ, "PYTHONPATH": str(source)})


def _random_graph_file(folder: Path) -> Path:
    return random_regular_file(folder, RANDOM_AGENTS, RANDOM_DEGREE)


def _cell(outcome: dict, key: str, fmt: str) -> str:
    return outcome["error"] if "error" in outcome else format(outcome[key], fmt)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", nargs="+", help=argparse.SUPPRESS)
    parser.add_argument("--baseline", default=BASELINE, help="git revision of the numpy engine")
    parser.add_argument("--facebook-steps", type=int, default=200)
    parser.add_argument("--cnn-steps", type=int, default=5)
    parser.add_argument("--device", default="cpu", help="also run the torch engine here (cuda)")
    args = parser.parse_args()
    if args.case:
        _child(args.case)
        return
    import torch

    with tempfile.TemporaryDirectory() as folder:
        baseline = Path(folder) / "baseline"
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(baseline), args.baseline],
            check=True,
            capture_output=True,
        )
        try:
            rows = _measure(args, baseline / "src", Path(folder))
        finally:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(baseline)],
                check=False,
            )
    start, end = markers("bench_torch_engine")
    text = "\n".join(
        [
            start,
            "## Torch engine vs numpy engine (`benchmarks/bench_torch_engine.py`)",
            "",
            "Each case in a fresh process, on this tree (torch engine) and on the numpy engine "
            f"of commit `{args.baseline}`; time is wall clock, memory the process's peak resident "
            "set. " + measured(f"torch {torch.__version__} ({torch.get_num_threads()} threads)"),
            "",
            "| case | engine | time (s) | peak memory (GB) | result |",
            "|---|---|---:|---:|---|",
            *rows,
            end,
            "",
        ]
    )
    print(text)
    write_section(text, start, end)


def _measure(args: argparse.Namespace, baseline: Path, folder: Path) -> list[str]:
    engines = [("numpy", baseline, "numpy"), ("torch, cpu", ROOT / "src", "cpu")]
    if args.device != "cpu":
        engines.append((f"torch, {args.device}", ROOT / "src", args.device))
    graph_file = _random_graph_file(folder)
    steps = args.facebook_steps
    cases = [
        ("a9a, 20 agents, LDP, T = 5000", ["train", "er", "logreg-a9a", "ldp", "5000", "20"]),
        (
            f"Facebook (4039 agents), a9a, LDP, {steps} steps",
            ["train", "facebook", "logreg-a9a", "ldp", str(steps), "20"],
        ),
        (
            f"Facebook (4039 agents), a9a, DECOR, {steps} steps",
            ["train", "facebook", "logreg-a9a", "decor", str(steps), "20"],
        ),
        (
            "Facebook (4039 agents), a9a, LDP, 1000 steps",
            ["train", "facebook", "logreg-a9a", "ldp", "1000", "20"],
        ),
        (
            f"random {RANDOM_DEGREE}-regular ({RANDOM_AGENTS:,} agents), least squares, LDP, 100 "
            "steps",
            ["train", f"edgelist:{graph_file}", "least-squares", "ldp", "100", "20"],
        ),
        ("MNIST CNN, 148 agents, one step", ["cnn", "148", str(args.cnn_steps)]),
    ]
    rows = []
    for label, case in cases:
        for engine, source, device in engines:
            if engine == "numpy" and case[4:5] == ["1000"]:
                continue  # the goal's length, on the torch engine only (module doc)
            out = _run([*case, device], source)
            print(label, engine, out, flush=True)
            if "error" in out:
                result = ""
            elif case[0] == "cnn":
                result = f"d = {out['dim']:,}; median of {args.cnn_steps} steps"
            else:
                result = f"{out['metric']} {out['value']:.6g}; eps {out['epsilon']:.4g}"
            rows.append(
                f"| {label} | {engine} | {_cell(out, 'seconds', '.2f')} | "
                f"{out['peak_gb']:.2f} | {result} |"
            )
    return rows


if __name__ == "__main__":
    main()
