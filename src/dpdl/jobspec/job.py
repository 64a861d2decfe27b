"""A job built from its spec: graph, mixing matrix, task, calibration, mechanism and D-SGD
configuration of one replicate, and the privacy it is accounted to give.

What every agent of a deployment also computes from the public configuration
(`dpdl.runtime`), and what the simulation runs (`dpdl.experiments.train`).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, replace
from pathlib import Path

import networkx as nx
import numpy as np
from scipy import sparse

from dpdl.accounting import AgentLevel, Calibration, ExampleLevel, PrivacyReport, account, calibrate
from dpdl.accounting.dropouts import account_dropouts
from dpdl.accounting.noise import GaussianNoise
from dpdl.errors import ConfigError
from dpdl.graphs import build_graph, mixing_matrix
from dpdl.jobspec.config import TrainConfig
from dpdl.jobspec.curvature import run_design
from dpdl.jobspec.dropouts import DropoutSchedule
from dpdl.jobspec.engine import DSGDConfig, StepSize, poisson_rates
from dpdl.jobspec.factorized import build_factorized
from dpdl.jobspec.resources import TaskShape, require_job_fits, task_shape
from dpdl.mechanisms import NoiseMechanism, NoNoise
from dpdl.mechanisms.lppa import TrackingNoise, build_injection
from dpdl.mechanisms.registry import build_mechanism
from dpdl.mechanisms.time_correlated import LocalCorrelatedNoise
from dpdl.seeding import purpose_seed
from dpdl.tasks import Task, build_task
from dpdl.threats import Colluding, Eavesdropper

__all__ = [
    "Job",
    "build_job",
    "dropout_schedule",
    "neighbouring",
    "neighbouring_relation",
    "privacy_reports",
    "with_epochs",
]


def neighbouring(config: TrainConfig, task: Task) -> AgentLevel | ExampleLevel:
    """What neighbouring datasets differ in under `config`: one agent's data, or one example."""
    return neighbouring_relation(config.clip_level, config.clip, config.batch_size, task)


def neighbouring_relation(
    clip_level: str, clip: float, batch_size: int, task: Task
) -> AgentLevel | ExampleLevel:
    """One agent's data clipped at `clip` (`clip_level` `"agent"`), or one example of
    `task` under Poisson sampling at the largest rate an agent's expected `batch_size` gives
    (`"example"`)."""
    if clip_level == "agent":
        return AgentLevel(clip)
    sizes = task.agent_sizes
    if sizes is None:
        raise ConfigError(
            f"task {task.name!r} has no examples: example-level privacy does not apply"
        )
    return ExampleLevel(clip, batch_size, float(poisson_rates(sizes, batch_size).max()))


def privacy_reports(
    mechanism: NoiseMechanism,
    neighbouring: AgentLevel | ExampleLevel,
    steps: int,
    delta: float,
    alive: np.ndarray | None = None,
    recovery: bool = False,
) -> list[PrivacyReport]:
    """The mechanism's guarantee against its own threat model first, then against the eavesdropper
    and honest-but-curious agents (where those differ from it).

    With `alive`, the `(steps, n)` table of who sends at each round of a run with dropouts (and
    `recovery`, whether the alive holders of a seed add its missing holders' share), the reports
    are the run's, accounted exactly under that schedule
    ([`account_dropouts`][dpdl.accounting.dropouts.account_dropouts]); a schedule without a
    dropout gives the reports of a run without."""
    threats = [mechanism.default_threat]
    threats += [
        t
        for t in (Eavesdropper(), Colluding(1))
        if t != mechanism.default_threat and mechanism.n > 1
    ]
    if alive is not None and np.shape(alive) != (steps, mechanism.n):
        raise ConfigError(
            f"the dropout schedule has shape {np.shape(alive)}, the run {steps} rounds of "
            f"{mechanism.n} agents"
        )
    if alive is not None and not np.all(alive):
        return [
            account_dropouts(mechanism, threat, neighbouring, alive, delta, recovery)
            for threat in threats
        ]
    return [account(mechanism, threat, neighbouring, steps, delta) for threat in threats]


@dataclass
class Job:
    """One replicate of a configuration, built: what every agent of a deployment also computes
    from the public configuration (`dpdl.runtime`). Under gradient tracking `mechanism` is no
    noise and `injection` the noise of the tracking variable. A time-correlated mechanism
    ([`dpdl.jobspec.factorized`][dpdl.jobspec.factorized]) has no per-round relation or
    calibration: its `reports` are its guarantee. `dropouts`: the rounds agents miss
    ([`dpdl.jobspec.dropouts`][dpdl.jobspec.dropouts]), None when no agent misses any by
    configuration; `recovery`: whether the alive holders of a seed add its missing holders'
    share (`--dropout-recovery`)."""

    graph: nx.Graph
    weights: np.ndarray
    task: Task
    neighbouring: AgentLevel | ExampleLevel | None
    calibration: Calibration | None
    mechanism: NoiseMechanism | LocalCorrelatedNoise
    dsgd: DSGDConfig
    injection: TrackingNoise | None = None
    reports: list[PrivacyReport] | None = None
    dropouts: DropoutSchedule | None = None
    recovery: bool = False

    @property
    def noise_seeds(self) -> GaussianNoise:
        """The noise whose seeds the agents agree on, as plain data: the mechanism's, or the
        injection's."""
        if self.injection is not None:
            return self.injection.seed_structure()
        if isinstance(self.mechanism, LocalCorrelatedNoise):
            raise ConfigError(
                f"{self.mechanism.name} noise is correlated over time and drawn from each agent's "
                "own seed: it has no seeds for the agents to agree on"
            )
        return self.mechanism.noise

    def variance_after_mixing(self) -> float:
        """`Tr(W R W^T)` of one round's noise (for noise correlated over time, its mean over
        the rounds)."""
        if isinstance(self.mechanism, LocalCorrelatedNoise):
            return self.mechanism.variance_after_mixing(self.weights)
        return self.noise_seeds.variance_after_mixing(self.weights)

    def privacy(self, steps: int, delta: float, realized: bool = True) -> list[PrivacyReport]:
        """What `steps` rounds of the job are accounted to give
        ([`privacy_reports`][dpdl.jobspec.job.privacy_reports], or a time-correlated mechanism's
        own reports). With dropouts, `realized`: what the run spent under its schedule (the
        rounds each agent missed released nothing; with recovery a round may release more);
        otherwise the design's guarantee, every agent alive at every round (what the noise was
        calibrated to)."""
        if self.reports is not None:
            return self.reports
        assert self.neighbouring is not None and isinstance(self.mechanism, NoiseMechanism)
        alive = self.dropouts.alive if realized and self.dropouts is not None else None
        return privacy_reports(
            self.mechanism, self.neighbouring, steps, delta, alive=alive, recovery=self.recovery
        )

    def design_digest(self) -> bytes:
        """SHA-256 of the mixing matrix and of the covariance of
        [`noise_seeds`][dpdl.jobspec.job.Job.noise_seeds], as this process computes them: the
        agents of one run compare it before they agree seeds
        ([`dpdl.runtime.handshake.handshake`][dpdl.runtime.handshake.handshake]), and a
        checkpoint names the run by it. With dropouts, the schedule's table too: agents that
        read different schedule files refuse to start."""
        weights = self.weights.toarray() if sparse.issparse(self.weights) else self.weights
        digest = hashlib.sha256(
            np.ascontiguousarray(weights).tobytes()
            + np.ascontiguousarray(self.noise_seeds.covariance()).tobytes()
        )
        if self.dropouts is not None:
            digest.update(np.packbits(self.dropouts.alive).tobytes())
        return digest.digest()


def dropout_schedule(config: TrainConfig, n: int, seed: int) -> DropoutSchedule | None:
    """The rounds the `n` agents of replicate `seed` of `config` miss: read from
    `dropout_schedule`, or drawn at rate `dropout` from the replicate's seed
    ([`DropoutSchedule`][dpdl.jobspec.dropouts.DropoutSchedule]); None without dropouts."""
    if config.dropout_schedule is not None:
        return DropoutSchedule.from_file(Path(config.dropout_schedule), n, config.steps)
    if config.dropout:
        return DropoutSchedule.from_rate(config.dropout, n, config.steps, seed)
    return None


def _graph(config: TrainConfig, seed: int) -> nx.Graph:
    """The graph of replicate `seed`: a random topology drawn from the replicate's seed, or from
    `graph_seed` for every replicate."""
    graph_seed = purpose_seed(seed, "graph") if config.graph_seed is None else config.graph_seed
    return build_graph(config.graph, config.n, config.p, seed=graph_seed)


def with_epochs(config: TrainConfig) -> TrainConfig:
    """`config` (resolved) with a length in `epochs` turned into steps: an epoch is
    `ceil(mean agent's examples / batch_size)` steps (the examples of the first replicate's
    task over its agents, rounded down), the run `epochs` of them, evaluated after each
    (LPPA's protocol: a round of local data, as many batches as the mean client holds). The result
    states the steps and leaves `epochs` unset, so that it replays as it ran; `config`
    itself where it has no `epochs`."""
    if config.epochs is None:
        return config
    seed = config.seeds[0]
    graph = _graph(config, seed)
    task = build_task(config.task, graph.number_of_nodes(), seed, config.task_options)
    if task.agent_sizes is None:
        raise ConfigError(
            f"epochs (--epochs): task {config.task!r} takes full gradients, it has no examples "
            "to count epochs of; give --steps"
        )
    mean = int(task.agent_sizes.sum()) // graph.number_of_nodes()
    epoch = max(1, -(-mean // config.batch_size))
    resolved = replace(config, steps=config.epochs * epoch, eval_every=epoch, epochs=None)
    return resolved.resolved()


def build_job(config: TrainConfig, seed: int) -> Job:
    """Graph, mixing matrix, task, calibration and mechanism of replicate `seed` of `config`
    (which must be resolved, its length in steps: [`with_epochs`][dpdl.jobspec.job.with_epochs]).

    Its memory and time are estimated from its sizes first (`dpdl.jobspec.resources`) and a
    job that cannot fit is refused before anything large is allocated: a synthetic topology's
    before the graph is built, a graph file's once it is read, a task the catalogue does not know
    once it is built."""
    if config.epochs is not None:
        raise ConfigError(
            f"epochs {config.epochs}: a job is built from steps; resolve the length first "
            "(dpdl.jobspec.job.with_epochs)"
        )
    log = seed == config.seeds[0]
    known = require_job_fits(config, log=log)
    graph = _graph(config, seed)
    agents = (graph.number_of_nodes(), graph.number_of_edges())
    if not known:
        require_job_fits(config, agents, log=log)
    dropouts = dropout_schedule(config, agents[0], seed)  # a bad schedule file: before the task
    weights = mixing_matrix(graph, config.mixing)
    task = build_task(config.task, graph.number_of_nodes(), seed, config.task_options)
    if task_shape(config.task, agents[0], config.task_options) is None:
        examples = 0 if task.agent_sizes is None else int(task.agent_sizes.sum())
        require_job_fits(config, agents, TaskShape(task.dim, "other", examples), log=log)
    if config.cycled:
        return _factorized_job(config, graph, weights, task)
    calibration, injection = None, None
    if config.algorithm == "dsgt":  # no relation: the injection is sized for attacks, unaccounted
        adjacent = None
        mechanism: NoiseMechanism = NoNoise(graph.number_of_nodes())
        injection = build_injection(config.mechanism, graph, config.tracking)
    else:
        adjacent = neighbouring(config, task)
        if config.mechanism != "none":
            calibration = calibrate(
                config.eps, config.delta, config.steps, adjacent, config.calibration
            )
        design = run_design(config.design, task, config.lr, config.steps, config.schedule)
        mechanism = build_mechanism(config.mechanism, graph, weights, calibration, design)
    dsgd = DSGDConfig(
        steps=config.steps,
        step_size=_step_size(config),
        clip=None if math.isinf(config.clip) else config.clip,
        clip_level=config.clip_level,
        batch_size=config.batch_size,
        sampling="poisson" if config.clip_level == "example" else "uniform",
        eval_every=config.eval_every,
        average_last=config.average_last,
    )
    return Job(
        graph,
        weights,
        task,
        adjacent,
        calibration,
        mechanism,
        dsgd,
        injection,
        dropouts=dropouts,
        recovery=config.dropout_recovery,
    )


def _step_size(config: TrainConfig) -> StepSize:
    """The run's step sizes: its schedule, and the `step` schedule's decay."""
    assert config.lr is not None and config.schedule is not None  # resolved
    return StepSize(config.lr, config.schedule, config.decay_after, config.decay_factor)


def _factorized_job(config: TrainConfig, graph: nx.Graph, weights: np.ndarray, task: Task) -> Job:
    """The job of a time-correlated mechanism: cyclic batches of per-example clipped gradients
    ([`dpdl.jobspec.factorized`][dpdl.jobspec.factorized])."""
    built = build_factorized(config, weights, task)
    dsgd = DSGDConfig(
        steps=config.steps,
        step_size=_step_size(config),
        clip=config.clip,
        clip_level="example",
        sampling="cyclic",
        cycle=built.cycle,
        fixed_divisor=config.neighbouring == "add-remove",
        eval_every=config.eval_every,
        average_last=config.average_last,
    )
    return Job(graph, weights, task, None, None, built.noise, dsgd, reports=built.reports)
