"""Gradient tracking (DSGT) with noise in the tracking variable, vectorized over agents.

LPPA (Miao et al., 2025), eqs. (2)-(3) and Algorithm 1, for all agents at once:

```text
gamma^0 <- grad(theta^0) + injection^0
theta   <- W theta - lambda_t gamma                        eq. (2)
gamma   <- W gamma + grad(theta_new) - grad(theta_old)     eq. (3)  [+ injection, every round]
```

Each agent sends `theta_i` and `gamma_i` to its out-neighbours, so W may live on a directed graph;
it must be doubly stochastic (Sinkhorn-Knopp gives one from a strongly connected graph:
[`dpdl.graphs.sinkhorn_knopp`][dpdl.graphs.mixing.sinkhorn_knopp]), which keeps `1^T gamma = 1^T
grad` plus the injected sum, i.e. the tracking of the global gradient that Theorem 1 rests on.

Local updates (LPPA Sec. 6.3, "Effect of local epoch": K updates before each transmission): with
`local_steps` K > 1 the agents communicate on every K-th step only and take W = I on the others, the
time-varying mixing by which Koloskova et al. (ICML 2020, "A unified theory of decentralized SGD
with changing topology and local updates", Sec. 3) write local steps. Eq. (3) with W = I keeps the
sum of the tracking variables equal to that of the gradients, so local steps follow the tracked
global direction (the aim of K-GT, Liu et al., 2023, which corrects its local steps by a variable of
its own instead). Noise injected every round enters once per communication, after it (K = 1: every
step, as before). Gradients are stochastic on a fresh batch each step, clipped as in D-SGD when a
clipping threshold is set
([`dpdl.simulation.dsgd.local_gradients`][dpdl.jobspec.step.local_gradients]); `grad(theta_old)` is
the previous step's gradient, as in every stochastic gradient-tracking method.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from dpdl.errors import ConfigError
from dpdl.graphs import validate_mixing_matrix
from dpdl.jobspec.device import resolve_device
from dpdl.jobspec.divergence import FiniteWatch
from dpdl.jobspec.step import agent_batches, local_gradients, make_sampler
from dpdl.mechanisms.base import SeedBook
from dpdl.mechanisms.lppa import TrackingNoise
from dpdl.seeding import purpose_rng
from dpdl.simulation.dsgd import DSGDConfig, DSGDResult, iterate
from dpdl.simulation.resume import Checkpoints
from dpdl.simulation.tensors import mixing_operator, to_device
from dpdl.tasks.base import Task

__all__ = ["run_dsgt"]


def run_dsgt(
    task: Task,
    weights: np.ndarray,
    config: DSGDConfig,
    injection: TrackingNoise | None = None,
    seed: int = 0,
    progress: bool = False,
    callback: Callable[[int, dict[str, float]], None] | None = None,
    agent_seeds: SeedBook | None = None,
    device: str | torch.device = "cpu",
    local_steps: int = 1,
    checkpoints: Checkpoints | None = None,
) -> DSGDResult:
    """Run `config.steps` rounds of DSGT, with `injection` (LPPA, the DP baseline or none) added
    to the tracking variable, and return the final models and the metric history (as
    `dpdl.simulation.run_dsgd`; the batches and noise come from the same seeded streams, or,
    with `agent_seeds`, agent by agent from the seeds of the injection's
    [`seed_structure`][dpdl.mechanisms.lppa.TrackingNoise.seed_structure], as `dpdl.runtime` draws
    them). `device` as for `run_dsgd`; `local_steps`: the updates of
    each round, the last of which communicates; `checkpoints`: as for
    `run_dsgd` (the tracking variable and last gradient are saved too)."""
    n = task.n_agents
    if isinstance(local_steps, bool) or not isinstance(local_steps, int) or local_steps < 1:
        raise ConfigError(f"local_steps must be an integer >= 1, got {local_steps!r}")
    if weights.shape != (n, n):
        raise ConfigError(f"the mixing matrix is {weights.shape} but the task has {n} agents")
    weights = validate_mixing_matrix(weights, mixing=False)
    if injection is not None and injection.n != n:
        raise ConfigError(f"the injected noise is for {injection.n} agents but the task has {n}")
    device = resolve_device(device)
    mixing = mixing_operator(weights, device)
    if agent_seeds is None:
        sampler, batch_rng, noise_rng = (
            make_sampler(task, config),
            purpose_rng(seed, "batches"),
            purpose_rng(seed, "noise"),
        )
        draw = None if sampler is None else lambda: sampler.sample(batch_rng)

        def inject(t: int) -> torch.Tensor:
            return to_device(injection.sample(noise_rng, task.dim), device)
    else:
        batches = agent_batches(task, config, seed, list(range(n)))
        draw = None if batches is None else batches.sample

        def inject(t: int) -> torch.Tensor:
            return to_device(
                np.stack([injection.agent_sample(i, agent_seeds, t, task.dim) for i in range(n)]),
                device,
            )

    state: dict[str, torch.Tensor] = {}
    watch = FiniteWatch(config.step_size)

    def gradients(params: torch.Tensor) -> torch.Tensor:
        return local_gradients(task, params, draw() if draw is not None else None, config)

    def step(t: int, params: torch.Tensor) -> torch.Tensor:
        if t == 1:
            state["grads"] = gradients(params)
            state["tracking"] = state["grads"] + (inject(0) if injection is not None else 0.0)
        communicates = t % local_steps == 0
        mixed, tracking = (
            (mixing @ params, mixing @ state["tracking"])
            if communicates
            else (params, state["tracking"])
        )
        params = mixed - config.step_size(t) * state["tracking"]
        grads = gradients(params)
        state["tracking"] = tracking + grads - state["grads"]
        if injection is not None and injection.every_round and communicates:
            state["tracking"] = state["tracking"] + inject(t)
        watch.note(t, "model", params)  # a gradient not finite shows in the tracking variable
        watch.note(t, "tracking", state["tracking"])
        state["grads"] = grads
        return params

    def replay(t: int) -> None:  # step t's draws, in step's order, without its arithmetic
        if t == 1 and draw is not None:  # the initial gradient's batch
            draw()
        if t == 1 and injection is not None:
            inject(0)
        if draw is not None:
            draw()
        if injection is not None and injection.every_round and t % local_steps == 0:
            inject(t)

    label = f"{task.name}/dsgt" + (f"+{injection.name}" if injection is not None else "")
    return iterate(
        task.to(device), config, step, label, progress, callback, replay, state, checkpoints, watch
    )
