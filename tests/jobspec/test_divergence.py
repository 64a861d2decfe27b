"""The finiteness watch of the engines (`dpdl.jobspec.divergence`): the first step and agent whose
values stop being finite, the cause named, and checks no more than `WINDOW` steps apart."""

from __future__ import annotations

import math
import pickle

import pytest
import torch

from dpdl.errors import DivergenceError
from dpdl.jobspec.divergence import WINDOW, FiniteWatch, check_metrics


def _rows(n: int, bad: dict[int, float] | None = None) -> torch.Tensor:
    rows = torch.ones(n, 3, dtype=torch.float64)
    for agent, value in (bad or {}).items():
        rows[agent, 1] = value
    return rows


def test_the_first_step_and_agent_not_finite_are_named() -> None:
    watch = FiniteWatch(lambda t: 0.5)
    watch.note(1, "gradient", _rows(4))
    watch.note(1, "message", _rows(4))
    watch.note(2, "gradient", _rows(4, {2: math.nan, 3: math.nan}))
    watch.note(3, "message", _rows(4, {0: math.inf}))
    with pytest.raises(DivergenceError) as caught:
        watch.check()
    error = caught.value
    assert (error.step, error.agent) == (2, 2), str(error)
    assert str(error).startswith("step 2: agent 2's (and 1 other agent') gradient after clipping")
    assert "(nan)" in str(error) and "loss or its gradient" in error.cause


def test_huge_values_that_stay_finite_are_not_divergence() -> None:
    """The largest magnitude is watched, not a sum: 1e308 + 1e308 does not overflow it."""
    watch = FiniteWatch(lambda t: 0.1)
    watch.note(1, "model", torch.full((2, 4), 1e308, dtype=torch.float64))
    watch.check()


def test_an_overflowing_model_blames_the_step_size() -> None:
    watch = FiniteWatch(lambda t: 1e308)
    watch.note(1, "model", _rows(3, {1: math.inf}))
    with pytest.raises(DivergenceError, match=r"step 1: agent 1's model .*\(inf\).*1e\+308"):
        watch.check()


def test_a_gradient_after_huge_models_blames_the_step_size() -> None:
    watch = FiniteWatch(lambda t: 10.0)
    watch.note(1, "model", _rows(2, {0: 1e40}))
    watch.check()  # finite: the model's size is remembered across checks
    watch.note(2, "gradient", _rows(2, {0: math.nan}))
    with pytest.raises(DivergenceError, match="grew to 1e\\+40"):
        watch.check()


def test_the_values_are_checked_at_least_every_window() -> None:
    watch = FiniteWatch(lambda t: 0.1)
    watch.note(1, "model", _rows(2, {1: math.nan}))
    for t in range(2, WINDOW + 1):
        watch.note(t, "model", _rows(2))
    with pytest.raises(DivergenceError) as caught:
        watch.note(WINDOW + 1, "model", _rows(2))
    assert caught.value.step == 1 and caught.value.agent == 1


def test_one_agent_row_and_metrics() -> None:
    watch = FiniteWatch(lambda t: 0.1, agents=[7])
    watch.note(4, "noise", torch.tensor([1.0, math.inf]))
    with pytest.raises(DivergenceError, match="agent 7's noise") as caught:
        watch.check()
    assert "noise scale" in caught.value.cause
    check_metrics(3, {"step": 3, "loss": 0.5})
    with pytest.raises(DivergenceError, match="step 3: the metric loss is nan"):
        check_metrics(3, {"step": 3, "loss": math.nan})


def test_the_error_survives_a_worker_process() -> None:
    """Pickled back from a pool worker (a sweep point) with its step, agent, cause and seed."""
    error = DivergenceError("step 5: agent 1's model is not finite", 5, 1, "why", 2)
    back = pickle.loads(pickle.dumps(error))
    assert (str(back), back.step, back.agent, back.cause, back.seed) == (
        str(error), 5, 1, "why", 2,
    )  # fmt: skip
    assert back.record()["step"] == 5 and not isinstance(back, ValueError)
