"""`lppa`: LPPA Tables 1-2 and Figs. 3-4: accuracy of DSGT, the DP baseline and LPPA, and DLG against each.

Five clients on a strongly connected directed Erdos-Renyi graph (p = 0.5, seed 0) with a doubly
stochastic W from Sinkhorn-Knopp, as the paper; i.i.d. data; DSGT (eqs. (2)-(3)) on batches of 128,
its step size tuned over 0.02 (the paper's), 0.1 and 0.5 on one seed and shared by the three methods;
Laplace noise of scale 0.025. The DP baseline adds its noise to every
client's tracking variable every round ("each client using the DP method adds beta = 0.025 noise
into the gradient tracking variable before transmission"); LPPA injects its noise difference once,
at initialisation (Algorithm 1, "we confine the noise difference injection to the initialization
phase"). Tasks: Adult with a one-hidden-layer sigmoid MLP (width 64), MNIST and Fashion-MNIST with
a two-convolution sigmoid LeNet (DLG's network cut to two convolutions: the paper's "two-layer CNN"
is not specified further).

Gradient inversion: an honest-but-curious out-neighbour of client 0 receives `gamma_0^0`, client
0's gradient at the common `theta^0` on one example (DLG's setting; the paper shows single
images) plus the noise the attacker cannot subtract (under LPPA it knows the arcs it shares with
client 0), and runs DLG (L-BFGS, 300 iterations, from a random dummy example and soft label). MSE is measured in
the model's input units (standardised pixels or features).
"""  # noqa: E501 - verbatim in REPORT.md; its first line is the `reproduce --list` summary

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from dpdl.attacks.inversion import invert_gradient
from dpdl.errors import ConfigError
from dpdl.experiments.plots import plot_curves, plot_images
from dpdl.experiments.train import TrainConfig, run_training
from dpdl.graphs import erdos_renyi
from dpdl.mechanisms.lppa import TrackingNoise, build_injection, lppa_noise
from dpdl.seeding import purpose_rng
from dpdl.settings import TrackingOptions
from dpdl.tasks import TaskOptions, build_task
from dpdl.tasks.base import Batch
from dpdl.tasks.torch_model import TorchModelTask
from dpdl.threads import job_threads
from dpdl_reproductions.report import AVERAGE_MODEL, Claim, checked, no_average_model
from dpdl_reproductions.sweep_jobs import SweepJobs

__all__ = [
    "DATASETS",
    "LABELS",
    "METHODS",
    "NAME",
    "PARTS",
    "SETTING_FIELDS",
    "SWEEP",
    "SWEEP_PARTS",
    "analyse",
    "config_of",
    "followup_jobs",
    "hidden_arcs",
    "job_of",
    "jobs",
    "mean_std",
    "run_job",
    "train_job",
    "tuned",
]

NAME = "lppa"
CLIENTS, EDGE_PROBABILITY, GRAPH_SEED = 5, 0.5, 0
SCALE, BATCH = 0.025, 128
#: The paper's step size 0.02 and two larger ones: its round is a local epoch, ours one step.
STEP_SIZES = (0.02, 0.1, 0.5)
METHODS = ("dsgt", "dp", "lppa")
LABELS = {"dsgt": "DSGT", "dp": "DP", "lppa": "LPPA"}
DATASETS = {"adult-mlp": "Adult", "mnist-lenet": "MNIST", "fashion-lenet": "FMNIST"}
CLASSES = {"adult-mlp": 2, "mnist-lenet": 10, "fashion-lenet": 10}
TASK_OPTIONS = TaskOptions(partition="iid", l2=0.0)
#: Fields of the runs kept out of runs.csv (the figures show them).
CSV_OMITS = ("history", "truth", "reconstruction")
#: Optional job fields that move a run off Table 1's setting (``lppa-parameters``, Figs. 5-6 and
#: Tables 3-4): the noise scale, the number of clients, the data partition (its Dirichlet
#: concentration ``alpha`` or the classes per client ``labels``), the local updates per
#: communication, and a length in communication ``rounds`` (of ``local_steps`` updates each)
#: instead of epochs. Table 1's jobs have none of them, so their cache keys are those of the runs
#: committed before the fields existed.
SETTING_FIELDS = ("scale", "clients", "partition", "alpha", "labels", "local_steps", "rounds")


def _setting(quick: bool) -> dict[str, Any]:
    """Full: three data sets, step sizes 0.02, 0.1 and 0.5, 5 seeds, 10 epochs, 10 attacked
    examples, 300 L-BFGS iterations; quick: Adult and MNIST, step size 0.5, one seed, 2 epochs,
    2 examples, 100 iterations."""
    if quick:
        return {
            "datasets": ("adult-mlp", "mnist-lenet"),
            "step_sizes": (0.5,),
            "seeds": 1,
            "epochs": 2,
            "examples": 2,
            "iterations": 100,
        }
    return {
        "datasets": tuple(DATASETS),
        "step_sizes": STEP_SIZES,
        "seeds": 5,
        "epochs": 10,
        "examples": 10,
        "iterations": 300,
    }


def train_job(
    task: str, method: str, lr: float, seed: int, epochs: int | None, **setting: Any
) -> dict[str, Any]:
    """A training job, off Table 1's setting by the `SETTING_FIELDS` in `setting`; its
    length is `epochs` of local data, or (`epochs` None) `rounds` communication rounds."""
    unknown = set(setting) - set(SETTING_FIELDS)
    if unknown:
        raise ValueError(f"unknown setting fields {sorted(unknown)}")
    if (epochs is None) == ("rounds" not in setting):
        raise ValueError("a training job runs for epochs or for rounds, exactly one of them")
    return {
        "kind": "train",
        "task": task,
        "method": method,
        "lr": lr,
        "seed": seed,
        "epochs": epochs,
        **setting,
    }


#: Each method's (mechanism, injected every round), as a training configuration states it.
_METHODS = {("none", False): "dsgt", ("dp", True): "dp", ("lppa", False): "lppa"}


def job_of(options: Mapping[str, Any], version: int | None = None) -> dict[str, Any]:
    """The training job of one run of a sweep file (the options of a
    [`TrainConfig`][dpdl.jobspec.config.TrainConfig], its one seed as a number): the method its
    injection names (`_INJECTIONS`), and the `SETTING_FIELDS` where they leave Table 1's setting,
    so that `config_of` gives the options back (`version`: the sweep's, unused: these jobs have
    none). Its length is in epochs (`--epochs`), as the paper's, or in steps: `rounds`
    communication rounds of `local_steps` updates each (Fig. 6a)."""
    method = _METHODS.get((options["mechanism"], options["every_round"]))
    if options["algorithm"] != "dsgt" or method is None:
        raise ConfigError(
            "a training run of the LPPA reproductions is gradient tracking (algorithm dsgt) with "
            f"{', '.join(f'mechanism {m} every-round {e}' for m, e in _METHODS)}; got algorithm "
            f"{options['algorithm']}, mechanism {options['mechanism']}, every-round "
            f"{options['every_round']}"
        )
    epochs, local_steps = options["epochs"], options["local_steps"]
    rounds = None
    if epochs is None:
        rounds, left = divmod(options["steps"], local_steps)
        if left:
            raise ConfigError(
                "a training run of the LPPA reproductions in steps runs whole communication "
                f"rounds: steps (--steps) {options['steps']} is no multiple of local-steps "
                f"(--local-steps) {local_steps}"
            )
    partition = options["partition"]
    setting = {
        "scale": options["tracking_noise"] if options["tracking_noise"] != SCALE else None,
        "clients": options["n"] if options["n"] != CLIENTS else None,
        "partition": partition if partition != TASK_OPTIONS.partition else None,
        "alpha": options["alpha"] if partition in ("dirichlet", "quantity-skew") else None,
        "labels": options["labels_per_agent"] if partition == "labels-per-agent" else None,
        "local_steps": local_steps if local_steps != 1 else None,
        "rounds": rounds,
    }
    fields = {key: value for key, value in setting.items() if value is not None}
    return train_job(options["task"], method, options["lr"], options["seed"], epochs, **fields)


#: The part of the reproduction the sweep file states: the training runs (Table 1, Fig. 3); the
#: DLG attacks (Table 2, Fig. 4) are not training configurations and run here alone.
PARTS = ("training", "dlg")
SWEEP_PARTS = ("training",)


def jobs(quick: bool, parts: tuple[str, ...] = PARTS) -> list[dict[str, Any]]:
    """Tuning (plain DSGT at every step size on seed 0: the sweep file's first stage) and the DLG
    attacks."""
    setting = _setting(quick)
    tuning = SWEEP.jobs(SWEEP.sweep(quick)) if "training" in parts else []
    attacks = [
        {
            "kind": "dlg",
            "task": task,
            "method": method,
            "example": example,
            "iterations": setting["iterations"],
        }
        for task in setting["datasets"]
        for method in METHODS
        for example in range(setting["examples"])
        if "dlg" in parts
    ]
    return tuning + attacks


def tuned(
    rows: list[dict[str, Any]],
    task: str,
    where: Callable[[dict[str, Any]], bool] = lambda row: True,
) -> float:
    """DSGT's best step size on `task` (highest final accuracy on the tuning seed), among the
    runs `where` keeps."""
    tuning = [
        row
        for row in rows
        if row["kind"] == "train"
        and row["task"] == task
        and row["method"] == "dsgt"
        and row["seed"] == 0
        and where(row)
    ]
    return max(tuning, key=lambda row: row["test_accuracy"])["lr"]


def followup_jobs(
    quick: bool, rows: list[dict[str, Any]], parts: tuple[str, ...] = PARTS
) -> list[dict[str, Any]]:
    """Every method on every seed at DSGT's tuned step size (LPPA is lossless against DSGT at the
    same hyperparameters, so all three share them): the sweep file's second stage; the tuning run
    it reuses is not repeated."""
    if "training" not in parts:
        return []
    train = [row for row in rows if row["kind"] == "train"]
    return SWEEP.followup_jobs(SWEEP.sweep(quick), train)


def _graph(clients: int = CLIENTS):
    return erdos_renyi(clients, EDGE_PROBABILITY, GRAPH_SEED, directed=True)


def _field(job: Mapping[str, Any], key: str, default: Any) -> Any:
    """Setting field `key` of a job (`SETTING_FIELDS`), `default` where it has none: a
    job leaves it out, a row of `runs.csv` gives None."""
    value = job.get(key)
    return default if value is None else value


#: The injection of each method: none, DP's every round, LPPA's once.
_INJECTIONS = {"dsgt": ("none", False), "dp": ("dp", True), "lppa": ("lppa", False)}


def _tracking(job: dict[str, Any]) -> tuple[str, TrackingOptions]:
    """The job's injection and its options: DP's every round, LPPA's once, none for plain DSGT;
    Laplace noise of the job's scale (default 0.025)."""
    mechanism, every_round = _INJECTIONS[job["method"]]
    options = TrackingOptions(
        scale=_field(job, "scale", SCALE),
        distribution="laplace",
        every_round=every_round,
        local_steps=_field(job, "local_steps", 1),
    )
    return mechanism, options


def _injection(job: dict[str, Any]) -> TrackingNoise | None:
    """The job's noise (`_tracking`) on its graph, as the training run injects it."""
    mechanism, options = _tracking(job)
    return build_injection(mechanism, _graph(_field(job, "clients", CLIENTS)), options)


def hidden_arcs() -> int:
    """How many of client 0's arcs DLG's attacker (its first out-neighbour) is not on: LPPA's noise
    on client 0's message is a signed sum of as many draws (DP's is one draw)."""
    graph = _graph()
    unknown = lppa_noise(graph, SCALE).unknown_to([min(graph.successors(0))])
    return int((unknown.spread[0] != 0).sum())


def _task_options(job: dict[str, Any]) -> TaskOptions:
    """Table 1's i.i.d. split, or the job's partition (Tables 3-4)."""
    if job.get("partition") is None:
        return TASK_OPTIONS
    return replace(
        TASK_OPTIONS,
        partition=job["partition"],
        alpha=_field(job, "alpha", TASK_OPTIONS.alpha),
        labels_per_agent=_field(job, "labels", TASK_OPTIONS.labels_per_agent),
    )


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    """A training run (final accuracy and its curve) or one DLG attack (MSE, and the image for the
    first examples)."""
    with job_threads():
        return _train(job) if job["kind"] == "train" else _attack(job)


def config_of(job: dict[str, Any]) -> TrainConfig:
    """The training configuration of a training job (`dpdl train` runs it as `run_job`
    does): DSGT without clipping on the directed Erdos-Renyi graph of seed 0 with Sinkhorn-Knopp's
    W, batches of 128, the method's Laplace injection (`_INJECTIONS`) of the job's scale,
    its length in epochs of local data (`--epochs`: an evaluation every epoch), or in rounds of
    `local_steps` updates as steps, evaluated at the end only (Fig. 6a reads final metrics)."""
    mechanism, tracking = _tracking(job)
    if job.get("rounds") is not None:
        steps = job["rounds"] * tracking.local_steps
        length = {"steps": steps, "eval_every": steps}
    else:
        length = {"epochs": job["epochs"]}
    return TrainConfig(
        task=job["task"],
        graph="er-directed",
        n=_field(job, "clients", CLIENTS),
        p=EDGE_PROBABILITY,
        graph_seed=GRAPH_SEED,
        mixing="sinkhorn",
        algorithm="dsgt",
        mechanism=mechanism,
        tracking=tracking,
        clip=math.inf,
        batch_size=BATCH,
        lr=job["lr"],
        schedule="constant",
        **length,
        seeds=(job["seed"],),
        task_options=_task_options(job),
    )


#: The training runs, the sweep file ``dpdl sweep lppa``: DSGT's step size searched on one seed,
#: its choice shared by the three methods on every seed.
SWEEP = SweepJobs(NAME, job_of=job_of, config_of=config_of)


def _train(job: dict[str, Any]) -> dict[str, Any]:
    result = run_training(config_of(job))
    config, run = result.config, result.runs[0]
    final = run.final
    return {
        "test_accuracy": final["test_accuracy"],
        "test_loss": final["test_loss"],
        "test_accuracy_average_model": final["test_accuracy_average_model"],
        "test_loss_average_model": final["test_loss_average_model"],
        "consensus_distance": final["consensus_distance"],
        "steps": config.steps,
        "history": [
            {"step": r["step"] / config.eval_every, "test_accuracy": r["test_accuracy"]}
            for r in run.history
        ],
    }


def _attack(job: dict[str, Any]) -> dict[str, Any]:
    task = build_task(job["task"], CLIENTS, 0, TASK_OPTIONS)
    assert isinstance(task, TorchModelTask)
    graph = _graph()
    attacker = min(graph.successors(0))
    rows = (
        task.offsets[:-1] + job["example"]
    )  # each client's example number ``example``; client 0 is attacked
    params = task.initial_params()
    gradient = (
        task.gradients(
            params.repeat(CLIENTS, 1),
            Batch(rows[:, None], np.ones((CLIENTS, 1))).to(task.device),
            None,
        )[0]
        .cpu()
        .numpy()
    )
    injection = _injection(job)
    message = gradient
    if injection is not None:
        rng = purpose_rng(job["example"], "dlg noise")
        message = gradient + injection.unknown_to([attacker]).sample(rng, task.dim)[0]
    truth = task.inputs[rows[0] : rows[0] + 1].numpy()
    inversion = invert_gradient(
        task,
        params.numpy(),
        message,
        truth,
        CLASSES[job["task"]],
        job["iterations"],
        seed=job["example"],
    )
    result: dict[str, Any] = {
        "mse": inversion.mse,
        "gradient_distance": inversion.gradient_distance,
        "label_recovered": bool(inversion.labels[0] == int(task.targets[rows[0]])),
        "attacker": attacker,
    }
    if job["example"] < 4 and truth.ndim == 4:
        result["truth"] = truth[0, 0].round(4).tolist()
        result["reconstruction"] = inversion.inputs[0, 0].round(4).tolist()
    return result


def mean_std(values: list[float]) -> str:
    return (
        f"{np.mean(values):.2f} ± {np.std(values):.2f}" if len(values) > 1 else f"{values[0]:.2f}"
    )


def _average_model(
    train: list[dict[str, Any]], datasets: list[str], accuracy: Callable[..., list[float]]
) -> str:
    """The note on the clients' average model (the consensus model the paper scores): its test
    accuracy per data set and method beside the mean over clients, or that the runs predate it."""
    column = "test_accuracy" + AVERAGE_MODEL
    if any(row.get(column) is None for row in train):
        return no_average_model(column)
    return (
        "Test accuracy of the clients' average model (their mean parameters; the clients' mean in "
        "parentheses), % over seeds: "
        + "; ".join(
            f"{DATASETS[t]}: "
            + ", ".join(
                f"{LABELS[m]} {mean_std(accuracy(t, m, column))} ({np.mean(accuracy(t, m)):.2f})"
                for m in METHODS
            )
            for t in datasets
        )
        + "."
    )


def _training_claims(datasets: Sequence[str], accuracy: Callable[..., list[float]]) -> list[Claim]:
    """Table 1's claims: LPPA as accurate as DSGT, the DP baseline several points below."""
    gaps = {
        task: abs(np.mean(accuracy(task, "lppa")) - np.mean(accuracy(task, "dsgt")))
        for task in datasets
    }
    losses = {
        task: np.mean(accuracy(task, "dsgt")) - np.mean(accuracy(task, "dp")) for task in datasets
    }
    table = "; ".join(
        f"{DATASETS[t]}: " + ", ".join(f"{LABELS[m]} {mean_std(accuracy(t, m))}" for m in METHODS)
        for t in datasets
    )
    return [
        checked(
            "Table 1",
            "LPPA's accuracy equals noise-free DSGT's (within 0.1 points on Adult and MNIST)",
            table
            + " (accuracy %, mean ± std over seeds); absolute difference LPPA - DSGT: "
            + ", ".join(f"{DATASETS[t]} {gaps[t]:.3f}" for t in datasets),
            all(gaps[t] <= 0.1 for t in datasets),
            f"LPPA differs from DSGT by up to {max(gaps.values()):.2f} points",
        ),
        checked(
            "Table 1",
            "the DP baseline loses several points of accuracy (13.8 on average)",
            "DSGT - DP: " + ", ".join(f"{DATASETS[t]} {losses[t]:.1f} points" for t in datasets),
            all(losses[t] >= 2.0 for t in datasets),
            f"the DP baseline loses as little as {min(losses.values()):.1f} points",
        ),
    ]


def _dlg_claims(datasets: Sequence[str], mse: Callable[[str, str], list[float]]) -> list[Claim]:
    """Table 2's claims: DLG against DSGT, LPPA and the DP baseline."""
    mse_table = "; ".join(
        f"{DATASETS[t]}: " + ", ".join(f"{LABELS[m]} {np.mean(mse(t, m)):.3g}" for m in METHODS)
        for t in datasets
    )
    leak = {t: np.mean(mse(t, "lppa")) >= 10 * np.mean(mse(t, "dsgt")) for t in datasets}
    return [
        checked(
            "Table 2 / Fig. 4",
            "DLG reconstructs the sender's data from plain DSGT (low MSE) and fails against LPPA",
            "mean DLG MSE: "
            + mse_table
            + "; LPPA / DSGT: "
            + ", ".join(
                f"{DATASETS[t]} "
                f"{np.mean(mse(t, 'lppa')) / max(np.mean(mse(t, 'dsgt')), 1e-12):.3g}x"
                for t in datasets
            ),
            all(leak.values()),
            "DLG against LPPA reaches less than ten times plain DSGT's MSE on "
            + ", ".join(DATASETS[t] for t in datasets if not leak[t]),
        ),
        checked(
            "Table 2",
            "LPPA protects better than DP (MSE about 1.5x DP's)",
            "LPPA / DP: "
            + ", ".join(
                f"{DATASETS[t]} {np.mean(mse(t, 'lppa')) / max(np.mean(mse(t, 'dp')), 1e-12):.3g}x"
                for t in datasets
            ),
            all(np.mean(mse(t, "lppa")) > np.mean(mse(t, "dp")) for t in datasets),
            "DLG reconstructs as well or better against LPPA than against DP on "
            + ", ".join(
                DATASETS[t] for t in datasets if np.mean(mse(t, "lppa")) <= np.mean(mse(t, "dp"))
            ),
        ),
    ]


def _history(row: dict[str, Any]) -> list[dict[str, float]] | None:
    """A training run's test accuracy after every epoch: its own record, or a sweep's
    `test_accuracy_curve` (`[record]`; an evaluation every epoch from step 0); None from
    `runs.csv` alone."""
    if "history" in row:
        return row["history"]
    if row.get("test_accuracy_curve") is None:
        return None
    curve = json.loads(row["test_accuracy_curve"])
    return [{"step": epoch, "test_accuracy": value} for epoch, value in enumerate(curve)]


def analyse(
    rows: list[dict[str, Any]], out: Path, quick: bool, parts: tuple[str, ...] = PARTS
) -> tuple[list[Path], list[Claim], list[str]]:
    """Tables 1-2 as claims, accuracy curves per data set, and DLG's reconstructions; the claims
    of `parts` alone (a sweep's runs are the training part's).

    From `runs.csv` alone (its rows carry no curves or images, `CSV_OMITS`) the figures are not
    drawn again: those an earlier run drew into `out` are listed."""
    datasets = _setting(quick)["datasets"]
    training, dlg = "training" in parts, "dlg" in parts
    step_sizes = {  # each data set's choice, searched once
        task: tuned(rows, task)
        for task in {row["task"] for row in rows if training and row["kind"] == "train"}
    }
    train = [
        row
        for row in rows
        if training and row["kind"] == "train" and row["lr"] == step_sizes[row["task"]]
    ]
    attacks = [row for row in rows if dlg and row["kind"] == "dlg"]

    def accuracy(task: str, method: str, metric: str = "test_accuracy") -> list[float]:
        return [
            100.0 * row[metric] for row in train if row["task"] == task and row["method"] == method
        ]

    def mse(task: str, method: str) -> list[float]:
        return [row["mse"] for row in attacks if row["task"] == task and row["method"] == method]

    histories = [_history(row) for row in train]
    curves = all(history is not None for history in histories)
    figures = [
        plot_curves(
            {
                LABELS[m]: [
                    history
                    for row, history in zip(train, histories, strict=True)
                    if row["task"] == task and row["method"] == m
                ]
                for m in METHODS
            },
            "test_accuracy",
            out / f"accuracy_{DATASETS[task].lower()}.png",
            f"LPPA Fig. 3a: {DATASETS[task]}, DSGT vs DP vs LPPA",
            xlabel="epochs of local data",
        )
        if curves
        else out / f"accuracy_{DATASETS[task].lower()}.png"
        for task in (datasets if training else ())
    ]
    for task in datasets if dlg else ():
        shown = [row for row in attacks if row["task"] == task and "truth" in row]
        if shown:
            examples = sorted({row["example"] for row in shown})
            grid = {
                "original": [next(r["truth"] for r in shown if r["example"] == e) for e in examples]
            }
            for method in METHODS:
                grid[LABELS[method]] = [
                    next(
                        r["reconstruction"]
                        for r in shown
                        if r["example"] == e and r["method"] == method
                    )
                    for e in examples
                ]
            figures.append(
                plot_images(
                    grid,
                    out / f"dlg_{DATASETS[task].lower()}.png",
                    f"LPPA Fig. 4: DLG reconstructions, {DATASETS[task]}",
                )
            )
        elif (out / f"dlg_{DATASETS[task].lower()}.png").exists():
            figures.append(out / f"dlg_{DATASETS[task].lower()}.png")
    figures = [figure for figure in figures if figure.exists()]

    claims = (_training_claims(datasets, accuracy) if training else []) + (
        _dlg_claims(datasets, mse) if dlg else []
    )
    labels = {
        t: np.mean(
            [
                row["label_recovered"]
                for row in attacks
                if row["task"] == t and row["method"] == "dsgt"
            ]
        )
        for t in (datasets if dlg else ())
    }
    guarantee = (
        "The guarantee behind these numbers: none. LPPA's noise differences sum to zero, so an "
        "eavesdropper that adds up the first round's messages learns the sum of the clients' "
        "gradients exactly, and the accountant gives eps = inf; `dpdl audit` shows it beside the "
        "paper's sqrt(2) claim (results/audit/REPORT.md). DLG's failure against one message is "
        "not differential privacy."
    )
    notes = (
        [
            "Step size (tuned on DSGT): "
            + ", ".join(f"{DATASETS[t]} {step_sizes[t]:g}" for t in datasets)
            + ".",
            guarantee,
            "A round here is one DSGT step on a batch of 128 (Algorithm 1: one gradient per "
            "exchange); the paper's round is one local epoch, so we run as many steps as its "
            "epochs would take batches, for "
            f"{_setting(quick)['epochs']} epochs instead of 50 rounds (the computing budget "
            "here).",
            "Accuracy is measured on the test split, averaged over the clients' models (the "
            "paper: on the union of the training sets, for the consensus model).",
            _average_model(train, datasets, accuracy),
        ]
        if training
        else [guarantee]
    )
    if dlg:
        notes.append(
            "DLG's label was recovered from plain DSGT's gradient in "
            + ", ".join(f"{DATASETS[t]} {100 * labels[t]:.0f}%" for t in datasets)
            + " of attacks."
        )
    return figures, claims, notes
