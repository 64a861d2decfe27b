"""Any torch model as a dpdl task: all agents' parameters as one ``(n, d)`` tensor.

The model is used functionally (``torch.func.functional_call``) on a flat parameter vector, and
``torch.func.vmap`` batches it over agents, and over each agent's examples for per-example gradients
(example-level clipping): one call computes every agent's gradient, with no Python loop over agents
or examples. The engine holds every agent's parameters in float64 on the task's device (so the
privacy noise is added and the models mixed in float64, as for the linear tasks); the model runs in
float32 on a float32 copy of them, and its gradients are widened back to float64 on the device.
float32 is the precision these networks are trained in; the noise, whose scale the privacy claim
rests on, never passes through it. Per-example clipping of sequences of linear layers (the papers'
networks) takes the ghost-norm path of :mod:`dpdl.tasks.linear_stack` instead: the same result,
without materialising per-example gradients (about 40x faster for the MNIST network, BENCHMARKS.md).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from torch import nn
from torch.func import functional_call, grad, vmap

from dpdl.tasks.base import Batch, Task
from dpdl.tasks.linear_stack import LinearStack

__all__ = ["TorchModelTask"]

Loss = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


class TorchModelTask(Task):
    """Agents train copies of ``model`` on their own rows of ``train_inputs``; classification
    metrics (loss and accuracy over the test set, averaged over agents, and of the agents' average
    model) by default, the loss alone with ``classification=False`` (:meth:`evaluate`).

    ``loss`` maps (outputs (B, ...), targets (B,)) to per-example losses (B,). ``eval_chunk`` bounds
    the (agent, test example) pairs of one evaluation forward pass, for models whose activations
    would not fit for every agent on the whole test set at once (convolutions); None: one pass.
    """

    def __init__(
        self,
        name: str,
        model: nn.Module,
        loss: Loss,
        train_inputs: np.ndarray,
        train_targets: np.ndarray,
        partition: list[np.ndarray],
        test_inputs: np.ndarray,
        test_targets: np.ndarray,
        l2: float = 0.0,
        classification: bool = True,
        eval_chunk: int | None = None,
    ) -> None:
        self._names = [name_ for name_, _ in model.named_parameters()]
        self._shapes = [p.shape for _, p in model.named_parameters()]
        self._sizes = [p.numel() for _, p in model.named_parameters()]
        super().__init__(len(partition), int(sum(self._sizes)))
        self.name = name
        self.model = model
        self.loss = loss
        self.l2 = float(l2)
        self.classification = classification
        self.eval_chunk = eval_chunk
        order = np.concatenate(partition)
        self.inputs = torch.as_tensor(np.asarray(train_inputs)[order], dtype=torch.float32)
        self.targets = torch.as_tensor(np.asarray(train_targets)[order])
        self.offsets = np.concatenate([[0], np.cumsum([len(p) for p in partition])])
        self.test_inputs = torch.tensor(np.asarray(test_inputs), dtype=torch.float32)
        self.test_targets = torch.tensor(np.asarray(test_targets))
        with torch.no_grad():
            self._initial = torch.cat([p.detach().reshape(-1) for p in model.parameters()]).double()
        self._batch_gradients = vmap(grad(self._weighted_loss), in_dims=(0, 0, 0, 0))
        self._example_gradients = vmap(
            vmap(grad(self._example_loss), in_dims=(None, 0, 0)), in_dims=(0, 0, 0)
        )
        self._outputs = vmap(self._forward, in_dims=(0, None))
        self._linear_stack = LinearStack(model) if LinearStack.supports(model) else None
        #: Each agent's own metrics at the last :meth:`evaluate` (metric -> one value per agent,
        #: in agent order); empty before the first.
        self.agent_metrics: dict[str, tuple[float, ...]] = {}

    @property
    def agent_sizes(self) -> np.ndarray:
        return np.diff(self.offsets)

    def initial_params(self) -> torch.Tensor:
        return self._initial.clone()

    def to(self, device: torch.device | str) -> TorchModelTask:
        self.model.to(device)
        super().to(device)
        return self

    def _unflatten(self, flat: torch.Tensor) -> dict[str, torch.Tensor]:
        return {
            n: t.reshape(s)
            for n, t, s in zip(
                self._names, torch.split(flat, self._sizes), self._shapes, strict=True
            )
        }

    def _forward(self, flat: torch.Tensor, inputs: torch.Tensor) -> torch.Tensor:
        return functional_call(self.model, self._unflatten(flat), (inputs,))

    def _weighted_loss(
        self, flat: torch.Tensor, inputs: torch.Tensor, targets: torch.Tensor, weights: torch.Tensor
    ) -> torch.Tensor:
        return (self.loss(self._forward(flat, inputs), targets) * weights).sum()

    def _example_loss(
        self, flat: torch.Tensor, example: torch.Tensor, target: torch.Tensor
    ) -> torch.Tensor:
        return self.loss(self._forward(flat, example[None]), target[None])[0]

    def gradients(
        self, params: torch.Tensor, batch: Batch | None, example_clip: float | None
    ) -> torch.Tensor:
        assert batch is not None, "torch tasks are trained on mini-batches"
        flat = params.float()
        inputs, targets = self.inputs[batch.indices], self.targets[batch.indices]
        weights = batch.weights.float()
        if example_clip is None:
            return self._batch_gradients(flat, inputs, targets, weights).double()
        if self._linear_stack is not None:  # ghost norms: no per-example gradients materialised
            return self._linear_stack.clipped_gradients(
                flat, inputs, targets, weights, self.loss, example_clip
            ).double()
        per_example = self._example_gradients(flat, inputs, targets)  # (n, B, d)
        norms = torch.linalg.vector_norm(per_example, dim=2, keepdim=True)
        scale = (
            torch.clamp(example_clip / torch.clamp(norms, min=1e-30), max=1.0) * weights[..., None]
        )
        return (per_example * scale).sum(dim=1).double()

    def regularizer_gradient(self, params: torch.Tensor) -> torch.Tensor | None:
        return self.l2 * params if self.l2 else None

    def outputs(self, flat: torch.Tensor, inputs: torch.Tensor) -> torch.Tensor:
        """The model with parameters ``flat`` (d,) on ``inputs`` (B, ...): differentiable in
        both."""
        return self._forward(flat, inputs)

    def evaluate(self, params: torch.Tensor) -> dict[str, float]:
        """Test loss (and accuracy, for classification) averaged over the agents' models, the same
        of the average model (``*_average_model``: the mean of the agents' parameters, evaluated
        as one more model in the same pass), and the consensus distance. Each agent's own test
        loss (and accuracy) of this evaluation is kept in :attr:`agent_metrics`, from the same
        pass: the papers' code often plots one agent's model (MAFALDA-SGD's ``loss[0]``)."""
        average = params.mean(dim=0, keepdim=True)
        models = torch.cat([params, average])  # (n + 1, d): the agents', then the average model
        size = len(self.test_targets)
        step = size if self.eval_chunk is None else max(1, self.eval_chunk // len(models))
        with torch.no_grad():
            flat = models.float()
            losses, correct = [], []
            for start in range(0, size, step):
                targets = self.test_targets[start : start + step]
                inputs = self.test_inputs[start : start + step]
                outputs = self._outputs(flat, inputs)  # (n + 1, m, ...)
                losses.append(vmap(self.loss, in_dims=(0, None))(outputs, targets))
                if self.classification:
                    correct.append(outputs.argmax(dim=-1) == targets)
            test_loss = torch.cat(losses, dim=1).mean(dim=1)  # (n + 1,)
            self.agent_metrics = {"test_loss": tuple(float(v) for v in test_loss[:-1])}
            metrics = {
                "test_loss": float(test_loss[:-1].mean()),
                "test_loss_average_model": float(test_loss[-1]),
            }
            if self.classification:
                accuracy = torch.cat(correct, dim=1).double().mean(dim=1)
                self.agent_metrics["test_accuracy"] = tuple(float(v) for v in accuracy[:-1])
                metrics["test_accuracy"] = float(accuracy[:-1].mean())
                metrics["test_accuracy_average_model"] = float(accuracy[-1])
            metrics["consensus_distance"] = float(((params - average) ** 2).sum(dim=1).mean())
        return metrics
