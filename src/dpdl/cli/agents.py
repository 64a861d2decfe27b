"""`dpdl run-agent` and `dpdl run-local`: a job's agents as processes of the runtime, one rank
of torch.distributed each (`dpdl.runtime`), and the runtime options both take."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from typing import Any

from dpdl.cli.options import add_overwrite_argument, add_training_arguments, claimed_output
from dpdl.errors import AuthenticationError, ConfigError, PeerFailure
from dpdl.jobspec.config import TrainConfig
from dpdl.runtime.options import AgentOptions
from dpdl.settings import add_arguments, from_options, to_options


def add_agent_arguments(parser: argparse.ArgumentParser) -> None:
    """How runtime agents run ([`AgentOptions`][dpdl.runtime.options.AgentOptions]: checkpoints,
    timeout, resume, departures, message authentication), and progress."""
    sections = add_arguments(parser, AgentOptions)
    sections["runtime"].add_argument(
        "--no-progress", action="store_true", help="hide the progress bar"
    )


def _agent_options(args: argparse.Namespace) -> AgentOptions:
    """The runtime options of `args`; the agents' key seed is the job's `--key-seed`."""
    from dataclasses import replace

    if len(args.seed) != 1:
        raise ConfigError("the runtime runs one replicate: give one --seed")
    return replace(from_options(AgentOptions, args), key_seed=args.key_seed)


def run_agent_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "run-agent",
        help="run one agent as one rank of torch.distributed (launch with torchrun, one rank per "
        "agent)",
        description="Run agent RANK of the job as a torch.distributed process (gloo, or nccl on "
        "the GPU LOCAL_RANK with --backend nccl): agree keys with the others "
        "(X25519), then train (D-SGD, or gradient tracking with --algorithm dsgt) exchanging "
        "authenticated messages with its graph neighbours only. Reads RANK, WORLD_SIZE, "
        "LOCAL_RANK, MASTER_ADDR and MASTER_PORT from the environment, as torchrun sets them "
        "(torchrun ... -m dpdl.cli -- run-agent ...); MASTER_ADDR is the first agent's host as "
        "the others reach it (not 127.0.0.1 across hosts); writes the final model to "
        "WORKDIR/agent<id>/final.npy.",
    )
    add_training_arguments(parser)
    add_agent_arguments(parser)
    parser.add_argument(
        "--interface",
        metavar="NAME",
        help="network interface of this agent's sockets when the agents run on several hosts "
        "(default: the one that routes to MASTER_ADDR; GLOO_SOCKET_IFNAME, where set, is kept)",
    )
    parser.set_defaults(handler=_run_agent)


def _run_agent(args: argparse.Namespace) -> int:
    from dpdl.jobspec.departure import remaining_agents
    from dpdl.runtime import init_agent, run_agent
    from dpdl.runtime.agent import final_model_path

    options = _agent_options(args)
    rank = init_agent(backend=options.backend, interface=args.interface)
    agent = remaining_agents(args.n, options.departed)[rank]
    try:
        run_agent(
            from_options(TrainConfig, args),
            args.seed[0],
            agent,
            options,
            progress=not args.no_progress,
        )
    except (PeerFailure, AuthenticationError) as error:  # a neighbour died, went silent or lied
        # End now (its last states are saved), as run-local's agents do: tearing the process
        # group down waits on the failed peer's pending messages (3 s here), delaying the stop.
        sys.stdout.flush()
        print(f"dpdl: error: {error}", file=sys.stderr, flush=True)
        os._exit(2)
    print(
        f"agent {agent} (rank {rank}): final model {final_model_path(args.workdir, agent)}",
        file=sys.stderr,
    )
    return 0


def run_local_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "run-local",
        help="run every agent of a job as its own process on this machine (loopback; gloo, or "
        "nccl with one GPU per agent) and evaluate the models",
        description="Start n run-agent processes on loopback, wait for them, and write models.npy "
        "and final.json (the metrics of the agents' final models) to WORKDIR; on a failure print "
        "which agent stopped and why (rerun with --resume to continue from the checkpoints).",
    )
    add_training_arguments(parser)
    add_agent_arguments(parser)
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the final metrics as one JSON object on the last line",
    )
    add_overwrite_argument(parser, "--workdir")
    parser.set_defaults(handler=_run_local)


def _run_local(args: argparse.Namespace) -> int:
    from dpdl.errors import DivergenceError
    from dpdl.experiments.results import clear_failure, write_failure
    from dpdl.runtime import run_local

    config = from_options(TrainConfig, args)
    options = _agent_options(args)
    if args.resume and args.overwrite:
        raise ConfigError("--resume continues the run in --workdir, which --overwrite clears")
    # the folder's lock and its run, for the whole run: the same options continue it (--resume);
    # a resume of a folder that does not exist is refused by the launcher, before the claim
    # would make it
    claim = (
        contextlib.nullcontext()
        if args.resume and not args.workdir.is_dir()
        else claimed_output(args, args.workdir, "run-local", to_options(config), "--workdir")
    )
    with claim:
        if not args.resume:
            clear_failure(args.workdir)  # of an earlier run this one replaces
        try:
            outcome = run_local(config, args.seed[0], options, not args.no_progress)
            if outcome.models is None:
                for agent, error in sorted(outcome.errors.items()):
                    print(f"agent {agent}: {error.strip().splitlines()[-1]}", file=sys.stderr)
                if outcome.diverged is not None:
                    raise outcome.diverged
        except DivergenceError as error:  # the run failed: its folder says so, and is not resumed
            print(f"failed: {write_failure(args.workdir, error)}", file=sys.stderr)
            raise
        return _write_outcome(args, outcome)


def _write_outcome(args: argparse.Namespace, outcome: Any) -> int:  # noqa: ANN401 (a LocalRun)
    """Write and print what the agents of `run-local` made (`outcome`), or why they stopped
    (printed by the caller)."""
    import numpy as np

    from dpdl.experiments.results import json_safe

    if outcome.models is None:
        raise PeerFailure(
            f"{len(outcome.errors)} of {len(outcome.agents)} agents stopped; rerun with --resume "
            "to continue from the checkpoints",
            min(outcome.errors),
            0,
        )
    np.save(args.workdir / "models.npy", outcome.models)
    final = {"agents": outcome.agents, **outcome.metrics, "privacy": outcome.privacy}
    if outcome.dropouts is not None:  # what they missed, and the file that replays it
        final["dropouts"] = outcome.dropouts.describe()
        outcome.dropouts.write(args.workdir / "dropouts.csv")
    (args.workdir / "final.json").write_text(json.dumps(json_safe(final), indent=2) + "\n")
    for report in outcome.privacy:
        print(
            f"privacy: eps={report['epsilon']:.4g} at delta={report['delta']:g}; "
            f"{report['threat']}; accountant {report['accountant']}",
            file=sys.stderr,
        )
    if outcome.dropouts is not None:
        print(f"{outcome.dropouts.summary()} (dropouts.csv)", file=sys.stderr)
    for name, value in outcome.metrics.items():
        print(f"{name}: {value:.6g}", file=sys.stderr)
    print(f"results: {args.workdir}", file=sys.stderr)
    if args.json:
        print(json.dumps(json_safe(outcome.metrics)))
    return 0
