"""MAFALDA-SGD's privacy-utility trade-offs (Figs. 3-6): the protocol its Housing and image figures
share.

Every method is (eps, 1e-6)-DP against LDP's attacker (every message public), accounted by the
matrix-factorization sensitivity (Theorem 8), under cyclic (k, b)-participation: each agent's
examples are cut once into b batches used in turn, clipped per example at C, so a record changes
the batch mean by at most `2 C / smallest batch` in k steps. The methods:

- `dp-dsgd`: independent noise (C_local = I, sens = sqrt(k));
- `antipgd`: the noise of the previous step subtracted (C_local = 1_{t >= s}, Koloskova et al.);
- `mafalda`: the local encoder optimised for the graph's gossip (Lemma 12, Algorithm 2);
- `mafalda-l`: MAFALDA-L-SGD of the authors' code, every agent's encoder optimised for its own share
  of the gossip's error ([`optimize_agents`][dpdl.factorization.mafalda.optimize_agents]; run in the
  authors' protocol only);
- `none`: no noise, the non-private reference, run once at eps = 10 (it has no budget).

Step size and clipping threshold are tuned per method on the tuning seeds, at every eps or, where
a study says so for cost, at eps = 10 and reused across eps (the paper does not say how it tuned).
A reproduction module states its `Study` and its
claims; this module runs and summarises it.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from dpdl.experiments.plots import plot_panels
from dpdl.experiments.train import run_training
from dpdl.factorization.mafalda import agent_utility_grams, local_loss
from dpdl.factorization.participation import Participation
from dpdl.graphs import NotDoublyStochasticWarning, build_graph, mixing_matrix
from dpdl.jobspec.config import TrainConfig
from dpdl.jobspec.factorized import encoder_for
from dpdl.tasks import TaskOptions
from dpdl.threads import job_threads
from dpdl_reproductions import tradeoff
from dpdl_reproductions.sweep_jobs import SweepJobs
from dpdl_reproductions.tradeoff import (
    VERSION,
    Job,
    Panel,
    Point,
    Study,
    average_model_note,
    summarise,
)

__all__ = [
    "DELTA",
    "METHODS",
    "REFERENCE_EPS",
    "TASK_OPTIONS",
    "Crossing",
    "Protocols",
    "average_model",
    "budget_met",
    "config_of",
    "eps_at_loss",
    "job_of",
    "local_encoder",
    "mixing",
    "per_agent_design",
    "plot_tradeoff",
    "run_job",
    "summaries",
]

METHODS = ("dp-dsgd", "antipgd", "mafalda")
DELTA = 1e-6
#: The eps at which hyperparameters are tuned and the no-noise reference runs.
REFERENCE_EPS = 10.0
#: How each task's data are spread: Housing uniformly at random (Section 7.2); the image tasks
#: strongly non-iid, two labels per agent, 128 examples each (FEMNIST's nodes hold ten writers'
#: characters), evaluated on 2000 test images (a fixed random subset: every agent's model is
#: evaluated, and the full test set would cost more than the training).
_IMAGES = TaskOptions(
    partition="labels-per-agent",
    labels_per_agent=2,
    l2=0.0,
    examples_per_agent=128,
    test_examples=2000,
)
TASK_OPTIONS = {
    "housing-mlp": TaskOptions(partition="iid", l2=0.0),
    "mnist-cnn": _IMAGES,
    "fashion-cnn": _IMAGES,
}


def _reference_study(study: Study) -> Study:
    """The no-noise reference: once per panel, at `REFERENCE_EPS`, not at every eps."""
    panels = tuple(
        Panel(p.label, p.training, "eps", (REFERENCE_EPS,), p.fixed, ("none",), p.xlabel)
        for p in study.panels
    )
    return Study(panels, DELTA, ("exact",))


def _private_study(study: Study) -> Study:
    panels = tuple(
        Panel(p.label, p.training, "eps", p.values, p.fixed, METHODS, p.xlabel)
        for p in study.panels
    )
    return Study(panels, DELTA, ("exact",))


@dataclass(frozen=True)
class Protocols:
    """A MAFALDA figure whose sweep file (of reproduction `name`) states its runs in both
    protocols: dpdl's, the study `study(quick)` (the search, then each setting's choice on every
    seed; `run_job` trains them, as `dpdl train` does), and the authors' code's, a run
    under add / remove (its job `authors_job_of(options)`, whose `protocol` is `authors`,
    its configuration `authors_config_of(job)`, run by `authors_run`); each grid's label names
    its part (`part_labels`). The shared part of a reproduction module's `jobs`, its
    `followup_jobs` and `run_job`."""

    name: str
    study: Callable[[bool], Study]
    authors: str
    authors_job_of: Callable[[Mapping[str, Any]], Job]
    authors_config_of: Callable[[Job], TrainConfig]
    authors_run: Callable[[dict[str, Any]], dict[str, Any]]
    part_labels: Mapping[str, str]

    def job_of(self, options: Mapping[str, Any], version: int = VERSION) -> Job:
        """The job of one run of the sweep file: a run under add / remove is one of the authors'
        protocol, any other one of dpdl's (`job_of`, of `version`)."""
        if options["neighbouring"] == "add-remove":
            return self.authors_job_of(options)
        return job_of(options, version)

    def config_of(self, job: Job) -> TrainConfig:
        """The training configuration of a job of either protocol."""
        if job.get("protocol") == self.authors:
            return self.authors_config_of(job)
        return config_of(job)

    @cached_property
    def sweep(self) -> SweepJobs:
        """The runs of the sweep file, both protocols'."""
        return SweepJobs(
            self.name,
            job_of=self.job_of,
            config_of=self.config_of,
            protocols=frozenset({"", self.authors}),
            part_labels=self.part_labels,
        )

    def jobs(self, quick: bool, parts: tuple[str, ...]) -> list[dict[str, Any]]:
        """The first stage of the sweep file's grids of `parts`: dpdl's tuning runs and the
        authors' runs (they tune nothing)."""
        return self.sweep.jobs(self.sweep.sweep(quick, parts))

    def followup_jobs(
        self, quick: bool, rows: list[dict[str, Any]], parts: tuple[str, ...]
    ) -> list[dict[str, Any]]:
        """dpdl's tuned points on every seed (the authors' protocol tunes nothing)."""
        return self.sweep.followup_jobs(self.sweep.sweep(quick, parts), rows)

    def paper_rows(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The runs of dpdl's protocol among `rows`."""
        return [row for row in rows if row.get("protocol") != self.authors]

    def run_job(self, job: dict[str, Any]) -> dict[str, Any]:
        """One run: dpdl's protocol (`run_job`) or the authors' (`authors_run`)."""
        return self.authors_run(job) if job.get("protocol") == self.authors else run_job(job)


def job_of(options: Mapping[str, Any], version: int = VERSION) -> Job:
    """The job of one run of a MAFALDA figure's sweep file, stated as its options (those of a
    [`TrainConfig`][dpdl.jobspec.config.TrainConfig], its one seed as a number): the trade-off
    figures' fields (`job_of`) with the batches per cycle in place of the batch size
    (`SweepJobs`)."""
    job = tradeoff.job_of(options, version)
    return {
        **{key: value for key, value in job.items() if key != "batch_size"},
        "cycle": int(options["cycle"]),
    }


def config_of(job: Job) -> TrainConfig:
    """The training configuration `run_job` runs for `job` (`dpdl train` gives the same
    run bit for bit; tests/jobspec/test_factorized_train.py): the trade-off figures' configuration
    (`config_of`) with its task's data spread,
    delta = 1e-6 and the examples of each agent cycled in `job`'s batches."""
    plain = tradeoff.config_of({**job, "batch_size": TrainConfig().batch_size})
    return replace(plain, delta=DELTA, cycle=job["cycle"], task_options=TASK_OPTIONS[job["task"]])


def local_encoder(
    method: str, graph: str, steps: int, cycle: int, rule: str = "metropolis-hastings"
) -> np.ndarray:
    """C_local of `method` (`dpdl.choices.FACTORIZED_REGISTRY`; `none` as DP-D-SGD's, run without
    noise) for the gossip on `graph` (mixing `rule`) over `steps` steps of cyclic participation;
    for `mafalda-l` one per agent (`n x T x T`: on the 148-agent Facebook ego graph over T = 320
    steps, 148 L-BFGS runs, 289 s on one thread beside one other process). The job spec's cache
    holds it, so a training run of the same gossip and the design figures read one optimisation
    per process ([`dpdl.jobspec.factorized.encoder_for`][dpdl.jobspec.factorized.encoder_for])."""
    name = "dp-dsgd" if method == "none" else method
    return encoder_for(name, mixing(graph, rule), steps, cycle)


@lru_cache(maxsize=2)
def _agent_grams(graph: str, steps: int, rule: str) -> np.ndarray:
    return agent_utility_grams(mixing(graph, rule), steps)


@lru_cache(maxsize=8)
def per_agent_design(graph: str, steps: int, cycle: int, rule: str) -> dict[str, float]:
    """The error of the gossiped models that noise of unit privacy causes (eq. (9), summed over
    agents' terms): MAFALDA-L-SGD's encoders (`design_loss`) and MAFALDA-SGD's shared one
    (`design_loss_shared`)."""
    participation = Participation.cyclic(steps, -(-steps // cycle), cycle)
    grams = _agent_grams(graph, steps, rule)
    return {
        f"design_loss{suffix}": local_loss(
            grams, local_encoder(method, graph, steps, cycle, rule), participation
        )
        for method, suffix in (("mafalda-l", ""), ("mafalda", "_shared"))
    }


def mixing(graph: str, rule: str = "metropolis-hastings") -> np.ndarray:
    """The gossip of `graph` under `rule`; the row-stochastic `local-degree` rule of the
    MAFALDA-SGD authors' code without its warning that irregular graphs make it not doubly
    stochastic (the reproduction states it)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NotDoublyStochasticWarning)
        return mixing_matrix(build_graph(graph), rule)


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    """One seed of dpdl's protocol: the training configuration of `job` (`config_of`), as `dpdl
    train` and `dpdl sweep` run it (its noise multiplier calibrated to (eps, delta) under LDP by
    [`dpdl.jobspec.factorized`][dpdl.jobspec.factorized]), on the executor's threads (one by
    default: `dpdl.threads.job_threads`); its final metrics, its guarantee against the
    eavesdropper, the noise multiplier and the encoder's sensitivity."""
    with job_threads():
        result = run_training(config_of(job))
    run = result.runs[0]
    return {
        **{key: value for key, value in run.final.items() if key != "step"},
        "epsilon": run.privacy[0].epsilon,
        "sigma": run.mechanism["sigma"],
        "sensitivity": run.mechanism["sensitivity"],
    }


def summaries(
    study: Study, rows: list[dict[str, Any]]
) -> tuple[dict[tuple[str, float, str, str], Point], dict[tuple[str, float, str, str], Point]]:
    """The private methods' points and the no-noise reference's, keyed (panel, eps, method,
    "exact")."""
    return summarise(_private_study(study), rows), summarise(_reference_study(study), rows)


def plot_tradeoff(
    study: Study, rows: list[dict[str, Any]], path: Path, title: str, ylabel: str, log_y: bool
) -> Path:
    """The metric against eps per method (band: interquartile range over seeds), no noise as a flat
    line."""
    private, reference = summaries(study, rows)
    grid = {panel.label: list(panel.values) for panel in study.panels}
    series: dict[str, dict[str, list[float]]] = {}
    bands: dict[str, dict[str, tuple[list[float], list[float]]]] = {}
    for panel in study.panels:
        xs = grid[panel.label]
        points = {
            method: [private[(panel.label, x, method, "exact")] for x in xs] for method in METHODS
        }
        series[panel.label] = {method: [p.mean for p in ps] for method, ps in points.items()}
        series[panel.label]["no noise"] = [
            reference[(panel.label, REFERENCE_EPS, "none", "exact")].mean
        ] * len(xs)
        bands[panel.label] = {
            method: ([p.low for p in ps], [p.high for p in ps]) for method, ps in points.items()
        }
    return plot_panels(
        grid,
        series,
        {p.label: p.xlabel for p in study.panels},
        ylabel,
        path,
        title,
        log_y=log_y,
        bands=bands,
        log_x=True,
        titles=True,
    )


def average_model(study: Study, rows: list[dict[str, Any]]) -> str:
    """The note on the private methods' average model (`average_model_note`)."""
    return average_model_note(_private_study(study), rows)


def budget_met(rows: list[dict[str, Any]]) -> tuple[int, int]:
    """How many private runs meet their eps under the factorization accountant, out of how many."""
    private = [row for row in rows if row["method"] != "none"]
    return sum(row["epsilon"] <= row["eps"] for row in private), len(private)


@dataclass(frozen=True)
class Crossing:
    """Where a loss-vs-eps curve first reaches a target loss: `eps` interpolated linearly in
    `log eps` between the grid points around the crossing; `kind` `"reached"`, or
    `"before"` (already at the target at the grid's smallest eps: `eps` is an upper bound) or
    `"never"` (not within the grid: `eps` is its largest, a lower bound)."""

    eps: float
    kind: str

    def __str__(self) -> str:
        return {"reached": "", "before": "<= ", "never": "> "}[self.kind] + f"{self.eps:.3g}"


def eps_at_loss(eps: list[float], losses: list[float], target: float) -> Crossing:
    """The budget at which a method's loss curve (`losses` at increasing `eps`) first reaches
    `target` (MAFALDA-SGD Section 7.2: "for a fixed test-loss value of 0.75, ... a 2-fold
    reduction in eps")."""
    if losses[0] <= target:
        return Crossing(eps[0], "before")
    for i in range(1, len(eps)):
        if losses[i] <= target:
            share = (losses[i - 1] - target) / (losses[i - 1] - losses[i])
            low, high = math.log(eps[i - 1]), math.log(eps[i])
            return Crossing(math.exp(low + share * (high - low)), "reached")
    return Crossing(eps[-1], "never")
