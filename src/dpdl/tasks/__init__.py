"""Learning tasks: objectives, real data, partitioners and metrics.

The names are imported on first use (`dpdl.lazy`): the named tasks ([`catalog`][dpdl.tasks.catalog])
import torch and the data loaders, the objectives and partitioners need numpy alone.
"""

from dpdl.lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "base": ("Batch", "Task"),
        "catalog": ("TASKS", "TaskOptions", "build_task"),
        "logistic": ("LogisticRegression",),
        "metrics": ("METRIC_RANGES", "MetricRange", "clip_to_range", "metric_range"),
        "quadratic": ("QuadraticObjectives", "decor_least_squares", "whisper_quadratic"),
    },
)
