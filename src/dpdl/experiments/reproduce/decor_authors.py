"""DECOR Fig. 1's least squares as the authors' released code runs it (``quadratics.py`` and
``utils/plotting.py: loss_epsilon`` of their repository), beside the paper's protocol in
``decor-fig1``.

What differs from the paper's text, which ``decor-fig1`` follows: T = 3500 steps at the fixed step
size 1.668e-3 and C = 1 (no tuning but DECOR's noise couple, the one of lowest loss among its
Appendix D search, as the authors' search files keep), every model starts at the all-ones point,
and the metric is the mean over agents of ``||x_i - x*||^2`` averaged over the last iterates (the
code's ``errors[-200:-1]``: the 199 iterates after steps T - 199 .. T - 1), over 5 seeds.

The engine starts every agent at :meth:`Task.initial_params` and reports the task's metrics, so
this module starts the least squares at ones (:class:`OnesStart`) and reads the distance off the
optimality gap that ``run_dsgd``'s callback sees every step: for DECOR's least squares every
``Q_i`` is a multiple of the identity, so ``F(x) - F* = q ||x - x*||^2`` with ``q`` the mean of
those multiples (:func:`distance_scale`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from threadpoolctl import threadpool_limits

from dpdl.experiments.reproduce.tradeoff import Job, config_of
from dpdl.jobspec.job import build_job, privacy_reports
from dpdl.simulation import run_dsgd
from dpdl.tasks.quadratic import QuadraticObjectives

__all__ = ["METRIC", "PROTOCOL", "STEPS", "TAIL", "OnesStart", "distance_scale", "run_job"]

PROTOCOL = "authors"
STEPS = 3500
STEP_SIZE = 1.668e-3
CLIP = 1.0
SEEDS = 5
#: How many iterates the metric averages (the code's slice ``[-200:-1]`` of T + 1 records).
TAIL = 199
METRIC = "squared_distance_last200"


class OnesStart(QuadraticObjectives):
    """A quadratic task whose agents all start at the all-ones point (the authors'
    ``X = np.ones((num_dim, num_nodes))``)."""

    def initial_params(self) -> Any:
        start = super().initial_params()
        return start * 0 + 1  # of the type the engine's tasks return


def ones_start(task: QuadraticObjectives) -> OnesStart:
    """``task``, started at ones."""
    return OnesStart(task.name, np.asarray(task.curvatures), np.asarray(task.centers))


def distance_scale(task: QuadraticObjectives) -> float:
    """``q`` with ``F(x) - F* = q ||x - x*||^2``: the task's curvatures must all be multiples of
    the identity (DECOR's least squares)."""
    mean = np.asarray(task.curvatures, dtype=float).mean(axis=0)
    scale = float(np.trace(mean)) / mean.shape[0]
    if not np.allclose(mean, scale * np.eye(mean.shape[0])):
        raise ValueError("the distance to the optimum needs curvatures that are multiples of I")
    return scale


def run_job(job: Job) -> dict[str, Any]:
    """One seed of the authors' protocol: the run from ones, its final metrics, the metric
    :data:`METRIC`, privacy and noise variance (the row of
    :func:`~dpdl.experiments.reproduce.tradeoff.run_job`)."""
    config = config_of(job, eval_every=1).resolved()
    built = build_job(config, job["seed"])
    task = ones_start(built.task)
    scale = distance_scale(task)
    tail: list[float] = []

    def record(step: int, metrics: dict[str, float]) -> None:
        if job["steps"] - TAIL <= step < job["steps"]:
            tail.append(metrics["optimality_gap"] / scale)

    torch.set_num_threads(1)
    with threadpool_limits(limits=1):
        result = run_dsgd(
            task, built.weights, built.mechanism, built.dsgd, seed=job["seed"], callback=record
        )
    privacy = privacy_reports(built.mechanism, built.neighbouring, config.steps, config.delta)
    final = result.history[-1]
    return {
        **{key: value for key, value in final.items() if key != "step"},
        "squared_distance": final["optimality_gap"] / scale,
        METRIC: float(np.mean(tail)),
        "epsilon": privacy[0].epsilon,
        "threat": privacy[0].threat,
        "exact_epsilon_of_calibration": built.calibration.achieved_epsilon
        if built.calibration
        else 0.0,
        "trace_WRW": built.noise_seeds.variance_after_mixing(built.weights),
    }
