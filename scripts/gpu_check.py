"""The prepared GPU check (``make gpu-check``): dpdl's tests marked ``gpu`` and its GPU benchmarks
in one command, one markdown table written to a folder.

On a machine with one NVIDIA GPU (the device machines lent to this project: an H100 or an H200,
Python 3.12 and torch 2.11 preinstalled, no network; what the image lacks travels as wheels,
``make gpu-wheels``), it

1. states the environment (Python, torch, the card, its memory);
2. runs the tests marked ``gpu`` (``tests/gpu``: the engine on the card against the CPU, float64
   tasks to 1e-12, float32 models within their rounding, sparse mixing, ``fit``; the two-process
   NCCL runtime against the simulation where two GPUs exist, skipped with its reason otherwise);
3. times the GPU benchmarks, each case in a fresh process (``benchmarks/bench_torch_engine.py``'s
   cases, and a model of one's own through ``dpdl.fit``), against the goals of issue 47 on an
   H100;
4. times the ways to compute every agent's gradient on the card (``benchmarks/bench_strategies.py``:
   vmap over agents against a loop of replicas, per model family), from which ``TorchModelTask``'s
   ``auto`` rule for GPUs is to be confirmed;
5. writes ``OUT/gpu-check.md`` (the table) and ``OUT/gpu-check.json``, and prints the table.

``--dry-run`` runs all of it on the CPU with small sizes (the tests with ``DPDL_TEST_DEVICE=cpu``),
so that everything but the device is exercised on any machine. The data are the slices of
``tests/data`` unless ``DPDL_DATA_DIR`` names another folder. It takes under 8 minutes on an H100
(so that it runs twice within the 15 minutes of device time a session has), about 2 on 2 CPU
cores dry.

    python scripts/gpu_check.py OUT [--dry-run]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "benchmarks" / "bench_torch_engine.py"
STRATEGIES = ROOT / "benchmarks" / "bench_strategies.py"
sys.path.insert(0, str(ROOT / "benchmarks"))

#: Issue 47's goals on an H100 (seconds), by benchmark.
GOALS = {"cnn": 0.05, "facebook": 3.0, "large": 5.0}


def _environment(device: str) -> list[tuple[str, str]]:
    import torch

    rows = [("Python", platform.python_version()), ("torch", torch.__version__)]
    if device == "cuda":
        properties = torch.cuda.get_device_properties(0)
        rows += [
            ("card", f"{properties.name}, {properties.total_memory / 2**30:.0f} GiB"),
            ("GPUs", str(torch.cuda.device_count())),
        ]
    else:
        rows.append(("device", f"cpu ({os.cpu_count()} cores), dry run"))
    return rows


def _tests(device: str) -> tuple[str, bool, float]:
    """Run the tests marked gpu; their summary line, whether none failed, and the seconds."""
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-m", "gpu", "-p", "no:cacheprovider", "-rs",
         "tests/gpu", "tests/runtime"],
        cwd=ROOT, env={**os.environ, "DPDL_TEST_DEVICE": device}, capture_output=True, text=True,
        check=False,
    )  # fmt: skip
    print(done.stdout[-3000:], done.stderr[-2000:], sep="\n", flush=True)
    lines = reversed(done.stdout.splitlines())
    summary = next((line for line in lines if re.search(r"\d+ (passed|failed)", line)), "none ran")
    return summary.strip("= "), done.returncode == 0, time.perf_counter() - start


def _cases(dry: bool, graph_file: Path) -> list[tuple[str, str, list[str]]]:
    """(label, goal key, case of bench_torch_engine or own-cnn) of each benchmark."""
    a9a, facebook, large, cnn, own = (200, 20, 10, 1, 20) if dry else (5000, 1000, 100, 5, 500)
    return [
        (f"a9a, 20 agents, LDP, T = {a9a}", "",
         ["train", "er", "logreg-a9a", "ldp", str(a9a), "20"]),
        (f"Facebook (4039 agents), a9a, LDP, {facebook} steps", "facebook",
         ["train", "facebook", "logreg-a9a", "ldp", str(facebook), "20"]),
        (f"random 10-regular ({'1,000' if dry else '100,000'} agents), least squares, LDP, {large} "
         "steps", "large", ["train", f"edgelist:{graph_file}", "least-squares", "ldp", str(large),
                            "20"]),
        (f"MNIST CNN, 148 agents, one step (median of {cnn})", "cnn", ["cnn", "148", str(cnn)]),
        (f"own CNN through dpdl.fit, 8x8 digits, 16 agents, {own} steps", "",
         ["own-cnn", str(own)]),
    ]  # fmt: skip


def _own_cnn(steps: int, device: str) -> dict[str, float]:
    """A user's own small CNN (scikit-learn's 8x8 digits, two convolutions and a linear layer) on
    16 agents on a ring, example-level LDP, expected batch 32, through ``dpdl.fit``."""
    import torch
    from sklearn.datasets import load_digits
    from torch import nn
    from torch.nn import functional

    import dpdl

    digits = load_digits()
    inputs = (digits.data / 16.0).astype("float32").reshape(-1, 1, 8, 8)
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(),
        nn.Flatten(), nn.Linear(16 * 8 * 8, 10),
    )  # fmt: skip

    def loss(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return functional.cross_entropy(outputs, targets, reduction="none")

    start = time.perf_counter()
    result = dpdl.fit(
        model, loss, train=(inputs[:1500], digits.target[:1500]),
        test=(inputs[1500:], digits.target[1500:]), graph="ring", n=16, mechanism="ldp", eps=10.0,
        steps=steps, lr=0.5, clip_level="example", batch_size=32, seed=0, device=device,
        eval_every=steps,
    )  # fmt: skip
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "value": result.final_metrics["test_accuracy"]}


def _benchmark(case: list[str], device: str) -> dict:
    from _report import run_case  # benchmarks/_report.py

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get(
        "PYTHONPATH", "")])}  # fmt: skip
    if case[0] == "own-cnn":
        return run_case(__file__, [*case, device], env)
    return run_case(str(BENCH), [*case, device], env)


def _goal(key: str, outcome: dict, device: str) -> str:
    if not key:
        return ""
    if device != "cuda" or "error" in outcome:
        return f"< {GOALS[key]:g} s on an H100"
    met = outcome["seconds"] < GOALS[key]
    return f"< {GOALS[key]:g} s: {'met' if met else 'not met'}"


def _strategies(device: str, dry: bool) -> str:
    """The table of ``bench_strategies.py`` on ``device`` (an eighth of the agents dry), or the
    last line of its error."""
    command = [sys.executable, str(STRATEGIES), "--device", device, "--no-write", "--no-compile"]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT / "benchmarks")]),
    }
    done = subprocess.run(
        [*command, *(["--small"] if dry else [])], capture_output=True, text=True, env=env,
        check=False,
    )  # fmt: skip
    lines = [line for line in done.stdout.splitlines() if line.startswith("|")]
    if done.returncode != 0 or not lines:
        return f"bench_strategies failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}"
    return "\n".join(lines)


def _table(environment, tests, rows) -> str:
    summary, passed, seconds = tests
    lines = [
        "| check | result | seconds | goal |",
        "| --- | --- | ---: | --- |",
        *(f"| {name} | {value} | | |" for name, value in environment),
        f"| tests marked gpu | {summary} | {seconds:.0f} | all pass: {'yes' if passed else 'NO'} |",
        *rows,
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", type=Path, help="folder for gpu-check.md and .json")
    parser.add_argument("--dry-run", action="store_true", help="on the CPU, small sizes")
    parser.add_argument("--case", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:  # a child: one benchmark, one JSON line
        import resource

        outcome = _own_cnn(int(args.case[1]), args.case[2])
        outcome["peak_gb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9
        print(json.dumps(outcome))
        return 0
    if args.out is None:
        parser.error("give the folder to write the table into")
    import torch

    device = "cpu" if args.dry_run else "cuda"
    if device == "cuda" and not torch.cuda.is_available():
        print("torch sees no GPU here: run with --dry-run for the CPU dry run", file=sys.stderr)
        return 2
    os.environ.setdefault("DPDL_DATA_DIR", str(ROOT / "tests" / "data"))
    start = time.perf_counter()
    environment = _environment(device)
    tests = _tests(device)
    rows, outcomes = [], {}
    with tempfile.TemporaryDirectory() as folder:
        from _report import random_regular_file  # benchmarks/_report.py

        graph_file = random_regular_file(Path(folder), 1_000 if args.dry_run else 100_000, 10)
        for label, key, case in _cases(args.dry_run, graph_file):
            outcome = _benchmark(case, device)
            outcomes[label] = outcome
            print(label, outcome, flush=True)
            seconds = outcome.get("error") or f"{outcome['seconds']:.3f}"
            peak = f"; peak {outcome['peak_gb']:.2f} GB" if "peak_gb" in outcome else ""
            rows.append(f"| {label} | {device}{peak} | {seconds} | {_goal(key, outcome, device)} |")
    table = _table(environment, tests, rows)
    strategies = _strategies(device, args.dry_run)
    took = time.perf_counter() - start
    text = (
        f"## GPU check ({dict(environment).get('card', 'dry run on the CPU')})\n\n"
        f"`make gpu-check`, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {took:.0f} s in "
        f"all.\n\n{table}\n\nEvery agent's gradient, by strategy:\n\n{strategies}\n"
    )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "gpu-check.md").write_text(text)
    (args.out / "gpu-check.json").write_text(
        json.dumps({"environment": environment, "tests": tests, "benchmarks": outcomes}, indent=1)
    )
    print(text)
    return 0 if tests[1] else 1


if __name__ == "__main__":
    raise SystemExit(main())
