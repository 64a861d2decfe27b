"""Starting agents: one per ``torchrun`` rank across machines, or n local processes on loopback.

``torchrun --nnodes ... --nproc-per-node ... -m dpdl.cli -- run-agent <options>`` sets the
rendezvous (``MASTER_ADDR``, ``MASTER_PORT``, ``RANK``, ``WORLD_SIZE``) that :func:`init_agent`
reads;
:func:`run_local` starts all n agents of a run as processes of this machine, collects their final
models and evaluates them as ``dpdl train`` does.
"""

from __future__ import annotations

import datetime
import json
import multiprocessing
import os
import socket
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch.distributed as dist

from dpdl.errors import DpdlError
from dpdl.jobspec.config import TrainConfig
from dpdl.jobspec.departure import remaining_agents
from dpdl.jobspec.job import build_job, privacy_reports
from dpdl.processes import worker_context
from dpdl.registry import load_plugins
from dpdl.runtime.agent import AgentOptions, final_model_path, run_agent

__all__ = ["LocalRun", "agent_error_path", "free_port", "init_agent", "run_local", "spawn_agents"]

#: Seconds the agents wait for one another to join the process group.
JOIN_TIMEOUT = 120.0


def free_port() -> int:
    """A TCP port of the loopback interface that is free now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def init_agent(rank: int | None = None, world: int | None = None) -> int:
    """Join the gloo process group from the environment ``torchrun`` sets; returns the rank."""
    rank = int(os.environ["RANK"]) if rank is None else rank
    world = int(os.environ["WORLD_SIZE"]) if world is None else world
    dist.init_process_group(
        "gloo",
        init_method="env://",
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=JOIN_TIMEOUT),
    )
    return rank


def agent_error_path(workdir: Path, rank: int) -> Path:
    """Where the local agent process of rank ``rank`` writes the error it stopped on."""
    return Path(workdir) / "errors" / f"rank{rank}.txt"


def _local_agent(
    target: Callable[..., Any],
    rank: int,
    world: int,
    port: int,
    workdir: Path,
    args: tuple[Any, ...],
) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    try:
        load_plugins()  # a fresh process: what the plugins register (DPDL_PLUGINS is inherited)
        init_agent(rank, world)
        target(rank, *args)
        dist.destroy_process_group()
    except BaseException as error:  # reported to the launcher through the agent's error file
        path = agent_error_path(workdir, rank)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(str(error) if isinstance(error, DpdlError) else traceback.format_exc())
        os._exit(1)  # without tearing down gloo, which can block on a dead peer


def spawn_agents(
    world: int, workdir: Path, target: Callable[..., Any], *args: Any
) -> list[multiprocessing.Process]:
    """Start ``target(rank, *args)`` in ``world`` fresh processes joined in one gloo group on
    loopback."""
    context = worker_context()
    port = free_port()
    for rank in range(world):
        agent_error_path(workdir, rank).unlink(missing_ok=True)
    processes = [
        context.Process(
            target=_local_agent, args=(target, rank, world, port, workdir, args), daemon=False
        )
        for rank in range(world)
    ]
    for process in processes:
        process.start()
    return processes


@dataclass
class LocalRun:
    """Outcome of :func:`run_local`: the final models (rows: the agents of the run in rank order),
    their metrics, the run's privacy guarantee per threat, and the agents' errors."""

    agents: list[int]
    models: np.ndarray | None
    metrics: dict[str, float]
    privacy: list[dict[str, Any]]
    errors: dict[int, str]


def _agent_target(
    rank: int,
    config: TrainConfig,
    seed: int,
    options: AgentOptions,
    agents: list[int],
    progress: bool,
) -> None:
    run_agent(config, seed, agents[rank], options, progress=progress and rank == 0)


def run_local(
    config: TrainConfig, seed: int, options: AgentOptions, progress: bool = False
) -> LocalRun:
    """Run replicate ``seed`` of ``config`` as local agent processes (one per agent that has not
    left) and collect the outcome.

    When any agent fails, ``models`` is None and ``errors`` says, per agent, why it stopped;
    rerun with ``resume=True`` to continue from the checkpoints.
    """
    config = config.resolved()
    agents = remaining_agents(config.n, options.departed)
    processes = spawn_agents(
        len(agents), options.workdir, _agent_target, config, seed, options, agents, progress
    )
    for process in processes:
        process.join()
    errors = {}
    for rank, (agent, process) in enumerate(zip(agents, processes, strict=True)):
        path = agent_error_path(options.workdir, rank)
        if path.is_file():
            errors[agent] = path.read_text()
        elif process.exitcode:
            errors[agent] = f"agent {agent} exited with code {process.exitcode}"
    if errors:
        return LocalRun(agents, None, {}, [], errors)
    models = np.stack(
        [np.load(final_model_path(options.workdir, a), allow_pickle=False) for a in agents]
    )  # plain arrays only
    job = build_job(config, seed)
    if options.departed:
        privacy = json.loads((Path(options.workdir) / "privacy.json").read_text())["privacy"]
    elif config.algorithm == "dsgt":
        privacy = []  # the injection is sized for the attacks, not accounted (as in dpdl train)
    else:
        privacy = [
            report.as_dict()
            for report in privacy_reports(
                job.mechanism, job.neighbouring, config.steps, config.delta
            )
        ]
    return LocalRun(agents, models, job.task.evaluate(models), privacy, {})
