"""Every agent's gradient and scores of a torch model agent by agent, on replicas of the model over
a pool of threads: the CPU strategy of [`TorchModelTask`][dpdl.tasks.torch_model.TorchModelTask] for
convolutional models.

Why not `torch.func.vmap` over agents, as on a GPU: on a CPU, vmap over agents turns each
convolution into a grouped convolution with one group per agent, which oneDNN runs about 3x slower
than the same work as one ordinary convolution per agent (a step of 148 MNIST CNN agents, 128
examples each: 8.08 s by vmap, 1.35 s by this loop on an idle 2-core machine; BENCHMARKS.md, "Deep
models on the CPU").
Here each worker thread owns a replica of the model (channels-last where it has 2-d convolutions:
the layout oneDNN's convolution and pooling kernels are fastest in), loads one agent's parameters
into it, and runs an ordinary forward and backward pass on that agent's batch. The workers split
the agents between them, each with torch's intra-op parallelism set to one thread for the call:
many small kernels side by side beat each small kernel split over the cores (2 workers of one
thread: 9 ms an agent, against 13 ms for one worker of two threads). torch releases the GIL inside
its kernels, so the threads run in parallel.

Per-example gradients (example-level clipping) are `torch.func.vmap` over one agent's examples
on its worker's replica (`functional_call` swaps a module's parameters while it runs, so the
replica is the worker's own); Opacus' grad samplers were measured beside it and did not win.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import torch
from torch import nn
from torch.func import functional_call, grad, vmap

__all__ = ["ReplicaPool", "has_convolution"]

Loss = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]

#: Test examples one forward pass of an evaluation takes at most, so that its activations stay
#: bounded (the MNIST CNN: about 60 MB a pass).
EVAL_ROWS = 1024


def has_convolution(model: nn.Module) -> bool:
    """Whether `model` holds a convolution (`nn.Conv1d/2d/3d` or a transposed one)."""
    return any(isinstance(m, nn.modules.conv._ConvNd) for m in model.modules())


def _channels_last(model: nn.Module) -> bool:
    return any(isinstance(m, nn.Conv2d) for m in model.modules())


@contextmanager
def _intra_op_threads(threads: int) -> Iterator[None]:
    """torch's intra-op threads set to `threads` for the block, restored after it."""
    before = torch.get_num_threads()
    if before != threads:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        if before != threads:
            torch.set_num_threads(before)


class _Replica:
    """One worker's copy of the model, in float32 on the task's device."""

    def __init__(self, model: nn.Module, device: torch.device) -> None:
        self.model = copy.deepcopy(model).to(device=device, dtype=torch.float32)
        self.channels_last = _channels_last(self.model)
        if self.channels_last:
            self.model = self.model.to(memory_format=torch.channels_last)
        self.params = list(self.model.parameters())
        self.names = [name for name, _ in self.model.named_parameters()]
        self.sizes = [p.numel() for p in self.params]

    def inputs(self, inputs: torch.Tensor) -> torch.Tensor:
        if self.channels_last and inputs.dim() == 4:
            return inputs.contiguous(memory_format=torch.channels_last)
        return inputs

    def load(self, flat: torch.Tensor) -> None:
        """Copy one agent's flat float32 parameters into the replica (`copy_` keeps the
        replica's memory layout)."""
        with torch.no_grad():
            for param, piece in zip(self.params, torch.split(flat, self.sizes), strict=True):
                param.copy_(piece.view(param.shape))

    def batch_gradient(
        self, flat: torch.Tensor, inputs: torch.Tensor, targets: torch.Tensor,
        weights: torch.Tensor, loss: Loss,
    ) -> torch.Tensor:  # fmt: skip
        """`grad sum_b weights[b] * loss(example b)` at `flat`, flat `(d,)`."""
        self.load(flat)
        value = (loss(self.model(self.inputs(inputs)), targets) * weights).sum()
        grads = torch.autograd.grad(value, self.params)
        return torch.cat([g.reshape(-1) for g in grads])

    def clipped_gradient(
        self, flat: torch.Tensor, inputs: torch.Tensor, targets: torch.Tensor,
        weights: torch.Tensor, loss: Loss, clip: float,
    ) -> torch.Tensor:  # fmt: skip
        """`sum_b weights[b] * clip(grad loss(example b), clip)`, flat `(d,)`: per-example
        gradients by vmap over the examples."""
        shapes = [p.shape for p in self.params]

        def example_loss(
            vector: torch.Tensor, example: torch.Tensor, target: torch.Tensor
        ) -> torch.Tensor:
            pieces = torch.split(vector, self.sizes)
            named = {n: t.view(s) for n, t, s in zip(self.names, pieces, shapes, strict=True)}
            return loss(functional_call(self.model, named, (example[None],)), target[None])[0]

        per_example = vmap(grad(example_loss), in_dims=(None, 0, 0))(flat, inputs, targets)
        norms = torch.linalg.vector_norm(per_example, dim=1)
        scale = torch.clamp(clip / torch.clamp(norms, min=1e-30), max=1.0) * weights
        return scale @ per_example

    def scores(
        self, flat: torch.Tensor, inputs: torch.Tensor, targets: torch.Tensor, loss: Loss,
        classification: bool,
    ) -> tuple[float, float]:  # fmt: skip
        """Mean loss and accuracy (NaN unless `classification`) of the model at `flat` on
        `inputs`, in passes of at most `EVAL_ROWS` rows."""
        self.load(flat)
        total, correct = 0.0, 0
        with torch.no_grad():
            for start in range(0, len(targets), EVAL_ROWS):
                outputs = self.model(self.inputs(inputs[start : start + EVAL_ROWS]))
                rows = targets[start : start + EVAL_ROWS]
                total += float(loss(outputs, rows).double().sum())
                if classification:
                    correct += int((outputs.argmax(dim=-1) == rows).sum())
        count = len(targets)
        return total / count, (correct / count if classification else math.nan)


class ReplicaPool:
    """Workers with a replica of `model` each, on `device`: as many as torch's intra-op
    threads at the call (at most one per job), each running one thread. Every job runs on one
    thread whatever the count, so the results do not depend on it."""

    def __init__(self, model: nn.Module, device: torch.device) -> None:
        self.model, self.device = model, device
        self._replicas: list[_Replica] = []
        self._executor: ThreadPoolExecutor | None = None
        self._executor_size = 0

    def _workers(self, jobs: int) -> list[_Replica]:
        wanted = max(1, min(torch.get_num_threads(), jobs))
        while len(self._replicas) < wanted:
            self._replicas.append(_Replica(self.model, self.device))
        if wanted > 1 and self._executor_size < wanted:
            if self._executor is not None:
                self._executor.shutdown()
            self._executor = ThreadPoolExecutor(wanted, thread_name_prefix="dpdl-agents")
            self._executor_size = wanted
        return self._replicas[:wanted]

    def map(self, work: Callable[[_Replica, int], torch.Tensor], jobs: int) -> list[torch.Tensor]:
        """`[work(replica, j) for j in range(jobs)]`, the jobs dealt to the workers in turn."""
        workers = self._workers(jobs)

        def share(w: int) -> list[tuple[int, torch.Tensor]]:
            return [(j, work(workers[w], j)) for j in range(w, jobs, len(workers))]

        with _intra_op_threads(1):  # each job on one thread: the same rounding whatever the count
            if len(workers) == 1:
                return [value for _, value in share(0)]
            assert self._executor is not None
            shares = list(self._executor.map(share, range(len(workers))))
        results: list[torch.Tensor] = [torch.empty(0)] * jobs
        for share_ in shares:
            for j, value in share_:
                results[j] = value
        return results

    def gradients(
        self, flat: torch.Tensor, inputs: torch.Tensor, targets: torch.Tensor,
        weights: torch.Tensor, loss: Loss, clip: float | None,
    ) -> torch.Tensor:  # fmt: skip
        """Every agent's (clipped) batch gradient, `(n, d)` float32: agent `i` at `flat[i]`
        on `inputs[i]` (its batch, examples of weight zero left out)."""

        def agent(replica: _Replica, i: int) -> torch.Tensor:
            keep = weights[i] != 0
            x, t, w = inputs[i][keep], targets[i][keep], weights[i][keep]
            if len(w) == 0:
                return torch.zeros_like(flat[i])
            if clip is None:
                return replica.batch_gradient(flat[i], x, t, w, loss)
            return replica.clipped_gradient(flat[i], x, t, w, loss, clip)

        return torch.stack(self.map(agent, len(flat)))

    def scores(
        self, models: torch.Tensor, inputs: torch.Tensor, targets: torch.Tensor, loss: Loss,
        classification: bool,
    ) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
        """Mean loss and accuracy of each of `models` (m, d) on `inputs`: two `(m,)`
        float64 tensors."""

        def model(replica: _Replica, i: int) -> torch.Tensor:
            scores = replica.scores(models[i], inputs, targets, loss, classification)
            return torch.tensor(scores, dtype=torch.float64)

        table = torch.stack(self.map(model, len(models)))
        return table[:, 0], table[:, 1]
