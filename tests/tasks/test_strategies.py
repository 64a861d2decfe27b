"""The two gradient strategies of TorchModelTask (vmap over agents, a loop of replicas over
threads) give the same gradients and metrics; the evaluation's sample of test examples."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional

from dpdl.errors import ConfigError
from dpdl.scale import AGENT_EVAL_PAIRS
from dpdl.tasks.base import Batch
from dpdl.tasks.torch_model import LOOP_MIN_FLOPS, TorchModelTask, agent_test_sample


def _cross_entropy(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return functional.cross_entropy(outputs, targets, reduction="none")


def _conv_task(strategy: str, n: int = 5, agent_test_examples: int | None = None):
    rng = np.random.default_rng(3)
    m = 24
    images = rng.standard_normal((n * m, 1, 8, 8)).astype(np.float32)
    labels = rng.integers(0, 3, n * m)
    parts = np.array_split(rng.permutation(n * m), n)
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(1, 4, 3, padding=1), nn.MaxPool2d(2), nn.ReLU(), nn.GroupNorm(2, 4),
        nn.Flatten(), nn.Linear(4 * 4 * 4, 3),
    )  # fmt: skip
    return TorchModelTask(
        "conv", model, _cross_entropy, images, labels, parts, images[:40], labels[:40],
        strategy=strategy, agent_test_examples=agent_test_examples,
    )  # fmt: skip


def _batch(task: TorchModelTask, size: int, seed: int) -> Batch:
    """``size`` examples an agent, agent 0's last ones padding of weight zero (Poisson-style)."""
    rng = np.random.default_rng(seed)
    offsets = task.offsets
    rows = [offsets[i] + rng.choice(offsets[i + 1] - offsets[i], size, replace=False) for i in
            range(task.n_agents)]  # fmt: skip
    weights = np.full((task.n_agents, size), 1.0 / size)
    weights[0, size // 2 :] = 0.0
    return Batch(np.stack(rows), weights).to(torch.device("cpu"))


@pytest.fixture(params=[1, 2], ids=["one thread", "two threads"])
def threads(request):
    before = torch.get_num_threads()
    torch.set_num_threads(request.param)
    yield request.param
    torch.set_num_threads(before)


@pytest.mark.parametrize("example_clip", [None, 0.05])
def test_the_loop_of_replicas_computes_the_gradients_of_vmap(threads, example_clip) -> None:
    """Every agent's batch gradient, and its sum of per-example gradients clipped at a bound that
    binds for some examples, agree between the strategies to float32 rounding, with one worker
    and with a pool of two (a worker's replica loads each agent's own parameters)."""
    vmapped, looped = _conv_task("vmap"), _conv_task("loop")
    assert (vmapped.strategy_for(8, None), looped.strategy_for(8, None)) == ("vmap", "loop")
    params = looped.initial_params() + 0.1 * torch.from_numpy(
        np.random.default_rng(4).standard_normal((5, looped.dim))
    )
    batch = _batch(looped, 8, 5)
    expected = vmapped.gradients(params, batch, example_clip)
    found = looped.gradients(params, batch, example_clip)
    assert found.dtype == torch.float64 and found.shape == (5, looped.dim)
    scale = expected.abs().max()
    assert float((found - expected).abs().max() / scale) < 1e-5
    assert len({float(row.norm()) for row in found}) == 5  # each agent its own gradient
    if example_clip is not None:  # the clip binds: no agent's sum exceeds its weighted bound
        assert bool((found.norm(dim=1) <= example_clip * 1.0001).all())


def test_the_loop_of_replicas_scores_the_models_of_vmap(threads) -> None:
    vmapped, looped = _conv_task("vmap"), _conv_task("loop")
    params = looped.initial_params() + 0.1 * torch.from_numpy(
        np.random.default_rng(6).standard_normal((5, looped.dim))
    )
    expected, found = vmapped.evaluate(params), looped.evaluate(params)
    assert set(found) == set(expected)
    for name, value in expected.items():
        assert found[name] == pytest.approx(value, rel=1e-6), name
    assert looped.agent_metrics["test_accuracy"] == vmapped.agent_metrics["test_accuracy"]


def test_auto_loops_over_convolutional_models_on_a_cpu_for_large_batches() -> None:
    """``auto`` on a CPU: a convolutional model loops for per-example gradients and for batches
    whose forward costs at least LOOP_MIN_FLOPS an agent, and vmaps smaller batches; a model
    without convolutions always vmaps; a strategy named is kept."""
    task = _conv_task("auto")
    flops = task._example_flops()  # 8x8 inputs, 4 channels: 2 * 64 * 4 * 9 + ... per example
    assert 0 < flops < LOOP_MIN_FLOPS
    large = int(LOOP_MIN_FLOPS // flops) + 1
    assert task.strategy_for(large, None) == "loop" and task.strategy_for(large - 1, None) == "vmap"
    assert task.strategy_for(1, 0.1) == "loop"
    assert _conv_task("vmap").strategy_for(large, 0.1) == "vmap"
    assert _conv_task("loop").strategy_for(1, None) == "loop"
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((20, 3)).astype(np.float32), rng.integers(0, 2, 20)
    dense = TorchModelTask(
        "dense", nn.Linear(3, 2), _cross_entropy, x, y, np.array_split(np.arange(20), 2), x, y
    )
    assert dense.strategy_for(10**9, None) == dense.strategy_for(10**9, 0.1) == "vmap"
    with pytest.raises(ConfigError, match="unknown gradient strategy 'fast'"):
        _conv_task("fast")


def test_agents_are_scored_on_all_test_examples_while_the_evaluation_is_small() -> None:
    assert np.array_equal(agent_test_sample(10_000, 5, None, 0), np.arange(10_000))
    assert np.array_equal(agent_test_sample(40, 5, 100, 0), np.arange(40))


def test_many_agents_are_scored_on_a_fixed_sample_the_seed_draws() -> None:
    rows = agent_test_sample(10_000, 148, None, 0)
    assert len(rows) == AGENT_EVAL_PAIRS // 148 and len(set(rows.tolist())) == len(rows)
    assert np.array_equal(rows, np.sort(rows)) and rows.max() < 10_000
    assert np.array_equal(rows, agent_test_sample(10_000, 148, None, 0))
    assert not np.array_equal(rows, agent_test_sample(10_000, 148, None, 1))
    assert len(agent_test_sample(10_000, 4039, None, 0)) == 1000  # never fewer than 1000
    with pytest.raises(ConfigError, match="agent_test_examples must be a whole number >= 1"):
        agent_test_sample(100, 2, 0, 0)


def test_a_sample_scores_the_agents_on_it_and_the_average_model_on_all() -> None:
    task = _conv_task("loop", agent_test_examples=10)
    rows = task.agent_test_rows
    assert rows is not None and len(rows) == 10
    params = task.initial_params() + 0.1 * torch.from_numpy(
        np.random.default_rng(7).standard_normal((5, task.dim))
    )
    metrics = task.evaluate(params)
    whole = _conv_task("loop")  # the same data and model, every agent on all 40 examples
    for agent in range(5):
        alone = _conv_task("loop")
        alone.test_inputs, alone.test_targets = task.test_inputs[rows], task.test_targets[rows]
        found = alone.evaluate(params[agent : agent + 1])["test_loss"]
        assert task.agent_metrics["test_loss"][agent] == pytest.approx(found, rel=1e-6)
    average = whole.evaluate(params.mean(dim=0, keepdim=True))
    assert metrics["test_loss_average_model"] == pytest.approx(average["test_loss"], rel=1e-6)
    assert task.describe()["agent_test_examples"] == 10
    assert task.describe()["test_examples"] == 40
