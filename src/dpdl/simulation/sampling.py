"""Mini-batch samplers, vectorized over agents.

Agent i owns rows ``offsets[i]:offsets[i+1]`` of its task's training arrays; one call draws a batch
for every agent as one ``(n, B)`` index array (no Python loop over agents).

- :class:`UniformSampler`: B examples per agent uniformly with replacement (agent-level privacy
  does not depend on how batches are drawn).
- :class:`PoissonSampler`: every example joins its agent's batch independently with probability
  ``q_i = B / m_i`` (expected batch B), the sampling that example-level accounting by a
  Poisson-subsampled Gaussian assumes. Batches are padded to the largest one with weight 0.
- :class:`CyclicSampler`: each agent's examples are shuffled once and cut into ``cycle`` batches
  used in turn, so every example takes part once every ``cycle`` steps: the cyclic
  ``(k, b)``-participation that matrix-factorization accounting assumes (MAFALDA-SGD Section 7.2).

:class:`AgentBatches` draws agent by agent instead, each agent from a stream of its own: how the
processes of :mod:`dpdl.runtime` draw their batches, and how the simulation reproduces them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from dpdl.errors import ConfigError
from dpdl.seeding import purpose_rng
from dpdl.tasks.base import Batch

__all__ = ["UniformSampler", "PoissonSampler", "CyclicSampler", "AgentBatches", "Sampler", "SAMPLERS"]

SAMPLERS = ("uniform", "poisson", "cyclic")


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


class CyclicSampler:
    """Fixed batches in a fixed order: agent i's examples, shuffled once by the first call's
    generator, are cut into ``cycle`` batches of sizes differing by at most one; step t uses batch
    ``t mod cycle``. The batch mean gradient changes by at most ``2C / smallest batch`` when one
    example is replaced (per-example clipping at C)."""

    def __init__(self, sizes: np.ndarray, cycle: int) -> None:
        self.sizes = np.asarray(sizes)
        if cycle < 1:
            raise ConfigError(f"a cycle has at least one batch, got {cycle}")
        if cycle > self.sizes.min():
            raise ConfigError(f"{cycle} batches per cycle need every agent to hold at least {cycle} examples; the smallest holds {self.sizes.min()}")
        self.cycle = cycle
        self.starts = np.concatenate([[0], np.cumsum(self.sizes)[:-1]])
        self._batches: list[Batch] = []
        self._step = 0

    @property
    def smallest_batch(self) -> int:
        return int(self.sizes.min() // self.cycle)

    def _cut(self, rng: np.random.Generator) -> list[Batch]:
        width = -(-int(self.sizes.max()) // self.cycle)
        indices = np.zeros((self.cycle, len(self.sizes), width), dtype=np.int64)
        weights = np.zeros((self.cycle, len(self.sizes), width))
        for agent, (start, size) in enumerate(zip(self.starts, self.sizes)):  # once per run, not per step
            for batch, rows in enumerate(np.array_split(start + rng.permutation(size), self.cycle)):
                indices[batch, agent, : len(rows)] = rows
                weights[batch, agent, : len(rows)] = 1.0 / len(rows)
        return [Batch(indices[b], weights[b]) for b in range(self.cycle)]

    def sample(self, rng: np.random.Generator) -> Batch:
        if not self._batches:
            self._batches = self._cut(rng)
        batch = self._batches[self._step % self.cycle]
        self._step += 1
        return batch


Sampler = UniformSampler | PoissonSampler | CyclicSampler


class AgentBatches:
    """Batches of ``agents``, each drawn by a one-agent sampler (``build(sizes[i:i+1])``) from the
    agent's own stream ``purpose_rng(seed, f"batches/{i}")``, with global row indices.

    A runtime agent holds one of these for itself; the simulation holds one for all agents to
    reproduce a runtime run exactly. That costs one draw per agent per step, so the vectorized
    samplers above stay the simulation's default.
    """

    def __init__(self, sizes: np.ndarray, build: Callable[[np.ndarray], Sampler], seed: int, agents: Sequence[int]) -> None:
        sizes = np.asarray(sizes)
        self.starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        self.agents = list(agents)
        self.samplers = {i: build(sizes[i : i + 1]) for i in self.agents}
        self.rngs = {i: purpose_rng(seed, f"batches/{i}") for i in self.agents}

    def sample_agent(self, agent: int) -> Batch:
        """Agent ``agent``'s next batch as a one-row :class:`Batch`."""
        batch = self.samplers[agent].sample(self.rngs[agent])
        return Batch(batch.indices + self.starts[agent], batch.weights)

    def sample(self) -> Batch:
        """Every agent's next batch, rows in the order of ``agents``, padded with weight 0."""
        batches = [self.sample_agent(i) for i in self.agents]
        width = max(b.indices.shape[1] for b in batches)
        indices = np.zeros((len(batches), width), dtype=np.int64)
        weights = np.zeros((len(batches), width))
        for row, batch in enumerate(batches):
            indices[row, : batch.indices.shape[1]] = batch.indices[0]
            weights[row, : batch.weights.shape[1]] = batch.weights[0]
        return Batch(indices, weights)
