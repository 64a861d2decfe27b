"""What the commands beyond one training job cost, estimated from their options before any work:
processes started on this machine (`dpdl run-local`'s agents, the workers of a grid), a
factorization (`dpdl factorize`) and an audit (`dpdl audit`).

Each estimate is an [`Estimate`][dpdl.jobspec.resources.Estimate] (memory by named term, and
seconds), checked by [`require_fits`][dpdl.jobspec.resources.require_fits] against
`DPDL_MEMORY_LIMIT` (or the memory available) and `DPDL_TIME_LIMIT` (30 days); processes are
also checked against what the operating system allows one user (`require_processes_fit`:
processes, open files, loopback ports).
"""

from __future__ import annotations

import os
import resource
from collections.abc import Sequence
from pathlib import Path

from dpdl.attacks.membership import MAX_COALITIONS, THRESHOLDS
from dpdl.errors import ResourceError
from dpdl.jobspec.resources import (
    EDGE_SECRETS,
    FLOP_RATE,
    NORMAL_COST,
    OPTIMISER_ITERATION_CUBES,
    OPTIMISER_ITERATIONS_PER_PARTICIPATION,
    OPTIMISER_MATRICES,
    OPTIMISER_MAX_ITERATIONS,
    STEP_OVERHEAD,
    Estimate,
    JobSizes,
    TaskShape,
    estimate,
    toeplitz_fit_operations,
)
from dpdl.scale import SPARSE_MIN_AGENTS, format_bytes

__all__ = [
    "AGENTS_ADVICE",
    "AGENT_PROCESS_BYTES",
    "AUDIT_ADVICE",
    "FACTORIZE_ADVICE",
    "WORKERS_ADVICE",
    "agents_estimate",
    "audit_estimate",
    "factorize_estimate",
    "require_processes_fit",
]

#: The encoders `dpdl factorize` compares (dp-dsgd, antipgd, mafalda and the Toeplitz
#: strategies sqrt, bsr, bandmf, bisr, blt), each held with its inverse.
FACTORIZE_METHODS = 8

#: What each command refused is told to make smaller.
AGENTS_ADVICE = "use fewer agents (--n), or train them in one process with dpdl train"
WORKERS_ADVICE = "use fewer worker processes (--jobs)"
FACTORIZE_ADVICE = (
    "use fewer participations (--participations) or batches (--batches), correlation restarts "
    "(--restart), or fewer agents"
)
AUDIT_ADVICE = (
    "use fewer steps (--steps), attack trials (--attack-trials), mechanisms (--mechanisms) or "
    "agents"
)

#: Memory of one agent process of `dpdl run-local` (or one worker of a grid) before its job:
#: python with torch, numpy, scipy and dpdl imported. Measured on a `run-local` agent (ring of 4
#: and of 8, quadratic task): 445 MB resident, of which 390 MB anonymous (`RssAnon`) and 47 MB of
#: files; its private share is 21-23 MB while it starts, but the rest is the fork server's pages,
#: shared only until written, and Python's reference counts and collector write to them as the
#: agent runs (the issue saw 550 MB per agent at n = 100,000, the graph and job included). So the
#: whole anonymous part is counted, rounded up.
AGENT_PROCESS_BYTES = 400 * 2**20
#: Seconds to start one agent on a 2-core machine (fork, its job built, the key agreement with its
#: neighbours): a ring of 8 agents ran 10 steps in 19 s (launcher, fork server and 8 agents).
AGENT_START_SECONDS = 1.5
#: Seconds of one agent's round on a 2-core machine besides its computation (the authenticated
#: send and receive through gloo): a ring of 8 agents ran 3,000 steps in 45 s more than 10 steps.
AGENT_ROUND_SECONDS = 2e-3
#: File descriptors one agent process of a run of n holds, at most (rank 0): 2 n + 23 measured
#: at n = 8 (gloo's sockets to every other agent, the rendezvous store's server and clients,
#: pipes); the launcher holds about 3 per agent (each process's sentinel and pipes).
FDS_PER_AGENT = 3
FDS_BASE = 32
#: Processes a launcher needs besides its agents (itself, the fork server, the resource tracker)
#: and a margin for the shell and the user's other processes.
PROCESS_MARGIN = 16
#: Dense float64 n x n matrices an attack holds while it aims (the unknown noise's covariance,
#: the honest agents' block, the view's covariance, its eigendecomposition and pseudo-inverse).
AIM_MATRICES = 5
#: Operations of aiming at one coalition, in units of n^3 (one symmetric eigendecomposition and
#: the products around it).
AIM_CUBES = 10.0
#: Gradients the eavesdropper's sum attack draws per agent.
SUM_ATTACK_COORDINATES = 1000


def _read_int(path: str, field: int = 0) -> int | None:
    try:
        return int(Path(path).read_text().split()[field])
    except (OSError, ValueError, IndexError):
        return None


def _soft_limit(kind: int) -> int | None:
    soft = resource.getrlimit(kind)[0]
    return None if soft == resource.RLIM_INFINITY else int(soft)


def _port_range() -> int | None:
    low = _read_int("/proc/sys/net/ipv4/ip_local_port_range", 0)
    high = _read_int("/proc/sys/net/ipv4/ip_local_port_range", 1)
    return None if low is None or high is None else high - low + 1


def require_processes_fit(count: int, what: str, connected: bool = False) -> None:
    """Raise a [`ResourceError`][dpdl.errors.ResourceError] when `count` processes started on
    this machine exceed what the operating system allows: the user's processes (`ulimit -u`)
    and the kernel's `pid_max`, the open files of one process (`ulimit -n`: the launcher's
    pipes, and with `connected` the sockets of agents that all connect to one another), and with
    `connected` the loopback ports (`ip_local_port_range`: every agent connects to every other's
    listener)."""
    processes = count + PROCESS_MARGIN
    for limit, source in (
        (_soft_limit(resource.RLIMIT_NPROC), "the user's processes (ulimit -u)"),
        (_read_int("/proc/sys/kernel/pid_max"), "the kernel's pid_max"),
    ):
        if limit is not None and processes > limit:
            raise ResourceError(
                f"{what} starts {count:,} processes: about {processes:,} with the launcher's, "
                f"more than the {limit:,} of {source}; use fewer agents"
            )
    files = FDS_PER_AGENT * count + FDS_BASE if connected else 2 * count + FDS_BASE
    limit = _soft_limit(resource.RLIMIT_NOFILE)
    if limit is not None and files > limit:
        raise ResourceError(
            f"{what} needs about {files:,} open files in one process ({count:,} processes"
            + (", each connected to every other" if connected else "")
            + f"), more than the {limit:,} of ulimit -n; use fewer agents, or raise ulimit -n"
        )
    ports = _port_range()
    if connected and ports is not None and count > ports:
        raise ResourceError(
            f"{what} connects {count:,} agents to one another on loopback: each listens for "
            f"{count - 1:,} connections, more than the {ports:,} ports of ip_local_port_range; "
            "use fewer agents, or torchrun across machines"
        )


def agents_estimate(count: int, job: Estimate) -> Estimate:
    """`count` agent processes of `dpdl run-local`, each building the job whose estimate is
    `job` (every agent builds the graph, the task and the design; the launcher too), and the
    time: the job's, each agent's start and its rounds, on this machine's cores."""
    steps = job.steps
    cores = max(1, os.cpu_count() or 1)
    terms = {
        f"{count:,} agent processes (python, torch and dpdl, "
        f"{format_bytes(AGENT_PROCESS_BYTES)} each)": float(count) * AGENT_PROCESS_BYTES,
        f"the job each agent builds ({count:,} x {format_bytes(job.memory)})": count * job.memory,
        "the launcher's job": job.memory,
    }
    seconds = (job.seconds or 0.0) + count * (
        AGENT_START_SECONDS + steps * AGENT_ROUND_SECONDS
    ) * 2 / cores
    return Estimate(terms, seconds, steps)


def factorize_estimate(
    n: int,
    participations: int,
    batches: int,
    restart: int | None = None,
    per_agent: bool = False,
    symmetric: bool = True,
    edges: int | None = None,
) -> Estimate:
    """`dpdl factorize` on `n` agents under cyclic (`participations`, `batches`)-participation
    (T = k b steps; blocks of `restart` steps), with MAFALDA-L-SGD's `per_agent` encoders:
    the dense W and its eigendecomposition, the utility Gram matrix (by the route a `symmetric`
    W allows, else the general one, `T` blocks of `n x n`), the encoders and the L-BFGS
    optimisation (`OPTIMISER_MATRICES` of `size x size`), and their time. `edges`: also the
    graph, when it is yet to be built."""
    steps = participations * batches
    size = restart or steps
    n_f, t_f, s_f = float(n), float(steps), float(size)
    terms: dict[str, float] = {}
    if edges is not None:
        terms[f"networkx graph ({n:,} nodes, {edges:,} edges)"] = 300.0 * n + 150.0 * edges
    terms[f"dense mixing matrix W ({n:,} x {n:,} float64) and its eigendecomposition"] = (
        3 * 8.0 * n_f * n_f
    )
    encoders = (
        f"encoders of the {FACTORIZE_METHODS} methods and their evaluation "
        f"({2 * FACTORIZE_METHODS} x {steps:,} x "
    )
    terms[encoders + f"{steps:,} float64)"] = 2 * FACTORIZE_METHODS * 8.0 * t_f * t_f
    terms[f"encoder optimisation ({OPTIMISER_MATRICES} x {size:,} x {size:,} float64)"] = (
        8.0 * OPTIMISER_MATRICES * s_f * s_f
    )
    participating = max(1, size // batches)
    iterations = min(
        OPTIMISER_ITERATIONS_PER_PARTICIPATION * participating, OPTIMISER_MAX_ITERATIONS
    )
    optimise = iterations * OPTIMISER_ITERATION_CUBES * s_f**3
    evaluate = 4.0 * FACTORIZE_METHODS * t_f**3  # the sensitivities and losses of the encoders
    fits = 2 * toeplitz_fit_operations(size)  # BandMF's, BLT's
    if symmetric:
        terms[f"utility Gram matrix ({size:,} x {size:,}, 6 float64 temporaries)"] = (
            6 * 8.0 * s_f * s_f
        )
        gram = 5.0 * n_f * t_f * s_f + 10.0 * n_f**3
    else:
        terms[f"utility Gram matrix, general route ({steps:,} blocks of {n:,} x {n:,} float64)"] = (
            2 * 8.0 * t_f * n_f * n_f
        )
        gram = n_f**3 * t_f**2 + n_f**2 * t_f**3
    if per_agent:
        terms[f"every agent's utility Gram matrix ({n:,} x {steps:,} x {steps:,} float64)"] = (
            8.0 * n_f * t_f * t_f
        )
        terms[f"every agent's encoder ({n:,} x {steps:,} x {steps:,} float64, twice)"] = (
            2 * 8.0 * n_f * t_f * t_f
        )
        optimise *= 1 + n
        evaluate += 2.0 * n_f * t_f**3
        gram += n_f * n_f * t_f * s_f
    return Estimate(terms, (gram + optimise + fits + evaluate) / FLOP_RATE, steps)


def _design_seconds(n: int, edges: int, mechanism: str) -> float:
    """Seconds of `mechanism`'s design on a graph of `n` agents and `edges` edges: the set-up
    [`estimate`][dpdl.jobspec.resources.estimate] counts for a run of no steps."""
    sizes = JobSizes(n, edges, mechanism, n < SPARSE_MIN_AGENTS, TaskShape(1, "quadratic"))
    return estimate(sizes).seconds or 0.0


def audit_estimate(
    n: int,
    edges: int,
    mechanisms: Sequence[str],
    coalitions: Sequence[int],
    steps: int,
    trials: int | None,
) -> Estimate:
    """`dpdl audit` on `n` agents and `edges` edges: every mechanism of `mechanisms` designed
    (its largest design held at once) and, with `trials` membership-test trials per hypothesis,
    attacked as each threat whose coalition count is in `coalitions` (those beyond
    `MAX_COALITIONS` are not searched): aiming at each coalition (`AIM_MATRICES` dense n x n),
    then `steps` draws of the noise for `2 trials` samples per threat, and the sum attack."""
    designs = [estimate(JobSizes(n, edges, name, n < SPARSE_MIN_AGENTS)) for name in mechanisms]
    terms = dict(max(designs, key=lambda found: found.memory).terms) if designs else {}
    seconds = sum(_design_seconds(n, edges, name) for name in mechanisms)
    if trials is None:
        return Estimate(terms, seconds, steps)
    searched = [count for count in coalitions if count <= MAX_COALITIONS]
    n_f, samples = float(n), 2.0 * trials
    edge_draws = any(name in EDGE_SECRETS for name in mechanisms)
    draws = n_f + (edges if edge_draws else 0)
    terms[f"an attack's aim ({AIM_MATRICES} dense {n:,} x {n:,} float64)"] = (
        8.0 * AIM_MATRICES * n_f * n_f
    )
    drawn = f"an attack's noise samples ({2 * trials:,} trials x {int(draws):,} draws, float64"
    terms[drawn + ", and their view)"] = 8.0 * samples * (draws + n_f)
    terms[f"the test's statistics and thresholds ({2 * trials:,} trials x {THRESHOLDS})"] = (
        8.0 * 4 * samples + trials / 2 * THRESHOLDS
    )
    terms[f"the sum attack's gradients ({n:,} x {SUM_ATTACK_COORDINATES:,} float64)"] = (
        3 * 8.0 * n_f * SUM_ATTACK_COORDINATES
    )
    per_threat = (
        steps * (samples * (NORMAL_COST * draws + 2 * n_f) / FLOP_RATE + STEP_OVERHEAD)
        + samples * THRESHOLDS * 2 / FLOP_RATE
    )
    aim = sum(searched) * AIM_CUBES * n_f**3 / FLOP_RATE
    seconds += len(mechanisms) * (len(searched) * per_threat + aim)
    return Estimate(terms, seconds, steps)
