"""One training job: graph + mixing + task + calibrated mechanism + D-SGD, over one or more seeds.

Every seed is a full replicate: its own graph draw (for random topologies), data split, partition,
batches and noise, all derived from the seed (:mod:`dpdl.seeding`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

import networkx as nx
import numpy as np

from dpdl.accounting import AgentLevel, Calibration, ExampleLevel, PrivacyReport, account, calibrate
from dpdl.errors import ConfigError
from dpdl.graphs import build_graph, mixing_matrix, summarize
from dpdl.mechanisms import NoiseMechanism, NoNoise
from dpdl.mechanisms.lppa import INJECTIONS, TrackingNoise, TrackingOptions, build_injection
from dpdl.mechanisms.registry import DesignOptions, build_mechanism
from dpdl.seeding import purpose_seed
from dpdl.simulation import ALGORITHMS, DSGDConfig, StepSize, run_dsgd, run_dsgt
from dpdl.simulation.sampling import PoissonSampler
from dpdl.tasks import Task, TaskOptions, build_task
from dpdl.threats import Colluding, Eavesdropper

__all__ = ["TrainConfig", "Job", "SeedRun", "TrainResult", "build_job", "run_training", "DEFAULT_STEP_SIZES"]

#: Step size and schedule used when the user gives none: the papers' choices where they state one
#: (Whisper's quadratic: 1e-2 / sqrt(t)); for a9a the largest value of the papers' grid.
DEFAULT_STEP_SIZES: dict[str, tuple[float, str]] = {
    "quadratic": (1e-2, "inv-sqrt"),
    "least-squares": (0.1, "constant"),
    "logreg-a9a": (0.1, "constant"),
    "mnist-mlp": (0.1, "constant"),
    "housing-mlp": (0.05, "constant"),
    "adult-mlp": (0.5, "constant"),
    "mnist-cnn": (0.05, "constant"),
    "fashion-cnn": (0.05, "constant"),
    "mnist-lenet": (0.1, "constant"),
    "fashion-lenet": (0.1, "constant"),
}


@dataclass(frozen=True)
class TrainConfig:
    """Everything that defines a training job (the resolved form is saved with its results)."""

    task: str = "logreg-a9a"
    graph: str = "er"
    n: int = 20
    p: float = 0.5
    mixing: str = "metropolis-hastings"
    mechanism: str = "ldp"
    eps: float = 10.0
    delta: float = 1e-5
    steps: int = 5000
    clip: float = 0.1
    clip_level: str = "agent"
    calibration: str = "exact"
    batch_size: int = 128
    lr: float | None = None
    schedule: str | None = None
    eval_every: int = 100
    seeds: tuple[int, ...] = (0,)
    task_options: TaskOptions = field(default_factory=TaskOptions)
    design: DesignOptions = field(default_factory=DesignOptions)
    #: Draw batches and noise agent by agent, from the seeds agents with keys derived from this
    #: number agree on: the models of a runtime run with the same key seed (:mod:`dpdl.runtime`).
    key_seed: int | None = None
    #: ``"dsgd"``, or ``"dsgt"``: gradient tracking (LPPA eqs. (2)-(3)), whose ``mechanism`` is then
    #: the noise injected into the tracking variable (none, lppa, dp; see ``tracking``), not
    #: calibrated to (eps, delta): no privacy guarantee is reported (``dpdl audit`` attacks it).
    algorithm: str = "dsgd"
    tracking: TrackingOptions = field(default_factory=TrackingOptions)

    def resolved(self) -> TrainConfig:
        """Fill the task's default step size and schedule; check the options fit together."""
        if not self.seeds:
            raise ConfigError("give at least one seed")
        if self.task not in DEFAULT_STEP_SIZES:
            raise ConfigError(f"unknown task {self.task!r}; known: {', '.join(DEFAULT_STEP_SIZES)}")
        if self.algorithm not in ALGORITHMS:
            raise ConfigError(f"unknown algorithm {self.algorithm!r}; known: {', '.join(ALGORITHMS)}")
        if self.algorithm == "dsgt" and self.mechanism not in INJECTIONS:
            raise ConfigError(f"gradient tracking injects {', '.join(INJECTIONS)} noise, not {self.mechanism!r}")
        eta, schedule = DEFAULT_STEP_SIZES[self.task]
        return replace(self, lr=self.lr if self.lr is not None else eta, schedule=self.schedule or schedule)

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["seeds"] = list(self.seeds)
        return data


@dataclass
class SeedRun:
    """One seed's run: what was built, what it promises and what it reached."""

    seed: int
    graph: dict[str, Any]
    mechanism: dict[str, Any]
    trace_wrw: float
    calibrated: bool
    privacy: list[PrivacyReport]
    history: list[dict[str, float]]
    #: Every agent's final model, ``(n, d)``.
    models: np.ndarray = field(repr=False, default_factory=lambda: np.zeros((0, 0)))

    @property
    def final(self) -> dict[str, float]:
        return self.history[-1]


@dataclass
class TrainResult:
    """All seeds of a job plus its resolved configuration and calibration."""

    config: TrainConfig
    task: dict[str, Any]
    primary_metric: str
    lower_is_better: bool
    calibration: Calibration | None
    runs: list[SeedRun]

    def final_metrics(self) -> dict[str, float]:
        """Mean over seeds of every final metric, plus ``<metric>_std`` when there are several seeds."""
        keys = [k for k in self.runs[0].final if k != "step"]
        summary: dict[str, float] = {}
        for key in keys:
            values = np.array([run.final[key] for run in self.runs])
            summary[key] = float(values.mean())
            if len(values) > 1:
                summary[f"{key}_std"] = float(values.std(ddof=1))
        return summary

    def summary(self) -> dict[str, Any]:
        """The job's headline: configuration, privacy promised, metrics reached."""
        first = self.runs[0]
        return {
            "task": self.config.task,
            "mechanism": self.config.mechanism,
            "graph": self.config.graph,
            "n": self.config.n,
            "eps_target": self.config.eps,
            "delta": self.config.delta,
            "steps": self.config.steps,
            "seeds": list(self.config.seeds),
            "lr": self.config.lr,
            "sigma": first.mechanism.get("sigma", 0.0),
            "trace_WRW": float(np.mean([run.trace_wrw for run in self.runs])),
            "privacy": [report.as_dict() for report in first.privacy],
            **self.final_metrics(),
        }


def _neighbouring(config: TrainConfig, task: Task) -> AgentLevel | ExampleLevel:
    if config.clip_level == "agent":
        return AgentLevel(config.clip)
    sizes = task.agent_sizes
    if sizes is None:
        raise ConfigError(f"task {config.task!r} has no examples: example-level privacy does not apply")
    return ExampleLevel(config.clip, config.batch_size, PoissonSampler(sizes, config.batch_size).max_rate)


def privacy_reports(
    mechanism: NoiseMechanism, neighbouring: AgentLevel | ExampleLevel, steps: int, delta: float
) -> list[PrivacyReport]:
    """The mechanism's guarantee against its own threat model first, then against the eavesdropper
    and honest-but-curious agents (where those differ from it)."""
    threats = [mechanism.default_threat]
    threats += [t for t in (Eavesdropper(), Colluding(1)) if t != mechanism.default_threat and mechanism.n > 1]
    return [account(mechanism, threat, neighbouring, steps, delta) for threat in threats]


@dataclass
class Job:
    """One replicate of a configuration, built: what every agent of a deployment also computes
    from the public configuration (:mod:`dpdl.runtime`). Under gradient tracking ``mechanism`` is
    no noise and ``injection`` the noise of the tracking variable."""

    graph: nx.Graph
    weights: np.ndarray
    task: Task
    neighbouring: AgentLevel | ExampleLevel
    calibration: Calibration | None
    mechanism: NoiseMechanism
    dsgd: DSGDConfig
    injection: TrackingNoise | None = None

    @property
    def noise_seeds(self) -> NoiseMechanism:
        """The structure of the seeds the agents agree on: the mechanism's, or the injection's."""
        return self.injection.seed_structure() if self.injection is not None else self.mechanism


def build_job(config: TrainConfig, seed: int) -> Job:
    """Graph, mixing matrix, task, calibration and mechanism of replicate ``seed`` of ``config``
    (which must be resolved)."""
    graph = build_graph(config.graph, config.n, config.p, seed=purpose_seed(seed, "graph"))
    weights = mixing_matrix(graph, config.mixing)
    task = build_task(config.task, graph.number_of_nodes(), seed, config.task_options)
    neighbouring = _neighbouring(config, task)
    calibration, injection = None, None
    if config.algorithm == "dsgt":
        mechanism: NoiseMechanism = NoNoise(graph.number_of_nodes())
        injection = build_injection(config.mechanism, graph, config.tracking)
    else:
        if config.mechanism != "none":
            calibration = calibrate(config.eps, config.delta, config.steps, neighbouring, config.calibration)
        mechanism = build_mechanism(config.mechanism, graph, weights, calibration, config.design)
    dsgd = DSGDConfig(
        steps=config.steps,
        step_size=StepSize(config.lr, config.schedule),
        clip=config.clip,
        clip_level=config.clip_level,
        batch_size=config.batch_size,
        sampling="poisson" if config.clip_level == "example" else "uniform",
        eval_every=config.eval_every,
    )
    return Job(graph, weights, task, neighbouring, calibration, mechanism, dsgd, injection)


def run_seed(config: TrainConfig, seed: int, progress: bool = False) -> tuple[Task, Calibration | None, SeedRun]:
    """Build and run one replicate of ``config`` (which must be resolved)."""
    job = build_job(config, seed)
    book = None
    if config.key_seed is not None:
        from dpdl.keys import simulated_seed_book  # cryptography: an optional extra (dpdl[runtime])

        book = simulated_seed_book(job.noise_seeds, config.key_seed)
    if config.algorithm == "dsgt":
        result = run_dsgt(job.task, job.weights, job.dsgd, job.injection, seed=seed, progress=progress, agent_seeds=book)
        privacy: list[PrivacyReport] = []  # the injection is sized for the attacks, not accounted
    else:
        result = run_dsgd(job.task, job.weights, job.mechanism, job.dsgd, seed=seed, progress=progress, agent_seeds=book)
        privacy = privacy_reports(job.mechanism, job.neighbouring, config.steps, config.delta)
    run = SeedRun(
        seed=seed,
        graph=summarize(job.graph, job.weights).as_dict(),
        mechanism=job.injection.describe() if job.injection is not None else job.mechanism.describe(),
        trace_wrw=job.noise_seeds.variance_after_mixing(job.weights),
        calibrated=job.mechanism.calibrated and config.algorithm == "dsgd",
        privacy=privacy,
        history=result.history,
        models=result.params,
    )
    return job.task, job.calibration, run


def run_training(config: TrainConfig, progress: bool = False) -> TrainResult:
    """Run every seed of ``config`` and collect the results."""
    config = config.resolved()
    outcomes = [run_seed(config, seed, progress) for seed in config.seeds]
    task, calibration, _ = outcomes[0]
    runs = [run for _, _, run in outcomes]
    for run in runs:
        if run.calibrated and config.calibration == "exact" and run.privacy[0].epsilon > config.eps:  # its own threat model
            raise RuntimeError(f"calibration overshoot: {run.privacy[0]} exceeds the target eps={config.eps}")
    return TrainResult(config, task.describe(), task.primary_metric, task.lower_is_better, calibration, runs)
