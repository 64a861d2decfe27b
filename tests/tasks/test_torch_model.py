"""The torch (vmap) path computes the same gradients as the hand-written numpy task."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional

from dpdl.simulation import PoissonSampler, UniformSampler
from dpdl.tasks import LogisticRegression
from dpdl.tasks.linear_stack import LinearStack
from dpdl.tasks.torch_model import TorchModelTask


def _pair(seed: int = 0) -> tuple[LogisticRegression, TorchModelTask]:
    rng = np.random.default_rng(seed)
    n, m, d = 3, 40, 6
    features = rng.standard_normal((n * m, d))
    labels = np.where(rng.random(n * m) < 0.4, -1.0, 1.0)
    parts = np.array_split(rng.permutation(n * m), n)
    numpy_task = LogisticRegression(
        "np", features, labels, parts, features[:30], labels[:30], l2=0.0
    )
    model = nn.Sequential(nn.Linear(d, 1, bias=False), nn.Flatten(0))

    def logistic(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return functional.softplus(-targets * outputs)

    torch_task = TorchModelTask(
        "torch",
        model,
        logistic,
        features,
        labels,
        parts,
        features[:30],
        labels[:30],
        classification=False,
    )
    return numpy_task, torch_task


def _gradients(task, params: np.ndarray, batch, clip: float | None) -> np.ndarray:
    """The task's gradients at host ``params`` on a host ``batch``, as a host array."""
    return task.gradients(torch.from_numpy(params), batch.to(task.device), clip).numpy()


def test_batched_gradients_match_numpy_logistic_regression() -> None:
    numpy_task, torch_task = _pair()
    params = np.random.default_rng(1).standard_normal((3, 6))
    batch = UniformSampler(numpy_task.agent_sizes, 16).sample(np.random.default_rng(2))
    np.testing.assert_allclose(
        _gradients(torch_task, params, batch, None),
        _gradients(numpy_task, params, batch, None),
        rtol=1e-5,
        atol=1e-6,
    )


def test_per_example_clipped_gradients_match_numpy_logistic_regression() -> None:
    numpy_task, torch_task = _pair(seed=4)
    params = 3 * np.random.default_rng(5).standard_normal((3, 6))
    batch = PoissonSampler(numpy_task.agent_sizes, 8).sample(np.random.default_rng(6))
    expected = _gradients(numpy_task, params, batch, 0.3)
    np.testing.assert_allclose(
        _gradients(torch_task, params, batch, 0.3), expected, rtol=1e-5, atol=1e-6
    )
    unclipped = _gradients(numpy_task, params, batch, None)
    assert not np.allclose(expected, unclipped)  # the clip is active on this instance


def test_evaluation_matches_numpy_test_loss() -> None:
    numpy_task, torch_task = _pair(seed=7)
    params = torch.from_numpy(np.random.default_rng(8).standard_normal((3, 6)))
    assert np.isclose(
        torch_task.evaluate(params)["test_loss"],
        numpy_task.evaluate(params)["test_loss"],
        rtol=1e-5,
    )
    assert torch_task.initial_params().shape == (6,)


def _image_task(seed: int, model: nn.Module) -> TorchModelTask:
    rng = np.random.default_rng(seed)
    n, m = 4, 30
    images = rng.standard_normal((n * m, 1, 3, 4)).astype(np.float32)
    labels = rng.integers(0, 3, n * m)
    parts = np.array_split(rng.permutation(n * m), n)
    return TorchModelTask(
        "images", model, _cross_entropy, images, labels, parts, images[:20], labels[:20]
    )


def _cross_entropy(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return functional.cross_entropy(outputs, targets, reduction="none")


def test_ghost_norm_gradients_equal_per_example_vmap_gradients() -> None:
    """The linear-stack path (ghost norms) against torch.func's per-example gradients, on a deeper
    network with a flatten and two activations, where the clip binds for some examples only."""
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Flatten(),
        nn.Linear(12, 8),
        nn.Tanh(),
        nn.Linear(8, 5, bias=False),
        nn.ReLU(),
        nn.Linear(5, 3),
    )
    task = _image_task(1, model)
    assert task._linear_stack is not None
    params = task.initial_params().numpy() + 0.5 * np.random.default_rng(2).standard_normal(
        (4, task.dim)
    )
    batch = PoissonSampler(task.agent_sizes, 6).sample(np.random.default_rng(3))
    ghost = _gradients(task, params, batch, 0.5)
    task._linear_stack = None
    np.testing.assert_allclose(ghost, _gradients(task, params, batch, 0.5), rtol=1e-5, atol=1e-6)
    task._linear_stack = LinearStack(model)
    stack = LinearStack(model)  # without a clip, the stack gives the weighted batch gradient
    flat = torch.as_tensor(params, dtype=torch.float32)
    inputs, targets = (
        task.inputs[torch.as_tensor(batch.indices)],
        task.targets[torch.as_tensor(batch.indices)],
    )
    weights = torch.as_tensor(batch.weights, dtype=torch.float32)
    batch_gradient = (
        stack.clipped_gradients(flat, inputs, targets, weights, _cross_entropy, None)
        .double()
        .numpy()
    )
    np.testing.assert_allclose(
        batch_gradient, _gradients(task, params, batch, None), rtol=1e-5, atol=1e-6
    )
    unclipped = _gradients(task, params, batch, None)
    clipped = _gradients(task, params, batch, 0.5)
    assert not np.allclose(clipped, unclipped)


def test_models_with_other_layers_keep_the_vmap_path() -> None:
    model = nn.Sequential(nn.Conv2d(1, 2, 2), nn.Flatten(), nn.Linear(12, 3))
    assert not LinearStack.supports(model)
    task = _image_task(5, model)
    assert task._linear_stack is None
    params = np.tile(task.initial_params().numpy(), (4, 1))
    batch = PoissonSampler(task.agent_sizes, 6).sample(np.random.default_rng(6))
    norms = np.linalg.norm(_gradients(task, params, batch, 0.1), axis=1)
    assert np.all(
        norms <= 0.1 * batch.weights.sum(axis=1) + 1e-6
    )  # a weighted sum of clipped gradients


def _four_agents(
    eval_chunk: int | None, seed: int, spread: int
) -> tuple[TorchModelTask, torch.Tensor]:
    """A small convolutional image task evaluated in passes of ``eval_chunk`` (agent, example)
    pairs, and four agents' parameters spread around its initial model."""
    torch.manual_seed(seed)
    task = _image_task(7, nn.Sequential(nn.Conv2d(1, 2, 2), nn.Flatten(), nn.Linear(12, 3)))
    task.eval_chunk = eval_chunk
    return task, task.initial_params() + torch.from_numpy(
        np.random.default_rng(spread).standard_normal((4, task.dim))
    )


@pytest.mark.parametrize("eval_chunk", [None, 5 * 7])  # one pass; passes of 7 examples
def test_the_average_model_is_evaluated_beside_the_agents(eval_chunk) -> None:
    """The ``*_average_model`` metrics are those of the agents' mean parameters evaluated alone;
    for agents that all hold the same model they equal the metrics averaged over agents."""
    task, params = _four_agents(eval_chunk, 0, 8)
    metrics = task.evaluate(params)
    alone = task.evaluate(params.mean(dim=0, keepdim=True))
    assert metrics["test_accuracy_average_model"] == alone["test_accuracy"]
    assert metrics["test_loss_average_model"] == pytest.approx(alone["test_loss"], rel=1e-6)
    assert metrics["test_loss_average_model"] != pytest.approx(metrics["test_loss"], rel=1e-3)
    same = task.evaluate(params[:1].repeat(4, 1))
    assert same["test_accuracy_average_model"] == same["test_accuracy"]
    assert same["test_loss_average_model"] == pytest.approx(same["test_loss"], rel=1e-6)


@pytest.mark.parametrize("eval_chunk", [None, 5 * 7])
def test_each_agents_own_metrics_are_kept_from_the_same_pass(eval_chunk) -> None:
    """``agent_metrics`` holds every agent's test loss and accuracy of the last evaluation: each
    that of the agent's model evaluated alone, and their mean the averaged metric."""
    task, params = _four_agents(eval_chunk, 1, 11)
    metrics = task.evaluate(params)
    kept = dict(task.agent_metrics)
    assert set(kept) == {"test_loss", "test_accuracy"} and all(len(v) == 4 for v in kept.values())
    for agent in range(4):
        alone = task.evaluate(params[agent : agent + 1])
        assert kept["test_accuracy"][agent] == alone["test_accuracy"]
        assert kept["test_loss"][agent] == pytest.approx(alone["test_loss"], rel=1e-6)
    assert np.mean(kept["test_loss"]) == pytest.approx(metrics["test_loss"], rel=1e-6)  # float32
    assert np.mean(kept["test_accuracy"]) == pytest.approx(metrics["test_accuracy"], rel=1e-12)
    assert len(set(kept["test_loss"])) == 4  # the agents' models differ


def test_a_regression_model_reports_the_average_model_loss_alone() -> None:
    _, task = _pair(seed=9)
    params = torch.from_numpy(np.random.default_rng(10).standard_normal((3, 6)))
    metrics = task.evaluate(params)
    assert set(metrics) == {"test_loss", "test_loss_average_model", "consensus_distance"}
    assert metrics["test_loss_average_model"] == pytest.approx(
        task.evaluate(params.mean(dim=0, keepdim=True))["test_loss"], rel=1e-6
    )
