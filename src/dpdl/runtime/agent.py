"""One agent of noisy D-SGD as one process of `torch.distributed`: the deployment of
Algorithm 1 of Whisper D-SGD / CorN-DSGD / DECOR that `dpdl.simulation.run_dsgd` simulates,
or of gradient tracking with LPPA's injected noise (`dpdl.simulation.run_dsgt`; each round
an agent sends its model and its tracking variable in one message).

Round t of agent i (the row i of the simulation's vectorized step):

```text
g   <- clip(grad f_i(x_i; batch_i), C) (+ regulariser)     its own rows of examples only
y   <- x_i - eta_t (g + v_i^t)                            v_i^t from the seeds agent i holds
send y to every j with W[j, i] > 0; receive y_j from every j with W[i, j] > 0
x_i <- W[i, i] y + sum_j W[i, j] y_j
```

Every agent builds the graph, W, the calibration and the noise design from the public configuration
([`dpdl.jobspec.job.build_job`][dpdl.jobspec.job.build_job]), checks with the others that they
agree, and agrees its seeds by key exchange ([`dpdl.runtime.handshake`][dpdl.runtime.handshake]).
The task is built from the same configuration, which stands for the agent's own data: it reads only
its own rows.

Dropouts ([`dpdl.runtime.dropouts`][dpdl.runtime.dropouts]): every agent knows from the run's
schedule, which stands for the liveness exchange at the start of a round, who takes part in round
t. A missing agent computes, sends and receives nothing that round and keeps its model; the alive
agents do not wait for it, and mix what arrived with the weights of
[`mixing_after_dropouts`][dpdl.jobspec.dropouts.mixing_after_dropouts]: the simulation's rounds.

Faults: every `checkpoint_every` rounds the agent saves its state (the last two are kept), and when
a neighbour dies or times out ([`PeerFailure`][dpdl.errors.PeerFailure]) or the process is asked to
stop (SIGTERM) it saves its states of the last n rounds before it stops. A restart with
`resume=True` resumes every agent from the latest round that all of them saved: the last round
completed everywhere when the agents could save on the way out, the last periodic checkpoint when
one was killed outright. The run then continues exactly as if it had not stopped (batches and noise
are functions of the seeds and the round, and the seeds of the agents' keys, which each agent saves
at its first start and reads back: a replayed round sends the bytes it sent before, never a second
release with fresh noise). Agents that left for good are dropped with `departed`: the others
continue as a second phase on the remaining graph
([`dpdl.jobspec.departure`][dpdl.jobspec.departure]), keeping their own data and batch streams.
Checkpoints are data, not pickles, and name the run they belong to
([`dpdl.runtime.checkpoint`][dpdl.runtime.checkpoint]): a resume refuses a checkpoint that is torn,
altered, foreign or of another configuration.
"""

from __future__ import annotations

import datetime
import json
import signal
import threading
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from tqdm.auto import tqdm

from dpdl.errors import ConfigError, FileFormatError
from dpdl.files import atomic_write, folder_lock, json_safe, read_regular
from dpdl.jobspec.config import TrainConfig
from dpdl.jobspec.departure import (
    SecondPhase,
    remaining_agents,
    second_phase,
    two_phase_reports,
)
from dpdl.jobspec.divergence import divergence
from dpdl.jobspec.engine import require_calibrated_for
from dpdl.jobspec.job import Job, build_job, with_epochs
from dpdl.jobspec.sampling import AgentBatches
from dpdl.jobspec.step import agent_batches, local_gradients
from dpdl.keys import AgentKey
from dpdl.mechanisms.base import NoiseMechanism
from dpdl.runtime.backend import agent_device
from dpdl.runtime.channel import NeighbourChannel
from dpdl.runtime.checkpoint import (
    AgentState,
    load_agent_key,
    load_checkpoint,
    run_fingerprint,
    run_settings,
    save_agent_key,
    save_checkpoint,
)
from dpdl.runtime.dropouts import AgentRounds
from dpdl.runtime.handshake import Links, handshake
from dpdl.runtime.options import AgentOptions
from dpdl.tasks.base import Task

__all__ = [
    "AgentOptions",
    "checkpoint_path",
    "final_model_path",
    "key_path",
    "phase_path",
    "require_runtime_settings",
    "run_agent",
    "run_record_path",
]


def _agent_file(workdir: Path, agent: int, name: str) -> Path:
    return Path(workdir) / f"agent{agent}" / name


def checkpoint_path(workdir: Path, agent: int, kind: str) -> Path:
    """File of agent `agent`'s `"periodic"` or `"last"` (saved on failure) checkpoints
    ([`dpdl.runtime.checkpoint`][dpdl.runtime.checkpoint])."""
    return _agent_file(workdir, agent, f"{kind}.ckpt")


def final_model_path(workdir: Path, agent: int) -> Path:
    """File of agent `agent`'s final model (`.npy`)."""
    return _agent_file(workdir, agent, "final.npy")


def run_record_path(workdir: Path, agent: int) -> Path:
    """File of agent `agent`'s record of its run (JSON: where it started, its links)."""
    return _agent_file(workdir, agent, "run.json")


def key_path(workdir: Path, agent: int, epoch: int) -> Path:
    """File of agent `agent`'s private key of phase `epoch` (0, then 1 after a departure)."""
    return _agent_file(workdir, agent, f"key{epoch}.json")


def _agent_key(
    options: AgentOptions, agent: int, rank: int, epoch: int, run: str, resumed: bool
) -> AgentKey:
    """Agent `agent`'s key of phase `epoch` (as rank `rank`): from `options.key_seed`
    (reproducible), else the key it saved at its first start of this phase, else a fresh one,
    saved before any seed is derived from it. A resume never draws a new key for a phase that
    sent rounds: the rounds it replays would reach the neighbours again with independent noise,
    a release the accountant never counted."""
    if options.key_seed is not None:
        return AgentKey.create(rank, options.key_seed, epoch)
    path = key_path(options.workdir, agent, epoch)
    raw = load_agent_key(path, run, agent, epoch) if options.resume else None
    if raw is not None:
        return AgentKey.from_private_bytes(rank, raw)
    if resumed:
        raise ConfigError(
            f"agent {agent}: {path} is missing, so the rounds after its checkpoint would be sent "
            "again with fresh noise (a release no budget accounts); resume with the folder the "
            "run was started in, or start afresh (without resume)"
        )
    key = AgentKey.create(rank, None, epoch)
    save_agent_key(path, key.private_bytes(), run, agent, epoch)
    return key


def phase_path(workdir: Path, agent: int) -> Path:
    """File where agent `agent` records the departure its second phase started from."""
    return _agent_file(workdir, agent, "phase.json")


def _phase_start(options: AgentOptions, agent: int, resumed_round: int) -> int:
    """The round after which the second phase starts: recorded at its first start (so a resume
    inside the second phase keeps it), else the round the agents resume from now."""
    path = phase_path(options.workdir, agent)
    if path.exists():
        data = read_regular(path, "departure record", FileFormatError)
        try:
            record = json.loads(data)
            departed, after_round = record["departed"], record["after_round"]
        except (ValueError, TypeError, KeyError, RecursionError) as error:
            raise FileFormatError(
                f"{path} is not a record of a departure (JSON with departed and after_round): "
                f"{error}"
            ) from None
        if departed == sorted(options.departed):
            if not isinstance(after_round, int) or after_round < 0:
                raise FileFormatError(
                    f"{path}: after_round must be a round >= 0, got {after_round!r}"
                )
            return after_round
    atomic_write(
        path,
        (
            json.dumps({"departed": sorted(options.departed), "after_round": resumed_round}) + "\n"
        ).encode(),
    )
    return resumed_round


def _common_round(agent: int, states: list[AgentState], world: int) -> int:
    """The latest round every agent has a saved state for (collective), or 0 for none."""
    rounds = sorted({s.round for s in states})[-2 * world :]
    mine = torch.full((2 * world,), -1, dtype=torch.int64)
    mine[: len(rounds)] = torch.tensor(rounds, dtype=torch.int64)
    gathered = [torch.empty_like(mine) for _ in range(world)]
    dist.all_gather(gathered, mine)
    common = set.intersection(*({int(r) for r in t if r >= 0} for t in gathered))
    if not common and any(int(t.max()) >= 0 for t in gathered):
        raise ConfigError(
            f"agent {agent}: the agents' checkpoints share no round; start afresh (without resume)"
        )
    return max(common, default=0)


def _restore(
    path: Path, state: AgentState, shape: tuple[int, ...], batches: AgentBatches | None
) -> None:
    """Check that `state` (read from `path`) fits this run's parameters and batch streams, and
    move `batches` to where it stood."""
    if state.params.shape != shape:
        raise FileFormatError(
            f"{path}: the parameters of round {state.round} have shape {state.params.shape}, this "
            f"run's {shape}"
        )
    if (state.batches is None) != (batches is None):
        raise FileFormatError(
            f"{path}: round {state.round} {'lacks' if state.batches is None else 'has'} the batch "
            f"streams this run {'has' if batches is not None else 'lacks'}"
        )
    if batches is not None and state.batches is not None:
        try:
            batches.set_state(*state.batches)
        except (
            ValueError,
            TypeError,
            OverflowError,
        ) as error:  # numpy's own checks of a generator state included
            raise FileFormatError(
                f"{path}: the batch streams of round {state.round} do not fit this run's: {error}"
            ) from None


def run_agent(
    config: TrainConfig,
    seed: int,
    agent: int,
    options: AgentOptions,
    on_round: Callable[[int], None] | None = None,
    progress: bool = False,
) -> np.ndarray:
    """Run agent `agent` of replicate `seed` of `config` to the end and return its final
    model.

    The default process group must be initialised (`dpdl.runtime.init_agent` with
    `options.backend`; under nccl the agent computes on its GPU), one rank per agent: rank =
    agent, or, after departures, the agent's position among the remaining ones
    ([`remaining_agents`][dpdl.jobspec.departure.remaining_agents]).
    `on_round(t)` is called after every completed round. The agent holds the lock of its folder
    `WORKDIR/agent<i>` while it runs (`dpdl.files.folder_lock`): a second agent i in the
    same working folder is refused.
    """
    with folder_lock(Path(options.workdir) / f"agent{agent}", f"agent {agent}"):
        return _run(config, seed, agent, options, on_round, progress)


def require_runtime_settings(config: TrainConfig, departed: Sequence[int] = ()) -> None:
    """Refuse, with one error, a setting the agents cannot honour: they report their final
    models only, so no metric averaged over the last iterates (`average_last`); they draw
    their noise round by round, so no noise correlated over time; a dropout schedule is of the
    first phase's agents, so no dropouts with agents that `departed`."""
    if departed and (config.dropout or config.dropout_schedule is not None):
        raise ConfigError(
            "dropouts (--dropout, --dropout-schedule) and departures (--departed) do not combine: "
            "the schedule is of the first phase's agents"
        )
    if config.cycled:
        raise ConfigError(
            f"mechanism {config.mechanism!r} with cyclic batches (--cycle) runs in the simulation "
            "only: noise correlated over time, which the agents of run-local and run-agent cannot "
            "draw round by round (use dpdl train)"
        )
    if config.average_last:
        raise ConfigError(
            "average_last (--average-last) needs every iterate of the last steps evaluated; the "
            "agents of run-local and run-agent report their final models only (use dpdl train)"
        )


def _first_job(
    config: TrainConfig, seed: int, agent: int, options: AgentOptions
) -> tuple[Job, list[int], int]:
    """The job of replicate `seed` of `config` (resolved, with its epochs) before any
    departure, the agents that remain (original ids, in rank order) and agent `agent`'s rank
    among them. Refuses a setting the agents cannot honour, noise on other terms than it was
    calibrated for, an agent that is not among the remaining ones or not their rank in the
    process group, and departures under gradient tracking."""
    require_runtime_settings(config, options.departed)
    first = build_job(config, seed)
    if first.calibration is not None:  # the noise runs on the terms it was calibrated for
        require_calibrated_for(first.calibration, first.dsgd, first.task.agent_sizes)
    n = first.task.n_agents
    remaining = remaining_agents(n, options.departed)
    if agent not in remaining:
        raise ConfigError(f"agent {agent} is not among the agents of this run ({remaining})")
    rank = remaining.index(agent)
    if (
        not dist.is_initialized()
        or dist.get_rank() != rank
        or dist.get_world_size() != len(remaining)
    ):
        raise ConfigError(
            f"agent {agent} must run as rank {rank} of an initialised torch.distributed process "
            f"group of {len(remaining)} ranks"
        )
    if config.algorithm == "dsgt" and options.departed:
        raise ConfigError(
            "departures are supported for D-SGD only: under gradient tracking the departed "
            "agents' share of the tracked gradient sum is lost"
        )
    return first, remaining, rank


def _initial_state(
    first: Job, seed: int, agent: int, tracking: bool
) -> tuple[AgentState, AgentBatches | None]:
    """Agent `agent`'s state before round 1 (the job's initial model; under gradient tracking
    stacked with a tracking variable and a last gradient of zeros) and its batch streams (None:
    full gradients)."""
    start_vector = first.task.initial_params().cpu().numpy()
    if tracking:  # the model, the tracking variable and the last gradient
        start_vector = np.stack(
            [start_vector, np.zeros_like(start_vector), np.zeros_like(start_vector)]
        )
    batches = agent_batches(first.task, first.dsgd, seed, [agent])
    return AgentState(0, start_vector, None if batches is None else batches.state()), batches


def _resumed_state(
    options: AgentOptions,
    agent: int,
    start: AgentState,
    batches: AgentBatches | None,
    run: str,
    settings: dict[str, Any],
    world: int,
) -> AgentState:
    """The state agent `agent` resumes from (collective over the `world` agents): its saved
    state of the latest round that all of them saved, with `batches` moved to where they
    stood, else `start`. Refuses a resume with nothing to resume from (no agent saved a
    checkpoint and none departed)."""
    files = [checkpoint_path(options.workdir, agent, kind) for kind in ("periodic", "last")]
    saved = [(path, s) for path in files for s in load_checkpoint(path, run, agent, settings)]
    common = _common_round(agent, [s for _, s in saved], world)
    if common == 0 and not saved and not options.departed:
        raise ConfigError(
            f"agent {agent}: nothing to resume: no checkpoint in {Path(options.workdir)} "
            "(none of the agents saved one); start without --resume"
        )
    path, state = next(((path, s) for path, s in saved if s.round == common), (None, start))
    if path is not None:
        _restore(path, state, start.params.shape, batches)
    return state


def _departure_phase(
    config: TrainConfig,
    first: Job,
    options: AgentOptions,
    agent: int,
    rank: int,
    resumed_round: int,
) -> SecondPhase:
    """The second phase after `options.departed` left, from the round recorded at its first
    start, else from `resumed_round` (`_phase_start`). Rank 0 writes the privacy reports
    of both phases to `WORKDIR/privacy.json`."""
    phase = second_phase(
        config, first, list(options.departed), _phase_start(options, agent, resumed_round)
    )
    if rank == 0:
        reports = two_phase_reports(config, first, phase)
        record = {
            "departed": phase.departed,
            "after_round": phase.start_round,
            "agents": phase.agents,
            "privacy": [r.as_dict() for r in reports],
        }
        (Path(options.workdir) / "privacy.json").write_text(
            json.dumps(json_safe(record), indent=2) + "\n"
        )
    return phase


def _connect(
    job: Job,
    options: AgentOptions,
    agent: int,
    rank: int,
    epoch: int,
    run: str,
    resumed: bool,
    remaining: list[int],
    tracking: bool,
    device: torch.device,
) -> tuple[Links, NeighbourChannel]:
    """Agent `agent`'s links after the handshake of phase `epoch` (collective; its key from
    `_agent_key`) and its channel to its neighbours, whose messages hold the model, or
    under gradient tracking the model and the tracking variable."""
    timeout = datetime.timedelta(seconds=options.timeout)
    key = _agent_key(options, agent, rank, epoch, run, resumed)
    links = handshake(rank, key, job, timeout, remaining)
    dim = job.task.dim
    channel = NeighbourChannel(
        rank,
        job.weights,
        links.send_keys,
        links.receive_keys,
        2 * dim if tracking else dim,
        timeout,
        options.mac,
        remaining,
        device,
    )
    return links, channel


def _require_finite(
    t: int,
    agent: int,
    what: str,
    values: np.ndarray,
    step_size: float,
    model: np.ndarray | None = None,
) -> None:
    """Raise [`DivergenceError`][dpdl.errors.DivergenceError] if `values`, agent `agent`'s `what`
    of round `t` ([`dpdl.jobspec.divergence`][dpdl.jobspec.divergence]), are not all finite
    (`model`: the agent's model before, whose size tells a step size too large)."""
    if not np.isfinite(values).all():
        kind = "nan" if np.isnan(values).any() else "inf"
        peak = None if model is None else float(np.abs(model).max(initial=0.0))
        raise divergence(t, [agent], what, kind, step_size, peak)


def _round_step(
    config: TrainConfig,
    job: Job,
    task: Task,
    agent: int,
    rank: int,
    batches: AgentBatches | None,
    links: Links,
    channel: NeighbourChannel,
    device: torch.device,
    names: list[int],
) -> Callable[[int, np.ndarray], np.ndarray]:
    """Agent `agent`'s round: `step(t, params)` runs round `t` from `params` (collective
    with its neighbours) and returns the parameters after it. A round of noisy D-SGD (the
    module's formulas), or under gradient tracking (`config.algorithm == "dsgt"`) one of LPPA:
    `params` stacks the model, the tracking variable and the last gradient. A gradient, noise,
    message sent or received that is not finite stops it with a
    [`DivergenceError`][dpdl.errors.DivergenceError] (`names`: the agents by rank)."""
    dim = job.task.dim
    own_weight, weights_in = (
        job.weights[rank, rank],
        {j: job.weights[rank, j] for j in links.senders},
    )
    rounds = _agent_rounds(config, job, rank, links)

    def gradient(x: np.ndarray) -> np.ndarray:
        batch = batches.sample_agent(agent) if batches is not None else None
        params = torch.from_numpy(x[None, :]).to(device)  # on the CPU: no copy
        return local_gradients(task, params, batch, job.dsgd, agent=agent)[0].cpu().numpy()

    def mix(
        own: np.ndarray,
        received: dict[int, np.ndarray],
        part: slice = slice(None),
        weights: tuple[float, dict[int, float]] | None = None,
    ) -> np.ndarray:
        own_w, inputs = (own_weight, weights_in) if weights is None else weights
        mixed = own_w * own
        for j, w in inputs.items():
            mixed += w * received[j][part]
        return mixed

    def require_finite(
        t: int,
        parts: dict[str, np.ndarray],
        received: dict[int, np.ndarray],
        model: np.ndarray,
    ) -> None:
        # after the exchange: a neighbour learns of a diverged message at once, not at a timeout
        eta = job.dsgd.step_size(t)
        for what, values in parts.items():
            _require_finite(t, agent, what, values, eta, model)
        for j, values in received.items():  # j: the sender's rank
            _require_finite(t, names[j], "message", values, eta)

    def dsgd_round(t: int, x: np.ndarray) -> np.ndarray:
        alive = None if rounds is None else rounds.alive(t)
        if alive is not None and not alive[rank]:  # it misses the round: it computes nothing,
            if batches is not None:  # but its batch stream advances, as the simulation's does
                batches.sample_agent(agent)
            return x
        design, weights = job.mechanism, None
        if alive is not None:
            assert rounds is not None
            design, own, inputs = rounds.round(alive)
            weights = (own, inputs)
        grad, noise = gradient(x), design.agent_noise(rank, links.seeds, t, dim)
        step = grad + noise
        step *= -job.dsgd.step_size(t)
        sent = np.add(x, step, out=channel.outgoing)  # computed into the message: no copy
        received = channel.exchange(t, sent, alive)
        parts = {"gradient": grad, "noise": noise, "message": sent}
        require_finite(t, parts, received, x)
        mixed = mix(sent, received, weights=weights)
        _require_finite(t, agent, "model", mixed, job.dsgd.step_size(t))
        return mixed

    def inject(t: int) -> np.ndarray:
        return (
            job.injection.agent_sample(rank, links.seeds, t, dim)
            if job.injection is not None
            else np.zeros(dim)
        )

    def dsgt_round(
        t: int, vector: np.ndarray
    ) -> np.ndarray:  # LPPA eqs. (2)-(3), row `rank` of run_dsgt
        x, y, g = vector
        if t == 1:
            g = gradient(x)
            y = g + inject(0)
        communicates = t % config.tracking.local_steps == 0
        if communicates:
            sent = channel.outgoing
            sent[:dim], sent[dim:] = x, y
            received = channel.exchange(t, sent)
            mixed_x, mixed_y = (
                mix(x, received, slice(0, dim)),
                mix(y, received, slice(dim, 2 * dim)),
            )
        else:  # a local update: W = I
            mixed_x, mixed_y = x, y
        x_new = mixed_x - job.dsgd.step_size(t) * y
        g_new = gradient(x_new)
        y = mixed_y + g_new - g
        if job.injection is not None and job.injection.every_round and communicates:
            y = y + inject(t)
        parts = {"model": x_new, "gradient": g_new, "tracking": y}
        require_finite(t, parts, received if communicates else {}, x_new)
        return np.stack([x_new, y, g_new])

    return dsgt_round if config.algorithm == "dsgt" else dsgd_round


def _agent_rounds(config: TrainConfig, job: Job, rank: int, links: Links) -> AgentRounds | None:
    """Agent `rank`'s rounds under the job's dropout schedule, or None without one."""
    if job.dropouts is None:
        return None
    assert isinstance(job.mechanism, NoiseMechanism)  # dropouts: noise drawn afresh each round
    return AgentRounds(
        job.dropouts, job.weights, job.mechanism, rank, links.senders, config.dropout_recovery
    )


def _run_rounds(
    advance: Callable[[int, np.ndarray], np.ndarray],
    state: AgentState,
    batches: AgentBatches | None,
    config: TrainConfig,
    options: AgentOptions,
    agent: int,
    run: str,
    settings: dict[str, Any],
    keep: int,
    on_round: Callable[[int], None] | None,
    progress: bool,
) -> np.ndarray:
    """Run agent `agent`'s rounds after `state` to the last with `advance`
    (`_round_step`) and return its parameters after it. Every `options.checkpoint_every`
    rounds it saves its periodic checkpoint (the last two states); when a round fails or the
    process is asked to stop (SIGTERM, handled in the main thread only), it saves its states of
    the last `keep` rounds as its `"last"` checkpoint and re-raises."""
    params = state.params.copy()
    recent: deque[AgentState] = deque([state], maxlen=keep)
    periodic: deque[AgentState] = deque([state], maxlen=2)

    def stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"agent {agent} asked to stop (signal {signum})")

    main_thread = (
        threading.current_thread() is threading.main_thread()
    )  # only it may handle signals
    previous = signal.signal(signal.SIGTERM, stop) if main_thread else None
    bar = tqdm(
        total=config.steps,
        initial=state.round,
        disable=None if progress else True,
        desc=f"agent {agent}",
        unit="round",
    )
    try:
        for t in range(state.round + 1, config.steps + 1):
            params = advance(t, params)
            # a round makes new parameter arrays, and batches.state() new generator dicts: no copy
            # needed
            recent.append(AgentState(t, params, None if batches is None else batches.state()))
            if t % options.checkpoint_every == 0:
                periodic.append(recent[-1])
                save_checkpoint(
                    checkpoint_path(options.workdir, agent, "periodic"),
                    list(periodic),
                    run,
                    agent,
                    settings,
                )
            if on_round is not None:
                on_round(t)
            bar.update()
    except BaseException:
        save_checkpoint(
            checkpoint_path(options.workdir, agent, "last"), list(recent), run, agent, settings
        )
        raise
    finally:
        bar.close()
        if main_thread:
            signal.signal(signal.SIGTERM, previous)
    return params


def _save_final(
    options: AgentOptions,
    agent: int,
    model: np.ndarray,
    record: dict[str, Any],
) -> None:
    """Save agent `agent`'s final model
    ([`final_model_path`][dpdl.runtime.agent.final_model_path]) and then `record`, the record of
    its run ([`run_record_path`][dpdl.runtime.agent.run_record_path])."""
    path = final_model_path(options.workdir, agent)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, model)
    run_record_path(options.workdir, agent).write_text(json.dumps(record) + "\n")


def _run(
    config: TrainConfig,
    seed: int,
    agent: int,
    options: AgentOptions,
    on_round: Callable[[int], None] | None,
    progress: bool,
) -> np.ndarray:
    """The body of [`run_agent`][dpdl.runtime.agent.run_agent], inside the agent's folder lock:
    check the run and the process group, find the state to start from (round 0, or a resume's)
    and the phase (after a departure, the second, on the remaining graph), agree keys and seeds
    with the others, run the rounds, and save the final model and the record of the run."""
    config = with_epochs(config.resolved())
    first, remaining, rank = _first_job(config, seed, agent, options)
    tracking = config.algorithm == "dsgt"
    state, batches = _initial_state(first, seed, agent, tracking)
    run, settings = run_fingerprint(config, seed, first), run_settings(config, seed)
    if options.resume:
        state = _resumed_state(options, agent, state, batches, run, settings, len(remaining))
    job, epoch, phase = first, 0, None
    if options.departed:
        phase = _departure_phase(config, first, options, agent, rank, state.round)
        job, epoch = phase.job, 1
    device = agent_device(options.backend)
    task = job.task.to(device)
    # rounds of this phase were sent before: a resume of the first phase, or one after rounds of
    # the second
    resumed = options.resume and (
        epoch == 0 or (phase is not None and state.round > phase.start_round)
    )
    links, channel = _connect(
        job, options, agent, rank, epoch, run, resumed, remaining, tracking, device
    )
    advance = _round_step(
        config, job, task, agent, rank, batches, links, channel, device, remaining
    )
    params = _run_rounds(
        advance,
        state,
        batches,
        config,
        options,
        agent,
        run,
        settings,
        first.task.n_agents,
        on_round,
        progress,
    )
    model = params[0] if tracking else params
    record = {
        "agent": agent,
        "rank": rank,
        "seed": seed,
        "started_at_round": state.round,
        "rounds": config.steps,
        "receivers": [remaining[j] for j in links.receivers],
        "senders": [remaining[j] for j in links.senders],
    }
    if job.dropouts is not None:  # the rounds it missed (rank = agent: no departures)
        record["missed_rounds"] = (np.flatnonzero(~job.dropouts.alive[:, rank]) + 1).tolist()
    _save_final(options, agent, model, record)
    return model
