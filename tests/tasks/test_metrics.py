"""The tasks' metrics: the range each can take (what intervals over seeds are clipped to) and
which way is better."""

from __future__ import annotations

import math

from dpdl.tasks import build_task
from dpdl.tasks.metrics import METRIC_RANGES, MetricRange, clip_to_range, metric_range


def test_every_metric_of_the_built_in_tasks_has_a_range_it_stays_in() -> None:
    """The table covers what the tasks report (but the one metric that can be negative), and
    the values at the start and after a step lie inside."""
    unbounded = {"paper_optimality_gap"}
    for name in ("quadratic", "least-squares", "logreg-a9a"):
        task = build_task(name, 4)
        start = task.initial_params().expand(4, -1).clone()
        for params in (start, start + 0.5):
            metrics = task.evaluate(params)
            assert task.primary_metric in metrics
            for metric, value in metrics.items():
                known = metric_range(metric)
                assert (known is None) == (metric in unbounded), metric
                if known is not None:
                    assert known.low <= value <= known.high, (name, metric, value)
    assert metric_range("test_accuracy").higher_is_better
    assert not metric_range("test_loss_average_model").higher_is_better
    assert set(METRIC_RANGES) >= {"test_loss", "test_accuracy", "optimality_gap"}


def test_clipping_keeps_a_value_inside_and_leaves_an_unknown_metric(monkeypatch) -> None:
    assert clip_to_range("test_accuracy", 1.2) == 1.0
    assert clip_to_range("test_accuracy", -0.1) == 0.0
    assert clip_to_range("test_loss_average_model_tail", -0.2) == 0.0
    assert clip_to_range("test_loss", 7.5) == 7.5
    assert clip_to_range("paper_optimality_gap", -0.2) == -0.2
    assert math.isnan(clip_to_range("test_accuracy", math.nan))
    monkeypatch.setitem(METRIC_RANGES, "f1", MetricRange(0.0, 1.0, higher_is_better=True))
    assert clip_to_range("f1", 1.5) == 1.0  # a plugin's metric, added to the table
