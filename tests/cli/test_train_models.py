"""`dpdl train --save-models` writes every seed's models as state dicts with a manifest in
`models/seed<s>/` (:mod:`dpdl.experiments.saved_models`), and a catalogue task's model loads back
into its torch module and scores what the run reported."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional

import dpdl
from dpdl.cli import main
from dpdl.errors import ConfigError
from dpdl.tasks import TaskOptions, build_task


def loss(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return functional.cross_entropy(outputs, targets, reduction="none")


def _train(folder: Path, task: str, *options: str) -> dict:
    arguments = ["train", "--task", task, "--graph", "ring", "--n", "3", "--mechanism", "ldp"]
    arguments += ["--eps", "10", "--steps", "3", "--batch-size", "8", "--partition", "iid"]
    assert main([*arguments, *options, "--save-models", "--no-progress", "--out", str(folder)]) == 0
    return json.loads((folder / "final.json").read_text())


def _scores_as_reported(network: nn.Module, built, final: dict) -> float:  # noqa: ANN001 (a task)
    """`network`'s accuracy on the task's test set, checked to be the average model's accuracy the
    run reported, exactly, and its loss to float32 rounding."""
    with torch.no_grad():
        outputs = network(built.test_inputs)
    accuracy = float((outputs.argmax(dim=1) == built.test_targets).double().mean())
    assert accuracy == final["test_accuracy_average_model"]
    np.testing.assert_allclose(
        float(loss(outputs, built.test_targets).mean()), final["test_loss_average_model"], rtol=1e-5
    )
    return accuracy


@pytest.mark.parametrize(
    ("task", "options"),
    [("mnist-mlp", ()), ("mnist-cnn", ("--examples-per-agent", "40", "--test-examples", "300"))],
)
def test_a_trained_model_loads_into_its_task_and_scores_what_the_run_reported(
    tmp_path: Path, task: str, options: tuple[str, ...]
) -> None:
    """The average model of `dpdl train --save-models`, loaded into the catalogue task's module,
    gives on the task's test set the accuracy the run reported for it, and its loss; an agent's
    model, the loss the engine scores it."""
    final = _train(tmp_path, task, *options)
    saved = dpdl.load_models(tmp_path / "models" / "seed0")
    assert saved.task == task and saved.n_agents == 3 and saved.seed == 0
    assert (
        saved.final_metrics["test_accuracy_average_model"] == final["test_accuracy_average_model"]
    )
    network = saved.module()
    assert isinstance(network, nn.Module) and next(network.parameters()).dtype == torch.float32
    built = build_task(task, 3, 0, TaskOptions(**saved.manifest["task"]["options"]))
    accuracy = _scores_as_reported(network, built, final)
    # every agent's model too: the engine's own scores of each
    first = saved.module(agent=1)
    scores = built.evaluate(torch.as_tensor(saved.models))
    with torch.no_grad():
        agent_loss = float(loss(first(built.test_inputs), built.test_targets).mean())
    np.testing.assert_allclose(agent_loss, built.agent_metrics["test_loss"][1], rtol=1e-5)
    assert scores["test_accuracy_average_model"] == accuracy


def test_a_task_without_a_module_saves_its_named_vector_per_seed(tmp_path: Path) -> None:
    _train(tmp_path, "logreg-a9a", "--seed", "0", "1")
    assert sorted(p.name for p in (tmp_path / "models").iterdir()) == ["seed0", "seed1"]
    assert not list(tmp_path.glob("models-seed*.npy"))
    saved = dpdl.load_models(tmp_path / "models" / "seed1")
    assert saved.seed == 1 and saved.manifest["parameters"]["kind"] == "task-vector"
    assert list(saved.average()) == ["weight"] and saved.average()["weight"].shape == (123,)
    np.testing.assert_allclose(saved.models.mean(axis=0), saved.average_model, rtol=1e-12)
    assert saved.manifest["task"]["catalogue"] and saved.privacy[0]["epsilon"] <= 10.0
    with pytest.raises(ConfigError, match="has no torch module: its parameters are the tensors"):
        saved.module()


def test_a_plugin_tasks_model_loads_into_the_network_its_task_builds(tmp_path: Path) -> None:
    """A registered task has no network built without data: `module()` builds the task, data
    included, to take its network, and the average model scores there what the run reported."""
    from dpdl.choices import TASK_REGISTRY
    from dpdl.tasks.catalog import image_task

    def task(name: str, n_agents: int, seed: int, options: TaskOptions):
        network = lambda: nn.Sequential(nn.Flatten(), nn.Linear(28 * 28, 10))  # noqa: E731
        return image_task("mnist-flat", n_agents, seed, options, network)

    TASK_REGISTRY.register("test-mnist-flat", help="a test's task")(task)
    try:
        final = _train(tmp_path, "test-mnist-flat", "--lr", "0.1", "--test-examples", "200")
        saved = dpdl.load_models(tmp_path / "models" / "seed0")
        assert not saved.manifest["task"]["catalogue"]
        network = saved.module()
        built = task("test-mnist-flat", 3, 0, TaskOptions(**saved.manifest["task"]["options"]))
    finally:
        TASK_REGISTRY.unregister("test-mnist-flat")
    _scores_as_reported(network, built, final)
