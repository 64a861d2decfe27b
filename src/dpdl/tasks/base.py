"""What the D-SGD engine needs from a learning task.

A task holds all agents' local objectives. Parameters of all agents are one `(n, d)` torch tensor on
the task's device ([`Task.to`][dpdl.tasks.base.Task.to]), float64 unless a task says otherwise;
gradients and metrics are computed there, so a step never leaves the device. Stochastic tasks keep
their training examples in one tensor ordered by agent (agent i owns rows `offsets[i]:offsets[i+1]`)
so that a batch for every agent is one `(n, B)` index tensor.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np
import torch

from dpdl.tasks.layout import ParameterLayout

__all__ = ["Batch", "Task"]


@dataclass(frozen=True)
class Batch:
    """One step's examples: global row `indices` (n, B) and their `weights` (n, B).

    The agent's batch gradient is `sum_b weights[i, b] * grad(example indices[i, b])`: weights are
    `1/B` for fixed-size batches; under Poisson sampling they are `1/E[B]` and zero on padding.
    The samplers draw batches on the host as numpy arrays (one random stream whatever the device);
    [`to`][dpdl.tasks.base.Batch.to] gives the tensors a task reads.
    """

    indices: np.ndarray | torch.Tensor
    weights: np.ndarray | torch.Tensor

    def to(self, device: torch.device, dtype: torch.dtype = torch.float64) -> Batch:
        """The same batch as tensors on `device` (weights in `dtype`)."""
        return Batch(
            torch.as_tensor(self.indices, device=device),
            torch.as_tensor(self.weights, dtype=dtype, device=device),
        )


class Task(ABC):
    """Local objectives of n agents, their gradients and their evaluation, on one device."""

    #: Name used by the CLI.
    name: str = ""
    #: The metric a run is judged by, and whether lower is better.
    primary_metric: str = "test_loss"
    lower_is_better: bool = True
    #: The dtype of the parameters the engine holds for this task.
    dtype: torch.dtype = torch.float64

    def __init__(self, n_agents: int, dim: int) -> None:
        self.n_agents = n_agents
        self.dim = dim
        self.device = torch.device("cpu")

    def to(self, device: torch.device | str) -> Task:
        """Move the task's data to `device` (in place) and return the task."""
        device = torch.device(device)
        if device != self.device:
            for name, value in vars(self).items():
                if isinstance(value, torch.Tensor):
                    setattr(self, name, value.to(device))
            self.device = device
        return self

    @property
    def agent_sizes(self) -> np.ndarray | None:
        """Number of local examples per agent, or None for a deterministic (full-gradient) task."""
        return None

    def initial_params(self) -> torch.Tensor:
        """Common starting point of all agents, shape `(d,)` on the task's device (zeros unless a
        task says otherwise)."""
        return torch.zeros(self.dim, dtype=self.dtype, device=self.device)

    @abstractmethod
    def gradients(
        self, params: torch.Tensor, batch: Batch | None, example_clip: float | None
    ) -> torch.Tensor:
        """Every agent's data gradient at its own parameters, shape `(n, d)`.

        `batch` holds tensors on the task's device ([`Batch.to`][dpdl.tasks.base.Batch.to]). With
        `example_clip` each example's gradient is clipped to that L2 norm before averaging
        (example-level privacy); otherwise the batch mean is returned unclipped.
        """

    def agent_gradients(
        self, agent: int, params: torch.Tensor, batch: Batch | None, example_clip: float | None
    ) -> torch.Tensor:
        """Agent `agent`'s data gradient alone, from its parameters `(1, d)` and its batch (one
        row): what one process of `dpdl.runtime` computes. Returns `(1, d)`. The default
        serves tasks whose agents differ only in their rows of examples; others override it."""
        return self.gradients(params, batch, example_clip)

    def regularizer_gradient(self, params: torch.Tensor) -> torch.Tensor | None:
        """Gradient of a data-independent regularizer (needs no clipping or noise), or None."""
        return None

    @abstractmethod
    def evaluate(self, params: torch.Tensor) -> dict[str, float]:
        """Metrics of all agents' parameters `(m, d)`, averaged over agents, including
        `primary_metric` and `consensus_distance` (the mean squared distance of the
        agents' parameters to their mean); a metric of the agents' average model (their mean
        parameters, evaluated as one model) is named `<metric>_average_model`.

        The built-in tasks: logistic regression reports `test_loss` and `test_accuracy`, each
        with its `_average_model`, and `train_objective`; the quadratics `optimality_gap` and
        `optimality_gap_average_model`, `squared_distance` (to the optimum) and its
        `_average_model`, and `train_loss`; torch models
        ([`TorchModelTask`][dpdl.tasks.torch_model.TorchModelTask]) `test_loss` and, for
        classification, `test_accuracy`, each with its `_average_model`."""

    def parameter_layout(self) -> ParameterLayout:
        """The names and shapes of the flat parameter vector's pieces, which a saved model is
        written under: one vector named `params` unless a task names its own."""
        return ParameterLayout(("params",), ((self.dim,),), module=False)

    def describe(self) -> dict[str, object]:
        """Parameters for the run's config file."""
        return {"task": self.name, "n_agents": self.n_agents, "dim": self.dim}
