"""The curvature a run's horizon objective designs its noise for
([`dpdl.mechanisms.horizon`][dpdl.mechanisms.horizon]).

- Quadratic tasks (Whisper's rotated quadratic, DECOR's least squares) know their Hessians: agent
  i's objective `(x - c_i)^T Q_i (x - c_i)` has Hessian `2 Q_i` everywhere, one per agent
  (shared when they are all equal), and the horizon objective is then exact for gradients below
  the clipping threshold.
- Logistic regression: the Hessian of the global objective at the initial point `x_0`,
  `mean_i (1/m_i) sum_{k in agent i} s(y_k a_k^T x_0) (1 - s(y_k a_k^T x_0)) a_k a_k^T + l2 I`
  (`s` the logistic function: 1/4 at `x_0 = 0`), shared by every agent. It is an estimate: the
  Hessian shrinks away from the initial point, and clipped gradients pull back less than the
  Hessian says, so the run's curvature is smaller than the one designed for.

Other tasks have no curvature the library can compute: the horizon objective then needs one given
through the Python API (`DesignOptions(objective="horizon", horizon=Horizon(...))`).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from scipy.special import expit

from dpdl.errors import ConfigError
from dpdl.mechanisms.horizon import Curvature, Horizon
from dpdl.settings import DesignOptions
from dpdl.tasks import Task
from dpdl.tasks.logistic import LogisticRegression
from dpdl.tasks.quadratic import QuadraticObjectives

__all__ = ["run_design", "task_curvature"]


def task_curvature(task: Task) -> Curvature:
    """The curvature of `task` the horizon objective uses (module docstring)."""
    if isinstance(task, QuadraticObjectives):
        hessians = 2.0 * task.curvatures
        return Curvature(hessians[0] if np.all(hessians == hessians[0]) else hessians)
    if isinstance(task, LogisticRegression):
        start, features = task.initial_params().cpu().numpy(), task.features.cpu().numpy()
        weights = expit(features @ start)
        weights = weights * (1.0 - weights)
        hessian = np.zeros((task.dim, task.dim))
        for first, last in zip(task.offsets[:-1], task.offsets[1:], strict=True):
            rows = features[first:last]
            hessian += (rows * weights[first:last, None]).T @ rows / max(last - first, 1)
        return Curvature(hessian / task.n_agents + task.l2 * np.eye(task.dim))
    raise ConfigError(
        f"the horizon objective needs the curvature of task {task.name!r}, which dpdl cannot "
        "compute: use --objective one-step, or give Horizon(lr, steps, curvature) through the "
        "Python API"
    )


def run_design(
    design: DesignOptions, task: Task, lr: float, steps: int, schedule: str
) -> DesignOptions:
    """`design` with the run's horizon (step size, steps, schedule, the task's curvature) filled
    in where its objective is the horizon and none is given; unchanged otherwise."""
    if design.objective != "horizon" or design.horizon is not None:
        return design
    horizon = Horizon(lr, steps, task_curvature(task), schedule)
    return replace(design, horizon=horizon)
