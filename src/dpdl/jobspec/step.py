"""One agent's local step, as both engines take it: the batches it draws and its clipped gradient.

The simulation ([`dpdl.simulation.dsgd`][dpdl.simulation.dsgd], all agents at once) and the runtime
([`dpdl.runtime.agent`][dpdl.runtime.agent], one agent per process) compute the same step from the
same job, so the step lives here, below both, and neither imports the other.
"""

from __future__ import annotations

import numpy as np
import torch

from dpdl.errors import ConfigError
from dpdl.jobspec.engine import DSGDConfig
from dpdl.jobspec.sampling import (
    AgentBatches,
    CyclicSampler,
    PoissonSampler,
    Sampler,
    UniformSampler,
)
from dpdl.tasks.base import Batch, Task

__all__ = ["agent_batches", "clip_rows", "local_gradients", "make_sampler"]


def clip_rows(values: torch.Tensor, threshold: float) -> torch.Tensor:
    """Scale every row of `values` to L2 norm at most `threshold` (`min(1, C/||g||) g`)."""
    norms = torch.linalg.vector_norm(values, dim=1, keepdim=True)
    return values * torch.clamp(threshold / norms.clamp_min(1e-300), max=1.0)


def _sizes(task: Task, config: DSGDConfig) -> np.ndarray | None:
    sizes = task.agent_sizes
    if sizes is None and (config.clip_level == "example" or config.sampling != "uniform"):
        raise ConfigError(
            f"task {task.name!r} has no examples: use agent-level clipping and full gradients"
        )
    return sizes


def _sampler(sizes: np.ndarray, config: DSGDConfig) -> Sampler:
    if config.sampling == "cyclic":
        return CyclicSampler(sizes, int(config.cycle), config.fixed_divisor)
    cls = PoissonSampler if config.sampling == "poisson" else UniformSampler
    return cls(sizes, config.batch_size)


def make_sampler(task: Task, config: DSGDConfig) -> Sampler | None:
    """The batch sampler `config` asks for, or None for a full-gradient task."""
    sizes = _sizes(task, config)
    return None if sizes is None else _sampler(sizes, config)


def agent_batches(
    task: Task, config: DSGDConfig, seed: int, agents: list[int]
) -> AgentBatches | None:
    """Batches drawn by each of `agents` from its own stream, or None for a full-gradient task."""
    sizes = _sizes(task, config)
    return (
        None
        if sizes is None
        else AgentBatches(sizes, lambda part: _sampler(part, config), seed, agents)
    )


def local_gradients(
    task: Task,
    params: torch.Tensor,
    batch: Batch | None,
    config: DSGDConfig,
    agent: int | None = None,
) -> torch.Tensor:
    """Every agent's clipped gradient on `batch`, plus the regulariser's gradient, `(n, d)`; or,
    with `agent`, that agent's alone from its parameters `(1, d)` and batch (one row).

    `params` live on the task's device; `batch` is the sampler's (host) draw, moved there."""
    example_clip = config.clip if config.clip_level == "example" else None
    if batch is not None:
        batch = batch.to(params.device)
    if agent is None:
        grads = task.gradients(params, batch, example_clip)
    else:
        grads = task.agent_gradients(agent, params, batch, example_clip)
    if config.clip is not None and config.clip_level == "agent":
        grads = clip_rows(grads, config.clip)
    regulariser = task.regularizer_gradient(params)
    if regulariser is not None:
        grads = grads + regulariser
    return grads
