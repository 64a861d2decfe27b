"""Mini-batch samplers, vectorized over agents.

Agent i owns rows ``offsets[i]:offsets[i+1]`` of its task's training arrays; one call draws a batch
for every agent as one ``(n, B)`` index array (no Python loop over agents).

- :class:`UniformSampler`: B examples per agent uniformly with replacement (agent-level privacy
  does not depend on how batches are drawn).
- :class:`PoissonSampler`: every example joins its agent's batch independently with probability
  ``q_i = B / m_i`` (expected batch B), the sampling that example-level accounting by a
  Poisson-subsampled Gaussian assumes. Batches are padded to the largest one with weight 0.
"""

from __future__ import annotations

import numpy as np

from dpdl.errors import ConfigError
from dpdl.tasks.base import Batch

__all__ = ["UniformSampler", "PoissonSampler", "SAMPLERS"]

SAMPLERS = ("uniform", "poisson")


class UniformSampler:
    """``batch_size`` indices per agent, uniform with replacement over the agent's examples."""

    def __init__(self, sizes: np.ndarray, batch_size: int) -> None:
        if batch_size < 1:
            raise ConfigError(f"the batch size must be >= 1, got {batch_size}")
        self.sizes = np.asarray(sizes)
        self.starts = np.concatenate([[0], np.cumsum(self.sizes)[:-1]])
        self.batch_size = batch_size
        self.weights = np.full((len(self.sizes), batch_size), 1.0 / batch_size)

    def sample(self, rng: np.random.Generator) -> Batch:
        offsets = (rng.random((len(self.sizes), self.batch_size)) * self.sizes[:, None]).astype(np.int64)
        return Batch(self.starts[:, None] + offsets, self.weights)


class PoissonSampler:
    """Poisson sampling at rate ``q_i = batch_size / m_i`` per agent; gradients divided by ``batch_size``."""

    def __init__(self, sizes: np.ndarray, batch_size: int) -> None:
        self.sizes = np.asarray(sizes)
        if batch_size < 1:
            raise ConfigError(f"the batch size must be >= 1, got {batch_size}")
        if batch_size > self.sizes.min():
            raise ConfigError(
                f"Poisson sampling with expected batch {batch_size} needs every agent to hold at least that many "
                f"examples; the smallest agent holds {self.sizes.min()}"
            )
        self.batch_size = batch_size
        self.rates = batch_size / self.sizes
        self.owner = np.repeat(np.arange(len(self.sizes)), self.sizes)
        self.row_rates = self.rates[self.owner]

    @property
    def max_rate(self) -> float:
        """The largest sampling rate, which the example-level accountant uses for every agent."""
        return float(self.rates.max())

    def sample(self, rng: np.random.Generator) -> Batch:
        rows = np.flatnonzero(rng.random(len(self.owner)) < self.row_rates)
        owners = self.owner[rows]
        counts = np.bincount(owners, minlength=len(self.sizes))
        width = max(int(counts.max(initial=0)), 1)
        column = np.arange(len(rows)) - np.concatenate([[0], np.cumsum(counts)[:-1]])[owners]
        indices = np.zeros((len(self.sizes), width), dtype=np.int64)
        weights = np.zeros((len(self.sizes), width))
        indices[owners, column] = rows
        weights[owners, column] = 1.0 / self.batch_size
        return Batch(indices, weights)
