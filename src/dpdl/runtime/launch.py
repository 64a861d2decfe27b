"""Starting agents: one per `torchrun` rank across machines, or n local processes on loopback.

`torchrun --nnodes ... --nproc-per-node ... -m dpdl.cli -- run-agent <options>` sets the rendezvous
(`MASTER_ADDR`, `MASTER_PORT`, `RANK`, `WORLD_SIZE`) that
[`init_agent`][dpdl.runtime.launch.init_agent] reads; [`run_local`][dpdl.runtime.launch.run_local]
starts all n agents of a run as processes of this machine, collects their final models and evaluates
them as `dpdl train` does.

Faults, locally. The launcher holds the working folder's lock (`dpdl.files.folder_lock`), so a
second job in the same folder is refused while the first runs. It watches its agents: when one stops
with an error (a dead or frozen neighbour is detected by the agents within `--timeout`, naming it
and the round), the others that have not stopped `STOP_GRACE` seconds later are woken and
asked to stop (SIGCONT, SIGTERM: they save their last states), and whatever still runs after as long
again is killed; so a fault ends the whole job within `--timeout` plus twice that grace. Every
agent holds the read end of a pipe whose write end only the launcher holds: when the launcher dies,
however it dies, the pipe closes and the agents exit instead of running on as orphans.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import multiprocessing
import multiprocessing.connection
import os
import signal
import socket
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from tqdm import tqdm

from dpdl.errors import ConfigError, DivergenceError, DpdlError, PeerFailure
from dpdl.files import folder_lock, refuse_failed_resume, require_folder
from dpdl.jobspec.config import TrainConfig
from dpdl.jobspec.costs import AGENTS_ADVICE, agents_estimate, require_processes_fit
from dpdl.jobspec.departure import remaining_agents
from dpdl.jobspec.divergence import check_metrics
from dpdl.jobspec.dropouts import DropoutSchedule
from dpdl.jobspec.job import build_job, with_epochs
from dpdl.jobspec.resources import estimate, job_sizes, require_fits, require_job_fits
from dpdl.processes import worker_context
from dpdl.registry import load_plugins
from dpdl.runtime.agent import (
    AgentOptions,
    checkpoint_path,
    final_model_path,
    require_runtime_settings,
    run_agent,
)
from dpdl.runtime.backend import agent_device, environment_int, process_group_backend
from dpdl.runtime.checkpoint import require_same_run, run_settings
from dpdl.runtime.network import choose_interface

__all__ = [
    "Agents",
    "LocalRun",
    "agent_error_path",
    "free_port",
    "init_agent",
    "require_agents_fit",
    "run_local",
    "spawn_agents",
    "watch_agents",
]

#: Seconds the agents wait for one another to join the process group.
JOIN_TIMEOUT = 120.0
#: Seconds the launcher gives its other agents to stop after one failed, before it kills them.
STOP_GRACE = 5.0
#: Seconds between the launcher's looks at its agents.
WATCH_INTERVAL = 0.1
#: The checkpoints an agent may keep (`dpdl.runtime.agent.checkpoint_path`).
KINDS = ("periodic", "last")
#: Exit status of an agent whose launcher died.
ORPHANED = 3


def free_port() -> int:
    """A TCP port of the loopback interface that is free now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


#: What torchrun sets for each rank, and :func:`init_agent` reads.
TORCHRUN_VARIABLES = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def init_agent(
    rank: int | None = None,
    world: int | None = None,
    backend: str = "gloo",
    interface: str | None = None,
) -> int:
    """Join the process group of `backend` ([`dpdl.runtime.backend`][dpdl.runtime.backend]) from
    the environment `torchrun` sets; returns the rank. Under nccl the agent's GPU becomes the
    current device. On several hosts the agent's sockets use `interface`, else the interface
    that routes to `MASTER_ADDR` ([`choose_interface`][dpdl.runtime.network.choose_interface]).
    A group that cannot be joined within `JOIN_TIMEOUT` seconds (the master unreachable, an
    agent missing) is a [`PeerFailure`][dpdl.errors.PeerFailure] of round 0."""
    if rank is None or world is None:
        missing = [name for name in TORCHRUN_VARIABLES if name not in os.environ]
        if missing:
            raise ConfigError(
                f"run-agent runs as one rank of a torchrun job, but {', '.join(missing)} is not "
                "set: start it with torchrun (torchrun ... -m dpdl.cli -- run-agent ...), or run "
                "every agent on this machine with dpdl run-local"
            )
    rank = environment_int("RANK") if rank is None else rank
    world = environment_int("WORLD_SIZE") if world is None else world
    device = agent_device(backend)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    master = f"{os.environ.get('MASTER_ADDR')}:{os.environ.get('MASTER_PORT')}"
    if "MASTER_ADDR" in os.environ:
        choose_interface(os.environ["MASTER_ADDR"], environment_int("MASTER_PORT"), interface)
    try:
        dist.init_process_group(
            process_group_backend(backend),
            init_method="env://",
            rank=rank,
            world_size=world,
            timeout=datetime.timedelta(seconds=JOIN_TIMEOUT),
        )
    except RuntimeError as error:  # torch's DistNetworkError, DistStoreError, gloo's own
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise PeerFailure(
            f"rank {rank} could not join the {world} agents at {master} within {JOIN_TIMEOUT:g} s "
            f"({reason}); check that every agent was started and that the hosts reach one "
            "another (--interface names the network interface to use)",
            0,
            0,
        ) from error
    return rank


def agent_error_path(workdir: Path, rank: int) -> Path:
    """Where the local agent process of rank `rank` writes the error it stopped on."""
    return Path(workdir) / "errors" / f"rank{rank}.txt"


def agent_divergence_path(workdir: Path, rank: int) -> Path:
    """Where the local agent process of rank `rank` writes the record of its
    [`DivergenceError`][dpdl.errors.DivergenceError], when it stopped on one."""
    return Path(workdir) / "errors" / f"rank{rank}.diverged.json"


def _exit_with_launcher(launcher: multiprocessing.connection.Connection) -> None:
    """Block until the launcher's end of the pipe closes (it died, or the job is over), then end
    this agent at once."""
    with contextlib.suppress(EOFError, OSError):
        launcher.recv()
    os._exit(ORPHANED)


def _local_agent(
    target: Callable[..., Any],
    rank: int,
    world: int,
    port: int,
    workdir: Path,
    launcher: multiprocessing.connection.Connection,
    backend: str,
    args: tuple[Any, ...],
) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), LOCAL_RANK=str(rank))
    threading.Thread(target=_exit_with_launcher, args=(launcher,), daemon=True).start()
    # tqdm's bars otherwise share a multiprocessing lock, a named semaphore that an agent ending
    # by os._exit (on failure, below) never unlinks: the resource tracker then warns of a leak
    # after the launcher's last line. The agents' bars need a lock within their process only.
    tqdm.set_lock(threading.RLock())
    try:
        load_plugins()  # a fresh process: what the plugins register (DPDL_PLUGINS is inherited)
        init_agent(rank, world, backend)
        target(rank, *args)
        dist.destroy_process_group()
    except BaseException as error:  # reported to the launcher through the agent's error file
        path = agent_error_path(workdir, rank)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(str(error) if isinstance(error, DpdlError) else traceback.format_exc())
        if isinstance(error, DivergenceError):
            agent_divergence_path(workdir, rank).write_text(json.dumps(error.record()))
        os._exit(1)  # without tearing down gloo, which can block on a dead peer


@dataclass
class Agents:
    """Local agent processes (rank order) and the launcher's end of the pipe they watch: closing it
    (or the launcher's death) ends every agent still running."""

    processes: list[multiprocessing.Process]
    lifeline: multiprocessing.connection.Connection

    def close(self) -> None:
        self.lifeline.close()


def spawn_agents(
    world: int, workdir: Path, target: Callable[..., Any], *args: Any, backend: str = "gloo"
) -> Agents:
    """Start `target(rank, *args)` in `world` fresh processes joined in one process group of
    `backend` on loopback (under nccl, agent r on GPU r); each ends itself when the launcher (this
    process) dies."""
    context = worker_context()
    port = free_port()
    for rank in range(world):
        agent_error_path(workdir, rank).unlink(missing_ok=True)
        agent_divergence_path(workdir, rank).unlink(missing_ok=True)
    watched, lifeline = context.Pipe(duplex=False)
    processes = [
        context.Process(
            target=_local_agent,
            args=(target, rank, world, port, workdir, watched, backend, args),
            daemon=False,
        )
        for rank in range(world)
    ]
    for process in processes:
        process.start()
    watched.close()  # the agents hold their own copies; the launcher keeps only the write end
    return Agents(processes, lifeline)


def watch_agents(agents: Agents, grace: float = STOP_GRACE) -> dict[int, str]:
    """Wait until every agent has stopped; return, by rank, why the agents stopped that the
    launcher stopped. Once an agent has failed (non-zero exit), the others have `grace` seconds
    to stop on their own (their neighbours' failure reaches them as errors naming it); those still
    running then get SIGCONT and SIGTERM (a frozen agent wakes up to stop, saving its last states),
    and those still running `grace` seconds later get SIGKILL."""
    failed_at: float | None = None
    stopped: dict[int, str] = {}
    while True:
        alive = [r for r, p in enumerate(agents.processes) if p.exitcode is None]
        if not alive:
            return stopped
        failed = [r for r, p in enumerate(agents.processes) if p.exitcode not in (None, 0)]
        if failed and failed_at is None:
            failed_at = time.monotonic()
        waited = 0.0 if failed_at is None else time.monotonic() - failed_at
        for rank in alive if waited > grace else ():
            process = agents.processes[rank]
            if waited > 2 * grace:
                process.kill()
                stopped[rank] = (
                    f"was killed by the launcher: still running {2 * grace:g} s after rank "
                    f"{failed[0]} failed (frozen or blocked)"
                )
            elif rank not in stopped:
                os.kill(process.pid, signal.SIGCONT)
                os.kill(process.pid, signal.SIGTERM)
                stopped[rank] = f"was stopped by the launcher after rank {failed[0]} failed"
        sentinels = [agents.processes[r].sentinel for r in alive]
        multiprocessing.connection.wait(sentinels, WATCH_INTERVAL)


@dataclass
class LocalRun:
    """Outcome of [`run_local`][dpdl.runtime.launch.run_local]: the final models (rows: the
    agents of the run in rank order), their metrics, the run's privacy guarantee per threat, and
    the agents' errors; `diverged`: the first divergence an agent stopped on (the earliest round),
    where one did; `dropouts`: the rounds the agents missed (None: no dropouts configured)."""

    agents: list[int]
    models: np.ndarray | None
    metrics: dict[str, float]
    privacy: list[dict[str, Any]]
    errors: dict[int, str]
    diverged: DivergenceError | None = None
    dropouts: DropoutSchedule | None = None


def _agent_target(
    rank: int,
    config: TrainConfig,
    seed: int,
    options: AgentOptions,
    agents: list[int],
    progress: bool,
) -> None:
    run_agent(config, seed, agents[rank], options, progress=progress and rank == 0)


def require_agents_fit(
    config: TrainConfig, count: int, agents: tuple[int, int] | None = None
) -> bool:
    """Refuse, before anything is spawned, `count` local agent processes of `config` (on a graph
    of `agents` = `(n, edges)` once known) that cannot fit this machine: their memory and time
    (`agents_estimate`: every agent a process of its own
    that builds the job) and the processes, open files and ports the system allows
    (`require_processes_fit`). Returns whether the
    job's sizes were known."""
    sizes = job_sizes(config, agents)
    if sizes is None:
        return False
    require_job_fits(config, agents, log=False)  # the job alone first: its own largest term
    what = f"run-local's {count:,} agent processes"
    require_fits(agents_estimate(count, estimate(sizes)), what, advice=AGENTS_ADVICE)
    require_processes_fit(count, what, connected=True)
    return True


def run_local(
    config: TrainConfig, seed: int, options: AgentOptions, progress: bool = False
) -> LocalRun:
    """Run replicate `seed` of `config` as local agent processes (one per agent that has not
    left) and collect the outcome.

    When any agent fails, `models` is None and `errors` says, per agent, why it stopped;
    rerun with `resume=True` to continue from the checkpoints. An agent whose gradient, noise,
    messages or model stopped being finite stops on a
    [`DivergenceError`][dpdl.errors.DivergenceError] (`diverged`); a resume of the folder is then
    refused once the caller has marked it failed (`dpdl.files.write_failure`), and final metrics
    that are not finite raise one.
    """
    config = with_epochs(config.resolved())
    require_runtime_settings(config, options.departed)
    require_folder(options.workdir, "--workdir")
    count = (config.n or 0) - len(set(options.departed))
    known = count > 0 and require_agents_fit(config, count)
    job = build_job(config, seed)  # every setting checked, and the design made, before any agent
    n = job.task.n_agents
    if not known:
        graph = (job.graph.number_of_nodes(), job.graph.number_of_edges())
        require_agents_fit(config, n - len(set(options.departed)), graph)
    if any(agent >= n for agent in options.departed):
        raise ConfigError(f"departed: agents are 0..{n - 1}, got {list(options.departed)}")
    if options.resume and not Path(options.workdir).is_dir():
        raise ConfigError(f"nothing to resume: {options.workdir} does not exist")
    if options.resume:
        refuse_failed_resume(Path(options.workdir))
    agents = remaining_agents(config.n, options.departed)
    if options.backend == "nccl" and torch.cuda.device_count() < len(agents):
        raise ConfigError(
            f"--backend nccl runs one agent per GPU: {len(agents)} agents, and this machine has "
            f"{torch.cuda.device_count()} GPU(s); use --backend gloo, or torchrun across machines"
        )
    with folder_lock(options.workdir):
        if options.resume:  # said once here, not by every agent as it loads its checkpoint
            paths = [checkpoint_path(options.workdir, a, k) for a in agents for k in KINDS]
            require_same_run(paths, run_settings(config, seed), options.workdir)
        spawned = spawn_agents(
            len(agents),
            options.workdir,
            _agent_target,
            config,
            seed,
            options,
            agents,
            progress,
            backend=options.backend,
        )
        try:
            stopped = watch_agents(spawned)
        finally:
            spawned.close()
    errors = {}
    for rank, (agent, process) in enumerate(zip(agents, spawned.processes, strict=True)):
        path = agent_error_path(options.workdir, rank)
        if path.is_file():
            errors[agent] = path.read_text()
        elif rank in stopped:
            errors[agent] = f"agent {agent} {stopped[rank]}"
        elif process.exitcode:
            errors[agent] = f"agent {agent} exited with code {process.exitcode}"
    if errors:
        return LocalRun(agents, None, {}, [], errors, _first_divergence(options.workdir, agents))
    models = np.stack(
        [np.load(final_model_path(options.workdir, a), allow_pickle=False) for a in agents]
    )  # plain arrays only
    if options.departed:
        privacy = json.loads((Path(options.workdir) / "privacy.json").read_text())["privacy"]
    elif config.algorithm == "dsgt":
        privacy = []  # the injection is sized for the attacks, not accounted (as in dpdl train)
    else:
        privacy = [report.as_dict() for report in job.privacy(config.steps, config.delta)]
    metrics = job.task.evaluate(torch.from_numpy(models))
    check_metrics(
        config.steps,
        metrics,
        job.dsgd.step_size(config.steps),
        lambda: float(np.abs(models).max(initial=0.0)),
    )
    return LocalRun(agents, models, metrics, privacy, {}, dropouts=job.dropouts)


def _first_divergence(workdir: Path, agents: list[int]) -> DivergenceError | None:
    """The divergence of the earliest round that an agent recorded
    (`agent_divergence_path`), or None."""
    found = []
    for rank in range(len(agents)):
        path = agent_divergence_path(workdir, rank)
        if path.is_file():
            record = json.loads(path.read_text())
            found.append(
                DivergenceError(record["message"], record["step"], record["agent"], record["cause"])
            )
    return min(found, key=lambda e: (e.step, -1 if e.agent is None else e.agent), default=None)
