"""The ways to compute every agent's (clipped) gradient of a torch model, side by side per device
and model family (issue 47, item 2): what ``TorchModelTask``'s ``auto`` strategy is chosen from.

Model families and sizes (synthetic inputs and labels of the real shapes: the cost is the model's,
not the data's):

- ``MNIST CNN``: the catalogue's ``image_cnn`` (two convolutions, group norm, d = 20,586), 148
  agents, batches of 128: the 148-agent step of issue 47.
- ``own CNN``: a user's small CNN on 8x8 digits (two convolutions and a linear layer, d = 11,466),
  16 agents, batches of 32.
- ``MNIST MLP``: ``mnist-mlp``'s 784-64-10 network (d = 50,890), 16 agents, batches of 64: a
  sequence of linear layers, for which the ghost-norm path exists.

Methods, each timed as the best of 3 calls after a warm-up call (``time.perf_counter``):

- agent level (the batch gradient, clipped afterwards): ``vmap`` over agents; ``loop`` of replicas
  over a pool of threads (:mod:`dpdl.tasks.replicas`); ``loop, torch.compile``: the loop with each
  agent's forward and loss compiled by ``torch.compile`` (its compile time is given apart);
- example level (clip 0.1, every example's gradient clipped): nested ``vmap`` (agents, examples);
  ``loop`` of replicas, vmap over each agent's examples; ``loop, Opacus``: Opacus'
  ``GradSampleModule`` per-sample gradients on each replica (where Opacus is installed);
  ``ghost norms`` (:mod:`dpdl.tasks.linear_stack`; linear stacks only).

Every method's result is compared with the first one of its level (largest difference relative to
the largest entry). Run from the repository root on a quiet machine:
``.venv/bin/python benchmarks/bench_strategies.py [--device cuda]`` (about 5 minutes on 2 CPU
cores; ``--small``: an eighth of the agents, for the GPU check's dry run). Writes the section
between ``<!-- bench_strategies:start -->`` and ``<!-- bench_strategies:end -->`` of
BENCHMARKS.md (``--no-write``: print only).
"""

from __future__ import annotations

import argparse
import copy
import time
from collections.abc import Callable

import numpy as np
import torch
from torch import nn
from torch.nn import functional

from _report import markers, measured, write_section  # benchmarks/_report.py
from dpdl.tasks.base import Batch
from dpdl.tasks.catalog import image_cnn
from dpdl.tasks.torch_model import TorchModelTask

CLIP, REPEATS = 0.1, 3


def _loss(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return functional.cross_entropy(outputs, targets, reduction="none")


def _own_cnn() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(),
        nn.Flatten(), nn.Linear(16 * 8 * 8, 10),
    )  # fmt: skip


def _mlp() -> nn.Module:
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 64), nn.ReLU(), nn.Linear(64, 10))


#: (label, network, input shape, agents, batch size) of each model family.
FAMILIES: list[tuple[str, Callable[[], nn.Module], tuple[int, ...], int, int]] = [
    ("MNIST CNN", image_cnn, (1, 28, 28), 148, 128),
    ("own CNN", _own_cnn, (1, 8, 8), 16, 32),
    ("MNIST MLP", _mlp, (1, 28, 28), 16, 64),
]


def _task(network: Callable[[], nn.Module], shape: tuple[int, ...], agents: int, batch: int):
    rng = np.random.default_rng(0)
    rows = agents * batch * 2
    inputs = rng.standard_normal((rows, *shape)).astype(np.float32)
    labels = rng.integers(0, 10, rows)
    torch.manual_seed(0)
    task = TorchModelTask(
        "bench", network(), _loss, inputs, labels, np.array_split(np.arange(rows), agents),
        inputs[:10], labels[:10],
    )  # fmt: skip
    indices = np.stack([task.offsets[i] + np.arange(batch) for i in range(agents)])
    return task, Batch(indices, np.full((agents, batch), 1.0 / batch))


def _opacus(task: TorchModelTask, params: torch.Tensor, batch: Batch) -> torch.Tensor | None:
    """Every agent's clipped gradient from Opacus' per-sample gradients, agent by agent."""
    try:
        from opacus import GradSampleModule
    except ImportError:
        return None
    module = GradSampleModule(copy.deepcopy(task.model), loss_reduction="sum")
    model_params = list(module.parameters())
    sizes = [p.numel() for p in model_params]
    rows = []
    for agent in range(len(params)):
        with torch.no_grad():
            for p, piece in zip(model_params, params[agent].float().split(sizes), strict=True):
                p.copy_(piece.view(p.shape))
                p.grad_sample = None
        index, weights = batch.indices[agent], batch.weights[agent].float()
        _loss(module(task.inputs[index]), task.targets[index]).sum().backward()
        per = torch.cat([p.grad_sample.reshape(len(index), -1) for p in model_params], dim=1)
        scale = torch.clamp(CLIP / per.norm(dim=1).clamp(min=1e-30), max=1.0) * weights
        rows.append(scale @ per)
    return torch.stack(rows).double()


def _compiled(task: TorchModelTask, params: torch.Tensor, batch: Batch) -> Callable[[], object]:
    """The loop of agents with each agent's forward and loss compiled; compiles on first call."""
    model = copy.deepcopy(task.model)
    forward = torch.compile(lambda x, y, w: (_loss(model(x), y) * w).sum())
    model_params = list(model.parameters())
    sizes = [p.numel() for p in model_params]

    def run() -> torch.Tensor:
        rows = []
        for agent in range(len(params)):
            with torch.no_grad():
                for p, piece in zip(model_params, params[agent].float().split(sizes), strict=True):
                    p.copy_(piece.view(p.shape))
            index = batch.indices[agent]
            value = forward(task.inputs[index], task.targets[index], batch.weights[agent].float())
            grads = torch.autograd.grad(value, model_params)
            rows.append(torch.cat([g.reshape(-1) for g in grads]))
        return torch.stack(rows).double()

    return run


def _best(call: Callable[[], torch.Tensor | None]) -> tuple[float, torch.Tensor | None]:
    result = call()
    if result is None:
        return float("nan"), None
    seconds = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        call()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        seconds.append(time.perf_counter() - start)
    return min(seconds), result


def _methods(task: TorchModelTask, params: torch.Tensor, batch: Batch, device: str):
    """(level, method, call) of every method that applies to the task's model on ``device``."""

    def strategy(name: str, clip: float | None, ghost: bool = True) -> Callable[[], torch.Tensor]:
        def call() -> torch.Tensor:
            task.strategy = name
            stack, task._linear_stack = task._linear_stack, task._linear_stack if ghost else None
            try:
                return task.gradients(params, batch, clip)
            finally:
                task._linear_stack = stack

        return call

    methods = [
        ("agent", "vmap", strategy("vmap", None)),
        ("agent", "loop", strategy("loop", None)),
        ("example", "vmap (nested)", strategy("vmap", CLIP, ghost=False)),
        ("example", "loop, vmap over examples", strategy("loop", CLIP)),
    ]
    if device == "cpu":
        methods.append(("example", "loop, Opacus", lambda: _opacus(task, params, batch)))
    if task._linear_stack is not None:
        methods.append(("example", "ghost norms", strategy("vmap", CLIP)))
    return methods


def _family_rows(label, network, shape, agents, size, device: str, compile_: bool) -> list[str]:
    task, batch = _task(network, shape, agents, size)
    label = f"{label} ({agents}, {size})"
    task.to(device)
    batch = batch.to(torch.device(device))
    params = (task.initial_params() + 0.05 * torch.randn(agents, task.dim, dtype=torch.float64,
              device=device))  # fmt: skip
    rows, first = [], {}
    methods = _methods(task, params, batch, device)
    if compile_ and device == "cpu":
        start = time.perf_counter()
        compiled = _compiled(task, params, batch)
        compiled()
        methods.append(
            ("agent", f"loop, torch.compile (compiled in {time.perf_counter() - start:.0f} s)",
             compiled)
        )  # fmt: skip
    for level, method, call in methods:
        seconds, result = _best(call)
        if result is None:
            rows.append(f"| {label} | {level} | {method} | not installed | |")
            continue
        reference = first.setdefault(level, result)
        difference = float((result - reference).abs().max() / reference.abs().max())
        print(label, level, method, f"{seconds:.3f} s", f"{difference:.1e}", flush=True)
        rows.append(f"| {label} | {level} | {method} | {seconds:.3f} | {difference:.1e} |")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    parser.add_argument("--no-write", action="store_true", help="print, leave BENCHMARKS.md")
    parser.add_argument("--small", action="store_true", help="an eighth of the agents (dry runs)")
    args = parser.parse_args()
    rows = []
    for label, network, shape, agents, batch in FAMILIES:
        agents = max(2, agents // 8) if args.small else agents
        rows += _family_rows(
            label, network, shape, agents, batch, args.device, compile_=not args.no_compile
        )
    device = args.device if args.device == "cpu" else torch.cuda.get_device_name()
    start, end = markers("bench_strategies")
    text = "\n".join([
        start,
        "## Per-agent gradients of torch models (`benchmarks/bench_strategies.py`)",
        "",
        f"Device: {device}. Seconds of one call computing every agent's gradient (best of "
        f"{REPEATS}); the difference is to the first method of the same level, relative to its "
        "largest entry. " + measured(f"torch {torch.__version__} ({torch.get_num_threads()} "
                                     "threads)"),
        "",
        "| model (agents, batch) | level | method | time (s) | difference |",
        "|---|---|---|---:|---:|",
        *rows,
        end,
        "",
    ])  # fmt: skip
    print(text)
    if not args.no_write:
        write_section(text, start, end)


if __name__ == "__main__":
    main()
