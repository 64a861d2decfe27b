"""Privacy-utility trade-off figures: D-SGD under several noise designs across a sweep of eps or p.

Whisper D-SGD Figs. 2-3, CorN-DSGD Figs. 3-5 and DECOR Fig. 1 share one protocol, implemented here
once; each reproduction module only states its `Study` (panels, tasks, grids) and its claims.

1. *Tuning* (the papers tune every method on the metric they report; so do we): every
   (setting, method, calibration) runs every point of its grid (step size x clipping threshold,
   and DECOR's noise couples where the study tunes them, DECOR Appendix D.2) on the tuning seeds;
   the best mean final metric wins (a diverged run counts as the worst). Where that costs too
   much, a task is tuned once at a reference setting (`Training.tune_at`).
2. *Final*: the winner runs on all seeds; the tuning seeds are the first of them, reused from the
   cache. Each seed is a full replicate (graph draw, data split, partition, batches, noise).
   Figures show the mean over seeds and the interquartile range.
3. Every point is run under both calibrations: the papers' (dashed in the figures: their
   closed form at agent level, Renyi DP at example level) and the exact accountant (solid); both
   are (eps, delta)-DP against the eavesdropper (the papers' closed form up to eps about 30 at
   delta = 1e-5), the exact one with less noise.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import t as student_t

from dpdl.errors import ConfigError
from dpdl.experiments.plots import plot_panels
from dpdl.experiments.sweeps.tuning import cost
from dpdl.experiments.train import TrainConfig, TrainResult, run_training
from dpdl.mechanisms.registry import DesignOptions
from dpdl.settings import TaskOptions
from dpdl.threads import job_threads
from dpdl_reproductions.report import AVERAGE_MODEL, Claim, budget_verdict, no_average_model

__all__ = [
    "SIGNIFICANCE",
    "SIGNIFICANCE_LEVEL",
    "Panel",
    "Point",
    "Study",
    "Training",
    "average_model_note",
    "better",
    "budget_claim",
    "config_of",
    "final_jobs",
    "job_of",
    "plot_study",
    "result_row",
    "run_job",
    "significantly_better",
    "summarise",
    "train",
    "tuning_jobs",
    "unique_jobs",
]

Job = dict[str, Any]
CALIBRATIONS = ("paper", "exact")
#: Confidence level of :func:`significantly_better`.
SIGNIFICANCE_LEVEL = 0.95
#: The sentence a report whose claims use :func:`significantly_better` prints under its claims
#: table.
SIGNIFICANCE = (
    'Significance ("ahead" in the claims): paired two-sided Student t test over seeds at '
    f"{SIGNIFICANCE_LEVEL:.0%}, "
    "t quantile for n - 1 degrees of freedom (4.30, 3.18, 2.78 standard errors of the paired "
    "difference for 3, 4, 5 seeds)."
)
#: Part of every job: bump it when run_job's output changes, so cached runs are recomputed.
VERSION = 1


@dataclass(frozen=True)
class Training:
    """How a task is trained in a study: the fixed choices and the grid tuned over."""

    task: str
    steps: int
    lrs: tuple[float, ...]
    clips: tuple[float, ...]
    metric: str
    lower_is_better: bool = True
    schedule: str = "constant"
    batch_size: int = 128
    clip_level: str = "agent"
    #: DECOR's noise couples tuned over: indices of its Appendix D couples (least private noise
    #: first) and None for the trace-optimal couple; empty: the trace-optimal couple only (the
    #: Whisper / CorN-DSGD comparisons).
    decor_couples: tuple[int | None, ...] = ()
    #: Seeds the grid is tuned on, and seeds the tuned point runs on (the first ``tune_seeds`` of
    #: them are the tuning runs themselves).
    tune_seeds: int = 1
    seeds: int = 1
    #: A setting (e.g. ``{"eps": 10.0, "p": 0.5}``) at which every (method, calibration) is tuned
    #: once, its choice then reused across the sweep, where tuning every point costs too much
    #: (the papers tune every point); empty: every point is tuned.
    tune_at: Mapping[str, Any] = field(default_factory=dict)
    #: Batches per pass over the data for cyclic participation (MAFALDA-SGD), which replaces
    #: ``batch_size`` in the jobs; None: batches are sampled.
    cycle: int | None = None
    #: The jobs' ``version``: a study whose ``run_job`` returns more than :func:`run_job` does
    #: raises it, so that runs of the plain ``run_job`` are not taken for its own.
    version: int = VERSION
    #: Which protocol the jobs follow, where a study runs more than the paper's (e.g.
    #: ``"authors"``: the authors' released code); empty: the paper's, and the jobs do not name it.
    protocol: str = ""
    #: The quadratics' starting point and the iterates the metrics are also averaged over
    #: (:class:`~dpdl.jobspec.config.TrainConfig`'s ``start`` and ``average_last``); the jobs
    #: name them only away from their defaults, so that other jobs keep their keys.
    start: str = "zeros"
    average_last: int = 0
    #: The search whose ``decor_couples`` are places in it: ``appendix-d`` (DECOR Appendix D.1's)
    #: or ``authors`` (the authors' code's grid, :mod:`~dpdl_reproductions.decor_searches`); the
    #: jobs name it only away from ``appendix-d``.
    couple_search: str = "appendix-d"
    #: The calibrations the training runs in, where not the study's (empty: the study's).
    calibrations: tuple[str, ...] = ()


@dataclass(frozen=True)
class Panel:
    """One panel: `training` on graphs `fixed["graph"]`, the metric against `sweep`.

    `fixed` holds the settings that do not move (graph, n, p, eps); `method_graphs` runs a
    method on another graph (DECOR's CDP baseline is centralised: the complete graph).
    """

    label: str
    training: Training
    sweep: str
    values: tuple[float, ...]
    fixed: Mapping[str, Any]
    methods: tuple[str, ...]
    xlabel: str
    method_graphs: Mapping[str, str] = field(default_factory=dict)

    def settings(self, x: float, method: str) -> dict[str, Any]:
        settings = {"graph": "er", "n": 20, "p": 0.5, **self.fixed, self.sweep: x}
        settings["graph"] = self.method_graphs.get(method, settings["graph"])
        return settings


@dataclass(frozen=True)
class Study:
    """Panels and budget of one reproduction."""

    panels: tuple[Panel, ...]
    delta: float = 1e-5
    calibrations: tuple[str, ...] = CALIBRATIONS


@dataclass(frozen=True)
class Point:
    """One (panel, x, method, calibration) after tuning: the final metric over seeds, its mean and
    its interquartile range (`low`, `high`: robust where the metric is heavy-tailed across
    seeds)."""

    mean: float
    low: float
    high: float
    values: tuple[float, ...]
    hyperparameters: dict[str, Any]


def _base(panel: Panel, x: float, method: str, calibration: str) -> Job:
    training = panel.training
    settings = panel.settings(x, method)
    batches = (
        {"batch_size": training.batch_size} if training.cycle is None else {"cycle": training.cycle}
    )
    return {
        "task": training.task,
        "graph": settings["graph"],
        "n": int(settings["n"]),
        "p": float(settings["p"]),
        "eps": float(settings["eps"]),
        "method": method,
        "calibration": calibration,
        "steps": training.steps,
        "schedule": training.schedule,
        **batches,
        "clip_level": training.clip_level,
        "version": training.version,
        **({"protocol": training.protocol} if training.protocol else {}),
        **_unusual(start=training.start, average_last=training.average_last),
    }


#: The job fields that a job holds only where they differ from these values (those of a default
#: :class:`~dpdl.jobspec.config.TrainConfig`).
_USUAL = {
    "start": TaskOptions().start,
    "average_last": TrainConfig().average_last,
    "couple_search": "appendix-d",
}


def _unusual(**fields: Any) -> dict[str, Any]:
    """The `fields` of `_USUAL` whose value is not the usual one."""
    return {key: value for key, value in fields.items() if value != _USUAL[key]}


def _usual_or(job: Job, key: str) -> Any:
    """Field `key` of `_USUAL` as `job` has it: the usual value where the job has none
    (or a row of `runs.csv` an empty cell)."""
    value = job.get(key)
    return _USUAL[key] if value is None else value


#: The fields a job may have: :func:`_base`'s (``batch_size`` or ``cycle``), then :func:`_grid`'s
#: and the seed.
_JOB_KEYS = (
    "task",
    "graph",
    "n",
    "p",
    "eps",
    "method",
    "calibration",
    "steps",
    "schedule",
    "batch_size",
    "cycle",
    "clip_level",
    "version",
    "protocol",
    "start",
    "average_last",
    "lr",
    "clip",
    "decor_couple",
    "couple_search",
    "seed",
)


def _grid(training: Training, method: str) -> Iterator[dict[str, Any]]:
    couples: tuple[int | None, ...] = (
        training.decor_couples if method == "decor" and training.decor_couples else (None,)
    )
    for lr in training.lrs:
        for clip in training.clips:
            for couple in couples:
                search = training.couple_search if couple is not None else _USUAL["couple_search"]
                yield {
                    "lr": lr,
                    "clip": clip,
                    "decor_couple": couple,
                    **_unusual(couple_search=search),
                }


def calibrations_of(study: Study, panel: Panel) -> tuple[str, ...]:
    """The calibrations `panel` runs in: its training's own, else the study's."""
    return panel.training.calibrations or study.calibrations


def _points(study: Study) -> Iterator[tuple[Panel, float, str, str, Job]]:
    for panel in study.panels:
        for x in panel.values:
            for method in panel.methods:
                for calibration in calibrations_of(study, panel):
                    yield panel, x, method, calibration, _base(panel, x, method, calibration)


def _key(job: Job) -> str:
    return json.dumps(job, sort_keys=True)


def unique_jobs(jobs: list[Job]) -> list[Job]:
    """`jobs` without repeats (the same job twice is one), in order."""
    return list({_key(job): job for job in jobs}.values())


def _tuning_base(training: Training, base: Job) -> Job:
    """The job whose tuning chooses `base`'s hyperparameters: itself, or its twin at
    `tune_at`."""
    return {**base, **training.tune_at}


def tuning_jobs(study: Study) -> list[Job]:
    """Every grid point of every (setting, method, calibration) on the tuning seeds (of the
    setting `tune_at` moves them to, if any)."""
    return unique_jobs(
        [
            {**_tuning_base(panel.training, base), **hyper, "seed": seed}
            for panel, _, method, _, base in _points(study)
            for hyper in _grid(panel.training, method)
            for seed in range(panel.training.tune_seeds)
        ]
    )


def _score(value: float, lower_is_better: bool) -> float:
    """Smaller is better; a diverged run (NaN or infinite metric) is the worst (the sweeps' rule,
    `cost`)."""
    return cost(value, "min" if lower_is_better else "max")


def _metric(row: Mapping[str, Any], metric: str) -> float:
    """`row`'s `metric`, NaN where the run has none (it failed; an empty cell of runs.csv)."""
    value = row.get(metric)
    return math.nan if value is None else float(value)


def _best(panel: Panel, base: Job, rows_by_key: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    """The grid point of `base`'s (tuning) setting with the best mean metric over the tuning
    seeds; the first such point in grid order on a tie."""
    training = panel.training
    tuned = _tuning_base(training, base)

    def score(hyper: dict[str, Any]) -> float:
        values = [  # a run without the metric (it failed, e.g. no couple found) is the worst
            _metric(rows_by_key[_key({**tuned, **hyper, "seed": seed})], training.metric)
            for seed in range(training.tune_seeds)
        ]
        return _score(float(np.mean(values)), training.lower_is_better)

    return min(_grid(training, base["method"]), key=score)


#: Job fields that only some jobs have: an empty cell of ``runs.csv`` (None) means the job has none.
_OPTIONAL_KEYS = ("batch_size", "cycle", "protocol", *_USUAL)


def _rows_by_key(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Rows (job fields and results) by the key of their job."""
    return {
        _key(
            {
                key: row[key]
                for key in _JOB_KEYS
                if key in row and not (key in _OPTIONAL_KEYS and row[key] is None)
            }
        ): row
        for row in rows
    }


def final_jobs(study: Study, tuning_rows: list[dict[str, Any]]) -> list[Job]:
    """The tuned hyperparameters of every (setting, method, calibration) on the seeds the tuning
    did not already run."""
    rows = _rows_by_key(tuning_rows)
    jobs = []
    for panel, _, _, _, base in _points(study):
        hyper = _best(panel, base, rows)
        jobs += [{**base, **hyper, "seed": seed} for seed in range(panel.training.seeds)]
    return [job for job in unique_jobs(jobs) if _key(job) not in rows]


def run_job(job: Job) -> dict[str, Any]:
    """Train one seed of one grid point; its final metrics, privacy and noise variance."""
    return result_row(train(job))


def train(job: Job) -> TrainResult:
    """Train one seed of one grid point (`run_job` without the row: a study that reports
    more of the run starts from it).

    One BLAS / torch thread per job, the jobs themselves filling the cores, unless the executor
    says otherwise (`--threads`: `dpdl.threads.job_threads`).
    """
    with job_threads():
        return run_training(config_of(job))


def config_of(job: Job, eval_every: int | None = None) -> TrainConfig:
    """The training configuration of `job` (evaluated at the end only, or every
    `eval_every` steps)."""
    return TrainConfig(
        task=job["task"],
        graph=job["graph"],
        n=job["n"],
        p=job["p"],
        mechanism=job["method"],
        eps=job["eps"],
        steps=job["steps"],
        clip=job["clip"],
        clip_level=job["clip_level"],
        calibration=job["calibration"],
        batch_size=job["batch_size"],
        lr=job["lr"],
        schedule=job["schedule"],
        eval_every=eval_every or job["steps"],
        seeds=(job["seed"],),
        average_last=_usual_or(job, "average_last"),
        task_options=TaskOptions(start=_usual_or(job, "start")),
        design=DesignOptions(
            decor_search=decor_search(job["decor_couple"], _usual_or(job, "couple_search"))
        ),
    )


def decor_search(couple: int | None, search: str = "appendix-d") -> str:
    """The DECOR search of a job's `decor_couple` in its `couple_search`: the couple of place
    `k` (`appendix-d-<k>` or `authors-<k>`, `decor_searches`), or
    the trace-optimal one for None."""
    return "trace" if couple is None else f"{search}-{couple}"


def decor_couple(search: str) -> tuple[int | None, str]:
    """A job's `decor_couple` and `couple_search` of the DECOR search `search`
    (`decor_search` inverted)."""
    if search == "trace":
        return None, _USUAL["couple_search"]
    prefix, _, k = search.rpartition("-")
    if prefix not in ("appendix-d", "authors") or not k.isdigit():
        raise ConfigError(
            f"decor-search {search!r}: a run of the papers' protocol searches trace, "
            "appendix-d-<k> or authors-<k>"
        )
    return int(k), prefix


def result_row(result: TrainResult) -> dict[str, Any]:
    """The row of `run_job`: the run's final metrics, privacy and noise variance."""
    run = result.runs[0]
    return {
        **{key: value for key, value in run.final.items() if key != "step"},
        "epsilon": run.privacy[0].epsilon,
        "threat": run.privacy[0].threat,
        "exact_epsilon_of_calibration": result.calibration.achieved_epsilon
        if result.calibration
        else 0.0,
        "trace_WRW": run.trace_wrw,
    }


def job_of(options: Mapping[str, Any], version: int = VERSION) -> Job:
    """The job of one run stated as a sweep's options (those of a
    [`TrainConfig`][dpdl.jobspec.config.TrainConfig],
    [`dpdl.settings.to_options`][dpdl.settings.to_options], with its one seed as a number, as a
    row of `dpdl sweep`'s `runs.csv` has it): the fields `config_of` reads, under their names
    here, and the `version` of the `run_job` that runs it (`sweep_jobs`)."""
    couple, search = decor_couple(options["decor_search"])
    return {
        "task": options["task"],
        "graph": options["graph"],
        "n": int(options["n"]),
        "p": float(options["p"]),
        "eps": float(options["eps"]),
        "method": options["mechanism"],
        "calibration": options["calibration"],
        "steps": int(options["steps"]),
        "schedule": options["schedule"],
        "batch_size": int(options["batch_size"]),
        "clip_level": options["clip_level"],
        "version": version,
        "lr": float(options["lr"]),
        "clip": float(options["clip"]),
        "decor_couple": couple,
        "seed": int(options["seed"]),
        **_unusual(
            start=options["start"],
            average_last=int(options["average_last"]),
            couple_search=search,
        ),
    }


def summarise(
    study: Study, rows: list[dict[str, Any]], metric: str | None = None
) -> dict[tuple[str, float, str, str], Point]:
    """The final point of every (panel label, x, method, calibration): the training's metric, or
    `metric` (another field of the same runs, e.g. the consensus distance) at the tuned point."""
    by_key = _rows_by_key(rows)
    summary = {}
    for panel, x, method, calibration, base in _points(study):
        hyper = _best(panel, base, by_key)
        field_ = metric or panel.training.metric
        values = tuple(
            float(by_key[_key({**base, **hyper, "seed": seed})][field_])
            for seed in range(panel.training.seeds)
        )
        low, high = np.percentile(values, [25, 75])
        summary[(panel.label, x, method, calibration)] = Point(
            float(np.mean(values)), float(low), float(high), values, hyper
        )
    return summary


def average_model_note(study: Study, rows: list[dict[str, Any]], what: str = "") -> str:
    """A report's note on the agents' average model: its metric (`<metric>_average_model`) at
    every tuned point of `study`'s exact calibration beside the mean over agents that the
    figures show, both means over seeds; or, for runs made before their task reported it,
    `no_average_model`. `what` names the study in the
    note, where a report has several."""
    metric = study.panels[0].training.metric  # the same in every panel of a study
    column = metric + AVERAGE_MODEL
    tasks = {panel.training.task for panel in study.panels}
    prefix = f"{what}: " if what else ""
    if any(row.get(column) is None for row in rows if row.get("task") in tasks):
        return prefix + no_average_model(column)
    agents, average = summarise(study, rows), summarise(study, rows, column)

    def pair(panel: Panel, x: float, method: str) -> str:
        key = (panel.label, x, method, "exact")
        return f"{method} {agents[key].mean:.4g} / {average[key].mean:.4g}"

    panels = [
        f"{panel.label}: "
        + "; ".join(
            f"{panel.sweep}={x:g}: " + ", ".join(pair(panel, x, m) for m in panel.methods)
            for x in panel.values
        )
        for panel in study.panels
    ]
    return (
        f"{prefix}Average model (the agents' mean parameters): {metric} at the tuned "
        "points, exact calibration, mean over seeds, as mean over agents / average model. "
        + ". ".join(panels)
        + "."
    )


def better(a: float, b: float, lower_is_better: bool) -> bool:
    """Whether metric value `a` is strictly better than `b`."""
    return _score(a, lower_is_better) < _score(b, lower_is_better)


def significantly_better(
    a: Point, b: Point, lower_is_better: bool, level: float = SIGNIFICANCE_LEVEL
) -> bool:
    """Whether `a` beats `b` in a paired two-sided Student t test over seeds at `level` (seed
    s of both shares its graph, data split, batches and noise stream): the mean paired gain exceeds
    `t_{(1 + level)/2, n-1}` standard errors of the paired difference (4.30, 3.18, 2.78 for 3, 4,
    5 seeds at 95%), i.e. `scipy.stats.ttest_rel` rejects equal means with the gain on `a`'s
    side.

    Two-sided, because the reports test both directions (is LDP ahead of DECOR? are the papers'
    calibration runs ahead of the exact ones?) and the side is read off the means afterwards; a
    one-sided test at 95% would then be a 90% test. Where both sit at the same level (two
    calibrations of nearly the same noise), the sign of the difference of means is a coin toss;
    this asks whether the seeds tell them apart. With fewer than two seeds, or a diverged run, it
    is `better` on the means.
    """
    gain = np.asarray(b.values, dtype=float) - np.asarray(a.values, dtype=float)
    gain = gain if lower_is_better else -gain
    if len(gain) < 2 or not np.all(np.isfinite(gain)):
        return better(a.mean, b.mean, lower_is_better)
    quantile = float(student_t.ppf((1.0 + level) / 2.0, len(gain) - 1))
    return bool(gain.mean() > quantile * gain.std(ddof=1) / math.sqrt(len(gain)))


def plot_study(
    study: Study,
    summary: Mapping[tuple[str, float, str, str], Point],
    path: Path,
    title: str,
    ylabel: str,
    log_y: bool,
    columns: int | None = None,
    extra: Mapping[str, Mapping[str, Sequence[float]]] | None = None,
) -> Path:
    """Mean over seeds (band: interquartile range) per method; exact calibration solid, the papers'
    dashed; `extra[panel label][line label]` adds a line (one value per x) without a band."""
    suffix = {"exact": "", "paper": " (paper calibration)", "authors": " (authors' calibration)"}
    grid = {panel.label: list(panel.values) for panel in study.panels}
    series: dict[str, dict[str, list[float]]] = {}
    bands: dict[str, dict[str, tuple[list[float], list[float]]]] = {}
    for panel in study.panels:
        series[panel.label], bands[panel.label] = {}, {}
        for method in panel.methods:
            for calibration in calibrations_of(study, panel):
                label = f"{method}{suffix[calibration]}"
                points = [summary[(panel.label, x, method, calibration)] for x in panel.values]
                series[panel.label][label] = [p.mean for p in points]
                bands[panel.label][label] = ([p.low for p in points], [p.high for p in points])
        series[panel.label].update((extra or {}).get(panel.label, {}))
    xlabels = {panel.label: panel.xlabel for panel in study.panels}
    return plot_panels(
        grid,
        series,
        xlabels,
        ylabel,
        path,
        title,
        log_y=log_y,
        bands=bands,
        columns=columns,
        titles=True,
    )


def budget_claim(rows: list[dict[str, Any]], delta: float = 1e-5) -> Claim:
    """Every point is (eps, delta)-DP at its label: every exactly calibrated run meets its target,
    and what the papers' calibration really gives (` budget_verdict`)."""
    exact = [row for row in rows if row["calibration"] == "exact"]
    met = all(row["epsilon"] <= row["eps"] for row in exact)
    paper: dict[float, float] = {}
    for row in rows:
        if row["calibration"] == "paper":
            paper[row["eps"]] = max(paper.get(row["eps"], 0.0), row["exact_epsilon_of_calibration"])
    return budget_verdict(
        "all",
        "every run is (eps, delta)-DP against the external eavesdropper",
        "exact calibration: epsilon <= target in "
        f"{sum(row['epsilon'] <= row['eps'] for row in exact)}/{len(exact)} runs",
        met,
        paper,
        delta,
    )
