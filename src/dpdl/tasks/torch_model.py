"""Any torch model as a dpdl task: all agents' parameters as one `(n, d)` tensor.

Two strategies compute every agent's gradient (`strategy`, measured in BENCHMARKS.md, "Per-agent
gradients of torch models"):

- `vmap`: the model used functionally (`torch.func.functional_call`) on a flat parameter vector,
  `torch.func.vmap` batching it over agents, and over each agent's examples for per-example
  gradients (example-level clipping): one call for every agent, no Python loop. The default on
  GPUs, and on CPUs for models without convolutions (linear layers batch into matrix products).
- `loop`: agent by agent, on replicas of the model over a pool of threads
  (`dpdl.tasks.replicas`): the default for convolutional models on a CPU (batches of at least
  `LOOP_MIN_FLOPS` an agent, and every per-example clipping), where vmap's grouped
  convolutions are about 3x slower than ordinary ones.

The engine holds every agent's parameters in float64 on the task's device (so the
privacy noise is added and the models mixed in float64, as for the linear tasks); the model runs in
float32 on a float32 copy of them, and its gradients are widened back to float64 on the device.
float32 is the precision these networks are trained in; the noise, whose scale the privacy claim
rests on, never passes through it. Per-example clipping of sequences of linear layers (the papers'
networks) takes the ghost-norm path of `dpdl.tasks.linear_stack` instead: the same result,
without materialising per-example gradients (about 40x faster for the MNIST network, BENCHMARKS.md).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable

import numpy as np
import torch
from torch import nn
from torch.func import functional_call, grad, vmap
from torch.utils.flop_counter import FlopCounterMode

from dpdl.errors import ConfigError
from dpdl.scale import agent_test_count
from dpdl.seeding import purpose_rng
from dpdl.tasks.base import Batch, Task
from dpdl.tasks.layout import ParameterLayout
from dpdl.tasks.linear_stack import LinearStack
from dpdl.tasks.replicas import ReplicaPool, has_convolution

__all__ = [
    "STRATEGIES",
    "TorchModelTask",
    "agent_test_sample",
    "require_strategy",
]

logger = logging.getLogger(__name__)

#: How :class:`TorchModelTask` computes every agent's gradient and scores: ``auto`` picks ``loop``
#: or ``vmap`` by :meth:`TorchModelTask.strategy_for`.
STRATEGIES = ("auto", "vmap", "loop")

#: The forward floating-point operations of one agent's batch from which ``auto`` loops over the
#: agents of a convolutional model's batch gradients on a CPU: measured on one thread, vmap won
#: below it (a user's 8x8 CNN, 5.7 and 22.7 MFLOP: 15 against 19 ms, 29 against 43 ms for 16
#: agents) and the loop above it (LeNet, 62 MFLOP: 86 against 127 ms; the MNIST CNN, 33 and 66
#: MFLOP: 39 against 69 ms, 70 against 140 ms). Per-example gradients loop whatever the size.
LOOP_MIN_FLOPS = 30e6


def agent_test_sample(tests: int, agents: int, examples: int | None, seed: int) -> np.ndarray:
    """The test examples (sorted indices) each of `agents` models is scored on: as many as
    `dpdl.scale.agent_test_count` says, drawn at random from `seed` (all of them in order
    where that is all)."""
    count = agent_test_count(tests, agents, examples)
    if count == tests:
        return np.arange(tests)
    rng = purpose_rng(seed, "agent test examples")
    return np.sort(rng.choice(tests, count, replace=False))


def require_strategy(strategy: str) -> None:
    """Refuse a name that is not one of `STRATEGIES`."""
    if strategy not in STRATEGIES:
        raise ConfigError(f"unknown gradient strategy {strategy!r}; known: {', '.join(STRATEGIES)}")


Loss = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


class TorchModelTask(Task):
    """Agents train copies of `model` on their own rows of `train_inputs`; classification metrics
    (loss and accuracy over the test set, averaged over agents, and of the agents' average model) by
    default, the loss alone with `classification=False`
    ([`evaluate`][dpdl.tasks.torch_model.TorchModelTask.evaluate]).

    `loss` maps (outputs (B, ...), targets (B,)) to per-example losses (B,). `eval_chunk` bounds
    the (agent, test example) pairs of one evaluation forward pass of the `vmap` strategy, for
    models whose activations would not fit for every agent on the whole test set at once
    (convolutions); None: one pass. `strategy`: one of `STRATEGIES`.

    `agent_test_examples`: how many test examples each agent's own model is scored on, a fixed
    random sample (drawn from `seed`) that bounds an evaluation's cost for many agents; None:
    the whole test set while agents x test examples is at most
    `AGENT_EVAL_PAIRS`, and otherwise a sample of `AGENT_EVAL_PAIRS // agents`
    (at least 1000; `agent_test_count`). The agents' average model is always
    scored on the whole test set.
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
        strategy: str = "auto",
        agent_test_examples: int | None = None,
        seed: int = 0,
    ) -> None:
        require_strategy(strategy)
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
        rows = agent_test_sample(len(self.test_targets), len(partition), agent_test_examples, seed)
        #: The test examples (indices) each agent's own model is scored on; None: all of them.
        self.agent_test_rows = None if len(rows) == len(self.test_targets) else torch.tensor(rows)
        if self.agent_test_rows is not None:
            logger.info(
                "%s: each agent's model is scored on a fixed sample of %d of the %d test "
                "examples, the average model on all of them",
                name, len(rows), len(self.test_targets),
            )  # fmt: skip
        self.strategy = strategy
        self._pool: ReplicaPool | None = None
        self._flops: int | None = None
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
        self._pool = None
        return self

    def strategy_for(self, rows: int, example_clip: float | None) -> str:
        """The strategy of a gradient call on batches of `rows` examples an agent (`auto`
        resolved by the rule measured on a CPU, BENCHMARKS.md "Per-agent gradients of torch
        models"): `vmap` off the CPU and for models without convolutions; for convolutions on a
        CPU, `loop` for per-example gradients, and for batch gradients where an agent's batch
        costs at least `LOOP_MIN_FLOPS` forward (smaller ones are cheaper vmapped)."""
        if self.strategy != "auto":
            return self.strategy
        if self.device.type != "cpu" or not has_convolution(self.model):
            return "vmap"
        if example_clip is not None:
            return "loop"
        return "loop" if rows * self._example_flops() >= LOOP_MIN_FLOPS else "vmap"

    def _example_flops(self) -> int:
        """The model's forward floating-point operations on one example (torch's flop counter,
        counted once)."""
        if self._flops is None:
            with torch.no_grad(), FlopCounterMode(display=False) as counter:
                self.model(self.inputs[:1])
            self._flops = int(counter.get_total_flops())
        return self._flops

    def _replicas(self) -> ReplicaPool:
        if self._pool is None:
            self._pool = ReplicaPool(self.model, self.device)
        return self._pool

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
        if self.strategy_for(inputs.shape[1], example_clip) == "loop":
            return (
                self._replicas()
                .gradients(flat, inputs, targets, weights, self.loss, example_clip)
                .double()
            )
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

    def parameter_layout(self) -> ParameterLayout:
        """The model's parameters by their names in `named_parameters` order (the flat vector's),
        and the shape of one example's input."""
        return ParameterLayout.of_module(self.model, tuple(self.test_inputs.shape[1:]))

    def describe(self) -> dict[str, object]:
        """The task's parameters, with what an evaluation scores (every agent's model on
        `agent_test_examples` of the `test_examples`, the average model on all) and the
        gradient strategy on its device."""
        sizes = self.agent_sizes
        return {
            **super().describe(),
            "l2": self.l2,
            "train_examples": int(sizes.sum()),
            "test_examples": len(self.test_targets),
            "agent_test_examples": len(
                self.test_targets if self.agent_test_rows is None else self.agent_test_rows
            ),
            "gradient_strategy": self.strategy,
        }

    def regularizer_gradient(self, params: torch.Tensor) -> torch.Tensor | None:
        return self.l2 * params if self.l2 else None

    def outputs(self, flat: torch.Tensor, inputs: torch.Tensor) -> torch.Tensor:
        """The model with parameters `flat` (d,) on `inputs` (B, ...): differentiable in
        both."""
        return self._forward(flat, inputs)

    def _scores(
        self, models: torch.Tensor, inputs: torch.Tensor, targets: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean loss and accuracy (NaN unless `classification`) of each of `models`
        `(m, d)` on `inputs`: two `(m,)` tensors (the loss in float32 where vmapped, the
        metric's precision before the loop of replicas, which sums it in float64)."""
        if self.strategy_for(len(targets), None) == "loop":
            return self._replicas().scores(
                models.float(), inputs, targets, self.loss, self.classification
            )
        size, flat = len(targets), models.float()
        step = size if self.eval_chunk is None else max(1, self.eval_chunk // len(models))
        losses, correct = [], []
        for start in range(0, size, step):
            outputs = self._outputs(flat, inputs[start : start + step])  # (m, rows, ...)
            rows = targets[start : start + step]
            losses.append(vmap(self.loss, in_dims=(0, None))(outputs, rows))
            if self.classification:
                correct.append(outputs.argmax(dim=-1) == rows)
        loss = torch.cat(losses, dim=1).mean(dim=1)  # float32, as these metrics always were
        if not self.classification:
            return loss, torch.full_like(loss, math.nan)
        return loss, torch.cat(correct, dim=1).double().mean(dim=1)

    def evaluate(self, params: torch.Tensor) -> dict[str, float]:
        """Test loss (and accuracy, for classification) averaged over the agents' models, each on
        its sample of the test set (`agent_test_rows`), the same of the average model
        (`*_average_model`: the mean of the agents' parameters) on the whole test set, and the
        consensus distance. Each agent's own test loss (and accuracy) of this evaluation is kept
        in `agent_metrics`: the papers' code often plots one agent's model (MAFALDA-SGD's
        `loss[0]`)."""
        average = params.mean(dim=0, keepdim=True)
        with torch.no_grad():
            if self.agent_test_rows is None:  # one pass for every model
                loss, accuracy = self._scores(
                    torch.cat([params, average]), self.test_inputs, self.test_targets
                )
                agents = loss[:-1], accuracy[:-1]
                whole = loss[-1:], accuracy[-1:]
            else:
                rows = self.agent_test_rows
                agents = self._scores(params, self.test_inputs[rows], self.test_targets[rows])
                whole = self._scores(average, self.test_inputs, self.test_targets)
        self.agent_metrics = {"test_loss": tuple(float(v) for v in agents[0])}
        metrics = {
            "test_loss": float(agents[0].mean()),
            "test_loss_average_model": float(whole[0][0]),
        }
        if self.classification:
            self.agent_metrics["test_accuracy"] = tuple(float(v) for v in agents[1])
            metrics["test_accuracy"] = float(agents[1].mean())
            metrics["test_accuracy_average_model"] = float(whole[1][0])
        metrics["consensus_distance"] = float(((params - average) ** 2).sum(dim=1).mean())
        return metrics
