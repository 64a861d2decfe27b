"""Learning tasks: objectives, real data, partitioners and metrics."""

from dpdl.tasks.base import Batch, Task
from dpdl.tasks.catalog import TASKS, TaskOptions, build_task
from dpdl.tasks.logistic import LogisticRegression
from dpdl.tasks.quadratic import QuadraticObjectives, decor_least_squares, whisper_quadratic

__all__ = [
    "Batch",
    "Task",
    "TASKS",
    "TaskOptions",
    "build_task",
    "LogisticRegression",
    "QuadraticObjectives",
    "decor_least_squares",
    "whisper_quadratic",
]
