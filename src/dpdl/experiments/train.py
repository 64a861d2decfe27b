"""One training job: graph + mixing + task + calibrated mechanism + D-SGD, over one or more seeds.

The job's spec and its construction live in the layer below (`dpdl.jobspec`), which the runtime
shares; [`TrainConfig`][dpdl.jobspec.config.TrainConfig], [`Job`][dpdl.jobspec.job.Job],
[`build_job`][dpdl.jobspec.job.build_job], [`privacy_reports`][dpdl.jobspec.job.privacy_reports] and
`DEFAULT_STEP_SIZES` are re-exported here. This module runs the jobs in the simulation.

Every seed is a full replicate: its own graph draw (for random topologies), data split, partition,
batches and noise, all derived from the seed (`dpdl.seeding`).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from scipy import sparse

from dpdl.accounting import Calibration, PrivacyReport
from dpdl.accounting.accountant import compose_runs
from dpdl.errors import ConfigError, DivergenceError
from dpdl.experiments.checkpoints import load_state, save_state
from dpdl.graphs import summarize
from dpdl.jobspec.config import DEFAULT_STEP_SIZES, TrainConfig
from dpdl.jobspec.device import resolve_device
from dpdl.jobspec.dropouts import DropoutSchedule
from dpdl.jobspec.factorized import with_gdp_budget
from dpdl.jobspec.job import Job, build_job, privacy_reports, with_epochs
from dpdl.mechanisms.time_correlated import LocalCorrelatedNoise
from dpdl.runtime.checkpoint import run_fingerprint, run_settings
from dpdl.simulation import Checkpoints, EngineState, run_dsgd, run_dsgt
from dpdl.tasks import Task
from dpdl.tasks.layout import ParameterLayout

__all__ = [
    "DEFAULT_STEP_SIZES",
    "Job",
    "RunCheckpoints",
    "SeedRun",
    "TrainConfig",
    "TrainResult",
    "build_job",
    "privacy_reports",
    "run_seed",
    "run_training",
]

logger = logging.getLogger(__name__)

#: A callback of every seed's metric records: ``(seed, step, metrics)``.
SeedCallback = Callable[[int, int, dict[str, float]], None]

#: Without ``every``: a checkpoint at each evaluation, at most once in this many seconds.
CHECKPOINT_SECONDS = 60.0


def _fingerprint(config: TrainConfig, seed: int, job: Job) -> str:
    """What names replicate `seed` of `config` as built in `job`: the runtime's
    [`run_fingerprint`][dpdl.runtime.checkpoint.run_fingerprint] (settings, mixing matrix, noise
    covariance), or for noise correlated over time, which has no per-step covariance, the
    settings, mixing matrix, encoder and noise multiplier."""
    if not isinstance(job.mechanism, LocalCorrelatedNoise) or job.injection is not None:
        return run_fingerprint(config, seed, job)
    weights = job.weights.toarray() if sparse.issparse(job.weights) else job.weights
    digest = hashlib.sha256(json.dumps(run_settings(config, seed), sort_keys=True).encode())
    for array in (weights, job.mechanism.encoder, np.array(job.mechanism.sigma)):
        digest.update(np.ascontiguousarray(array, dtype=float).tobytes())
    return digest.hexdigest()


@dataclass
class RunCheckpoints:
    """Where `run_training` keeps each seed's checkpoint (`folder/seed<s>.npz`), how often
    (`every` steps; None: at each evaluation, at most once a minute, `CHECKPOINT_SECONDS`;
    a seed is also saved when it finishes, so that a resumed run keeps it), and whether it
    continues from them (`resume`) or starts afresh, removing the folder's old checkpoints."""

    folder: Path
    every: int | None = None
    resume: bool = False

    def path(self, seed: int) -> Path:
        return self.folder / f"seed{seed}.npz"

    def settings(self, config: TrainConfig, device: str) -> dict[str, Any]:
        """What names a run in its checkpoints: `config`'s settings (every seed), and the kind
        of device it computes on (another rounds differently, so would not continue the same
        numbers)."""
        return {**config.as_dict(), "device": resolve_device(device).type}

    def engine(
        self, config: TrainConfig, seed: int, job: Job, start: EngineState | None, device: str
    ) -> Checkpoints:
        """The engine's checkpoints of replicate `seed` of `config`, built in `job`."""
        settings = self.settings(config, device)
        fingerprint = _fingerprint(config, seed, job)

        def save(state: EngineState) -> None:
            agents = {
                key: list(values) for key, values in getattr(job.task, "agent_metrics", {}).items()
            }
            save_state(self.path(seed), state, settings, fingerprint, {"agent_metrics": agents})

        every = config.eval_every if self.every is None else self.every
        seconds = CHECKPOINT_SECONDS if self.every is None else 0.0
        return Checkpoints(save, every, seconds, start)


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
    #: Every agent's own final metrics, in agent order, where the task keeps them (the model
    #: tasks' test loss and accuracy: the papers' code often plots one agent's model).
    agent_metrics: dict[str, tuple[float, ...]] = field(repr=False, default_factory=dict)
    #: The step its checkpoint had reached where the run was resumed (None: run from the start).
    resumed_from: int | None = None
    #: The rounds its agents missed (None: no dropouts configured).
    dropouts: DropoutSchedule | None = field(repr=False, default=None)
    #: With dropouts, the design's guarantee, every agent alive at every round (what the noise
    #: was calibrated to); `privacy` is then what the run spent under its schedule.
    design_privacy: list[PrivacyReport] | None = None

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
    #: The names and shapes of the models' parameters (``dpdl train --save-models``).
    layout: ParameterLayout | None = None

    def final_metrics(self) -> dict[str, float]:
        """Mean over seeds of every final metric, plus `<metric>_std` when there are several
        seeds."""
        keys = [k for k in self.runs[0].final if k != "step"]
        summary: dict[str, float] = {}
        for key in keys:
            values = np.array([run.final[key] for run in self.runs])
            summary[key] = float(values.mean())
            if len(values) > 1:
                summary[f"{key}_std"] = float(values.std(ddof=1))
        return summary

    def released_together(self) -> list[PrivacyReport]:
        """Per threat, the guarantee of releasing every seed's results together (the runs train
        on the same data, so their budgets compose:
        [`compose_runs`][dpdl.accounting.accountant.compose_runs]); empty for one seed or nothing
        accounted."""
        if len(self.runs) < 2 or not self.runs[0].privacy:
            return []
        relation = None if self.calibration is None else self.calibration.neighbouring
        return [
            compose_runs([run.privacy[k] for run in self.runs], relation)
            for k in range(len(self.runs[0].privacy))
        ]

    def summary(self) -> dict[str, Any]:
        """The job's headline: configuration, privacy promised (no target where the noise is not
        calibrated to one: no noise, or gradient tracking's injection), metrics reached."""
        first = self.runs[0]
        return {
            "task": self.config.task,
            "mechanism": self.config.mechanism,
            "graph": self.config.graph,
            "n": self.config.n,
            "eps_target": self.config.eps if first.calibrated else None,
            "delta": self.config.delta if first.calibrated else None,
            "steps": self.config.steps,
            "seeds": list(self.config.seeds),
            "lr": self.config.lr,
            "noise": noise_scales(first.mechanism),
            "trace_WRW": float(np.mean([run.trace_wrw for run in self.runs])),
            "privacy": [report.as_dict() for report in first.privacy],
            **(
                {"dropouts": [{"seed": r.seed, **r.dropouts.describe()} for r in self.runs]}
                if first.dropouts is not None
                else {}
            ),
            **(
                {"privacy_seeds_together": [r.as_dict() for r in together]}
                if (together := self.released_together())
                else {}
            ),
            **self.final_metrics(),
        }


def noise_scales(mechanism: dict[str, Any]) -> dict[str, float]:
    """The noise scales of a mechanism's description (its `sigma*` entries: `sigma` of LDP, CDP
    and the time-correlated encoders, `sigma_pair2` and `sigma_cor2` of DECOR, `sigma_mix2` of
    Whisper, ...); empty without noise. A mechanism has no single `sigma` in general, so none
    is made up (a DECOR run's summary once said `"sigma": 0.0`)."""
    return {key: value for key, value in mechanism.items() if key.startswith("sigma")}


def run_seed(
    config: TrainConfig,
    seed: int,
    progress: bool = False,
    device: str = "cpu",
    checkpoints: RunCheckpoints | None = None,
    callback: SeedCallback | None = None,
) -> tuple[Task, Calibration | None, SeedRun]:
    """Build and run one replicate of `config` (which must be resolved) on `device`;
    `checkpoints`: save it along the way, or continue it from its checkpoint
    (`RunCheckpoints`); `callback(seed, step, metrics)` sees each metric record."""
    job = build_job(config, seed)
    start, agent_metrics = None, None
    if checkpoints is not None and checkpoints.resume and checkpoints.path(seed).exists():
        fingerprint = _fingerprint(config, seed, job)
        settings = checkpoints.settings(config, device)
        start, extra = load_state(checkpoints.path(seed), settings, fingerprint)
        if start.step >= config.steps:  # finished: its agents' metrics were saved with it
            agent_metrics = {k: tuple(v) for k, v in extra.get("agent_metrics", {}).items()}
        logger.info("seed %d: resuming from step %d of %d", seed, start.step, config.steps)
    engine = None if checkpoints is None else checkpoints.engine(config, seed, job, start, device)
    on_record = None if callback is None else partial(callback, seed)
    book, design = None, None
    if config.key_seed is not None:
        from dpdl.keys import simulated_seed_book  # cryptography: an optional extra (dpdl[runtime])

        book = simulated_seed_book(job.noise_seeds, config.key_seed)
    if config.algorithm == "dsgt":
        result = run_dsgt(
            job.task,
            job.weights,
            job.dsgd,
            job.injection,
            seed=seed,
            progress=progress,
            callback=on_record,
            agent_seeds=book,
            device=device,
            local_steps=config.tracking.local_steps,
            checkpoints=engine,
        )
        privacy: list[PrivacyReport] = []  # the injection is sized for the attacks, not accounted
    else:
        result = run_dsgd(
            job.task,
            job.weights,
            job.mechanism,
            job.dsgd,
            seed=seed,
            progress=progress,
            callback=on_record,
            agent_seeds=book,
            device=device,
            checkpoints=engine,
            dropouts=job.dropouts,
            recovery=config.dropout_recovery,
        )
        privacy = job.privacy(config.steps, config.delta)
        if job.dropouts is not None and job.reports is None:  # the design, beside what it spent
            design = job.privacy(config.steps, config.delta, realized=False)
    run = SeedRun(
        seed=seed,
        graph=summarize(job.graph, job.weights).as_dict(),
        mechanism=job.injection.describe()
        if job.injection is not None
        else job.mechanism.describe(),
        trace_wrw=job.variance_after_mixing(),
        calibrated=job.mechanism.calibrated and config.algorithm == "dsgd",
        privacy=privacy,
        history=result.history,
        models=result.params,
        agent_metrics=agent_metrics
        if agent_metrics is not None
        else dict(getattr(job.task, "agent_metrics", {})),
        resumed_from=None if start is None else start.step,
        dropouts=job.dropouts,
        design_privacy=design,
    )
    return job.task, job.calibration, run


def _prepare_checkpoints(config: TrainConfig, checkpoints: RunCheckpoints, device: str) -> None:
    """Before anything runs: with `resume`, every seed's checkpoint read and checked to be of
    these settings (one error naming what differs), and at least one there; without it, the
    folder's old checkpoints removed (this run replaces the run they belong to)."""
    if checkpoints.every is not None and checkpoints.every < 0:
        raise ConfigError(f"checkpoints every {checkpoints.every} steps: expected N >= 0")
    found = sorted(checkpoints.folder.glob("seed*.npz")) if checkpoints.folder.is_dir() else []
    if not checkpoints.resume:
        for path in found:
            logger.info("removing %s, a checkpoint of the run this one replaces", path)
            path.unlink()
        return
    if not found:
        raise ConfigError(
            f"no checkpoint in {checkpoints.folder}: nothing to resume (a run writes its "
            "checkpoints there, and removes them once it has written its results); run without "
            "resuming"
        )
    for path in found:  # the settings hold every seed: a checkpoint of another seed list differs
        load_state(path, checkpoints.settings(config, device))


def run_training(
    config: TrainConfig,
    progress: bool = False,
    device: str = "cpu",
    checkpoints: RunCheckpoints | None = None,
    callback: SeedCallback | None = None,
) -> TrainResult:
    """Run every seed of `config` on `device` (cpu, cuda, cuda:K or auto) and collect the
    results.

    `checkpoints`: keep each seed's checkpoints, and with `resume` continue from them: the seeds
    finished are kept, the others continue where they were saved (or start), and the result equals
    an uninterrupted run's bit for bit ([`dpdl.simulation.resume`][dpdl.simulation.resume]).
    A seed whose models or metrics stop being finite stops the job with a
    [`DivergenceError`][dpdl.errors.DivergenceError] naming the seed, step, agent and likely
    cause. Checkpoints of other settings are refused before anything runs. `callback(seed, step,
    metrics)` sees every metric record as it is made (a resumed seed's records after its checkpoint
    only).

    The result's configuration holds the graph's real number of agents as `n`: a real graph or
    a graph file has its own size, not the `n` given for synthetic graphs (20 by default)."""
    config = with_epochs(with_gdp_budget(config.resolved()))
    if checkpoints is not None:
        _prepare_checkpoints(config, checkpoints, device)
    outcomes = []
    for seed in config.seeds:
        try:
            outcomes.append(run_seed(config, seed, progress, device, checkpoints, callback))
        except DivergenceError as error:
            raise error.of_seed(seed) from None
    task, calibration, _ = outcomes[0]
    runs = [run for _, _, run in outcomes]
    config = replace(config, n=runs[0].graph["nodes"])
    for run in (run for run in runs if run.calibrated):
        promised = (run.design_privacy or run.privacy)[0]  # its own threat model
        if config.calibration == "exact" and promised.epsilon > config.eps:
            raise RuntimeError(
                f"calibration overshoot: {promised} exceeds the target eps={config.eps}"
            )
        if run.design_privacy and run.privacy[0].epsilon > config.eps:
            logger.warning(
                "seed %d spent more than the budget under its dropouts: %s (the design, every "
                "agent alive: eps=%.4g); the rounds its dropouts changed (seed recovery, or the "
                "central observer's average of fewer agents) released more than the design's",
                run.seed,
                run.privacy[0],
                promised.epsilon,
            )
    return TrainResult(
        config,
        task.describe(),
        task.primary_metric,
        task.lower_is_better,
        calibration,
        runs,
        task.parameter_layout(),
    )
