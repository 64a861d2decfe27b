"""MAFALDA-SGD's Housing experiment (Section 7.2, Fig. 3) as the authors' released code runs it
(`experiments_housing.sh --graph=ego`, `decentralized_simulation.py`, `housing.py`,
`mfdl_optimizer.py` and `housing_plotter.py` of their MFDL repository), beside dpdl's protocol
in `mafalda-housing`.

What the code does that the paper does not say: every method at step size 0.1 and clipping
threshold C = 1 (no tuning), k = 20 passes of b = 16 batches per agent (T = 320; the paper says
b = 19), a sweep of the GDP parameter mu (noise multiplier 1 / mu) with the noise scaled to the
sensitivity `C / smallest batch` (one example's clipped gradient: add / remove, where dpdl's
default bounds a replaced example, `2 C / smallest batch`), eps read off mu at delta = 1e-6, the
gossip `w_ij = 1 / (|N_i| + 1)` (row-stochastic; the Facebook ego graph is irregular), the
features scikit-learn's `fetch_california_housing` derives (rooms, bedrooms and occupants per
household) standardised over all rows, and the target in units of $100,000, not standardised. The
improvement the paper quotes (31%) is what `housing_plotter.py` prints at one mu: the relative
gap of the seed-mean test losses of DP-D-SGD and MAFALDA-SGD, averaged over the end of the run;
`tail_gain` averages it over the last 50 steps, as the paper states it (the code's slice
takes the last 50 (evaluation, seed) entries of its table, the last three evaluations).

Each run is a training configuration (`config_of`; `dpdl train` runs it the same):
`--gdp-mu` for the budget, `--neighbouring add-remove` for the sensitivity (each clipped
batch sum divided by its agent's smallest batch, 6 or 7 examples, as the code divides it),
`--task housing-mlp-sklearn` for the data and `--mixing local-degree` for the gossip. One noise
multiplier serves every agent, that of the smallest batch of all (the code's is per agent, from its
own smallest batch: an agent of 7-example batches gets the noise of 6 here), so every agent meets
mu; the MAFALDA encoder is dpdl's (Lemma 12, Algorithm 2) for this gossip.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np

from dpdl.errors import ConfigError
from dpdl.experiments.train import run_training
from dpdl.graphs import NotDoublyStochasticWarning
from dpdl.jobspec.config import TrainConfig
from dpdl.tasks import TaskOptions
from dpdl.threads import job_threads
from dpdl_reproductions.mafalda_tradeoff import (
    DELTA,
    per_agent_design,
)

__all__ = [
    "CODE_TASKS",
    "CURVE",
    "NODE_LOSS",
    "PLOTTED_NODE",
    "PROTOCOL",
    "RULE",
    "budget_of",
    "code_options",
    "config_of",
    "curves",
    "job_of",
    "node_finals",
    "run_job",
    "tail_gain",
]

PROTOCOL = "authors"
#: Steps between two test evaluations (the code: one a pass, every 16 steps; here every 8 for the
#: curve of Fig. 3 left, which holds the code's points).
EVAL_EVERY = 8
#: How far back the paper's metric looks: "the last 50 training steps".
TAIL_STEPS = 50
#: The run's field holding its test loss at every evaluation (JSON list, steps 0, EVAL_EVERY, ...).
CURVE = "test_loss_curve"
#: The node whose final test metric the code's trade-off figures plot (``tradeoff_plotter.py``:
#: ``loss[0]``, the first row of a seed's table), and the run's field of its final test loss.
PLOTTED_NODE, NODE_LOSS = 0, "test_loss_node0"
#: The gossip of the code: ``w_ij = 1 / (|N_i| + 1)`` on the agent's neighbours and itself.
RULE = "local-degree"
#: The task of a job (the cache key's, as the runs were first listed) -> the task its run trains:
#: housing-mlp on the code's features (:func:`dpdl_reproductions.mafalda_code.sklearn_housing`).
CODE_TASKS = {"housing-mlp": "housing-mlp-sklearn"}
_JOB_TASKS = {code: task for task, code in CODE_TASKS.items()}
#: The job fields beside the seed; bump ``version`` when run_job's output changes (3: each batch's
#: clipped sum divided by its agent's smallest batch, as the code, not by its own size).
VERSION = 3


def job_of(options: Mapping[str, Any]) -> dict[str, Any]:
    """The job of one run of the code's protocol stated as a sweep file's run (the options of a
    [`TrainConfig`][dpdl.jobspec.config.TrainConfig], its one seed as a number): the fields of
    its cache key, from which `config_of` gives those options back. A private method's budget is
    a GDP mu (`gdp-mu`), as the code states it (`budget_of`)."""
    return {
        "task": _JOB_TASKS.get(options["task"], options["task"]),
        **{key: options[key] for key in ("graph", "n", "steps", "cycle", "lr", "clip")},
        "eval_every": options["eval_every"],
        "protocol": PROTOCOL,
        "version": VERSION,
        "method": options["mechanism"],
        "mu": budget_of(options),
        "seed": options["seed"],
    }


def code_options(job: Mapping[str, Any]) -> dict[str, Any]:
    """What every training configuration of the code's protocol (housing and images) sets alike:
    the job's graph, steps of cyclic batches, step size and C; the gossip `RULE`; each
    example's gradient clipped; and the noise of `mfdl_optimizer.py`, mu-GDP for the job's mu
    under add / remove (each clipped batch sum divided by its agent's smallest batch), none for
    method `none`."""
    return {
        "graph": job["graph"],
        "n": job["n"],
        "mixing": RULE,
        "mechanism": job["method"],
        "gdp_mu": job["mu"] if job["method"] != "none" else None,
        "neighbouring": "add-remove",
        "delta": DELTA,
        "steps": job["steps"],
        "cycle": job["cycle"],
        "clip": job["clip"],
        "clip_level": "example",
        "lr": job["lr"],
        "seeds": (job["seed"],),
    }


def budget_of(options: Mapping[str, Any]) -> float:
    """The GDP mu of a run of the code's protocol (0 without noise): a private method's budget is
    `gdp-mu`, as the code states it, or the run is none of the code's."""
    method = options["mechanism"]
    if method == "none":
        return 0.0
    if options["gdp_mu"] is None:
        raise ConfigError(
            f"a run of MAFALDA-SGD's code's protocol states its budget as gdp-mu, as the code "
            f"does; {method} has none (a run of {dict(options)})"
        )
    return options["gdp_mu"]


def config_of(job: dict[str, Any]) -> TrainConfig:
    """The training configuration of one seed of the code's protocol (`dpdl train` runs it as
    `run_job` does): the housing task prepared as `housing.py` (scikit-learn's features,
    standardised over all rows, the target in $100,000, a random 80/20 split, rows dealt to agents
    uniformly at random, no regularisation), the gossip `RULE`, and the noise of
    `mfdl_optimizer.py`: mu-GDP for the job's mu under add / remove (each clipped batch sum
    divided by its agent's smallest batch), no noise for method `none`."""
    return TrainConfig(
        **code_options(job),
        task=CODE_TASKS.get(job["task"], job["task"]),
        schedule="constant",
        eval_every=job["eval_every"],
        task_options=TaskOptions(partition="iid", l2=0.0),
    )


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    """One seed of the code's protocol: its training configuration (`config_of`) as `dpdl
    train` runs it, the test loss at every evaluation, and node `PLOTTED_NODE`'s final test
    loss. All of it on the executor's threads, one by default (`dpdl.threads.job_threads`;
    the encoders' factorization on one whatever they are): MAFALDA-L-SGD's 148 L-BFGS
    runs on the Facebook ego graph take about 5 minutes so, and did not finish in 30 with the BLAS
    threads of two processes competing for two cores."""
    with job_threads(), warnings.catch_warnings():
        warnings.simplefilter("ignore", NotDoublyStochasticWarning)  # the report states it
        result = run_training(config_of(job))
        run = result.runs[0]
        design = (
            per_agent_design(job["graph"], job["steps"], job["cycle"], RULE)
            if job["method"] == "mafalda-l"
            else {}
        )
    return {
        **{key: value for key, value in run.final.items() if key != "step"},
        CURVE: json.dumps([record["test_loss"] for record in run.history]),
        NODE_LOSS: run.agent_metrics["test_loss"][PLOTTED_NODE],
        "eps": run.privacy[0].epsilon,
        "sigma": run.mechanism["sigma"],
        "sensitivity": run.mechanism["sensitivity"],
        **design,
    }


def curves(rows: list[dict[str, Any]]) -> dict[tuple[str, float], np.ndarray]:
    """The test-loss curves of the authors' runs, `(seeds, evaluations)` per (method, mu)."""
    grouped: dict[tuple[str, float], list[list[float]]] = {}
    for row in rows:
        if row.get("protocol") == PROTOCOL:
            grouped.setdefault((row["method"], float(row["mu"])), []).append(json.loads(row[CURVE]))
    return {key: np.array(values, dtype=float) for key, values in grouped.items()}


def node_finals(rows: list[dict[str, Any]]) -> dict[tuple[str, float], np.ndarray]:
    """Node `PLOTTED_NODE`'s final test loss in the authors' runs, one per seed, per
    (method, mu), in the order of `curves`: the point the code's trade-off figures plot."""
    grouped: dict[tuple[str, float], list[float]] = {}
    for row in rows:
        if row.get("protocol") == PROTOCOL:
            grouped.setdefault((row["method"], float(row["mu"])), []).append(float(row[NODE_LOSS]))
    return {key: np.array(values) for key, values in grouped.items()}


def eval_steps(rows: list[dict[str, Any]]) -> np.ndarray:
    """The steps at which the authors' runs are evaluated: every `eval_every` and the last."""
    row = next(row for row in rows if row.get("protocol") == PROTOCOL)
    return np.unique(np.append(np.arange(0, row["steps"], row["eval_every"]), row["steps"]))


def tail_gain(baseline: np.ndarray, method: np.ndarray, steps: np.ndarray) -> float:
    """The paper's "average improvement in test loss in the last 50 training steps" (Section 7.2,
    `housing_plotter.py`): `(a - b) / a` of the seed-mean test losses `a` (`baseline`) and
    `b` (`method`), averaged over the evaluations of the last `TAIL_STEPS` steps."""
    a, b = baseline.mean(axis=0), method.mean(axis=0)
    tail = steps > steps[-1] - TAIL_STEPS
    return float(np.mean((a[tail] - b[tail]) / a[tail]))
