"""Mini-batch samplers, vectorized over agents.

Agent i owns rows `offsets[i]:offsets[i+1]` of its task's training arrays; one call draws a batch
for every agent as one `(n, B)` index array (no Python loop over agents).

- `UniformSampler`: B examples per agent uniformly with replacement (agent-level privacy
  does not depend on how batches are drawn).
- `PoissonSampler`: every example joins its agent's batch independently with probability
  `q_i = B / m_i` (expected batch B), the sampling that example-level accounting by a
  Poisson-subsampled Gaussian assumes. Batches are padded to the largest one with weight 0.
- `CyclicSampler`: each agent's examples are shuffled once and cut into `cycle` batches
  used in turn, so every example takes part once every `cycle` steps: the cyclic
  `(k, b)`-participation that matrix-factorization accounting assumes (MAFALDA-SGD Section 7.2).

`AgentBatches` draws agent by agent instead, each agent from a stream of its own: how the
processes of `dpdl.runtime` draw their batches, and how the simulation reproduces them.

State as data. A runtime agent checkpoints its batch stream and resumes it exactly, without
pickling objects (a pickle runs code when read): every sampler's `state()` is a dict of arrays
(empty for the memoryless ones) that `set_state` takes back, and `AgentBatches.state` adds
the generators' `bit_generator.state` dicts, which are JSON (PCG64: two 128-bit integers and two
small ones).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from dpdl.choices import SAMPLERS
from dpdl.errors import ConfigError
from dpdl.jobspec.engine import poisson_rates
from dpdl.seeding import purpose_rng
from dpdl.tasks.base import Batch

__all__ = [
    "SAMPLERS",
    "AgentBatches",
    "CyclicSampler",
    "PoissonSampler",
    "Sampler",
    "UniformSampler",
]


def _no_state(sampler: object, arrays: Mapping[str, np.ndarray]) -> None:
    """`set_state` of a sampler whose draws depend on its generator alone."""
    if arrays:
        raise ValueError(
            f"a {type(sampler).__name__} keeps no state of its own, got arrays {sorted(arrays)}"
        )


class UniformSampler:
    """`batch_size` indices per agent, uniform with replacement over the agent's examples."""

    def __init__(self, sizes: np.ndarray, batch_size: int) -> None:
        if batch_size < 1:
            raise ConfigError(f"the batch size must be >= 1, got {batch_size}")
        self.sizes = np.asarray(sizes)
        self.starts = np.concatenate([[0], np.cumsum(self.sizes)[:-1]])
        self.batch_size = batch_size
        self.weights = np.full((len(self.sizes), batch_size), 1.0 / batch_size)

    def sample(self, rng: np.random.Generator) -> Batch:
        offsets = (rng.random((len(self.sizes), self.batch_size)) * self.sizes[:, None]).astype(
            np.int64
        )
        return Batch(self.starts[:, None] + offsets, self.weights)

    def state(self) -> dict[str, np.ndarray]:
        """Nothing: the next batch depends on the generator alone."""
        return {}

    def set_state(self, arrays: Mapping[str, np.ndarray]) -> None:
        _no_state(self, arrays)


class PoissonSampler:
    """Poisson sampling at rate `q_i = batch_size / m_i` per agent; gradients divided by
    `batch_size`."""

    def __init__(self, sizes: np.ndarray, batch_size: int) -> None:
        self.sizes = np.asarray(sizes)
        self.batch_size = batch_size
        self.rates = poisson_rates(self.sizes, batch_size)
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

    def state(self) -> dict[str, np.ndarray]:
        """Nothing: the next batch depends on the generator alone."""
        return {}

    def set_state(self, arrays: Mapping[str, np.ndarray]) -> None:
        _no_state(self, arrays)


class CyclicSampler:
    """Fixed batches in a fixed order: agent i's examples, shuffled once by the first call's
    generator, are cut into `cycle` batches of sizes differing by at most one; step t uses batch
    `t mod cycle`. The batch mean gradient changes by at most `2C / smallest batch` when one
    example is replaced (per-example clipping at C).

    With `fixed_divisor` each batch's clipped sum is divided by its agent's smallest batch
    (`size // cycle`) instead of by its own size, as MAFALDA-SGD's released code does: a sum over
    a fixed divisor moves by at most `C / smallest batch` when one example is added or removed,
    where a mean over the batch's own size moves by up to twice that."""

    def __init__(self, sizes: np.ndarray, cycle: int, fixed_divisor: bool = False) -> None:
        self.sizes = np.asarray(sizes)
        if cycle < 1:
            raise ConfigError(f"a cycle has at least one batch, got {cycle}")
        if cycle > self.sizes.min():
            raise ConfigError(
                f"{cycle} batches per cycle need every agent to hold at least {cycle} examples; "
                f"the smallest holds {self.sizes.min()}"
            )
        self.cycle = cycle
        self.fixed_divisor = fixed_divisor
        self.starts = np.concatenate([[0], np.cumsum(self.sizes)[:-1]])
        self._shape = (self.cycle, len(self.sizes), -(-int(self.sizes.max()) // self.cycle))
        self._indices: np.ndarray | None = (
            None  # (cycle, n, width): batch b of every agent; cut at the first call
        )
        self._weights: np.ndarray | None = None
        self._step = 0

    @property
    def smallest_batch(self) -> int:
        return int(self.sizes.min() // self.cycle)

    def _cut(self, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        indices = np.zeros(self._shape, dtype=np.int64)
        weights = np.zeros(self._shape)
        for agent, (start, size) in enumerate(
            zip(self.starts, self.sizes, strict=True)
        ):  # once per run, not per step
            for batch, rows in enumerate(np.array_split(start + rng.permutation(size), self.cycle)):
                indices[batch, agent, : len(rows)] = rows
                divisor = size // self.cycle if self.fixed_divisor else len(rows)
                weights[batch, agent, : len(rows)] = 1.0 / divisor
        return indices, weights

    def sample(self, rng: np.random.Generator) -> Batch:
        if self._indices is None or self._weights is None:
            self._indices, self._weights = self._cut(rng)
        batch = self._step % self.cycle
        self._step += 1
        return Batch(self._indices[batch], self._weights[batch])

    def state(self) -> dict[str, np.ndarray]:
        """The step counter, and the batches once they are cut (arrays never changed in place, so
        the state shares them)."""
        if self._indices is None or self._weights is None:
            return {"step": np.array(self._step)}
        return {"step": np.array(self._step), "indices": self._indices, "weights": self._weights}

    def set_state(self, arrays: Mapping[str, np.ndarray]) -> None:
        """Take back a `state` of a sampler of the same sizes and cycle (ValueError
        otherwise)."""
        if set(arrays) not in ({"step"}, {"step", "indices", "weights"}):
            raise ValueError(
                f"a cyclic sampler's state holds step, indices and weights, got {sorted(arrays)}"
            )
        step = arrays["step"]
        if step.shape != () or step.dtype.kind not in "iu" or int(step) < 0:
            raise ValueError(f"a cyclic sampler's step is an integer >= 0, got {step!r}")
        if "indices" not in arrays:
            if int(step) != 0:
                raise ValueError(
                    f"a cyclic sampler at step {int(step)} has cut its batches, but the state "
                    "holds none"
                )
            self._indices, self._weights, self._step = None, None, 0
            return
        indices, weights = arrays["indices"], arrays["weights"]
        if (
            indices.shape != self._shape
            or weights.shape != self._shape
            or indices.dtype.kind not in "iu"
            or weights.dtype.kind != "f"
        ):
            raise ValueError(
                "a cyclic sampler's batches are integer indices and float weights of shape "
                f"{self._shape}, got {indices.dtype} {indices.shape} and {weights.dtype} "
                f"{weights.shape}"
            )
        if indices.size and (indices.min() < 0 or indices.max() >= self.sizes.sum()):
            raise ValueError(
                f"a cyclic sampler's indices lie in [0, {self.sizes.sum()}), got "
                f"[{indices.min()}, {indices.max()}]"
            )
        self._indices, self._weights = indices.astype(np.int64), weights.astype(np.float64)
        self._step = int(step)


Sampler = UniformSampler | PoissonSampler | CyclicSampler


def _same_layout(saved: Any, current: Any) -> bool:
    """Whether `saved` has the keys, nesting and value types of the generator state `current`
    (integers for integers: `bool` is no integer here)."""
    if isinstance(current, dict):
        return (
            isinstance(saved, dict)
            and set(saved) == set(current)
            and all(_same_layout(saved[k], current[k]) for k in current)
        )
    if isinstance(current, int):
        return isinstance(saved, int) and not isinstance(saved, bool)
    return saved == current if isinstance(current, str) else type(saved) is type(current)


class AgentBatches:
    """Batches of `agents`, each drawn by a one-agent sampler (`build(sizes[i:i+1])`) from the
    agent's own stream `purpose_rng(seed, f"batches/{i}")`, with global row indices.

    A runtime agent holds one of these for itself; the simulation holds one for all agents to
    reproduce a runtime run exactly. That costs one draw per agent per step, so the vectorized
    samplers above stay the simulation's default.
    """

    def __init__(
        self,
        sizes: np.ndarray,
        build: Callable[[np.ndarray], Sampler],
        seed: int,
        agents: Sequence[int],
    ) -> None:
        sizes = np.asarray(sizes)
        self.starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        self.agents = list(agents)
        self.samplers = {i: build(sizes[i : i + 1]) for i in self.agents}
        self.rngs = {i: purpose_rng(seed, f"batches/{i}") for i in self.agents}

    def sample_agent(self, agent: int) -> Batch:
        """Agent `agent`'s next batch as a one-row [`Batch`][dpdl.tasks.base.Batch]."""
        batch = self.samplers[agent].sample(self.rngs[agent])
        return Batch(batch.indices + self.starts[agent], batch.weights)

    def state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """Where every agent's stream stands, as data: the generators' states (JSON-able dicts,
        keyed by agent as a string) and the samplers' arrays (keyed `"<agent>/<name>"`)."""
        generators = {str(i): self.rngs[i].bit_generator.state for i in self.agents}
        arrays = {
            f"{i}/{name}": array
            for i in self.agents
            for name, array in self.samplers[i].state().items()
        }
        return generators, arrays

    def set_state(self, generators: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> None:
        """Resume every agent's stream from a `state` of batches built alike (same sizes,
        sampler and agents); raises ValueError, naming what differs, for any other state."""
        if set(generators) != {str(i) for i in self.agents}:
            raise ValueError(
                f"generator states of agents {sorted(generators)}, expected {self.agents}"
            )
        for i in self.agents:
            saved, current = generators[str(i)], self.rngs[i].bit_generator.state
            if not _same_layout(saved, current):
                raise ValueError(
                    f"agent {i}'s generator state is not a {current['bit_generator']} state: "
                    f"{saved!r}"
                )
        unknown = {
            name for name in arrays if name.partition("/")[0] not in {str(i) for i in self.agents}
        }
        if unknown:
            raise ValueError(f"sampler arrays of no agent here: {sorted(unknown)}")
        for i in self.agents:
            self.samplers[i].set_state(
                {
                    name.partition("/")[2]: a
                    for name, a in arrays.items()
                    if name.partition("/")[0] == str(i)
                }
            )
            self.rngs[i].bit_generator.state = dict(generators[str(i)])

    def sample(self) -> Batch:
        """Every agent's next batch, rows in the order of `agents`, padded with weight 0."""
        batches = [self.sample_agent(i) for i in self.agents]
        width = max(b.indices.shape[1] for b in batches)
        indices = np.zeros((len(batches), width), dtype=np.int64)
        weights = np.zeros((len(batches), width))
        for row, batch in enumerate(batches):
            indices[row, : batch.indices.shape[1]] = batch.indices[0]
            weights[row, : batch.weights.shape[1]] = batch.weights[0]
        return Batch(indices, weights)
