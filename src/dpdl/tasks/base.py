"""What the D-SGD engine needs from a learning task.

A task holds all agents' local objectives. Parameters of all agents are one ``(n, d)`` array.
Stochastic tasks keep their training examples in one array ordered by agent (agent i owns rows
``offsets[i]:offsets[i+1]``) so that a batch for every agent is one ``(n, B)`` index array.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

__all__ = ["Batch", "Task"]


@dataclass(frozen=True)
class Batch:
    """One step's examples: global row ``indices`` (n, B) and their ``weights`` (n, B).

    The agent's batch gradient is ``sum_b weights[i, b] * grad(example indices[i, b])``: weights are
    ``1/B`` for fixed-size batches; under Poisson sampling they are ``1/E[B]`` and zero on padding.
    """

    indices: np.ndarray
    weights: np.ndarray


class Task(ABC):
    """Local objectives of n agents, their gradients and their evaluation."""

    #: Name used by the CLI.
    name: str = ""
    #: The metric a run is judged by, and whether lower is better.
    primary_metric: str = "test_loss"
    lower_is_better: bool = True

    def __init__(self, n_agents: int, dim: int) -> None:
        self.n_agents = n_agents
        self.dim = dim

    @property
    def agent_sizes(self) -> np.ndarray | None:
        """Number of local examples per agent, or None for a deterministic (full-gradient) task."""
        return None

    def initial_params(self) -> np.ndarray:
        """Common starting point of all agents, shape ``(d,)`` (zeros unless a task says
        otherwise)."""
        return np.zeros(self.dim)

    @abstractmethod
    def gradients(
        self, params: np.ndarray, batch: Batch | None, example_clip: float | None
    ) -> np.ndarray:
        """Every agent's data gradient at its own parameters, shape ``(n, d)``.

        With ``example_clip`` each example's gradient is clipped to that L2 norm before averaging
        (example-level privacy); otherwise the batch mean is returned unclipped.
        """

    def agent_gradients(
        self, agent: int, params: np.ndarray, batch: Batch | None, example_clip: float | None
    ) -> np.ndarray:
        """Agent ``agent``'s data gradient alone, from its parameters ``(1, d)`` and its batch (one
        row): what one process of :mod:`dpdl.runtime` computes. Returns ``(1, d)``. The default
        serves tasks whose agents differ only in their rows of examples; others override it."""
        return self.gradients(params, batch, example_clip)

    def regularizer_gradient(self, params: np.ndarray) -> np.ndarray | None:
        """Gradient of a data-independent regularizer (needs no clipping or noise), or None."""
        return None

    @abstractmethod
    def evaluate(self, params: np.ndarray) -> dict[str, float]:
        """Metrics of all agents' parameters (averaged over agents), including
        :attr:`primary_metric`."""

    def describe(self) -> dict[str, object]:
        """Parameters for the run's config file."""
        return {"task": self.name, "n_agents": self.n_agents, "dim": self.dim}
