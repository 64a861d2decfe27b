"""The D-SGD engine with privacy noise, vectorized over agents.

Algorithm 1 of Whisper D-SGD / CorN-DSGD (and Algorithm 1 of DECOR), for all agents at once:

```text
g   <- clip(grad f_i(x_i; batch_i), C)            agent-level (or per-example) clipping
g   <- g + grad r(x_i)                            data-independent regulariser, if any
x   <- W (x - eta_t (g + v_t)),  v_t ~ N(0, R)    local step, noise, one gossip round
```

State is one `(n, d)` torch tensor on the chosen device, CPU or GPU
([`dpdl.jobspec.device.resolve_device`][dpdl.jobspec.device.resolve_device]); gradients, clipping,
the noise's addition and mixing (one dense or sparse matrix product) happen there, and nothing
returns to the host until a metric is recorded. Randomness: one seed, independent streams for
batches and noise (`dpdl.seeding`), drawn on the host by the mechanism's numpy sampler and copied to
the device, so that a run is bit-for-bit repeatable, draws the same numbers on every device, and
equals the deployment of `dpdl.runtime` (whose agents draw from the same streams). The copy is one
asynchronous host-to-device transfer of the `(n, d)` noise per step.

Given `agent_seeds`, every agent instead draws its batch from its own stream and its noise from the
seeds it holds ([`agent_noise`][dpdl.mechanisms.base.NoiseMechanism.agent_noise]), as the processes
of `dpdl.runtime` do: the same distribution, and with the seeds the agents agreed on
([`dpdl.keys.simulated_seed_book`][dpdl.keys.simulated_seed_book]) the same models as a deployment.

Given `dropouts` ([`DropoutSchedule`][dpdl.jobspec.dropouts.DropoutSchedule]), an agent missing
round t computes nothing, sends nothing and keeps its model; the alive agents step and mix with
`W'` ([`mixing_after_dropouts`][dpdl.jobspec.dropouts.mixing_after_dropouts]). The vectorized step
computes every row and keeps the alive agents' (a missing agent's message is its model, and its row
of `W'` is `e_i`). Every stream advances every round whether its agent is alive or not: the batches
are drawn for all agents, and the noise too (the agents' seeds draw by round), so round t draws the
same batches with or without dropouts, a resume replays the same draws, and the runtime's agents,
each drawing its own, stay aligned with the simulation. Noise: without `recovery` the round's noise
is the design's as drawn and a missing agent's part is not sent (DECOR's pair terms of a missing
neighbour stay uncancelled in the network); with `recovery` the round's design
([`after_dropouts`][dpdl.mechanisms.base.NoiseMechanism.after_dropouts]) draws it: its `sample`
from the run's noise stream (whose draws then differ from a run without dropouts from that round
on), or, with `agent_seeds`, every alive agent's `agent_noise` from the same seeds.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from dpdl.choices import CLIP_LEVELS
from dpdl.errors import ConfigError
from dpdl.graphs.mixing import validate_mixing_matrix
from dpdl.jobspec.device import resolve_device
from dpdl.jobspec.divergence import FiniteWatch, check_metrics
from dpdl.jobspec.dropouts import DropoutSchedule
from dpdl.jobspec.engine import DSGDConfig, StepSize, require_calibrated_for
from dpdl.jobspec.step import agent_batches, clip_rows, local_gradients, make_sampler
from dpdl.mechanisms.base import NoiseMechanism, SeedBook
from dpdl.mechanisms.time_correlated import LocalCorrelatedNoise
from dpdl.seeding import purpose_rng
from dpdl.simulation.dropouts import RoundDropouts
from dpdl.simulation.resume import Checkpoints, EngineState
from dpdl.simulation.tensors import mixing_operator, to_device
from dpdl.tasks.base import Task

__all__ = [
    "CLIP_LEVELS",
    "Checkpoints",
    "DSGDConfig",
    "DSGDResult",
    "EngineState",
    "StepSize",
    "agent_batches",
    "clip_rows",
    "iterate",
    "local_gradients",
    "make_sampler",
    "run_dsgd",
]

logger = logging.getLogger(__name__)


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
    checkpoints: Checkpoints | None = None,
    dropouts: DropoutSchedule | None = None,
    recovery: bool = False,
) -> DSGDResult:
    """Run `config.steps` steps of noisy D-SGD and return the final state and metric history.

    Metrics are recorded at step 0, every `config.eval_every` steps and at the last step; each
    record holds `step` plus the task's metrics. `callback(step, metrics)` sees each record. With
    `agent_seeds`, batches and noise are drawn agent by agent as a deployment draws them (module
    doc; not for noise correlated over time). `device`: where to compute (`cpu`, `cuda`, `cuda:K` or
    `auto`); the task is moved there. `checkpoints`: save the run's state along the way and/or
    continue from a saved one ([`dpdl.simulation.resume`][dpdl.simulation.resume]).
    `dropouts`: the rounds agents miss, and `recovery`: whether the alive holders of a shared
    seed add the missing holders' share (module doc).
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
    rounds = _round_dropouts(weights, mechanism, config, device, dropouts, recovery)
    if agent_seeds is None:
        sampler, batch_rng = make_sampler(task, config), purpose_rng(seed, "batches")
        draw = None if sampler is None else lambda: sampler.sample(batch_rng)
        noise = _stream_noise(mechanism, rounds, purpose_rng(seed, "noise"), task.dim)
    else:
        batches = agent_batches(task, config, seed, list(range(n)))
        draw = None if batches is None else batches.sample
        noise = _agent_noise(mechanism, rounds, agent_seeds, task.dim)

    mixing = mixing_operator(weights, device)
    watch = FiniteWatch(config.step_size)

    def step(t: int, params: torch.Tensor) -> torch.Tensor:
        alive = None if rounds is None else rounds.alive(t)
        grads = local_gradients(task, params, draw() if draw is not None else None, config)
        if noise is not None:
            grads = grads + to_device(noise(t, alive), device)
        message = params - config.step_size(t) * grads
        if alive is None:
            watch.note(t, "message", message)  # its gradient and noise, times the step size
            return mixing @ message
        assert rounds is not None
        message = torch.where(rounds.mask(alive), message, params)  # the missing keep theirs
        watch.note(t, "message", message)
        return rounds.mixing(alive) @ message

    def replay(t: int) -> None:  # step t's draws, in step's order, without its arithmetic
        if draw is not None:
            draw()
        if noise is not None:
            noise(t, None if rounds is None else rounds.alive(t))

    label = f"{task.name}/{mechanism.name}"
    return iterate(
        task.to(device),
        config,
        step,
        label,
        progress,
        callback,
        replay,
        checkpoints=checkpoints,
        watch=watch,
    )


#: Round `t`'s noise of every agent `(n, d)`, given the round's alive mask (None: all alive).
RoundNoise = Callable[[int, np.ndarray | None], np.ndarray]


def _round_dropouts(
    weights: np.ndarray,
    mechanism: NoiseMechanism | LocalCorrelatedNoise,
    config: DSGDConfig,
    device: torch.device,
    dropouts: DropoutSchedule | None,
    recovery: bool,
) -> RoundDropouts | None:
    """The rounds of `dropouts` (None: no dropouts), refused for noise correlated over time
    and recovery without dropouts."""
    if dropouts is None:
        if recovery:
            raise ConfigError("dropout recovery acts on dropouts: give a dropout schedule")
        return None
    if not isinstance(mechanism, NoiseMechanism):
        raise ConfigError(
            f"{mechanism.name} noise is correlated over time: dropouts are implemented for noise "
            "drawn afresh each round"
        )
    return RoundDropouts(dropouts, weights, mechanism, recovery, device, config.steps)


def _stream_noise(
    mechanism: NoiseMechanism | LocalCorrelatedNoise,
    rounds: RoundDropouts | None,
    rng: np.random.Generator,
    dim: int,
) -> RoundNoise | None:
    """Each round's noise from the run's noise stream: the design's draw, or in a round with
    dropouts under recovery, the round's design's `sample` from the same generator."""
    if mechanism.is_noiseless:
        return None
    stream = mechanism.noise_stream(rng, dim)

    def noise(t: int, alive: np.ndarray | None) -> np.ndarray:
        if alive is None or rounds is None or not rounds.recovery:
            return next(stream)
        return rounds.design(alive).sample(rng, dim)

    return noise


def _agent_noise(
    mechanism: NoiseMechanism, rounds: RoundDropouts | None, seeds: SeedBook, dim: int
) -> RoundNoise | None:
    """Each round's noise drawn agent by agent from the seeds it holds (the agents' draws are
    functions of the round: nothing to advance); in a round with dropouts, the alive agents'
    from the round's design, zero for the missing."""
    if mechanism.is_noiseless:
        return None

    def noise(t: int, alive: np.ndarray | None) -> np.ndarray:
        if alive is None or rounds is None:
            return np.stack([mechanism.agent_noise(i, seeds, t, dim) for i in range(mechanism.n)])
        design, drawn = rounds.design(alive), np.zeros((mechanism.n, dim))
        for i in np.flatnonzero(alive):
            drawn[i] = design.agent_noise(int(i), seeds, t, dim)
        return drawn

    return noise


def iterate(
    task: Task,
    config: DSGDConfig,
    step: Callable[[int, torch.Tensor], torch.Tensor],
    label: str,
    progress: bool = False,
    callback: Callable[[int, dict[str, float]], None] | None = None,
    replay: Callable[[int], None] | None = None,
    variables: dict[str, torch.Tensor] | None = None,
    checkpoints: Checkpoints | None = None,
    watch: FiniteWatch | None = None,
) -> DSGDResult:
    """Apply `params <- step(t, params)` for t = 1..T from the task's initial point on every
    agent, on the task's device, recording metrics at step 0, every `config.eval_every` steps and
    at the last step (each record holds `step` plus the task's metrics; `callback(step,
    metrics)` sees each one). The final parameters come back to the host once, at the end.

    With `config.average_last = k`, the iterates of steps T - k + 1 .. T are evaluated too and
    the last record also holds each metric's mean over them, as `<metric>_tail` (DECOR's
    released least squares plots its error averaged over the last iterates, not at T).

    `checkpoints` ([`dpdl.simulation.resume`][dpdl.simulation.resume]): the states saved along
    the way and the one to start from; `replay(t)` draws step t's random numbers without
    computing (what a resumed run fast-forwards its streams by), and `variables` are the engine's
    other state, by name, which `step` reads and writes and a checkpoint holds. A resumed run's
    callback sees the records made after its start only.

    A run whose models (or what `step` notes in `watch` every step: D-SGD's noise-added
    messages, gradient tracking's models and tracking variable) or metrics stop being finite stops
    with a [`DivergenceError`][dpdl.errors.DivergenceError] naming the step, the agent and the
    likely cause ([`dpdl.jobspec.divergence`][dpdl.jobspec.divergence]); the models are checked
    at every evaluation and before every checkpoint, so no checkpoint holds a diverged state."""
    variables = {} if variables is None else variables
    watch = FiniteWatch(config.step_size) if watch is None else watch
    start = None if checkpoints is None else checkpoints.start
    if start is not None and start.step >= config.steps:
        _check_start(task, config, start)
        return DSGDResult(start.params, start.history)  # finished when it was saved
    if start is None:
        params = task.initial_params().repeat(task.n_agents, 1)
        history: list[dict[str, float]] = []
        tail: list[dict[str, float]] = []
    else:
        params, history, tail = _restore(task, config, start, variables, replay)
    first = 1 if start is None else start.step + 1

    def record(t: int) -> None:
        # at step 0 every agent holds the initial point, so one row has every agent's metrics (a
        # CNN's test pass costs as much as a few dozen training steps)
        watch.note(t, "model", params)
        watch.check()
        metrics = {"step": t, **task.evaluate(params[:1] if t == 0 else params)}
        _check_metrics(config, t, metrics, params)
        history.append(metrics)
        if callback is not None:
            callback(t, metrics)

    from tqdm.auto import tqdm  # here, not above: only a run with a progress bar needs it

    if start is None:
        record(0)
    bar = tqdm(
        total=config.steps,
        initial=first - 1,
        disable=None if progress else True,
        desc=label,
        unit="step",
        leave=False,
    )
    for t in range(first, config.steps + 1):
        params = step(t, params)
        if t % config.eval_every == 0 or t == config.steps:
            record(t)
            bar.set_postfix(
                {task.primary_metric: f"{history[-1][task.primary_metric]:.4g}"}, refresh=False
            )
        if t > config.steps - config.average_last:
            recorded = history[-1]["step"] == t
            if not recorded:
                watch.note(t, "model", params)
                watch.check()
            tail.append(history[-1] if recorded else _evaluated(task, config, t, params))
        if checkpoints is not None and t < config.steps and checkpoints.due(t, config.steps):
            watch.note(t, "model", params)
            watch.check()
            checkpoints.save(_state(t, params, history, tail, variables))
            checkpoints.saved()
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
    result = DSGDResult(params.cpu().numpy(), history)
    if checkpoints is not None:
        checkpoints.save(_state(config.steps, params, history, tail, variables, result.params))
        checkpoints.saved()
    return result


def _check_metrics(
    config: DSGDConfig, t: int, metrics: dict[str, float], params: torch.Tensor
) -> None:
    """`metrics` of `params` at step `t` checked finite
    ([`check_metrics`][dpdl.jobspec.divergence.check_metrics])."""
    step_size = config.step_size(max(t, 1))
    check_metrics(t, metrics, step_size, lambda: float(params.abs().max()))


def _evaluated(task: Task, config: DSGDConfig, t: int, params: torch.Tensor) -> dict[str, float]:
    """The task's metrics of `params` at step `t`, checked finite."""
    metrics = task.evaluate(params)
    _check_metrics(config, t, metrics, params)
    return metrics


def _state(
    t: int,
    params: torch.Tensor,
    history: list[dict[str, float]],
    tail: list[dict[str, float]],
    variables: dict[str, torch.Tensor],
    host: np.ndarray | None = None,
) -> EngineState:
    """The run after step `t` as host data (the records copied; the arrays are the tensors' own
    on a CPU, which the engine replaces rather than changes, and the save writes them at once)."""
    return EngineState(
        step=t,
        params=params.cpu().numpy() if host is None else host,
        history=[dict(record) for record in history],
        tail=[dict(record) for record in tail],
        variables={name: value.cpu().numpy() for name, value in variables.items()},
        torch_rng=torch.get_rng_state().numpy(),
    )


def _check_start(task: Task, config: DSGDConfig, start: EngineState) -> None:
    shape = (task.n_agents, task.dim)
    if start.params.shape != shape or start.step < 0 or start.step > config.steps:
        raise ConfigError(
            f"the state to resume is of step {start.step} with parameters {start.params.shape}; "
            f"this run has {config.steps} steps and parameters {shape}"
        )


def _restore(
    task: Task,
    config: DSGDConfig,
    start: EngineState,
    variables: dict[str, torch.Tensor],
    replay: Callable[[int], None] | None,
) -> tuple[torch.Tensor, list[dict[str, float]], list[dict[str, float]]]:
    """Parameters, history and last-iterate records of `start`, with the engine's variables and
    torch's generator set back and the random streams fast-forwarded past its steps (module doc
    of [`dpdl.simulation.resume`][dpdl.simulation.resume]: exact by construction)."""
    _check_start(task, config, start)
    if replay is None:
        raise ConfigError("this engine cannot resume: it has no way to replay its random draws")
    began = time.perf_counter()
    for t in range(1, start.step + 1):
        replay(t)
    logger.info(
        "resumed at step %d of %d: the random streams fast-forwarded in %.2f s",
        start.step,
        config.steps,
        time.perf_counter() - began,
    )
    for name, value in start.variables.items():
        variables[name] = torch.from_numpy(value).to(task.device)
    if start.torch_rng is not None:
        torch.set_rng_state(torch.from_numpy(start.torch_rng))
    params = torch.from_numpy(start.params).to(task.device)
    return params, [dict(r) for r in start.history], [dict(r) for r in start.tail]
