"""The D-SGD engine with privacy noise, vectorized over agents.

Algorithm 1 of Whisper D-SGD / CorN-DSGD (and Algorithm 1 of DECOR), for all agents at once::

    g   <- clip(grad f_i(x_i; batch_i), C)            agent-level (or per-example) clipping
    g   <- g + grad r(x_i)                            data-independent regulariser, if any
    x   <- W (x - eta_t (g + v_t)),  v_t ~ N(0, R)    local step, noise, one gossip round

State is one ``(n, d)`` torch tensor on the chosen device, CPU or GPU
(:func:`dpdl.jobspec.device.resolve_device`); gradients, clipping, the noise's addition and mixing
(one dense or sparse matrix product) happen there, and nothing returns to the host until a metric is
recorded. Randomness: one seed, independent streams for batches and noise (:mod:`dpdl.seeding`),
drawn on the host by the mechanism's numpy sampler and copied to the device, so that a run is
bit-for-bit repeatable, draws the same numbers on every device, and equals the deployment of
:mod:`dpdl.runtime` (whose agents draw from the same streams). The copy is one asynchronous
host-to-device transfer of the ``(n, d)`` noise per step.

Given ``agent_seeds``, every agent instead draws its batch from its own stream and its noise from
the seeds it holds (:meth:`~dpdl.mechanisms.base.NoiseMechanism.agent_noise`), as the processes of
:mod:`dpdl.runtime` do: the same distribution, and with the seeds the agents agreed on
(:func:`dpdl.keys.simulated_seed_book`) the same models as a deployment.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import count

import numpy as np
import torch

from dpdl.choices import CLIP_LEVELS
from dpdl.errors import ConfigError
from dpdl.graphs.mixing import validate_mixing_matrix
from dpdl.jobspec.device import resolve_device
from dpdl.jobspec.engine import DSGDConfig, StepSize, require_calibrated_for
from dpdl.jobspec.step import agent_batches, clip_rows, local_gradients, make_sampler
from dpdl.mechanisms.base import NoiseMechanism, SeedBook
from dpdl.mechanisms.time_correlated import LocalCorrelatedNoise
from dpdl.seeding import purpose_rng
from dpdl.simulation.tensors import mixing_operator, to_device
from dpdl.tasks.base import Task

__all__ = [
    "CLIP_LEVELS",
    "DSGDConfig",
    "DSGDResult",
    "StepSize",
    "agent_batches",
    "clip_rows",
    "iterate",
    "local_gradients",
    "make_sampler",
    "run_dsgd",
]


@dataclass
class DSGDResult:
    """Final parameters of all agents (a host array) and the metrics recorded along the way."""

    params: np.ndarray
    history: list[dict[str, float]] = field(default_factory=list)

    @property
    def final_metrics(self) -> dict[str, float]:
        return self.history[-1]


def run_dsgd(
    task: Task,
    weights: np.ndarray,
    mechanism: NoiseMechanism | LocalCorrelatedNoise,
    config: DSGDConfig,
    seed: int = 0,
    progress: bool = False,
    callback: Callable[[int, dict[str, float]], None] | None = None,
    agent_seeds: SeedBook | None = None,
    device: str | torch.device = "cpu",
) -> DSGDResult:
    """Run ``config.steps`` steps of noisy D-SGD and return the final state and metric history.

    Metrics are recorded at step 0, every ``config.eval_every`` steps and at the last step; each
    record holds ``step`` plus the task's metrics. ``callback(step, metrics)`` sees each record.
    With ``agent_seeds``, batches and noise are drawn agent by agent as a deployment draws them
    (module doc; not for noise correlated over time). ``device``: where to compute (``cpu``,
    ``cuda``, ``cuda:K`` or ``auto``); the task is moved there.
    """
    n = task.n_agents
    if weights.shape != (n, n):
        raise ConfigError(f"the mixing matrix is {weights.shape} but the task has {n} agents")
    if mechanism.n != n:
        raise ConfigError(f"the mechanism is for {mechanism.n} agents but the task has {n}")
    validate_mixing_matrix(weights, doubly_stochastic=False, mixing=False)
    device = resolve_device(device)
    calibration = getattr(mechanism, "calibration", None)
    if calibration is not None:
        require_calibrated_for(calibration, config, task.agent_sizes)
    if agent_seeds is not None and not isinstance(mechanism, NoiseMechanism):
        raise ConfigError(
            f"{mechanism.name} noise is correlated over time: agents cannot draw it step by step "
            "from seeds"
        )
    if agent_seeds is None:
        sampler, batch_rng = make_sampler(task, config), purpose_rng(seed, "batches")
        draw = None if sampler is None else lambda: sampler.sample(batch_rng)
        noise = (
            None
            if mechanism.is_noiseless
            else mechanism.noise_stream(purpose_rng(seed, "noise"), task.dim)
        )
    else:
        batches = agent_batches(task, config, seed, list(range(n)))
        draw = None if batches is None else batches.sample
        noise = None if mechanism.is_noiseless else _agent_noise(mechanism, agent_seeds, task.dim)

    mixing = mixing_operator(weights, device)

    def step(t: int, params: torch.Tensor) -> torch.Tensor:
        grads = local_gradients(task, params, draw() if draw is not None else None, config)
        if noise is not None:
            grads = grads + to_device(next(noise), device)
        return mixing @ (params - config.step_size(t) * grads)

    return iterate(
        task.to(device), config, step, f"{task.name}/{mechanism.name}", progress, callback
    )


def _agent_noise(mechanism: NoiseMechanism, seeds: SeedBook, dim: int) -> Iterator[np.ndarray]:
    for t in count(1):
        yield np.stack([mechanism.agent_noise(i, seeds, t, dim) for i in range(mechanism.n)])


def iterate(
    task: Task,
    config: DSGDConfig,
    step: Callable[[int, torch.Tensor], torch.Tensor],
    label: str,
    progress: bool = False,
    callback: Callable[[int, dict[str, float]], None] | None = None,
) -> DSGDResult:
    """Apply ``params <- step(t, params)`` for t = 1..T from the task's initial point on every
    agent, on the task's device, recording metrics at step 0, every ``config.eval_every`` steps and
    at the last step (each record holds ``step`` plus the task's metrics; ``callback(step,
    metrics)`` sees each one). The final parameters come back to the host once, at the end.

    With ``config.average_last = k``, the iterates of steps T - k + 1 .. T are evaluated too and
    the last record also holds each metric's mean over them, as ``<metric>_tail`` (DECOR's
    released least squares plots its error averaged over the last iterates, not at T)."""
    params = task.initial_params().repeat(task.n_agents, 1)
    history: list[dict[str, float]] = []
    tail: list[dict[str, float]] = []

    def record(t: int) -> None:
        # at step 0 every agent holds the initial point, so one row has every agent's metrics (a
        # CNN's test pass costs as much as a few dozen training steps)
        metrics = {"step": t, **task.evaluate(params[:1] if t == 0 else params)}
        history.append(metrics)
        if callback is not None:
            callback(t, metrics)

    from tqdm.auto import tqdm  # here, not above: only a run with a progress bar needs it

    record(0)
    bar = tqdm(
        total=config.steps, disable=None if progress else True, desc=label, unit="step", leave=False
    )
    for t in range(1, config.steps + 1):
        params = step(t, params)
        if t % config.eval_every == 0 or t == config.steps:
            record(t)
            bar.set_postfix(
                {task.primary_metric: f"{history[-1][task.primary_metric]:.4g}"}, refresh=False
            )
        if t > config.steps - config.average_last:
            recorded = history[-1]["step"] == t
            tail.append(history[-1] if recorded else task.evaluate(params))
        bar.update()
    bar.close()
    if tail:
        history[-1].update(
            {
                f"{key}_tail": float(np.mean([m[key] for m in tail]))
                for key in tail[0]
                if key != "step"
            }
        )
    return DSGDResult(params.cpu().numpy(), history)
