"""What the tasks' metrics are: the range each can take and whether higher or lower is better.

A metric's range follows from its definition, not from the runs: an accuracy is a fraction of
test examples, in `[0, 1]`; a cross-entropy or squared-error loss, an objective made of such
losses and squared norms, an optimality gap `f(x) - f(x*)` and a squared distance are `>= 0`. A
confidence interval over seeds computed from few runs can reach outside that range (two seeds'
Student t interval is `mean +- 12.7 s / sqrt(2)`);
[`clip_to_range`][dpdl.tasks.metrics.clip_to_range] brings its ends back inside, so no reported
interval claims an accuracy above 1 or a negative loss.

The built-in tasks' metrics ([`Task.evaluate`][dpdl.tasks.base.Task.evaluate]) are in
[`METRIC_RANGES`][dpdl.tasks.metrics.METRIC_RANGES], each also under the suffixes that keep its
meaning (`_average_model`: the agents' mean model; `_tail`: averaged over the last iterates).
A metric not in the table is left unclipped, and a task registered by a plugin adds its own:
`METRIC_RANGES["my_f1"] = MetricRange(0.0, 1.0, higher_is_better=True)`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from dpdl.choices import TASK_METRICS, TaskMetrics

__all__ = [
    "METRIC_RANGES",
    "SUFFIXES",
    "TASK_METRICS",
    "MetricRange",
    "TaskMetrics",
    "clip_to_range",
    "known_metrics",
    "metric_range",
]


@dataclass(frozen=True)
class MetricRange:
    """The values a metric can take, `[low, high]`, and whether a higher value is better."""

    low: float = -math.inf
    high: float = math.inf
    higher_is_better: bool = False


SUFFIXES = ("_average_model", "_tail")
"""The suffixes under which a metric keeps its range (the agents' mean model, a tail average)."""

METRIC_RANGES: dict[str, MetricRange] = {
    "test_accuracy": MetricRange(0.0, 1.0, higher_is_better=True),
    "test_loss": MetricRange(0.0),
    "train_objective": MetricRange(0.0),
    "train_loss": MetricRange(0.0),
    "optimality_gap": MetricRange(0.0),
    "squared_distance": MetricRange(0.0),
    "consensus_distance": MetricRange(0.0),
}
"""The built-in tasks' metrics by name. Left out on purpose: the quadratics'
`paper_optimality_gap` (each agent's own objective at its own model against the optimum of their
sum: it can be negative) and any metric a task does not define here."""


def metric_range(name: str) -> MetricRange | None:
    """The range of metric `name` ([`METRIC_RANGES`][dpdl.tasks.metrics.METRIC_RANGES], through
    its [`SUFFIXES`][dpdl.tasks.metrics.SUFFIXES]), or None for a metric not in the table."""
    while name not in METRIC_RANGES:
        base = next((name.removesuffix(end) for end in SUFFIXES if name.endswith(end)), name)
        if base == name:
            return None
        name = base
    return METRIC_RANGES[name]


def clip_to_range(name: str, value: float) -> float:
    """`value` brought inside the range of metric `name` (unchanged for an unknown metric, and a
    NaN stays NaN)."""
    known = metric_range(name)
    if known is None or math.isnan(value):
        return value
    return min(max(value, known.low), known.high)


def known_metrics(task: str, average_last: int = 0) -> tuple[tuple[str, ...], bool] | None:
    """The metrics a run of `task` reports (with `<metric>_tail` beside each when it averages its
    last `average_last` iterates) and whether it keeps each agent's own; None for a task not in
    [`TASK_METRICS`][dpdl.choices.TASK_METRICS]."""
    found = TASK_METRICS.get(task)
    if found is None:
        return None
    tails = tuple(f"{name}_tail" for name in found.names) if average_last else ()
    return found.names + tails, found.per_agent
