"""Benchmark of the peer-to-peer runtime: rounds per second of n = 8 gloo processes on loopback.

For models of 10^5 and 10^6 parameters (float64) on a ring and on Erdos-Renyi G(8, 0.5), each
process exchanges one vector with each graph neighbour per round, measured three ways:

- **bare**: ``isend`` / ``irecv`` of the vectors to and from the neighbours, nothing else: the
  physical limit of gloo on this machine;
- **aes-gmac**, **poly1305** and **hmac-sha256**: :class:`dpdl.runtime.channel.NeighbourChannel`,
  the runtime's exchange (round-tagged header, a tag per link, verification), with each MAC;
- **round**: a whole runtime round without the gradient, whose cost is the model's, not the
  runtime's: DECOR noise drawn from the agent's seeds (one private and one per edge secret), the
  local step into the message buffer, the authenticated exchange and the mixing (as
  :func:`dpdl.runtime.agent.run_agent`, whose round keeps its result for a checkpoint without
  copying it).

Each measurement starts 8 fresh processes; the timing (after 3 warm-up rounds, between two
barriers) is agent 0's, wall clock. Eight processes share two cores, so a measurement swings by a
third from one start to the next: each mode is measured three times, the modes taking turns, and
the best rate is kept. Figures go to stdout and to the ``bench_runtime`` section of
``BENCHMARKS.md``. Run from the repository root: ``.venv/bin/python benchmarks/bench_runtime.py``
(about four minutes on an idle 2-core machine).
"""

from __future__ import annotations

import datetime
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

from _report import markers, measured, write_section  # benchmarks/_report.py
from dpdl.graphs import build_graph, mixing_matrix
from dpdl.keys import AgentKey, mac_key, simulated_seed_book
from dpdl.mechanisms.decor import Decor
from dpdl.runtime.channel import MACS, NeighbourChannel, senders_of
from dpdl.runtime.launch import agent_error_path, spawn_agents

N, WARMUP, REPEATS = 8, 3, 3
ROUNDS = {10**5: 200, 10**6: 30}
GRAPHS = ("ring", "er")
MODES = ("bare", *MACS, "round")
START, END = markers("bench_runtime")


def _agent(agent: int, graph_name: str, dim: int, rounds: int, mode: str, out: Path) -> None:
    graph = build_graph(graph_name, N, 0.5, seed=0)
    weights = mixing_matrix(graph)
    peers = senders_of(weights, agent)  # = receivers_of: W is symmetric
    keys = [AgentKey.create(i, 0) for i in range(N)]
    pair = {j: keys[agent].pair_key(j, keys[j].public) for j in peers}
    mac = mode if mode in MACS else MACS[0]
    channel = NeighbourChannel(
        agent,
        weights,
        {j: mac_key(pair[j], agent, j, bytes(32)) for j in peers},
        {j: mac_key(pair[j], j, agent, bytes(32)) for j in peers},
        dim,
        datetime.timedelta(seconds=120),
        mac,
    )
    mechanism = Decor(graph, 1.0, 1.0)
    seeds = simulated_seed_book(mechanism, 0).for_agent(mechanism, agent)
    params, gradient = np.zeros(dim), np.full(dim, 1e-3)
    outbox = torch.zeros(dim, dtype=torch.float64)
    inbox = {j: torch.empty(dim, dtype=torch.float64) for j in peers}

    def bare(t: int) -> None:
        works = [dist.isend(outbox, j) for j in peers] + [dist.irecv(inbox[j], j) for j in peers]
        for work in works:
            work.wait()

    def authenticated(t: int) -> None:
        channel.exchange(t, channel.outgoing)  # like bare: the vector is already in the send buffer

    def whole(t: int) -> None:
        nonlocal params
        step = gradient + mechanism.agent_noise(agent, seeds, t, dim)
        step *= -0.1
        sent = np.add(params, step, out=channel.outgoing)
        received = channel.exchange(t, sent)
        params = weights[agent, agent] * sent
        for j in peers:
            params += weights[agent, j] * received[j]

    step = {"bare": bare, "round": whole}.get(mode, authenticated)
    for t in range(1, WARMUP + 1):
        step(t)
    dist.barrier()
    start = time.perf_counter()
    for t in range(WARMUP + 1, WARMUP + rounds + 1):
        step(t)
    dist.barrier()
    if agent == 0:
        out.write_text(json.dumps({"seconds": time.perf_counter() - start}))


def rounds_per_second(graph: str, dim: int, mode: str) -> float:
    """Rounds per second of 8 agents exchanging ``dim`` floats in ``mode``."""
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "timing.json"
        agents = spawn_agents(N, Path(folder), _agent, graph, dim, ROUNDS[dim], mode, out)
        for process in agents.processes:
            process.join()
        agents.close()
        if any(process.exitcode for process in agents.processes):
            errors = [agent_error_path(Path(folder), agent) for agent in range(N)]
            raise RuntimeError(
                f"an agent failed: {[path.read_text() for path in errors if path.exists()]}"
            )
        timing = json.loads(out.read_text())
    return ROUNDS[dim] / timing["seconds"]


def main() -> None:
    names = {"aes-gmac": "AES-GMAC", "poly1305": "Poly1305", "hmac-sha256": "HMAC-SHA256"}
    rows = [
        "| graph | parameters | bare gloo (rounds/s) | "
        + " | ".join(f"{names[mac]} exchange (rounds/s) | ratio" for mac in MACS)
        + f" | whole round, {names[MACS[0]]}, no gradient (rounds/s) | ratio |",
        "|---|---|---|" + "---|---|" * (len(MACS) + 1),
    ]
    for graph in GRAPHS:
        for dim in ROUNDS:
            rates = dict.fromkeys(MODES, 0.0)
            for _ in range(REPEATS):
                for mode in MODES:
                    rates[mode] = max(rates[mode], rounds_per_second(graph, dim, mode))
            rows.append(
                f"| {graph} | {dim:.0e} | {rates['bare']:.1f} | "
                + " | ".join(
                    f"{rates[mode]:.1f} | {rates['bare'] / rates[mode]:.2f}x" for mode in MODES[1:]
                )
                + " |"
            )
            print(rows[-1], flush=True)
    text = "\n".join(
        [
            START,
            "## Peer-to-peer runtime (`benchmarks/bench_runtime.py`)",
            "",
            measured(f"numpy {np.__version__}, torch {torch.__version__} (gloo)"),
            "",
            "Eight agent processes on loopback, one float64 vector per neighbour per round; the "
            f"best of {REPEATS} starts of each; ratio = bare rate / rate (1.00x: as fast as gloo "
            "alone). The authenticated exchanges add the round header and a tag per link: GMAC "
            "(AES-256-GCM, the runtime's default) or Poly1305 over each outgoing and incoming "
            "vector, or one SHA-256 of the outgoing vector, one of each incoming vector and an "
            "HMAC per link. The whole round adds DECOR noise drawn from the agent's seeds (one "
            "private draw and one per edge), the step and the mixing.",
            "",
            *rows,
            END,
            "",
        ]
    )
    print(text)
    write_section(text, START, END)


if __name__ == "__main__":
    main()
