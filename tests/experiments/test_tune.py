"""The step-size search for your own model (:mod:`dpdl.experiments.tune`): it chooses the best
validation metric of the training data's held-out split, never reads the test set before the
refit, states the privacy of all its runs composed, runs the noise-free references it promises,
and refuses bad input before any run (its example runs in test_fit.py, against its page)."""

from __future__ import annotations

import importlib
import json
import math
from dataclasses import replace

import networkx as nx
import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional

import dpdl
from dpdl.accounting import AgentLevel, ExampleLevel
from dpdl.accounting.accountant import compose_runs
from dpdl.errors import ConfigError
from dpdl.experiments.fit import split_examples

tuning = importlib.import_module("dpdl.experiments.tune")  # the module, not the function it exports

N, STEPS, LRS = 6, 15, [1e-4, 0.5, 0.05]
OPTIONS = {"mechanism": "ldp", "eps": 4.0, "steps": STEPS, "batch_size": 8, "progress": False}


def loss(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return functional.cross_entropy(outputs, targets, reduction="none")


def model() -> nn.Module:
    torch.manual_seed(3)
    return nn.Sequential(nn.Linear(8, 3))


@pytest.fixture(scope="module")
def data():
    """Gaussian blobs, 3 classes, 8 features (seeded): 180 training examples, 60 test ones."""
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(3, 8)) * 2
    labels = rng.integers(0, 3, 240)
    inputs = (centres[labels] + rng.normal(size=(240, 8))).astype(np.float32)
    return (inputs[:180], labels[:180]), (inputs[180:], labels[180:])


class Guarded(torch.utils.data.Dataset):
    """A test set that records, at every read, how many `fit` runs had started."""

    def __init__(self, arrays, started: list[int]) -> None:
        self.inputs, self.labels = arrays
        self.started = started
        self.reads: list[int] = []

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int):
        self.reads.append(self.started[0])
        return self.inputs[i], self.labels[i]


@pytest.fixture
def counted(monkeypatch):
    """The runs `tune` starts, counted (`started[0]`)."""
    started = [0]
    real = tuning.fit

    def fit(*args, **kwargs):
        started[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(tuning, "fit", fit)
    return started


def test_the_choice_is_the_best_validation_metric_and_the_refit_is_fit_s_own_run(data) -> None:
    train, test = data
    result = dpdl.tune(model(), loss, train, nx.cycle_graph(N), test=test, lr=LRS, **OPTIONS)
    assert [c.lr for c in result.candidates] == LRS
    accuracy = [c.metrics["validation_accuracy"] for c in result.candidates]
    assert result.metric == "validation_accuracy" and result.goal == "max"
    assert result.lr == LRS[int(np.argmax(accuracy))]  # argmax: the first of the best
    assert result.lr != LRS[0]  # 1e-4 barely moves in 15 steps
    assert result.validation_size == N * math.floor(0.2 * 30)  # 30 examples an agent, iid
    # every search run on a seed of its own, none the refit's
    assert len({c.seed for c in result.candidates} | {0}) == len(LRS) + 1
    alone = dpdl.fit(model(), loss, train, test, nx.cycle_graph(N), lr=result.lr, **OPTIONS)
    np.testing.assert_array_equal(result.final.models, alone.models)
    by_loss = dpdl.tune(
        model(), loss, train, nx.cycle_graph(N), test=test, lr=LRS, metric="loss", **OPTIONS
    )
    losses = [c.metrics["validation_loss"] for c in by_loss.candidates]
    assert by_loss.goal == "min" and by_loss.lr == LRS[int(np.argmin(losses))]


def test_a_validation_set_given_scores_every_search_run_on_all_the_training_data(data) -> None:
    """With `validation`, each candidate is `fit`'s run on the full training data (split over the
    agents from `seed`, the same for every candidate) on its own seed, scored on the validation
    set: its validation metrics are that run's test metrics."""
    train, test = data
    (inputs, labels), held = train, (test[0][:30], test[1][:30])
    result = dpdl.tune(
        model(), loss, train, nx.cycle_graph(N), test=test, lr=LRS[1:], validation=held,
        refit=False, **OPTIONS,
    )  # fmt: skip
    assert result.validation_size == 30 and result.runs == 2
    parts = split_examples(labels, N, "iid", seed=0)
    for candidate in result.candidates:
        alone = dpdl.fit(
            model(), loss, (inputs, labels), held, nx.cycle_graph(N), lr=candidate.lr,
            partition=parts, seed=candidate.seed, **OPTIONS,
        )  # fmt: skip
        assert candidate.metrics["validation_accuracy"] == alone.final_metrics["test_accuracy"]
        assert candidate.metrics["validation_loss"] == alone.final_metrics["test_loss"]


def test_the_test_set_is_read_by_the_refit_alone(data, counted) -> None:
    train, test = data
    guarded = Guarded(test, counted)
    dpdl.tune(model(), loss, train, nx.cycle_graph(N), test=guarded, lr=LRS[1:], **OPTIONS)
    assert guarded.reads and set(guarded.reads) == {len(LRS[1:]) + 1}  # the refit, the last run
    unread = Guarded(test, counted)
    result = dpdl.tune(
        model(), loss, train, nx.cycle_graph(N), test=unread, lr=LRS[1:], refit=False, **OPTIONS
    )
    assert unread.reads == []
    chosen = next(c for c in result.candidates if c.lr == result.lr)
    assert result.final.final_metrics["test_accuracy"] == chosen.metrics["validation_accuracy"]


@pytest.mark.parametrize(("level", "lrs"), [("agent", LRS[1:]), ("example", LRS[1:2])])
def test_the_privacy_stated_is_every_run_composed(data, level, lrs) -> None:
    train, test = data
    result = dpdl.tune(
        model(), loss, train, nx.cycle_graph(N), test=test, lr=lrs, clip_level=level, **OPTIONS
    )
    runs_made = len(lrs) + 1
    assert result.runs == runs_made and len(result.privacy) == len(result.privacy_per_run) == 2
    for k, together in enumerate(result.privacy):
        runs = [c.privacy[k] for c in result.candidates] + [result.final.privacy[k]]
        one = result.privacy_per_run[k]
        assert together.threat == one.threat and together.steps == runs_made * STEPS
        assert together.epsilon > 1.3 * one.epsilon
        if level == "agent":
            assert together == compose_runs(runs, AgentLevel(1.0))
            continue
        # the search's agents hold 24 examples, the refit's 30: composed at the larger rate
        search = ExampleLevel(1.0, 8, 8 / 24)
        assert str(search) in runs[0].neighbouring and str(search) not in runs[-1].neighbouring
        restated = [replace(r, neighbouring=str(search)) for r in runs]  # each run, or less
        assert together == compose_runs(restated, search)


def test_the_reference_runs_are_the_configuration_without_noise(data) -> None:
    train, test = data
    clip = 0.05  # small enough to bind
    result = dpdl.tune(
        model(), loss, train, nx.cycle_graph(N), test=test, lr=LRS[1:], reference=True,
        **{**OPTIONS, "clip": clip},
    )  # fmt: skip
    reference = result.reference
    assert reference is not None and reference.private is result.final
    noise_free = {**OPTIONS, "mechanism": "none", "eps": None, "lr": result.lr}
    for run, threshold in ((reference.clipped, clip), (reference.unclipped, 1e6)):
        assert run.mechanism.name == "none"
        assert all(math.isinf(report.epsilon) for report in run.privacy)
        alone = dpdl.fit(
            model(), loss, train, test, nx.cycle_graph(N), **{**noise_free, "clip": threshold}
        )
        np.testing.assert_array_equal(run.models, alone.models)
    assert not np.array_equal(reference.clipped.models, reference.unclipped.models)
    numbers = reference.compare("test_loss")
    assert list(numbers) == ["noise-free, unclipped", "noise-free, clipped", "private"]
    assert any("not private (eps = inf)" in line for line in result.lines())
    plain = json.loads(json.dumps(result.as_dict()))
    assert plain["reference"] == reference.compare("test_accuracy")
    assert plain["privacy_released_together"][0]["steps"] == 3 * STEPS
    assert plain["privacy_per_run"][0]["steps"] == STEPS
    diagnosis = dpdl.diagnose(model(), loss, train, test, nx.cycle_graph(N), lr=0.5, **OPTIONS)
    assert math.isinf(diagnosis.unclipped.privacy[0].epsilon)
    assert diagnosis.private.privacy[0].epsilon == pytest.approx(4.0, rel=1e-3)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"lr": []}, "list of step sizes to search is empty"),
        ({"lr": 0.1}, "give a list of step sizes"),
        ({"lr": [0.1, 0.2, 0.1]}, "step sizes given twice: 0.1"),
        ({"lr": [0.1, -1.0]}, "finite and > 0, got -1"),
        ({"lr": [float("nan")]}, "finite and > 0, got nan"),
        ({"lr": [True]}, "must be a number"),
        ({"validation_fraction": 0.0}, r"must be in \(0, 1\), got 0"),
        ({"validation_fraction": 1.0}, r"must be in \(0, 1\), got 1"),
        ({"validation_fraction": 0.01}, "holds out no example"),
        ({"validation": ([[0.0] * 8], [0]), "validation_fraction": 0.1}, "not both"),
        ({"validation": ([[0.0] * 8], [0, 1])}, "validation: 1 inputs and 2 targets"),
        ({"metric": "f1"}, "unknown 'f1'"),
        ({"metric": "accuracy", "classification": False}, "needs classification=True"),
        ({"test": None}, "the refit of the chosen step size needs a test set"),
        ({"test": 3}, "test: expected"),
        ({"partition": "shards"}, "unknown partition 'shards'"),
        ({"seed": -1}, "seed: expected an integer >= 0"),
        ({"refit": "yes"}, "refit: expected True or False"),
        ({"alpha_": 1.0}, "unknown option\\(s\\) alpha_"),
        ({"model": "mlp"}, "expected a torch nn.Module"),
        ({"clip_level": "example", "batch_size": 28}, "the search .* smallest agent holds 24"),
    ],
)
def test_bad_input_is_one_clear_error_before_any_run(data, counted, change, message) -> None:
    train, test = data
    arguments = {"test": test, "lr": LRS, **OPTIONS, **change}
    given = arguments.pop("model", model())
    with pytest.raises(ConfigError, match=message):
        dpdl.tune(given, loss, train, nx.cycle_graph(N), **arguments)
    assert counted[0] == 0


def test_diagnose_refuses_an_option_fit_does_not_know(data) -> None:
    train, test = data
    with pytest.raises(ConfigError, match="diagnose: unknown option\\(s\\) learning_rate"):
        dpdl.diagnose(model(), loss, train, test, nx.cycle_graph(N), learning_rate=0.1)
